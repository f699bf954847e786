"""`crossed_mean`: the mean over runs x items, its interval over both, and its test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from biasscope.core.crossed import crossed_mean


def test_without_item_spread_it_is_the_t_test_over_runs() -> None:
    runs = np.array([0.3, -0.1, 0.5, 0.2])
    grid = np.repeat(runs[:, None], 3, axis=1)  # every item alike
    found = crossed_mean(grid, 0.9)
    t = sps.ttest_1samp(runs, 0.0)
    assert found["estimate"] == pytest.approx(runs.mean())
    assert found["p_value"] == pytest.approx(t.pvalue)
    assert found["df"] == 3
    low, high = sps.t.interval(0.9, 3, loc=runs.mean(), scale=sps.sem(runs))
    assert (found["low"], found["high"]) == pytest.approx((low, high))
    assert found["effect_size"] == pytest.approx(runs.mean() / runs.std(ddof=1))


def test_item_spread_widens_the_interval() -> None:
    rng = np.random.default_rng(0)
    runs = rng.normal(0, 0.1, 3)
    items = rng.normal(0, 1.0, 50)
    alone = crossed_mean(runs[:, None] + np.zeros(50)[None, :])
    both = crossed_mean(runs[:, None] + items[None, :])
    assert both["se"] ** 2 == pytest.approx(alone["se"] ** 2 + items.var(ddof=1) / 50)


def test_weights_make_a_weighted_mean() -> None:
    grid = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    found = crossed_mean(grid, weights=[2, 1, 1])
    assert found["estimate"] == pytest.approx(0.5)


def test_one_run_or_one_item_has_no_interval() -> None:
    for grid in (np.ones((1, 5)), np.ones((4, 1))):
        found = crossed_mean(grid)
        assert found["estimate"] == 1.0 and math.isnan(found["low"])
        assert math.isnan(found["p_value"])


def test_runs_that_agree_exactly() -> None:
    found = crossed_mean(np.zeros((3, 4)))
    assert found["p_value"] == 1.0 and found["low"] == found["high"] == 0.0
    assert crossed_mean(np.full((3, 4), 0.2))["p_value"] == 0.0


def test_unweighted_variance_is_the_anova_estimator() -> None:
    grid = np.random.default_rng(1).normal(size=(4, 30)) + np.linspace(0, 2, 30)[None, :]
    runs, items = grid.shape
    residual = (grid - grid.mean(1, keepdims=True) - grid.mean(0, keepdims=True) + grid.mean())
    ms_run = items * grid.mean(1).var(ddof=1)
    ms_item = runs * grid.mean(0).var(ddof=1)
    ms_residual = float((residual ** 2).sum()) / ((runs - 1) * (items - 1))
    assert ms_item > ms_residual
    assert crossed_mean(grid)["se"] ** 2 == pytest.approx(
        (ms_run + ms_item - ms_residual) / (runs * items))


def test_residual_noise_is_counted_once() -> None:
    """Runs x items of pure noise: the grand mean's variance is σ² / (runs · items); counting
    the residual in both factors' terms would double it, and keeping the item term at 0 or
    above adds a little."""
    rng = np.random.default_rng(2)
    runs, items = 3, 40
    se2 = [crossed_mean(rng.normal(size=(runs, items)))["se"] ** 2 for _ in range(2000)]
    assert 1.0 < np.mean(se2) * runs * items < 1.3


def test_item_term_is_never_negative() -> None:
    grid = np.array([[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    found = crossed_mean(grid)
    assert found["se"] ** 2 == pytest.approx(grid.mean(1).var(ddof=1) / 3)
