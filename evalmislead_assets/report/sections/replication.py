"""Replication (direction only): this run's headline figures beside the published ones.

The published figures live in ``data/published_results.json`` (each with the sentence it
comes from). For each comparison this run's direction comes from stored rows:
``bootstrap_comparisons`` (estimate = pooled rate a − pooled rate b), ``thinking_comparisons``
(on − off on the truncation-matched subset) or ``condition_rates`` (rate a − rate b). It is
``+`` or ``−``; ``no direction`` for a tie; ``not estimable`` when a side has no tests or no
row is stored. Agreement with a published direction is ``agrees`` / ``disagrees`` only when
this run's stored interval (98.75 %) excludes 0, on the side the interval lies; otherwise
``inconclusive`` (also where no interval is stored, as for differences of ``condition_rates``);
``not estimable`` when this run has no direction; ``not reported`` when the source gives
none. A published figure that is an unpaired average over different models (``"paired":
false`` in the data file) is marked so in the table. Levels are never compared: different
model weights, language and benchmark.

Nothing here imports Dagster or DuckDB: frames in, Markdown lines out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from evalmislead_assets.analysis import bootstrap
from evalmislead_assets.report.formatting import md_table, missing, pct, points
from evalmislead_assets.study.problems import PACKAGE_DATA_DIR

DATA_FILE = PACKAGE_DATA_DIR / "published_results.json"
TABLES = ("condition_rates", "bootstrap_comparisons", "thinking_comparisons")
UP, DOWN, TIE, NOT_ESTIMABLE = "+", "−", "no direction", "not estimable"
INCONCLUSIVE = "inconclusive"
UNPAIRED = "unpaired: averages over different models"
_TOL = bootstrap.ZERO_TOL

Frames = dict[str, pd.DataFrame]


def load_published(path: Path | None = None) -> dict[str, Any]:
    with open(path or DATA_FILE, encoding="utf-8") as fh:
        data = json.load(fh)
    for c in data["comparisons"]:
        for side in ("paper", "published_run"):
            if c.get(side) and c[side].get("direction") not in (None, "+", "-"):
                raise ValueError(f"{path or DATA_FILE}: {c['id']} {side} direction must be '+', '-' or null")
            if c.get(side) and not isinstance(c[side].get("paired", True), bool):
                raise ValueError(f"{path or DATA_FILE}: {c['id']} {side} paired must be true or false")
    return data


def direction(difference: Any, n_a: Any = 1, n_b: Any = 1) -> str:
    """'+', '−', 'no direction' (tie) or 'not estimable' (a side without tests, or no value)."""
    if missing(difference) or missing(n_a) or missing(n_b) or int(n_a) <= 0 or int(n_b) <= 0:
        return NOT_ESTIMABLE
    d = float(difference)
    return TIE if abs(d) <= _TOL else (UP if d > 0 else DOWN)


def interval_side(ci_low: Any, ci_high: Any) -> str | None:
    """'+' or '−' when the interval excludes 0 (a bound exactly at 0 includes it); None otherwise."""
    if missing(ci_low) or missing(ci_high):
        return None
    if float(ci_low) > _TOL:
        return UP
    if float(ci_high) < -_TOL:
        return DOWN
    return None


def agreement(this: str, published: str | None, ci_low: object = None, ci_high: object = None) -> str:
    """agrees / disagrees only when this run's interval excludes 0; else inconclusive (or why there is no verdict)."""
    if this not in (UP, DOWN, TIE):  # not estimable, or no figure in this source
        return this
    if published is None:
        return "not reported"
    side = interval_side(ci_low, ci_high)
    if side is None:
        return INCONCLUSIVE
    return "agrees" if side == _sign(published) else "disagrees"


def _sign(d: str) -> str:
    return DOWN if d == "-" else d


def this_run(comp: dict[str, Any], frames: Frames) -> dict[str, Any]:
    """This run's a, b, difference and test counts for one comparison, with the SQL that reads them."""
    table = comp["table"]
    df = frames.get(table, pd.DataFrame())
    if table == "bootstrap_comparisons":
        where = {"thinking": comp["thinking"], "metric": comp["metric"], "condition_a": comp["condition_a"],
                 "condition_b": comp["condition_b"]}
        cols = {"a": "rate_a", "b": "rate_b", "d": "estimate", "lo": "ci_low", "hi": "ci_high",
                "n_a": "n_tests_a", "n_b": "n_tests_b"}
    elif table == "thinking_comparisons":
        where = {"condition": comp["condition"], "metric": comp["metric"]}
        cols = {"a": "rate_on", "b": "rate_off", "d": "estimate", "lo": "ci_low", "hi": "ci_high",
                "n_a": "n_tests_on", "n_b": "n_tests_off"}
    else:  # condition_rates: two rows
        return from_rates(comp, df)
    sql = f"SELECT {', '.join(cols.values())} FROM {table} WHERE {where_sql(where)};"
    row = row_of(df, where)
    if row is None:
        return {"a": None, "b": None, "d": None, "lo": None, "hi": None, "n_a": None, "n_b": None, "sql": sql}
    return {**{k: row.get(c) for k, c in cols.items()}, "sql": sql}


