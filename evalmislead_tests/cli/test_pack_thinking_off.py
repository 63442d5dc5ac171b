"""The recorded answer pack against the thinking_off setting: the import's body check (every packed request rebuilt
from the prompts and the study's model) passes under the default, so the recorded study's cache keys are those it
was recorded with, and refuses the pack under another mechanism, whose thinking-off bodies differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalmislead_assets import study_models
from evalmislead_assets.cli import answers_cmd
from evalmislead_assets.llm import answer_pack

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "evalmislead_assets" / "data" / "answers" / "qwen2.5-coder-1.5b-full"
STUDY = ROOT / "studies" / "full-1.5b.toml"


@pytest.fixture
def pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> answer_pack.Pack:
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVALMISLEAD_DB", str(tmp_path / "study.duckdb"))
    for name in ("EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL", "EVALMISLEAD_MODELS"):
        monkeypatch.delenv(name, raising=False)
    return answer_pack.read_pack(PACK)


def _study(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(path))
    study_models.reset()


@pytest.mark.slow
def test_the_recorded_pack_is_rebuilt_byte_for_byte_under_the_default(
        pack: answer_pack.Pack, monkeypatch: pytest.MonkeyPatch) -> None:
    _study(STUDY, monkeypatch)
    try:
        spec = answers_cmd.check_pack(pack)
    finally:
        study_models.reset()
    assert spec.thinking_off == "template"
    assert {a.get("thinking") or "off" for a in pack.answers} == {"off"}


@pytest.mark.parametrize("mechanism, difference", [
    ("prefill", "messages: pack"), ("budget0", "thinking_budget_tokens: pack (absent) vs now 0")])
def test_another_mechanism_refuses_the_recorded_pack(pack: answer_pack.Pack, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path, mechanism: str, difference: str) -> None:
    changed = tmp_path / "study.toml"
    changed.write_text(STUDY.read_text(encoding="utf-8") + f'thinking_off = "{mechanism}"\n', encoding="utf-8")
    _study(changed, monkeypatch)
    try:
        with pytest.raises(answer_pack.PackError, match="was asked differently") as info:
            answers_cmd.check_pack(pack)
    finally:
        study_models.reset()
    assert difference in str(info.value) and "[-|off]" in str(info.value)
