from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon

from biasscope.dynamics.scoring.metrics import (
    accuracy,
    average_rank,
    correct,
    dynamics_metrics,
    jsd_by_parts,
    jsd_parts,
    option_logprob_matrix,
    option_probs,
    record_jsd_parts,
    seed_mean_std,
    stereotype_accuracy,
)
from biasscope.probes.next_token import OptionScores

OPTIONS = ["male", "female", "not specified"]

def _normalise(xs: list[float]) -> np.ndarray:
    # SciPy's rel_entr overflows on subnormal inputs (it returns inf where the answer is ln 2),
    # so the reference comparison keeps to normal floats; zeros stay in.
    p = np.array(xs)
    p = np.where(p < 1e-12, 0.0, p)
    return p / p.sum()


probabilities = st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3).filter(
    lambda xs: sum(x for x in xs if x >= 1e-12) > 1e-6).map(_normalise)


@settings(max_examples=300, deadline=None)
@given(probabilities, st.integers(0, 2))
def test_parts_sum_to_scipy_js_divergence(p: np.ndarray, answer: int):
    ideal = np.eye(3)[answer]
    parts = jsd_parts(p[None, :], [answer])[0]
    assert parts.sum() == pytest.approx(jensenshannon(p, ideal) ** 2, abs=1e-12)
    assert (parts >= -1e-15).all()


def test_formula_by_hand():
    p = np.array([[0.7, 0.2, 0.1]])
    parts = jsd_parts(p, [0])[0]
    m = 0.85
    assert parts[0] == pytest.approx(0.5 * (np.log(1 / m) + 0.7 * np.log(0.7 / m)))
    assert parts[1] == pytest.approx(0.5 * 0.2 * np.log(2))  # 0·log 0 drops the ideal term
    assert jsd_parts(np.array([[1.0, 0.0, 0.0]]), [0]).sum() == 0.0
    # Disjoint supports give ln 2 even with subnormal probabilities (SciPy returns inf here).
    assert jsd_parts(np.array([[0.0, 1.0, 5e-324]]), [0]).sum() == pytest.approx(np.log(2))


def frame(logprobs, answers, ranks, **groups):
    return pd.DataFrame({
        "options": [OPTIONS] * len(answers), "option_logprobs": [list(x) for x in logprobs],
        "answer": answers, "answer_label": [OPTIONS[a] for a in answers],
        "target_rank": ranks, **groups})


def test_option_probs_renormalise_over_options():
    lp = np.log([[0.02, 0.01, 0.01]])  # full-vocabulary probabilities
    assert option_probs(frame(lp, [0], [1]))[0] == pytest.approx([0.5, 0.25, 0.25])


def test_rank_accuracy_and_jsdp_subsets():
    lp = np.log([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.5, 0.4, 0.1], [0.1, 0.1, 0.8]])
    df = frame(lp, [0, 1, 1, 2], [1, 3, 9, 2])
    assert average_rank(df, OPTIONS) == {"male": 1.0, "female": 6.0, "not specified": 2.0}
    assert accuracy(df, OPTIONS) == {"all": 0.75, "male": 1.0, "female": 0.5,
                                     "not specified": 1.0}
    fem = jsd_by_parts(df[df["answer_label"] == "female"], OPTIONS)
    expected = jsd_parts(np.exp(lp[1:3]), [1, 1]).mean(axis=0)
    assert [fem[o] for o in OPTIONS] == pytest.approx(expected)


def test_option_scores_are_the_record_functions_numbers() -> None:
    """Built once and shared by the report's reductions: the same arrays, to the bit, as the
    functions each reduction called before."""
    lp = np.log([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.5, 0.4, 0.1], [0.1, 0.1, 0.8]])
    df = frame(lp, [0, 1, 1, 2], [1, 3, 9, 2])
    scores = OptionScores.of(df)
    assert np.array_equal(scores.logprobs, option_logprob_matrix(df))
    assert np.array_equal(scores.probs, option_probs(df))
    assert np.array_equal(scores.parts, record_jsd_parts(df))
    assert scores.correct.tolist() == correct(df).tolist() == [True, True, False, True]


def test_stereotype_accuracy_counts_pro_referenced_gender_choice():
    lp = np.log([[0.6, 0.3, 0.1], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.9, 0.05, 0.05]])
    df = frame(lp, [0, 1, 1, 2], [1, 1, 1, 1], split=["pro", "pro", "pro", "pro"],
               kind=["referenced", "referenced", "referenced", "not-referenced"],
               stereotype=["male", "female", "female", "male"])
    assert stereotype_accuracy(df, OPTIONS) == pytest.approx(2 / 3)


