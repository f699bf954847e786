from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from scipy.stats import wilcoxon

from biasscope.core.errors import BiasscopeError, DataError
from biasscope.sensitivity.indices import (
    NORMALISED,
    PERMUTATIONS,
    group_comparison,
    metric_rank_agreement,
    model_comparison,
    reward_percentiles,
    sensitivity_indices,
    signed_rank,
)


def frame(model: str, originals: Sequence[float],
          perturbed: dict[str, Sequence[float]]) -> pd.DataFrame:
    """Rewards of one model: prompt i has originals[i]; principle -> perturbed rewards."""
    return pd.DataFrame([
        {"model": model, "principle": principle, "prompt_id": f"p{i}", "original": o,
         "perturbed": values[i]}
        for principle, values in perturbed.items() for i, o in enumerate(originals)])


def shifted(model: str, shifts: dict[str, float], n: int = 6, seed: int = 0) -> pd.DataFrame:
    """n prompts; principle's perturbed reward = original + shift + small noise."""
    rng = np.random.default_rng(seed)
    originals = rng.normal(size=n)
    return frame(model, originals, {p: originals + s + rng.normal(scale=0.01, size=n)
                                    for p, s in shifts.items()})


FAST = {"n_resamples": 200}


# ---------------------------------------------------------------- percentiles

def test_percentile_counts_strictly_below_and_originals_once() -> None:
    rewards = frame("m", [1.0, 3.0], {"A": [2.0, 4.0], "B": [3.0, 5.0]})
    out = reward_percentiles(rewards)
    # pool: originals 1, 3 (once each) + perturbed 2, 4, 3, 5 -> [1, 2, 3, 3, 4, 5]
    assert out["original_percentile"].tolist() == pytest.approx([0, 2 / 6, 0, 2 / 6])
    assert out["perturbed_percentile"].tolist() == pytest.approx([1 / 6, 4 / 6, 2 / 6, 5 / 6])
    table = sensitivity_indices(rewards, **FAST).set_index("principle")
    assert table.loc["A", "mean_percentile_effect"] == pytest.approx(0.25)
    assert table.loc["B", "mean_percentile_effect"] == pytest.approx(2.5 / 6)
    assert table.loc["B", "median_percentile_effect"] == pytest.approx(2.5 / 6)


def test_percentiles_are_pooled_per_model() -> None:
    rewards = pd.concat([frame("m1", [0.0], {"A": [1.0]}), frame("m2", [100.0], {"A": [50.0]})])
    out = reward_percentiles(rewards)
    assert out["original_percentile"].tolist() == [0.0, 0.5]
    assert out["perturbed_percentile"].tolist() == [0.5, 0.0]


# ---------------------------------------------------------------- indices

def test_effects_and_normalisation() -> None:
    rewards = frame("m", [0.0, 0.0, 0.0], {"A": [1.0, 2.0, 6.0], "B": [-1.0, -1.0, -1.0]})
    table = sensitivity_indices(rewards, **FAST).set_index("principle")
    a, b = table.loc["A"], table.loc["B"]
    assert (a["mean_effect"], a["median_effect"], a["n"]) == (3.0, 2.0, 3)
    assert a["std_effect"] == pytest.approx(np.std([1, 2, 6], ddof=1))
    assert (b["mean_effect"], b["std_effect"]) == (-1.0, 0.0)
    # divided by the sum of absolute values: 3 / (3 + 1), -1 / 4; signs kept
    assert a["mean_effect_normalised"] == pytest.approx(0.75)
    assert b["mean_effect_normalised"] == pytest.approx(-0.25)
    assert table["mean_effect"].tolist() == [3.0, -1.0]  # raw values kept
    assert a["mean_effect_low"] <= 3.0 <= a["mean_effect_high"]
    assert a["median_effect_low"] <= 2.0 <= a["median_effect_high"]
    assert (b["mean_effect_low"], b["mean_effect_high"]) == (-1.0, -1.0)  # constant: a point


