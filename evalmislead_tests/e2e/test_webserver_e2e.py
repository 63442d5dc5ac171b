"""End to end: backfill only thinking=on through a real dagster-webserver + dagster-daemon.

The thinking-off study (one problem, small caps) is materialized first; then
`evalmislead backfill --thinking on` launches the backfill over GraphQL and follows
it until the daemon reports it complete. Nothing of thinking=off may change.
"""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetKey, AssetRecordsFilter, DagsterEventType, DagsterInstance

from evalmislead_assets.jobs import thinking_partition_keys
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.dagster_services import CHAIN_ASSETS, GENERATION_ASSETS, Study, shared_study

pytestmark = pytest.mark.slow

ROW_TABLES = ["model_specs", *CHAIN_ASSETS, "llm_calls"]


@pytest.fixture(scope="session")
def study(tmp_path_factory: pytest.TempPathFactory, llama_server: str) -> Iterator[Study]:
    with shared_study(tmp_path_factory.mktemp("study"), llama_server) as s:
        yield s


def _mode_rows(db: Path, mode: str) -> dict[str, pd.DataFrame]:
    wh = Warehouse(db)
    return {t: wh.query_df(f"SELECT * FROM {t} WHERE thinking = ? ORDER BY ALL", [mode]) for t in ROW_TABLES}


def asset_partition_keys(asset: str, mode: str) -> list[str]:
    """The partitions of a generation asset in one thinking mode: the specs' mode, or each condition's."""
    return [mode] if asset == "model_specs" else thinking_partition_keys(mode)


def _materializations(home: Path, mode: str) -> dict[str, dict[str, int]]:
    """asset -> {partition: storage id} of every materialization event of that mode's partitions."""
    out = {}
    with DagsterInstance.from_config(str(home)) as instance:
        for asset in GENERATION_ASSETS:
            keys = asset_partition_keys(asset, mode)
            records = instance.fetch_materializations(
                AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=keys), limit=10_000
            ).records
            out[asset] = {f"{r.partition_key}#{r.storage_id}": r.storage_id for r in records}
    return out


def _latest_partitions(home: Path, asset: str) -> set[str]:
    with DagsterInstance.from_config(str(home)) as instance:
        return set(instance.get_latest_storage_id_by_partition(AssetKey(asset), DagsterEventType.ASSET_MATERIALIZATION))


@pytest.mark.timeout(2100)  # the backfill's own 1,200 s (1,300 s for the process), plus the shared study's setup
def test_graphql_backfill_of_thinking_on_leaves_thinking_off_untouched(study: Study) -> None:
    home = study.services.home
    off_rows, off_events = _mode_rows(study.db, "off"), _materializations(home, "off")
    assert all(len(rows) for rows in off_rows.values())
    assert all(len(v) == len(asset_partition_keys(a, "off")) for a, v in off_events.items())
    assert not any(_materializations(home, "on").values())

    proc = subprocess.run(
        [str(Path(sys.executable).parent / "evalmislead"), "backfill", "--thinking", "on",
         "--url", study.services.url, "--poll", "3", "--timeout", "1200"],
        env=study.services.env, capture_output=True, text=True, timeout=1300,
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{study.services.logs()}"
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("launched backfill ") and "25 asset partitions with thinking=on" in lines[0]
    assert any(" s] REQUESTED: " in ln for ln in lines), proc.stdout  # progress while it ran
    summary = next(ln for ln in lines if ln.startswith("backfill "))
    assert " COMPLETED" in summary and " success" in summary and "failure" not in summary, proc.stdout

    # thinking=off: same rows, same materialization records, same LLM calls
    after_rows = _mode_rows(study.db, "off")
    for table, before in off_rows.items():
        pd.testing.assert_frame_equal(after_rows[table], before, obj=f"{table} thinking=off rows")
    assert _materializations(home, "off") == off_events
    # thinking=on: every partition materialized, and really generated
    for asset in GENERATION_ASSETS:
        assert set(asset_partition_keys(asset, "on")) <= _latest_partitions(home, asset), asset
    on_rows = _mode_rows(study.db, "on")
    assert len(on_rows["test_generations"]) == 6 and len(on_rows["llm_calls"]) >= 7


LAUNCHPAD_CONFIG = """
query($keys: [AssetKeyInput!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    configField { configType { ... on CompositeConfigType { fields { name description isRequired } } } }
  }
}"""


def test_the_launchpad_shows_each_per_asset_setting_with_the_variable_it_overrides(study: Study) -> None:
    """What the real webserver's launchpad renders for an asset's config: the settings that reach the domain
    as values are optional fields whose description names the EVALMISLEAD_* variable an empty field takes."""
    from evalmislead_assets.cli.webserver_client import WebserverClient
    from evalmislead_tests.wiring.test_launchpad_settings import LAUNCHPAD_SETTINGS

    with WebserverClient(study.services.url) as client:
        nodes = client.query(LAUNCHPAD_CONFIG, {"keys": [{"path": [a]} for a in LAUNCHPAD_SETTINGS]})["assetNodes"]
    fields = {"/".join(n["assetKey"]["path"]): {f["name"]: f for f in n["configField"]["configType"]["fields"]}
              for n in nodes}
    assert set(fields) == set(LAUNCHPAD_SETTINGS)
    for asset, (name, variable) in LAUNCHPAD_SETTINGS.items():
        field = fields[asset][name]
        assert not field["isRequired"] and variable in (field["description"] or ""), (asset, field)
