"""Paired bootstrap over problems: exact agreement with a loop, scipy cross-check, edge cases."""


import numpy as np
import pytest
from scipy import stats

from evalmislead_assets.analysis import bootstrap as st


def loop_paired_bootstrap(num_a, den_a, num_b, den_b, n_boot, level, seed, zero_rate=0.0):
    """Independent reference: one index resample per iteration drives both pooled rates."""
    rng = np.random.default_rng(seed)
    n = len(num_a)
    diffs = np.empty(n_boot)
    for b in range(n_boot):
        idx = rng.integers(0, n, size=n)
        da, db = den_a[idx].sum(), den_b[idx].sum()
        ra = num_a[idx].sum() / da if da else zero_rate
        rb = num_b[idx].sum() / db if db else zero_rate
        diffs[b] = ra - rb
    alpha = 1 - level
    return np.percentile(diffs, [100 * alpha / 2, 100 * (1 - alpha / 2)])


def synthetic(n=164, p_a=0.16, p_b=0.05, seed=7):
    rng = np.random.default_rng(seed)
    den_a = rng.integers(0, 12, n)
    den_b = rng.integers(0, 12, n)
    return rng.binomial(den_a, p_a), den_a, rng.binomial(den_b, p_b), den_b


def test_resample_counts_are_the_index_draws_of_a_loop():
    w = st.resample_counts(9, 50, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    expected = np.stack([np.bincount(rng.integers(0, 9, 9), minlength=9) for _ in range(50)])
    assert w.shape == (50, 9)
    assert (w.sum(axis=1) == 9).all()
    np.testing.assert_array_equal(w, expected)


def test_paired_difference_equals_loop_reference_exactly():
    na, da, nb, db = synthetic(n=60)
    iv = st.paired_difference(na, da, nb, db, n_boot=2000, level=0.9875, seed=11)
    lo, hi = loop_paired_bootstrap(na, da, nb, db, 2000, 0.9875, 11)
    assert iv.estimate == pytest.approx(na.sum() / da.sum() - nb.sum() / db.sum())
    assert iv.ci_low == pytest.approx(lo, abs=1e-12)
    assert iv.ci_high == pytest.approx(hi, abs=1e-12)
    assert iv.n_problems == 60 and iv.n_boot == 2000 and iv.seed == 11


def test_interval_excludes_zero_for_a_large_difference_and_contains_it_for_none():
    # a: every problem has 4 tests, 2 misleading; b: 4 tests, 0 misleading -> +50 points, no doubt
    n = 30
    big = st.paired_difference(np.full(n, 2), np.full(n, 4), np.zeros(n), np.full(n, 4), n_boot=2000, seed=1)
    assert big.estimate == pytest.approx(0.5)
    assert big.ci_low == pytest.approx(0.5) and big.excludes_zero
    # same rate on average, problem-level noise: the interval must straddle 0
    rng = np.random.default_rng(5)
    den = np.full(n, 6)
    a = rng.binomial(den, 0.3)
    b = np.roll(a, 1)  # the same counts on other problems: equal totals, paired noise
    same = st.paired_difference(a, den, b, den, n_boot=4000, seed=2)
    assert same.estimate == pytest.approx(0.0)
    assert same.ci_low < 0 < same.ci_high and not same.excludes_zero


def test_problems_with_zero_tests_stay_in_the_resample():
    # problem 0 has tests in a only, problem 1 has none anywhere, problem 2 has tests in b only
    na, da = np.array([1, 0, 0]), np.array([2, 0, 0])
    nb, db = np.array([0, 0, 1]), np.array([0, 0, 4])
    iv = st.paired_difference(na, da, nb, db, n_boot=3000, level=0.9, seed=4)
    lo, hi = loop_paired_bootstrap(na, da, nb, db, 3000, 0.9, 4)
    assert iv.n_problems == 3
    assert (iv.ci_low, iv.ci_high) == pytest.approx((lo, hi))


def test_zero_denominator_resamples_count_as_rate_zero():
    # Only problem 1 has tests (in both conditions). A resample without it has denominator 0 in
    # both conditions: rate 0 - 0 = 0. P(problem 1 never drawn from 2) = 1/4.
    na, da = np.array([0, 3]), np.array([0, 3])
    nb, db = np.array([0, 0]), np.array([0, 3])
    iv = st.paired_difference(na, da, nb, db, n_boot=4000, level=0.5, seed=9)
    assert iv.estimate == 1.0
    assert iv.n_zero_denominator == pytest.approx(1000, abs=120)
    rng = np.random.default_rng(9)
    never = sum(1 not in rng.integers(0, 2, 2) for _ in range(4000))
    assert iv.n_zero_denominator == never  # the same draws as the loop
    rates, zero = st.bootstrap_pooled_rates(na, da, 4000, 9)
    assert set(np.unique(rates[zero[:, 0], 0])) == {0.0}
    # a NaN choice is possible too: the rule is a parameter
    rates_nan, _ = st.bootstrap_pooled_rates(na, da, 50, 9, zero_rate=np.nan)
    assert np.isnan(rates_nan).any() and np.nanmax(rates_nan) == 1.0


def test_no_problems_gives_nan_and_no_verdict():
    iv = st.paired_difference(np.array([]), np.array([]), np.array([]), np.array([]), n_boot=100)
    assert np.isnan(iv.estimate) and iv.n_problems == 0 and not iv.excludes_zero


def test_agrees_with_scipy_bootstrap_paired_percentile():
    na, da, nb, db = synthetic()

    def diff_of_pooled(a_num, a_den, b_num, b_den, axis=-1):
        return a_num.sum(axis) / a_den.sum(axis) - b_num.sum(axis) / b_den.sum(axis)

    ref = stats.bootstrap(
        (na, da, nb, db), diff_of_pooled, paired=True, vectorized=True, method="percentile",
        confidence_level=0.9875, n_resamples=10_000, rng=np.random.default_rng(123),
    ).confidence_interval
    ours = st.paired_difference(na, da, nb, db, n_boot=10_000, level=0.9875, seed=20260417)
    # Monte Carlo SD of either bound here is about 0.0005 (10 seeds); allow 6 SD.
    assert ours.ci_low == pytest.approx(ref.low, abs=3e-3)
    assert ours.ci_high == pytest.approx(ref.high, abs=3e-3)


def test_several_metrics_share_one_resample():
    na, da, nb, db = synthetic(n=50)
    eff_a, eff_b = da - na, db - nb
    two = st.paired_differences(
        np.column_stack([na, eff_a]), np.column_stack([da, da]), np.column_stack([nb, eff_b]),
        np.column_stack([db, db]), n_boot=1000, seed=3)
    one = st.paired_difference(eff_a, da, eff_b, db, n_boot=1000, seed=3)
    assert (two[1].ci_low, two[1].ci_high) == (one.ci_low, one.ci_high)


def test_rate_intervals_bracket_the_estimate():
    na, da, _, _ = synthetic()
    (iv,) = st.rate_intervals(na, da, n_boot=2000, level=0.95, seed=1)
    assert iv.ci_low < iv.estimate < iv.ci_high
    assert iv.estimate == pytest.approx(na.sum() / da.sum())


def test_eight_comparisons_in_one_vectorised_call():
    """Speed lives in benchmarks/bench_bootstrap.py; here: one call gives every comparison its interval."""
    na, da, nb, db = synthetic()
    out = st.paired_differences(np.column_stack([na, da - na]), np.column_stack([da, da]),
                                np.column_stack([nb, db - nb]), np.column_stack([db, db]), n_boot=2_000, seed=0)
    assert len(out) == 2
    for d in out:
        assert d.ci_low <= d.estimate <= d.ci_high


def test_cohen_kappa_known_values():
    assert st.cohen_kappa(np.array([1, 1, 0, 0]), np.array([1, 1, 0, 0])) == pytest.approx(1.0)
    # 3 of 4 agree; chance agreement 0.5 -> kappa 0.5
    assert st.cohen_kappa(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])) == pytest.approx(0.5)
    assert np.isnan(st.cohen_kappa(np.array([1, 1]), np.array([1, 1])))