def test_normalised_sums_to_one_per_model_for_positive_indices() -> None:
    rewards = pd.concat([shifted("m1", {"A": 1, "B": 2, "C": 3}),
                         shifted("m2", {"A": 3, "B": 2, "C": 1}, seed=1)])
    table = sensitivity_indices(rewards, **FAST)
    for col in ("mean_effect", "median_effect", "wilcoxon_statistic"):
        sums = table.groupby("model")[f"{col}_normalised"].sum()
        assert sums.tolist() == pytest.approx([1.0, 1.0])


def test_wilcoxon_matches_scipy_and_holm() -> None:
    rng = np.random.default_rng(3)
    originals = rng.normal(size=12)
    perturbed = {"A": originals + rng.normal(0.5, 1, 12), "B": originals + rng.normal(0, 1, 12)}
    table = sensitivity_indices(frame("m", originals, perturbed), **FAST).set_index("principle")
    for p, values in perturbed.items():
        greater = wilcoxon(values, originals, alternative="greater")
        two = wilcoxon(values, originals)
        row = table.loc[p]
        assert row["wilcoxon_statistic"] == greater.statistic
        assert row["p_greater"] == pytest.approx(greater.pvalue)
        assert row["wilcoxon_statistic_two_sided"] == two.statistic
        assert row["p_two_sided"] == pytest.approx(two.pvalue)
        assert row["rank_biserial"] == pytest.approx(2 * greater.statistic / 78 - 1)
    low, high = sorted(table["p_greater"])
    assert sorted(table["p_greater_holm"]) == pytest.approx([2 * low, max(2 * low, high)])


def test_signed_rank_effect_size() -> None:
    assert signed_rank([1, 2, 3], [0, 0, 0]).rank_biserial == 1.0
    assert signed_rank([0, 0, 0], [1, 2, 3]).rank_biserial == -1.0
    zero = signed_rank([1, 2], [1, 2])
    assert (zero.statistic, zero.p_greater, zero.p_two_sided, zero.rank_biserial) == (
        0.0, 1.0, 1.0, 0.0)
    assert math.isnan(signed_rank([math.nan], [1.0]).p_greater)


def test_degenerate_inputs_give_nan_not_errors() -> None:
    one = sensitivity_indices(frame("m", [0.5], {"A": [0.5]}), **FAST).iloc[0]
    assert (one["n"], one["mean_effect"], one["p_greater"]) == (1, 0.0, 1.0)
    assert math.isnan(one["std_effect"]) and math.isnan(one["mean_effect_low"])
    assert math.isnan(one["mean_effect_normalised"])  # zero sum over principles
    zeros = sensitivity_indices(frame("m", [1.0, 2.0], {"A": [1.0, 2.0], "B": [1.0, 2.0]}),
                                **FAST)
    assert zeros["mean_effect"].tolist() == [0.0, 0.0]
    assert zeros[[f"{c}_normalised" for c in NORMALISED]].isna().all().all()
    missing = sensitivity_indices(frame("m", [1.0], {"A": [math.nan]}), **FAST).iloc[0]
    assert missing["n"] == 0 and math.isnan(missing["mean_effect"])
    empty = pd.DataFrame(columns=["model", "principle", "prompt_id", "original", "perturbed"])
    assert sensitivity_indices(empty, **FAST).empty


def test_bad_rewards_raise_one_line_errors() -> None:
    rewards = frame("m", [1.0], {"A": [2.0]})
    with pytest.raises(DataError, match="perturbed"):
        sensitivity_indices(rewards.drop(columns="perturbed"))
    with pytest.raises(DataError, match="duplicate"):
        sensitivity_indices(pd.concat([rewards, rewards]))
    with pytest.raises(DataError, match="numbers"):
        sensitivity_indices(rewards.assign(original="high"))


# ---------------------------------------------------------------- groups

GROUPS = {"a1": "g0", "a2": "g0", "a3": "g0", "a4": "g0", "b1": "g1", "b2": "g1", "b3": "g1",
          "b4": "g1", "shared": "both"}


