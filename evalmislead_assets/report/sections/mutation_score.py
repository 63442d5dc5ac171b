"""The report section "Mutation score": per condition x thinking on all estimable files and on the same files.

A file is *estimable* when at least one of its tests passes on the fixed version and its
problem has a mutant the oracle kills (``mutation_scoring``). Which files are estimable
depends on the condition: ``buggy_code``'s misleading tests fail on the fixed version by
construction, so its estimable files are a self-selected minority. The *same-files* figures
use, per thinking mode, only the problems where every condition with a file in that mode has an
estimable file, so the conditions are compared on one set of problems; both figures are shown
with the number of files each uses. The SQL printed in the section recomputes every number.
"""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.mutation import mutator
from evalmislead_assets.mutation.scoring import TIMEOUT_KILL_FRACTION
from evalmislead_assets.report.formatting import md_table, pct

TITLE = "Mutation score"
TABLES = ("mutation_scores", "mutants")

SCORE_SQL = """-- mutation score per condition x thinking, from the per-file rows
SELECT condition, thinking, count(*) AS files, count(mutation_score) AS files_estimable,
       sum(n_killed_non_equivalent) FILTER (WHERE mutation_score IS NOT NULL)
         / sum(n_mutants - n_likely_equivalent) FILTER (WHERE mutation_score IS NOT NULL) AS pooled_score,
       avg(mutation_score) AS mean_file_score
FROM mutation_scores GROUP BY condition, thinking ORDER BY thinking, condition;
-- the same files: problems where every condition of the thinking mode has an estimable file
WITH est AS (SELECT * FROM mutation_scores WHERE mutation_score IS NOT NULL),
n_cond AS (SELECT thinking, count(DISTINCT condition) AS n FROM mutation_scores GROUP BY thinking),
same AS (SELECT e.thinking, e.task_id FROM est e JOIN n_cond c USING (thinking)
         GROUP BY e.thinking, e.task_id, c.n HAVING count(DISTINCT e.condition) = c.n)
SELECT condition, thinking, count(*) AS files_same,
       sum(n_killed_non_equivalent) / sum(n_mutants - n_likely_equivalent) AS pooled_same,
       avg(mutation_score) AS mean_same
FROM est JOIN same USING (thinking, task_id) GROUP BY condition, thinking ORDER BY thinking, condition;
-- kills by timeout, timeouts not counted as kills, and the per-file run cap
SELECT condition, thinking, sum(n_killed) AS kills, sum(n_killed_by_timeout) AS kills_by_timeout,
       sum(n_timeouts_not_kills) AS timeouts_not_kills, count(*) FILTER (WHERE n_tests_capped > 0) AS files_capped,
       sum(n_tests_capped) AS tests_capped, sum(runs_dropped) AS runs_dropped
FROM mutation_scores GROUP BY condition, thinking ORDER BY thinking, condition;
-- the per-file counts again, from the per-mutant rows
SELECT condition, thinking, task_id, count(*) AS n_mutants,
       count(*) FILTER (WHERE likely_equivalent) AS n_likely_equivalent,
       count(*) FILTER (WHERE killed AND NOT likely_equivalent) AS n_killed_non_equivalent,
       count(*) FILTER (WHERE killed_by_timeout) AS n_killed_by_timeout
FROM mutant_kills GROUP BY condition, thinking, task_id ORDER BY ALL;
-- mutants and the oracle's verdict
SELECT operator, count(*) AS mutants, count(*) FILTER (WHERE likely_equivalent) AS likely_equivalent
FROM mutants GROUP BY operator ORDER BY operator;"""

SUMMARY_COLUMNS = ["condition", "thinking", "files", "files_estimable", "pooled_score", "mean_file_score",
                   "files_same", "pooled_same", "mean_same"]


def _estimable(g: pd.DataFrame) -> pd.DataFrame:
    return g[g["mutation_score"].notna()]


def _pooled(est: pd.DataFrame) -> float | None:
    den = float((est["n_mutants"] - est["n_likely_equivalent"]).sum())
    return float(est["n_killed_non_equivalent"].sum()) / den if den else None


def same_problems(scores: pd.DataFrame) -> dict[str, set[str]]:
    """Per thinking mode: the problems where every condition with a file in that mode has an estimable file."""
    out: dict[str, set[str]] = {}
    for thinking, g in scores.groupby("thinking", sort=True):
        sets = [set(_estimable(c)["task_id"]) for _, c in g.groupby("condition")]
        out[str(thinking)] = set.intersection(*sets) if sets else set()
    return out


def summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Per condition x thinking: files, estimable files, pooled and mean score, and the same on the same files."""
    if scores is None or scores.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    same = same_problems(scores)
    rows = []
    for (c, t), g in scores.groupby(["condition", "thinking"], sort=True):
        est = _estimable(g)
        common = est[est["task_id"].isin(same[str(t)])]
        rows.append({"condition": c, "thinking": t, "files": len(g), "files_estimable": len(est),
                     "pooled_score": _pooled(est), "mean_file_score": float(est["mutation_score"].mean()) if len(est)
                     else None, "files_same": len(common), "pooled_same": _pooled(common),
                     "mean_same": float(common["mutation_score"].mean()) if len(common) else None})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _total(scores: pd.DataFrame, column: str) -> int | None:
    """The column's sum; None when the rows do not record it (written before the column existed)."""
    if column not in scores.columns or scores[column].isna().all():
        return None
    return int(pd.to_numeric(scores[column], errors="coerce").fillna(0).sum())


