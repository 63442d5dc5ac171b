"""Record the full run's answers: generation only, problem block by problem block.

    nice -n 19 .venv/bin/python scripts/record_answers.py [--study studies/full-1.5b.toml]
        [--home data/record-1.5b] [--block 8] [--conditions ...] [--pack DIR]

Runs the real Dagster assets (so every request body is exactly what `evalmislead run` sends):
`problems` and `problem_validation` once, then for each block of problems `model_specs[off]` and
`test_generations[<condition>|off]`, the primary conditions over all problems first, the reference
conditions after; with each block's specs, the spec judge's requests (what `spec_labels` sends, through
analysis.spec_labels.judge_specs and the same `judge_llm` resource settings). Every answer is committed to
the data folder's llm_cache as it arrives, so a killed recorder resumes where it stopped (a re-run sends
only what is missing), and a recorder started on a fresh machine first imports the committed pack
(``--pack``) into its data folder. After each block the answers are added to the pack (new shards only)
with `evalmislead answers export --append`, and with ``--commit`` committed.
Execution, analysis and the report are not run here: the replay (`evalmislead run --replay`) does them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRIMARY = ["buggy_code", "fixed_code", "model_spec"]
REFERENCE = ["signature_only", "human_docstring", "buggy_code_with_docstring"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", default=str(ROOT / "studies" / "full-1.5b.toml"))
    ap.add_argument("--home", default=str(ROOT / "data" / "record-1.5b"))
    ap.add_argument("--block", type=int, default=8, help="problems per step (default 8)")
    ap.add_argument("--problems", default="0-163", help="problem list, e.g. 0-163 (default) or 0-19")
    ap.add_argument("--conditions", default=",".join(PRIMARY + REFERENCE))
    ap.add_argument("--pack", default="", help="answer pack folder to append each block's answers to")
    ap.add_argument("--commit", action="store_true",
                    help="git-commit the pack folder after each block (only its paths), so no slice is lost")
    args = ap.parse_args()

    home = Path(args.home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["EVALMISLEAD_HOME"] = str(home)
    os.environ["EVALMISLEAD_STUDY"] = str(Path(args.study).resolve())
    os.environ["DAGSTER_HOME"] = str(home / "dagster_home")
    (home / "dagster_home").mkdir(exist_ok=True)
    if not (home / "dagster_home" / "dagster.yaml").exists():
        shutil.copy(ROOT / "dagster.yaml", home / "dagster_home" / "dagster.yaml")
    for var in ("EVALMISLEAD_MAX_TOKENS_OFF", "EVALMISLEAD_PROBLEMS", "EVALMISLEAD_LLM_URL", "EVALMISLEAD_MODELS"):
        os.environ.pop(var, None)

    from dagster import AssetKey, DagsterInstance

    from evalmislead_assets import settings
    from evalmislead_assets.cli import run_guard
    from evalmislead_assets.definitions import defs
    from evalmislead_assets.llm import stop_signals
    from evalmislead_assets.partitions import partition_key

    stop_signals.install()
    problems = settings.parse_problem_list(args.problems) or list(range(164))
    conditions = [c for c in args.conditions.split(",") if c]
    run_guard.hold_data_folder(settings.db_path())
    job = defs.resolve_implicit_global_asset_job_def()
    instance = DagsterInstance.get()

    def step(names: list[str], pkey: object, subset: list[int] | None) -> None:
        if subset is None:
            os.environ.pop("EVALMISLEAD_PROBLEMS", None)
        else:
            os.environ["EVALMISLEAD_PROBLEMS"] = ",".join(map(str, subset))
        t0 = time.monotonic()
        result = job.execute_in_process(
            instance=instance, asset_selection=[AssetKey(n) for n in names], partition_key=pkey,
            raise_on_error=False, run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        )
        label = f"{'+'.join(names)} [{pkey}] problems {subset[0] if subset else 0}-{subset[-1] if subset else 163}"
        if not result.success:
            if stop_signals.stop_requested():
                print(f"record: stopped during {label}; answers already stored are kept", flush=True)
                raise SystemExit(stop_signals.exit_code())
            raise SystemExit(f"record: {label} failed (run {result.run_id}); re-run to resume")
        print(f"record: {time.strftime('%H:%M:%S')} done {label} in {time.monotonic() - t0:.0f} s", flush=True)

    def judge(block: list[int]) -> None:
        from evalmislead_assets.analysis.spec_labels import JUDGE_TEMPLATE, judge_specs
        from evalmislead_assets.llm.prompts import load_template
        from evalmislead_assets.resources import LLMResource
        from evalmislead_assets.store.database import Warehouse

        wh = Warehouse(settings.db_path())
        specs = wh.query_df("SELECT thinking, task_id, problem_idx, spec_text, error FROM model_specs "
                            "WHERE thinking = 'off' AND list_contains(?, problem_idx) ORDER BY problem_idx", [block])
        problems_df = wh.query_df("SELECT task_id, problem_idx, entry_point, buggy_code, fixed_code FROM problems")
        judge_llm = LLMResource(urls=settings.judge_url())
        t0 = time.monotonic()
        try:
            judged = judge_specs(specs, problems_df, judge_llm, wh, template=load_template(JUDGE_TEMPLATE,
                                 settings.prompts_dir()), max_tokens=settings.judge_max_tokens())
        finally:
            judge_llm.embedded_server.stop()
        failed = sum(str(e).startswith("judge call failed") for e in judged["judge_error"] if isinstance(e, str))
        print(f"record: {time.strftime('%H:%M:%S')} judged {len(judged)} specs of problems {block[0]}-{block[-1]} "
              f"in {time.monotonic() - t0:.0f} s ({failed} failed calls)", flush=True)
        if failed:
            raise SystemExit("record: judge calls failed; re-run to resume")

    def append_pack() -> None:
        if not args.pack:
            return
        before = pack_size(Path(args.pack))
        cmd = [sys.executable, "-m", "evalmislead_assets.cli", "answers", "export", "--append", args.pack]
        done = subprocess.run(cmd, capture_output=True, text=True)
        print(f"record: pack: {(done.stdout or done.stderr).strip().splitlines()[-1:] or ['?']}", flush=True)
        # a block replayed from llm_cache adds nothing: no commit (only the manifest's time would change)
        if args.commit and done.returncode == 0 and pack_size(Path(args.pack)) != before:
            commit_pack(Path(args.pack))

    def pack_size(folder: Path) -> int | None:
        manifest = folder / "manifest.json"
        return json.loads(manifest.read_text())["answers"] if manifest.exists() else None

    def commit_pack(folder: Path) -> None:
        n = pack_size(folder)
        for attempt in range(5):  # another git command may hold the index for a moment
            subprocess.run(["git", "add", "--", str(folder)], cwd=ROOT, capture_output=True)
            done = subprocess.run(["git", "commit", "-q", "-m", f"Recorded 1.5B run: answer pack slice, {n} answers "
                                   "(scripts/record_answers.py)", "--", str(folder)], cwd=ROOT, capture_output=True,
                                  text=True)
            if done.returncode == 0 or "nothing to commit" in done.stdout + done.stderr:
                print(f"record: committed the pack ({n} answers)", flush=True)
                return
            time.sleep(3 + 5 * attempt)
        print(f"record: could not commit the pack: {done.stderr.strip()[:200]}", flush=True)

    if args.pack and (Path(args.pack) / "manifest.json").is_file():
        # a recording resumed on another machine: what the pack holds is not asked again
        cmd = [sys.executable, "-m", "evalmislead_assets.cli", "answers", "import", args.pack]
        done = subprocess.run(cmd, capture_output=True, text=True)
        print(f"record: {(done.stdout or done.stderr).strip()}", flush=True)
        if done.returncode != 0:
            raise SystemExit("record: the pack cannot be imported (see above); fix that before recording more")
    step(["problems", "problem_validation"], None, None)
    blocks = [problems[i:i + args.block] for i in range(0, len(problems), args.block)]
    passes = [[c for c in conditions if c in PRIMARY], [c for c in conditions if c not in PRIMARY]]
    for pass_conditions in passes:
        if not pass_conditions:
            continue
        for block in blocks:
            if "model_spec" in pass_conditions:
                step(["model_specs"], "off", block)
                judge(block)
            for cond in pass_conditions:
                step(["test_generations"], partition_key(cond, "off"), block)
            append_pack()
    print("record: every block done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
