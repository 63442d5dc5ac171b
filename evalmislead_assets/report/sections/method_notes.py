"""The report's "Method notes": how statuses map to cells and what was dropped or excluded, from stored rows."""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.execution.cells import STATUSES
from evalmislead_assets.study.conditions import EMPTY_SPEC

REMOVED_DEF = "removed_local_def:"
IMPORT_REWRITTEN = "import:NAME->solution"

# Every change extraction (extraction.py, import_normalisation.py) makes to what runs, by the
# prefix of its note in `generated_tests.extraction` ("how;note;note"), with what it means.
# "no_fence:trimmed" is the `how` part; the others are notes. Order = order in the report.
REPAIR_KINDS: list[tuple[str, str]] = [
    (REMOVED_DEF, "local re-definitions of the code under test removed (a test file that defines the function "
                  "under test itself would test its own copy)"),
    (IMPORT_REWRITTEN, "imports of the code under test from a module that does not exist here rewritten to "
                       "the `solution` module"),
    ("import:added", "a missing `from solution import …` added for solution names used but never imported"),
    ("removed_main_block", "a top-level `if __name__ == \"__main__\":` block removed (it never runs on import; "
                           "it only starts a test runner)"),
    ("removed_runner_call", "a bare top-level `pytest.main(...)` / `unittest.main()` call removed (a nested test "
                            "session inside the sandbox would read as reaching into the harness)"),
    ("truncated_fence:trimmed", "an unclosed last fence (answer cut off) trimmed to its last top-level statement "
                                "that compiles"),
    ("truncated_fence", "an unclosed last fence (answer cut off) taken to the end of the answer, its text "
                        "unchanged (it compiled, or trimming could not make it compile)"),
    ("dropped_blocks:", "code blocks without tests that are not support code dropped"),
    ("only_block:", "blocks that do not compile together: only the best test block kept"),
    ("no_fence:trimmed", "an answer without a fence: prose before the code and after it trimmed"),
]
NOT_REPAIRS = ("no_test_functions",)  # notes that record a finding, not a change

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
    # test files only: an answer without code ran nothing
    "extractions": "SELECT extraction FROM generated_tests WHERE extraction IS NOT NULL AND trim(source) <> ''",
    "validation": "SELECT task_id, problem_idx, valid FROM problem_validation ORDER BY problem_idx, task_id",
    "answers": f"""
        SELECT count(*) AS answers,
               count(*) FILTER (WHERE error IS NOT NULL AND trim(error) <> ''
                                AND NOT starts_with(error, '{EMPTY_SPEC}')) AS server_errors,
               count(*) FILTER (WHERE starts_with(error, '{EMPTY_SPEC}')) AS empty_spec
        FROM test_generations
    """,
    "specs": """
        SELECT thinking, count(*) AS n, count(*) FILTER (WHERE spec_text IS NULL OR trim(spec_text) = '') AS empty
        FROM model_specs GROUP BY thinking ORDER BY thinking
    """,
}


def load(warehouse) -> dict[str, pd.DataFrame]:  # store.database.Warehouse
    return {name: warehouse.query_df(sql) for name, sql in QUERIES.items()}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def repair_kind(step: str) -> str | None:
    """The REPAIR_KINDS key of one extraction step; the step itself for a kind not listed; None if no repair."""
    if step in NOT_REPAIRS or step in ("none", "no_fence", "no_fence:uncompilable") or step.startswith("fence:"):
        return None
    if step.startswith("import:") and "->" in step:
        return IMPORT_REWRITTEN
    for key, _ in REPAIR_KINDS:
        if step == key or (key.endswith(":") and step.startswith(key)):
            return key
    return step.split(":", 1)[0]


def repair_counts(extractions: pd.Series) -> dict[str, tuple[int, int]]:
    """kind -> (test files with it, occurrences); every listed kind is present, unlisted ones are added."""
    counts = {key: [0, 0] for key, _ in REPAIR_KINDS}
    for value in extractions.dropna().astype(str):
        seen: dict[str, int] = {}
        for step in value.split(";"):
            kind = repair_kind(step.strip())
            if kind is not None:
                seen[kind] = seen.get(kind, 0) + 1
        for kind, n in seen.items():
            c = counts.setdefault(kind, [0, 0])
            c[0], c[1] = c[0] + 1, c[1] + n
    return {k: (v[0], v[1]) for k, v in counts.items()}


def _repair_lines(frames: dict[str, pd.DataFrame]) -> list[str]:
    ex = frames.get("extractions", pd.DataFrame())
    counts = repair_counts(ex["extraction"] if len(ex) else pd.Series(dtype=object))
    changed = 0
    if len(ex):
        changed = int(ex["extraction"].dropna().astype(str).map(
            lambda v: any(repair_kind(s.strip()) for s in v.split(";"))).sum())
    out = [f"- Extraction repairs: {changed} of {_plural(len(ex), 'stored test file')} went through at least one "
           "before they ran; per kind, the test files with it (a file can have several; "
           "`generated_tests.extraction` names each step):"]
    meaning = dict(REPAIR_KINDS)
    for kind, (files, n) in counts.items():
        shown = kind + {REMOVED_DEF: "NAME", "dropped_blocks:": "N", "only_block:": "N"}.get(kind, "")
        if kind == REMOVED_DEF:
            out.append(f"  - `{shown}`: {_plural(n, 'local re-definition')} of the code under test removed from "
                       f"{_plural(files, 'test file')} (a test file that defines the function under test itself "
                       "would test its own copy).")
        elif kind in meaning:
            out.append(f"  - `{shown}`: {_plural(files, 'test file')}: {meaning[kind]}.")
        else:
            out.append(f"  - `{kind}` (a step this note does not describe): {_plural(files, 'test file')}.")
    return out


def render(frames: dict[str, pd.DataFrame]) -> list[str]:
    """The paragraph (as bullet lines) for the report; every number is drawn from the frames."""
    out = ["Every executed test is run once against each version and gets one status per version: "
           + ", ".join(f"`{s}`" for s in STATUSES) + ". Only `passed` is a pass; `failed`, `error`, `timeout` and "
           "`crashed` are not, nor is a skipped test (stored as `error`, detail `skipped: …`) or an expected "
           "failure (xfail, stored as `failed`, detail `xfailed …`). A test's cell follows: misleading = pass on "
           "buggy and not on fixed, effective = the reverse, both pass, both fail. A test whose run ended on one of "
           "the runner's caps on either version (a `limit:*` status: output, memory, file size, processes, disk) is "
           "in none of the four: its outcome is `limit`, counted among the tests and never misleading or "
           "effective.", ""]
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
    out += _repair_lines(frames)
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
