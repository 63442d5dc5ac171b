"""The shipped JS and Java splits: their sha256 matches the sums file they came with; programs are built from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalmislead_assets.polyglot.problems import DATA_SHA256, DatasetError, data_file, load_problems, sha256_file

SHARED_SUMS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "HUMANEVALPACK_SHA256SUMS"


@pytest.mark.parametrize("language", ["js", "java"])
def test_shipped_split_matches_the_shared_sums_file(language: str) -> None:
    if not SHARED_SUMS.is_file():
        pytest.skip(f"{SHARED_SUMS} is not beside this checkout")
    sums = dict(reversed(line.split()) for line in SHARED_SUMS.read_text().splitlines() if line.strip())
    name = f"humanevalpack_{language}.jsonl"
    assert sha256_file(data_file(language)) == sums[name] == DATA_SHA256[language]


@pytest.mark.parametrize("language", ["js", "java"])
def test_programs_are_declaration_plus_solution(language: str) -> None:
    problems = load_problems(language)
    assert [p.problem_idx for p in problems] == list(range(164))
    first = problems[0]
    assert first.entry_point == "hasCloseElements"
    assert first.buggy_code.startswith(first.declaration) and first.fixed_code.startswith(first.declaration)
    assert first.buggy_code != first.fixed_code
    if language == "java":
        assert "class Solution" in first.fixed_code and "public class Main" in first.test
    else:
        assert "console.assert" in first.test


def test_a_changed_file_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "humanevalpack_js.jsonl"
    bad.write_text(data_file("js").read_text()[:-10])
    with pytest.raises(DatasetError, match="corrupted or changed.*restore it from the package"):
        load_problems("js", bad)
