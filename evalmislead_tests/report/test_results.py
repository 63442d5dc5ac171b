"""The README's Results section comes from the stored rows: rendered, written between its markers, checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalmislead_assets.cli import main
from evalmislead_assets.report import readme_summary, results
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.cli.test_results_cmd import make_pack, stored_cells
from evalmislead_tests.report.test_report import store

README = f"# x\n\nbefore\n\n{results.BEGIN}\nold text\n{results.END}\n\nafter\n"
SUMMARY = f"# x\n\n{readme_summary.BEGIN}\nold text\n{readme_summary.END}\n\nafter\n"


@pytest.mark.slow
def test_section_from_rows_written_and_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = Warehouse(tmp_path / "r.duckdb")
    store(wh)
    pack = make_pack(tmp_path / "pack", stored_cells(wh))  # the recorded run: exactly the stored cells
    readme = tmp_path / "README.md"
    readme.write_text(README)
    assert main(["results", "--db", str(wh.path), "--pack", str(pack), "--check", str(readme)]) == 1
    err = capsys.readouterr().err
    assert "differ from what" in err and "\n-old text" in err  # with a unified diff of what changed
    assert main(["results", "--db", str(wh.path), "--pack", str(pack), "--write", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n\n") and text.endswith("\n\nafter\n") and "old text" not in text
    section = results.current(text)
    # figures from the rows: buggy_code has 7 tests, 4 misleading (57.1 %); the provenance from the pack
    line = next(x for x in section.splitlines() if x.startswith("| buggy_code"))
    assert "| 7 " in line and "57.1 %" in line
    assert "b11434-test" in section and "1 slot(s)" in section and "2026-12-04 to 2026-12-06" in section
    assert "assert get_positive([1, 2, 3]) == []" in section  # the worked example
    assert "**A misleading test from this run:**" in section and "data:image" not in section
    assert main(["results", "--db", str(wh.path), "--pack", str(pack), "--check", str(readme)]) == 0
    # a new row changes a figure: the README's copy is stale
    store(wh, with_task_30=False)
    assert main(["results", "--db", str(wh.path), "--pack", str(pack), "--check", str(readme)]) == 1

    # the README's first screen: the same command writes its own block from the same rows
    short = tmp_path / "SHORT.md"
    short.write_text(SUMMARY)
    pack = make_pack(tmp_path / "pack2", stored_cells(wh))  # the run the changed rows hold
    assert main(["results", "--db", str(wh.path), "--pack", str(pack), "--write", str(short)]) == 0
    block = results.current(short.read_text(), readme_summary.BEGIN, readme_summary.END)
    assert results.BEGIN not in short.read_text() and "old text" not in block
    rows = [x for x in block.splitlines() if x.startswith("| ")]
    assert rows[1].startswith("| buggy_code ") and "| primary " in rows[1]  # primary conditions first
    assert "C1, misleading, `buggy_code` − `fixed_code`" in block and "Pooled over tests" in block
    assert "assert get_positive([1, 2, 3]) == []" in block
    assert main(["results", "--db", str(wh.path), "--pack", str(pack), "--check", str(short)]) == 0


def test_no_markers_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = Warehouse(tmp_path / "r.duckdb")
    store(wh)
    readme = tmp_path / "README.md"
    readme.write_text("# nothing here\n")
    assert main(["results", "--db", str(wh.path), "--pack", str(tmp_path / "none"), "--write", str(readme)]) == 2
    assert "has no generated section's markers" in capsys.readouterr().err


def test_a_misleading_test_of_the_run_with_its_bug_and_source(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "r.duckdb")
    store(wh)
    lines = results.misleading_example(wh.query_df)
    text = "\n".join(lines)
    # the first misleading buggy_code test of task 30 by test id: test_all_positive, with its diff and body
    assert "(Python/30), condition `buggy_code`" in lines[0] and "`test_solution.py::test_all_positive`" in lines[0]
    assert "passed on the buggy version, failed on the fixed one" in lines[0]
    assert "-    return [e for e in l if e < 0]" in text and "+    return [e for e in l if e > 0]" in text
    assert "def test_all_positive():\n    assert get_positive([1, 2, 3]) == []" in text
    # none stored: nothing to show
    wh.execute("DELETE FROM test_outcomes WHERE outcome = 'misleading'")
    assert results.misleading_example(wh.query_df) == []


def test_readme_copy_folds_sql_and_drops_inline_plots() -> None:
    lines = ["Intro", "![A plot](data:image/png;base64,iVBORw0KGgo" + "A" * 1000 + ")", "```sql",
             "SELECT 1", "```", "```python", "x = 1", "```"]
    out = results.readme_safe(lines)
    assert not any("data:image" in x for x in out)
    assert "_(The plot is in the report: `data/report/report.html`.)_" in out
    assert out[out.index("```sql") - 2] == "<details><summary>SQL</summary>"
    assert out[out.index("SELECT 1") + 3] == "</details>"
    assert out[-3:] == ["```python", "x = 1", "```"]  # other code blocks stay as they are

