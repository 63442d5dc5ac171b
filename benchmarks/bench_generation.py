"""Generation throughput against the embedded llama-server: sequential vs concurrent, a cached re-run, 1.5B vs 0.5B.

    .venv/bin/python benchmarks/bench_generation.py [--n 8] [--max-tokens 128] [--slots 2] [--rounds 2]
        [--threads T] [--url URL] [--no-models] [--quick]

``--quick``: a smoke run (one request per pass, 8 tokens, one round); its figures mean nothing.

The same requests (test-generation prompts for the first N problems, buggy_code, thinking
off) are sent with one request in flight and with --slots in flight, each pass into a fresh
DuckDB file, in interleaved rounds (the machine may be shared: the load average is printed).
The server's own prompt cache is disabled (`cache_prompt: false`) so that no pass reuses
another's prompt processing. Then the last concurrent pass is repeated on its DuckDB file:
every answer comes from the response cache and no request is sent.

Then the bundled models' generation speed: Qwen2.5-Coder-0.5B and -1.5B each in their own
embedded server (one slot, the same --threads), sent the same requests (same prompts,
temperature 0, same max_tokens) one at a time, in interleaved rounds whose order alternates.
Printed per model: tokens/s end to end (completion tokens / wall time, prompt processing
included) and the server's own decode and prompt tokens/s (its `timings`), then the ratio
1.5B/0.5B of each. Without the 1.5B's packages (scripts/bootstrap.sh --model-1.5b) that part
says so and the rest still runs; --url or --no-models skips it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from evalmislead_assets import settings
from evalmislead_assets.llm import embedded_model as em
from evalmislead_assets.llm import llama_server as server
from evalmislead_assets.llm import prompts
from evalmislead_assets.llm.client import ChatClient
from evalmislead_assets.llm.types import ChatRequest
from evalmislead_assets.resources.embedded_server import binary_override, default_model
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.study.problems import load_problems


def requests_for(n: int, max_tokens: int) -> list[ChatRequest]:
    template = prompts.load_template(prompts.TEST_TEMPLATE, settings.prompts_dir())
    records = load_problems(source="local", cache_dir=settings.datasets_cache_dir()).to_dict("records")[:n]
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


def server_rates(wh: Warehouse) -> tuple[float | None, float | None]:
    """(decode, prompt) tokens/s from llama-server's `timings` in the stored answers (None if absent)."""
    sums = dict.fromkeys(("predicted_n", "predicted_ms", "prompt_n", "prompt_ms"), 0.0)
    for raw in wh.query_df("SELECT response_json FROM llm_cache")["response_json"]:
        timings = json.loads(raw).get("timings") or {}
        for k in sums:
            sums[k] += float(timings.get(k) or 0)

    def rate(n: str, ms: str) -> float | None:
        return 1000 * sums[n] / sums[ms] if sums[ms] > 0 else None

    return rate("predicted_n", "predicted_ms"), rate("prompt_n", "prompt_ms")


