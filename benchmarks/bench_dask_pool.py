"""The sandbox on a Dask cluster of this machine's workers against the local pool: test runs per second, the
overhead per task and per run.

    .venv/bin/python benchmarks/bench_dask_pool.py [--problems 0-29] [--workers 2] [--sizes 1,4,8] [--rounds 2]

Corpus: _corpus.py (each problem's own check() asserts as a generated test file), every test id against the
buggy and the fixed version (a "run"); runs that hit a 2 s limit are left out, as in bench_sandbox.py.

Baseline: the local pool, ``Sandbox(workers=W)``, one batch of every run, as an asset runs it today. Then a
real `dask scheduler` with 1 worker of W threads and with 2 workers of W / 2 threads (`dask worker` processes
started here, on 127.0.0.1), one zygote a task, so every set-up has the same W test processes at a time on the
same cores: the cluster cannot be faster here, and what it costs is its overhead. Each cluster first runs one
untimed batch (the workers import the package and warm their zygotes once, as on a long study); the 1-worker
cluster then measures what one task adds (``per_task``: one-file tasks against one-file batches in a warm
sandbox of this process, alternating) and the task size that keeps it under 2 %. Then, per task
size (``--sizes``: answer files per task), ``--rounds`` timed cluster batches, each between two local ones:
on a shared machine the load drifts, so each cluster batch is set against the mean of the local batches on
either side and the median of those ratios is the figure. Printed per set-up: runs/s, the ratio (the
overhead; target under 10 %), that overhead per task and per run, and whether every batch gave every run the
local pool's status (asserted).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _corpus import corpus, drop_endless, version_runs

from evalmislead_assets.execution.dask_pool import DaskSandbox, close_clients
from evalmislead_assets.sandbox.host import Limits, Sandbox, WarmSandbox
from evalmislead_assets.settings import parse_problem_list

ROOT = Path(__file__).resolve().parents[1]


class Cluster:
    """`dask scheduler` plus ``n`` `dask worker` processes of ``threads`` threads on 127.0.0.1, stopped by ``stop``."""

    def __init__(self, n: int, folder: str, threads: int) -> None:
        dask = str(Path(sys.executable).parent / "dask")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.file = Path(folder) / "scheduler.json"
        self.logs = [open(Path(folder) / name, "wb")
                     for name in ["scheduler.log", *[f"w{k}.log" for k in range(n)]]]
        self.procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                        "--scheduler-file", str(self.file)], stdout=self.logs[0],
                                       stderr=subprocess.STDOUT, env=env, cwd=folder)]
        while not self.file.exists() or not self.file.read_text().strip():
            if self.procs[0].poll() is not None:
                raise SystemExit(f"dask scheduler exited; see {folder}/scheduler.log")
            time.sleep(0.2)
        self.address = json.loads(self.file.read_text())["address"]
        for k in range(n):
            self.procs.append(subprocess.Popen(
                [dask, "worker", "--scheduler-file", str(self.file), "--nworkers", "1", "--nthreads", str(threads),
                 "--host", "127.0.0.1", "--no-dashboard", "--name", f"w{k}", "--local-directory", f"{folder}/w{k}"],
                stdout=self.logs[k + 1], stderr=subprocess.STDOUT, env=env, cwd=folder))

    def stop(self) -> None:
        """The workers first (each closes its sandbox as it goes), then the scheduler."""
        close_clients()
        for group in (self.procs[1:], self.procs[:1]):
            for proc in group:
                proc.terminate()
            for proc in group:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for log in self.logs:
            log.close()


def timed(sandbox: Sandbox, runs: list) -> tuple[list[str], float]:
    t = time.perf_counter()
    statuses = [r.status for r in sandbox.run(runs)]
    return statuses, time.perf_counter() - t


def per_task(address: str, limits: Limits, runs: list, n: int = 20) -> tuple[float, float]:
    """(seconds per one-file task on the cluster, seconds per one-file batch in a warm sandbox of this process):
    ``n`` of each, one at a time and alternating, so the difference is what a task adds (the round trip to the
    scheduler and the worker, pickling, the hand-over to the worker's warm zygote)."""
    first = runs[0][0].tests
    tiny = [r for r in runs if r[0].tests == first][:2]  # one test id against both versions
    here = WarmSandbox(limits, workers=1)
    there = DaskSandbox(address, limits, workers=1, answers_per_task=1)
    try:
        here.run(tiny)
        there.run(tiny)
        t_here = t_there = 0.0
        for _ in range(n):
            t_here += timed(here, tiny)[1]
            t_there += timed(there, tiny)[1]
    finally:
        here.close()
    return t_there / n, t_here / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="0-29")
    ap.add_argument("--workers", type=int, default=2, help="test processes at a time, in every set-up")
    ap.add_argument("--sizes", default="1,4,8", help="answer files per Dask task")
    ap.add_argument("--clusters", default="1,2", help="Dask workers per cluster")
    ap.add_argument("--rounds", type=int, default=2, help="timed cluster batches per set-up, each between two local")
    args = ap.parse_args()
    cases = corpus(parse_problem_list(args.problems) or list(range(164)))
    runs, n_slow = drop_endless(version_runs(cases), args.workers)
    n_files = len({m.tests for m, _ in runs})
    print(f"corpus: {n_files} answer files, {len(runs)} runs (tests x 2 versions; {n_slow} endless left out); "
          f"{args.workers} test processes at a time, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}")
    limits = Limits(timeout_s=10.0)
    local, t_first = timed(Sandbox(limits, workers=args.workers), runs)
    print(f"local pool: {len(runs) / t_first:.1f} runs/s ({t_first:.2f} s)")
    rows = []
    mismatches = []
    for n in [int(x) for x in args.clusters.split(",")]:
        threads = max(1, args.workers // n)
        with tempfile.TemporaryDirectory(prefix="bench-dask-") as folder:
            cluster = Cluster(n, folder, threads)
            try:
                warm = DaskSandbox(cluster.address, limits, workers=1, connect_timeout_s=120)
                warm._client().wait_for_workers(n, timeout=120)
                t = time.perf_counter()
                warm.run(runs)
                print(f"{n} worker(s) x {threads} thread(s): untimed warm-up batch {time.perf_counter() - t:.2f} s")
                if n == 1:
                    t_task, t_warm = per_task(cluster.address, limits, runs)
                    per_file = t_first * args.workers / n_files  # one answer file's runs on one core, local pool
                    print(f"per task: {1000 * t_task:.0f} ms for one answer file's one test on the cluster vs "
                          f"{1000 * t_warm:.0f} ms in a warm sandbox here: {1000 * (t_task - t_warm):+.0f} ms a task "
                          f"= {100 * (t_task - t_warm) / per_file:.1f} % of one answer file's runs "
                          f"({1000 * per_file:.0f} ms); under 2 % from "
                          f"{max(1, math.ceil((t_task - t_warm) / (0.02 * per_file)))} answer files a task")
                for size in [int(x) for x in args.sizes.split(",")]:
                    t_locals = [timed(Sandbox(limits, workers=args.workers), runs)[1]]
                    ratios, t_dasks = [], []
                    for _ in range(args.rounds):
                        sandbox = DaskSandbox(cluster.address, limits, workers=1, answers_per_task=size)
                        statuses, t_dask = timed(sandbox, runs)
                        if statuses != local:
                            mismatches.append((n, size))
                        statuses, t_local = timed(Sandbox(limits, workers=args.workers), runs)
                        if statuses != local:
                            mismatches.append(("local", size))
                        ratios.append(t_dask / ((t_locals[-1] + t_local) / 2))
                        t_locals.append(t_local)
                        t_dasks.append(t_dask)
                    ratio = statistics.median(ratios)
                    base = statistics.median(t_locals)
                    rows.append((n, threads, size, sandbox.tasks, statistics.median(t_dasks), base, ratio))
                    print(f"{n} worker(s), {size} answer files a task ({sandbox.tasks} tasks): cluster "
                          f"{', '.join(f'{t:.2f}' for t in t_dasks)} s, local around them "
                          f"{', '.join(f'{t:.2f}' for t in t_locals)} s")
            finally:
                cluster.stop()
    print("workers x threads | answers/task | tasks | runs/s cluster | runs/s local | time vs local (median of "
          "rounds) | overhead per task | per run")
    for n, threads, size, tasks, t_dask, base, ratio in rows:
        extra = (ratio - 1) * base
        print(f"{n} x {threads} | {size} | {tasks} | {len(runs) / t_dask:.1f} | {len(runs) / base:.1f} | "
              f"{ratio:.3f}x ({100 * (ratio - 1):+.1f} %) | {1000 * extra / tasks:+.0f} ms | "
              f"{1000 * extra / len(runs):+.2f} ms")
    print(f"identical statuses in every batch: {not mismatches}; load average now {os.getloadavg()[0]:.1f}")
    assert not mismatches, mismatches


if __name__ == "__main__":
    main()
