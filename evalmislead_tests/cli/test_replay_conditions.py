"""Which conditions `evalmislead run --replay` runs: named ones as given; without any, every condition a pack
still being recorded has finished on all its problems, and one line naming the ones it leaves out."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalmislead_assets.cli import replay
from evalmislead_assets.llm import answer_pack

EVERY = ["buggy_code", "fixed_code", "model_spec", "signature_only"]


def _pack(folder: Path, per_condition: dict[str, int], problems: int = 5) -> answer_pack.Pack:
    answers = []
    for i in range(problems):
        task = f"Python/{i}"
        answers += [{"asset": "model_specs", "task_id": task, "thinking": "off"},
                    {"asset": "spec_labels", "task_id": task, "thinking": "off"}]
        answers += [{"asset": "test_generations", "condition": c, "task_id": task, "thinking": "off"}
                    for c, n in per_condition.items() if i < n]
    return answer_pack.Pack(folder, {}, answers, {})


def _with(monkeypatch: pytest.MonkeyPatch, pack: answer_pack.Pack) -> None:
    monkeypatch.setattr(answer_pack, "read_pack", lambda folder, check_model=True: pack)


def test_a_recording_under_way_is_replayed_on_its_finished_conditions(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _with(monkeypatch, _pack(tmp_path, {"buggy_code": 5, "fixed_code": 5, "model_spec": 5, "signature_only": 2}))
    chosen, line = replay.default_conditions(tmp_path, [], EVERY)
    assert chosen == ["buggy_code", "fixed_code", "model_spec"]
    assert "signature_only (2 of 5 problems)" in line and "\n" not in line and "--conditions all" in line
    # named conditions are kept as given, "all" is every one; nothing is left out silently
    assert replay.default_conditions(tmp_path, ["signature_only"], EVERY) == (["signature_only"], "")
    assert replay.default_conditions(tmp_path, ["all"], EVERY) == (EVERY, "")


def test_a_complete_pack_replays_every_condition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _with(monkeypatch, _pack(tmp_path, {c: 5 for c in EVERY}))
    assert replay.default_conditions(tmp_path, [], EVERY) == (EVERY, "")
    # a condition with no answer at all is named too, never dropped without a word
    _with(monkeypatch, _pack(tmp_path, {"buggy_code": 5}))
    chosen, line = replay.default_conditions(tmp_path, [], EVERY)
    assert chosen == ["buggy_code"] and "signature_only (0 of 5 problems)" in line
