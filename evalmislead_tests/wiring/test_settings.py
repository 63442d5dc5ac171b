import pytest

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError


def test_problem_list_parses_numbers_ranges_and_task_ids() -> None:
    assert settings.parse_problem_list("30,0,1") == [0, 1, 30]
    assert settings.parse_problem_list("0-3, Python/30") == [0, 1, 2, 3, 30]
    assert settings.parse_problem_list("all") is None


@pytest.mark.parametrize("raw", ["", " ", ",", "5-3"])
def test_empty_problem_list_or_reversed_range_is_an_error_not_all_or_none(raw: str) -> None:
    with pytest.raises(ConfigError, match="EVALMISLEAD_PROBLEMS"):
        settings.parse_problem_list(raw)


@pytest.mark.parametrize("raw", ["abc", "1,x", "200", "-1"])
def test_bad_problem_list_is_a_one_line_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings.parse_problem_list(raw)
    msg = str(err.value)
    assert "EVALMISLEAD_PROBLEMS" in msg and "\n" not in msg


def test_max_tokens_defaults_and_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALMISLEAD_MAX_TOKENS_OFF", raising=False)
    monkeypatch.delenv("EVALMISLEAD_MAX_TOKENS_ON", raising=False)
    assert settings.max_tokens("off") == 4096
    assert settings.max_tokens("on") == 16384
    monkeypatch.setenv("EVALMISLEAD_MAX_TOKENS_OFF", "192")
    assert settings.max_tokens("off") == 192
    monkeypatch.setenv("EVALMISLEAD_MAX_TOKENS_OFF", "lots")
    with pytest.raises(ConfigError, match="EVALMISLEAD_MAX_TOKENS_OFF"):
        settings.max_tokens("off")
    monkeypatch.setenv("EVALMISLEAD_MAX_TOKENS_OFF", "0")
    with pytest.raises(ConfigError, match="at least 1"):
        settings.max_tokens("off")


def test_llm_urls_split_and_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_LLM_URL", "http://a:1/, http://b:2")
    assert settings.llm_urls() == ["http://a:1", "http://b:2"]
    monkeypatch.setenv("EVALMISLEAD_LLM_URL", "localhost:8080")
    with pytest.raises(ConfigError, match="http://"):
        settings.llm_urls()


def test_db_path_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("EVALMISLEAD_DB", str(tmp_path / "x.duckdb"))
    assert settings.db_path() == tmp_path / "x.duckdb"


def test_report_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("EVALMISLEAD_REPORT_DIR", str(tmp_path / "rep"))
    assert settings.report_dir() == tmp_path / "rep"
    monkeypatch.delenv("EVALMISLEAD_REPORT_DIR")
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path))
    assert settings.report_dir() == tmp_path / "report"


def test_review_csv_path_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("EVALMISLEAD_REVIEW_CSV", str(tmp_path / "x.csv"))
    assert settings.review_csv_path() == tmp_path / "x.csv"
    monkeypatch.delenv("EVALMISLEAD_REVIEW_CSV")
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path))
    assert settings.review_csv_path() == tmp_path / "review" / "spec_labels_review.csv"


def test_folders_are_read_when_asked(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path))
    for name in ("EVALMISLEAD_EXPORT_DIR", "EVALMISLEAD_PROMPTS_DIR", "EVALMISLEAD_ANALYSIS_PLAN"):
        monkeypatch.delenv(name, raising=False)
    assert settings.export_dir() == tmp_path / "export"
    assert settings.analysis_plan_path() == settings.PROJECT_ROOT / "prompts" / "analysis_plan.json"
    monkeypatch.setenv("EVALMISLEAD_PROMPTS_DIR", str(tmp_path / "p"))
    assert settings.prompts_dir() == tmp_path / "p"  # not frozen at import
    assert settings.analysis_plan_path() == tmp_path / "p" / "analysis_plan.json"
    monkeypatch.setenv("EVALMISLEAD_EXPORT_DIR", str(tmp_path / "x"))
    assert settings.export_dir() == tmp_path / "x"


@pytest.mark.parametrize(("name", "read", "bad"), [
    ("EVALMISLEAD_SANDBOX_WORKERS", settings.sandbox_workers, "0"),
    ("EVALMISLEAD_SANDBOX_WORKERS", settings.sandbox_workers, "many"),
    ("EVALMISLEAD_JUDGE_MAX_TOKENS", settings.judge_max_tokens, "x"),
    ("EVALMISLEAD_DATASET_SOURCE", settings.dataset_source, "web"),
])
def test_bad_values_are_one_line_errors(monkeypatch: pytest.MonkeyPatch, name: str, read, bad: str) -> None:
    monkeypatch.setenv(name, bad)
    with pytest.raises(ConfigError) as err:
        read()
    assert name in str(err.value) and "\n" not in str(err.value)


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EVALMISLEAD_SANDBOX_WORKERS", "EVALMISLEAD_JUDGE_MAX_TOKENS", "EVALMISLEAD_DATASET_SOURCE",
                 "EVALMISLEAD_WEBSERVER_URL", "EVALMISLEAD_JUDGE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert settings.sandbox_workers() is None and settings.judge_max_tokens() == 256
    assert settings.dataset_source() == "local" and settings.webserver_url() == "http://127.0.0.1:3000"
    assert settings.judge_url() == ""
    monkeypatch.setenv("EVALMISLEAD_SANDBOX_WORKERS", "3")
    assert settings.sandbox_workers() == 3
