"""Paired bootstrap over problems for pooled rates, vectorised as a resample-count matrix.

A resample draws ``n`` problem indices with replacement. Rather than gathering rows, each
resample is stored as how many times it drew each problem: a ``(n_boot, n)`` count matrix
``W``. Every pooled rate on every resample is then one matrix product, ``W @ counts``, so
one resample drives all rates compared on it (the pairing) and thousands of resamples cost
milliseconds.

Zero denominators: when every drawn problem has zero tests, the pooled rate of that
resample is ``zero_rate`` (0 by default: no tests means no misleading test); results count
such resamples in ``n_zero_denominator``.

Monte Carlo error: each interval bound carries its Monte Carlo standard error (``mc_se_low``,
``mc_se_high``), estimated by batch resampling of the replicates (``bound_mc_se``): the resamples are
cut into ``MC_BATCHES`` consecutive batches, the bound is computed in each batch, and the standard
error of the bound from all resamples is the batches' standard deviation over sqrt(MC_BATCHES). It
says how far the bound would move with another seed at the same number of resamples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: an interval bound closer to 0 than this is 0: a difference that is 0 in every resample can come out of
#: the float arithmetic as 2.8e-17, which must not read as an interval that excludes 0
ZERO_TOL = 1e-12
#: batches for the Monte Carlo standard error of a bootstrap bound (10,000 resamples: 10 batches of 1,000)
MC_BATCHES = 10


def excludes_zero(ci_low: float, ci_high: float) -> bool:
    """The interval lies wholly above or below 0, by more than float noise (ZERO_TOL)."""
    return bool(np.isfinite(ci_low) and np.isfinite(ci_high) and (ci_low > ZERO_TOL or ci_high < -ZERO_TOL))


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile bootstrap interval."""

    estimate: float
    ci_low: float
    ci_high: float
    level: float
    n_boot: int
    seed: int
    n_problems: int
    n_zero_denominator: int = 0
    mc_se_low: float = float("nan")  # Monte Carlo standard error of ci_low (bound_mc_se)
    mc_se_high: float = float("nan")  # Monte Carlo standard error of ci_high

    @property
    def excludes_zero(self) -> bool:
        return excludes_zero(self.ci_low, self.ci_high)


def _columns(x: np.ndarray) -> np.ndarray:
    """A 1-d array as one column; a 2-d array as is."""
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x


def resample_counts(n_problems: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n_problems) matrix: how often each problem is drawn in each resample.

    Drawn as indices (``rng.integers``) so that a loop drawing ``rng.integers(0, n, n)``
    per resample with the same seed sees exactly the same resamples.
    """
    if n_problems == 0:
        return np.zeros((n_boot, 0), dtype=np.int64)
    idx = rng.integers(0, n_problems, size=(n_boot, n_problems))
    flat = idx + (np.arange(n_boot, dtype=np.int64) * n_problems)[:, None]
    return np.bincount(flat.ravel(), minlength=n_boot * n_problems).reshape(n_boot, n_problems)


def pooled_rate(num: np.ndarray, den: np.ndarray, zero_rate: float = 0.0) -> np.ndarray:
    """num / den elementwise, ``zero_rate`` where den == 0."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, zero_rate, dtype=float)
    np.divide(num, den, out=out, where=den > 0)
    return out