def test_bound_mc_se_is_the_spread_of_the_batch_bounds():
    x = np.random.default_rng(0).normal(size=(1000, 2))
    se_lo, se_hi = st.bound_mc_se(x, 0.9, n_batches=10)
    per_batch = np.array([np.percentile(x[i * 100:(i + 1) * 100, 1], [5, 95]) for i in range(10)])
    assert se_lo[1] == pytest.approx(per_batch[:, 0].std(ddof=1) / np.sqrt(10))
    assert se_hi[1] == pytest.approx(per_batch[:, 1].std(ddof=1) / np.sqrt(10))
    assert st.bound_mc_se(np.ones((1000, 1)), 0.9)[0][0] == 0.0  # identical replicates: no Monte Carlo error
    assert np.isnan(st.bound_mc_se(np.ones((15, 1)), 0.9)[0][0])  # fewer than 2 per batch: not estimable


def test_mc_se_of_the_bounds_shrinks_with_more_resamples():
    na, da, nb, db = synthetic(n=80)
    few = st.paired_difference(na, da, nb, db, n_boot=1_000, seed=3)
    many = st.paired_difference(na, da, nb, db, n_boot=16_000, seed=3)
    assert few.mc_se_low > 0 and few.mc_se_high > 0
    # standard error ~ 1/sqrt(n_boot): 16 times the resamples, about a quarter of the error
    assert 1.5 < few.mc_se_low / many.mc_se_low < 10 and 1.5 < few.mc_se_high / many.mc_se_high < 10
    rates = st.rate_intervals(na, da, n_boot=2_000, seed=3)[0]
    assert rates.mc_se_low > 0 and rates.mc_se_high > 0


def test_report_says_when_the_last_digit_is_not_stable():
    from evalmislead_assets.report.formatting import mc_se, mc_stability_note

    assert "is stable" in mc_stability_note([0.0001, 0.0002], 10_000)
    unstable = mc_stability_note([0.0001, 0.003], 10_000)
    assert "not stable" in unstable and "0.30 points" in unstable and "10,000 resamples" in unstable
    assert mc_stability_note([float("nan")], 10_000) == ""
    assert mc_se(0.0021, 0.0035) == "0.21 / 0.35" and mc_se(None, 0.1) == "–"
