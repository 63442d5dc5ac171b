"""The study report rendered from stored rows (tmp DuckDB): tables, worked example, plots, HTML."""

import pandas as pd
import pytest

from evalmislead_assets import settings
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.analysis.rates import (
    bootstrap_comparisons,
    condition_rates,
    thinking_comparisons,
    truncation_matched_subset,
)
from evalmislead_assets.report import tables
from evalmislead_assets.report.build import build, file_ref, load_data, pick_example_task, write
from evalmislead_assets.store.database import Warehouse

BUGGY = "def get_positive(l: list):\n    return [e for e in l if e < 0]\n"
FIXED = "def get_positive(l: list):\n    return [e for e in l if e > 0]\n"
BUGGY_TESTS = '''from solution import get_positive
import pytest

def test_all_positive():
    assert get_positive([1, 2, 3]) == []

def test_mixed():
    assert get_positive([-1, 2, -3]) == [-1, -3]

@pytest.mark.parametrize("xs", [[5], [7, 8]])
def test_param(xs):
    assert get_positive(xs) == []

def test_empty():
    assert get_positive([]) == []
'''
# test id -> outcome: six misleading, one both-pass (the protocol's example)
BUGGY_OUTCOMES = {"test_all_positive": "misleading", "test_mixed": "misleading", "test_param[xs0]": "misleading",
                  "test_param[xs1]": "misleading", "test_empty": "both_pass"}


def store(wh: Warehouse, with_task_30=True, modes=("off",)) -> None:
    tasks = [1, 30] if with_task_30 else [1, 2]
    wh.replace_rows("problems", pd.DataFrame({
        "task_id": [f"Python/{t}" for t in tasks], "problem_idx": tasks, "entry_point": "get_positive",
        "buggy_code": BUGGY, "fixed_code": FIXED, "bug_type": "operator misuse",
    }))
    for thinking in modes:
        for cond in ("buggy_code", "fixed_code"):
            key = {"condition": cond, "thinking": thinking}
            gens, gt, outs = [], [], []
            for t in tasks:
                k = {**key, "task_id": f"Python/{t}", "problem_idx": t}
                gens.append({**k, "finish_reason": "stop", "error": None})
                if cond == "buggy_code" and t == tasks[-1]:
                    gt.append({**k, "n_tests": 5, "import_ok": True, "source": BUGGY_TESTS})
                    outs += [{**k, "test_id": f"test_solution.py::{tid}", "outcome": o, "buggy_status": "passed",
                              "fixed_status": "passed" if o == "both_pass" else "failed"}
                             for tid, o in BUGGY_OUTCOMES.items()]
                else:
                    gt.append({**k, "n_tests": 2, "import_ok": True, "source": "def test_a(): pass\n"})
                    outs += [{**k, "test_id": f"test_{i}", "outcome": "effective" if cond == "fixed_code" else
                              "both_pass", "buggy_status": "failed", "fixed_status": "passed"} for i in range(2)]
            wh.replace_rows("test_generations", pd.DataFrame(gens), where=key)
            wh.replace_rows("generated_tests", pd.DataFrame(gt), where=key)
            wh.replace_rows("test_outcomes", pd.DataFrame(outs), where=key)
    analyse(wh)


def analyse(wh: Warehouse) -> None:
    """The analysis tables the report reads, from the stored upstream rows."""
    plan = load_plan(settings.analysis_plan_path())
    o, g, t = (wh.read_table(x) for x in ("test_outcomes", "test_generations", "generated_tests"))
    wh.replace_rows("condition_rates", condition_rates(o, g, t, plan))
    wh.replace_rows("bootstrap_comparisons", bootstrap_comparisons(o, g, t, plan)[0])
    sub = truncation_matched_subset(o, g, t, plan)
    wh.replace_rows("truncation_matched_subset", sub)
    wh.replace_rows("thinking_comparisons", thinking_comparisons(o, sub, plan))


@pytest.fixture()
def wh(tmp_path):
    return Warehouse(tmp_path / "r.duckdb")


