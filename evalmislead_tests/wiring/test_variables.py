"""The environment variables: one registry, the docs' table written from it, the code reading only those."""

from pathlib import Path

import pytest

from evalmislead_assets import variables

ROOT = Path(__file__).resolve().parents[2]


def _names_read(paths: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in paths:
        names.update(variables.NAME.findall(path.read_text(encoding="utf-8")))
    return names


def _code_files() -> list[Path]:
    return [*(ROOT / "evalmislead_assets").rglob("*.py"), *(ROOT / "scripts").glob("*.sh"),
            *(ROOT / "scripts").glob("*.py")]


def test_the_docs_table_is_the_registrys() -> None:
    page = variables.docs_path(ROOT).read_text(encoding="utf-8")
    assert variables.with_table(page) == page, (
        "docs/configuration.md's variables table is out of date: run "
        "`.venv/bin/python -m evalmislead_assets.variables --write-docs`")


def test_a_stale_table_is_found(tmp_path: Path) -> None:
    page = variables.docs_path(ROOT).read_text(encoding="utf-8")
    stale = page.replace("| `EVALMISLEAD_DB` |", "| `EVALMISLEAD_DATABASE` |")
    assert stale != page and variables.with_table(stale) == page
    with pytest.raises(ValueError, match="markers"):
        variables.with_table("# a page without the table\n")


def test_every_variable_the_code_reads_is_in_the_registry_and_none_is_stale() -> None:
    read = _names_read(_code_files())
    registered = set(variables.BY_NAME) | set(variables.INTERNAL)
    assert read - registered == set(), "variables read but missing from evalmislead_assets/variables.py"
    outside = _names_read([p for p in _code_files() if p.name != "variables.py"])
    assert set(variables.BY_NAME) - outside == set(), "registered variables that no code reads"


def test_only_row_settings_enter_the_fingerprint() -> None:
    from evalmislead_assets.run_tags import settings_fingerprint

    base = settings_fingerprint("study", {}, {})
    for v in variables.VARIABLES:
        changed = settings_fingerprint("study", {}, {v.name: "x"})
        assert (changed != base) == v.row_setting, v.name
