"""`evalmislead results`: --check compares the parts the stored run has, reads the data without writing or
locking it; --write refuses a partial run unless asked to label it so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evalmislead_assets import data_lock
from evalmislead_assets.cli import main
from evalmislead_assets.llm import answer_pack
from evalmislead_assets.report import readme_summary, results, run_scope
from evalmislead_assets.store.database import ReadOnlyWarehouse, Warehouse
from evalmislead_assets.store.hashing import sha256_text
from evalmislead_tests.report.test_report import store

PROJECT_ROOT = Path(__file__).resolve().parents[2]
MODEL = "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
DOC = f"# x\n\n{results.BEGIN}\nold text\n{results.END}\n\nafter\n"
SUMMARY = f"# x\n\n{readme_summary.BEGIN}\nold text\n{readme_summary.END}\n"

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from evalmislead_assets import data_lock
    data_lock.hold_data_folder(Path(sys.argv[1]))
    print("holding", flush=True)
    time.sleep(600)
""")


def make_pack(folder: Path, cells: list[tuple[str, int]], thinking: str = "off") -> Path:
    """An answer pack whose recorded run is ``cells`` (condition, problem): one test-generation answer each."""
    answers: list[dict[str, Any]] = []
    for i, (condition, problem) in enumerate(cells):
        request = json.dumps({"model": MODEL, "messages": [condition, problem]})
        answers.append({"asset": "test_generations", "condition": condition, "thinking": thinking,
                        "task_id": f"Python/{problem}", "cache_key": sha256_text(request), "request_json": request,
                        "response_json": "{}", "server_props_sha256": "p", "latency_s": 1.0, "ts": None,
                        "prompt_tokens": 1, "completion_tokens": 1,
                        "created_at": "2026-12-04T17:00" if i == 0 else "2026-12-06T09:00"})
    answer_pack.write_pack(folder, answers, {"p": {"build_info": "b11434-test"}}, {
        "model": MODEL, "slots": 1, "seed": 1234, "max_tokens_off": 2048, "model_file_sha256": "cc324af070c2ecbf",
        "git_commit": "abc"})
    return folder


def stored_cells(wh: Warehouse) -> list[tuple[str, int]]:
    rows = wh.query_df(run_scope.STORED_SQL, [run_scope.PRIMARY])
    return [(str(c), int(p)) for c, p, _, _ in rows.itertuples(index=False, name=None)]


@pytest.fixture()
def study(tmp_path: Path) -> tuple[Warehouse, Path]:
    """Stored rows of a run (two conditions on problems 1 and 30) and the pack that recorded exactly them."""
    wh = Warehouse(tmp_path / "r.duckdb")
    store(wh)
    return wh, make_pack(tmp_path / "pack", stored_cells(wh))


def _args(wh: Warehouse, pack: Path, *rest: str) -> list[str]:
    return ["results", "--db", str(wh.path), "--pack", str(pack), *rest]


