"""The change-of-trend test: it finds a bend planted at a known step (a gap flat until bias is
switched on, then growing, on the demo's and on Pythia's checkpoint spacing) with a CI that
covers it, and on series without a bend claims one at most about α of the time."""

from __future__ import annotations

import numpy as np
import pytest

from biasscope.core.changepoint import changepoint, rates
from biasscope.core.stats import wilson
from biasscope.demo.train import DemoConfig
from biasscope.dynamics.emergence import trend_change

PYTHIA = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, *range(1000, 15000, 1000)]


def onset_series(steps: list[int], onset: float, slope: float, noise: float, seed: int,
                 scale: str = "step") -> np.ndarray:
    """Flat, then growing from ``onset`` linearly in the step (or in the log step)."""
    rng = np.random.default_rng(seed)
    s = np.asarray(steps, dtype=float)
    x, at = (s, onset) if scale == "step" else (np.log1p(s), np.log1p(onset))
    return np.asarray(slope * np.maximum(x - at, 0) + rng.normal(0, noise, s.size))


@pytest.mark.parametrize(("steps", "onset", "scale"), [
    (PYTHIA, 8000, "step"),
    (DemoConfig(checkpoints=14).checkpoint_steps(), 150, "log")])
def test_a_planted_onset_is_found_with_a_ci_that_covers_it(steps, onset, scale) -> None:
    top = max(steps) - onset if scale == "step" else np.log1p(max(steps)) - np.log1p(onset)
    gap = onset_series(steps, onset, 0.2 / top, 0.005, seed=1, scale=scale)
    found = changepoint(steps, gap, scale=scale, n_resamples=499)
    assert found is not None and found.p_value < 0.01
    assert found.low <= onset <= found.high
    assert found.slope_change > 0 and found.slope_change_low > 0
    trend, said = trend_change("demo", steps, gap, alpha=0.01, n_resamples=499)
    assert trend["claimed"] is not None
    assert any("changes trend at step" in s and "bootstrap p = 0.00" in s for s in said)


def test_no_bend_is_claimed_beyond_alpha_on_a_null() -> None:
    """Noise around a straight trend (the demo at bias 0.5 learns no gap): false claims stay
    within a binomial interval of α."""
    reps, alpha = 100, 0.05
    claims = 0
    for seed in range(reps):
        gap = onset_series(PYTHIA, 0, 0.0, 0.01, seed)  # bias 0.5: flat, no bend
        trend, said = trend_change("null", PYTHIA, gap, alpha=alpha, n_resamples=199)
        claims += trend["claimed"] is not None
        assert (trend["claimed"] is None) == any("no change of trend" in s for s in said)
    assert claims / reps <= wilson(int(alpha * reps), reps, 0.99)["high"]


def test_rates_are_per_1000_steps_and_raw_changes_are_kept() -> None:
    got = rates([0, 2, 1000, 3000], [0.0, 0.01, 0.02, 0.05])
    assert [r["change"] for r in got] == pytest.approx([0.01, 0.01, 0.03])
    assert [r["rate_per_1000"] for r in got] == pytest.approx([5.0, 0.01 * 1000 / 998, 0.015])


def test_too_few_checkpoints_test_nothing() -> None:
    assert changepoint([0, 10, 20, 30, 40], [0, 0, 0, 1, 2]) is None
    trend, said = trend_change("m", [0, 10, 20], [0.0, 0.1, 0.3])
    assert trend["claimed"] is None and any("at least 6 checkpoints" in s for s in said)
    # one number format: three significant digits, signed, no exponent
    assert said[0] == ("m: the gap changes fastest between steps 10 and 20: +20.0 per 1000 steps "
                       "(+0.200 in all).")


def test_the_report_marks_a_bend_only_when_it_is_claimed() -> None:
    from biasscope.report.plotting import trend_marker

    bend = {"step": 8123.4, "low": 7000.0, "high": 9000.0}
    claimed = {"trend": {"claimed": "step", "changepoint": {"step": bend, "log": None}}}
    label, step, _ = trend_marker(claimed, "") or ("", 0, "")
    assert step == 8123 and "changes trend at step 8123 (CI 7000 to 9000)" in label
    assert trend_marker({"trend": {**claimed["trend"], "claimed": None}}, "") is None
    assert trend_marker({}, "") is None
