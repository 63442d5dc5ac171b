"""The study's protocol is in the repository (the README and the report cite it) and says what the code runs."""

from pathlib import Path

from evalmislead_assets.study.conditions import CONDITION_NAMES

ROOT = Path(__file__).resolve().parents[2]


def test_protocol_is_in_the_repository_and_names_every_condition():
    text = (ROOT / "PROTOCOL.md").read_text(encoding="utf-8")
    assert "analysis_plan_changes.md" in text  # where a run's deviations are recorded
    for condition in CONDITION_NAMES:
        assert f"`{condition}`" in text
    assert "98.75" in text and "[`PROTOCOL.md`](PROTOCOL.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
