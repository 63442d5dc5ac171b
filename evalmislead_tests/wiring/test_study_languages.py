"""Languages in the study file, the asset keys they give, and where their rows go."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from evalmislead_assets import study_models
from evalmislead_assets.llm import embedded_model
from evalmislead_assets.store import schema
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.study.models import StudyError, parse_study

BUNDLED = list(embedded_model.BUNDLED)
ONE = '[[models]]\nname = "coder"\nbundled = "qwen2.5-coder-0.5b"\n'
TWO = ONE + '[[models]]\nname = "other"\nbundled = "qwen2.5-coder-1.5b"\n'


@pytest.mark.parametrize("value", ['["python", "ruby"]', '[]', '"python"', '["python", "python"]', '["java"]',
                                   '[1]'])
def test_a_bad_languages_value_is_one_line_naming_the_field_and_the_allowed_values(value: str) -> None:
    with pytest.raises(StudyError) as err:
        parse_study(f"languages = {value}\n" + ONE, "study.toml", BUNDLED)
    message = str(err.value)
    assert "\n" not in message and message.startswith("study.toml: languages = ")
    assert '"python", "java", "js"' in message


def test_languages_default_to_python_and_keep_their_order() -> None:
    assert parse_study(ONE, "s", BUNDLED).languages == ("python",)
    study = parse_study('languages = ["python", "js", "java"]\n' + ONE, "s", BUNDLED)
    assert study.languages == ("python", "js", "java") and study.other_languages == ("js", "java")


def test_a_model_named_like_a_language_is_refused() -> None:
    with pytest.raises(StudyError, match="language's name"):
        parse_study('[[models]]\nname = "java"\nbundled = "qwen2.5-coder-0.5b"\n', "s", BUNDLED)


@contextmanager
def _study_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Iterator[None]:
    """``text`` as the study file (EVALMISLEAD_STUDY) while the block runs; the study is read afresh on both ends."""
    path = tmp_path / "study.toml"
    path.write_text(text)
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(path))
    monkeypatch.delenv("EVALMISLEAD_MODELS", raising=False)
    study_models.reset()
    try:
        yield
    finally:
        study_models.reset()


def _keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> set[str]:
    from evalmislead_assets.definitions import build

    with _study_file(tmp_path, monkeypatch, text):
        return {k.to_user_string() for k in build(study_models.study()).resolve_asset_graph().get_all_asset_keys()}


def test_the_default_study_keeps_todays_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = _keys(tmp_path, monkeypatch, ONE)
    assert default == _keys(tmp_path, monkeypatch, 'languages = ["python"]\n' + ONE)
    assert {"problems", "test_generations", "test_outcomes", "study_report"} <= default
    assert not [k for k in default if k.startswith(("java/", "js/")) or "language" in k]


def test_other_languages_sit_inside_the_models_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = _keys(tmp_path, monkeypatch, 'languages = ["python", "java"]\n' + ONE)
    assert {"java/problems", "java/problem_validation", "java/model_specs", "java/test_generations",
            "java/generated_tests", "java/test_outcomes", "language_comparisons", "languages_report"} <= one
    assert "test_generations" in one and not [k for k in one if k.startswith("js/")]
    two = _keys(tmp_path, monkeypatch, 'languages = ["python", "js"]\n' + TWO)
    assert {"js/problems", "coder/js/test_generations", "other/js/test_outcomes", "coder/test_generations"} <= two
    assert "js/test_generations" not in two  # with several models the chain is per model


def test_model_and_language_are_resolved_from_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _study_file(tmp_path, monkeypatch, 'languages = ["python", "js", "java"]\n' + TWO):
        assert study_models.model_for_path(["other", "java", "test_outcomes"]).name == "other"
        assert study_models.language_for_path(["other", "java", "test_outcomes"]) == "java"
        assert study_models.language_for_path(["coder", "test_outcomes"]) == "python"
        assert study_models.model_for_path(["js", "problems"]) is None
        assert study_models.language_for_path(["js", "problems"]) == "js"
        assert study_models.language_for_path(["language_comparisons"]) is None
        assert study_models.model_filter_sql("coder", "js")[1][1:] == ["coder", "js"]


def test_an_old_data_file_opens_with_every_row_as_pythons(tmp_path: Path) -> None:
    """A file written before the language column: the column is added on open, filled with 'python'."""
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    old = [(c, t) for c, t in schema.TABLES["test_outcomes"] if c != schema.LANGUAGE_COLUMN]
    con.execute(f"CREATE TABLE test_outcomes ({', '.join(f'{c} {t}' for c, t in old)})")
    con.execute("INSERT INTO test_outcomes (condition, thinking, task_id, test_id, outcome) "
                "VALUES ('buggy_code', 'off', 'Python/30', 't', 'misleading')")
    con.close()
    df = Warehouse(path).query_df("SELECT task_id, language FROM test_outcomes")
    assert df.to_dict("records") == [{"task_id": "Python/30", "language": "python"}]


def test_the_chain_jobs_select_every_languages_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalmislead_assets.definitions import build

    with _study_file(tmp_path, monkeypatch, 'languages = ["python", "js"]\n' + ONE):
        defs = build(study_models.study())
        job = defs.resolve_job_def("generation_chain_job")
        keys = {k.to_user_string() for k in job.asset_layer.selected_asset_keys}
        assert keys == {"test_generations", "generated_tests", "test_outcomes", "test_coverage", "js/test_generations",
                        "js/generated_tests", "js/test_outcomes"}


def test_pythons_checks_and_report_read_pythons_rows_only(seeded_warehouse: Warehouse) -> None:
    """A Java exclusion must not fail Python's oracle checks, nor enter Python's report."""
    from evalmislead_assets.assets.problems import all_fixed_pass
    from evalmislead_assets.report.inputs import read
    from evalmislead_assets.resources import WarehouseResource

    wh = seeded_warehouse
    wh.append_rows("problem_validation", pd.DataFrame([{
        "task_id": "JavaScript/162", "problem_idx": 162, "buggy_passed": False, "fixed_passed": False,
        "valid": False, "language": "js"}]))
    assert all_fixed_pass(warehouse=WarehouseResource()).passed
    assert "JavaScript/162" not in set(read(wh)["problem_validation"]["task_id"])


def test_a_problem_the_languages_validation_never_saw_fails_the_step() -> None:
    """java/problem_validation ran for problems 0-1; a study of 0-2 must not drop problem 2 silently."""
    from dagster import Failure

    from evalmislead_assets.assets.language_chain import _study_problems

    problems = pd.DataFrame({"task_id": ["Java/0", "Java/1", "Java/2"], "problem_idx": [0, 1, 2]})
    validation = pd.DataFrame({"task_id": ["Java/0", "Java/1"], "valid": [True, False]})
    assert _study_problems(problems, validation, [0, 1])["task_id"].tolist() == ["Java/0"]
    with pytest.raises(Failure, match=r"no row for problem\(s\) 2; materialize it again"):
        _study_problems(problems, validation, [0, 1, 2])


def test_every_languages_test_outcomes_has_pythons_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalmislead_assets.definitions import build

    with _study_file(tmp_path, monkeypatch, 'languages = ["python", "js", "java"]\n' + ONE):
        graph = build(study_models.study()).resolve_asset_graph()
        names: dict[str, set[str]] = {}
        for key in graph.asset_check_keys:
            if key.asset_key.path[-1] == "test_outcomes":
                names.setdefault(key.asset_key.to_user_string(), set()).add(key.name)
    assert set(names) == {"test_outcomes", "js/test_outcomes", "java/test_outcomes"}
    assert len(names["test_outcomes"]) == 3
    assert names["js/test_outcomes"] == names["java/test_outcomes"] == names["test_outcomes"]
