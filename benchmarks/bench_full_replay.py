"""Each stage of the first command at full size: wall time, CPU time and peak memory, and the total against
the target (the first command ends within 20 minutes on 2 quiet cores, after the one-time build).

The recorded full run of the 1.5B (the bundled answer pack) is imported into a scratch data folder, then every
stage `evalmislead run --replay` runs is materialized on its own with `dagster asset materialize`, one process
per stage and partition, so that each gets its own figures: wall seconds, CPU seconds (user + system of the
process and every process it waited for: sandboxed tests, coverage, the probe's llama-server) and peak resident
memory (the largest of those processes). Each process also pays Dagster's start (the `startup` row measures it
with nothing to do), which `evalmislead run` pays once; the total therefore overstates the run a little.

    .venv/bin/python benchmarks/bench_full_replay.py [--mutation] [--conditions a,b] [--keep DIR]

Prints one row per stage and partition, the sums per stage, and total / 20 min.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalmislead_assets import study_models  # noqa: E402
from evalmislead_assets.cli import replay, run_plan  # noqa: E402
from evalmislead_assets.definitions import defs  # noqa: E402
from evalmislead_assets.study.conditions import CONDITION_NAMES  # noqa: E402

TARGET_S = 20 * 60
DAGSTER = str(Path(sys.executable).with_name("dagster"))


def stages(conditions: list[str], mutation: bool) -> list[tuple[str, list[str], str | None]]:
    """(stage, assets, partition) in the order `evalmislead run --replay` materializes them."""
    out: list[tuple[str, list[str], str | None]] = [("startup", ["problems"], None),
                                                    ("problems + validation", ["problems", "problem_validation"], None)]
    if mutation:
        out.append(("mutants", ["mutants"], None))
    out.append(("specs (replayed)", ["model_specs"], "off"))
    for cond in conditions:
        part = f"{cond}|off"
        out += [("generation (replayed)", ["test_generations"], part), ("extraction", ["generated_tests"], part),
                ("execution", ["test_outcomes"], part), ("coverage", ["test_coverage"], part)]
        if mutation:
            out.append(("mutation", ["mutation_scores", "mutant_kills"], part))
    study = study_models.study()
    plan = run_plan.build_plan(defs.resolve_asset_graph(), study.names, list(study.languages), ["off"], conditions)
    analysis = [k.to_user_string() for s in plan.steps if s.stage == run_plan.ANALYSIS for k in s.keys]
    rest = [a for a in analysis if a not in ("determinism_probe", "study_report")]
    out += [("analysis (bootstrap, subset, labels, ...)", rest, None),
            ("determinism probe (live, 4 requests)", ["determinism_probe"], None), ("report", ["study_report"], None)]
    return out


def measure(assets: list[str], partition: str | None, log: Path) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit status) of one `dagster asset materialize` process."""
    cmd = [DAGSTER, "asset", "materialize", "-m", "evalmislead_assets.definitions", "--select", ",".join(assets)]
    if partition:
        cmd += ["--partition", partition]
    t0 = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutation", action="store_true", help="the mutants and the mutation score too")
    ap.add_argument("--conditions", default="", help="default: what `evalmislead run --replay` runs")
    ap.add_argument("--keep", default="", help="data folder to use and keep (default: a temporary one)")
    args = ap.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-replay-"))
    os.environ.update({"EVALMISLEAD_HOME": str(work / "home"), "DAGSTER_HOME": str(work / "dh")})
    (work / "dh").mkdir(parents=True, exist_ok=True)
    (work / "dh" / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    chosen = [c for c in args.conditions.split(",") if c]
    conditions, left_out = replay.default_conditions(replay.DEFAULT_PACK, chosen, list(CONDITION_NAMES))
    plan = replay.prepare(replay.DEFAULT_PACK, conditions)  # the pack's study file, problems, replay-only
    print(f"bench_full_replay: {plan.line()}" + (f"\n{left_out}" if left_out else ""), flush=True)
    print(f"bench_full_replay: {replay.import_into(work / 'home' / 'evalmislead.duckdb', plan)}", flush=True)
    log = work / "stages.log"
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    print(f"{'stage':44} {'partition':28} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}", flush=True)
    for name, assets, part in stages(conditions, args.mutation):
        wall, cpu, peak, rc = measure(assets, part, log)
        print(f"{name:44} {part or '-':28} {wall:8.1f} {cpu:8.1f} {peak:9.0f}", flush=True)
        if rc != 0:
            print(f"bench_full_replay: {name} failed (exit {rc}); see {log}", file=sys.stderr)
            return 1
        t = totals[name]
        t[0], t[1], t[2] = t[0] + wall, t[1] + cpu, max(t[2], peak)
    startup = totals.pop("startup")
    print(f"\nper stage over {len(conditions)} conditions x {len(plan.problems)} problems "
          f"(each process also paid Dagster's start, {startup[0]:.1f} s wall measured alone):")
    for name, (wall, cpu, peak) in totals.items():
        print(f"  {name:44} wall {wall:7.1f} s  CPU {cpu:7.1f} s  peak {peak:6.0f} MiB")
    wall = sum(t[0] for t in totals.values())
    print(f"total wall {wall:.0f} s = {wall / 60:.1f} min; target 20 min; ratio total / target = {wall / TARGET_S:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