def percentile_interval(samples: np.ndarray, level: float, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed percentile interval (numpy's default linear interpolation, as scipy uses)."""
    alpha = 1.0 - level
    lo, hi = np.percentile(samples, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=axis)
    return lo, hi


def bound_mc_se(samples: np.ndarray, level: float, n_batches: int = MC_BATCHES) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo standard error of each percentile bound of ``samples`` (n_boot, k), by batch resampling.

    The replicates are cut into ``n_batches`` consecutive batches of equal size (a remainder is left out),
    each batch gives its own percentile bounds, and the standard error of the bound from all replicates is
    the standard deviation of the batch bounds over sqrt(n_batches). NaN with fewer than 2 batches of at
    least 2 replicates each.
    """
    x = np.asarray(samples, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    size = x.shape[0] // n_batches if n_batches > 0 else 0
    if n_batches < 2 or size < 2:
        nan = np.full(x.shape[1], np.nan)
        return nan, nan.copy()
    batches = x[: size * n_batches].reshape(n_batches, size, x.shape[1])
    lo, hi = percentile_interval(batches, level, axis=1)  # (n_batches, k) each
    scale = np.sqrt(n_batches)
    return lo.std(axis=0, ddof=1) / scale, hi.std(axis=0, ddof=1) / scale


def bootstrap_pooled_rates(
    numerators: np.ndarray, denominators: np.ndarray, n_boot: int, seed: int, zero_rate: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Pooled rates of k ratios on the same resamples.

    ``numerators``/``denominators``: (n_problems, k) per-problem counts. Returns
    ``(rates, zero_den)``: (n_boot, k) resampled pooled rates and (n_boot, k) booleans
    marking resamples whose pooled denominator is 0.
    """
    num, den = _columns(numerators), _columns(denominators)
    rng = np.random.default_rng(seed)
    weights = resample_counts(num.shape[0], n_boot, rng).astype(float)
    boot_num = weights @ num
    boot_den = weights @ den
    return pooled_rate(boot_num, boot_den, zero_rate), boot_den == 0


def paired_difference(
    num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray,
    *, n_boot: int = 10_000, level: float = 0.9875, seed: int = 0, zero_rate: float = 0.0,
) -> Interval:
    """Pooled rate of a minus pooled rate of b, both recomputed on the same resample of problems."""
    return paired_differences(
        _columns(num_a), _columns(den_a), _columns(num_b), _columns(den_b),
        n_boot=n_boot, level=level, seed=seed, zero_rate=zero_rate,
    )[0]


def paired_differences(
    num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray,
    *, n_boot: int = 10_000, level: float = 0.9875, seed: int = 0, zero_rate: float = 0.0,
) -> list[Interval]:
    """k paired differences (columns of the (n_problems, k) inputs) on one set of resamples."""
    num_a, den_a, num_b, den_b = (_columns(x) for x in (num_a, den_a, num_b, den_b))
    n, k = num_a.shape
    if n == 0:
        nan = float("nan")
        return [Interval(nan, nan, nan, level, n_boot, seed, 0) for _ in range(k)]
    rates, zero = bootstrap_pooled_rates(
        np.hstack([num_a, num_b]), np.hstack([den_a, den_b]), n_boot, seed, zero_rate
    )
    diffs = rates[:, :k] - rates[:, k:]
    lo, hi = percentile_interval(diffs, level)
    se_lo, se_hi = bound_mc_se(diffs, level)
    est = pooled_rate(num_a.sum(0), den_a.sum(0), zero_rate) - pooled_rate(num_b.sum(0), den_b.sum(0), zero_rate)
    n_zero = (zero[:, :k] | zero[:, k:]).sum(0)
    return [
        Interval(float(est[j]), float(lo[j]), float(hi[j]), level, n_boot, seed, n, int(n_zero[j]),
                 float(se_lo[j]), float(se_hi[j]))
        for j in range(k)
    ]


def rate_intervals(
    num: np.ndarray, den: np.ndarray, *, n_boot: int = 10_000, level: float = 0.9875, seed: int = 0,
    zero_rate: float = 0.0,
) -> list[Interval]:
    """Pooled rate with a percentile interval for each column of (n_problems, k) counts."""
    num, den = _columns(num), _columns(den)
    n, k = num.shape
    if n == 0:
        nan = float("nan")
        return [Interval(nan, nan, nan, level, n_boot, seed, 0) for _ in range(k)]
    rates, zero = bootstrap_pooled_rates(num, den, n_boot, seed, zero_rate)
    lo, hi = percentile_interval(rates, level)
    se_lo, se_hi = bound_mc_se(rates, level)
    est = pooled_rate(num.sum(0), den.sum(0), zero_rate)
    return [
        Interval(float(est[j]), float(lo[j]), float(hi[j]), level, n_boot, seed, n, int(zero[:, j].sum()),
                 float(se_lo[j]), float(se_hi[j]))
        for j in range(k)
    ]


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two label vectors; NaN when empty or when chance agreement is 1."""
    a = np.asarray(a)
    b = np.asarray(b)
    if len(a) == 0:
        return float("nan")
    labels = np.union1d(a, b)
    p_obs = float(np.mean(a == b))
    p_exp = float(sum(np.mean(a == v) * np.mean(b == v) for v in labels))
    if p_exp >= 1.0:
        return float("nan")
    return (p_obs - p_exp) / (1.0 - p_exp)
