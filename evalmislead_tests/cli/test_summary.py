"""What `evalmislead run` prints at the end, from stored rows: rates, comparisons, a worked example."""

from __future__ import annotations

import pandas as pd
import pytest

from evalmislead_assets.cli import summary
from evalmislead_assets.store.database import Warehouse

SOURCE = """from solution import get_positive


def test_keeps_negatives():
    assert get_positive([-1, 2]) == [-1]


def test_empty():
    assert get_positive([]) == []
"""


def _rates(n_tests: int, n_misleading: int) -> dict:
    rate = n_misleading / n_tests if n_tests else float("nan")
    return {"condition": "buggy_code", "thinking": "off", "n_answers": 2, "n_tests": n_tests,
            "n_misleading": n_misleading, "n_effective": 0, "n_both_pass": n_tests - n_misleading, "n_both_fail": 0,
            "misleading_rate": rate, "effective_rate": 0.0 if n_tests else float("nan"),
            "misleading_ci_low": 0.1 if n_tests else float("nan"), "misleading_ci_high": 0.9 if n_tests else float("nan"),
            "effective_ci_low": 0.0 if n_tests else float("nan"), "effective_ci_high": 0.0 if n_tests else float("nan")}


def test_a_condition_without_tests_is_not_estimable_never_zero() -> None:
    table = summary.rates_table(pd.DataFrame([_rates(0, 0), _rates(4, 2) | {"condition": "fixed_code"}]))
    empty, full = table.iloc[0], table.iloc[1]
    assert empty["misleading rate [CI]"] == empty["effective rate [CI]"] == summary.NOT_ESTIMABLE
    assert full["misleading rate [CI]"] == "50.0 % (2/4) [10.0, 90.0]"


def test_a_comparison_with_a_side_without_tests_is_not_estimable() -> None:
    comp = pd.DataFrame([
        {"comparison_id": 3, "thinking": "off", "metric": "misleading_rate", "condition_a": "model_spec",
         "condition_b": "buggy_code", "estimate": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
         "n_tests_a": 0, "n_tests_b": 8, "verdict": "not estimable (0 tests in model_spec)"},
        {"comparison_id": 1, "thinking": "off", "metric": "misleading_rate", "condition_a": "buggy_code",
         "condition_b": "fixed_code", "estimate": 0.25, "ci_low": 0.05, "ci_high": 0.5, "n_tests_a": 8,
         "n_tests_b": 8, "verdict": "difference"},
    ])
    table = summary.comparisons_table(comp)
    assert table.iloc[0]["difference, points [CI]"] == "not estimable"
    assert table.iloc[1]["difference, points [CI]"] == "+25.0 [+5.0, +50.0]"


def test_worked_example_prefers_a_misleading_test_and_shows_its_assertion(seeded_warehouse: Warehouse) -> None:
    wh = seeded_warehouse
    wh.replace_rows("generated_tests", pd.DataFrame([
        {"condition": c, "thinking": "off", "task_id": "Python/30", "problem_idx": 30, "source": SOURCE,
         "n_tests": 2, "import_ok": True} for c in ("buggy_code", "fixed_code")]))
    rows = [("buggy_code", "test_empty", "passed", "passed", "both_pass"),
            ("fixed_code", "test_empty", "passed", "passed", "both_pass")]
    outcomes = pd.DataFrame([{"condition": c, "thinking": "off", "task_id": "Python/30", "problem_idx": 30,
                              "test_id": t, "buggy_status": b, "fixed_status": f, "outcome": o}
                             for c, t, b, f, o in rows])
    wh.replace_rows("test_outcomes", outcomes)
    first = summary.worked_example(wh)
    assert "no misleading test stored; a both pass test" in first[0]
    wh.append_rows("test_outcomes", pd.DataFrame([{
        "condition": "buggy_code", "thinking": "off", "task_id": "Python/30", "problem_idx": 30,
        "test_id": "test_keeps_negatives", "buggy_status": "passed", "fixed_status": "failed", "outcome": "misleading"}]))
    lines = summary.worked_example(wh)
    assert "a misleading test" in lines[0] and "Python/30" in lines[0] and "test_keeps_negatives" in lines[0]
    assert "assert get_positive([-1, 2]) == [-1]" in "\n".join(lines)
    assert "buggy version: passed; on the fixed version: failed -> misleading" in lines[-1]


