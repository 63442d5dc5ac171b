"""Coverage of a condition's rate interval on this study's own cluster structure (simulation).

    nice -n 19 .venv/bin/python benchmarks/bench_interval_coverage.py [--db data/evalmislead.duckdb]
        [--cells benchmarks/data/interval_cells_recorded_1p5b.json] [--reps 2000] [--boot 399] [--seed 20260417]

Cells: per condition x metric (misleading, effective) of the recorded 1.5B run, thinking off, the per-problem
counts (tests, tests in the cell) of every problem answered. Read from a DuckDB file of a replay (``--db``; the
``test_outcomes`` and ``test_generations`` tables), else from the JSON that ``extract_interval_cells.py`` wrote once
from such a replay (``--cells``).

Two worlds, each drawing ``--reps`` data sets per cell:

- **bootstrap world**: the problems are resampled with replacement from the observed ones (problems without tests
  included, as the study's bootstrap over problems does); the true rate is the observed pooled rate.
- **parametric world**: each problem keeps its observed number of tests; its own rate is drawn from a beta
  distribution with the observed pooled rate as mean and the intra-problem correlation fitted from the observed
  design effect (moment estimator), and its events are binomial given that rate (beta-binomial).

Methods (each at the plan's level, 98.75 %):

- ``cluster_wilson``: the cluster-adjusted Wilson interval the study prints (analysis/rate_interval.py).
- ``t_ratio``: Wald interval of the ratio estimator with the cluster (CR1) variance and a t quantile with m - 1
  degrees of freedom (m problems with tests), clipped to [0, 1].
- ``wilson_t``: the cluster-adjusted Wilson interval with the t quantile (m - 1 df) in place of z.
- ``korn_graubard``: Clopper-Pearson on the effective sample size n / deff, scaled by (z / t_{m-1})^2
  (Korn and Graubard 1998, the NCHS rule for survey proportions).
- ``kg_event_df``: Korn-Graubard with the degrees of freedom taken from the problems that carry the events: the
  effective number of event clusters (sum x)^2 / sum x^2 minus 1 (at least 1), so that a rate one problem carries
  gets the width of a one-cluster estimate.
- ``boot_percentile``: percentile bootstrap over problems (``--boot`` resamples per data set).
- ``boot_t``: cluster bootstrap-t (studentized with the CR1 standard error of each resample).
- ``deff_floor_rho50``, ``deff_floor_rho75``: the cluster-adjusted Wilson interval with the design effect at least
  its value at an intra-problem correlation of 0.5 (0.75): 1 + (n_w - 1) rho, n_w = sum n_i^2 / sum n_i.
- ``problem_weighted_wilson``: the problem-weighted Wilson interval (analysis/rate_interval.py): the Wilson
  interval on n / deff with deff at least its value at full intra-problem correlation, sum n_i^2 / sum n_i, so the
  sample size is at most Kish's effective number of problems.

Printed: a table cell, problems with events, method, coverage and its Monte Carlo error (binomial standard error
of the coverage over the reps), one row per world, cell and method; then per method the lowest coverage over the
cells, on how many cells it reaches at least the level minus 1 point, and on how many it is within 1 point of
the level either way. ``--compact`` prints one row per cell and method with both worlds side by side (the table
in docs/analysis.md); ``--json PATH`` writes the rows.
Seeded (``--seed``); one core; the default run takes about a minute.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import special, stats

from evalmislead_assets.analysis import rate_interval

LEVEL = 0.9875
HERE = Path(__file__).resolve().parent
DEFAULT_CELLS = HERE / "data" / "interval_cells_recorded_1p5b.json"

Bounds = tuple[np.ndarray, np.ndarray]
World = tuple[np.ndarray, np.ndarray, float]  # (reps, K) tests, (reps, K) events, the true rate


# ---------------------------------------------------------------- data


def load_cells(db: str | None, cells: Path) -> list[dict]:
    """[{condition, metric, n_problems, tests: [...], events: [...]}] with one entry per problem answered."""
    if db:
        import sys

        sys.path.insert(0, str(HERE))
        from extract_interval_cells import from_db

        return from_db(db)
    return json.loads(cells.read_text(encoding="utf-8"))["cells"]


# ---------------------------------------------------------------- worlds


def bootstrap_world(n: np.ndarray, x: np.ndarray, reps: int, rng: np.random.Generator) -> World:
    """(reps, K) tests and events of ``reps`` resamples of the K problems; the true rate is the pooled one."""
    idx = rng.integers(0, len(n), size=(reps, len(n)))
    return n[idx].astype(float), x[idx].astype(float), float(x.sum() / n.sum())


def fitted_icc(n: np.ndarray, x: np.ndarray) -> float:
    """Intra-problem correlation from the observed design effect: deff = 1 + (n0 - 1) rho (moment estimator)."""
    used = n > 0
    m, total = int(used.sum()), float(n.sum())
    p = float(x.sum()) / total
    if m < 2 or p <= 0 or p >= 1:
        return 0.0
    resid = x[used] - p * n[used]
    deff = (m / (m - 1) * float(np.sum(resid ** 2)) / total ** 2) / (p * (1 - p) / total)
    n0 = (total - float(np.sum(n[used] ** 2)) / total) / (m - 1)
    return float(np.clip((deff - 1) / (n0 - 1), 0.0, 0.99)) if n0 > 1 else 0.0


def parametric_world(n: np.ndarray, x: np.ndarray, reps: int, rng: np.random.Generator) -> World:
    """(reps, K) beta-binomial events on the observed tests per problem, mean the pooled rate, fitted correlation."""
    p = float(x.sum() / n.sum())
    rho = fitted_icc(n, x)
    nn = np.broadcast_to(n.astype(float), (reps, len(n))).copy()
    if p <= 0 or p >= 1:
        return nn, np.full_like(nn, 0.0 if p <= 0 else 1.0) * nn, p
    if rho <= 0:
        pi = np.full_like(nn, p)
    else:
        s = (1 - rho) / rho
        pi = rng.beta(p * s, (1 - p) * s, size=nn.shape)
    return nn, rng.binomial(n.astype(np.int64), pi).astype(float), p


# ---------------------------------------------------------------- methods (vectorised over the rows)


def _stats(n: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, ...]:
    total, events = n.sum(1), x.sum(1)
    m = (n > 0).sum(1).astype(float)
    p = np.divide(events, total, out=np.zeros_like(events), where=total > 0)
    resid2 = ((x - p[:, None] * n) ** 2).sum(1)
    var_cl = np.divide(m, m - 1, out=np.zeros_like(m), where=m > 1) * resid2 / np.maximum(total, 1) ** 2
    return total, events, m, p, var_cl


def cluster_wilson(n: np.ndarray, x: np.ndarray, level: float) -> Bounds:
    return rate_interval.cluster_wilson_bounds(x, n, level)


def _t(level: float, df: np.ndarray) -> np.ndarray:
    return stats.t.ppf(1 - (1 - level) / 2, np.maximum(df, 1))


def t_ratio(n: np.ndarray, x: np.ndarray, level: float) -> Bounds:
    total, events, m, p, var_cl = _stats(n, x)
    half = _t(level, m - 1) * np.sqrt(var_cl)
    return np.clip(p - half, 0, 1), np.clip(p + half, 0, 1)


def wilson_t(n: np.ndarray, x: np.ndarray, level: float) -> Bounds:
    total, events, m, p, var_cl = _stats(n, x)
    z = stats.norm.ppf(1 - (1 - level) / 2)
    n_eff = total / rate_interval.design_effects(x, n)
    return rate_interval.wilson_score(p, n_eff * (z / _t(level, m - 1)) ** 2, events, total, level)


def clopper_pearson(events: np.ndarray, n: np.ndarray, level: float) -> Bounds:
    """Clopper-Pearson bounds for ``events`` of ``n`` (both may be fractional, as effective counts are)."""
    x, n = np.asarray(events, dtype=float), np.asarray(n, dtype=float)
    a = (1 - level) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(x > 0, special.betaincinv(np.maximum(x, 1e-12), np.maximum(n - x + 1, 1e-12), a), 0.0)
        hi = np.where(x < n, special.betaincinv(x + 1, np.maximum(n - x, 1e-12), 1 - a), 1.0)
    return np.clip(np.nan_to_num(lo, nan=0.0), 0, 1), np.clip(np.nan_to_num(hi, nan=1.0), 0, 1)


def _kg(n: np.ndarray, x: np.ndarray, level: float, df: np.ndarray) -> Bounds:
    total, events, m, p, var_cl = _stats(n, x)
    z = stats.norm.ppf(1 - (1 - level) / 2)
    n_df = total / rate_interval.design_effects(x, n) * (z / _t(level, df)) ** 2
    return clopper_pearson(p * n_df, n_df, level)


def korn_graubard(n: np.ndarray, x: np.ndarray, level: float) -> Bounds:
    return _kg(n, x, level, (n > 0).sum(1) - 1.0)


def kg_event_df(n: np.ndarray, x: np.ndarray, level: float) -> Bounds:
    s, s2 = x.sum(1), (x ** 2).sum(1)
    event_clusters = np.divide(s * s, s2, out=np.zeros_like(s), where=s2 > 0)
    return _kg(n, x, level, np.maximum(event_clusters - 1, 1.0))


def _deff_floor(rho: float) -> Callable[..., Bounds]:
    """Wilson on n / deff with deff at least 1 + (n_w - 1) rho: the design effect at correlation ``rho``."""
    def method(n: np.ndarray, x: np.ndarray, level: float) -> Bounds:
        total, events, m, p, var_cl = _stats(n, x)
        floor = 1 + (rate_interval.full_correlation_design_effect(n) - 1) * rho
        deff = np.maximum(rate_interval.design_effects(x, n), floor)
        return rate_interval.wilson_score(p, total / deff, events, total, level)
    return method


def problem_weighted_wilson(n: np.ndarray, x: np.ndarray, level: float) -> Bounds:
    return rate_interval.problem_weighted_wilson_bounds(x, n, level)


def _inner(n: np.ndarray, x: np.ndarray, boot: int, seed: int, chunk: int = 64):
    """Per chunk of rows: (rows, boot) pooled rate and CR1 standard error of resamples over problems."""
    rng = np.random.default_rng(seed)
    k = n.shape[1]
    for start in range(0, n.shape[0], chunk):
        nn, xx = n[start:start + chunk], x[start:start + chunk]
        idx = rng.integers(0, k, size=(boot, k))
        bn, bx = nn[:, idx], xx[:, idx]  # (rows, boot, k)
        total, events = bn.sum(2), bx.sum(2)
        p = np.divide(events, total, out=np.zeros_like(events), where=total > 0)
        m = (bn > 0).sum(2).astype(float)
        resid2 = ((bx - p[..., None] * bn) ** 2).sum(2)
        var = np.divide(m, m - 1, out=np.zeros_like(m), where=m > 1) * resid2 / np.maximum(total, 1) ** 2
        yield start, p, np.sqrt(var)


def boot_percentile(n: np.ndarray, x: np.ndarray, level: float, boot: int = 399, seed: int = 1) -> Bounds:
    lo, hi = np.empty(n.shape[0]), np.empty(n.shape[0])
    a = (1 - level) / 2
    for start, p, _ in _inner(n, x, boot, seed):
        lo[start:start + len(p)], hi[start:start + len(p)] = np.quantile(p, [a, 1 - a], axis=1)
    return lo, hi


def boot_t(n: np.ndarray, x: np.ndarray, level: float, boot: int = 399, seed: int = 1) -> Bounds:
    total, events, m, p_hat, var_cl = _stats(n, x)
    se_hat = np.sqrt(var_cl)
    lo, hi = np.empty(n.shape[0]), np.empty(n.shape[0])
    a = (1 - level) / 2
    for start, p, se in _inner(n, x, boot, seed):
        ph = p_hat[start:start + len(p), None]
        # a resample with no spread (no events, or one problem) has no studentized value: +-inf by its side
        tt = np.divide(p - ph, se, out=np.where(p > ph, np.inf, np.where(p < ph, -np.inf, 0.0)), where=se > 0)
        q_lo, q_hi = np.quantile(tt, [a, 1 - a], axis=1, method="inverted_cdf")  # no interpolation across inf
        s = se_hat[start:start + len(p)]
        lo[start:start + len(p)] = p_hat[start:start + len(p)] - np.nan_to_num(q_hi * s, posinf=1.0, nan=0.0)
        hi[start:start + len(p)] = p_hat[start:start + len(p)] - np.nan_to_num(q_lo * s, neginf=-1.0, nan=0.0)
    return np.clip(lo, 0, 1), np.clip(hi, 0, 1)


METHODS: dict[str, Callable[..., Bounds]] = {
    "cluster_wilson": cluster_wilson, "t_ratio": t_ratio, "wilson_t": wilson_t, "korn_graubard": korn_graubard,
    "kg_event_df": kg_event_df, "boot_percentile": boot_percentile, "boot_t": boot_t,
    "deff_floor_rho50": _deff_floor(0.5), "deff_floor_rho75": _deff_floor(0.75),
    "problem_weighted_wilson": problem_weighted_wilson,
}
BOOTSTRAPS = {"boot_percentile", "boot_t"}


# ---------------------------------------------------------------- run


def coverage(lo: np.ndarray, hi: np.ndarray, truth: float) -> tuple[float, float]:
    """Share of intervals holding the true rate (bounds compared with a 1e-12 tolerance) and its MC error."""
    hit = (lo <= truth + 1e-12) & (truth - 1e-12 <= hi)
    c = float(hit.mean())
    return c, float(np.sqrt(max(c * (1 - c), 1e-12) / len(hit)))


def run(cells: list[dict], reps: int, boot: int, seed: int, methods: list[str], boot_reps: int) -> list[dict]:
    rows = []
    for j, cell in enumerate(cells):
        n, x = np.asarray(cell["tests"], dtype=float), np.asarray(cell["events"], dtype=float)
        if x.sum() == 0:  # a true rate of 0 in both worlds: every lower bound is 0, every method covers it
            rows.append({"world": "none", "condition": cell["condition"], "metric": cell["metric"],
                         "problems_with_events": 0, "events": 0, "tests": int(n.sum()), "method": None})
            continue
        for w, world in enumerate((bootstrap_world, parametric_world)):
            rng = np.random.default_rng([seed, j, w])
            nn, xx, truth = world(n, x, reps, rng)
            for name in methods:
                r = boot_reps if name in BOOTSTRAPS else reps
                kw = {"boot": boot, "seed": seed + j} if name in BOOTSTRAPS else {}
                lo, hi = METHODS[name](nn[:r], xx[:r], LEVEL, **kw)
                c, se = coverage(lo, hi, truth)
                rows.append({"world": world.__name__.replace("_world", ""), "condition": cell["condition"],
                             "metric": cell["metric"], "problems_with_events": int((x > 0).sum()),
                             "events": int(x.sum()), "tests": int(n.sum()), "truth": truth, "method": name,
                             "coverage": c, "mc_se": se, "reps": r,
                             "mean_width": float(np.mean(hi - lo))})
    return rows


def skipped(rows: list[dict]) -> str:
    """The line naming the cells without events (not simulated)."""
    none = [f"{r['condition']} {r['metric']}" for r in rows if r["method"] is None]
    return f"\nCells without events (a true rate of 0: every method covers it): {', '.join(none)}" if none else ""


def render(rows: list[dict], level: float = LEVEL) -> str:
    rows = [r for r in rows if r["method"] is not None]
    out = ["| world | cell | problems with events | method | coverage % | MC error % | mean width (points) |",
           "|:--|:--|--:|:--|--:|--:|--:|"]
    for r in rows:
        out.append(f"| {r['world']} | {r['condition']} {r['metric']} | {r['problems_with_events']} | {r['method']} | "
                   f"{100 * r['coverage']:.1f} | {100 * r['mc_se']:.1f} | {100 * r['mean_width']:.1f} |")
    out += ["", "| method | lowest coverage % (cell, world) | cells at least level - 1 point | cells within 1 point |",
            "|:--|:--|:--|:--|"]
    for name in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == name]
        worst = min(mine, key=lambda r: r["coverage"])
        reach = sum(r["coverage"] >= level - 0.01 for r in mine)
        within = sum(abs(r["coverage"] - level) <= 0.01 for r in mine)
        out.append(f"| {name} | {100 * worst['coverage']:.1f} ({worst['condition']} {worst['metric']}, "
                   f"{worst['world']}) | {reach} of {len(mine)} | {within} of {len(mine)} |")
    return "\n".join(out)


def render_compact(rows: list[dict]) -> str:
    """One row per cell and method, both worlds side by side (the table docs/analysis.md shows)."""
    rows = [r for r in rows if r["method"] is not None]
    out = ["| cell | problems with events | method | bootstrap world coverage % (MC error) | "
           "parametric world coverage % (MC error) | mean width, bootstrap / parametric (points) |",
           "|:--|--:|:--|--:|--:|--:|"]
    by = {(r["condition"], r["metric"], r["method"], r["world"]): r for r in rows}
    for key in dict.fromkeys((r["condition"], r["metric"], r["method"]) for r in rows):
        b, p = by.get((*key, "bootstrap")), by.get((*key, "parametric"))
        cov = [f"{100 * r['coverage']:.1f} ({100 * r['mc_se']:.1f})" if r else "" for r in (b, p)]
        width = " / ".join(f"{100 * r['mean_width']:.1f}" for r in (b, p) if r)
        first = b or p
        assert first is not None
        out.append(f"| {key[0]} {key[1]} | {first['problems_with_events']} | {key[2]} | {cov[0]} | {cov[1]} | {width} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="DuckDB file of a replay of the recorded run (else --cells)")
    ap.add_argument("--cells", type=Path, default=DEFAULT_CELLS)
    ap.add_argument("--reps", type=int, default=4000, help="data sets per cell and world")
    ap.add_argument("--boot-reps", type=int, default=1000, help="data sets per cell and world for bootstrap methods")
    ap.add_argument("--boot", type=int, default=399, help="resamples per data set of a bootstrap method")
    ap.add_argument("--seed", type=int, default=20260417)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--compact", action="store_true", help="print both worlds side by side (the docs' table)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = run(load_cells(args.db, args.cells), args.reps, args.boot, args.seed, args.methods.split(","),
               min(args.boot_reps, args.reps))
    print((render_compact(rows) if args.compact else render(rows)) + skipped(rows))
    print(f"\n{args.reps} data sets per cell and world ({min(args.boot_reps, args.reps)} for the bootstrap methods, "
          f"{args.boot} resamples each), seed {args.seed}, {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
