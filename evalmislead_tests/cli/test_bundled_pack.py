"""The bundled recording of the 1.5B replays as shipped: every request body is what the current prompts and the
pack's study file send, and it covers all six conditions on all 164 problems (the first command's promise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalmislead_assets import study_models
from evalmislead_assets.cli import answers_cmd, replay
from evalmislead_assets.llm import answer_pack
from evalmislead_assets.study.conditions import CONDITION_NAMES


def test_the_bundled_pack_is_what_the_current_prompts_send(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(replay.DEFAULT_PACK / answer_pack.STUDY_FILE))
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "home"))
    for name in ("EVALMISLEAD_MODELS", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_PROMPTS_DIR", "EVALMISLEAD_PROBLEMS"):
        monkeypatch.delenv(name, raising=False)
    study_models.reset()
    try:
        pack = answer_pack.read_pack(replay.DEFAULT_PACK)
        # a changed template or setting would make the first command refuse the recording: this names it first
        assert answers_cmd.check_pack(pack).bundled == "qwen2.5-coder-1.5b"
    finally:
        study_models.reset()
    assert replay.coverage(pack, list(CONDITION_NAMES)) == {c: 164 for c in CONDITION_NAMES}
    assert replay.default_conditions(replay.DEFAULT_PACK, [], list(CONDITION_NAMES)) == (list(CONDITION_NAMES), "")
