"""Record answers with the real recorder and the bundled 0.5B, then replay them with `evalmislead run --replay`:
the replay sends no generation or judge request (only the probe's live sample), scores the recorded answers,
and a pack recorded under other prompts is refused in one line before anything is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from evalmislead_assets import settings
from evalmislead_assets.report import results

ROOT = Path(__file__).resolve().parents[2]


def _rows(db: Path, tables: list[str]) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}
    finally:
        con.close()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALMISLEAD_", "DAGSTER_HOME"))}
    env.update(extra)
    return env


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_recorded_answers_replay_without_requests(tmp_path: Path) -> None:
    study = tmp_path / "study.toml"
    study.write_text('[[models]]\nname = "coder"\nbundled = "qwen2.5-coder-0.5b"\nslots = 1\nmax_tokens_off = 160\n')
    pack = tmp_path / "pack"
    record = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "record_answers.py"), "--study", str(study), "--home",
         str(tmp_path / "rec"), "--problems", "30", "--conditions", "buggy_code,fixed_code,model_spec",
         "--pack", str(pack)],
        env=_env(EVALMISLEAD_JUDGE_MAX_TOKENS="48"), capture_output=True, text=True, timeout=1500)
    assert record.returncode == 0, record.stdout[-3000:] + record.stderr[-3000:]
    manifest = json.loads((pack / "manifest.json").read_text())
    # specs, judge and three conditions of one problem
    assert manifest["answers"] == 5 and manifest["model"] == "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"
    assert (pack / "study.toml").read_text() == study.read_text()

    home = tmp_path / "replay"
    env = _env(EVALMISLEAD_HOME=str(home), DAGSTER_HOME=str(tmp_path / "dh"), EVALMISLEAD_PROBE_N="1",
               EVALMISLEAD_JUDGE_MAX_TOKENS="48")
    cmd = [sys.executable, "-m", "evalmislead_assets.cli", "run", "--replay", str(pack), "--conditions",
           "buggy_code,fixed_code,model_spec"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    assert "replaying 5 recorded answers" in proc.stdout and "imported 5 answers" in proc.stdout
    con = duckdb.connect(str(home / "evalmislead.duckdb"), read_only=True)
    sent = con.execute("SELECT asset, count(*) FROM llm_calls GROUP BY asset").fetchall()
    assert sent == [("determinism_probe", 1)], sent  # nothing but the live sample went to a server
    recorded = {a for a, in con.execute("SELECT cache_key FROM llm_cache").fetchall()}
    used = {k for k, in con.execute("SELECT cache_key FROM test_generations UNION ALL SELECT cache_key FROM "
                                    "model_specs").fetchall()}
    assert used <= recorded and len(used) == 4
    assert con.execute("SELECT count(*) FROM spec_labels WHERE judge_cache_key IS NOT NULL").fetchone()[0] == 1
    groups = con.execute("SELECT count(DISTINCT condition) FROM test_outcomes").fetchone()[0]
    assert con.execute("SELECT count(*) FROM tool_policy").fetchone()[0] == groups
    assert (home / "report" / "report.md").is_file()
    # a replay leaves the mutants out unless --mutation, and says so; it shows the live sample's identity figures
    assert con.execute("SELECT count(*) FROM mutation_scores").fetchone()[0] == 0
    assert "Mutation score: not run in this replay" in proc.stdout and "--mutation" in proc.stdout
    assert "Live sample (determinism probe, cache bypassed): 1 stored requests re-sent" in proc.stdout
    con.close()

    # the generated results from this replay: its rows are the pack's recorded run (same cells, same requests),
    # so --write takes them; --check matches on the parts the replay ran and names the mutation part it skipped
    doc = tmp_path / "results.md"
    doc.write_text(f"{results.BEGIN}\n{results.END}\n")
    db = ["results", "--db", str(home / "evalmislead.duckdb"), "--pack", str(pack)]
    wrote = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", *db, "--write", str(doc)], env=env,
                           capture_output=True, text=True, timeout=600)
    assert wrote.returncode == 0, wrote.stderr[-2000:]
    db_bytes = (home / "evalmislead.duckdb").read_bytes()
    checked = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", *db, "--check", str(doc)], env=env,
                             capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0 and "match" in checked.stdout, checked.stderr[-2000:]
    assert "Mutation score (the stored run has no mutation_scores rows)" in checked.stderr
    assert (home / "evalmislead.duckdb").read_bytes() == db_bytes

    # again: the import changes nothing, no step runs (each is fresh and made with the same settings), no request
    # is sent and no stored row changes
    tables = ["model_specs", "test_generations", "generated_tests", "test_outcomes", "test_coverage",
              "condition_rates", "bootstrap_comparisons", "determinism_probe", "llm_calls", "spec_labels"]
    before = _rows(home / "evalmislead.duckdb", tables)
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500)
    assert again.returncode == 0 and "imported 0 answers into llm_cache (5 already there)" in again.stdout
    assert "evalmislead: materializing" not in again.stdout, again.stdout[-3000:]
    assert "evalmislead: up to date: test_generations+generated_tests+test_coverage+test_outcomes " \
           "[buggy_code|off]" in again.stdout
    assert _rows(home / "evalmislead.duckdb", tables) == before
    # the data folder knows its study: a later route with no study set reads the pack's
    recorded = json.loads((home / "evalmislead.study.json").read_text())
    assert recorded["pack"] == str(pack) and (home / "evalmislead.study.toml").read_text() == study.read_text()

    # a changed prompt: refused in one line, exit 2, nothing imported into a fresh folder
    prompts = tmp_path / "prompts"
    shutil.copytree(settings.prompts_dir(), prompts)
    (prompts / "spec.md").write_text((prompts / "spec.md").read_text() + "\nKeep it short.\n")
    fresh = tmp_path / "fresh"
    bad = subprocess.run(cmd, env=env | {"EVALMISLEAD_HOME": str(fresh), "EVALMISLEAD_PROMPTS_DIR": str(prompts)},
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2, bad.stdout[-2000:] + bad.stderr[-2000:]
    assert len(bad.stderr.strip().splitlines()) == 1 and "refused" in bad.stderr and "Keep it short" in bad.stderr
    if (fresh / "evalmislead.duckdb").exists():
        con = duckdb.connect(str(fresh / "evalmislead.duckdb"), read_only=True)
        assert con.execute("SELECT count(*) FROM llm_cache").fetchone()[0] == 0
