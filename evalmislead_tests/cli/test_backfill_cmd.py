"""`evalmislead backfill`: which partitions it asks for, launched against a real dagster-webserver.

No daemon runs here, so the launched backfills stay requested: these tests check what
was asked for. test_webserver_e2e follows a backfill to the end with the daemon.
"""

from collections.abc import Iterator

import pytest

from evalmislead_assets.cli import main
from evalmislead_assets.cli.backfill_cmd import mode_partitions
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.jobs import thinking_partition_keys
from evalmislead_tests.dagster_services import CHAIN_ASSETS, DagsterServices, dagster_services, free_port

GRID = {"condition": ["buggy_code", "fixed_code"], "thinking": ["off", "on"]}


def test_mode_partitions_fixes_the_thinking_dimension() -> None:
    got = mode_partitions({"a": GRID, "b": {"thinking": ["off", "on"]}}, "on")
    assert got == {"a": ["buggy_code|on", "fixed_code|on"], "b": ["on"]}
    # dimension values join in dimension-name order, whatever order they come in
    assert mode_partitions({"a": {"thinking": ["off", "on"], "condition": ["x"]}}, "off") == {"a": ["x|off"]}


@pytest.mark.parametrize(("dims", "message"), [
    (None, "not partitioned"),
    ({"condition": ["x"], "model": ["y"]}, "no thinking dimension"),
    ({"condition": ["x"]}, "has no partition 'on'"),
])
def test_mode_partitions_rejects_other_assets(dims: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        mode_partitions({"a": dims}, "on")  # type: ignore[dict-item]


@pytest.fixture(scope="module")
def webserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterServices]:
    """A one-model study whose model may think (a server by URL: the capability is not declared); the CLI
    reads the same settings as the webserver."""
    base = tmp_path_factory.mktemp("backfill_cmd")
    env = {"EVALMISLEAD_DB": str(base / "study.duckdb"), "EVALMISLEAD_LLM_URL": "http://127.0.0.1:9"}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        with dagster_services(base, env, daemon=False) as svc:
            yield svc


