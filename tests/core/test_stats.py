from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import mannwhitneyu

from biasscope.core import intervals
from biasscope.core.stats import adjust_pvalues, mann_whitney
from biasscope.dynamics.analysis.emergence import (
    StepChange,
    change_interval,
    emergence_step,
    pareto_front,
    recommend_stop,
    sharpest_change,
)
from biasscope.dynamics.analysis.gap_tests import (
    checkpoint_tests,
    model_tests,
    prompt_ids,
    prompt_values,
    record_values,
)
from biasscope.dynamics.scoring.metrics import record_jsd_parts

OPTIONS = ["male", "female", "not specified"]


def rows(model: str, step: int, labels: Sequence[str], p_correct: Sequence[float],
         ranks: Sequence[int] | None = None, seeds: int = 1, jitter: float = 0.0,
         p_male: Sequence[float] | None = None) -> pd.DataFrame:
    """Synthetic records: prompt i has answer labels[i] and probability p_correct[i] on it (the
    rest split evenly, or p_male[i] on ``male``); each seed jitters p_correct by ±jitter."""
    out = []
    for seed in range(seeds):
        shift = jitter * (1 if seed % 2 else -1)
        for i, label in enumerate(labels):
            answer = OPTIONS.index(label)
            probs = np.full(3, (1 - p_correct[i] - shift) / 2)
            probs[answer] = p_correct[i] + shift
            if p_male is not None:
                probs[0], probs[1] = p_male[i], 1 - p_correct[i] - p_male[i]
            out.append({
                "model": model, "revision": f"step{step}", "step": step, "seed": seed,
                "item_id": f"winobias-gender:pro-dev-{i:03d}:{label}:seed{seed}",
                "options": OPTIONS, "answer": answer, "answer_label": label,
                "option_logprobs": list(np.log(probs)),
                "target_rank": ranks[i] if ranks is not None else 1})
    return pd.DataFrame(out)


def gendered(model: str, step: int, male: Sequence[float], female: Sequence[float],
             **kw: object) -> pd.DataFrame:
    labels = ["male"] * len(male) + ["female"] * len(female)
    return rows(model, step, labels, [*male, *female], **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- Mann-Whitney U

def test_identical_groups_give_p_one_and_no_effect():
    t = mann_whitney(np.arange(10.0), np.arange(10.0))
    assert t.p_value == pytest.approx(1.0)
    assert t.effect_size == 0.0
    assert (t.n1, t.n2) == (10, 10)


def test_all_tied_values_are_handled_without_warnings():
    t = mann_whitney([0.3] * 6, [0.3] * 4)
    assert (t.statistic, t.p_value, t.effect_size) == (12.0, 1.0, 0.0)


@pytest.mark.parametrize("n", [5, 30])  # exact and asymptotic p-values
def test_separated_groups_give_tiny_p_and_effect_plus_minus_one(n: int):
    low, high = np.arange(n, dtype=float), np.arange(n, dtype=float) + 100
    up, down = mann_whitney(high, low), mann_whitney(low, high)
    assert up.effect_size == 1.0 and down.effect_size == -1.0
    assert up.statistic == n * n and down.statistic == 0
    assert up.p_value == down.p_value < (0.01 if n == 5 else 1e-9)


def test_empty_group_gives_nan():
    t = mann_whitney([], [1.0, 2.0])
    assert np.isnan(t.p_value) and np.isnan(t.effect_size) and (t.n1, t.n2) == (0, 2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=12),
       st.lists(st.integers(0, 5), min_size=1, max_size=12))
def test_effect_size_is_probability_of_superiority_difference(x: list[int], y: list[int]):
    t = mann_whitney(x, y)
    diff = np.sign(np.subtract.outer(x, y))
    assert t.effect_size == pytest.approx((diff > 0).mean() - (diff < 0).mean())
    if len(set(x) | set(y)) > 1:
        assert t.p_value == pytest.approx(mannwhitneyu(x, y, alternative="two-sided").pvalue)


# ---------------------------------------------------------------- corrections