def test_summary_of_an_empty_database_says_so(tmp_path) -> None:
    wh = Warehouse(tmp_path / "empty.duckdb")
    wh.ensure_schema()
    lines = summary.summary_lines(wh.path, [tmp_path / "report.md"])
    assert any("no executed test is stored yet" in ln for ln in lines)
    assert not any("report at" in ln for ln in lines)


def test_the_summary_counts_this_runs_llm_requests_and_errors(tmp_path) -> None:
    import datetime as dt

    wh = Warehouse(tmp_path / "calls.duckdb")
    old, start = dt.datetime(2026, 1, 1), dt.datetime(2026, 6, 1)
    rows = [  # (ts, task, state, error)
        (old, "Python/9", "error", "HTTP 500: from an earlier run"),
        (start + dt.timedelta(seconds=1), "Python/1", "error", "HTTP 503: busy"),
        (start + dt.timedelta(seconds=2), "Python/1", "answered", None),
        (start + dt.timedelta(seconds=3), "Python/2", "answered", None),
        (start + dt.timedelta(seconds=4), "Python/3", "sent", None),
    ]
    wh.append_rows("llm_calls", pd.DataFrame([{"call_id": str(i), "ts": ts, "task_id": t, "state": s, "error": e}
                                              for i, (ts, t, s, e) in enumerate(rows)]))
    line = summary.llm_calls_line(wh.path, start)
    assert line.startswith("LLM requests this run: 4 sent, 2 answered, 1 errors, 1 unfinished, 0 abandoned")
    assert "first: Python/1: HTTP 503: busy" in line and "earlier run" not in line
    lines = summary.summary_lines(wh.path, [], since=start)
    assert line in lines


def test_no_request_sent_is_credited_to_the_cache_only_when_nothing_failed(tmp_path) -> None:
    """A run that sent nothing because its server was down does not say 'every answer came from the cache'."""
    import datetime as dt

    wh = Warehouse(tmp_path / "calls.duckdb")
    start, later = dt.datetime(2026, 6, 1), dt.datetime(2026, 6, 2)
    wh.append_rows("llm_calls", pd.DataFrame([{"call_id": "1", "ts": later, "task_id": "Python/1",
                                               "state": "answered", "error": None}]))
    assert summary.llm_calls_line(wh.path, start, later) == (
        "LLM requests this run: none sent (every answer came from the cache)")
    assert summary.llm_calls_line(wh.path, start, later, who="of m-a", failed="m-a failed") == (
        "LLM requests of m-a: none sent (m-a failed before sending one)")
    assert summary.llm_calls_line(wh.path, later, who="of m-b").startswith("LLM requests of m-b: 1 sent, 1 answered")


def _outcome(language: str, task: str, idx: int, condition: str, test_id: str, outcome: str, detail: str) -> dict:
    return {"condition": condition, "thinking": "off", "task_id": task, "problem_idx": idx, "test_id": test_id,
            "buggy_status": "passed", "fixed_status": "failed" if outcome == "misleading" else "passed",
            "outcome": outcome, "buggy_detail": "", "fixed_detail": detail, "seconds": 0.1, "model_name": "m",
            "language": language}


def test_each_other_language_shows_one_misleading_test_with_its_failure(tmp_path) -> None:
    """A language study's summary shows the phenomenon where it occurred, even when Python stored none."""
    wh = Warehouse(tmp_path / "lang.duckdb")
    wh.ensure_schema()
    wh.append_rows("test_outcomes", pd.DataFrame([
        _outcome("python", "Python/3", 3, "buggy_code", "test_a", "both_pass", ""),
        _outcome("java", "Java/3", 3, "fixed_code", "[method:testLate()]", "misleading", "late"),
        _outcome("java", "Java/5", 5, "buggy_code", "[method:testZero()]", "misleading",
                 "\norg.opentest4j.AssertionFailedError: expected: <true> but was: <false>\n\tat x\n"),
        _outcome("js", "JavaScript/1", 1, "buggy_code", "f > works", "both_pass", ""),
    ]))
    lines = summary.language_examples(wh.path, ["java", "js"])
    assert lines == [
        "", "A misleading test in Java: Java/5, condition buggy_code, thinking off, model m, test [method:testZero()]",
        "  on the buggy version: passed; on the fixed version: failed "
        "(org.opentest4j.AssertionFailedError: expected: <true> but was: <false> at x)"]
    assert summary.language_examples(wh.path, []) == []  # a Python-only study prints none


