"""A difference of two groups' means where either has fewer than `stats.SMALL` items: Welch's t,
widened towards a skew by Hall's (1992) transformation. The coverages quoted are those of
scripts/small_difference_intervals.py (4,000 samples a case, the table in
docs/explanation/statistics.md); each test draws 4,000 (SE 0.35-0.5 points)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from biasscope.core import stats
from biasscope.core.hall import welch_bounds

Draw = Callable[[np.random.Generator, int], np.ndarray]
SAMPLES = 4000
HALF_LN2 = math.log(2) / 2


def _jsdp(mu: float, sigma: float) -> Draw:
    """A correct option's JSD-P at P = sigmoid(Normal(mu, sigma)): in [0, ½ ln 2], skewed
    right where the model is mostly right, as a prompt's is."""
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        p = 1 / (1 + np.exp(-rng.normal(mu, sigma, n)))
        return np.asarray(0.5 * (np.log(2 / (1 + p)) + p * np.log(2 * p / (1 + p))))
    return draw


def _mean(draw: Draw) -> float:
    return float(draw(np.random.default_rng(99), 2_000_000).mean())


def _coverage(first: Draw, second: Draw, delta: float, sizes: tuple[int, int],
              seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = [(ci := stats.bootstrap_difference(first(rng, sizes[0]), second(rng, sizes[1]))
             ).low <= delta <= ci.high for _ in range(SAMPLES)]
    return float(np.mean(hits))


@pytest.mark.parametrize("sizes", [(3, 3), (5, 8)])
def test_a_difference_of_few_normal_items_holds_its_level(sizes: tuple[int, int]) -> None:
    """Unequal spreads (SD 3 in the first group, 1 in the second): BCa covered 77.0% (3 and
    3 items) and 86.2% (5 and 8); Welch's 94.8% and 94.8%."""
    def wide(r: np.random.Generator, n: int) -> np.ndarray:
        return np.asarray(r.normal(0.0, 3.0, n))

    def narrow(r: np.random.Generator, n: int) -> np.ndarray:
        return np.asarray(r.normal(0.0, 1.0, n))
    assert 0.93 <= _coverage(wide, narrow, 0.0, sizes, seed=sizes[0]) <= 0.97


def test_a_gap_of_two_small_groups_of_prompts_holds_its_level() -> None:
    """JSD-P of a mostly right model (P ~ sigmoid N(2, 1.5) and N(1, 1.5)) at 5 and 8 prompts:
    BCa covered the gap 81.7%, Welch's 93.4%, widened to Hall's 94.3%."""
    first, second = _jsdp(2.0, 1.5), _jsdp(1.0, 1.5)
    delta = _mean(first) - _mean(second)
    assert 0.925 <= _coverage(first, second, delta, (5, 8), seed=5) <= 0.97


def test_a_skewed_difference_is_widened_on_its_long_side() -> None:
    """JSD-P of unequal spreads (P ~ sigmoid N(0, 2.5) and N(1, 1)) at 12 prompts each: Welch
    alone covered 93.3%, missing 5.6% above; widened to Hall's 95.7%."""
    first, second = _jsdp(0.0, 2.5), _jsdp(1.0, 1.0)
    delta = _mean(first) - _mean(second)
    assert 0.945 <= _coverage(first, second, delta, (12, 12), seed=12) <= 0.975


def test_the_interval_is_welchs_for_symmetric_groups_and_reaches_out_towards_a_skew() -> None:
    x, y = np.array([-2.0, -1.0, 0.0, 1.0, 2.0]), np.array([0.5, 1.5, 2.5])
    found = stats.bootstrap_difference(x, y)
    assert (found.low, found.high) == pytest.approx(welch_bounds(x, y))  # no skew
    assert found.estimate == pytest.approx(-1.5)
    skewed, y = np.array([0.1, 0.2, 0.15, 0.3, 2.5, 0.05]), np.array([0.1, 0.2, 0.3])
    ours, welch = stats.bootstrap_difference(skewed, y), welch_bounds(skewed, y)
    assert ours.low == welch[0] and ours.high > welch[1]
    mirrored = stats.bootstrap_difference(y, skewed)  # the same interval, mirrored
    assert (mirrored.low, mirrored.high) == pytest.approx((-ours.high, -ours.low))
    assert stats.bootstrap_difference(skewed, y, 0.9).high < ours.high  # the level is honoured


def test_a_small_difference_is_clipped_to_its_range() -> None:
    """Two JSD-P means at 3 prompts each: Welch's interval reaches past -½ ln 2."""
    male, female = np.array([0.0, 0.34, 0.0]), np.array([0.34, 0.0, 0.34])
    free = stats.bootstrap_difference(male, female)
    kept = stats.bootstrap_difference(male, female, bounds=(-HALF_LN2, HALF_LN2))
    assert free.low < -HALF_LN2 == kept.low and kept.high == free.high < HALF_LN2
    assert kept.estimate == free.estimate == pytest.approx(-0.34 / 3)


def test_from_20_items_a_group_the_difference_is_bca_bit_for_bit() -> None:
    """At 20 items a group and more nothing changed: the BCa interval as before, bounds or
    not (a BCa interval of two means within a range keeps within the difference's)."""
    rng = np.random.default_rng(4)
    for n1, n2 in ((20, 20), (20, 45), (60, 31)):
        x, y = rng.exponential(0.05, n1), rng.exponential(0.08, n2)
        before = stats._bootstrap((x, y), stats.DIFFERENCE, 0.95, 2000, "BCa", 0)
        assert stats.bootstrap_difference(x, y) == before
        assert stats.bootstrap_difference(x, y, bounds=(-HALF_LN2, HALF_LN2)) == before
    x, y = rng.normal(0, 1, 19), rng.normal(0, 1, 40)  # one group below 20: Welch's
    assert stats.bootstrap_difference(x, y).low < stats._bootstrap(
        (x, y), stats.DIFFERENCE, 0.95, 2000, "BCa", 0).low


def test_groups_too_small_or_without_spread_are_as_before() -> None:
    one, three = np.array([0.2]), np.array([0.1, 0.2, 0.4])
    lone = stats.bootstrap_difference(one, three)  # one item has no interval
    assert lone.estimate == pytest.approx(0.2 - 0.7 / 3)
    assert math.isnan(lone.low) and math.isnan(lone.high)
    assert math.isnan(stats.bootstrap_difference(np.zeros(0), three).estimate)
    flat = stats.bootstrap_difference(np.full(3, 0.2), np.full(4, 0.1))
    assert (flat.low, flat.high) == pytest.approx((0.1, 0.1))
    half = stats.bootstrap_difference(np.full(3, 0.2), three)  # one group's spread is enough
    assert half.low < half.estimate < half.high
