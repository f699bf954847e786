"""Performance against fairness: the mirroring sentence only where the interval supports it,
and the stop's fairness gain and performance cost with intervals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from biasscope.core.intervals import Interval
from biasscope.dynamics.analysis import stopping, tradeoff


def history(step_gaps: dict[int, float], n: int = 200, seed: int = 0) -> dict[int, pd.DataFrame]:
    """Per step, per-prompt JSD-P values whose male − female gap is about the given one."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.05, 0.3, 2 * n)
    out = {}
    for step, gap in step_gaps.items():
        value = base + np.r_[np.full(n, gap), np.zeros(n)] + rng.normal(0, 0.01, 2 * n)
        out[step] = pd.DataFrame({"prompt": [f"p{i}" for i in range(2 * n)],
                                  "answer_label": ["male"] * n + ["female"] * n,
                                  "value": value})
    return out


def gain(history: dict[int, pd.DataFrame]) -> Interval:
    """The gain of stopping at step 100 rather than 300, with its interval."""
    test = stopping.stop_test(history, [100], 300)
    assert test is not None
    return test.interval(100)


def test_mirroring_is_claimed_only_when_the_changes_move_together() -> None:
    """Curves whose changes share their steps are mirrored; two unrelated random walks, which
    correlate strongly over the checkpoints themselves, are not; too few checkpoints say so."""
    rng = np.random.default_rng(0)
    walk = np.cumsum(rng.normal(0, 0.01, (2, 30)), axis=1)
    trend = 0.01 * np.arange(30)  # both drift with training
    rho, apart = tradeoff.mirroring("m", "LAMBADA accuracy", 0.05 + trend + walk[0],
                                    0.3 + trend + walk[1], n_resamples=999)
    assert "not shown" in apart and "mirrors fairness:" not in apart
    assert abs(rho["levels"]) > 0.5 and rho["p_value"] > 0.01
    assert "does not mirror" not in apart
    shared = rng.normal(0, 0.01, 29)
    perf = 0.3 + np.r_[0, np.cumsum(shared + rng.normal(0, 0.003, 29))]
    gap = 0.05 + np.r_[0, np.cumsum(shared + rng.normal(0, 0.003, 29))]
    rho, together = tradeoff.mirroring("m", "LAMBADA accuracy", gap, perf, n_resamples=999)
    assert "performance mirrors fairness: the |gap| grows" in together
    assert rho["p_value"] < 0.01 and rho["n"] == 15 and rho["on"] == "non-overlapping changes"
    _, few = tradeoff.mirroring("m", "acc", perf[:10], gap[:10])  # 5 changes: p >= 1/60
    assert "too few checkpoints (10)" in few
    _, line = tradeoff.mirroring("m", "acc", np.linspace(0, 0.2, 12), np.linspace(0.1, 0.6, 12))
    assert "undefined" in line


def test_the_stop_states_its_gain_and_cost_with_intervals() -> None:
    h = history({100: 0.01, 200: 0.05, 300: 0.08})
    test = stopping.stop_test(h, [100], 300)
    assert test is not None
    gain = test.interval(100)
    assert gain.low < gain.estimate < gain.high
    assert gain.low > 0.06 and gain.high < 0.08  # 0.08 − 0.01, prompts paired
    cost = tradeoff.performance_cost("LAMBADA accuracy", 0.50, 0.45, {100: 500, 300: 500},
                                     (100, 300))
    assert math.isclose(cost["estimate"], 0.05) and cost["low"] < 0.05 < cost["high"]
    csv = tradeoff.performance_cost("lambada (csv)", 0.50, 0.45, {}, (100, 300))
    assert math.isnan(csv["low"])
    said, sentences = tradeoff.stop_claims("m", 100, [100, 200, 300], [0.01, 0.05, 0.08],
                                           [0.45, 0.48, 0.5], "lambada (csv)", gain, {},
                                           candidates=2)
    assert said["gain"]["low"] > 0.06
    assert "one band for the 2 checkpoints it was picked from" in sentences[-1]
    assert "no CI: the series has no per-item data" in sentences[-1]
    assert "|JSD-P gap| reduced by +0.0689" in sentences[-1]
    # With an interval, the sentence says whether the cost's upper bound is within the budget.
    counts = {100: 500, 300: 500}
    for budget, said in ((0.5, "shown within the 50% budget (0.250)"),
                         (0.12, "within the 12% budget (0.0600) by its estimate but not by its "
                                "interval")):
        out, sentences = tradeoff.stop_claims("m", 100, [100, 300], [0.01, 0.08], [0.45, 0.5],
                                              "LAMBADA accuracy", gain, counts, budget=budget)
        assert out["cost"]["allowed"] == pytest.approx(budget * 0.5) and said in sentences[-1]
    _, sentences = tradeoff.stop_claims("m", 100, [100, 300], [0.01, 0.08], [0.45, 0.5],
                                        "lambada (csv)", gain, {}, budget=0.12)
    assert "budget" not in sentences[-1]  # a point cost: nothing to add to the estimate