def test_report_from_stored_rows(wh, tmp_path):
    store(wh)
    plan = load_plan(settings.analysis_plan_path())
    data = load_data(wh)
    written = write(build(data, plan), tmp_path / "report")
    md = written.markdown_path.read_text(encoding="utf-8")
    # rates table: buggy_code off has 2 + 5 tests, 4 misleading -> 57.1 %
    line = next(x for x in md.splitlines() if x.startswith("| buggy_code"))
    assert "| 7 " in line and "57.1 %" in line and "0/2" in line
    assert "| fixed_code" in md and "100.0 %" in md
    # comparisons: only 1 and 2 (no model_spec rows), verdicts for thinking off
    assert "buggy_code − fixed_code" in md and "model_spec − buggy_code" not in md
    assert "+57.1" in md
    # everything not stored is named
    assert "`model_spec|off`" in md and "`buggy_code|on`" in md
    for section in ("## 1. Rates", "## 2. Primary comparisons", "## 3. Truncation", "## 4. Thinking on vs off",
                    "## 5. Spec labels", "## 6. Reasoning mentions", "## 7. Worked example"):
        assert section in md
    # worked example: task 30, the test bodies and their outcomes
    assert "Python/30; task 30 is in the run" in md
    assert "4 misleading" in md and "1 both pass" in md
    assert "assert get_positive([1, 2, 3]) == []" in md
    assert "-    return [e for e in l if e < 0]" in md
    # plots: real PNGs, referenced by path in the file and inline in the HTML and UI markdown; SVGs for a paper
    assert {p.name for p in written.plot_paths} == {f"{n}.{x}" for n in ("rates", "truncation", "forest")
                                                    for x in ("png", "svg")}
    for p in written.plot_paths:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" if p.suffix == ".png" else b"<svg" in data[:2000]
    assert "plots/rates.svg" in md
    assert "](plots/rates.png)" in md and "data:image" not in md
    html = written.html_path.read_text(encoding="utf-8")
    assert html.count("<table>") >= 5 and "data:image/png;base64," in html
    assert written.markdown_ui.count("data:image/png;base64,") == 3


def test_example_falls_back_to_the_most_misleading_problem(wh):
    store(wh, with_task_30=False)
    assert pick_example_task(wh) == "Python/2"
    md = build(load_data(wh), load_plan(settings.analysis_plan_path())).markdown(file_ref)
    assert "task 30 is not in the run" in md and "Python/2" in md


def test_report_with_nothing_stored(wh, tmp_path):
    wh.execute("SELECT 1")  # creates the tables, all empty
    written = write(build(load_data(wh), load_plan(settings.analysis_plan_path())), tmp_path / "r")
    md = written.markdown_path.read_text(encoding="utf-8")
    assert "No condition rates stored" in md and "No executed tests are stored yet" in md
    assert written.plot_paths == []


def test_report_notes_rows_from_another_plan(wh, tmp_path):
    store(wh)
    wh.execute("UPDATE condition_rates SET plan_sha256 = 'abcdef0123456789'")
    md = build(load_data(wh), load_plan(settings.analysis_plan_path())).markdown(file_ref)
    assert "`condition_rates` was computed under plan `abcdef012345`" in md


@pytest.mark.parametrize("test_id, first_line", [
    ("test_solution.py::test_mixed", "def test_mixed():"),
    ("test_param[xs1]", "def test_param(xs):"),
    ("tests.py::TestX::test_missing", None),
])
def test_test_body(test_id, first_line):
    body = tables.test_body(BUGGY_TESTS, test_id)
    assert (body.splitlines()[0] if body else None) == first_line


def test_rates_and_comparisons_over_zero_tests_are_not_estimable(wh):
    store(wh)
    wh.execute("DELETE FROM test_outcomes WHERE condition = 'buggy_code'")  # generations exist, no outcomes
    analyse(wh)
    md = build(load_data(wh), load_plan(settings.analysis_plan_path())).markdown(file_ref)
    line = next(x for x in md.splitlines() if x.startswith("| buggy_code"))
    assert "0 tests: not estimable" in line and "0.0 %" not in line
    comp = next(x for x in md.splitlines() if "buggy_code − fixed_code" in x)
    assert "not estimable (0 tests in buggy_code)" in comp and "+0.0" not in comp
    assert "resamples with 0 tests" in md


def test_comparison_tables_show_resamples_with_zero_tests(wh):
    store(wh)
    md = build(load_data(wh), load_plan(settings.analysis_plan_path())).markdown(file_ref)
    header = next(x for x in md.splitlines() if x.startswith("| #"))
    assert "resamples with 0 tests" in header
    comp = wh.read_table("bootstrap_comparisons").iloc[0]
    line = next(x for x in md.splitlines() if "buggy_code − fixed_code" in x)
    assert f"| {comp['n_zero_denominator']} " in line