@pytest.mark.slow
def test_check_prints_a_unified_diff_and_says_it_matches(study: tuple[Warehouse, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    wh, pack = study
    doc = tmp_path / "results.md"
    doc.write_text(DOC)
    assert main(_args(wh, pack, "--check", str(doc))) == 1
    err = capsys.readouterr().err
    assert f"--- {doc} (Results)" in err and "\n-old text" in err and "\n+**Rates per condition**" in err
    assert main(_args(wh, pack, "--write", str(doc))) == 0
    capsys.readouterr()
    assert main(_args(wh, pack, "--check", str(doc))) == 0
    out = capsys.readouterr()
    assert f"the Results section(s) of {doc} match" in out.out
    # one changed figure: exit 1 and a diff naming just that line
    text = doc.read_text()
    line = next(x for x in text.splitlines() if x.startswith("| buggy_code"))
    doc.write_text(text.replace(line, line.replace("57.1 %", "57.2 %")))
    assert main(_args(wh, pack, "--check", str(doc))) == 1
    err = capsys.readouterr().err
    assert "57.2 %" in err and "57.1 %" in err and "differ from what" in err


def test_check_skips_the_parts_the_stored_run_lacks(study: tuple[Warehouse, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A document written from a run with mutation, checked against a run without it: the mutation part is
    not compared, and one line says so; a difference elsewhere is still found."""
    wh, pack = study
    doc = tmp_path / "results.md"
    doc.write_text(DOC + f"\n{readme_summary.BEGIN}\n{readme_summary.END}\n")
    assert main(_args(wh, pack, "--write", str(doc))) == 0
    text = doc.read_text()
    mutation = next(lines for name, lines in results.split_parts(results.current(text)) if name == "Mutation score")
    with_mutation = text.replace("\n".join(mutation), "**Mutation score:**\n\n| file | score |\n| a | 0.75 |\n")
    doc.write_text(with_mutation)
    capsys.readouterr()
    assert main(_args(wh, pack, "--check", str(doc))) == 0
    out = capsys.readouterr()
    skipped = [x for x in out.err.splitlines() if x.startswith("evalmislead: skipped")]
    assert len(skipped) == 1 and "Results: Mutation score (the stored run has no mutation_scores rows)" in skipped[0]
    assert "match" in out.out and "0.75" not in out.err
    # the same document with a changed rate still differs
    line = next(x for x in with_mutation.splitlines() if x.startswith("| buggy_code"))
    doc.write_text(with_mutation.replace(line, line.replace("57.1 %", "50.0 %")))
    assert main(_args(wh, pack, "--check", str(doc))) == 1
    assert "50.0 %" in capsys.readouterr().err


def test_check_of_a_language_section_without_language_rows_says_why(study: tuple[Warehouse, Path], tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from evalmislead_assets.report import language_results

    wh, pack = study
    doc = tmp_path / "results.md"
    doc.write_text(DOC + f"\n{language_results.BEGIN}\nscreening\n{language_results.END}\n")
    assert main(_args(wh, pack, "--write", str(doc))) == 0
    capsys.readouterr()
    assert main(_args(wh, pack, "--check", str(doc))) == 0  # the Python Results only
    assert "skipped Java and JavaScript (a run of its own" in capsys.readouterr().err
    assert main(_args(wh, pack, "--languages", "--check", str(doc))) == 1
    err = capsys.readouterr().err
    assert "the Java and JavaScript section (the stored run has no Java or JavaScript answers)" in err
    assert "nothing of" in err


def test_check_leaves_the_file_as_it_is_beside_a_run_holding_the_data_folder(
        study: tuple[Warehouse, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    wh, pack = study
    doc = tmp_path / "results.md"
    doc.write_text(DOC)
    assert main(_args(wh, pack, "--write", str(doc))) == 0
    home = tmp_path / "data"
    monkeypatch.setenv("EVALMISLEAD_HOME", str(home))
    env = {**os.environ, "EVALMISLEAD_HOME": str(home), "PYTHONPATH": str(PROJECT_ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(wh.path)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding", holder.stderr
        # the holder is real: taking the data folder here fails naming it
        with pytest.raises(data_lock.LockHeld, match=f"pid {holder.pid} "):
            data_lock.hold_data_folder(wh.path, "test")
        before = (wh.path.read_bytes(), os.stat(wh.path).st_mtime_ns)
        capsys.readouterr()
        assert main(_args(wh, pack, "--check", str(doc))) == 0
        assert "match" in capsys.readouterr().out
        assert (wh.path.read_bytes(), os.stat(wh.path).st_mtime_ns) == before
        assert not wh.path.with_name(wh.path.name + ".wal").exists()
    finally:
        holder.kill()
        holder.wait()
    # what the comparison detects: a read-write open of the same file changes its bytes
    Warehouse(wh.path).execute("CREATE TABLE scratch AS SELECT 1 AS x")
    assert (wh.path.read_bytes(), os.stat(wh.path).st_mtime_ns) != before


def test_a_file_without_a_table_it_reads_is_one_line_and_left_as_it_is(
        study: tuple[Warehouse, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh, pack = study
    wh.execute("DROP TABLE mutation_scores")
    doc = tmp_path / "results.md"
    doc.write_text(DOC)
    before = wh.path.read_bytes()
    assert main(_args(wh, pack, "--check", str(doc))) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "lacks a table this version reads" in err and "mutation_scores" in err
    assert wh.path.read_bytes() == before


def test_a_read_only_warehouse_refuses_to_write(study: tuple[Warehouse, Path]) -> None:
    wh, _ = study
    ro = Warehouse(wh.path, read_only=True)
    assert int(ro.query_df("SELECT count(*) AS n FROM test_generations")["n"].iloc[0]) == 4
    with pytest.raises(ReadOnlyWarehouse, match="opened read-only"):
        ro.execute("DELETE FROM test_generations")
    assert int(ro.query_df("SELECT count(*) AS n FROM test_generations")["n"].iloc[0]) == 4


@pytest.fixture()
def partial(tmp_path: Path) -> tuple[Warehouse, Path, Path, Path]:
    """The pack recorded six conditions on problems 1, 2 and 30; the rows hold two conditions on 1 and 30."""
    wh = Warehouse(tmp_path / "r.duckdb")
    store(wh)
    pack = make_pack(tmp_path / "pack", [(c, p) for c in run_scope.CONDITION_NAMES for p in (1, 2, 30)])
    doc, readme = tmp_path / "results.md", tmp_path / "README.md"
    doc.write_text(DOC)
    readme.write_text(SUMMARY)
    return wh, pack, doc, readme


def test_write_refuses_a_partial_run_naming_what_is_missing(partial: tuple[Warehouse, Path, Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    wh, pack, doc, readme = partial
    for target in (doc, readme):
        assert main(_args(wh, pack, "--write", str(target))) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "the stored run is partial" in err
        assert ("missing condition(s) model_spec, signature_only, human_docstring, buggy_code_with_docstring; "
                "problem(s) 2 of buggy_code, fixed_code") in err and "--partial" in err
    assert doc.read_text() == DOC and readme.read_text() == SUMMARY  # nothing written


@pytest.mark.slow
def test_partial_writes_it_labelled_as_the_partial_run(partial: tuple[Warehouse, Path, Path, Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    wh, pack, doc, readme = partial
    # --partial: written under a header naming what it covers, never the recorded run's provenance
    assert main(_args(wh, pack, "--write", str(readme), "--partial")) == 0
    assert "partial run: problems 1, 30 (2 of 3)" in capsys.readouterr().out
    block = results.current(readme.read_text(), readme_summary.BEGIN, readme_summary.END)
    header = block.splitlines()[2]
    assert header.startswith(run_scope.PARTIAL_MARK)
    assert "problems 1, 30 (2 of 3), conditions buggy_code, fixed_code (2 of 6)" in header
    assert "The recorded run of" not in block and "Not the recorded run of" in header
    assert main(_args(wh, pack, "--check", str(readme))) == 0
    # the fix a stale copy is told: a partial copy is rewritten as one; the full run's is never replaced by it
    readme.write_text(readme.read_text().replace("Pooled over tests", "Pooled over all tests"))
    capsys.readouterr()
    assert main(_args(wh, pack, "--check", str(readme))) == 1
    assert f"run evalmislead results --write {readme} --partial" in capsys.readouterr().err
    assert main(_args(wh, pack, "--check", str(doc))) == 1
    err = capsys.readouterr().err
    assert "compare after a replay of the full study" in err and "--partial" not in err


def test_write_refuses_rows_of_another_run_even_labelled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = Warehouse(tmp_path / "r.duckdb")
    store(wh)  # problems 1 and 30
    pack = make_pack(tmp_path / "pack", [(c, p) for c in ("buggy_code", "fixed_code") for p in (1, 2)])
    doc = tmp_path / "results.md"
    doc.write_text(DOC)
    for extra in ([], ["--partial"]):
        assert main(_args(wh, pack, "--write", str(doc), *extra)) == 2
        err = capsys.readouterr().err
        assert "mix runs" in err and "buggy_code on problem(s) 30" in err
    assert doc.read_text() == DOC


def test_write_refuses_a_cell_answered_by_another_request(study: tuple[Warehouse, Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The same cells as the pack, but one answered by a request the pack does not hold (another prompt or
    model): the rows mix runs."""
    wh, pack = study
    keys = run_scope.recorded_cells(answer_pack.read_pack(pack).labelled())
    where = "WHERE condition = 'fixed_code' AND problem_idx = 30"
    wh.execute(f"UPDATE test_generations SET cache_key = 'another request' {where}")
    doc = tmp_path / "results.md"
    doc.write_text(DOC)
    assert main(_args(wh, pack, "--write", str(doc), "--partial")) == 2
    assert "mix runs" in capsys.readouterr().err and doc.read_text() == DOC
    # the same row as a server error holds no answer of any run
    wh.execute(f"UPDATE test_generations SET error = 'server error 500' {where}")
    assert main(_args(wh, pack, "--write", str(doc))) == 0
    wh.execute(f"UPDATE test_generations SET error = NULL, cache_key = ? {where}", [keys[("fixed_code", 30)]])
    assert main(_args(wh, pack, "--write", str(doc))) == 0  # the pack's own request: one run


def test_partial_goes_with_write(study: tuple[Warehouse, Path], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    wh, pack = study
    doc = tmp_path / "results.md"
    doc.write_text(DOC)
    assert main(_args(wh, pack, "--check", str(doc), "--partial")) == 2
    assert "--partial goes with --write" in capsys.readouterr().err


def test_scope_lines() -> None:
    full = run_scope.design_cells(["buggy_code", "fixed_code", "model_spec"], 10)
    s = run_scope.scope(full, [("buggy_code", 0), ("buggy_code", 1), ("fixed_code", 0), ("fixed_code", 1)], "F")
    assert s.partial and not s.foreign
    assert s.covers_line() == "problems 0-1 (2 of 10), conditions buggy_code, fixed_code (2 of 3)"
    assert s.missing_line() == "condition(s) model_spec; problem(s) 2-9 of buggy_code, fixed_code"
    whole = run_scope.scope(full, [(c, p) for c, p in full], "F")
    assert not whole.partial and whole.missing_line() == "nothing"
    keyed = {("buggy_code", 0): "k0", ("buggy_code", 1): "k1"}
    same = run_scope.scope(keyed, [("buggy_code", 0, "k0"), ("buggy_code", 1, None)], "F")
    assert not same.foreign and not same.partial
    other = run_scope.scope(keyed, [("buggy_code", 0, "k0"), ("buggy_code", 1, "x")], "F")
    assert other.foreign_line() == "buggy_code on problem(s) 1"
    # a row without an answer (a server error) is no other run's, in a cell the pack has or not
    errors = run_scope.scope(keyed, [("buggy_code", 0, "k0"), ("buggy_code", 1, "x", True), ("model_spec", 1, None, True)],
                             "F")
    assert not errors.foreign and not errors.partial
    assert run_scope.scope(keyed, [("buggy_code", 0, "k0"), ("buggy_code", 1, "k1"), ("model_spec", 1, None, False)],
                           "F").foreign_line() == "model_spec on problem(s) 1"
