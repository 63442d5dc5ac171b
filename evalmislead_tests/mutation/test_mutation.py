"""The AST mutator, the oracle's equivalence flag, the kill rule with the real sandbox, the score, the report section."""

import json
import re

import pandas as pd
import pytest

from evalmislead_assets import settings
from evalmislead_assets.mutation import mutator as mutation
from evalmislead_assets.mutation import scoring as ms
from evalmislead_assets.report.section_list import sections
from evalmislead_assets.report.sections import mutation_score as mr
from evalmislead_assets.sandbox.host import Ran, Sandbox
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.study.problems import DATA_FILE
from evalmislead_tests.stored import with_stored

GET_POSITIVE = "def get_positive(l: list):\n    return [e for e in l if e > 0]\n"
BODY_LINE = lambda code: code.splitlines()[1].strip()  # noqa: E731

LOOPY = '''import math


def helper(x):
    return x + 1


def f(xs, n):
    total = 0
    for x in xs[1:n]:
        if x % 2 == 0 and x > n:
            break
        if not x:
            continue
        total += x * 2
    out.append(total)
    return total
'''


def _rows() -> list[dict]:
    return [json.loads(line) for line in open(DATA_FILE, encoding="utf-8")]


# ---------------------------------------------------------------- mutator


def test_get_positive_yields_the_standard_mutants():
    muts = mutation.candidates(GET_POSITIVE, "get_positive")
    lines = {BODY_LINE(m.code): m.operator for m in muts}
    assert lines == {
        "return None": "return_value",
        "return [e for e in l if not (e > 0)]": "boolean",
        "return [e for e in l if e < 0]": "relational",
        "return [e for e in l if e >= 0]": "relational",
        "return [e for e in l if e > (-1)]": "constant",
        "return [e for e in l if e > 1]": "constant",
    }
    assert [m.mutant_id for m in muts] == list(range(len(muts)))
    assert all(m.line == 2 for m in muts)
    ge = next(m for m in muts if m.description == "> -> >=")
    assert ge.diff.splitlines()[-2:] == ["-    return [e for e in l if e > 0]", "+    return [e for e in l if e >= 0]"]