def test_group_comparison_finds_an_obvious_difference() -> None:
    shifts = {"a1": 5.0, "a2": 5.1, "a3": 4.9, "a4": 5.2, "b1": 1.0, "b2": 1.1, "b3": 0.9,
              "b4": 1.2, "shared": 3.0, "other": 2.0}
    indices = sensitivity_indices(pd.concat([shifted("m1", shifts), shifted("m2", shifts, seed=1)]),
                                  **FAST)
    out = group_comparison(indices, GROUPS, metric="mean_effect")
    assert out["groups"] == ["g0", "g1"] and out["both"] == ["shared"]
    assert out["unassigned"] == ["other"]
    row = out["models"].set_index("model").loc["m1"]
    assert row["n_g0"] == 4 and row["n_g1"] == 4 and bool(row["exact"])
    assert row["difference"] == pytest.approx(row["sum_g0"] - row["sum_g1"])
    assert row["difference"] == pytest.approx(16.0, abs=0.1)
    assert row["p_value"] == pytest.approx(2 / 70)  # the most extreme of 70 splits, two-sided
    assert row["effect_size"] > 10
    sampled = group_comparison(indices, GROUPS, "mean_effect", n_permutations=50)["models"]
    assert not sampled["exact"].any() and (sampled["p_value"] < 0.2).all()  # random splits
    assert list(out["principles"].columns) == ["principle", "group", "m1", "m2"]
    assert len(out["contrasts"]) == 1  # m1 vs m2: same shifts, no group difference in the gap
    assert out["contrasts"]["p_value"].iloc[0] > 0.05


def test_the_group_test_keeps_its_own_splits_and_says_their_monte_carlo_error() -> None:
    """The group test draws `PERMUTATIONS` random splits whatever the intervals' resamples:
    a permutation p cannot fall below 1/(N + 1), which at `--resamples 100` (0.0099) would sit
    above Holm's threshold 0.05/6 for six models. Each p says how many splits it counted and
    its Monte Carlo standard error, 0 when every split was counted."""
    shifts = {f"a{i}": 5.0 + i / 10 for i in range(8)} | {f"b{i}": 1.0 + i / 10 for i in range(8)}
    groups = {p: "g0" if p.startswith("a") else "g1" for p in shifts}
    indices = sensitivity_indices(shifted("m", shifts), **FAST)  # 200 resamples: not the test's
    row = group_comparison(indices, groups, "mean_effect")["models"].iloc[0]
    assert PERMUTATIONS == 10_000 and math.comb(16, 8) > PERMUTATIONS  # so: random splits
    assert not row["exact"] and row["permutations"] == PERMUTATIONS
    p = row["p_value"]
    assert 1 / (PERMUTATIONS + 1) <= p < 0.05 / 100  # far below Holm's thresholds
    assert row["monte_carlo_se"] == pytest.approx(math.sqrt(p * (1 - p) / PERMUTATIONS))
    few = {k: v for k, v in shifts.items() if k[1] in "0123"}  # 4 + 4: all 70 splits
    exact = group_comparison(sensitivity_indices(shifted("m", few), **FAST), groups,
                             "mean_effect")["models"].iloc[0]
    assert exact["exact"] and exact["permutations"] == 70 and exact["monte_carlo_se"] == 0


def test_group_comparison_without_a_difference() -> None:
    shifts = {"a1": 1.0, "a2": 3.0, "a3": 2.0, "a4": 4.0, "b1": 4.0, "b2": 2.0, "b3": 3.0,
              "b4": 1.0}
    out = group_comparison(sensitivity_indices(shifted("m", shifts), **FAST), GROUPS,
                           n_permutations=500)
    row = out["models"].iloc[0]
    assert row["p_value"] > 0.5 and abs(row["effect_size"]) < 0.2
    assert out["contrasts"].empty


