"""Report section "Languages side by side": one model's misleading and effective rates per language and
condition, language a minus b with its paired-bootstrap interval (the language_comparisons table,
analysis/language_comparison.py); coverage and mutation "not estimable" for Java and JavaScript, with why.

Frames in, Markdown lines out. No row, or a row without a number, reads "not estimable" with its reason,
never 0.
"""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.report.formatting import ci, level_label, mc_se, md_table, missing, pct, points
from evalmislead_assets.study.models import LANGUAGE_NAMES

TITLE = "Languages side by side"
TABLES = ("language_comparisons",)
NOT_ESTIMABLE = "not estimable"


def _name(language: str) -> str:
    return LANGUAGE_NAMES.get(language, language)


def _table(rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for r in rows.to_dict("records"):
        ok = bool(r["estimable"]) if not missing(r["estimable"]) else False
        out.append({
            "condition": r["condition"], "metric": r["metric"].replace("_rate", ""),
            "a − b": f"{_name(r['language_a'])} − {_name(r['language_b'])}",
            "rate a": pct(r["rate_a"]) if ok else NOT_ESTIMABLE,
            "rate b": pct(r["rate_b"]) if ok else NOT_ESTIMABLE,
            "difference (points)": points(r["estimate"]) if ok else NOT_ESTIMABLE,
            "interval": ci(r["ci_low"], r["ci_high"]) if ok else (r["note"] or NOT_ESTIMABLE),
            "MC error of the bounds (SE, points)": mc_se(r.get("ci_low_mc_se"), r.get("ci_high_mc_se")) if ok else "–",
            "excludes 0": ("yes" if r["excludes_zero"] else "no") if ok else "–",
            "paired problems": "–" if missing(r["n_problems"]) else int(r["n_problems"]),
            "tests a / b": "–" if missing(r["n_tests_a"]) else f"{int(r['n_tests_a'])} / {int(r['n_tests_b'])}",
        })
    return pd.DataFrame(out)


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    df = frames.get("language_comparisons")
    if df is None or df.empty:
        return ["_No language comparison: the study runs one language, or no language has outcomes yet "
                "(not estimable)._"]
    level = level_label(float(df["level"].dropna().iloc[0])) if df["level"].notna().any() else "98.75 %"
    lines = [f"Same model, same problems (paired on `problem_idx`): each rate pooled over the paired problems' "
             f"tests; the difference a − b with its {level} paired-bootstrap interval over problems. "
             "A row without tests on one side is not estimable and says why."]
    rates = df[df["metric"].isin(["misleading_rate", "effective_rate"])]
    pairs = list(dict.fromkeys(zip(df["language_a"], df["language_b"])))  # the study file's order
    rank = {p: i for i, p in enumerate(pairs)}
    for (model, thinking), rows in rates.groupby(["model_name", "thinking"], sort=True):
        rows = rows.assign(_pair=[rank[p] for p in zip(rows["language_a"], rows["language_b"])])
        lines += ["", f"### {model}, thinking {thinking}", "",
                  md_table(_table(rows.sort_values(["_pair", "condition", "metric"], kind="stable")))]
    other = df[~df["metric"].isin(["misleading_rate", "effective_rate"])]
    prefix = "not estimable for "
    notes = sorted({f"{metric}, {part}" for metric, note in zip(other["metric"], other["note"])
                    if isinstance(note, str) for part in note.removeprefix(prefix).split("; ")})
    if notes:
        lines += ["", "Coverage and mutation score: not estimable (no number is reported, never 0):", "",
                  *[f"- {n}" for n in notes]]
    return lines
