"""Models as data: the study file, the model selection, per-model asset keys, jobs and row scoping."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetKey, DagsterInstance, materialize

from evalmislead_assets import study_models
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.llm import embedded_model
from evalmislead_assets.study.models import ModelSpec, Study, StudyError, model_reach, parse_study, select

BUNDLED = list(embedded_model.BUNDLED)
TWO = """
[[models]]
name = "alpha"
urls = ["http://127.0.0.1:1"]
parameters = "0.5B"
family = "F"

[[models]]
name = "beta-1.5"
urls = ["http://127.0.0.1:2"]
slots = 1
max_tokens_off = 99
chat_template_kwargs = {reasoning_effort = "low"}
parameters = "1.5B"
family = "F"
"""


def _study(path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> Study:
    path.write_text(text)
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(path))
    monkeypatch.delenv("EVALMISLEAD_MODELS", raising=False)
    monkeypatch.delenv("EVALMISLEAD_LLM_URL", raising=False)
    monkeypatch.delenv("EVALMISLEAD_EMBEDDED_MODEL", raising=False)
    study_models.reset()
    return study_models.study()


@pytest.fixture(autouse=True)
def _fresh_study():
    study_models.reset()
    yield
    study_models.reset()


def test_the_shipped_study_is_one_bundled_model() -> None:
    study = study_models.load()
    assert [m.name for m in study.models] == ["qwen2.5-coder-0.5b"] and not study.prefixed
    assert study.models[0].bundled == "qwen2.5-coder-0.5b" and study.models[0].parameters == "0.5B"


def test_two_models_parse_with_their_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study = _study(tmp_path / "s.toml", TWO, monkeypatch)
    assert study.prefixed and study.names == ["alpha", "beta-1.5"]
    beta = study.model("beta-1.5")
    assert beta.key == "beta_1_5" and beta.slots == 1 and beta.max_tokens("off") == 99 and beta.max_tokens("on") is None
    assert dict(beta.chat_template_kwargs) == {"reasoning_effort": "low"}


@pytest.mark.parametrize("text, message", [
    ("", "lists no model"),
    ("[[models]]\nname = 'a'\n", "exactly one of bundled, gguf or urls"),
    ("[[models]]\nname = 'a'\nbundled = 'nope'\n", "is not a bundled model"),
    ("[[models]]\nname = 'a b'\nbundled = 'qwen2.5-coder-0.5b'\n", "name 'a b'"),
    ("[[models]]\nname = 'a'\nurls = ['ftp://x']\n", "http://"),
    ("[[models]]\nname = 'a'\nurls = ['http://x']\nslots = 0\n", "slots = 0"),
    ("[[models]]\nname = 'a'\nurls = ['http://x']\ncolour = 1\n", "unknown key"),
    ("[[models]]\nname = 'a'\nurls = ['http://x']\nchat_template_kwargs = {enable_thinking = true}\n",
     "without enable_thinking"),
    ("[[models]]\nname = 'a.b'\nurls = ['http://x']\n[[models]]\nname = 'a_b'\nurls = ['http://y']\n", "same key"),
    ("[[models\n", "not valid TOML"),
    ("[[models]]\nname = 'a'\nurls = ['http://x']\nthinking_off = 'off'\n",
     r'study.toml \[\[models\]\] #1 \(a\): thinking_off = .off. must be one of "template", "prefill", "budget0"'),
    ("[[models]]\nname = 'a'\nurls = ['http://x']\nthinking_off = true\n", "thinking_off = True must be one of"),
    ("[[models]]\nname = 'a'\nurls = ['http://x']\napi = 'openai'\nthinking_off = 'budget0'\n",
     "budget0.* is a llama-server request field"),
])
def test_a_bad_study_file_is_one_line_naming_the_fix(text: str, message: str) -> None:
    with pytest.raises(StudyError, match=message) as info:
        parse_study(text, "study.toml", BUNDLED)
    assert "\n" not in str(info.value) and isinstance(info.value, ConfigError)


def test_selection_takes_study_or_bundled_names_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    study = _study(tmp_path / "s.toml", TWO, monkeypatch)
    chosen = select(study, ["qwen2.5-coder-1.5b", "alpha"], study_models.BUNDLED_DEFAULTS)
    assert chosen.names == ["qwen2.5-coder-1.5b", "alpha"]
    with pytest.raises(StudyError, match="neither in the study"):
        select(study, ["gamma"], study_models.BUNDLED_DEFAULTS)
    monkeypatch.setenv("EVALMISLEAD_MODELS", "qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    both = study_models.load()
    assert both.prefixed and [m.parameters for m in both.models] == ["0.5B", "1.5B"]


def test_one_server_overrides_refuse_a_study_of_several(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _study(tmp_path / "s.toml", TWO, monkeypatch)
    monkeypatch.setenv("EVALMISLEAD_LLM_URL", "http://127.0.0.1:9")
    with pytest.raises(StudyError, match="EVALMISLEAD_LLM_URL sets the model of a one-model study"):
        study_models.load()


def test_a_missing_study_file_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(tmp_path / "none.toml"))
    with pytest.raises(StudyError, match="EVALMISLEAD_STUDY"):
        study_models.load()


def test_several_models_get_prefixed_keys_groups_and_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalmislead_assets.definitions import build

    study = _study(tmp_path / "s.toml", TWO, monkeypatch)
    defs = build(study)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    for name in ("test_generations", "test_outcomes", "condition_rates", "study_report"):
        assert {f"alpha/{name}", f"beta_1_5/{name}"} <= keys and name not in keys
    assert {"problems", "problem_validation", "mutants", "model_rates", "model_average", "models_report"} <= keys
    node = graph.get(AssetKey(["beta_1_5", "test_generations"]))
    assert node.group_name == "beta_1_5" and node.partitions_def is not None
    assert node.partitions_def.partitions_defs[0].name == "condition"  # condition x thinking kept
    assert node.parent_keys == {AssetKey(["beta_1_5", "model_specs"]), AssetKey("problems"), AssetKey("problem_validation")}
    assert node.metadata["evalmislead/model"] == "beta-1.5"
    parents = graph.get(AssetKey("model_average")).parent_keys
    assert AssetKey(["alpha", "test_outcomes"]) in parents and AssetKey(["beta_1_5", "test_outcomes"]) in parents
    jobs = {j.name for j in defs.jobs}
    assert {"generation_chain_job", "alpha__generation_chain_job", "beta_1_5__generation_chain_job"} <= jobs
    checks = {k.asset_key for k in graph.asset_check_keys}
    assert AssetKey(["alpha", "test_outcomes"]) in checks and AssetKey(["beta_1_5", "test_generations"]) in checks
    assert AssetKey(["beta_1_5", "mutation_scores"]) in checks
    # a multi-asset's side tables: prefixed, in the model's group, one step with their table, read by the report
    for table, sides in (("spec_labels", ("spec_label_agreement", "spec_label_splits")),
                         ("reasoning_mentions", ("reasoning_mention_matches", "reasoning_mention_summary")),
                         ("mutation_scores", ("mutant_kills",))):
        step = {AssetKey(["beta_1_5", t]) for t in (table, *sides)}
        for t in sides:
            side = graph.get(AssetKey(["beta_1_5", t]))
            assert side.group_name == "beta_1_5" and side.metadata["evalmislead/model"] == "beta-1.5"
            assert side.execution_set_asset_keys == step
            assert study_models.model_for_path(side.key.path).name == "beta-1.5"
    report_parents = graph.get(AssetKey(["beta_1_5", "study_report"])).parent_keys
    assert {AssetKey(["beta_1_5", "spec_label_splits"]), AssetKey(["beta_1_5", "reasoning_mention_summary"])} <= \
        report_parents and AssetKey(["alpha", "spec_label_splits"]) not in report_parents
    defs.resolve_implicit_global_asset_job_def()  # the whole graph resolves into one job


def test_one_model_keeps_todays_keys() -> None:
    from evalmislead_assets.definitions import build

    keys = {k.to_user_string() for k in build(study_models.load()).resolve_asset_graph().get_all_asset_keys()}
    assert {"test_generations", "model_specs", "study_report", "model_rates"} <= keys
    assert not any("/" in k for k in keys)


def test_each_model_reads_and_replaces_only_its_own_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The IO manager scopes a model's asset by model_name: materializing beta's condition_rates leaves alpha's
    rows as they are, and reads only beta's outcomes."""
    from evalmislead_assets.assets import analysis
    from evalmislead_assets.definitions import build
    from evalmislead_assets.resources import WarehouseIOManager, WarehouseResource
    from evalmislead_assets.store.database import Warehouse

    study = _study(tmp_path / "s.toml", TWO, monkeypatch)
    monkeypatch.setenv("EVALMISLEAD_DB", str(tmp_path / "m.duckdb"))
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "data"))
    wh = Warehouse(tmp_path / "m.duckdb")
    outcome = {"condition": "buggy_code", "thinking": "off", "task_id": "Python/30", "problem_idx": 30}
    for model, cells in (("alpha", ["misleading", "effective"]), ("beta-1.5", ["effective"] * 3)):
        rows = pd.DataFrame([{**outcome, "test_id": f"t{i}", "outcome": c, "model_name": model}
                             for i, c in enumerate(cells)])
        wh.replace_rows("test_outcomes", rows, where={"model_name": model})
        wh.replace_rows("test_generations", pd.DataFrame([{**outcome, "model_name": model, "finish_reason": "stop"}]),
                        where={"model_name": model})
        wh.replace_rows("generated_tests", pd.DataFrame([{**outcome, "model_name": model, "n_tests": len(cells),
                                                           "import_ok": True, "source": "x"}]),
                        where={"model_name": model})
    defs = build(study)
    beta = [a for a in defs.assets if AssetKey(["beta_1_5", "condition_rates"]) in getattr(a, "keys", set())]
    alpha_rates = pd.DataFrame([{"condition": "buggy_code", "thinking": "off", "n_tests": 2, "model_name": "alpha"}])
    wh.replace_rows("condition_rates", alpha_rates, where={"model_name": "alpha"})
    before = wh.query_df("SELECT * FROM condition_rates WHERE model_name = 'alpha'")
    specs = [a.to_source_asset(k) for a in defs.assets if hasattr(a, "keys") for k in a.keys
             if k.path[-1] in ("test_outcomes", "test_generations", "generated_tests") and k.path[0] == "beta_1_5"]
    res = {"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager()}
    assert analysis.condition_rates is not None and beta
    assert materialize([*beta, *specs], selection=[AssetKey(["beta_1_5", "condition_rates"])], resources=res,
                       instance=DagsterInstance.ephemeral()).success
    after = wh.query_df("SELECT * FROM condition_rates ORDER BY model_name")
    assert before.equals(wh.query_df("SELECT * FROM condition_rates WHERE model_name = 'alpha'"))
    mine = after[after["model_name"] == "beta-1.5"].iloc[0]
    assert (mine["n_tests"], mine["n_effective"], mine["n_misleading"]) == (3, 3, 0)  # beta's outcomes only


def test_a_models_side_tables_replace_only_its_own_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """beta's reasoning_mentions multi-asset writes beta's rows of its side tables and leaves alpha's as they are."""
    from evalmislead_assets.definitions import build
    from evalmislead_assets.resources import WarehouseIOManager, WarehouseResource
    from evalmislead_assets.store.database import Warehouse

    study = _study(tmp_path / "s.toml", TWO, monkeypatch)
    monkeypatch.setenv("EVALMISLEAD_DB", str(tmp_path / "m.duckdb"))
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "data"))
    wh = Warehouse(tmp_path / "m.duckdb")
    answer = {"condition": "buggy_code", "thinking": "on", "task_id": "Python/30", "problem_idx": 30}
    for model in ("alpha", "beta-1.5"):
        wh.replace_rows("test_generations", pd.DataFrame([{**answer, "model_name": model, "finish_reason": "stop",
                                                            "reasoning_text": f"{model}: this has a bug."}]),
                        where={"model_name": model})
        wh.replace_rows("test_outcomes", pd.DataFrame([{**answer, "model_name": model, "test_id": "t",
                                                         "outcome": "misleading"}]), where={"model_name": model})
    alpha_match = pd.DataFrame([{"thinking": "on", "task_id": "Python/1", "keyword": "k", "match": "old",
                                 "model_name": "alpha"}])
    wh.replace_rows("reasoning_mention_matches", alpha_match, where={"model_name": "alpha"})
    before = wh.query_df("SELECT * FROM reasoning_mention_matches")
    defs = build(study)
    key = AssetKey(["beta_1_5", "reasoning_mentions"])
    beta = [a for a in defs.assets if key in getattr(a, "keys", set())]
    specs = [a.to_source_asset(k) for a in defs.assets if hasattr(a, "keys") for k in a.keys
             if k.path[-1] in ("test_outcomes", "test_generations") and k.path[0] == "beta_1_5"]
    res = materialize([*beta, *specs], selection=list(beta[0].keys), instance=DagsterInstance.ephemeral(),
                      resources={"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager()})
    assert res.success
    assert wh.query_df("SELECT * FROM reasoning_mention_matches WHERE model_name = 'alpha'").equals(before)
    mine = wh.query_df("SELECT * FROM reasoning_mention_matches WHERE model_name = 'beta-1.5'")
    assert mine["snippet"].tolist() == ["beta-1.5: this has a bug."]  # beta's reasoning only
    summary = wh.query_df("SELECT model_name, mention_group, n_problems FROM reasoning_mention_summary")
    assert set(summary["model_name"]) == {"beta-1.5"} and len(summary) == 3


def test_rows_without_a_model_become_the_first_models(tmp_path: Path) -> None:
    from evalmislead_assets.store.database import Warehouse

    wh = Warehouse(tmp_path / "old.duckdb")
    wh.replace_rows("test_outcomes", pd.DataFrame([{"condition": "buggy_code", "thinking": "off", "task_id": "Python/1",
                                                    "test_id": "t", "outcome": "both_pass"}]))
    assert wh.name_unnamed_rows("m0") == {"test_outcomes": 1}
    assert wh.query_df("SELECT model_name FROM test_outcomes")["model_name"].tolist() == ["m0"]
    assert wh.name_unnamed_rows("m0") == {}


def test_thinking_off_is_read_per_model_and_defaults_to_the_template_flag() -> None:
    study = parse_study("[[models]]\nname = 'r1'\nurls = ['http://x']\nthinking_off = 'prefill'\n"
                        "[[models]]\nname = 'q3'\nurls = ['http://y']\n"
                        "[[models]]\nname = 'b'\nurls = ['http://z']\nthinking_off = 'budget0'\n", "s.toml", BUNDLED)
    assert [m.thinking_off for m in study.models] == ["prefill", "template", "budget0"]


def test_a_models_chat_template_kwargs_join_the_thinking_flag() -> None:
    from evalmislead_assets.llm.types import ChatRequest, build_body

    req = ChatRequest(asset="a", condition=None, thinking="on", task_id="Python/0",
                      messages=[{"role": "user", "content": "x"}], max_tokens=8, enable_thinking=True)
    assert build_body(req, "m", 1)["chat_template_kwargs"] == {"enable_thinking": True}  # as before: same cache keys
    assert build_body(req, "m", 1, {"reasoning_effort": "low"})["chat_template_kwargs"] == {
        "reasoning_effort": "low", "enable_thinking": True}


def test_model_spec_reach_and_key() -> None:
    m = ModelSpec(name="my.model-7b", gguf="/m.gguf")
    assert m.key == "my_model_7b" and m.reach() == "GGUF /m.gguf"


def test_reach_names_where_a_models_url_comes_from() -> None:
    """Messages name the study file or EVALMISLEAD_LLM_URL, and the embedded server only when it is used."""
    by_file = model_reach(ModelSpec(name="a", urls=("http://gpu:8080",)), "s.toml", ["http://env:1"])
    assert by_file.describe() == "http://gpu:8080 (from the urls of model a in study file s.toml)"
    assert by_file.fix_hint() == "start it or fix the urls of model a in study file s.toml"
    by_env = model_reach(ModelSpec(name="a", bundled="qwen2.5-coder-0.5b"), "s.toml", ["http://env:1/"])
    assert by_env.urls == ("http://env:1",) and by_env.fix_hint() == "start it or fix EVALMISLEAD_LLM_URL"
    embedded = model_reach(ModelSpec(name="a", bundled="qwen2.5-coder-0.5b"), "s.toml")
    assert embedded.embedded and embedded.describe() == "embedded llama-server with bundled qwen2.5-coder-0.5b"
    assert "EVALMISLEAD_LLM_URL" not in embedded.fix_hint()
    override = model_reach(ModelSpec(name="a", bundled="qwen2.5-coder-0.5b"), "s.toml", env_model="/x.gguf")
    assert override.describe() == "embedded llama-server with EVALMISLEAD_EMBEDDED_MODEL /x.gguf"


def test_a_model_that_is_not_there_stops_the_run_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalmislead_assets import config_check

    for name in ("EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EVALMISLEAD_MODELS", "qwen2.5-coder-1.5b")
    monkeypatch.setattr(embedded_model, "installed", lambda model: False)
    with pytest.raises(ConfigError, match="scripts/bootstrap.sh --model-1.5b") as info:
        config_check.check_models(study_models.load())
    assert "\n" not in str(info.value)
    _study(tmp_path / "s.toml", f'[[models]]\nname = "g"\ngguf = "{tmp_path / "none.gguf"}"\n', monkeypatch)
    with pytest.raises(ConfigError, match="none.gguf is missing"):
        config_check.check_models(study_models.load())


def test_rows_without_a_model_belong_to_the_study_files_first_model_whatever_is_selected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An old file holds the default model's rows: running only the 1.5B must not claim them."""
    monkeypatch.setenv("EVALMISLEAD_MODELS", "qwen2.5-coder-1.5b")
    assert study_models.study().names == ["qwen2.5-coder-1.5b"]
    assert study_models.unnamed_rows_model() == "qwen2.5-coder-0.5b"
    assert study_models.model_filter_sql("qwen2.5-coder-1.5b")[1] == ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b",
                                                                        "python"]


def test_thinking_on_for_a_bundled_coder_is_refused_in_one_line(tmp_path, monkeypatch):
    """The bundled coders declare no thinking mode: `run --thinking on` stops before any step (exit 2, one line);
    with a server URL from the environment another model answers, so nothing is refused."""
    import subprocess
    import sys

    study = _study(tmp_path / "study.toml", '[[models]]\nname = "c"\nbundled = "qwen2.5-coder-0.5b"\n', monkeypatch)
    assert study.models[0].thinking is False
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("EVALMISLEAD_")}
    env.update({"EVALMISLEAD_STUDY": str(tmp_path / "study.toml"), "EVALMISLEAD_HOME": str(tmp_path / "home"),
                "DAGSTER_HOME": str(tmp_path / "dh")})
    proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run", "--thinking", "on"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.strip().count("\n") == 0 and "cannot think" in proc.stderr
    assert "materializing" not in proc.stdout
    monkeypatch.setenv("EVALMISLEAD_LLM_URL", "http://127.0.0.1:9")
    study_models.reset()
    assert study_models.study().models[0].thinking is None
