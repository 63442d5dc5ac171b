"""Intervals for one condition's pooled rate that do not collapse when the cell has few or no events.

A percentile bootstrap over problems gives "0.0 % [0.0, 0.0]" for 0 misleading tests in 12 and
"8.3 % [0.0, 10.0]" for 1 in 12 (an upper bound that can fall below the estimate): with few events every
resample draws the same handful. A reviewer expects a bound that says how large the rate could still be.

Method (plan 1.3.0): a **cluster-adjusted Wilson score interval**. Tests are clustered in problems (one
answer's tests share its mistakes), so the binomial sample size overstates the information: the design
effect ``deff`` is the ratio of the ratio-estimator variance of the pooled rate over problems (the
between-cluster variance a bootstrap over problems estimates) to the binomial variance, floored at 1, and
the Wilson interval is computed on the effective sample size ``n / deff``. With 0 events (or all events) the
variance ratio cannot be estimated and ``deff = 1``: the plain Wilson bound, e.g. 0 of 12 at 98.75 % gives
[0.0 %, 34.2 %]. Chosen over a Bayesian (Jeffreys) interval because the Wilson interval is the usual
frequentist choice for proportions near 0 and needs no prior; over an exact Clopper-Pearson bound because
that is conservative by construction and ignores the clustering.

The preregistered paired bootstrap stays for the four comparisons (bootstrap.paired_differences).

Proposed beside it (an amendment in prompts/analysis_plan_changes.md, not adopted; the study prints the
cluster-adjusted Wilson interval): the **problem-weighted Wilson interval** (``problem_weighted_wilson``), whose
design effect is at least its value at full intra-problem correlation. A coverage simulation on the recorded run's
own cluster structure (benchmarks/bench_interval_coverage.py, table in docs/analysis.md) finds the
cluster-adjusted Wilson interval at 72-98 % where it states 98.75 %, and the problem-weighted one at 99-100 %.
The ``*_bounds`` functions compute either interval for many data sets at once (rows of per-problem counts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RateInterval:
    estimate: float
    ci_low: float
    ci_high: float
    level: float
    n: int  # tests (the denominator)
    n_clusters: int  # problems with at least one test
    design_effect: float


def design_effect(num: np.ndarray, den: np.ndarray) -> float:
    """Ratio-estimator variance over clusters / binomial variance (>= 1; 1 when it cannot be estimated)."""
    n, x = float(den.sum()), float(num.sum())
    used = den > 0
    m = int(used.sum())
    if n == 0 or m < 2:
        return 1.0
    p = x / n
    if p <= 0.0 or p >= 1.0:
        return 1.0
    resid = num[used] - p * den[used]
    # both with the small-sample correction (m/(m-1) over clusters, n/(n-1) over tests), so that one test per
    # problem gives deff = 1 exactly and the interval is the plain Wilson score interval
    var_cluster = m / (m - 1) * float(np.sum(resid ** 2)) / n ** 2
    var_binom = p * (1 - p) / (n - 1) if n > 1 else p * (1 - p)
    return max(1.0, var_cluster / var_binom)


def cluster_wilson(num: np.ndarray, den: np.ndarray, level: float) -> RateInterval:
    """The pooled rate sum(num)/sum(den) of per-problem counts with its cluster-adjusted Wilson interval."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    n, x = float(den.sum()), float(num.sum())
    clusters = int((den > 0).sum())
    if n == 0:
        nan = float("nan")
        return RateInterval(nan, nan, nan, level, 0, 0, nan)
    p = x / n
    deff = design_effect(num, den)
    n_eff = n / deff
    from scipy.stats import norm  # here, not at import: scipy.stats costs every run worker 1.5 s to load

    z = float(norm.ppf(1 - (1 - level) / 2))
    denom = 1 + z * z / n_eff
    centre = (p + z * z / (2 * n_eff)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff * n_eff))
    lo, hi = max(0.0, centre - half), min(1.0, centre + half)
    if x == 0:
        lo = 0.0
    if x == n:
        hi = 1.0
    return RateInterval(p, lo, hi, level, int(n), clusters, deff)


# ---------------------------------------------------------------- vectorised forms (rows of per-problem counts)


