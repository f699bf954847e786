"""Where to stop: an earlier checkpoint is recommended only where its smaller |gap| is shown
over every candidate, and its gain carries the band for all of them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from biasscope.dynamics.analysis import stopping
from biasscope.dynamics.analysis.emergence import recommend_stop


def drifting(gaps: list[float], n: int = 60, seed: int = 0) -> dict[int, pd.DataFrame]:
    """Per step (1, 2, ...) per-prompt values: each prompt's own level drifts as a random walk
    over the steps (so the steps' errors are correlated), the male prompts ``gaps`` higher."""
    rng = np.random.default_rng(seed)
    level = rng.normal(0.2, 0.05, 2 * n)
    out = {}
    for step, gap in enumerate(gaps, start=1):
        level = level + rng.normal(0, 0.02, 2 * n)
        out[step] = pd.DataFrame({"prompt": [f"p{i}" for i in range(2 * n)],
                                  "answer_label": ["male"] * n + ["female"] * n,
                                  "value": level + np.r_[np.full(n, gap), np.zeros(n)]})
    return out


def curve(history: dict[int, pd.DataFrame]) -> list[float]:
    return [float(f[f["answer_label"] == "male"]["value"].mean()
                  - f[f["answer_label"] == "female"]["value"].mean())
            for _, f in sorted(history.items())]


def test_a_gap_that_never_changes_keeps_the_final_checkpoint() -> None:
    """The smallest of ten noisy |gap|s lies below the final one (the old rule stopped
    there); none is shown smaller, so the recommendation is to train to the end."""
    h = drifting([0.03] * 10, seed=3)
    gaps = np.abs(curve(h))
    assert gaps[:-1].min() < gaps[-1]  # a point-estimate rule would stop early
    test = stopping.stop_test(h, list(range(1, 10)), 10, n_resamples=999)
    assert test is not None and not test.shown(0.01)
    rec = recommend_stop(list(range(1, 11)), gaps, [0.5] * 10,
                         tested=dict(zip(test.steps, test.p_adjusted, strict=True)))
    assert rec.step == 10 and "shown smaller than the final's" in rec.sentence
    assert rec.p_adjusted == test.p_adjusted[int(np.argmin(gaps[:-1]))] >= 0.01


def test_a_real_gain_is_shown_and_its_band_holds_for_every_candidate() -> None:
    h = drifting([0.0, 0.0, 0.02, 0.05, 0.08, 0.08])
    test = stopping.stop_test(h, [1, 2, 3, 4, 5], 6, n_resamples=999)
    assert test is not None
    shown = test.shown(0.01)
    assert {1, 2, 3} <= set(shown) and 5 not in shown
    alone = stopping.stop_test(h, [1], 6, n_resamples=999)
    assert alone is not None
    band, single = test.interval(1), alone.interval(1)
    assert band.low <= 0.08 <= band.high
    assert band.high - band.low > single.high - single.low  # simultaneous over five
    assert band.estimate == pytest.approx(single.estimate)
    row = test.as_dict()["rows"][0]  # type: ignore[index]
    assert row["step"] == 1 and row["p_adjusted"] < 0.01


def test_the_resamples_are_shared_by_every_step() -> None:
    """One draw of prompts serves every candidate: each replicate's gains are those of one
    resampled data set, so two identical candidates get identical replicates."""
    h = drifting([0.01, 0.05, 0.08])
    h[2] = h[1].copy()
    found = stopping.gains(h, [1, 2], 3, n_resamples=300)
    assert found is not None and found.replicates is not None
    assert found.replicates.shape == (300, 2)
    np.testing.assert_array_equal(found.replicates[:, 0], found.replicates[:, 1])


def test_wordings_give_one_gain_per_step() -> None:
    """Crossed wordings (the same prompts under each) and wordings with their own prompts."""
    h = drifting([0.01, 0.03, 0.08], n=30)
    crossed = {s: pd.concat([f.assign(template=f"w{k}") for k in range(3)], ignore_index=True)
               for s, f in h.items()}
    own = {s: pd.concat([f.assign(template=f"w{k}", prompt=f["prompt"] + f"/w{k}")
                         for k in range(3)], ignore_index=True) for s, f in h.items()}
    plain = stopping.stop_test(h, [1, 2], 3, n_resamples=400)
    assert plain is not None
    for worded in (crossed, own):
        test = stopping.stop_test(worded, [1, 2], 3, n_resamples=400)
        assert test is not None and len(test.estimate) == 2
        assert test.estimate == pytest.approx(plain.estimate)
        assert test.low[0] < test.estimate[0] < test.high[0]


def test_too_few_prompts_or_a_missing_step_is_no_test() -> None:
    h = drifting([0.01, 0.08], n=1)
    assert stopping.stop_test(h, [1], 2) is None
    found = stopping.gains(h, [1], 2)
    assert found is not None and found.replicates is None
    assert stopping.gains(drifting([0.01, 0.08]), [1, 7], 2) is None


def test_intervals_that_are_apart_show_a_smaller_value() -> None:
    """Bonferroni over the steps' intervals: 0 ± 0.196 against 1 ± 0.196 (se 0.1 each) are
    5 standard errors apart, p = 2 · 2 · (1 − Φ(5)); overlapping intervals show nothing."""
    z = 1.959963984540054
    apart = stopping.separated({1: 0.0, 2: 1.0}, {1: -0.1 * z, 2: 1 - 0.1 * z},
                               {1: 0.1 * z, 2: 1 + 0.1 * z}, 2)
    assert apart[1] == pytest.approx(4 * (1 - 0.9999997133484281), rel=1e-6)
    close = stopping.separated({1: 0.9, 2: -1.0, 3: 1.0}, {1: 0.7, 2: -1.2, 3: 0.8},
                               {1: 1.1, 2: -0.8, 3: 1.2}, 3)
    assert close[1] > 0.5 and close[2] == 1.0  # |−1| is not smaller than |1|
    flat = stopping.separated({1: 0.5, 2: 1.0}, {1: 0.5, 2: 1.0}, {1: 0.5, 2: 1.0}, 2)
    assert flat == {1: 0.0}
    unknown = stopping.separated({1: 0.5, 2: 1.0}, {1: math.nan, 2: 0.9}, {1: math.nan, 2: 1.1},
                                 2)
    assert unknown == {1: 1.0}


def test_two_prompts_a_gender_give_no_band_and_no_warning() -> None:
    """A replicate that draws one prompt twice has no spread: its t is infinite, and a
    quarter of them with two prompts a gender leave no finite 95% band (NumPy's interpolated
    quantile warned on inf − inf and stopped a tiny perplexity run)."""
    h = drifting([0.0, 0.08], n=2, seed=4)
    test = stopping.stop_test(h, [1], 2, n_resamples=400)
    assert test is not None and 0 < test.p_adjusted[0] <= 1
    assert math.isnan(test.low[0]) and math.isnan(test.high[0])


def tilted(n: int = 30, seed: int = 5) -> dict[int, pd.DataFrame]:
    """WinoBias pairs at steps 1 and 2 whose two prompts change opposite ways (a sentence's
    tilt), with the male prompt of pair i ``pro-d-i`` or ``anti-d-i``, as a run names them."""
    rng = np.random.default_rng(seed)
    tilt = rng.normal(0, 0.05, (n, 2)).cumsum(axis=1)
    male = 0.2 + tilt + rng.normal(0, 0.005, (n, 2))
    female = 0.2 - tilt + rng.normal(0, 0.005, (n, 2)) - np.array([0.0, 0.03])
    kinds = ["pro" if i % 2 else "anti" for i in range(n)]
    names = [f"winobias-gender:{k}-d-{i:03d}:referenced" for i, k in enumerate(kinds)]
    names += [f"winobias-gender:{'anti' if k == 'pro' else 'pro'}-d-{i:03d}:referenced"
              for i, k in enumerate(kinds)]
    return {s: pd.DataFrame({"prompt": names, "answer_label": ["male"] * n + ["female"] * n,
                             "value": np.r_[male[:, j], female[:, j]]})
            for j, s in enumerate((1, 2))}


def test_winobias_pairs_are_resampled_whole() -> None:
    """A pair's two prompts change opposite ways: resampled apart, the gain's standard error
    counted each prompt's change as independent (about 1/√2 of the pairs'), so the band was
    too narrow and an earlier stop claimed too easily. A broken pair is left out; prompts of
    which under 90% pair up are resampled within each gender, as before."""
    h = tilted()
    found = stopping.gains(h, [1], 2, n_resamples=400)
    assert found is not None and found.se is not None
    male, female = (np.c_[h[1]["value"], h[2]["value"]][h[1]["answer_label"] == g]
                    for g in ("male", "female"))
    diff = male - female  # each pair's gap; the gain is |gap(2)| − |gap(1)|, signs alike here
    assert np.sign(diff.mean(axis=0))[0] == np.sign(diff.mean(axis=0))[1]
    change = diff[:, 1] - diff[:, 0]
    assert found.se[0] == pytest.approx(change.std(ddof=1) / math.sqrt(len(change)))
    apart = {s: f.assign(prompt=[f"p{i}" for i in range(len(f))]) for s, f in h.items()}
    unpaired = stopping.gains(apart, [1], 2, n_resamples=400)
    assert unpaired is not None and unpaired.se is not None
    assert found.se[0] > 1.3 * unpaired.se[0]
    assert found.estimate == pytest.approx(unpaired.estimate)
    paired_test, apart_test = (stopping.stop_test(x, [1], 2, n_resamples=400)
                               for x in (h, apart))
    assert paired_test is not None and apart_test is not None
    width = [t.high[0] - t.low[0] for t in (paired_test, apart_test)]
    assert width[0] > 1.3 * width[1]
    lone = {s: f.iloc[1:] for s, f in h.items()}  # one pair broken: left out
    left = stopping.gains(lone, [1], 2, n_resamples=400)
    assert left is not None and left.se is not None
    assert left.se[0] == pytest.approx(change[1:].std(ddof=1) / math.sqrt(len(change) - 1))
    lone = {s: f.iloc[6:] for s, f in h.items()}  # 6 of 30 broken: under 90% pair, apart
    broken = stopping.gains(lone, [1], 2, n_resamples=400)
    assert broken is not None and broken.se is not None
    male, female = (np.c_[lone[1]["value"], lone[2]["value"]][lone[1]["answer_label"] == g]
                    for g in ("male", "female"))
    own = [np.var(x[:, 1] - x[:, 0], ddof=1) / len(x) for x in (male, female)]
    assert broken.se[0] == pytest.approx(math.sqrt(sum(own)))
