"""What launching each step as a Dagster run through the instance costs `evalmislead run`, against the route it
replaced (every step executed inside the command's own process), measured side by side in one invocation.

Both routes run the same study on the same machine: ``--problems`` of the shipped study, ``--conditions``, thinking
off, answers from a local fake OpenAI-compatible server that answers at once with a two-test file (so the time is
the orchestration, the sandbox and the analysis, not a model). The baseline is a git revision of this repository
(default: the last commit with the in-process route), checked out into a temporary worktree and run with the same
virtual environment. Each round runs the baseline and the current code alternately in fresh data folders and
DAGSTER_HOMEs, then runs each again on its own data (nothing changed: the up-to-date check's time).

    .venv/bin/python benchmarks/bench_run_route.py --problems 0-9 --rounds 2

Prints each run's wall time, the medians and the ratio current / baseline (1.00 = the same; the README's first
command may grow by at most 10 %).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalmislead_tests.fake_llm_server import FakeLLMServer  # noqa: E402

BASELINE = "3180545"  # the last commit whose `evalmislead run` executed each step in its own process
ANSWER = "```python\nfrom solution import *\n\n\ndef test_true():\n    assert True\n\n\ndef test_false():\n" \
         "    assert 1 == 2\n```"


def run_once(code: Path, work: Path, env: dict[str, str], args: list[str], log: Path) -> float:
    """Wall seconds of one `evalmislead run` with ``code`` first on the import path; exits on a failure."""
    env = {**env, "PYTHONPATH": str(code), "EVALMISLEAD_HOME": str(work / "data"),
           "EVALMISLEAD_DB": str(work / "data" / "study.duckdb"), "DAGSTER_HOME": str(work / "dagster_home")}
    t0 = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n$ [{code}] evalmislead run {' '.join(args)}\n")
        out.flush()
        proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", "run", *args], cwd=work, env=env,
                              stdout=out, stderr=subprocess.STDOUT)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"evalmislead run failed (exit {proc.returncode}) with {code}; see {log}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision of the baseline (default {BASELINE})")
    parser.add_argument("--problems", default="0-9")
    parser.add_argument("--conditions", default="all")
    parser.add_argument("--rounds", type=int, default=2)
    opts = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-run-route-"))
    base = tmp / "baseline"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), opts.baseline], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp / "runs.log"
    args = ["--problems", opts.problems, "--conditions", opts.conditions, "--no-mutation"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALMISLEAD_", "DAGSTER_"))}
    env.update({"EVALMISLEAD_PROBE_N": "2", "EVALMISLEAD_MAX_TOKENS_OFF": "256"})
    times: dict[str, list[float]] = {"baseline": [], "current": [], "baseline again": [], "current again": []}
    try:
        with FakeLLMServer() as server:
            server.answer = ANSWER
            env["EVALMISLEAD_LLM_URL"] = server.url
            for i in range(opts.rounds):
                for name, code in (("baseline", base), ("current", ROOT)):
                    work = tmp / f"{name}-{i}"
                    work.mkdir()
                    first = run_once(code, work, env, args, log)
                    again = run_once(code, work, env, args, log)  # nothing changed: the up-to-date check
                    times[name].append(first)
                    times[f"{name} again"].append(again)
                    print(f"round {i + 1}: {name:8s} {first:7.1f} s, again {again:6.1f} s", flush=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"problems {opts.problems}, conditions {opts.conditions}, thinking off, {opts.rounds} round(s); "
          f"log {log}")
    print(f"median first run: baseline (in process, {opts.baseline}) {med['baseline']:.1f} s, current (runs through "
          f"the instance) {med['current']:.1f} s, ratio {med['current'] / med['baseline']:.2f}")
    print(f"median run again (nothing changed): baseline {med['baseline again']:.1f} s, current "
          f"{med['current again']:.1f} s, ratio {med['current again'] / med['baseline again']:.2f}")
    shutil.rmtree(tmp / "baseline", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