def _fmt(rate: float | None) -> str:
    return f"{rate:6.1f}" if rate is not None else "     -"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def compare_models(reqs: list[ChatRequest], args: argparse.Namespace, tmp: Path, ctx_per_slot: int) -> None:
    """The 1.5B's generation speed against the 0.5B's: same requests, settings and threads; printed."""
    small, large = em.QWEN_05B, em.QWEN_15B
    if not em.installed(large):
        print(f"model comparison: {large.name} is not installed, so there is no 1.5B/0.5B figure; install it with "
              f"scripts/bootstrap.sh {large.bootstrap_flag} and re-run")
        return
    servers: dict[str, server.EmbeddedServer] = {}
    passes: dict[str, list[tuple[float, int, float | None, float | None]]] = {small.name: [], large.name: []}
    try:
        for m in (small, large):
            gguf = server.bundled_gguf(settings.cache_dir(), m)  # reused once assembled (the 1.5B: ~15 s once)
            servers[m.name] = server.EmbeddedServer(
                model=gguf, binary=binary_override(), parallel=1, ctx_per_slot=ctx_per_slot, threads=args.threads,
                log_path=tmp / f"server-{m.name}.log",
            ).start()

        def client(m: em.BundledModel) -> ChatClient:
            return ChatClient([servers[m.name].url], model=m.alias, max_in_flight=1, retries=1)

        for m in (small, large):  # warm-up (model pages, threads), not measured
            client(m).run_batch(Warehouse(tmp / f"warm-{m.name}.duckdb"), requests_for(1, 8))
        load_before = os.getloadavg()[0]
        for i in range(args.rounds):  # interleaved, the order alternating, so load changes hit both
            for m in ((small, large) if i % 2 == 0 else (large, small)):
                wh = Warehouse(tmp / f"model-{m.name}-{i}.duckdb")
                wall, tokens, _, _ = timed(client(m), wh, reqs)
                passes[m.name].append((wall, tokens, *server_rates(wh)))
        load_after = os.getloadavg()[0]
    finally:
        for srv in servers.values():
            srv.stop()

    print(f"model comparison: {large.parameters} vs {small.parameters}, {len(reqs)} requests one at a time, "
          f"max_tokens {args.max_tokens}, temperature 0, {args.threads} threads each, {args.rounds} rounds, "
          f"load average {load_before:.1f} -> {load_after:.1f}")
    medians: dict[str, tuple[float, float | None, float | None]] = {}
    for m in (small, large):
        rows = passes[m.name]
        e2e = [tokens / wall for wall, tokens, _, _ in rows]
        decode = [d for _, _, d, _ in rows if d is not None]
        prompt = [p for _, _, _, p in rows if p is not None]
        medians[m.name] = (statistics.median(e2e), statistics.median(decode) if decode else None,
                           statistics.median(prompt) if prompt else None)
        per_round = ", ".join(f"{r:.1f}" for r in e2e)
        print(f"  {m.parameters:>4} {m.alias}: {medians[m.name][0]:6.1f} tok/s end to end (rounds: {per_round}; "
              f"{sum(t for _, t, _, _ in rows)} tok in {sum(w for w, _, _, _ in rows):.1f} s) | "
              f"decode {_fmt(medians[m.name][1])} tok/s | prompt {_fmt(medians[m.name][2])} tok/s")
    (se, sd, sp), (le, ld, lp) = medians[small.name], medians[large.name]
    print(f"1.5B/0.5B: {_ratio(le, se)} tokens/s end to end, decode {_ratio(ld, sd)}, prompt {_ratio(lp, sp)} "
          f"(medians over {args.rounds} rounds; the 1.5B takes {_ratio(se, le)} the time per token end to end)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8, help="requests (problems) per pass")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--slots", type=int, default=2, help="server slots = requests in flight in the concurrent pass")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved sequential/concurrent rounds")
    ap.add_argument("--threads", type=int, default=max(1, os.cpu_count() or 1),
                    help="llama-server threads, the same for every server started (default: all CPUs)")
    ap.add_argument("--url", default="", help="benchmark this server instead of starting the embedded one "
                                              "(the model comparison is skipped)")
    ap.add_argument("--no-models", action="store_true", help="skip the 1.5B vs 0.5B comparison")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: --n 1 --max-tokens 8 --rounds 1 (proves the script works; no real figures)")
    args = ap.parse_args()
    if args.quick:
        args.n, args.max_tokens, args.rounds = 1, 8, 1
    logging.basicConfig(level=logging.WARNING)

    reqs = requests_for(args.n, args.max_tokens)
    tmp = Path(tempfile.mkdtemp(prefix="evalmislead-bench-"))
    ctx_per_slot = max(server.DEFAULT_CTX_PER_SLOT, server.PROMPT_ALLOWANCE + args.max_tokens)
    srv = None if args.url else server.EmbeddedServer(
        model=default_model(), binary=binary_override(), parallel=args.slots, ctx_per_slot=ctx_per_slot,
        threads=args.threads, log_path=tmp / "server.log").start()
    url = args.url or srv.url
    model = "" if args.url else srv.alias
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

    if args.quick:
        print("quick run (--quick): too few tokens for real figures")
    print(f"server {url} ({'embedded ' + model if model else 'external'}), {len(reqs)} requests, "
          f"max_tokens {args.max_tokens}, {os.cpu_count()} CPUs"
          f"{'' if args.url else f', {args.threads} threads'}, load average {load_before:.1f} -> {load_after:.1f}")
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
    sys.stdout.flush()  # the figures above stand even if the comparison below fails
    if args.url:
        print("model comparison: skipped (--url benchmarks an external server)")
    elif args.no_models:
        print("model comparison: skipped (--no-models)")
    else:
        compare_models(reqs, args, tmp, ctx_per_slot)
    return 0 if cached_sent == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