def test_every_operator_on_a_small_function_and_only_its_body():
    muts = mutation.candidates(LOOPY, "f")
    assert {m.operator for m in muts} == set(mutation.OPERATORS)
    descriptions = {m.description for m in muts}
    for expected in ("% -> //", "* -> /", "+= -> -=", "== -> !=", "> -> >=", "> -> <", "and -> or",
                     "not x -> x", "condition negated", "break -> continue", "continue -> break",
                     "return value -> None", "delete statement", "2 -> 3", "2 -> 1", "2 -> 0",
                     "remove slice lower 1", "remove slice upper n", "n -> n + 1"):
        assert expected in descriptions, expected
    codes = [m.code for m in muts]
    assert "    for x in xs[:n]:" in next(c for c, m in zip(codes, muts) if m.description == "remove slice lower 1")
    assert "(xs, n):\n    pass\n    for x" in next(c for c, m in zip(codes, muts) if m.operator == "statement_deletion")
    helper = "def helper(x):\n    return x + 1\n"
    assert all(helper in c and c.startswith("import math\n") for c in codes)  # helper and imports untouched
    assert len(set(codes)) == len(codes) and LOOPY not in codes
    for m in muts:
        compile(m.code, "<mutant>", "exec")
        changed = [ln for ln in m.diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
        assert len(changed) == 2, m.diff  # one line out, one line in: formatting kept
        assert LOOPY.splitlines()[m.line - 1] in m.diff


def test_mutants_are_deterministic_and_ids_survive_sampling():
    code = LOOPY
    every = mutation.candidates(code, "f")
    assert every == mutation.candidates(code, "f")
    kept, n = mutation.mutants(code, "f", cap=7, key="Python/x")
    assert n == len(every) and len(kept) == 7
    assert kept == mutation.mutants(code, "f", cap=7, key="Python/x")[0]
    assert [m.mutant_id for m in kept] == sorted(m.mutant_id for m in kept)
    assert all(every[m.mutant_id] == m for m in kept)
    assert mutation.mutants(code, "f", cap=0)[0] == every
    assert mutation.mutants(GET_POSITIVE, "get_positive")[0] == mutation.candidates(GET_POSITIVE, "get_positive")


def test_every_dataset_problem_mutates_within_the_cap():
    rows = _rows()
    counts = []
    for r in rows:
        kept, n = mutation.mutants(r["declaration"] + r["canonical_solution"], r["entry_point"], key=r["task_id"])
        assert 0 < len(kept) <= mutation.MAX_MUTANTS_PER_PROBLEM, r["task_id"]
        counts.append(len(kept))
    assert len(counts) == 164


def test_missing_function_or_bad_code_is_an_error():
    with pytest.raises(mutation.MutationError, match="no top-level function"):
        mutation.candidates(GET_POSITIVE, "nope")
    with pytest.raises(mutation.MutationError, match="does not parse"):
        mutation.candidates("def f(:\n", "f")


# ---------------------------------------------------------------- oracle flag


def test_oracle_flags_an_equivalent_mutant_of_a_real_problem():
    """Task 6: every paren group holds a '(', so starting max_depth at -1 instead of 0 changes nothing."""
    r = _rows()[6]
    problems = pd.DataFrame([{**r, "problem_idx": 6, "fixed_code": r["declaration"] + r["canonical_solution"]}])
    df, notes = ms.build_mutants(problems, oracle_timeout_s=5.0)
    assert not notes and len(df) == len(mutation.candidates(problems["fixed_code"][0], r["entry_point"]))
    diff_of = lambda row: [ln for ln in row.diff.splitlines() if ln.startswith("+ ")]  # noqa: E731
    equivalent = [row for row in df.itertuples() if diff_of(row) == ["+        max_depth = (-1)"]]
    assert len(equivalent) == 1 and equivalent[0].likely_equivalent and not equivalent[0].oracle_killed
    flipped = [row for row in df.itertuples() if row.description == "+= -> -="]
    assert flipped and all(row.oracle_killed and not row.likely_equivalent for row in flipped)
    assert (df["likely_equivalent"] == ~df["oracle_killed"]).all()
    assert set(df.columns) == set(ms.MUTANT_COLUMNS)


# ---------------------------------------------------------------- kill rule, with the real sandbox

STRONG = """from solution import get_positive

def test_mixed():
    assert get_positive([-1, 0, 2]) == [2]

def test_empty():
    assert get_positive([]) == []

def test_asserts_the_bug():
    assert get_positive([1]) == []
"""
WEAK = """from solution import get_positive

def test_empty():
    assert get_positive([]) == []

def test_asserts_the_bug():
    assert get_positive([1]) == []
"""
ONLY_FAILING = """from solution import get_positive

def test_asserts_the_bug():
    assert get_positive([1]) == []
"""
MUTANTS = [
    (0, "def get_positive(l: list):\n    return [e for e in l if e >= 0]\n", False),
    (1, "def get_positive(l: list):\n    return [e for e in l if e > 1]\n", False),
    (2, "def get_positive(l: list):\n    while True:\n        pass\n", False),
    (3, "def get_positive(l: list):\n    return [e for e in l if e > 0 and True]\n", True),
]


@pytest.mark.slow
def test_kill_rule_scores_and_null_with_the_real_sandbox(tmp_path):
    gen = pd.DataFrame({
        "task_id": ["Python/30"] * 4, "problem_idx": [30] * 4, "source": [STRONG, WEAK, ONLY_FAILING, ""],
        "test_ids": [["test_mixed", "test_empty", "test_asserts_the_bug"],
                     ["test_empty", "test_asserts_the_bug"], ["test_asserts_the_bug"], []],
        "n_tests": [3, 2, 1, 0],
    })
    muts = pd.DataFrame([{"task_id": "Python/30", "mutant_id": i, "operator": "x", "mutant_code": c,
                          "likely_equivalent": eq} for i, c, eq in MUTANTS])
    problems = pd.DataFrame({"task_id": ["Python/30"], "fixed_code": [GET_POSITIVE]}).set_index("task_id")
    scores, kills, run = ms.build_scores(gen, muts, problems, Sandbox(workers=2), mutant_timeout_s=1.0,
                                         max_runs=settings.DEFAULT_MAX_MUTATION_RUNS_PER_FILE)

    assert len(scores) == 3  # the file without tests has no row
    strong, weak, failing = (scores.iloc[i] for i in range(3))
    # STRONG: test_mixed kills >= (0 kept) and the endless loop (timeout); `> 1` keeps [2]: survives
    assert (strong.n_tests_passing_fixed, strong.n_killed, strong.n_killed_non_equivalent) == (2, 2, 2)
    assert strong.n_mutants == 4 and strong.n_likely_equivalent == 1
    assert strong.mutation_score == pytest.approx(2 / 3)
    # WEAK: only test_empty passes on fixed; it kills just the endless loop. test_asserts_the_bug fails on
    # the fixed version and on mutant 0 and 1 too, but tests failing on fixed never count as kills.
    assert (weak.n_tests_passing_fixed, weak.n_killed) == (1, 1)
    assert weak.mutation_score == pytest.approx(1 / 3)
    # no test passes on the fixed version: not estimable, never 0.0
    assert failing.n_tests_passing_fixed == 0 and failing.n_killed == 0 and pd.isna(failing.mutation_score)

    strong_kills = kills.iloc[0:4]  # rows follow the files, then the mutants
    assert strong_kills["mutant_id"].tolist() == [0, 1, 2, 3]
    assert strong_kills["killed"].tolist() == [True, False, True, False]
    assert strong_kills["killing_test"].tolist()[0] == "test_mixed"
    assert strong_kills["killing_status"].tolist()[2] == "timeout"
    assert strong_kills["n_tests_run"].tolist() == [1, 2, 1, 2]  # survivors meet every passing test
    assert "test_asserts_the_bug" not in set(kills["killing_test"].dropna())

    wh = Warehouse(tmp_path / "m.duckdb")
    wh.replace_rows("mutation_scores", scores.assign(condition="buggy_code", thinking="off"))
    wh.replace_rows("mutant_kills", kills.assign(condition="buggy_code", thinking="off"))
    nulls = wh.query_df("SELECT count(*) AS n FROM mutation_scores WHERE mutation_score IS NULL")["n"][0]
    assert nulls == 1
    recomputed = wh.query_df(mr.SCORE_SQL.split(";")[0])
    summ = mr.summary(scores.assign(condition="buggy_code", thinking="off"))
    assert recomputed["pooled_score"][0] == pytest.approx(summ["pooled_score"][0]) == pytest.approx(3 / 6)
    assert recomputed["mean_file_score"][0] == pytest.approx(summ["mean_file_score"][0]) == pytest.approx(0.5)
    assert recomputed["files_estimable"][0] == 2


def test_score_is_null_when_not_estimable():
    assert ms.score(5, 5, 0, 3) is None  # every mutant likely equivalent
    assert ms.score(0, 0, 0, 3) is None  # no mutants
    assert ms.score(5, 1, 0, 0) is None  # no test passes on the fixed version
    assert ms.score(5, 1, 0, 2) == 0.0
    assert ms.score(5, 1, 3, 2) == pytest.approx(0.75)


# ---------------------------------------------------------------- report section


def test_section_is_registered_and_renders_empty_frames_without_numbers(tmp_path):
    section = next(s for s in sections() if s.title == "Mutation score")
    assert set(section.tables) == {"mutation_scores", "mutants"}
    lines = section.render({t: pd.DataFrame() for t in section.tables})
    text = "\n".join(lines)
    assert "not estimable" in text and "No mutants are stored yet" in text
    before_sql = text.split("```sql")[0]
    assert not re.search(r"\d+(\.\d+)? %", before_sql) and "| " not in before_sql
    # the printed SQL runs on an empty warehouse
    wh = Warehouse(tmp_path / "empty.duckdb")
    for stmt in text.split("```sql")[1].split("```")[0].split(";"):
        if stmt.strip() and not all(ln.strip().startswith("--") for ln in stmt.strip().splitlines()):
            wh.query_df(stmt)


def test_section_with_rows():
    scores = pd.DataFrame({
        "condition": ["buggy_code", "buggy_code", "fixed_code"], "thinking": ["off"] * 3,
        "task_id": ["Python/1", "Python/2", "Python/1"], "n_mutants": [10, 4, 10], "n_likely_equivalent": [2, 4, 2],
        "n_killed_non_equivalent": [4, 0, 8], "mutation_score": [0.5, None, 1.0],
    })
    muts = pd.DataFrame({"task_id": ["Python/1"] * 3, "likely_equivalent": [True, False, False]})
    summ = mr.summary(scores)
    assert summ.set_index("condition").loc["buggy_code", "files_estimable"] == 1
    assert summ.set_index("condition").loc["buggy_code", "pooled_score"] == pytest.approx(0.5)
    text = "\n".join(mr.section({"mutation_scores": scores, "mutants": muts}))
    assert "50.0 %" in text and "100.0 %" in text and "3 mutants of 1 problems; 1 likely equivalent" in text


# ---------------------------------------------------------------- kill rule details, with a scripted sandbox


class ScriptedSandbox(Sandbox):
    """Answers run() from a script: (code under test, test id) -> (status, seconds); over the limit is a timeout.

    No process is started, so the kill rule's bookkeeping is tested without wall-clock timing.
    """

    script: dict[tuple[str, str], tuple[str, float]] = {}
    requests: list[tuple[str, str, float]] = []

    def run(self, requests, coverage=False):
        out = []
        for module, test_id in requests:
            status, seconds = self.script.get((module.solution, test_id), ("passed", 0.01))
            type(self).requests.append((module.solution, test_id, self.limits.timeout_s))
            out.append(Ran("timeout", "over the limit", self.limits.timeout_s) if seconds > self.limits.timeout_s
                       else Ran(status, "", seconds))
        return out


def _scripted(script: dict) -> type[ScriptedSandbox]:
    return type("Scripted", (ScriptedSandbox,), {"script": script, "requests": []})


def test_a_timeout_kills_only_when_the_fixed_run_was_well_under_the_limit():
    # test_quick passes on the fixed code in 0.1 s; test_heavy in 6 s (so it meets mutants with the full 10 s)
    fixed, loop_a, loop_b = "FIXED", "LOOP_A", "LOOP_B"
    script = {(fixed, "test_heavy"): ("passed", 6.0), (fixed, "test_quick"): ("passed", 0.1),
              (loop_a, "test_heavy"): ("passed", 99.0),  # over 10 s: a timeout, but 6 s is not under half of 10
              (loop_b, "test_quick"): ("passed", 99.0)}  # over 2 s: a timeout after a 0.1 s fixed run
    sandbox = _scripted(script)(workers=1)
    f = ms.TestFile("src", ("test_heavy", "test_quick"), fixed, ((0, loop_a), (1, loop_b)))
    run = ms.run_kills([f], sandbox, mutant_timeout_s=2.0, max_runs=settings.DEFAULT_MAX_MUTATION_RUNS_PER_FILE)
    fk = run.files[0]
    assert fk.killed_by[1] == ("test_quick", "timeout")  # counted: the fixed run took 0.1 s of a 2 s limit
    assert fk.killed_by[0] is None and fk.timeouts_not_kills == {0: 1, 1: 0}  # not a kill, and counted
    assert ms.timeout_kills(0.99, 2.0) and not ms.timeout_kills(1.0, 2.0)


def test_timeout_kills_are_stored_per_mutant_and_per_file():
    fixed = GET_POSITIVE
    script = {(MUTANTS[2][1], "test_mixed"): ("passed", 99.0), (MUTANTS[0][1], "test_mixed"): ("failed", 0.01)}
    gen = pd.DataFrame({"task_id": ["Python/30"], "problem_idx": [30], "source": [STRONG],
                        "test_ids": [["test_mixed", "test_empty"]], "n_tests": [2]})
    muts = pd.DataFrame([{"task_id": "Python/30", "mutant_id": i, "operator": "x", "mutant_code": c,
                          "likely_equivalent": eq} for i, c, eq in MUTANTS])
    problems = pd.DataFrame({"task_id": ["Python/30"], "fixed_code": [fixed]}).set_index("task_id")
    scores, kills, _ = ms.build_scores(gen, muts, problems, _scripted(script)(workers=1), mutant_timeout_s=1.0,
                                      max_runs=settings.DEFAULT_MAX_MUTATION_RUNS_PER_FILE)
    assert kills["killed_by_timeout"].tolist() == [False, False, True, False]
    assert kills["killing_status"].fillna("-").tolist() == ["failed", "-", "timeout", "-"]
    row = scores.iloc[0]
    assert (row.n_killed, row.n_killed_by_timeout, row.n_timeouts_not_kills) == (2, 1, 0)
    text = "\n".join(mr.section({"mutation_scores": scores.assign(condition="fixed_code", thinking="off"),
                                 "mutants": muts}))
    assert "Kills by timeout: 1 of 2 kills" in text and "Run cap per file (1,000 runs" in text
    assert set(ms.SCORE_COLUMNS) - {"condition", "thinking"} == set(scores.columns)
    assert set(ms.KILL_COLUMNS) - {"condition", "thinking"} == set(kills.columns)


def test_run_cap_bounds_150_trivial_tests_against_6_mutants():
    """150 trivial tests from one answer against 6 surviving mutants would need 1,050 runs: the cap bounds them."""
    ids = tuple(f"test_{i}" for i in range(150))
    f = ms.TestFile("src", ids, "FIXED", tuple((m, f"M{m}") for m in range(6)))
    uncapped = ms.run_kills([f], _scripted({})(workers=1), max_runs=None)
    assert uncapped.runs == 150 + 6 * 150 == 1050
    capped = ms.run_kills([f], _scripted({})(workers=1), max_runs=600)
    fk = capped.files[0]
    assert capped.runs <= 600 and fk.runs == 150 + 6 * 75  # k = (600 - 150) // 6 passing tests meet the mutants
    assert fk.mutant_tests == list(ids[:75]) and fk.tests_capped == 75
    assert fk.runs_dropped == 6 * 75 == uncapped.runs - capped.runs  # what the cap saved, exactly
    assert ms.tests_for_mutants(150, 6, 150, 10) == 1  # every mutant still meets one test
    assert ms.tests_for_mutants(5, 30, 5, 1000) == 5  # a real answer is not cut by the default
    with pytest.raises(ValueError, match="EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE"):
        ms.tests_for_mutants(5, 3, 5, 0)


def test_run_cap_stored_and_reported():
    ids = [f"test_{i}" for i in range(40)]
    gen = pd.DataFrame({"task_id": ["Python/30"], "problem_idx": [30], "source": ["src"], "test_ids": [ids],
                        "n_tests": [40]})
    muts = pd.DataFrame([{"task_id": "Python/30", "mutant_id": i, "operator": "x", "mutant_code": f"M{i}",
                          "likely_equivalent": False} for i in range(4)])
    script = {(f"M{i}", "test_0"): ("failed", 0.01) for i in range(2)}  # two mutants die on the first test
    problems = pd.DataFrame({"task_id": ["Python/30"], "fixed_code": ["FIXED"]}).set_index("task_id")
    scores, _, run = ms.build_scores(gen, muts, problems, _scripted(script)(workers=1), max_runs=100)
    row = scores.iloc[0]
    assert (row.max_runs, row.n_tests_capped, row.runs_dropped) == (100, 25, 2 * 25)  # k = (100 - 40) // 4 = 15
    assert row.runs == run.runs == 40 + 4 + 2 * 14 <= 100
    text = "\n".join(mr.section({"mutation_scores": scores.assign(condition="buggy_code", thinking="off"),
                                 "mutants": muts}))
    assert "1 files capped (buggy_code|off: Python/30); 25 passing tests kept out of the mutant pass, 50 mutant " \
           "runs left out" in text


def _score_rows() -> pd.DataFrame:
    """buggy_code estimable on Python/1 only; fixed_code on 1, 2 and 3; model_spec on 1 and 2."""
    rows = [("buggy_code", "Python/1", 10, 2, 2), ("buggy_code", "Python/2", 10, 2, None),
            ("fixed_code", "Python/1", 10, 2, 4), ("fixed_code", "Python/2", 10, 0, 10),
            ("fixed_code", "Python/3", 5, 0, 5), ("model_spec", "Python/1", 10, 2, 8),
            ("model_spec", "Python/2", 10, 0, 5)]
    return pd.DataFrame([{"condition": c, "thinking": "off", "task_id": t, "n_mutants": n, "n_likely_equivalent": eq,
                          "n_killed_non_equivalent": k or 0, "n_killed": k or 0, "n_tests": 3,
                          "n_tests_passing_fixed": 0 if k is None else 2,
                          "mutation_score": None if k is None else k / (n - eq)} for c, t, n, eq, k in rows])


def test_same_files_score_beside_all_estimable(tmp_path):
    scores = _score_rows()
    assert mr.same_problems(scores) == {"off": {"Python/1"}}
    summ = mr.summary(scores).set_index("condition")
    assert summ.loc["fixed_code", "files_estimable"] == 3 and summ.loc["fixed_code", "files_same"] == 1
    assert summ.loc["fixed_code", "pooled_score"] == pytest.approx(19 / 23)  # (4 + 10 + 5) / (8 + 10 + 5)
    assert summ.loc["fixed_code", "pooled_same"] == pytest.approx(4 / 8)  # Python/1 only
    assert summ.loc["buggy_code", "pooled_same"] == pytest.approx(2 / 8)
    assert summ.loc["model_spec", "mean_same"] == pytest.approx(1.0)
    # the printed SQL gives the same same-files numbers from stored rows
    wh = Warehouse(tmp_path / "s.duckdb")
    wh.replace_rows("mutation_scores", scores)
    sql = wh.query_df(mr.SCORE_SQL.split(";")[1]).set_index("condition")
    assert sql["files_same"].to_dict() == {"buggy_code": 1, "fixed_code": 1, "model_spec": 1}
    for c in sql.index:
        assert sql.loc[c, "pooled_same"] == pytest.approx(summ.loc[c, "pooled_same"])
    text = "\n".join(mr.section({"mutation_scores": scores, "mutants": pd.DataFrame()}))
    assert "same files" in text and "oracle-detectable mutants" in text and "not the textbook" in text
    header = next(ln for ln in text.splitlines() if ln.startswith("| condition"))
    assert "pooled (all estimable)" in header and "pooled (same files)" in header


# ---------------------------------------------------------------- assets


@pytest.mark.slow
def test_assets_materialize_mutants_and_a_partition(seeded_warehouse, monkeypatch):
    from dagster import DagsterInstance, materialize

    from evalmislead_assets.assets import mutants as mutant_assets
    from evalmislead_assets.assets import mutation as assets
    from evalmislead_assets.partitions import partition_key
    from evalmislead_assets.resources import StudySettingsResource, WarehouseIOManager, WarehouseResource

    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30")
    # 3 tests + 6 mutants x 1 test: only the first passing test meets the mutants (the setting reaches the asset)
    monkeypatch.setenv("EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE", "9")
    wh = seeded_warehouse
    res = {"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
           "study_settings": StudySettingsResource()}
    assert materialize(with_stored([mutant_assets.mutants]), resources=res, instance=DagsterInstance.ephemeral()).success
    muts = wh.read_table("mutants", order_by="mutant_id")
    assert set(muts["task_id"]) == {"Python/30"} and len(muts) == 6 and muts["oracle_killed"].all()
    again = materialize(with_stored([mutant_assets.mutants]), resources=res, instance=DagsterInstance.ephemeral())
    assert again.success and wh.read_table("mutants", order_by="mutant_id").equals(muts)  # deterministic

    gen = pd.DataFrame({
        "condition": "buggy_code", "thinking": "off", "task_id": ["Python/30", "Python/30"], "problem_idx": [30, 30],
        "source": [STRONG, None], "extraction": "none", "import_ok": [True, False], "n_tests": [3, 0],
        "test_ids": [["test_mixed", "test_empty", "test_asserts_the_bug"], []], "error": None,
        "finish_reason": "stop",
    })
    wh.replace_rows("generated_tests", gen)
    result = materialize(with_stored([assets.mutation_scores, assets.mutation_scores_consistent]), resources=res,
                         partition_key=partition_key("buggy_code", "off"), instance=DagsterInstance.ephemeral())
    assert result.success
    assert all(e.passed for e in result.get_asset_check_evaluations())
    scores = wh.read_table("mutation_scores")
    assert len(scores) == 1 and scores["n_mutants"][0] == 6 and scores["n_tests_passing_fixed"][0] == 2
    # STRONG keeps [2] from [-1, 0, 2]: only `e > 1` (0 -> 1) survives it
    assert scores["n_killed"][0] == 5 and scores["mutation_score"][0] == pytest.approx(5 / 6)
    # the cap kept test_empty away from the mutants: 9 runs, not 10 (one survivor x one test left out)
    assert (scores["max_runs"][0], scores["n_tests_capped"][0], scores["runs_dropped"][0], scores["runs"][0]) == \
        (9, 1, 1, 9)
    kills = wh.read_table("mutant_kills")
    assert len(kills) == 6 and set(kills["condition"]) == {"buggy_code"} and int(kills["killed"].sum()) == 5
    # mutant_kills is an asset of the same step, stored by the IO manager with its own metadata
    meta = {m.asset_key.to_user_string(): m.metadata for m in result.asset_materializations_for_node("mutation_scores")}
    assert set(meta) == {"mutation_scores", "mutant_kills"}
    assert (meta["mutant_kills"]["rows"].value, meta["mutant_kills"]["killed"].value) == (6, 5)
    assert meta["mutation_scores"]["files"].value == 1

    # the launchpad's run config wins over the environment: no cap left to cut at 1000 runs
    from dagster import RunConfig

    config = RunConfig(ops={"mutation_scores": assets.MutationConfig(max_runs_per_file=1000)})
    assert materialize(with_stored([assets.mutation_scores]), resources=res, run_config=config,
                       partition_key=partition_key("buggy_code", "off"), instance=DagsterInstance.ephemeral()).success
    scores = wh.read_table("mutation_scores")
    assert (scores["max_runs"][0], scores["n_tests_capped"][0], scores["runs"][0]) == (1000, 0, 10)
