"""In the UI: what a template or setting change marks stale, as a real dagster-webserver's
GraphQL reports it (``staleStatus``/``staleCauses``, by partition: what the asset graph and the partition
view render).

A one-problem thinking-off study of two conditions is materialized in real Dagster runs (each in its own
process, so each reads the templates as a new run would) against a fake server, up to ``condition_rates``
and ``bootstrap_comparisons``. Then:

* the same partition generated again with nothing changed (every answer from the cache) leaves everything
  fresh;
* ``fixed_code|off`` generated again with another output cap (a study setting, same template) makes what
  was built from it stale: its ``generated_tests`` partition and both analysis assets, naming that partition;
* ``prompts/test_generation.md`` edited and the code location reloaded: every ``test_generations`` partition
  made with the old template is stale ("has a new code version"); ``buggy_code|off`` generated again is
  fresh, the partition left alone stays stale, and what reads the new answers is stale, naming them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalmislead_assets.cli.webserver_client import WebserverClient
from evalmislead_tests.dagster_services import DagsterServices, dagster_services
from evalmislead_tests.fake_llm_server import FakeLLMServer

pytestmark = pytest.mark.slow

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = ["buggy_code|off", "fixed_code|off"]
PARTITIONED = ["test_generations", "generated_tests"]
# the chain this test seeds and watches (coverage left out: its staleness is not what is checked here)
CHAIN_ASSETS = ["test_generations", "generated_tests", "test_outcomes"]
ANALYSIS = ["condition_rates", "bootstrap_comparisons"]

STEPS = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from evalmislead_tests.dagster_services import materialize_steps
    materialize_steps(Path(sys.argv[1]), {}, [(names, key) for names, key in json.loads(sys.argv[2])])
""")

_CAUSE = "{ key { path } partitionKey category reason dependency { path } dependencyPartitionKey }"
BY_PARTITION = """
query($keys: [AssetKeyInput!], $partitions: [String!]) { assetNodes(assetKeys: $keys) {
  assetKey { path } staleStatusByPartition(partitions: $partitions)
  staleCausesByPartition(partitions: $partitions) %s } }""" % _CAUSE
UNPARTITIONED = """
query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) {
  assetKey { path } staleStatus staleCauses %s } }""" % _CAUSE
RELOAD = """
mutation { reloadRepositoryLocation(repositoryLocationName: "evalmislead") { __typename
  ... on WorkspaceLocationEntry { loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } }"""
CODE_VERSION = """
query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path } opVersion } }"""

Cause = tuple[str, str | None, str, str]  # the asset partition that changed, category, reason (a root cause)


def _materialize(env: dict[str, str], steps: list[tuple[list[str], str | None]]) -> None:
    """Each step a real Dagster run, in a fresh process (the template's hash is read at import, as a run does)."""
    proc = subprocess.run([sys.executable, "-c", STEPS, env["DAGSTER_HOME"], json.dumps(steps)], env=env,
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]


def _causes(raw: list[dict[str, Any]] | None) -> set[Cause]:
    return {("/".join(c["key"]["path"]), c["partitionKey"], c["category"], c["reason"]) for c in raw or []}


def stale(client: WebserverClient) -> dict[tuple[str, str | None], tuple[str, set[Cause]]]:
    """(asset, partition or None) -> (stale status, its causes), as the webserver reports them."""
    out: dict[tuple[str, str | None], tuple[str, set[Cause]]] = {}
    nodes = client.query(BY_PARTITION, {"keys": [{"path": [a]} for a in PARTITIONED],
                                        "partitions": PARTITIONS})["assetNodes"]
    for node in nodes:
        for key, status, causes in zip(PARTITIONS, node["staleStatusByPartition"], node["staleCausesByPartition"]):
            out[(node["assetKey"]["path"][-1], key)] = (status, _causes(causes))
    for node in client.query(UNPARTITIONED, {"keys": [{"path": [a]} for a in ANALYSIS]})["assetNodes"]:
        out[(node["assetKey"]["path"][-1], None)] = (node["staleStatus"], _causes(node["staleCauses"]))
    assert len(out) == len(PARTITIONED) * len(PARTITIONS) + len(ANALYSIS), out
    return out