def _rows(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-problem counts as (rows, problems) float arrays; one data set is one row."""
    return np.atleast_2d(np.asarray(num, dtype=float)), np.atleast_2d(np.asarray(den, dtype=float))


def design_effects(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``design_effect`` of each row of (rows, problems) counts, in one pass."""
    x, n = _rows(num, den)
    total, events = n.sum(1), x.sum(1)
    m = (n > 0).sum(1).astype(float)
    p = np.divide(events, total, out=np.zeros_like(events), where=total > 0)
    resid2 = ((x - p[:, None] * n) ** 2 * (n > 0)).sum(1)
    ok = (m >= 2) & (p > 0) & (p < 1)
    var_cluster = np.divide(m, m - 1, out=np.zeros_like(m), where=ok) * resid2 / np.maximum(total, 1) ** 2
    var_binom = np.where(total > 1, p * (1 - p) / np.maximum(total - 1, 1), p * (1 - p))
    ratio = np.divide(var_cluster, var_binom, out=np.ones_like(p), where=ok & (var_binom > 0))
    return np.maximum(1.0, ratio)


def _z(level: float) -> float:
    from scipy.stats import norm  # here, not at import: scipy.stats costs every run worker 1.5 s to load

    return float(norm.ppf(1 - (1 - level) / 2))


def wilson_score(p: np.ndarray, n_eff: np.ndarray, events: np.ndarray, total: np.ndarray, level: float) -> tuple[
        np.ndarray, np.ndarray]:
    """Wilson score bounds of rate ``p`` on sample size ``n_eff``; 0 / 1 exactly when no / every test is an event."""
    z = _z(level)
    n_eff = np.maximum(np.asarray(n_eff, dtype=float), 1e-12)
    denom = 1 + z * z / n_eff
    centre = (p + z * z / (2 * n_eff)) / denom
    half = z / denom * np.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff * n_eff))
    lo = np.where(events <= 0, 0.0, np.maximum(0.0, centre - half))
    hi = np.where(events >= total, 1.0, np.minimum(1.0, centre + half))
    return lo, hi


def cluster_wilson_bounds(num: np.ndarray, den: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """``cluster_wilson``'s bounds for each row of (rows, problems) counts (rows without tests: NaN)."""
    x, n = _rows(num, den)
    total, events = n.sum(1), x.sum(1)
    p = np.divide(events, total, out=np.zeros_like(events), where=total > 0)
    lo, hi = wilson_score(p, total / design_effects(x, n), events, total, level)
    empty = total == 0
    return np.where(empty, np.nan, lo), np.where(empty, np.nan, hi)


def full_correlation_design_effect(den: np.ndarray) -> np.ndarray:
    """Design effect of each row when every test of a problem lands in the same cell: sum n_i^2 / sum n_i.

    The ratio estimator's design effect is 1 + (n_w - 1) rho with n_w = sum n_i^2 / sum n_i and rho the
    intra-problem correlation; at rho = 1 it is n_w, and n / deff = (sum n_i)^2 / sum n_i^2 is Kish's effective
    number of problems (each problem one observation, weighted by its tests). 1 for a row without tests.
    """
    n = np.atleast_2d(np.asarray(den, dtype=float))
    total = n.sum(1)
    return np.maximum(1.0, np.divide((n ** 2).sum(1), total, out=np.ones_like(total), where=total > 0))


def problem_weighted_wilson_bounds(num: np.ndarray, den: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """``problem_weighted_wilson``'s bounds for each row of (rows, problems) counts (rows without tests: NaN)."""
    x, n = _rows(num, den)
    total, events = n.sum(1), x.sum(1)
    p = np.divide(events, total, out=np.zeros_like(events), where=total > 0)
    deff = np.maximum(design_effects(x, n), full_correlation_design_effect(n))
    lo, hi = wilson_score(p, total / deff, events, total, level)
    empty = total == 0
    return np.where(empty, np.nan, lo), np.where(empty, np.nan, hi)


def problem_weighted_wilson(num: np.ndarray, den: np.ndarray, level: float) -> RateInterval:
    """The pooled rate sum(num)/sum(den) of per-problem counts with its problem-weighted Wilson interval.

    The Wilson score interval on n / deff with deff the larger of the estimated design effect
    (``design_effect``, as ``cluster_wilson``) and the design effect at full intra-problem correlation
    (``full_correlation_design_effect``): the sample size is at most Kish's effective number of problems. Why:
    the estimated design effect cannot see a problem the data lack. In the recorded 1.5B run one answer holds
    28 of buggy_code's 56 misleading tests; a resample of problems misses it about a third of the time, the
    remaining tests look independent, and the cluster-adjusted Wilson interval covers 72 % instead of 98.75 %
    (benchmarks/bench_interval_coverage.py, docs/analysis.md). Counting each problem once, weighted by its tests,
    keeps the level there; where events are spread over many problems it is wider than needed.
    """
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    n, x = float(den.sum()), float(num.sum())
    clusters = int((den > 0).sum())
    if n == 0:
        nan = float("nan")
        return RateInterval(nan, nan, nan, level, 0, 0, nan)
    deff = max(design_effect(num, den), float(full_correlation_design_effect(den)[0]))
    lo, hi = problem_weighted_wilson_bounds(num, den, level)
    return RateInterval(x / n, float(lo[0]), float(hi[0]), level, int(n), clusters, deff)