def test_with_several_wordings_the_gain_interval_includes_their_spread() -> None:
    """Wordings whose gains disagree (one gains 0.13, one 0.01) widen the interval beyond the
    prompts' own; one wording is the prompt-only bootstrap, unchanged."""
    worded = {}
    for k, (early, late) in enumerate([(0.01, 0.14), (0.02, 0.03), (0.0, 0.10), (0.01, 0.05)]):
        for step, frame in history({100: early, 300: late}, n=50, seed=k).items():
            worded.setdefault(step, []).append(frame.assign(
                template=f"w{k}", prompt=frame["prompt"] + f"/w{k}"))
    h = {step: pd.concat(frames, ignore_index=True) for step, frames in worded.items()}
    items_only = gain({s: f.drop(columns="template") for s, f in h.items()})
    two_level = gain(h)
    assert two_level.estimate == pytest.approx(items_only.estimate)
    assert two_level.high - two_level.low > 3 * (items_only.high - items_only.low)
    one = {s: f[f["template"] == "w0"] for s, f in h.items()}
    assert gain(one) == gain({s: f.drop(columns="template") for s, f in one.items()})
    _, said = tradeoff.stop_claims("m", 100, [100, 300], [0.01, 0.08], [0.45, 0.5],
                                   "lambada (csv)", two_level, {}, wordings=4)
    assert "over 4 wordings and their prompts" in said[-1]


def test_two_models_of_a_run_get_an_equivalence_verdict_per_step() -> None:
    same, sentences = history({10: 0.05, 20: 0.05}), []
    out = tradeoff.model_equivalence("a", "b", same, same, 0.01, sentences)
    assert [r["verdict"] for r in out["rows"]] == ["equivalent", "equivalent"]
    assert sentences == out["sentences"] and "a − b at step 20: equivalent" in sentences[0]
    other = history({10: 0.05, 20: 0.15}, seed=0)
    out = tradeoff.model_equivalence("a", "b", same, other, 0.01, [])
    assert [r["verdict"] for r in out["rows"]] == ["equivalent", "different"]
    assert out["rows"][1]["paired"] and out["rows"][1]["high"] < -0.02


def test_wordings_that_ask_the_same_prompts_keep_the_prompts_spread() -> None:
    """Four wordings of the same prompts with the same values: the gain's replicates spread
    as one wording's, not halved by drawing each wording's prompts on their own (#37)."""
    h = history({100: 0.01, 300: 0.08}, n=60, seed=5)
    worded = {s: pd.concat([f.assign(template=f"w{k}") for k in range(4)], ignore_index=True)
              for s, f in h.items()}
    one, four = (stopping.gains(x, [100], 300) for x in (h, worded))
    assert one is not None and one.replicates is not None
    assert four is not None and four.replicates is not None
    assert four.estimate == pytest.approx(one.estimate)
    assert four.replicates.std() == pytest.approx(one.replicates.std(), rel=0.15)