def test_thinking_on_comparisons_are_labelled_as_on_the_matched_subset(wh):
    store(wh, modes=("off", "on"))
    md = build(load_data(wh), load_plan(settings.analysis_plan_path())).markdown(file_ref)
    head = next(x for x in md.splitlines() if x.startswith("### Thinking on (") and "subset" in x)
    assert "truncation-matched subset" in head and "2 problems" in head


def test_method_notes_from_stored_rows(wh):
    store(wh)
    wh.replace_rows("problem_validation", pd.DataFrame({
        "task_id": ["Python/1", "Python/30", "Python/7"], "problem_idx": [1, 30, 7], "buggy_passed": False,
        "fixed_passed": [True, True, False], "buggy_detail": "", "fixed_detail": "", "seconds": 0.0,
        "valid": [True, True, False]}))
    wh.execute("UPDATE generated_tests SET extraction = 'fence:python;removed_local_def:get_positive' "
               "WHERE condition = 'buggy_code' AND task_id = 'Python/30'")
    wh.execute("UPDATE generated_tests SET extraction = 'fence:python;removed_local_def:get_positive;"
               "removed_local_def:helper' WHERE condition = 'fixed_code' AND task_id = 'Python/30'")
    wh.execute("UPDATE test_generations SET error = 'HTTP 500 from server' "
               "WHERE condition = 'fixed_code' AND task_id = 'Python/1'")
    wh.replace_rows("model_specs", pd.DataFrame({
        "thinking": ["off", "off", "on"], "task_id": ["Python/1", "Python/30", "Python/1"], "problem_idx": [1, 30, 1],
        "spec_text": ["Return the negatives.", "  ", None], "error": [None, None, "HTTP 500"]}))
    analyse(wh)
    md = build(load_data(wh), load_plan(settings.analysis_plan_path())).markdown(file_ref)
    notes = md.split("## Method notes", 1)[1].split("\n## ", 1)[0]
    assert "Only `passed` is a pass" in notes
    for status in ("`failed`", "`error`", "`timeout`", "`crashed`", "skip", "xfail"):
        assert status in notes
    assert "1 problem excluded by validation (Python/7)" in notes
    assert "3 local re-definitions of the code under test removed from 2 test files" in notes
    assert "`import:added`: 0 test files" in notes and "`truncated_fence:trimmed`: 0 test files" in notes
    assert "1 server error" in notes and "answers" in notes
    assert "empty model specs: 1 of 2 (thinking off), 1 of 1 (thinking on)" in notes
    # statuses as stored, per version
    assert "buggy: 5 passed, 6 failed" in notes


def test_method_notes_name_every_extraction_repair_kind_with_its_file_count(wh):
    store(wh)
    wh.execute("UPDATE generated_tests SET extraction = 'fence:python;import:main->solution;import:added' "
               "WHERE condition = 'buggy_code' AND task_id = 'Python/30'")
    wh.execute("UPDATE generated_tests SET extraction = 'fence:python;truncated_fence:trimmed;import:added' "
               "WHERE condition = 'buggy_code' AND task_id = 'Python/1'")
    wh.execute("UPDATE generated_tests SET extraction = 'fence:markdown>python x2;dropped_blocks:1;only_block:2;"
               "truncated_fence;removed_local_def:get_positive;brand_new_step:3' "
               "WHERE condition = 'fixed_code' AND task_id = 'Python/30'")
    wh.execute("UPDATE generated_tests SET extraction = 'no_fence:trimmed;no_test_functions' "
               "WHERE condition = 'fixed_code' AND task_id = 'Python/1'")
    md = build(load_data(wh), load_plan(settings.analysis_plan_path())).markdown(file_ref)
    notes = md.split("## Method notes", 1)[1].split("\n## ", 1)[0]
    assert "4 of 4 stored test files went through at least one before they ran" in notes
    assert "`import:added`: 2 test files" in notes
    assert "`import:NAME->solution`: 1 test file:" in notes
    assert "`truncated_fence:trimmed`: 1 test file:" in notes and "`truncated_fence`: 1 test file:" in notes
    assert "`dropped_blocks:N`: 1 test file" in notes and "`only_block:N`: 1 test file" in notes
    assert "`no_fence:trimmed`: 1 test file" in notes
    assert "1 local re-definition of the code under test removed from 1 test file" in notes
    # a step this note does not know is still listed, never dropped; a finding is not a repair
    assert "`brand_new_step` (a step this note does not describe): 1 test file" in notes
    assert "no_test_functions" not in notes


