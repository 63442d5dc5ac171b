import shutil

import pytest

from evalmislead_assets.study import problems
from evalmislead_assets.study.problems import DatasetError


def test_ships_164_problems_with_the_fields(tmp_path) -> None:
    df = problems.load_problems(source="local", cache_dir=tmp_path / "hf-cache")
    assert len(df) == 164
    for col in ["task_id", "problem_idx", "entry_point", "declaration", "signature", "docstring", "prompt",
                "canonical_solution", "buggy_solution", "bug_type", "failure_symptoms", "test"]:
        assert df[col].notna().all(), col
    row = df[df.problem_idx == 30].iloc[0]
    assert row.entry_point == "get_positive"
    assert "e < 0" in row.buggy_code and "e > 0" in row.fixed_code
    assert '"""' not in row.buggy_code  # the entry point's docstring is not part of the code condition
    assert problems.LICENSE_FILE.is_file()


def test_corrupted_file_gives_one_line_error_naming_it(tmp_path) -> None:
    bad = tmp_path / "humanevalpack_python.jsonl"
    shutil.copy(problems.DATA_FILE, bad)
    with open(bad, "a") as fh:
        fh.write("{not json\n")
    with pytest.raises(DatasetError) as err:
        problems.load_problems(bad, source="local", cache_dir=tmp_path / "hf-cache")
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


def test_malformed_rows_are_reported_when_hash_check_is_off(tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "Python/0"}\n{broken\n')
    with pytest.raises(DatasetError, match=str(bad)):
        problems.load_problems(bad, expected_sha256=None, source="local", cache_dir=tmp_path / "hf-cache")


def test_an_unknown_source_is_refused_not_read_as_local(tmp_path) -> None:
    with pytest.raises(ValueError, match="'web'"):
        problems.load_problems(source="web", cache_dir=tmp_path)
