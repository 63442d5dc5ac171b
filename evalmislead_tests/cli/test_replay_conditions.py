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


def test_a_request_answered_by_another_with_the_same_body_counts_for_its_problem(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # signature_only asks problems 3 and 4 the same (same signature): one answer, labelled 3; the manifest's
    # shared_requests names problem 4
    pack = _pack(tmp_path, {c: 5 for c in EVERY})
    answers = [dict(a, cache_key=f"k{n}") for n, a in enumerate(pack.answers)
               if not (a.get("condition") == "signature_only" and a["task_id"] == "Python/4")]
    key = next(a["cache_key"] for a in answers if a.get("condition") == "signature_only" and a["task_id"] == "Python/3")
    _with(monkeypatch, answer_pack.Pack(tmp_path, {}, answers, {}))
    chosen, line = replay.default_conditions(tmp_path, [], EVERY)
    assert "signature_only" not in chosen and "signature_only (4 of 5 problems)" in line
    shared = {answer_pack.SHARED: [{"asset": "test_generations", "condition": "signature_only", "thinking": "off",
                                    "task_id": "Python/4", "cache_key": key}]}
    full = answer_pack.Pack(tmp_path, shared, answers, {})
    assert len(full.labelled()) == len(answers) + 1
    _with(monkeypatch, full)
    assert replay.default_conditions(tmp_path, [], EVERY) == (EVERY, "")
