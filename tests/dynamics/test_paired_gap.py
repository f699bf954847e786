"""The per-checkpoint gap test and interval over WinoBias pairs: a pair's male and female
prompts move against each other (Pearson −0.77 on Gemma 3 270M), so treating the prompts as
independent called gaps significant, and excluded 0 from the gap's interval, too often."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from biasscope.core.stats import MANN_WHITNEY, SIGNED_RANK
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.analysis.gap_tests import checkpoint_rows, detectable_gap
from biasscope.dynamics.summary.build import intervals

N = 30


def prompts(gap: float, pairs: bool = True) -> pd.DataFrame:
    """One checkpoint's `prompt_values`: pair k's male prompt at 0.1 + u_k + ``gap`` and its
    female one at 0.1 − u_k (correlation −1 within a pair, ``u`` evenly spread normal
    quantiles); ``pairs=False``: the same values under ids that pair no prompt."""
    u = norm.ppf((np.arange(N) + 0.5) / N) * 0.04
    u = u[np.random.default_rng(0).permutation(N)]
    rows = []
    for k in range(N):
        for split, label, value in (("pro", "male", 0.1 + u[k] + gap),
                                    ("anti", "female", 0.1 - u[k])):
            sentence = f"{split}-dev-{k:03d}" if pairs else f"{label}{k}"
            rows.append({"model": "m", "step": 100, "prompt":
                         f"winobias-gender:{sentence}:referenced", "answer_label": label,
                         "value": value, "seeds": 2})
    return pd.DataFrame(rows)


def test_a_gap_the_pairs_do_not_support_is_not_significant() -> None:
    """Apart, the prompts' spread is half the pairs' differences': Mann-Whitney gave p 0.002
    (significant at α 0.01), the signed-rank test over the pairs p 0.02."""
    paired, = checkpoint_rows(prompts(0.036))
    apart, = checkpoint_rows(prompts(0.036, pairs=False))
    assert apart["test"] == MANN_WHITNEY and apart["p_value"] < 0.01
    assert paired["test"] == SIGNED_RANK and 0.01 < paired["p_value"] < 0.05
    assert paired["gap"] == pytest.approx(apart["gap"]) == pytest.approx(0.036)
    assert paired["n_male"] == paired["n_female"] == N
    assert 0 < paired["effect_size"] < apart["effect_size"] * 1.5  # matched-pairs r
    flat, = checkpoint_rows(prompts(0.0).assign(value=0.2))
    assert (flat["p_value"], flat["effect_size"]) == (1.0, 0.0)  # no difference at all


def test_an_incomplete_pair_is_left_out_and_too_many_fall_back_to_mann_whitney() -> None:
    """The pinned WinoBias test split has two pairs (test-382, test-384) whose prompts both
    answer "male": required of every prompt, pairing fell back to Mann-Whitney on every full
    run. Incomplete pairs are left out; where fewer than 90% of the prompts pair, the prompts
    are taken apart."""
    row, = checkpoint_rows(prompts(0.036).iloc[:-1])  # pair 29 without its female prompt
    assert row["test"] == SIGNED_RANK and row["n_male"] == row["n_female"] == N - 1
    both_male = prompts(0.036)
    both_male.loc[1, "answer_label"] = "male"  # pair 0 answers "male" under both pronouns
    row, = checkpoint_rows(both_male)
    assert row["test"] == SIGNED_RANK and row["n_male"] == row["n_female"] == N - 1
    row, = checkpoint_rows(prompts(0.036).iloc[: -2 * (N // 10) - 1])  # 10% of pairs cut
    assert row["test"] == SIGNED_RANK
    halves = prompts(0.036)
    halves = halves[(halves.index % 2 == 0) | (halves.index < N)]  # half the pairs lose one
    row, = checkpoint_rows(halves)
    assert row["test"] == MANN_WHITNEY


def test_the_gaps_interval_is_the_pairs() -> None:
    """A gap of 0.025: Welch's interval over the prompts apart excluded 0, the mean of the
    pairs' differences (their SD twice the prompts') does not."""
    def gap_ci(pairs: bool) -> list[float]:
        pv = prompts(0.025, pairs)
        found = intervals({name: pv for name in ("jsdp_correct", "target_rank", "correct",
                                                 "jsdp:male", "jsdp:female")},
                          AnalysisConfig(n_resamples=200))
        return list(found["100"]["jsdp_gap"])

    paired, apart = gap_ci(True), gap_ci(False)
    assert apart[0] > 0 and paired[0] < 0 < paired[1]
    assert paired[1] - paired[0] > 1.3 * (apart[1] - apart[0])


def test_the_detectable_gap_is_the_paired_tests() -> None:
    """The smallest detectable gap beside a gap that is not significant is the paired t's
    (from the SD of the differences), larger here than the one of prompts taken apart."""
    def said(pairs: bool) -> str:
        pv = prompts(0.0, pairs)
        tests = pd.DataFrame({"step": [100], "p_adjusted": [1.0]})
        found = detectable_gap({100: pv[["prompt", "answer_label", "value"]]}, tests, 0.01)
        assert found is not None
        return found

    paired, apart = said(True), said(False)
    assert "paired test" in paired and "Mann-Whitney test" in apart
    assert float(paired.split("gap of ")[1].split()[0]) > 1.3 * float(
        apart.split("gap of ")[1].split()[0])