def _reload(services: DagsterServices, client: WebserverClient) -> None:
    entry = client.query(RELOAD)["reloadRepositoryLocation"]
    assert entry["__typename"] == "WorkspaceLocationEntry", entry
    deadline = time.monotonic() + 600
    while True:  # the code server is restarted; its entry is LOADED again once the new definitions are read
        entries = client.query("{ workspaceOrError { ... on Workspace { locationEntries { loadStatus "
                               "locationOrLoadError { __typename ... on PythonError { message } } } } } }")
        (entry,) = entries["workspaceOrError"]["locationEntries"]
        if entry["loadStatus"] == "LOADED":
            assert entry["locationOrLoadError"]["__typename"] != "PythonError", entry
            return
        assert time.monotonic() < deadline, services.logs()
        time.sleep(1.0)


def _code_version(client: WebserverClient) -> str:
    (node,) = client.query(CODE_VERSION, {"keys": [{"path": ["test_generations"]}]})["assetNodes"]
    return str(node["opVersion"])


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.mark.timeout(2400)
def test_a_template_or_setting_change_marks_what_it_made_stale_in_the_ui(tmp_path: Path, fake: FakeLLMServer) -> None:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    for template in (PROJECT_ROOT / "prompts").glob("*"):
        if template.is_file():
            (prompts / template.name).write_bytes(template.read_bytes())
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes((PROJECT_ROOT / "dagster.yaml").read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALMISLEAD_", "DAGSTER_"))}
    settings = {"EVALMISLEAD_PROMPTS_DIR": str(prompts), "EVALMISLEAD_DB": str(tmp_path / "data" / "s.duckdb"),
                "EVALMISLEAD_HOME": str(tmp_path / "data"), "EVALMISLEAD_PROBLEMS": "30",
                "EVALMISLEAD_MAX_TOKENS_OFF": "128", "EVALMISLEAD_LLM_URL": fake.url,
                "PYTHONPATH": str(PROJECT_ROOT)}
    env.update(settings, DAGSTER_HOME=str(home))
    buggy, fixed = PARTITIONS
    _materialize(env, [(["problems", "problem_validation"], None), (["model_specs"], "off"),
                       (CHAIN_ASSETS, buggy), (CHAIN_ASSETS, fixed), (ANALYSIS, None)])

    with dagster_services(tmp_path, settings, daemon=False, existing_home=True) as services, \
            services.client(timeout_s=300) as client:
        assert {status for status, _ in stale(client).values()} == {"FRESH"}, stale(client)

        # the same partition again, nothing changed: every answer from the cache, nothing goes stale
        sent = fake.chat_requests
        _materialize(env, [(["test_generations"], buggy)])
        assert fake.chat_requests == sent
        assert {status for status, _ in stale(client).values()} == {"FRESH"}, stale(client)

        # a study setting (the output cap), same template: new answers for fixed_code|off
        env["EVALMISLEAD_MAX_TOKENS_OFF"] = "96"
        _materialize(env, [(["test_generations"], fixed)])
        assert fake.chat_requests == sent + 1
        now = stale(client)
        new_fixed = ("test_generations", fixed, "DATA", "has a new data version")  # what the UI names as the cause
        assert now[("generated_tests", fixed)] == ("STALE", {new_fixed}), now
        for asset in ANALYSIS:
            assert now[(asset, None)] == ("STALE", {new_fixed}), (asset, now)
        for fresh in [("test_generations", buggy), ("test_generations", fixed), ("generated_tests", buggy)]:
            assert now[fresh] == ("FRESH", set()), (fresh, now)

        # the template edited: once the code location is reloaded, both partitions made with the old one are stale
        template = prompts / "test_generation.md"
        template.write_text(template.read_text() + "\nAlso test empty inputs.\n")
        before = _code_version(client)
        _reload(services, client)
        assert _code_version(client) != before
        now = stale(client)
        for key in PARTITIONS:
            assert now[("test_generations", key)] == ("STALE", {("test_generations", key, "CODE",
                                                                  "has a new code version")}), now

        # buggy_code|off generated again with the new template
        _materialize(env, [(["test_generations"], buggy)])
        assert fake.chat_requests == sent + 2
        now = stale(client)
        new_buggy = ("test_generations", buggy, "DATA", "has a new data version")
        assert now[("test_generations", buggy)] == ("FRESH", set()), now
        assert now[("test_generations", fixed)] == ("STALE", {("test_generations", fixed, "CODE",  # the old
                                                                "has a new code version")}), now  # template's
        assert now[("generated_tests", buggy)] == ("STALE", {new_buggy}), now
        for asset in ANALYSIS:
            assert now[(asset, None)] == ("STALE", {new_fixed, new_buggy}), (asset, now)
