"""Paired bootstrap: evalmislead's count-matrix version against scipy.stats.bootstrap on the same data.

    .venv/bin/python benchmarks/bench_bootstrap.py [--problems 164] [--n-boot 10000] [--repeats 5]

Data: per-problem test counts shaped like the study (0-11 tests per problem and condition, some
problems with none). Both compute the same statistic (difference of pooled rates, paired over
problems, 98.75 % percentile interval, 10,000 resamples) for the four primary comparisons;
printed: best-of-N seconds for each, the ratio, and the largest gap between the intervals
(Monte Carlo error: the two draw different resamples).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy import stats

from evalmislead_assets.analysis import bootstrap as st


def data(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for cond, (pm, pe) in {"buggy_code": (0.16, 0.2), "fixed_code": (0.02, 0.45), "model_spec": (0.12, 0.25)}.items():
        den = rng.integers(0, 12, n) * (rng.random(n) > 0.08)
        mis = rng.binomial(den, pm)
        out[cond] = np.column_stack([den, mis, rng.binomial(den - mis, pe / (1 - pm))])
    return out


def ours(d: dict[str, np.ndarray], n_boot: int, level: float) -> list[tuple[float, float]]:
    res = []
    for a, b in (("buggy_code", "fixed_code"), ("model_spec", "buggy_code")):
        ivs = st.paired_differences(d[a][:, 1:], np.column_stack([d[a][:, 0]] * 2), d[b][:, 1:],
                                    np.column_stack([d[b][:, 0]] * 2), n_boot=n_boot, level=level, seed=1)
        res += [(iv.ci_low, iv.ci_high) for iv in ivs]
    return res


def diff_of_pooled(a_num, a_den, b_num, b_den, axis=-1):
    return a_num.sum(axis) / a_den.sum(axis) - b_num.sum(axis) / b_den.sum(axis)


def scipy_version(d: dict[str, np.ndarray], n_boot: int, level: float) -> list[tuple[float, float]]:
    res = []
    for a, b in (("buggy_code", "fixed_code"), ("model_spec", "buggy_code")):
        for col in (1, 2):
            ci = stats.bootstrap(
                (d[a][:, col], d[a][:, 0], d[b][:, col], d[b][:, 0]), diff_of_pooled, paired=True, vectorized=True,
                method="percentile", confidence_level=level, n_resamples=n_boot, rng=np.random.default_rng(1),
            ).confidence_interval
            res.append((ci.low, ci.high))
    return res


def best_of(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--problems", type=int, default=164)
    p.add_argument("--n-boot", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    d = data(args.problems)
    level = 0.9875
    ours(d, 100, level)  # warm-up
    t_ours, r_ours = best_of(lambda: ours(d, args.n_boot, level), args.repeats)
    t_scipy, r_scipy = best_of(lambda: scipy_version(d, args.n_boot, level), args.repeats)
    gap = max(max(abs(a[0] - b[0]), abs(a[1] - b[1])) for a, b in zip(r_ours, r_scipy))
    print(json.dumps({
        "problems": args.problems, "n_boot": args.n_boot, "comparisons": 4,
        "evalmislead_s": round(t_ours, 4), "scipy_s": round(t_scipy, 4), "speedup": round(t_scipy / t_ours, 1),
        "max_interval_gap": round(gap, 4),
        "intervals_evalmislead": [[round(x, 4) for x in r] for r in r_ours],
        "intervals_scipy": [[round(float(x), 4) for x in r] for r in r_scipy],
    }))


if __name__ == "__main__":
    main()