def test_group_comparison_needs_two_groups_and_a_known_metric() -> None:
    indices = sensitivity_indices(shifted("m", {"a1": 1.0, "a2": 2.0}), **FAST)
    with pytest.raises(BiasscopeError, match="two group names"):
        group_comparison(indices, {"a1": "g0", "a2": "g0"})
    with pytest.raises(BiasscopeError, match="not a column"):
        group_comparison(indices, {"a1": "g0", "a2": "g1"}, metric="nope")
    single = group_comparison(indices, {"a1": "g0", "a2": "g1"}).get("models")
    assert math.isnan(single["effect_size"].iloc[0])  # one principle per group: no pooled SD


# ---------------------------------------------------------------- rank agreement, models

def test_rank_agreement_is_one_for_identical_orderings() -> None:
    indices = sensitivity_indices(shifted("m", {"A": 1.0, "B": 2.0, "C": 3.0, "D": 4.0}), **FAST)
    out = metric_rank_agreement(indices)
    pair = out[(out["metric_a"] == "mean_effect") & (out["metric_b"] == "median_effect")]
    assert pair["kendall_tau"].iloc[0] == pytest.approx(1.0)
    assert pair["spearman_rho"].iloc[0] == pytest.approx(1.0)
    assert pair["n"].iloc[0] == 4
    one = metric_rank_agreement(sensitivity_indices(shifted("m", {"A": 1.0}), **FAST))
    assert one["kendall_tau"].isna().all()


def test_model_comparison_table_and_paired_test() -> None:
    shifts = {p: float(i) for i, p in enumerate("ABCDEFGH", start=1)}
    rewards = pd.concat([shifted("m1", shifts), shifted("m2", {p: s / 2 for p, s in
                                                               shifts.items()}, seed=1)])
    indices = sensitivity_indices(rewards, **FAST)
    table = model_comparison(indices, "mean_effect")
    assert list(table.columns) == ["m1", "m2"] and list(table.index) == list(shifts)
    test = table.attrs["test"]
    expected = wilcoxon(table["m1"], table["m2"])
    assert test["p_value"] == pytest.approx(expected.pvalue)
    assert test["effect_size"] == 1.0 and test["n"] == 8
    assert "test" not in model_comparison(indices[indices["model"] == "m1"]).attrs


# ---------------------------------------------------------------- conventions, intervals

# Three prompts with originals 0, 1, 2. Principle A's effects are 1, 2, 0 (perturbed 1, 3, 2);
# B's are -2, -4, -3 (perturbed -2, -3, -1). Every number below was worked out by hand from
# the source's formulas (make_processed_datasets_for_sensitivity_plots.py: np.std, the pool of
# every row's original and perturbed reward, np.searchsorted / len; make_plots.py: y / y.sum()).
HAND = frame("m", [0.0, 1.0, 2.0], {"A": [1.0, 3.0, 2.0], "B": [-2.0, -3.0, -1.0]})


