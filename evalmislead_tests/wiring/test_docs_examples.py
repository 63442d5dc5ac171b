"""The study files the documentation shows are study files: each ```toml block of docs/ parses with the
project's own reader, and the recipe's models say what the recipe says they do."""

import re
from pathlib import Path

import pytest

from evalmislead_assets.study.models import parse_study
from evalmislead_assets.study_models import BUNDLED_DEFAULTS

DOCS = Path(__file__).resolve().parents[2] / "docs"
_TOML = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    return [(f"{p.name} #{i + 1}", b) for p in sorted(DOCS.rglob("*.md"))
            for i, b in enumerate(_TOML.findall(p.read_text(encoding="utf-8")))]


def test_the_docs_show_study_files() -> None:
    names = {n.split(" ")[0] for n, _ in _blocks()}
    assert {"own-model.md", "study-file.md"} <= names


@pytest.mark.parametrize(("where", "text"), _blocks(), ids=[n for n, _ in _blocks()])
def test_each_study_file_in_the_docs_parses(where: str, text: str) -> None:
    study = parse_study(text, where, BUNDLED_DEFAULTS)
    assert study.models


def test_the_recipe_reaches_each_model_as_it_says() -> None:
    recipe = dict(_blocks())
    local = parse_study(recipe["own-model.md #1"], "gguf", BUNDLED_DEFAULTS).models[0]
    assert local.gguf and local.thinking is False
    gpu = parse_study(recipe["own-model.md #2"], "gpu", BUNDLED_DEFAULTS).models[0]
    assert gpu.urls == ("http://gpu-box:8080",) and gpu.thinking is True and gpu.slots == 4
    hosted = parse_study(recipe["own-model.md #3"], "hosted", BUNDLED_DEFAULTS).models[0]
    assert hosted.api_key_env == "HOSTED_LLM_KEY" and hosted.urls[0].startswith("https://")
    assert "Authorization" not in hosted.headers
    openai = parse_study(recipe["own-model.md #4"], "openai", BUNDLED_DEFAULTS).models[0]
    assert openai.api == "openai" and openai.api_model == "gpt-4o-mini" and openai.api_key_env == "OPENAI_API_KEY"
    several = parse_study(recipe["own-model.md #5"], "several", BUNDLED_DEFAULTS)
    assert [m.name for m in several.models] == ["qwen2.5-coder-1.5b", "qwen3.5-9b", "hosted-coder"]
    r1 = parse_study(recipe["own-model.md #6"], "r1", BUNDLED_DEFAULTS).models[0]
    assert r1.thinking_off == "prefill" and r1.thinking is True
