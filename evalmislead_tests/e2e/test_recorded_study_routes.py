"""After a replay of the recorded 1.5B study, the other routes of the same data folder name the same study: a real
dagster-webserver (what `evalmislead dev` starts) tags the assets with the 1.5B, and `evalmislead backfill
--thinking on` is refused in one line before anything is launched. No EVALMISLEAD_STUDY is set anywhere: the
data folder's recorded study decides."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalmislead_assets import recorded_study
from evalmislead_assets.llm import answer_pack
from evalmislead_tests.dagster_services import DagsterServices, dagster_services

pytestmark = pytest.mark.slow

PACK = Path(__file__).resolve().parents[2] / "evalmislead_assets" / "data" / "answers" / "qwen2.5-coder-1.5b-full"


@pytest.fixture(scope="module")
def replayed_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterServices]:
    base = tmp_path_factory.mktemp("recorded_routes")
    db = base / "data" / "evalmislead.duckdb"
    study = PACK / answer_pack.STUDY_FILE
    recorded_study.record(db, study, study.read_text(), pack=str(PACK))  # what the replay records first
    env = {"EVALMISLEAD_HOME": str(base / "data"), "EVALMISLEAD_DB": str(db)}
    with pytest.MonkeyPatch.context() as mp:
        for name in ("EVALMISLEAD_STUDY", "EVALMISLEAD_MODELS", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL"):
            mp.delenv(name, raising=False)
        with dagster_services(base, env, daemon=False) as svc:
            yield svc


def test_the_webserver_tags_the_assets_with_the_recorded_model(replayed_folder: DagsterServices) -> None:
    with replayed_folder.client() as client:
        data = client.query('{ assetNodes { assetKey { path } tags { key value } } }')
    tags = {"/".join(n["assetKey"]["path"]): {t["key"]: t["value"] for t in n["tags"]} for n in data["assetNodes"]}
    assert tags["condition_rates"].get("evalmislead/model") == "qwen2_5_coder_1_5b", tags["condition_rates"]
    assert not any(t.get("evalmislead/model") == "qwen2_5_coder_0_5b" for t in tags.values())


def test_backfill_thinking_on_is_refused_before_launching(replayed_folder: DagsterServices) -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "evalmislead"), "backfill", "--thinking", "on", "--url", replayed_folder.url],
        env=replayed_folder.env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "launched backfill" not in proc.stdout
    assert "model qwen2.5-coder-1.5b cannot think (the bundled qwen2.5-coder-1.5b has no thinking mode" in proc.stderr
    with replayed_folder.client() as client:
        assert client.query("{ partitionBackfillsOrError { ... on PartitionBackfills { results { id } } } }")[
            "partitionBackfillsOrError"]["results"] == []