def test_source_conventions_match_the_source_formulas_by_hand() -> None:
    t = sensitivity_indices(HAND, n_resamples=50, conventions="source").set_index("principle")
    a, b = t.loc["A"], t.loc["B"]
    assert (a["mean_effect"], b["mean_effect"]) == (1.0, -3.0)
    # np.std, ddof=0: sqrt(((0)^2 + 1^2 + (-1)^2) / 3) = sqrt(2/3) for both
    assert a["std_effect"] == pytest.approx(0.816496580927726)
    assert b["std_effect"] == pytest.approx(0.816496580927726)
    # plain sum: 1 + (-3) = -2, so A -> -0.5 and B -> 1.5 (signs flipped, adds up to 1)
    assert a["mean_effect_normalised"] == pytest.approx(-0.5)
    assert b["mean_effect_normalised"] == pytest.approx(1.5)
    assert a["median_effect_normalised"] == pytest.approx(-0.5)
    # pool: originals 0,1,2 twice + perturbed 1,3,2,-2,-3,-1 = [-3,-2,-1,0,0,1,1,1,2,2,2,3];
    # share strictly below: o=0 3/12, o=1 5/12, o=2 8/12; A 1->5/12, 3->11/12, 2->8/12;
    # B -2->1/12, -3->0, -1->2/12. A's percentile effects 2,6,0 /12; B's -2,-5,-6 /12
    assert a["mean_percentile_effect"] == pytest.approx(8 / 36)
    assert a["median_percentile_effect"] == pytest.approx(2 / 12)
    assert a["std_percentile_effect"] == pytest.approx(math.sqrt(56 / 9) / 12)
    assert b["mean_percentile_effect"] == pytest.approx(-13 / 36)
    assert b["median_percentile_effect"] == pytest.approx(-5 / 12)
    assert b["std_percentile_effect"] == pytest.approx(math.sqrt(26 / 9) / 12)
    # sum 8/36 - 13/36 = -5/36: A -> -1.6, B -> 2.6
    assert a["mean_percentile_effect_normalised"] == pytest.approx(-1.6)
    assert b["mean_percentile_effect_normalised"] == pytest.approx(2.6)
    # Wilcoxon R+: A's nonzero effects 1, 2 have ranks 1, 2 -> 3; B has none positive -> 0
    assert (a["wilcoxon_statistic"], b["wilcoxon_statistic"]) == (3.0, 0.0)
    assert (a["wilcoxon_statistic_normalised"], b["wilcoxon_statistic_normalised"]) == (1.0, 0.0)


def test_biasscope_conventions_on_the_same_fixture_by_hand() -> None:
    t = sensitivity_indices(HAND, n_resamples=50).set_index("principle")
    a, b = t.loc["A"], t.loc["B"]
    assert (a["std_effect"], b["std_effect"]) == (pytest.approx(1.0), pytest.approx(1.0))
    # sum of absolute values 1 + 3 = 4: A -> 0.25, B -> -0.75 (signs kept)
    assert a["mean_effect_normalised"] == pytest.approx(0.25)
    assert b["mean_effect_normalised"] == pytest.approx(-0.75)
    # pool: originals 0,1,2 once + the six perturbed = [-3,-2,-1,0,1,1,2,2,3] (9);
    # o 0,1,2 -> 3/9, 4/9, 6/9; A 1,3,2 -> 4/9, 8/9, 6/9; B -2,-3,-1 -> 1/9, 0, 2/9
    assert a["mean_percentile_effect"] == pytest.approx(5 / 27)
    assert b["mean_percentile_effect"] == pytest.approx(-10 / 27)
    assert a["mean_percentile_effect_normalised"] == pytest.approx(1 / 3)
    assert b["mean_percentile_effect_normalised"] == pytest.approx(-2 / 3)
    for col in NORMALISED:  # absolute values add up to 1 per model, whatever the signs
        assert t[f"{col}_normalised"].abs().sum() == pytest.approx(1.0)


def test_source_group_sums_are_renormalised_over_the_compared_principles() -> None:
    rewards = pd.concat([HAND, frame("m", [0.0, 1.0, 2.0], {"C": [2.0, 3.0, 4.0]}),
                         frame("m2", [0.0, 0.0, 0.0], {"A": [1.0, 1.0, 1.0], "B": [3.0] * 3,
                                                       "C": [9.0] * 3})])
    groups = {"A": "g0", "B": "g1", "C": "both"}
    source = group_comparison(sensitivity_indices(rewards, n_resamples=20, conventions="source"),
                              groups, conventions="source")["principles"].set_index("principle")
    # C (shared) is left out of the sum: 1 / (1 - 3) = -0.5, -3 / (1 - 3) = 1.5; m2: 1/4, 3/4
    assert source.loc[["A", "B"], "m"].tolist() == pytest.approx([-0.5, 1.5])
    assert source.loc[["A", "B"], "m2"].tolist() == pytest.approx([0.25, 0.75])
    ours = group_comparison(sensitivity_indices(rewards, n_resamples=20), groups)
    # normalised over all three, absolute sum 1 + 3 + 2 = 6
    assert ours["principles"].set_index("principle")["m"].tolist() == pytest.approx(
        [1 / 6, -0.5, 1 / 3])
    with pytest.raises(BiasscopeError, match="conventions 'paper'"):
        sensitivity_indices(HAND, conventions="paper")


