"""The curves' errors over WinoBias pairs: a run draws pairs (a male and a female prompt one
pronoun apart), so the bands over checkpoints resample pairs, not prompts apart."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from biasscope.core.curves import max_t
from biasscope.dynamics.analysis.emergence import (
    item_curves,
    prompt_matrix,
    sharpest_of,
    trend_change,
)
from biasscope.probes.winobias.values import prompt_pair

STEPS = [0, 10, 30]


def per_step(tilt: np.ndarray, pairs: bool = True) -> dict[int, pd.DataFrame]:
    """Pair k's male prompt at ``0.1 + tilt[k] * step`` and its female one at ``0.1 -
    tilt[k] * step`` (a sentence pulling towards one pronoun, more as training goes on);
    ``pairs=False``: the same values under ids that pair no prompt with another."""
    out = {}
    for step in STEPS:
        rows = []
        for k, t in enumerate(tilt):
            for split, label, sign in (("pro", "male", 1), ("anti", "female", -1)):
                sentence = f"{split}-dev-{k:03d}" if pairs else f"{label}{k}"
                rows.append({"prompt": f"winobias-gender:{sentence}:referenced",
                             "answer_label": label, "value": 0.1 + sign * t * step / 100})
        out[step] = pd.DataFrame(rows)
    return out


def test_a_prompts_pair_is_its_sentence_number() -> None:
    assert prompt_pair("winobias-gender:pro-dev-004:referenced") == prompt_pair(
        "winobias-gender:anti-dev-004:referenced") == "winobias-gender:dev-004:referenced"
    assert prompt_pair("winobias-gender:pro-dev-004:not-referenced") != prompt_pair(
        "winobias-gender:anti-dev-004:referenced")
    assert prompt_pair("winobias-gender:p4:male") is None  # no sentence number
    assert prompt_pair("custom-prompt") is None


def test_the_bands_standard_errors_are_the_pairs() -> None:
    """A pair's two prompts move against each other: the gap's change over a pair is twice
    its tilt, so its standard error is the SD of the pairs' changes over √pairs, √2 times the
    one of prompts resampled apart (which made the demo's band of the fastest rate too
    narrow: 74% of simulated runs were covered at once, not 95%)."""
    tilt = np.random.default_rng(0).normal(0, 1, 8)
    items = item_curves(prompt_matrix(per_step(tilt)))
    assert items.sizes == (8,)
    change = 2 * tilt * (STEPS[1] - STEPS[0]) / 100
    test = max_t(items, np.array([[-1.0, 1.0, 0.0]]), 200, np.random.default_rng(0))
    assert test is not None
    assert test.se[0] == pytest.approx(change.std(ddof=1) / np.sqrt(8))
    assert items.curve() == pytest.approx(item_curves(
        prompt_matrix(per_step(tilt, pairs=False))).curve())

    def half(pairs: bool) -> tuple[float, float]:
        found = sharpest_of(per_step(tilt, pairs), n_resamples=1000)
        assert found is not None
        items = item_curves(prompt_matrix(per_step(tilt, pairs)), STEPS)
        out, _ = trend_change("m", STEPS, items.curve(), n_resamples=1000, items=items)
        rate = out["rates"][0]
        return (found.change.high - found.change.estimate,
                rate["high"] - rate["rate_per_1000"])

    paired, apart = half(True), half(False)
    assert paired[0] > 1.2 * apart[0] and paired[1] > 1.2 * apart[1]


def test_an_incomplete_pair_is_left_out_and_prompts_that_do_not_pair_are_taken_apart() -> None:
    frames = per_step(np.linspace(-1, 1, 6))
    cut = {s: f.iloc[:-1] for s, f in frames.items()}  # the last pair lacks its female
    assert item_curves(prompt_matrix(cut)).sizes == (5,)  # 10 of 11 prompts pair up
    cut = {s: f.drop(index=[9, 11]) for s, f in frames.items()}  # two pairs lack theirs
    assert item_curves(prompt_matrix(cut)).sizes == (6, 4)  # 8 of 10 pair up: apart
    assert item_curves(prompt_matrix(per_step(np.ones(6), pairs=False))).sizes == (6, 6)
