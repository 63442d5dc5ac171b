"""The report section "Collected but not scored": test ids collected on one version only, and the per-answer cap.

An id collected against one version only (``generated_tests.one_version_ids``, see
``collection``) is not a test of the study: it is not scored, and it is counted here, as a
file collected on one version only is counted in the per-condition table. Collected tests past
the per-answer cap (``generated_tests.n_tests_over_cap``, ``EVALMISLEAD_MAX_TESTS_PER_ANSWER``)
are not scored either; the files they came from are named.
"""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.report.formatting import md_table

TITLE = "Collected but not scored"
TABLES = ("generated_tests",)

SQL = """-- test ids collected on one version only, and tests past the per-answer cap, per condition x thinking
SELECT condition, thinking,
       count(*) FILTER (WHERE len(one_version_ids) > 0) AS files_with_one_version_ids,
       coalesce(sum(len(one_version_ids)), 0) AS one_version_ids,
       count(*) FILTER (WHERE n_tests_over_cap > 0) AS files_over_cap,
       coalesce(sum(n_tests_over_cap), 0) AS tests_over_cap
FROM generated_tests GROUP BY condition, thinking ORDER BY thinking, condition;"""

COLUMNS = ["condition", "thinking", "files_with_one_version_ids", "one_version_ids", "files_over_cap",
           "tests_over_cap"]


def _lengths(values: pd.Series) -> pd.Series:
    return values.map(lambda v: 0 if v is None or (not hasattr(v, "__len__") and pd.isna(v)) else len(v))


def counts(generated: pd.DataFrame) -> pd.DataFrame:
    """Per condition x thinking: files and ids collected on one version only, files and tests past the cap."""
    if generated is None or generated.empty:
        return pd.DataFrame(columns=COLUMNS)
    g = generated.assign(
        _one=_lengths(generated["one_version_ids"]) if "one_version_ids" in generated.columns else 0,
        _over=pd.to_numeric(generated["n_tests_over_cap"], errors="coerce").fillna(0).astype(int)
        if "n_tests_over_cap" in generated.columns else 0)
    rows = [{"condition": c, "thinking": t, "files_with_one_version_ids": int((x["_one"] > 0).sum()),
             "one_version_ids": int(x["_one"].sum()), "files_over_cap": int((x["_over"] > 0).sum()),
             "tests_over_cap": int(x["_over"].sum())}
            for (c, t), x in g.groupby(["condition", "thinking"], sort=True)]
    return pd.DataFrame(rows, columns=COLUMNS)


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    """Markdown lines of the section."""
    generated = frames.get("generated_tests", pd.DataFrame())
    out = [
        "A test id that pytest collects against one version of the code only (a parametrize value computed "
        "from the function under test, a test defined under a condition on its result) is not a test of the "
        "study: it is not scored and not in any rate; a file whose every id is like that has zero tests. "
        "Collected tests past the per-answer cap (`EVALMISLEAD_MAX_TESTS_PER_ANSWER`, first tests in file "
        "order kept) are not scored either.",
        "",
    ]
    table = counts(generated)
    if table.empty:
        return out + ["_No generated tests are stored yet (materialize `generated_tests`)._", "",
                      "```sql", SQL, "```"]
    out.append(md_table(table.rename(columns={
        "files_with_one_version_ids": "files with one-version ids", "one_version_ids": "one-version ids",
        "files_over_cap": "files over the test cap", "tests_over_cap": "tests over the cap"})))
    over = generated[pd.to_numeric(generated.get("n_tests_over_cap"), errors="coerce").fillna(0) > 0] \
        if "n_tests_over_cap" in generated.columns else generated.iloc[0:0]
    if len(over):
        caps = sorted({int(v) for v in pd.to_numeric(over.get("max_tests"), errors="coerce").dropna()}) \
            if "max_tests" in over.columns else []
        names = "; ".join(f"{c}|{t}: " + ", ".join(f"{r.task_id} (+{int(r.n_tests_over_cap)})" for r in x.itertuples())
                          for (c, t), x in over.groupby(["condition", "thinking"], sort=True))
        out += ["", f"Files over the cap of {' / '.join(map(str, caps)) or 'an unrecorded'} tests per answer "
                    f"(tests cut in brackets): {names}."]
    return out + ["", "SQL that recomputes these numbers from the stored rows:", "", "```sql", SQL, "```"]