def test_spec_section_names_the_review_csv_it_was_given(tmp_path):
    """The review CSV is per model (spec_labels writes it under the model's folder): the report names the
    one it was given, not the environment's default."""
    from types import SimpleNamespace

    labels = pd.DataFrame([{"thinking": "off", "task_id": "Python/0", "category": "neither",
                            "label_source": "judge", "judge_error": None}])
    empty = pd.DataFrame()
    given = tmp_path / "qwen_x" / "spec_labels_review.csv"
    data = SimpleNamespace(spec_labels=labels, spec_label_agreement=empty, spec_label_splits=empty,
                           review_csv=given)
    lines = "\n".join(tables.spec_section(data))
    assert f"fill in `{given}`" in lines
    lines = "\n".join(tables.spec_section(SimpleNamespace(**{**vars(data), "review_csv": None})))
    assert "fill in the review CSV (EVALMISLEAD_REVIEW_CSV)" in lines


def test_spec_section_says_how_many_specs_the_execution_judge_leaves_without_evidence():
    from types import SimpleNamespace

    labels = pd.DataFrame({"thinking": "off", "task_id": ["Python/0", "Python/1", "Python/2"],
                           "category": ["transcribes_bug", "restores_correct", "restores_correct"],
                           "label_source": ["execution+judge", "execution", "judge"], "judge_error": None,
                           "exec_category": ["transcribes_bug", "restores_correct", None],
                           "exec_n_examples": [2, 3, 0]})
    agree = pd.DataFrame([{"thinking": "off", "label": "category", "n_reviewed": 0, "n_agree": 0,
                           "agreement": float("nan"), "kappa": float("nan")},
                          {"thinking": "off", "label": "execution_vs_judge", "n_reviewed": 2, "n_agree": 1,
                           "agreement": 0.5, "kappa": 0.0}])
    data = SimpleNamespace(spec_labels=labels, spec_label_agreement=agree, spec_label_splits=pd.DataFrame(),
                           review_csv=None)
    text = "\n".join(tables.spec_section(data))
    assert ("thinking off: transcribes_bug 1, restores_correct 1, no evidence 1 of 3 specs "
            "(1 without an example it can read)") in text
    assert "execution_vs_judge" in text
    assert "_No human labels imported yet" in text  # the execution rows are not a human review
    # a table stored before the execution judge: no such line
    old = labels.assign(exec_category=None, exec_n_examples=None)
    assert "Execution judge" not in "\n".join(tables.spec_section(SimpleNamespace(**{**vars(data), "spec_labels": old})))


def test_verified_subset_section_shows_the_share_and_both_rates(wh, tmp_path):
    """The report gives per condition the verified share and each rate over all tests and over
    verified tests only, and names why files are outside the subset, all from stored rows."""
    store(wh)
    gt = wh.read_table("generated_tests")
    outside = (gt["condition"] == "buggy_code") & (gt["task_id"] == "Python/30")  # its 5 tests, 4 misleading
    gt["verified"] = ~outside
    gt["unverified_reason"] = outside.map(lambda o: "imports os" if o else None)
    for cond in ("buggy_code", "fixed_code"):
        wh.replace_rows("generated_tests", gt[gt["condition"] == cond], where={"condition": cond, "thinking": "off"})
    analyse(wh)
    md = write(build(load_data(wh), load_plan(settings.analysis_plan_path())), tmp_path / "report").markdown_path \
        .read_text(encoding="utf-8")
    section = md.split("Verified subset: rates with and without unverified tests\n", 1)[1]
    line = next(x for x in section.splitlines() if x.startswith("| buggy_code"))
    # 7 tests, 2 verified (Python/1's both-pass pair): 28.6 %; misleading 57.1 % over all, 0.0 % over verified
    assert [c.strip() for c in line.strip("|").split("|")] == [
        "buggy_code", "off", "7", "2", "28.6 %", "57.1 %", "0.0 %", "0.0 %", "0.0 %"]
    fixed = next(x for x in section.splitlines() if x.startswith("| fixed_code"))
    assert "| 4 " in fixed and "100.0 %" in fixed
    assert "| imports os " in section and "FROM condition_rates" in section