def from_rates(comp: dict[str, Any], df: pd.DataFrame) -> dict[str, Any]:
    col = comp["metric"]
    ra = row_of(df, {"condition": comp["condition_a"], "thinking": comp["thinking"]})
    rb = row_of(df, {"condition": comp["condition_b"], "thinking": comp["thinking"]})
    sql = (f"SELECT condition, {col}, n_tests FROM condition_rates WHERE thinking = '{comp['thinking']}' "
           f"AND condition IN ('{comp['condition_a']}', '{comp['condition_b']}');")
    a: Any = None if ra is None else ra.get(col)
    b: Any = None if rb is None else rb.get(col)
    d = None if missing(a) or missing(b) else float(a) - float(b)
    return {"a": a, "b": b, "d": d, "lo": None, "hi": None, "n_a": None if ra is None else ra.get("n_tests"),
            "n_b": None if rb is None else rb.get("n_tests"), "sql": sql}


def row_of(df: pd.DataFrame, where: dict[str, Any]) -> dict[str, Any] | None:
    if df is None or df.empty or any(k not in df.columns for k in where):
        return None
    mask = pd.Series(True, index=df.index)
    for k, v in where.items():
        mask &= df[k] == v
    hit = df[mask]
    return None if hit.empty else hit.iloc[0].to_dict()


def where_sql(where: dict[str, Any]) -> str:
    return " AND ".join(f"{k} = '{v}'" for k, v in where.items())


class Source:
    """Where this run's figures come from, and the SQL printed beside them (it returns exactly the figure
    shown): one model's tables, as the study report reads them. replication_average.AVERAGE reads the
    average over models instead. ``this_run`` may set ``absent`` (e.g. "not averaged over models"): then
    the row shows that instead of a figure and a direction."""

    def this_run(self, comp: dict[str, Any], frames: Frames) -> dict[str, Any]:
        return this_run(comp, frames)

    def figure(self, f: dict[str, Any], spec: dict[str, Any], frames: Frames) -> str:
        return figure_value(f, spec, frames)

    def figure_sql(self, spec: dict[str, Any]) -> str:
        return f"SELECT {', '.join(spec['columns'])} FROM {spec['table']} WHERE {where_sql(spec['where'])};"

    def recompute_sql(self) -> str:
        return RECOMPUTE_SQL


def comparison_rows(published: dict[str, Any], frames: Frames, source: Source | None = None) -> pd.DataFrame:
    """One row per comparison: this run's figures and direction beside the paper's and the published run's."""
    source = source or ONE_MODEL
    rows = []
    for comp in published["comparisons"]:
        mine = source.this_run(comp, frames)
        d = mine.get("absent") or direction(mine["d"], mine["n_a"], mine["n_b"])
        paper, run = comp.get("paper") or {}, comp.get("published_run") or {}
        ci = (mine["lo"], mine["hi"])
        vs_paper = agreement(d, paper.get("direction"), *ci) if paper else "not reported"
        rows.append({
            "id": comp["id"], "comparison": comp["label"],
            "this run (a vs b)": mine["absent"] if mine.get("absent") else f"{pct(mine['a'])} vs {pct(mine['b'])}",
            "this run difference [98.75 % CI]": _difference(mine, d),
            "this run direction": d,
            "paper (a vs b)": _paper_figure(paper),
            "paper direction": _show_dir(paper),
            "vs paper": vs_paper + (" (vs an unpaired average)" if _unpaired(paper) and vs_paper in (
                "agrees", "disagrees") else ""),
            "published run": _run_figure(run),
            "published run direction": _show_dir(run),
            "vs published run": agreement(d, run.get("direction"), *ci) if run else "not reported",
        })
    return pd.DataFrame(rows)


def _difference(mine: dict[str, Any], d: str) -> str:
    """This run's difference in points with its interval, or why there is none."""
    if d not in (UP, DOWN, TIE):  # not estimable, or absent from this source
        return d
    if missing(mine["lo"]) or missing(mine["hi"]):
        return f"{points(mine['d'])} (no interval stored)"
    return f"{points(mine['d'])} [{points(mine['lo'])}, {points(mine['hi'])}]"


def _unpaired(paper: dict[str, Any]) -> bool:
    return bool(paper) and paper.get("paired") is False


def _paper_figure(paper: dict[str, Any]) -> str:
    if not paper:
        return "not reported"
    text = f"{pct(paper.get('a'))} vs {pct(paper.get('b'))}"
    return text + (f" ({UNPAIRED})" if _unpaired(paper) else "")


def figure_rows(published: dict[str, Any], frames: Frames, source: Source | None = None) -> pd.DataFrame:
    source = source or ONE_MODEL
    rows = []
    for f in published["figures"]:
        spec = f.get("this_run")
        mine = "not set beside here (see its own report section)" if spec is None else source.figure(f, spec, frames)
        rows.append({"id": f["id"], "figure": f["label"], "published": _published_value(f), "this run": mine})
    return pd.DataFrame(rows)


