"""Per-condition rate intervals that do not collapse: cluster-adjusted Wilson (plan 1.3.0)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from evalmislead_assets.analysis.rate_interval import cluster_wilson, design_effect


def test_no_or_few_events_give_an_interval_of_positive_width():
    zero = cluster_wilson(np.zeros(4), np.full(4, 3), 0.9875)  # 0 misleading of 12 tests, 4 problems
    assert zero.estimate == 0 and zero.ci_low == 0 and zero.ci_high == pytest.approx(0.342, abs=1e-3)
    one = cluster_wilson(np.array([1, 0, 0, 0]), np.full(4, 3), 0.9875)  # 1 of 12: the bound is above the estimate
    assert 0 < one.ci_low < one.estimate < one.ci_high and one.ci_high > 2 * one.estimate
    full = cluster_wilson(np.full(3, 2), np.full(3, 2), 0.9875)
    assert full.ci_high == 1 and full.ci_low < 1


def test_without_clustering_it_is_the_wilson_interval():
    # one test per problem: deff = 1 and the interval is scipy's Wilson score interval
    num = np.array([1] * 7 + [0] * 23)
    got = cluster_wilson(num, np.ones(30), 0.95)
    want = binomtest(7, 30).proportion_ci(confidence_level=0.95, method="wilson")
    assert (got.ci_low, got.ci_high) == pytest.approx((want.low, want.high), abs=1e-9)


def test_clustered_events_widen_the_interval():
    spread = cluster_wilson(np.array([1, 1, 1, 1, 1, 1]), np.full(6, 8), 0.9875)
    lumped = cluster_wilson(np.array([6, 0, 0, 0, 0, 0]), np.full(6, 8), 0.9875)
    assert spread.estimate == lumped.estimate
    assert design_effect(np.array([6, 0, 0, 0, 0, 0]), np.full(6, 8)) > 1 == spread.design_effect
    assert lumped.ci_high - lumped.ci_low > spread.ci_high - spread.ci_low


def test_no_tests_is_not_estimable():
    iv = cluster_wilson(np.zeros(3), np.zeros(3), 0.9875)
    assert np.isnan(iv.estimate) and np.isnan(iv.ci_low) and np.isnan(iv.ci_high)
