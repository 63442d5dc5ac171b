"""`evalmislead run`'s header names the output caps a model's study entry sets: the global max_tokens it
prints first do not apply to that model's requests (the 1.5B's screening printed off=768 while asking 2,048)."""

from __future__ import annotations

from evalmislead_assets.cli.run_study import _own_caps
from evalmislead_assets.study.models import ModelSpec


def test_a_model_with_its_own_caps_names_them() -> None:
    spec = ModelSpec(name="m", bundled="qwen2.5-coder-1.5b", max_tokens_off=2048, spec_max_tokens_off=512)
    assert _own_caps(spec) == " (max_tokens_off=2048, spec_max_tokens_off=512)"


def test_a_model_without_caps_adds_nothing() -> None:
    assert _own_caps(ModelSpec(name="m", bundled="qwen2.5-coder-0.5b")) == ""
