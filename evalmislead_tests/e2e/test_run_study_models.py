"""`evalmislead run` of a study of two models, through the real CLI and real Dagster runs.

Each model answers through its own fake OpenAI-compatible server (a different model name each, so the
two do not share cached answers): fast, and the answers are known. The whole chain runs for both models,
specs to models_report; a model whose server is down fails alone, with its own error, and the other goes on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from evalmislead_tests.fake_llm_server import FakeLLMServer

# task 30 (the buggy get_positive keeps only the negatives): one misleading and one effective test
MISLEADING_AND_EFFECTIVE = (
    "```python\nfrom solution import get_positive\n\n\ndef test_m():\n    assert get_positive([-1, 2]) == [-1]\n\n\n"
    "def test_e():\n    assert get_positive([-1, 2]) == [2]\n```\n"
)
# two tests that pass on both versions
BOTH_PASS = (
    "```python\nfrom solution import get_positive\n\n\ndef test_p():\n    assert get_positive([0]) == []\n\n\n"
    "def test_q():\n    assert get_positive([]) == []\n```\n"
)
CONDITIONS = "buggy_code,fixed_code"
NOTHING_LISTENS = "http://127.0.0.1:9"  # the discard port: connection refused


def _run(tmp_path: Path, urls: tuple[str, str], extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    study = tmp_path / "study.toml"
    study.write_text(f'[[models]]\nname = "m-a"\nurls = ["{urls[0]}"]\nparameters = "1B"\nfamily = "F"\n\n'
                     f'[[models]]\nname = "m-b"\nurls = ["{urls[1]}"]\nparameters = "1B"\nfamily = "F"\n')
    env = dict(os.environ)
    for name in ("EVALMISLEAD_LLM_URL", "EVALMISLEAD_MODELS", "EVALMISLEAD_EMBEDDED_MODEL", "EVALMISLEAD_JUDGE_URL"):
        env.pop(name, None)
    env.update({"EVALMISLEAD_DB": str(tmp_path / "study.duckdb"), "EVALMISLEAD_HOME": str(tmp_path / "data"),
                "DAGSTER_HOME": str(tmp_path / "dagster_home"), "EVALMISLEAD_STUDY": str(study),
                "EVALMISLEAD_PROBLEMS": "30", "EVALMISLEAD_PROBE_N": "1", **(extra or {})})
    return subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", CONDITIONS],
                          env=env, capture_output=True, text=True, timeout=1500)


def _query(tmp_path: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(tmp_path / "study.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _materialized(tmp_path: Path) -> set[str]:
    from dagster import DagsterInstance

    instance = DagsterInstance.from_config(str(tmp_path / "dagster_home"))
    return {k.to_user_string() for k in instance.all_asset_keys() if instance.get_latest_materialization_event(k)}


def _state(out: str, model: str) -> str:
    lines = out.splitlines()
    start = lines.index("Models of this run:")
    return next(ln.strip() for ln in lines[start:] if ln.strip().startswith(f"{model}:"))


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_models_run_the_whole_chain_to_the_models_report(tmp_path: Path) -> None:
    with FakeLLMServer(alias="fake-a") as a, FakeLLMServer(alias="fake-b") as b:
        a.answer, b.answer = MISLEADING_AND_EFFECTIVE, BOTH_PASS
        proc = _run(tmp_path, (a.url, b.url))
        assert a.chat_requests > 0 and b.chat_requests > 0
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    # every per-model asset of both models, the analysis (spec_labels among it) and the cross-model ones
    done = _materialized(tmp_path)
    chain = ["test_generations", "generated_tests", "test_outcomes", "test_coverage", "mutation_scores", "mutant_kills"]
    analysis = ["condition_rates", "bootstrap_comparisons", "spec_labels", "problem_comparisons", "study_report"]
    across = ["model_rates", "model_comparisons", "model_average", "model_sizes", "models_report"]
    wanted = {f"{m}/{a}" for m in ("m_a", "m_b") for a in ["model_specs", *chain, *analysis]} | set(across)
    assert wanted <= done, sorted(wanted - done)
    for table in ("spec_labels", "condition_rates", "bootstrap_comparisons", "test_outcomes"):
        models = [r[0] for r in _query(tmp_path, f"SELECT DISTINCT model_name FROM {table} ORDER BY 1")]
        assert models == ["m-a", "m-b"], table
    cells = _query(tmp_path, "SELECT model_name, outcome, count(*) FROM test_outcomes GROUP BY ALL ORDER BY ALL")
    assert cells == [("m-a", "effective", 2), ("m-a", "misleading", 2), ("m-b", "both_pass", 4)]
    rates = _query(tmp_path, "SELECT model_name, condition, misleading_rate FROM model_rates ORDER BY ALL")
    assert rates == [("m-a", "buggy_code", 0.5), ("m-a", "fixed_code", 0.5), ("m-b", "buggy_code", 0.0),
                     ("m-b", "fixed_code", 0.0)]
    report = (tmp_path / "data" / "report" / "models.md").read_text()
    assert "m-a" in report and "m-b" in report and "Average over models" in report
    for key in ("m_a", "m_b"):
        assert (tmp_path / "data" / "report" / key / "report.md").is_file()
    assert _state(out, "m-a") == "m-a: done" and _state(out, "m-b") == "m-b: done"
    # the header names where each model's URL comes from, and no embedded server
    header = "\n".join(ln for ln in out.splitlines() if ln.startswith("evalmislead: DuckDB")
                       or ln.startswith("evalmislead: models"))
    assert "embedded" not in header and header.count("in study file") == 2, header


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_model_whose_server_is_down_fails_alone_and_the_other_goes_on(tmp_path: Path) -> None:
    with FakeLLMServer(alias="fake-b") as b:
        b.answer = MISLEADING_AND_EFFECTIVE
        proc = _run(tmp_path, (NOTHING_LISTENS, b.url))
        assert b.chat_requests > 0  # the second model was asked, though the first one's server is down
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 1, out[-3000:] + err[-3000:]
    # the first model's own error, naming where its URL is set (the study file, not EVALMISLEAD_LLM_URL)
    first = _state(out, "m-a")
    # found before the problems were validated, not by its spec step
    assert first.startswith("m-a: failed at server check: LLM server unreachable") and NOTHING_LISTENS in first, first
    assert "model m-a stops here, the other models go on" in err
    assert f"fix the urls of model m-a in study file {tmp_path / 'study.toml'}" in first
    assert "EVALMISLEAD_LLM_URL" not in out + err and "embedded" not in out + err
    assert "LLM requests of m-a: none sent (m-a failed before sending one)" in out
    assert "every answer came from the cache" not in out + err
    # the second model's chain and tables are stored; its spec judge is the first model's server (the
    # study's first model judges every model's specs), so its analysis fails with that said
    assert _query(tmp_path, "SELECT DISTINCT model_name FROM test_outcomes") == [("m-b",)]
    assert _query(tmp_path, "SELECT DISTINCT model_name FROM condition_rates") == [("m-b",)]
    second = _state(out, "m-b")
    assert second.startswith("m-b: failed at analysis: spec_labels: the spec judge (the study's first model, m-a"), second
    assert "LLM requests of m-b: " in out and "LLM requests of m-b: none sent" not in out
    assert (tmp_path / "data" / "report" / "models.md").is_file()
    assert "2 of 2 models failed (m-a, m-b)" in err


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_other_model_finishes_when_a_later_models_server_is_down(tmp_path: Path) -> None:
    with FakeLLMServer(alias="fake-a") as a:
        a.answer = MISLEADING_AND_EFFECTIVE
        proc = _run(tmp_path, (a.url, NOTHING_LISTENS))
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 1, out[-3000:] + err[-3000:]
    assert _state(out, "m-a") == "m-a: done"
    assert _state(out, "m-b").startswith("m-b: failed at server check:")
    assert "model m-b stops here, the other models go on" in err and "1 of 2 models failed (m-b)" in err
    assert "m_a/study_report" in _materialized(tmp_path) and "models_report" in _materialized(tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_one_model_on_a_dead_evalmislead_llm_url_names_that_variable(tmp_path: Path) -> None:
    env = dict(os.environ)
    for name in ("EVALMISLEAD_MODELS", "EVALMISLEAD_STUDY", "EVALMISLEAD_EMBEDDED_MODEL", "EVALMISLEAD_JUDGE_URL"):
        env.pop(name, None)
    env.update({"EVALMISLEAD_DB": str(tmp_path / "study.duckdb"), "EVALMISLEAD_HOME": str(tmp_path / "data"),
                "DAGSTER_HOME": str(tmp_path / "dagster_home"), "EVALMISLEAD_PROBLEMS": "30",
                "EVALMISLEAD_LLM_URL": NOTHING_LISTENS})
    proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run", "--conditions", "buggy_code"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"LLM {NOTHING_LISTENS} (from EVALMISLEAD_LLM_URL)" in proc.stdout and "embedded" not in proc.stdout
    # one line before any step: the server is checked before the problems are validated
    assert proc.stderr.strip().startswith("evalmislead: model qwen2.5-coder-0.5b: LLM server unreachable"), proc.stderr
    assert "start it or fix EVALMISLEAD_LLM_URL" in proc.stderr and "no request sent" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "materializing" not in proc.stdout
    assert "every answer came from the cache" not in proc.stderr
