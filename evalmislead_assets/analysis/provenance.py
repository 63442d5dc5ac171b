"""What made each condition's answers, and whether two cells may be compared.

Every test_generations row names the template it was rendered from (``template_sha256``), the model the
server answered as (``model``) and, in its exact request body, the output cap (``max_tokens``). A cell
(condition x thinking) whose answered rows disagree on any of these is *mixed* (e.g. the template was
edited and only some problems were generated again); two cells that disagree were made under different
prompt versions, models or caps. Such rows are never pooled or compared silently: condition_rates leaves a
mixed cell's rates not estimable with the reason, and bootstrap_comparisons gives "not comparable (...)"
instead of an estimate. Between thinking modes (thinking_comparisons) the caps differ by design, so only
the template and the model are compared there. Rows that name nothing (written before these columns, or
not sent: an empty spec, a server error) count as unknown, not as another version.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from evalmislead_assets.store.values import is_missing

FIELDS = ("template_sha256", "model", "max_tokens")
_LABEL = {"template_sha256": "prompt template", "model": "model", "max_tokens": "output cap"}


@dataclass(frozen=True)
class Provenance:
    """The values of each field among a cell's answered rows, with their counts."""
    values: dict[str, Counter] = field(default_factory=dict)

    def single(self, name: str) -> str | None:
        """The field's one value, or None (unknown or mixed)."""
        found = self.values.get(name, Counter())
        return next(iter(found)) if len(found) == 1 else None

    def mixed(self) -> str | None:
        """Why the cell's rows cannot be pooled, or None."""
        for name in FIELDS:
            found = self.values.get(name, Counter())
            if len(found) > 1:
                shown = ", ".join(f"{_short(v)} x{n}" for v, n in found.most_common())
                return f"mixed {_LABEL[name]}s ({shown})"
        return None


def _short(value: str) -> str:
    return value[:12] if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else value


def of_cells(generations: pd.DataFrame) -> dict[tuple[str, str], Provenance]:
    """(condition, thinking) -> Provenance of its answered rows (no error). Missing columns: unknown."""
    out: dict[tuple[str, str], Provenance] = {}
    if generations is None or len(generations) == 0:
        return out
    present = [f for f in FIELDS if f in generations.columns]
    answered = generations
    if "error" in generations.columns:
        answered = generations[generations["error"].map(is_missing).astype(bool)]
    for (condition, thinking), g in answered.groupby(["condition", "thinking"], sort=False):
        values = {f: Counter(str(_norm(v)) for v in g[f] if not is_missing(v)) for f in present}
        out[(str(condition), str(thinking))] = Provenance(values)
    return out


def _norm(v: object) -> object:
    return int(v) if isinstance(v, float) and v.is_integer() else v


def mismatch(a: str, pa: Provenance | None, b: str, pb: Provenance | None,
             fields: tuple[str, ...] = FIELDS) -> str | None:
    """Why cells ``a`` and ``b`` cannot be compared (one is mixed, or they differ in a field), or None."""
    for name, p in ((a, pa), (b, pb)):
        why = p.mixed() if p else None
        if why:
            return f"{name}: {why}"
    if pa is None or pb is None:
        return None
    for f in fields:
        va, vb = pa.single(f), pb.single(f)
        if va is not None and vb is not None and va != vb:
            return f"{_LABEL[f]} differs: {a} {_short(va)}, {b} {_short(vb)}"
    return None


def fix_hint(condition: str, thinking: str) -> str:
    return (f"materialize test_generations[{condition}|{thinking}] again over all its problems with the "
            "current prompts and settings")
