"""The change-of-trend test: it finds a bend planted at a known step (a gap flat until bias is
switched on, then growing, on the demo's and on Pythia's checkpoint spacing) with a CI that
covers it; on curves without a bend whose errors are correlated across checkpoints (the same
prompts at every checkpoint) it claims one at most about α of the time; and a bare curve,
whose errors' dependence nothing tells, is not tested."""

from __future__ import annotations

import numpy as np
import pytest

from biasscope.core.changepoint import changepoint, rates
from biasscope.core.curves import ItemCurves
from biasscope.demo.train import DemoConfig
from biasscope.dynamics.analysis.emergence import trend_change
from calibration_base import Claim, within
from calibration_trajectories import prompts, trend

PYTHIA = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, *range(1000, 15000, 1000)]


def onset_items(steps: list[int], onset: float, slope: float, seed: int, scale: str = "step",
                noise: str = "AR(1) 0.5") -> ItemCurves:
    """40 + 40 prompts whose gap is flat, then grows from ``onset`` linearly in the step (or in
    the log step); each prompt's noise is correlated across checkpoints."""
    s = np.asarray(steps, dtype=float)
    x, at = (s, onset) if scale == "step" else (np.log1p(s), np.log1p(onset))
    return prompts(np.random.default_rng(seed), s.size, noise,
                   gap=slope * np.maximum(x - at, 0))


@pytest.mark.parametrize(("steps", "onset", "scale"), [
    (PYTHIA, 8000, "step"),
    (DemoConfig(checkpoints=14).checkpoint_steps(), 150, "log")])
def test_a_planted_onset_is_found_with_a_ci_that_covers_it(steps, onset, scale) -> None:
    top = max(steps) - onset if scale == "step" else np.log1p(max(steps)) - np.log1p(onset)
    items = onset_items(steps, onset, 0.2 / top, seed=1, scale=scale)
    gap = items.curve()
    found = changepoint(steps, gap, scale=scale, n_resamples=499, items=items)
    assert found is not None and found.p_value < 0.01
    assert found.low <= onset <= found.high
    assert found.slope_change > 0 and found.slope_change_low > 0
    trend, said = trend_change("demo", steps, gap, alpha=0.01, n_resamples=499, items=items)
    assert trend["claimed"] is not None
    assert any("changes trend at step" in s and "bootstrap p = 0.00" in s for s in said)
    assert "one band for all" in said[0]  # the fastest rate's interval holds for every rate


def test_no_bend_is_claimed_in_random_walks_beyond_alpha() -> None:
    """Each prompt's value a random walk over 20 Pythia-spaced checkpoints and no bend in the
    gap: the residual bootstrap over checkpoints claimed a bend in about 70% of such curves."""
    claim = trend("random walk", 20, "log", n_resamples=200)
    hits, n = claim(60, 5)
    ok, said = within(Claim("changes trend", "random walk", "20", "false-claim", 0.01, claim),
                      hits, n)
    assert ok, said


def test_a_bare_curve_is_fitted_but_not_tested() -> None:
    """Without the prompts nothing tells a bend from errors correlated across checkpoints."""
    items = onset_items(PYTHIA, 8000, 0.2 / 6000, seed=1)
    bare = changepoint(PYTHIA, items.curve(), n_resamples=199)
    assert bare is not None and np.isnan(bare.p_value) and np.isnan(bare.low)
    assert bare.step == changepoint(PYTHIA, items.curve(), n_resamples=199, items=items).step
    trend, said = trend_change("m", PYTHIA, items.curve(), n_resamples=199)
    assert trend["claimed"] is None
    assert "a change of trend is not tested: the prompts' values" in said[-1]
    with pytest.raises(ValueError, match="not the curve given"):
        changepoint(PYTHIA, items.curve() + 1, items=items)


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


def test_a_rate_band_of_no_width_is_said_in_words() -> None:
    """Prompts whose gap all changed alike have a max-t band of no width (se 0), which read
    "0 per 1000 steps (95% CI 0 to 0; ...)"."""
    from biasscope.dynamics.analysis.emergence import _fastest

    still = {"step_from": 10, "step_to": 20, "change": 0.0, "rate_per_1000": 0.0, "low": 0.0,
             "high": 0.0}
    assert _fastest("m", [still], 0.95) == (
        "m: the gap changes fastest between steps 10 and 20: per 1000 steps 0 (the prompts' "
        "changes do not vary, so no interval; one band for all 1 changes), 0 in all.")
    from biasscope.core.intervals import Interval
    from biasscope.dynamics.analysis.config import AnalysisConfig
    from biasscope.dynamics.analysis.emergence import GapChange
    from biasscope.dynamics.summary.model import _sharpest

    change = GapChange(10, 20, 0.1, 0.1, Interval(0.0, 0.0, 0.0, 0.95), 12, pairs=3)
    assert _sharpest("m", change, AnalysisConfig())[1] == [
        "m: the sharpest change of the gap is between steps 10 and 20: 0 (the prompts' changes "
        "do not vary, so no interval; a raw change, not per step; one band for all 3 changes)."]