def figure_value(f: dict[str, Any], spec: dict[str, Any], frames: Frames) -> str:
    row = row_of(frames.get(spec["table"], pd.DataFrame()), spec["where"])
    if row is None:
        return "no stored row"
    vals: list[Any] = [row.get(c) for c in spec["columns"]]
    if any(missing(v) for v in vals[:1]):
        return "not estimable"
    if f["unit"] == "count":
        return f"{int(vals[0])}/{int(vals[1])}" if len(vals) > 1 and not missing(vals[1]) else str(int(vals[0]))
    if f["unit"] == "rate":
        return pct(vals[0])
    if f["unit"] == "points":
        ci = f" [{points(vals[1])}, {points(vals[2])}]" if len(vals) > 2 else ""
        return points(vals[0]) + ci
    return str(vals[0])


def _published_value(f: dict[str, Any]) -> str:
    v = f["value"]
    if f["unit"] == "count":
        return f"{v}/{f['denominator']}" if f.get("denominator") else str(v)
    if f["unit"] == "rate":
        return pct(v)
    if f["unit"] == "points":
        ci = f" [{points(f['ci'][0])}, {points(f['ci'][1])}]" if f.get("ci") else ""
        return points(v) + ci
    return str(v)


def _run_figure(run: dict[str, Any]) -> str:
    if not run:
        return "not reported"
    if run.get("estimate") is not None:
        ci = run.get("ci")
        return f"{points(run['estimate'])} points" + (f" [{points(ci[0])}, {points(ci[1])}]" if ci else "")
    return f"{pct(run.get('a'))} vs {pct(run.get('b'))}"


def _show_dir(side: dict[str, Any]) -> str:
    if not side or side.get("direction") is None:
        return "not reported"
    d = _sign(side["direction"])
    return d if side.get("direction_stated") else f"{d} (inferred)"


RECOMPUTE_SQL = """-- this run's pooled rates, recomputed from every executed test (same as condition_rates)
SELECT condition, thinking, count(*) AS n_tests,
       avg((outcome = 'misleading')::INT) AS misleading_rate,
       avg((outcome = 'effective')::INT) AS effective_rate,
       count(DISTINCT task_id) FILTER (WHERE outcome = 'effective') AS problems_with_effective
FROM test_outcomes GROUP BY condition, thinking ORDER BY thinking, condition;"""
ONE_MODEL = Source()


def section(frames: Frames, published: dict[str, Any] | None = None, source: Source | None = None) -> list[str]:
    """Markdown lines of the section 'Replication (direction only)'; ``source``: where this run's figures come
    from (default: one model's tables)."""
    source = source or ONE_MODEL
    published = published or load_published()
    src = published["sources"]
    out = [
        "Directions only: the published run used the real Qwen3.5-9B weights, the paper Java, Defects4J and 13 "
        "other model settings, so levels (how large a rate is) are not compared, only whether a difference goes "
        "the same way. This run's direction is the sign of its stored difference; `not estimable` when a side "
        "has no tests (or no row is stored), `no direction` for a tie. A direction `agrees` or `disagrees` with "
        "a published one only when this run's 98.75 % interval excludes 0 (a bound at exactly 0 includes it); "
        "otherwise it is `inconclusive`, whatever the point estimate's sign, and so is a difference with no "
        "stored interval (reference conditions from condition_rates). `(inferred)` marks a published direction "
        "the summary implies without stating it. Conditions a vs b; for thinking comparisons a = on, b = off.",
        "",
        f"Pairing: this run's thinking on vs off is a paired difference within one model on the "
        f"truncation-matched subset; a paper figure marked `{UNPAIRED}` sets reasoning-on settings beside "
        f"mostly different reasoning-off settings, so its direction mixes the effect of thinking with that "
        f"of the models. The paper's condition comparisons average the same 13 settings on both sides.",
        "",
        f"Sources: published run — {src['published_run']}; paper — {src['paper']}. Data file: "
        f"`evalmislead_assets/data/published_results.json` (each figure with the sentence it comes from).",
        "",
    ]
    have_rows = any(not frames.get(t, pd.DataFrame()).empty for t in TABLES)
    if not have_rows:
        out += ["_No condition_rates, bootstrap_comparisons or thinking_comparisons rows are stored yet: every "
                "direction of this run is not estimable._", ""]
    out += ["**Directions**", "", md_table(comparison_rows(published, frames, source)), "",
            "**Headline figures**", "", md_table(figure_rows(published, frames, source)), "",
            "SQL that reads this run's figures from the stored rows:", "", "```sql"]
    for comp in published["comparisons"]:
        out.append(f"-- {comp['id']} {comp['label']}")
        out.append(source.this_run(comp, {})["sql"])
    for f in published["figures"]:
        spec = f.get("this_run")
        if spec:
            out.append(f"-- {f['id']} {f['label']}")
            out.append(source.figure_sql(spec))
    out += [source.recompute_sql(), "```"]
    return out
