"""The README's Java and JavaScript screening section comes from the stored rows, between markers of its
own, and a language without tests reads "not estimable", never 0 %."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evalmislead_assets.analysis.language_comparison import language_comparisons
from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.cli import main
from evalmislead_assets.report import language_results, results
from evalmislead_assets.settings import analysis_plan_path
from evalmislead_assets.store.database import Warehouse

PREFIX = {"python": "Python", "java": "Java", "js": "JavaScript"}
# per language: the outcomes of each problem's tests under buggy_code (JavaScript wrote no loadable test)
CELLS = {"python": [["misleading", "effective"], ["both_pass"]], "java": [["misleading"], ["effective", "both_fail"]],
         "js": [[], []]}


def _store(wh: Warehouse) -> None:
    gens, files, outs = [], [], []
    for lang, per_problem in CELLS.items():
        for idx, cells in enumerate(per_problem):
            task = f"{PREFIX[lang]}/{idx}"
            key = {"condition": "buggy_code", "thinking": "off", "task_id": task, "problem_idx": idx,
                   "model_name": "m", "language": lang}
            gens.append({**key, "finish_reason": "length" if (lang, idx) == ("java", 1) else "stop"})
            files.append({**key, "n_tests": len(cells)})
            outs += [{**key, "test_id": f"t{i}", "outcome": c} for i, c in enumerate(cells)]
    wh.append_rows("test_generations", pd.DataFrame(gens))
    wh.append_rows("generated_tests", pd.DataFrame(files))
    wh.append_rows("test_outcomes", pd.DataFrame(outs))
    wh.append_rows("language_comparisons", language_comparisons(
        pd.DataFrame(outs), pd.DataFrame(files), ["python", "java", "js"], "m", load_plan(analysis_plan_path())))


def test_problem_set_reads_as_ranges() -> None:
    assert language_results.problem_set("3,0,1,2,7,9,8") == "0-3, 7-9"
    assert language_results.problem_set(None) == "none"


def test_section_from_rows_written_and_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = Warehouse(tmp_path / "r.duckdb")
    _store(wh)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{results.BEGIN}\nkept\n{results.END}\n\n{language_results.BEGIN}\nold\n"
                      f"{language_results.END}\n")
    args = ["results", "--languages", "--db", str(wh.path)]
    assert main([*args, "--check", str(readme)]) == 1
    assert "results --languages --write" in capsys.readouterr().err
    assert main([*args, "--write", str(readme)]) == 0
    text = readme.read_text()
    assert "kept" in text and "\nold\n" not in text  # the Results section is not touched
    section = results.current(text, language_results.BEGIN, language_results.END)
    assert "**m, thinking off, problems 0-1**" in section
    rows = {ln.split("|")[2].strip(): [c.strip() for c in ln.split("|")[1:-1]]
            for ln in section.splitlines() if ln.startswith("| buggy_code")}
    # condition, language, answers, truncated, files with tests, tests, misleading, effective, both pass,
    # both fail, misleading rate, effective rate
    assert rows["Python"] == ["buggy_code", "Python", "2", "0", "2", "3", "1", "1", "1", "0", "33.3 %", "33.3 %"]
    assert rows["Java"] == ["buggy_code", "Java", "2", "1", "2", "3", "1", "1", "0", "1", "33.3 %", "33.3 %"]
    assert rows["JavaScript"][5:] == ["0", "0", "0", "0", "0", "0 tests: not estimable", "0 tests: not estimable"]
    assert "Python − Java" in section and "not estimable: no test in js" in section
    assert main([*args, "--check", str(readme)]) == 0
    # a README without this section's markers: one line naming them
    readme.write_text("# nothing here\n")
    assert main([*args, "--write", str(readme)]) == 2
    assert "has no generated section's markers" in capsys.readouterr().err


def test_no_answers_say_so() -> None:
    lines = language_results.render(pd.DataFrame(), pd.DataFrame(), ["python"])
    assert lines[0] == language_results.BEGIN and lines[-1] == language_results.END
    assert "No answers are stored" in "\n".join(lines)
