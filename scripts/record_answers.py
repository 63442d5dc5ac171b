"""Record the full run's answers (issue 25): generation only, problem block by problem block.

    nice -n 19 .venv/bin/python scripts/record_answers.py [--study studies/full-1.5b.toml]
        [--home data/record-1.5b] [--block 8] [--conditions ...] [--pack DIR]

Runs the real Dagster assets (so every request body is exactly what `evalmislead run` sends):
`problems` and `problem_validation` once, then for each block of problems `model_specs[off]` and
`test_generations[<condition>|off]`, the primary conditions over all problems first, the reference
conditions after. Every answer is committed to the data folder's llm_cache as it arrives, so a killed
recorder resumes where it stopped (a re-run sends only what is missing). After each block the answers
are added to the pack (``--pack``, new shards only) with `evalmislead answers export --append`.
Execution, analysis and the report are not run here: the replay (`evalmislead run --replay`) does them.
"""

from __future__ import annotations

import argparse
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

    def append_pack() -> None:
        if not args.pack:
            return
        cmd = [sys.executable, "-m", "evalmislead_assets.cli", "answers", "export", "--append", args.pack]
        done = subprocess.run(cmd, capture_output=True, text=True)
        print(f"record: pack: {(done.stdout or done.stderr).strip().splitlines()[-1:] or ['?']}", flush=True)

    step(["problems", "problem_validation"], None, None)
    blocks = [problems[i:i + args.block] for i in range(0, len(problems), args.block)]
    passes = [[c for c in conditions if c in PRIMARY], [c for c in conditions if c not in PRIMARY]]
    for pass_conditions in passes:
        if not pass_conditions:
            continue
        for block in blocks:
            if "model_spec" in pass_conditions:
                step(["model_specs"], "off", block)
            for cond in pass_conditions:
                step(["test_generations"], partition_key(cond, "off"), block)
            append_pack()
    print("record: every block done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
