"""The report's "Method notes": how statuses map to cells and what was dropped or excluded, from stored rows."""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.analysis_base import EMPTY_SPEC_PREFIX
from evalmislead_assets.scoring import STATUSES

REMOVED_DEF = "removed_local_def:"

QUERIES = {
    "statuses": """
        SELECT 'buggy' AS version, buggy_status AS status, count(*) AS n FROM test_outcomes GROUP BY ALL
        UNION ALL
        SELECT 'fixed' AS version, fixed_status AS status, count(*) AS n FROM test_outcomes GROUP BY ALL
    """,
    "skips": """
        SELECT count(*) FILTER (WHERE buggy_detail LIKE 'skipped:%' OR fixed_detail LIKE 'skipped:%') AS skipped,
               count(*) FILTER (WHERE buggy_detail LIKE 'xfailed%' OR fixed_detail LIKE 'xfailed%') AS xfailed
        FROM test_outcomes
    """,
    "removed_defs": f"SELECT extraction FROM generated_tests WHERE extraction LIKE '%{REMOVED_DEF}%'",
    "validation": "SELECT task_id, problem_idx, valid FROM problem_validation ORDER BY problem_idx, task_id",
    "answers": f"""
        SELECT count(*) AS answers,
               count(*) FILTER (WHERE error IS NOT NULL AND trim(error) <> ''
                                AND NOT starts_with(error, '{EMPTY_SPEC_PREFIX}')) AS server_errors,
               count(*) FILTER (WHERE starts_with(error, '{EMPTY_SPEC_PREFIX}')) AS empty_spec
        FROM test_generations
    """,
    "specs": """
        SELECT thinking, count(*) AS n, count(*) FILTER (WHERE spec_text IS NULL OR trim(spec_text) = '') AS empty
        FROM model_specs GROUP BY thinking ORDER BY thinking
    """,
}


def load(warehouse) -> dict[str, pd.DataFrame]:  # noqa: ANN001 (storage.Warehouse)
    return {name: warehouse.query_df(sql) for name, sql in QUERIES.items()}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    """The paragraph (as bullet lines) for the report; every number is drawn from the frames."""
    out = ["Every executed test is run once against each version and gets one status per version: "
           + ", ".join(f"`{s}`" for s in STATUSES) + ". Only `passed` is a pass; `failed`, `error`, `timeout` and "
           "`crashed` are not, nor is a skipped test (stored as `error`, detail `skipped: …`) or an expected "
           "failure (xfail, stored as `failed`, detail `xfailed …`). A test's cell follows: misleading = pass on "
           "buggy and not on fixed, effective = the reverse, both pass, both fail.", ""]
    st = frames.get("statuses", pd.DataFrame())
    for version in ("buggy", "fixed"):
        v = st[st["version"] == version] if len(st) else st
        if len(v):
            counts = dict(zip(v["status"], v["n"].astype(int)))
            shown = [f"{counts[s]} {s}" for s in (*STATUSES, *sorted(set(counts) - set(STATUSES))) if counts.get(s)]
            out.append(f"- Statuses stored, {version}: {', '.join(shown)}.")
    sk = frames.get("skips", pd.DataFrame())
    if len(sk):
        out.append(f"- Skipped tests: {int(sk['skipped'].iloc[0])}; xfail tests: {int(sk['xfailed'].iloc[0])} "
                   "(tests with such a status on either version; none counts as a pass).")
    rd = frames.get("removed_defs", pd.DataFrame())
    n_defs = int(rd["extraction"].map(lambda e: str(e).count(REMOVED_DEF)).sum()) if len(rd) else 0
    out.append(f"- Extraction: {n_defs} local re-definitions of the code under test removed from "
               f"{_plural(len(rd), 'test file')} "
               "(a test file that defines the function under test itself would test its own copy; "
               "`generated_tests.extraction` names each one).")
    va = frames.get("validation", pd.DataFrame())
    if len(va):
        bad = va[~va["valid"].astype(bool)]["task_id"].tolist()
        out.append(f"- Validation: {_plural(len(bad), 'problem')} excluded by validation"
                   + (f" ({', '.join(bad)})" if bad else "")
                   + f" of {len(va)} checked (the dataset's oracle must fail on the buggy and pass on the fixed version).")
    else:
        out.append("- Validation: no `problem_validation` rows stored.")
    an = frames.get("answers", pd.DataFrame())
    if len(an) and int(an["answers"].iloc[0]):
        a, err, empty = (int(an[c].iloc[0]) for c in ("answers", "server_errors", "empty_spec"))
        out.append(f"- Answers: {a} answers across all conditions; \"answers\" includes {_plural(err, 'server error')} "
                   f"and {empty} `model_spec` problems whose spec was empty (no request sent). Each is an answer "
                   "with zero tests; rates are over tests, so they change no rate, but they stay in the "
                   "resampled problems.")
    sp = frames.get("specs", pd.DataFrame())
    if len(sp):
        parts = [f"{int(x['empty'])} of {int(x['n'])} (thinking {x['thinking']})" for _, x in sp.iterrows()]
        out.append(f"- Model-written specs: empty model specs: {', '.join(parts)} (empty after extraction, cut at "
                   "the cap or failed; their `model_spec` test prompt is not sent).")
    return out