def test_the_report_marks_a_bend_only_when_it_is_claimed() -> None:
    from biasscope.report.plotting import trend_marker

    bend = {"step": 8123.4, "low": 7000.0, "high": 9000.0}
    claimed = {"trend": {"claimed": "step", "changepoint": {"step": bend, "log": None}}}
    label, step, _ = trend_marker(claimed, "") or ("", 0, "")
    assert step == 8123 and "changes trend at step 8123 (95% CI 7000 to 9000)" in label
    # The demo's bend: every resample within the interval at one step ("CI 167 to 167").
    one = {"trend": {"claimed": "log", "changepoint": {"log": {
        "step": 167.0, "low": 167.0, "high": 167.0, "confidence": 0.95}}}}
    label, _, _ = trend_marker(one, "") or ("", 0, "")
    assert label == "gap changes trend at step 167 (at least 95% of resamples put it there)"
    assert trend_marker({"trend": {**claimed["trend"], "claimed": None}}, "") is None
    assert trend_marker({}, "") is None


def test_a_bend_every_resample_puts_at_one_step_is_said_in_words(monkeypatch) -> None:
    """The demo said "the gap changes trend at step 167 (95% CI 167 to 167; …)"; the stored
    bounds stay as they were."""
    from biasscope.core.changepoint import Changepoint
    from biasscope.dynamics.analysis import emergence

    bend = Changepoint("log", 167.0, 167.0, 167.0, 0.1, 1.5, 1.43, 1.0, 2.0, 30.0, 0.0005, 14,
                       0.95)
    monkeypatch.setattr(emergence, "changepoint", lambda *a, **k: bend)
    trend, said = trend_change("demo", [0, 10, 50, 100, 167, 250, 400, 600], [0.0] * 8)
    assert trend["changepoint"]["log"]["low"] == trend["changepoint"]["log"]["high"] == 167.0
    assert ("demo: the gap changes trend at step 167 (at least 95% of resamples put it "
            "there; against log step: slope change +1.43") in said[-1]


def test_prompts_missing_at_some_checkpoints_count_where_they_were_asked() -> None:
    """A prompt not scored at a checkpoint (a unit lost, a partial rerun) is left out of that
    checkpoint's mean; the test and the band still run."""
    items = onset_items(PYTHIA, 8000, 0.2 / 6000, seed=2)
    male = items.groups[0].copy()
    male[:5, 12] = np.nan
    male[7, :3] = np.nan
    holed = ItemCurves.contrast(male, items.groups[1])
    gap = holed.curve()
    assert gap[12] == pytest.approx(np.nanmean(male[:, 12]) - items.groups[1][:, 12].mean())
    trend, _ = trend_change("m", PYTHIA, gap, n_resamples=299, items=holed)
    assert trend["claimed"] == "step" and np.isfinite(trend["changepoint"]["step"]["p_value"])
    assert all(np.isfinite([r["low"], r["high"]]).all() for r in trend["rates"])


def test_max_t_reuses_its_draws_exactly() -> None:
    """The analysis runs `max_t` on one curve several times from fresh generators of one
    seed: the draws kept from the first give the same replicates, and leave each generator
    where drawing would have left it (the changepoint's refits draw on from there)."""
    from biasscope.core import curves

    rng = np.random.default_rng(4)
    items = curves.ItemCurves.contrast(rng.normal(size=(30, 3)), rng.normal(size=(25, 3)))
    first, second = np.random.default_rng(9), np.random.default_rng(9)
    a = curves.max_t(items, np.eye(3), 600, first)
    curves.forget_resamples()
    b = curves.max_t(items, np.eye(3)[:2], 600, second)
    assert a is not None and b is not None
    assert first.bit_generator.state == second.bit_generator.state
    again = np.random.default_rng(9)
    c = curves.max_t(items, np.eye(3)[:2], 600, again)  # kept draws
    assert c is not None and np.array_equal(b.replicates, c.replicates)
    assert again.bit_generator.state == second.bit_generator.state
    assert first.random() == again.random()
