"""Hosted endpoints with a key: api_key_env in the study file, sent as a bearer token to a real llama-server
started with --api-key; the key is stored nowhere (not in a row, a cache key, the DuckDB file or a log)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evalmislead_assets import study_models
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.llm.llama_server import EmbeddedServer, smollm2_model
from evalmislead_assets.llm.types import ChatRequest
from evalmislead_assets.resources import LLMResource
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.study.models import StudyError, parse_study

KEY = "sk-test-4f1b9e0c2a7d"


def _request() -> ChatRequest:
    return ChatRequest(asset="test_generations", condition="buggy_code", thinking="off", task_id="Python/0",
                       messages=[{"role": "user", "content": "Say hi."}], max_tokens=8, enable_thinking=False)


def test_study_file_refuses_a_key_in_headers_and_bad_names():
    with pytest.raises(StudyError, match="api_key_env"):
        parse_study('[[models]]\nname = "h"\nurls = ["https://x"]\nheaders = {Authorization = "Bearer k"}\n', "s", [])
    with pytest.raises(StudyError, match="must name an environment variable"):
        parse_study('[[models]]\nname = "h"\nurls = ["https://x"]\napi_key_env = "not a name"\n', "s", [])
    spec = parse_study('[[models]]\nname = "h"\nurls = ["https://x"]\napi_key_env = "MY_KEY"\nthinking = true\n',
                       "s", []).models[0]
    assert spec.api_key_env == "MY_KEY" and spec.thinking is True


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_server_that_requires_a_key_answers_through_api_key_env(tmp_path: Path, monkeypatch, caplog):
    server = EmbeddedServer(model=smollm2_model(), parallel=1, ctx_per_slot=1024, threads=1,
                            extra_args=["--api-key", KEY], log_path=tmp_path / "server.log").start()
    try:
        study = tmp_path / "study.toml"
        study.write_text(f'[[models]]\nname = "hosted"\nurls = ["{server.url}"]\napi_key_env = "EVALMISLEAD_TEST_KEY"\n')
        monkeypatch.setenv("EVALMISLEAD_STUDY", str(study))
        for name in ("EVALMISLEAD_MODELS", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL"):
            monkeypatch.delenv(name, raising=False)
        study_models.reset()
        spec = study_models.study().models[0]
        wh = Warehouse(tmp_path / "db.duckdb")

        monkeypatch.delenv("EVALMISLEAD_TEST_KEY", raising=False)
        with pytest.raises(ConfigError, match="EVALMISLEAD_TEST_KEY, which is not set"):
            LLMResource().run_batch(wh, [_request()], model=spec)

        monkeypatch.setenv("EVALMISLEAD_TEST_KEY", "wrong-key")
        client = LLMResource(retries=0).client(model=spec)
        with caplog.at_level(logging.DEBUG):
            results, _ = client.run_batch(wh, [_request()])
        assert results[0].error and "HTTP 401" in results[0].error and "Invalid API Key" in results[0].error

        monkeypatch.setenv("EVALMISLEAD_TEST_KEY", KEY)
        with caplog.at_level(logging.DEBUG):
            results = LLMResource().run_batch(wh, [_request()], model=spec)
        assert results[0].error is None and results[0].text is not None
        assert KEY not in caplog.text
        assert KEY.encode() not in (tmp_path / "db.duckdb").read_bytes()
        wal = tmp_path / "db.duckdb.wal"
        assert not wal.exists() or KEY.encode() not in wal.read_bytes()
        stored = wh.query_df("SELECT request_json FROM llm_cache")["request_json"].tolist()
        assert stored and all(KEY not in r and "Authorization" not in r for r in stored)
    finally:
        server.stop()
        study_models.reset()


def test_a_hosted_openai_style_endpoint_gets_its_model_id_and_only_openai_fields(tmp_path: Path, monkeypatch):
    """A hosted endpoint has no /props, needs its model id and refuses llama-server's own body fields (as
    OpenAI answers "Unrecognized request argument supplied: cache_prompt"): api = "openai" and api_model."""
    from evalmislead_tests.fake_llm_server import FakeLLMServer

    with pytest.raises(StudyError, match='must be "llama.cpp"'):
        parse_study('[[models]]\nname = "h"\nurls = ["https://x"]\napi = "anthropic"\n', "s", [])
    with pytest.raises(StudyError, match="give urls too"):
        parse_study('[[models]]\nname = "h"\nbundled = "qwen2.5-coder-0.5b"\napi_model = "gpt"\n', "s",
                    ["qwen2.5-coder-0.5b"])
    with FakeLLMServer() as fake:
        fake.openai_style = ("gpt-test-mini",)
        wh = Warehouse(tmp_path / "db.duckdb")
        for name in ("EVALMISLEAD_MODELS", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL"):
            monkeypatch.delenv(name, raising=False)
        plain = parse_study(f'[[models]]\nname = "hosted"\nurls = ["{fake.url}"]\n', "s", []).models[0]
        (refused,) = LLMResource(retries=0).client(model=plain).run_batch(wh, [_request()])[0]
        assert "HTTP 400" in refused.error and "Unrecognized request argument supplied" in refused.error
        spec = parse_study(f'[[models]]\nname = "hosted"\nurls = ["{fake.url}"]\napi = "openai"\n'
                           'api_model = "gpt-test-mini"\n', "s", []).models[0]
        (answer,) = LLMResource(retries=0).client(model=spec).run_batch(wh, [_request()])[0]
        assert answer.error is None and answer.text == "echo: Say hi."
        body = fake.bodies[-1]
        assert body["model"] == "gpt-test-mini" and set(body) == {"model", "messages", "temperature", "seed",
                                                                    "max_tokens"}