def test_the_live_sample_line_counts_identical_answers_and_failed_requests(tmp_path) -> None:
    wh = Warehouse(tmp_path / "p.duckdb")
    wh.ensure_schema()
    assert summary.probe_lines(wh) == []  # no probe stored: no line
    rows = [{"condition": "buggy_code", "thinking": "off", "task_id": f"Python/{i}", "cache_key": f"k{i}",
             "identical": ident, "tests_identical": same, "probe_error": err, "sample_seed": 1}
            for i, (ident, same, err) in enumerate([(True, True, None), (False, True, None), (False, False, None),
                                                    (None, None, "timed out")])]
    wh.append_rows("determinism_probe", pd.DataFrame(rows))
    (line,) = [x for x in summary.probe_lines(wh) if x]
    assert "4 stored requests re-sent" in line and "1 of 3 answers byte-identical" in line
    assert "2 of 3 score the same" in line and "1 request(s) failed" in line


def test_primary_conditions_come_first_with_their_role_and_problems_with_a_misleading_test() -> None:
    rows = [_rates(4, 1) | {"condition": c, "problems_with_misleading": 1, "n_problems": 3}
            for c in ("signature_only", "model_spec", "buggy_code", "fixed_code")]
    rows.append(_rates(4, 0) | {"condition": "buggy_code", "thinking": "on", "problems_with_misleading": 0,
                                "n_problems": 3})
    table = summary.rates_table(pd.DataFrame(rows))
    assert list(zip(table["condition"], table["thinking"])) == [
        ("buggy_code", "off"), ("fixed_code", "off"), ("model_spec", "off"), ("signature_only", "off"),
        ("buggy_code", "on")]
    assert list(table["role"]) == ["primary", "primary", "primary", "reference", "primary"]
    assert list(table["problems with a misleading test"])[:2] == ["1/3", "1/3"]
    # the first two words of a line stay condition and thinking (what the end-to-end test reads)
    first = table.to_string(index=False).splitlines()[1].split()
    assert first[:3] == ["buggy_code", "off", "primary"]


@pytest.mark.parametrize("problems, text", [
    (None, "164 problems (0-163)"),
    ([30, 0, 1, 2], "4 problems (0-2, 30)"),
    ([7], "1 problem (7)"),
    (list(range(0, 40, 2)), "20 problems (0, 2, 4, 6, 8, 10, 12, 14, ... (12 more ranges))"),
])
def test_a_problem_list_is_summarised_as_ranges(problems, text) -> None:
    assert summary.problems_text(problems) == text


def test_replay_progress_counts_answers_not_tokens() -> None:
    replay = summary.progress_text(300, 1310, sent=0, tokens=0, elapsed=128)
    assert replay.startswith("300/1310 answers stored in 128 s; no request sent")
    assert "tok/s" not in replay and "tokens" not in replay
    live = summary.progress_text(10, 20, sent=10, tokens=2000, elapsed=100)
    assert "10 requests sent, 2000 new tokens (20.0 tok/s)" in live and "ETA 1.7 min" in live


def test_the_header_prints_the_caps_that_apply() -> None:
    from evalmislead_assets.study.models import ModelSpec

    own = ModelSpec(name="m-a", max_tokens_off=2048)
    plain = ModelSpec(name="m-b")
    assert summary.caps_text(4096, 16384, [own], ["off"]) == "max_tokens off=2048"
    assert summary.caps_text(4096, 16384, [plain], ["off", "on"]) == "max_tokens off=4096 on=16384"
    assert summary.caps_text(4096, 16384, [own, plain], ["off"]) == "max_tokens m-a: off=2048; m-b: off=4096"


def test_the_closing_lines_name_the_viewer(seeded_warehouse: Warehouse, tmp_path) -> None:
    report = tmp_path / "report" / "report.html"
    (report.parent / "viewer").mkdir(parents=True)
    report.write_text("<html></html>")
    (report.parent / "viewer" / "index.html").write_text("<html></html>")
    lines = summary.summary_lines(seeded_warehouse.path, [report.with_name("report.md"), report])
    tail = lines[-4:]
    assert f"evalmislead: every answer and test in the viewer: {report.parent / 'viewer' / 'index.html'}" in tail