def test_a_model_that_cannot_think_is_refused_before_anything_launches(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundled coder has no thinking mode: `backfill --thinking on` exits 2 in one line that says where the
    capability comes from, before it looks for a webserver (none answers at this URL)."""
    monkeypatch.setenv("EVALMISLEAD_DB", f"{tmp_path}/study.duckdb")
    for name in ("EVALMISLEAD_LLM_URL", "EVALMISLEAD_STUDY", "EVALMISLEAD_MODELS"):
        monkeypatch.delenv(name, raising=False)
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["backfill", "--thinking", "on", "--url", url, "--no-wait"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Dagster webserver" not in err, err
    assert "model qwen2.5-coder-0.5b cannot think (the bundled qwen2.5-coder-0.5b has no thinking mode" in err
    assert "thinking = false in" not in err  # no such line exists in the study file
    # thinking off is not refused: it goes on to look for the webserver
    assert main(["backfill", "--thinking", "off", "--url", url, "--no-wait"]) == 2
    assert "no Dagster webserver answering" in capsys.readouterr().err


def _launched_id(out: str) -> str:
    line = next(ln for ln in out.splitlines() if ln.startswith("launched backfill "))
    return line.split()[2].rstrip(":")


@pytest.mark.slow
def test_launches_exactly_the_thinking_on_partitions(webserver: DagsterServices, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backfill", "--thinking", "on", "--url", webserver.url, "--no-wait"]) == 0
    captured = capsys.readouterr()
    assert "backfill loop is not running" in captured.err  # no daemon in this test
    backfill_id = _launched_id(captured.out)
    assert f"{webserver.url}/runs/b/{backfill_id}" in captured.out
    with webserver.client() as client:
        state = client.backfill(backfill_id)
        assert state.status == "REQUESTED"
        assert {a.asset: a.targeted for a in state.assets} == {"model_specs": 1, **dict.fromkeys(CHAIN_ASSETS, 6)}
        assert client.targeted_partitions(backfill_id, "model_specs") == ["on"]
        for asset in CHAIN_ASSETS:
            assert sorted(client.targeted_partitions(backfill_id, asset)) == sorted(thinking_partition_keys("on"))


@pytest.mark.slow
def test_assets_option_limits_the_selection(webserver: DagsterServices, capsys: pytest.CaptureFixture[str]) -> None:
    # model_spec|off reads model_specs [off], which is neither materialized nor in the backfill: one line,
    # nothing launched
    assert main(["backfill", "--thinking", "off", "--assets", "test_generations", "--url", webserver.url,
                 "--no-wait"]) == 2
    captured = capsys.readouterr()
    assert "launched backfill" not in captured.out and captured.err.count("\n") == 1, captured.err
    assert ("nothing launched: the backfill reads partitions that are neither materialized nor in it: "
            "model_specs [off] (read by test_generations [model_spec|off]); add model_specs to --assets or "
            "materialize them first") in captured.err
    # with the specs in it, it launches; the specs' own partition is targeted too
    assert main(["backfill", "--thinking", "off", "--assets", "model_specs,test_generations", "--url", webserver.url,
                 "--no-wait"]) == 0
    backfill_id = _launched_id(capsys.readouterr().out)
    with webserver.client() as client:
        assert {a.asset for a in client.backfill(backfill_id).assets} == {"model_specs", "test_generations"}
        assert sorted(client.targeted_partitions(backfill_id, "test_generations")) == sorted(
            thinking_partition_keys("off"))


@pytest.mark.slow
@pytest.mark.parametrize(("assets", "message"), [
    ("problems", "problems is not partitioned"),
    ("no_such_asset", "no asset no_such_asset"),
])
def test_bad_assets_are_one_line_errors(
    webserver: DagsterServices, assets: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["backfill", "--thinking", "on", "--assets", assets, "--url", webserver.url]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_no_webserver_is_a_one_line_error(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a model by URL (its thinking capability is not declared), so the refusal is the webserver's
    monkeypatch.setenv("EVALMISLEAD_DB", f"{tmp_path}/study.duckdb")
    monkeypatch.setenv("EVALMISLEAD_LLM_URL", "http://127.0.0.1:9")
    for name in ("EVALMISLEAD_STUDY", "EVALMISLEAD_MODELS"):
        monkeypatch.delenv(name, raising=False)
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["backfill", "--thinking", "on", "--url", url]) == 2
    err = capsys.readouterr().err
    assert f"no Dagster webserver answering at {url}" in err and err.count("\n") == 1



@pytest.mark.slow
def test_client_asset_selection_with_partition_names(webserver: DagsterServices) -> None:
    """assetSelection + partitionNames (what the UI sends): names apply to the selection's roots and
    flow downstream through the partition mappings, so model_specs 'on' reaches every *|on chain partition."""
    with webserver.client() as client:
        backfill_id = client.launch_asset_backfill(["model_specs", *CHAIN_ASSETS], ["on"], title="by names")
        assert client.targeted_partitions(backfill_id, "model_specs") == ["on"]
        for asset in CHAIN_ASSETS:
            assert sorted(client.targeted_partitions(backfill_id, asset)) == sorted(thinking_partition_keys("on"))
        assert client.backfill_runs(backfill_id) == []  # nothing runs without the daemon


# ---------------------------------------------------------------- a study of two models

TWO_MODELS = (
    '[[models]]\nname = "alpha"\nurls = ["http://127.0.0.1:9"]\n\n'
    '[[models]]\nname = "beta-1.5"\nurls = ["http://127.0.0.1:9"]\n'
)


@pytest.fixture(scope="module")
def two_model_webserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterServices]:
    base = tmp_path_factory.mktemp("backfill_two_models")
    (base / "study.toml").write_text(TWO_MODELS)
    env = {"EVALMISLEAD_DB": str(base / "study.duckdb"), "EVALMISLEAD_STUDY": str(base / "study.toml")}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        mp.delenv("EVALMISLEAD_LLM_URL", raising=False)  # the one-model fixture's, still set for its module
        with dagster_services(base, env, daemon=False) as svc:
            yield svc


@pytest.mark.slow
def test_backfill_of_one_models_thinking_on(
    two_model_webserver: DagsterServices, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evalmislead backfill --thinking on --models beta-1.5`: that model's thinking=on partitions, nothing of alpha's."""
    assert main(["backfill", "--thinking", "on", "--models", "beta-1.5", "--url", two_model_webserver.url,
                 "--no-wait"]) == 0
    backfill_id = _launched_id(capsys.readouterr().out)
    with two_model_webserver.client() as client:
        targeted = {a.asset: a.targeted for a in client.backfill(backfill_id).assets}
        assert targeted == {"beta_1_5/model_specs": 1, **{f"beta_1_5/{a}": 6 for a in CHAIN_ASSETS}}
        assert sorted(client.targeted_partitions(backfill_id, "beta_1_5/test_generations")) == sorted(
            thinking_partition_keys("on"))
    # without --models: every model's
    assert main(["backfill", "--thinking", "on", "--url", two_model_webserver.url, "--no-wait"]) == 0
    backfill_id = _launched_id(capsys.readouterr().out)
    with two_model_webserver.client() as client:
        assets = {a.asset for a in client.backfill(backfill_id).assets}
        assert assets == {f"{m}/{a}" for m in ("alpha", "beta_1_5") for a in ("model_specs", *CHAIN_ASSETS)}
    assert main(["backfill", "--thinking", "on", "--models", "gamma", "--url", two_model_webserver.url]) == 2
    assert "the webserver's models are ['alpha', 'beta_1_5']" in capsys.readouterr().err


@pytest.mark.slow
def test_ui_selection_of_one_models_group_backfills_only_it(two_model_webserver: DagsterServices) -> None:
    """What the UI sends for one model's group with partition 'on': its assets only, every *|on partition."""
    with two_model_webserver.client() as client:
        keys = ["alpha/model_specs", *(f"alpha/{a}" for a in CHAIN_ASSETS)]
        backfill_id = client.launch_asset_backfill(keys, ["on"], title="alpha on")
        assert {a.asset for a in client.backfill(backfill_id).assets} == set(keys)
        assert sorted(client.targeted_partitions(backfill_id, "alpha/test_outcomes")) == sorted(
            thinking_partition_keys("on"))
