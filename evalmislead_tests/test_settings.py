import pytest

from evalmislead_assets import settings
from evalmislead_assets.settings import ConfigError


def test_problem_list_parses_numbers_ranges_and_task_ids() -> None:
    assert settings.parse_problem_list("30,0,1") == [0, 1, 30]
    assert settings.parse_problem_list("0-3, Python/30") == [0, 1, 2, 3, 30]
    assert settings.parse_problem_list("") is None
    assert settings.parse_problem_list("all") is None


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