def _count(value: int | None) -> str:
    return "not recorded" if value is None else f"{value:,}"


def cap_and_timeout_lines(scores: pd.DataFrame) -> list[str]:
    """What the per-file run cap cut (which files, tests, runs) and how many kills were timeouts."""
    recorded = "max_runs" in scores.columns and scores["max_runs"].notna().any()
    caps = sorted({int(v) for v in pd.to_numeric(scores["max_runs"], errors="coerce").dropna()}) if recorded else []
    name = "`EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE`"
    cap_text = f"{' / '.join(f'{c:,}' for c in caps)} runs, {name}" if caps else f"{name}; not recorded in these rows"
    capped = scores[pd.to_numeric(scores["n_tests_capped"], errors="coerce").fillna(0) > 0] \
        if "n_tests_capped" in scores.columns else scores.iloc[0:0]
    if capped.empty:
        out = [f"Run cap per file ({cap_text}): no file reached it."]
    else:
        where = "; ".join(f"{c}|{t}: " + ", ".join(g["task_id"].astype(str))
                          for (c, t), g in capped.groupby(["condition", "thinking"], sort=True))
        out = [f"Run cap per file ({cap_text}): {len(capped)} files capped ({where}); "
               f"{_count(_total(capped, 'n_tests_capped'))} passing tests kept out of the mutant pass, "
               f"{_count(_total(capped, 'runs_dropped'))} mutant runs left out. A capped file's score is that of its "
               "first tests (file order)."]
    by_timeout = _total(scores, "n_killed_by_timeout")
    if by_timeout is None:
        return out + ["", "Kills by timeout: not recorded in these rows (re-materialize `mutation_scores`)."]
    return out + ["", f"Kills by timeout: {by_timeout:,} of {_count(_total(scores, 'n_killed'))} kills. Mutant runs "
                      f"over the limit not counted as kills (the test's fixed run took {TIMEOUT_KILL_FRACTION:g} × "
                      f"the limit or more): {_count(_total(scores, 'n_timeouts_not_kills'))}."]


def section(frames: dict[str, pd.DataFrame]) -> list[str]:
    """Markdown lines of the report section 'Mutation score'."""
    scores, muts = frames.get("mutation_scores", pd.DataFrame()), frames.get("mutants", pd.DataFrame())
    out = [
        "How well each generated test file tells the fixed function from small variants of it. Mutants: up to "
        f"{mutator.MAX_MUTANTS_PER_PROBLEM} per problem of the fixed function's body (operators in "
        "`evalmislead_assets/mutation/mutator.py`). Only a file's tests that pass on the fixed version count; a "
        "mutant is killed when one of them does not pass on it. A run over the time limit is a kill only when "
        f"the same test's fixed run took under {TIMEOUT_KILL_FRACTION:g} × the limit (a slow correct run on a "
        "loaded machine is no kill); kills by timeout are "
        "counted below and flagged per mutant (`mutant_kills.killed_by_timeout`).",
        "",
        "**Denominator.** A mutant the dataset's own oracle does not kill is called *likely equivalent* and left "
        "out, so score = killed oracle-detectable mutants / oracle-detectable mutants. This is not the textbook "
        "killed / (all − equivalent): a mutant that differs from the fixed function only on inputs the oracle "
        "never tries is left out too. *Not estimable* (NULL, never 0) when a file has no passing test or its "
        "problem no oracle-detectable mutant. Pooled: over the files' mutants; mean: of the files' scores.",
        "",
        "**Which files.** *All estimable*: every estimable file of the condition; these are different problems "
        "per condition (for `buggy_code` the misleading tests fail on the fixed version and never count, so its "
        "estimable files are a self-selected minority). *Same files*: only the problems where every condition "
        "of the thinking mode that has a file has an estimable one; compare conditions on these.",
        "",
    ]
    if muts is None or muts.empty:
        out.append("_No mutants are stored yet (materialize `mutants`)._")
    else:
        n_eq = int(muts["likely_equivalent"].sum())
        out.append(f"{len(muts)} mutants of {muts['task_id'].nunique()} problems; {n_eq} likely equivalent "
                   f"(the oracle does not kill them).")
    out.append("")
    summ = summary(scores)
    if summ.empty:
        out.append("_No mutation scores are stored yet (materialize `mutation_scores`): not estimable._")
    else:
        shown = summ.assign(**{c: summ[c].map(pct) for c in ("pooled_score", "mean_file_score", "pooled_same",
                                                              "mean_same")})
        out.append(md_table(shown.rename(columns={
            "files_estimable": "files estimable", "pooled_score": "pooled (all estimable)",
            "mean_file_score": "mean per file (all estimable)", "files_same": "same files",
            "pooled_same": "pooled (same files)", "mean_same": "mean per file (same files)"})))
        out.append("")
        out += cap_and_timeout_lines(scores)
    out += ["", "SQL that recomputes these numbers from the stored rows:", "", "```sql", SCORE_SQL, "```"]
    return out
