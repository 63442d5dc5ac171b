"""Generation throughput against the embedded llama-server: sequential vs concurrent, then a cached re-run.

    .venv/bin/python benchmarks/bench_generation.py [--n 8] [--max-tokens 128] [--slots 2] [--rounds 2] [--url URL]

The same requests (test-generation prompts for the first N problems, buggy_code, thinking
off) are sent with one request in flight and with --slots in flight, each pass into a fresh
DuckDB file, in interleaved rounds (the machine may be shared: the load average is printed).
The server's own prompt cache is disabled (`cache_prompt: false`) so that no pass reuses
another's prompt processing. Then the last concurrent pass is repeated on its DuckDB file:
every answer comes from the response cache and no request is sent.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from evalmislead_assets.llm import prompts
from evalmislead_assets.llm import llama_server as server
from evalmislead_assets.llm.client import ChatClient
from evalmislead_assets.llm.types import ChatRequest
from evalmislead_assets.study.problems import load_problems
from evalmislead_assets.store.database import Warehouse


def requests_for(n: int, max_tokens: int) -> list[ChatRequest]:
    template = prompts.load_template(prompts.TEST_TEMPLATE)
    records = load_problems().to_dict("records")[:n]
    return [
        ChatRequest(
            asset="benchmark", condition="buggy_code", thinking="off", task_id=p["task_id"],
            messages=[{"role": "user", "content": prompts.generation_prompt(p, "buggy_code", None, template).text}],
            max_tokens=max_tokens, enable_thinking=False, extra={"cache_prompt": False},
        )
        for p in records
    ]


def timed(client: ChatClient, wh: Warehouse, reqs: list[ChatRequest]) -> tuple[float, int, int, int]:
    start = time.monotonic()
    results, stats = client.run_batch(wh, reqs, log=logging.getLogger("bench"))
    wall = time.monotonic() - start
    errors = [r.error for r in results if r.error]
    if errors:
        sys.exit(f"benchmark: {len(errors)} requests failed, first: {errors[0]}")
    tokens = sum(r.completion_tokens or 0 for r in results)
    return wall, tokens, stats.requests_sent, stats.cache_hits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8, help="requests (problems) per pass")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--slots", type=int, default=2, help="server slots = requests in flight in the concurrent pass")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved sequential/concurrent rounds")
    ap.add_argument("--url", default="", help="benchmark this server instead of starting the embedded one")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    reqs = requests_for(args.n, args.max_tokens)
    tmp = Path(tempfile.mkdtemp(prefix="evalmislead-bench-"))
    srv = None if args.url else server.EmbeddedServer(parallel=args.slots, log_path=tmp / "server.log").start()
    url = args.url or srv.url
    model = "" if args.url else server.EMBEDDED_MODEL_ALIAS
    try:
        def client(k: int) -> ChatClient:
            return ChatClient([url], model=model, max_in_flight=k, retries=1)

        # warm-up (model pages, threads), not measured
        client(1).run_batch(Warehouse(tmp / "warm.duckdb"), requests_for(1, 8))
        load_before = os.getloadavg()[0]
        rounds = []
        for i in range(args.rounds):  # interleaved, so a change in machine load hits both sides
            seq = timed(client(1), Warehouse(tmp / f"seq{i}.duckdb"), reqs)
            conc_db = Warehouse(tmp / f"conc{i}.duckdb")
            conc = timed(client(args.slots), conc_db, reqs)
            rounds.append((seq, conc))
        cached_wall, _, cached_sent, cached_hits = timed(client(args.slots), conc_db, reqs)
        load_after = os.getloadavg()[0]
    finally:
        if srv:
            srv.stop()

    print(f"server {url} ({'embedded ' + model if model else 'external'}), {len(reqs)} requests, "
          f"max_tokens {args.max_tokens}, {os.cpu_count()} CPUs, load average {load_before:.1f} -> {load_after:.1f}")
    ratios = []
    for i, ((sw, st, ss, _), (cw, ct, cs, _)) in enumerate(rounds, 1):
        ratios.append((ct / cw) / (st / sw))
        print(f"round {i}: sequential {sw:6.2f} s {st:5d} tok {st / sw:6.1f} tok/s ({ss} sent) | "
              f"{args.slots} in flight {cw:6.2f} s {ct:5d} tok {ct / cw:6.1f} tok/s ({cs} sent) | speed-up {ratios[-1]:.2f}x")
    print(f"speed-up: median {statistics.median(ratios):.2f}x in tokens/s over {len(ratios)} rounds "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}x; a busy machine widens it)")
    conc_wall = rounds[-1][1][0]
    print(
        f"cached re-run: {cached_wall:.2f} s, requests sent {cached_sent}, cache hits {cached_hits}/{len(reqs)}, "
        f"{100 * cached_wall / conc_wall:.1f} % of the concurrent wall time"
    )
    return 0 if cached_sent == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