def test_holm_known_example():
    p = [0.01, 0.04, 0.03, 0.005]
    assert adjust_pvalues(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust_pvalues([0.5, 0.6], "holm") == pytest.approx([1.0, 1.0])


def test_bh_known_example():
    p = [0.01, 0.04, 0.03, 0.005]
    assert adjust_pvalues(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_nan_p_values_are_left_out_of_the_family():
    out = adjust_pvalues([0.01, np.nan, 0.04], "holm")
    assert out[0] == pytest.approx(0.02) and np.isnan(out[1]) and out[2] == pytest.approx(0.04)
    assert np.isnan(adjust_pvalues([np.nan], "bh")).all()
    with pytest.raises(ValueError):
        adjust_pvalues([0.1], "bonferroni")  # type: ignore[arg-type]


# ---------------------------------------------------------------- records to tests

def test_prompt_ids_drop_the_seed():
    frame = pd.DataFrame({"item_id": ["w:pro-dev-001:referenced:seed0", "w:x:seed12"]})
    assert list(prompt_ids(frame)) == ["w:pro-dev-001:referenced", "w:x"]
    with pytest.raises(ValueError):
        record_values(frame, "accuracy")


def test_seeds_are_averaged_not_pooled():
    male, female = [0.9, 0.8, 0.85, 0.7, 0.95], [0.6, 0.5, 0.55, 0.65, 0.4]
    five = gendered("m", 1, male, female, seeds=5, jitter=0.05)
    table = checkpoint_tests(five)
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["n_male"], row["n_female"], row["seeds"]) == (5, 5, 5)
    # Same test as on each prompt's seed-mean JSD-P of the correct option.
    per_record = record_values(five, "jsdp_correct")
    means = pd.Series(per_record).groupby(prompt_ids(five).to_numpy()).mean()
    labels = five.groupby(prompt_ids(five).to_numpy())["answer_label"].first()
    expected = mann_whitney(means[labels == "male"], means[labels == "female"])
    assert row["p_value"] == pytest.approx(expected.p_value)
    assert row["effect_size"] == -1.0  # more confident on male: smaller male JSD-P
    assert row["gap"] == pytest.approx(means[labels == "male"].mean()
                                       - means[labels == "female"].mean())
    assert prompt_values(five)["seeds"].eq(5).all()


def test_jsdp_correct_is_the_part_of_the_answer():
    rec = gendered("m", 1, [0.7], [0.4])
    parts = record_jsd_parts(rec)
    assert list(record_values(rec)) == [parts[0, 0], parts[1, 1]]


def test_checkpoint_tests_per_model_and_step_with_correction():
    same = [0.5, 0.6, 0.7, 0.8, 0.55, 0.65]
    records = pd.concat([
        gendered("a", 10, same, same), gendered("a", 20, [0.95] * 3 + [0.9] * 3, same),
        gendered("b", 10, same, same)], ignore_index=True)
    table = checkpoint_tests(records, correction="holm", alpha=0.01)
    assert list(zip(table["model"], table["step"])) == [("a", 10), ("a", 20), ("b", 10)]
    a = table[table["model"] == "a"]
    assert a["p_adjusted"].to_numpy() == pytest.approx(adjust_pvalues(a["p_value"], "holm"))
    assert table["p_value"].iloc[0] == pytest.approx(1.0)
    assert table["effect_size"].iloc[0] == 0.0 and table["gap"].iloc[0] == 0.0
    assert table["p_adjusted"].iloc[2] == table["p_value"].iloc[2]  # its own family of one
    assert list(table["significant"]) == [False, True, False]
    assert checkpoint_tests(records.iloc[:0]).empty


def test_rank_tests():
    ranks = [1, 2, 3, 1, 2, 40, 50, 60, 45, 55]
    rec = rows("m", 5, ["male"] * 5 + ["female"] * 5, [0.5] * 10, ranks=ranks)
    row = checkpoint_tests(rec, value="target_rank").iloc[0]
    assert row["effect_size"] == -1.0 and row["gap"] == pytest.approx(1.8 - 50)


def test_model_tests_on_not_specified_prompts():
    labels = ["not specified"] * 6
    common = [0.3] * 6
    records = pd.concat([
        rows("big", 10, labels, common, p_male=[0.5, 0.55, 0.6, 0.5, 0.52, 0.58]),
        rows("small", 10, labels, common, p_male=[0.35, 0.3, 0.32, 0.34, 0.36, 0.33]),
        rows("big", 20, labels, common, p_male=[0.35] * 6),
        rows("small", 20, labels, common, p_male=[0.35] * 6),
        rows("small", 30, labels, common, p_male=[0.35] * 6)], ignore_index=True)
    table = model_tests(records, "big", "small", value="jsdp:male")
    assert list(table["step"]) == [10, 20]  # only steps both models have
    assert table["effect_size"].tolist() == [1.0, 0.0]
    assert (table["n_a"] == 6).all() and table["gap"].iloc[0] > 0
    assert table["p_adjusted"].iloc[0] == pytest.approx(2 * table["p_value"].iloc[0])


# ---------------------------------------------------------------- emergence

def test_emergence_after_a_blip():
    steps = [0, 10, 20, 30, 40, 50]
    p = [0.5, 0.001, 0.2, 0.001, 0.002, 0.0001]  # significant at 10 is a blip
    assert emergence_step(steps, p, alpha=0.01) == 30
    assert emergence_step(steps[::-1], p[::-1], alpha=0.01) == 30  # order-free
    assert emergence_step(steps, [0.001] * 6) == 0
    assert emergence_step(steps, [*p[:-1], 0.5]) is None
    assert emergence_step(steps, [*p[:-1], np.nan]) is None
    assert emergence_step([], []) is None
    gaps = [0.1, 0.2, 0.3, -0.2, 0.4, 0.5]  # 30 is significant the other way round
    assert emergence_step(steps, p, alpha=0.01, gaps=gaps) == 40


def test_sharpest_change_pairs_prompts_across_checkpoints():
    base_m, base_f = [1, 5, 30, 100, 8], [2, 60, 9, 300, 20]  # wide spread between prompts
    shift = {0: (0, 0), 10: (1, 3), 20: (2, 60), 30: (3, 62)}  # per-group rank shift per step
    records = pd.concat([
        rows("m", step, ["male"] * 5 + ["female"] * 5, [0.5] * 10, seeds=2,
             ranks=[*(r + sm for r in base_m), *(r + sf for r in base_f)])
        for step, (sm, sf) in shift.items()], ignore_index=True)
    change = sharpest_change(records, value="target_rank", n_resamples=500)
    assert change is not None
    assert (change.step_from, change.step_to, change.n_prompts) == (10, 20, 10)
    assert change.change.estimate == pytest.approx(1 - 57)
    assert change.gap_to - change.gap_from == pytest.approx(change.change.estimate)
    # Every prompt moved by its group's shift: paired resampling sees no uncertainty.
    assert change.change.low == change.change.high == change.change.estimate

    noisy = records.assign(target_rank=records["target_rank"]
                           + np.random.default_rng(0).integers(0, 3, len(records)))
    ci = sharpest_change(noisy, value="target_rank", n_resamples=500, seed=3)
    assert ci is not None and ci.change.low < ci.change.estimate < ci.change.high < 0
    assert sharpest_change(records[records["step"] == 0], value="target_rank") is None
    with pytest.raises(ValueError):
        sharpest_change(pd.concat([records, records.assign(model="other")]))


def test_the_sharpest_change_interval_holds_although_the_largest_was_picked():
    """A flat gap over 20 checkpoints, each prompt's value AR(1) (ρ 0.5) across them: the
    interval of the largest of 19 changes covers its true change, 0, about 95% of the time.
    An interval for that pair alone, as if it had not been picked, covered it 35-41% of the
    time on such curves."""
    rng = np.random.default_rng(7)
    n, k, sims, covered = 30, 20, 30, 0
    labels = np.repeat(["male", "female"], n)
    for sim in range(sims):
        noise = np.empty((2 * n, k))
        noise[:, 0] = rng.normal(size=2 * n)
        for j in range(1, k):
            noise[:, j] = 0.5 * noise[:, j - 1] + np.sqrt(0.75) * rng.normal(size=2 * n)
        values = 5 + rng.normal(0, 1, (2 * n, 1)) + 0.4 * noise
        records = pd.DataFrame({
            "model": "m", "step": np.tile(np.arange(k) * 100, 2 * n),
            "item_id": np.repeat([f"winobias-gender:p{i}:{g}:seed0"
                                  for i, g in enumerate(labels)], k),
            "answer_label": np.repeat(labels, k), "target_rank": values.ravel()})
        found = sharpest_change(records, value="target_rank", n_resamples=400, seed=sim)
        assert found is not None
        covered += found.change.low <= 0 <= found.change.high
    assert covered >= 25  # 95% of 30 less three standard errors: 24.5 (an unadjusted one: 8)


def test_one_pairs_change_is_a_difference_of_means_with_its_interval() -> None:
    """`change_interval`: the groups' mean per-prompt changes differ by the change, so its
    interval is `mean_difference_ci`'s (Welch widened to Hall's), not a BCa bootstrap, which
    covered the change of 3 and 3 normal prompts 76% of these 300 seeded draws (this 95%)."""
    rng = np.random.default_rng(5)
    covered = 0
    for _ in range(300):
        male, female = rng.normal(0.3, 1, 3), rng.normal(0, 1, 3)
        best = StepChange(0.0, 0, 1, (male, female), (0.0, 0.0))
        found = change_interval(best)
        assert found is not None and found.change == intervals.mean_difference_ci(male, female)
        covered += found.change.low <= 0.3 <= found.change.high
    assert covered >= 276  # 95% less three standard errors of 300: 276.3 (BCa: 227)
    assert change_interval(None) is None


# ---------------------------------------------------------------- early stopping

def test_pareto_front():
    gaps = [0.1, -0.05, 0.3, 0.6, 0.73, 0.3, np.nan]
    perf = [0.2, 0.5, 0.69, 0.695, 0.70, 0.69, 0.9]
    assert list(pareto_front(gaps, perf)) == [False, True, True, True, True, True, False]


def test_recommend_stop_hand_example():
    steps, gaps = [0, 1000, 2000, 3000, 4000], [0.1, -0.05, 0.3, 0.6, 0.73]
    perf = [0.2, 0.5, 0.69, 0.695, 0.70]
    shown = {0: 0.001, 1000: 0.001, 2000: 0.002, 3000: 0.004}
    rec = recommend_stop(steps, gaps, perf, tested=shown)  # 2% of 0.70: performance >= 0.686
    assert rec.step == 2000 and rec.p_adjusted == 0.002 and rec.candidates == 2
    assert rec.performance_change_pct == pytest.approx(100 * (0.69 - 0.70) / 0.70)
    assert rec.gap_change_pct == pytest.approx(100 * (0.3 - 0.73) / 0.73)
    assert rec.sentence == ("stop at step 2000: performance -1.43% against the final checkpoint, "
                            "male-female JSD-P gap -58.9% (shown smaller than the final's: "
                            "adjusted p = 0.0020 over the 2 earlier checkpoints within the "
                            "budget)")
    assert rec.pareto_steps == (1000, 2000, 3000, 4000) and rec.step in rec.pareto_steps
    assert recommend_stop(steps, gaps, perf, budget=0.5, tested=shown).step == 1000
    assert recommend_stop(steps[::-1], gaps[::-1], perf[::-1], tested=shown).step == 2000
    # only a gain that is shown moves the stop: 3000's is, 2000's smaller |gap| is not
    partly = recommend_stop(steps, gaps, perf, tested={2000: 0.2, 3000: 0.004})
    assert partly.step == 3000 and partly.p_adjusted == 0.004

    kept = recommend_stop(steps, gaps, perf, tested={2000: 0.2, 3000: 0.3})
    assert kept.step == 4000 and kept.p_adjusted == 0.2
    assert kept.sentence == ("train to the end (step 4000): no earlier checkpoint within a 2% "
                             "performance loss has a male-female JSD-P gap shown smaller than "
                             "the final's (the smallest is step 2000's, 0.300 against 0.730: "
                             "adjusted p = 0.20 over the 2 tested together)")
    untested = recommend_stop(steps, gaps, perf)
    assert untested.step == 4000 and untested.p_adjusted is None
    assert "whether an earlier checkpoint within a 2% performance loss has a smaller" in (
        untested.sentence) and "is not tested" in untested.sentence
    alone = recommend_stop(steps, gaps, [0.2, 0.5, 0.6, 0.6, 0.70], tested={})
    assert alone.sentence.endswith("no earlier checkpoint is within a 2% performance loss")
    end = recommend_stop(steps, [0.5, 0.4, 0.3, 0.2, 0.1], perf, tested={2000: 1.0, 3000: 1.0})
    assert end.step == 4000 and end.performance_change_pct == 0.0
    assert end.sentence == ("train to the end (step 4000): no earlier checkpoint within a 2% "
                            "performance loss has a smaller male-female JSD-P gap")
    with pytest.raises(ValueError):
        recommend_stop(steps, gaps, [*perf[:-1], np.nan])


def test_mean_test_agrees_with_t_on_normal_values_and_not_on_skewed_ones() -> None:
    """On normal values the studentised bootstrap's p is about Student's t's; on a
    right-skewed sample whose mean is below 0 it is larger (the t of such samples has a long
    lower tail, which Student's t does not know); on heavy symmetric tails it is at least
    Student's; values all alike have no spread to test against."""
    from scipy import stats as sps

    from biasscope.core.stats import mean_test

    x = np.random.default_rng(5).normal(0.25, 1.0, 80)
    found = mean_test(x, draws=20000)
    assert found["p_value"] == pytest.approx(sps.ttest_1samp(x, 0.0).pvalue, abs=0.02)
    assert found["effect_size"] == pytest.approx(x.mean() / x.std(ddof=1))
    assert mean_test(x) == mean_test(x)  # seeded
    skewed = np.random.default_rng(6).gamma(2.0, 1.0, 30) - 2.6
    assert mean_test(skewed)["p_value"] > 2 * sps.ttest_1samp(skewed, 0.0).pvalue
    assert mean_test([0.0, 0.0, 0.0])["p_value"] == 1.0
    assert mean_test([2.0, 2.0])["p_value"] == 0.0 and np.isnan(mean_test([1.0])["p_value"])
    # heavy symmetric tails, where the bootstrap's own p runs small: never below Student's
    rng = np.random.default_rng(7)
    for _ in range(20):
        tails = rng.standard_t(3, 40) - rng.standard_t(3, 40)
        assert mean_test(tails, draws=999)["p_value"] >= sps.ttest_1samp(tails, 0.0).pvalue - 1e-9