def test_every_normalised_index_std_and_percentile_effect_has_an_interval() -> None:
    rewards = pd.concat([shifted("m1", {"A": 1.0, "B": 2.0, "C": 3.0}, n=12),
                         shifted("m2", {"A": 3.0, "B": 2.0, "C": 1.0}, n=12, seed=1)])
    for conventions in ("biasscope", "source"):
        t = sensitivity_indices(rewards, n_resamples=300, conventions=conventions)
        named = [*(f"{c}_normalised" for c in NORMALISED), "std_effect",
                 "mean_percentile_effect", "median_percentile_effect", "std_percentile_effect"]
        for col in named:
            low, high = t[f"{col}_low"].to_numpy(), t[f"{col}_high"].to_numpy()
            assert np.isfinite(low).all() and np.isfinite(high).all(), col
            assert (low <= t[col] + 1e-12).all() and (t[col] <= high + 1e-12).all(), col
    one = sensitivity_indices(frame("m", [0.5], {"A": [1.5]}), **FAST).iloc[0]
    assert math.isnan(one["std_effect_low"])  # one prompt: no SD, so no interval


@pytest.mark.parametrize("conventions", ["biasscope", "source"])
def test_the_bootstrap_recomputes_the_same_indices_on_the_full_sample(conventions: str) -> None:
    from biasscope.sensitivity.intervals import BOOTSTRAPPED, _matrix, _resample, convention

    rewards = pd.concat([HAND, frame("m", [0.0, 1.0, 2.0], {"C": [0.0, 1.5, 2.5]})])
    table = sensitivity_indices(rewards, n_resamples=20, conventions=conventions)
    conv = convention(conventions)
    m = _matrix(rewards, list(table["principle"]), conv)
    full = _resample(m, np.arange(3)[None, :], conv)[0]
    for k, col in enumerate(BOOTSTRAPPED):
        assert full[k] == pytest.approx(table[col].to_numpy(), nan_ok=True), col


def test_a_prompt_original_enters_the_pool_once_even_when_rescored() -> None:
    """A prompt's original reward scored twice (in other batches) may differ in its last
    bits: the pool counts it once by prompt, so no result depends on that difference."""
    rewards = frame("m", [1.0, 3.5], {"A": [2.0, 4.0], "B": [3.0, 5.0]})  # no ties
    jittered = rewards.copy()
    jittered.loc[jittered["principle"] == "B", "original"] += 1e-7
    same, moved = reward_percentiles(rewards), reward_percentiles(jittered)
    # every perturbed reward, and the untouched originals, have the same share of the pool
    # below them (a jittered original is no tie with itself any more: its own share moves)
    kept = (same["principle"] == "A").to_numpy()
    assert moved["perturbed_percentile"].tolist() == same["perturbed_percentile"].tolist()
    assert (moved["original_percentile"][kept].tolist()
            == same["original_percentile"][kept].tolist() == [0.0, 0.5])


@pytest.mark.parametrize("conventions", ["biasscope", "source"])
def test_no_interval_from_one_prompt(conventions: str) -> None:
    """One prompt scored: every resample is that prompt, so the percentile effects and the
    normalised indices got intervals of no width ("0.5 (95% CI 0.5 to 0.5)"), read as
    certain, where the docs say an interval is blank with fewer than two prompts."""
    t = sensitivity_indices(frame("m", [0.5], {"A": [1.5], "B": [0.0]}), **FAST,
                            conventions=conventions)
    bounds = [c for c in t.columns if c.endswith(("_low", "_high"))]
    assert t[bounds].isna().all().all(), t[bounds].notna().any()[lambda s: s].index.tolist()
    assert t["mean_percentile_effect"].notna().all()  # the estimates are kept