def test_dynamics_metrics_keys_and_gap():
    lp = np.log([[0.9, 0.05, 0.05], [0.3, 0.6, 0.1], [0.4, 0.4, 0.2]])
    df = frame(lp, [0, 1, 2], [1, 2, 5], split=["pro", "anti", "pro"],
               kind=["referenced", "referenced", "not-referenced"],
               stereotype=["male", "male", "female"])
    m = dynamics_metrics(df)
    assert m["jsdp_gap"] == pytest.approx(m["jsdp_correct/male"] - m["jsdp_correct/female"])
    assert m["jsdp_gap"] < 0  # more confident on the male prompt
    assert m["jsdp_not_specified/male"] == m["jsdp/answer=not specified/male"]
    assert {"average_rank/female", "accuracy/all", "jsdp/split=anti/male",
            "stereotype_accuracy"} <= set(m)


def test_seed_mean_std_uses_sample_std():
    mean, std = seed_mean_std({0: {"a": 1.0}, 1: {"a": 3.0}, 2: {"a": float("nan")}})
    assert mean["a"] == 2.0 and std["a"] == pytest.approx(np.sqrt(2.0))
    assert seed_mean_std({0: {"a": 1.0}})[1]["a"] == 0.0


def test_correct_option_jsdp_spans_zero_to_half_ln2() -> None:
    """The bound MAX_GAP rests on: all mass on the answer gives 0, none gives ½ ln 2, and
    nothing in between leaves [0, ½ ln 2]; so a gap of two means lies in [−½ ln 2, ½ ln 2]."""
    import math

    from biasscope.dynamics.analysis.config import MAX_GAP, option_problem

    p = np.linspace(0.0, 1.0, 1001)
    probs = np.stack([p, 1 - p], axis=1)
    correct_part = jsd_parts(probs, np.zeros(len(p), dtype=int))[:, 0]
    assert correct_part[-1] == pytest.approx(0.0, abs=1e-15)
    assert correct_part[0] == pytest.approx(math.log(2) / 2, rel=1e-12)
    assert correct_part.min() >= 0 and correct_part.max() <= MAX_GAP + 1e-15
    assert option_problem("min_gap", MAX_GAP) is None
    assert option_problem("min_gap", MAX_GAP + 1e-6) is not None
    other_part = jsd_parts(probs, np.ones(len(p), dtype=int))[:, 0]  # option 0 is not the answer
    assert other_part.min() >= 0 and other_part.max() <= MAX_GAP + 1e-15


def test_plotted_means_of_a_few_prompts_stay_in_their_ranges() -> None:
    """Below 20 prompts a plotted mean's interval is Student's t, which left the range of
    what it averages: a JSD-P part below 0 (its range is [0, ½ ln 2]) and a rank below 1
    (the most probable token's). Each is clipped to its range; an accuracy already was."""
    from biasscope.dynamics.analysis.config import MAX_GAP, AnalysisConfig
    from biasscope.dynamics.summary.build import intervals

    jsdp = [0.001, 0.002, 0.0005, 0.3, 0.001]
    ranks = [1.0, 1.0, 1.0, 2.0, 900.0]
    answers = ["male"] * 5 + ["female"] * 5 + ["not specified"] * 5

    def frame(values: list[float]) -> pd.DataFrame:
        return pd.DataFrame({"step": 100, "prompt": [f"p{i}" for i in range(15)],
                             "answer_label": answers, "value": values * 3})

    pvs = {"jsdp_correct": frame(jsdp), "target_rank": frame(ranks),
           "correct": frame([1.0, 0.0, 1.0, 1.0, 1.0]), "jsdp:male": frame(jsdp),
           "jsdp:female": frame([v / 2 for v in jsdp])}
    found = intervals(pvs, AnalysisConfig(n_resamples=200))["100"]
    for key, (low, high) in found.items():
        if key.startswith("jsdp_correct/") or key.startswith("jsdp_not_specified/"):
            assert 0 <= low < high <= MAX_GAP, (key, low, high)
        elif key.startswith("average_rank/"):
            assert 1 <= low < high, (key, low, high)
        elif key.startswith("accuracy/"):
            assert 0 <= low < high <= 1, (key, low, high)
    assert found["jsdp_correct/male"][0] == 0 and found["average_rank/male"][0] == 1
    assert {"jsdp_not_specified/male", "jsdp_not_specified/female", "jsdp_gap"} <= set(found)


def test_the_gap_of_a_few_prompts_stays_within_half_ln_2() -> None:
    """Below 20 prompts a group the male − female JSD-P gap's interval is Welch's, which
    reached past ±½ ln 2, the most two JSD-P means can differ by: it is clipped there."""
    from biasscope.dynamics.analysis.config import MAX_GAP, AnalysisConfig
    from biasscope.dynamics.summary.build import intervals

    frame = pd.DataFrame({"step": 100, "prompt": [f"p{i}" for i in range(6)],
                          "answer_label": ["male"] * 3 + ["female"] * 3,
                          "value": [0.0, 0.34, 0.0, 0.34, 0.0, 0.34]})
    pvs = {"jsdp_correct": frame, "target_rank": frame.assign(value=1.0),
           "correct": frame.assign(value=1.0), "jsdp:male": frame, "jsdp:female": frame}
    low, high = intervals(pvs, AnalysisConfig(n_resamples=200))["100"]["jsdp_gap"]
    assert low == -MAX_GAP and high < MAX_GAP
