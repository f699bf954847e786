from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from biasscope.judge.agreement import agreement, majority, mean_probabilities


def test_cohen_kappa_on_a_two_by_two_table_by_hand() -> None:
    # x\y   yes  no     p_o = 35/50 = 0.7; p_e = (25*30 + 25*20)/50² = 0.5
    # yes    20   5     κ = (0.7 - 0.5) / (1 - 0.5) = 0.4
    # no     10  15
    x = ["yes"] * 25 + ["no"] * 25
    y = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    r = agreement({"x": x, "y": y}, n_resamples=200)
    kappa = r.cohen[("x", "y")]
    assert kappa.estimate == pytest.approx(0.4)
    assert kappa.low < 0.4 < kappa.high
    assert r.n_items == 50 and r.n_complete == 50
    assert "Cohen's κ = 0.40" in r.sentence()


def test_fleiss_and_krippendorff_by_hand() -> None:
    # items AAA, AAB, BBB, ABB with 3 judges.
    # Fleiss: P_i = 1, 1/3, 1, 1/3 -> mean 2/3; p_A = p_B = 1/2 -> P_e = 1/2; κ = 1/3.
    # Krippendorff: o_AA = o_BB = 4, o_AB = o_BA = 2, n = 12, n_A = n_B = 6;
    # D_o = 4/12, D_e = 2*6*6/(12*11) = 6/11; α = 1 - (1/3)/(6/11) = 7/18.
    table = pd.DataFrame({"j1": list("AABA"), "j2": list("AABB"), "j3": list("ABBB")})
    r = agreement(table, n_resamples=200)
    assert r.fleiss.estimate == pytest.approx(1 / 3)
    assert r.alpha.estimate == pytest.approx(7 / 18)
    assert set(r.cohen) == {("j1", "j2"), ("j1", "j3"), ("j2", "j3")}
    assert r.cohen[("j1", "j2")].estimate == pytest.approx(cohen_kappa_score(
        list("AABA"), list("AABB")))


def test_missing_verdicts_by_hand() -> None:
    # Items (A,A), (B,B), (A,B), (A,-): the last is pairable for neither statistic.
    # Cohen over 3 items: p_o = 2/3, p_e = (2*1 + 1*2)/9 = 4/9, κ = (2/9)/(5/9) = 0.4.
    # Krippendorff: o_AA = o_BB = 2, o_AB = o_BA = 1, n = 6; D_o = 1/3, D_e = 18/30; α = 4/9.
    r = agreement({"x": ["A", "B", "A", "A"], "y": ["A", "B", "B", None]}, n_resamples=200)
    assert r.cohen[("x", "y")].estimate == pytest.approx(0.4)
    assert r.alpha.estimate == pytest.approx(4 / 9)
    assert r.fleiss.estimate == pytest.approx(1 / 3)  # P̄ = 2/3 over 3 complete items, P_e = 1/2
    assert r.n_items == 4 and r.n_complete == 3


def test_cohen_matches_sklearn_with_missing_values_and_three_labels() -> None:
    rng = np.random.default_rng(0)
    truth = rng.choice(["A", "B", "C"], 150)

    def judge(p: float) -> list[str | None]:
        out = np.where(rng.random(150) < p, truth, rng.choice(["A", "B", "C"], 150))
        return [None if m else str(v) for v, m in zip(out, rng.random(150) < 0.1)]

    verdicts = {"gpt": judge(0.8), "claude": judge(0.6), "llama": judge(0.3)}
    r = agreement(verdicts, n_resamples=300)
    for (a, b), kappa in r.cohen.items():
        both = [(u, v) for u, v in zip(verdicts[a], verdicts[b]) if u and v]
        expected = cohen_kappa_score([u for u, _ in both], [v for _, v in both])
        assert kappa.estimate == pytest.approx(expected)
        assert kappa.low <= kappa.estimate <= kappa.high
    assert r.cohen[("gpt", "claude")].estimate > r.cohen[("claude", "llama")].estimate
    assert r.alpha.low < r.alpha.estimate < r.alpha.high
    assert r.fleiss.low < r.fleiss.estimate < r.fleiss.high
    assert r == agreement(verdicts, n_resamples=300)  # same seed, same intervals
    sentence = r.sentence()
    assert "3 judges on 150 items" in sentence and "claude vs llama" in sentence


@pytest.mark.parametrize("verdicts", [
    {"x": ["A"] * 6, "y": ["A"] * 6},
    {"x": [], "y": []},
    {"x": ["A", None, "B"], "y": [None, "B", None]},
])
def test_undefined_agreement_is_nan_not_an_error(verdicts: dict[str, list[str | None]]) -> None:
    r = agreement(verdicts, n_resamples=50)
    assert math.isnan(r.alpha.estimate) and math.isnan(r.fleiss.estimate)
    assert math.isnan(r.cohen[("x", "y")].estimate)
    assert "undefined" in r.sentence()


def test_one_judge_is_not_enough() -> None:
    with pytest.raises(ValueError, match="two judges"):
        agreement({"x": ["A", "B"]})


def test_majority() -> None:
    assert majority(["A", "B", "A"]) == "A"
    assert majority(["A", "B", None, None, "B"]) == "B"  # abstentions are not votes
    assert majority(["A", "B"]) is None  # a tie is no verdict
    assert majority(["A", "A", "B", "B", "C"]) is None
    assert majority([]) is None and majority([None]) is None


def test_mean_probabilities() -> None:
    # The first judge's top logprobs cover 0.8 of the mass: normalised to 0.75 / 0.25 first.
    out = mean_probabilities([{"A": 0.6, "B": 0.2}, {"A": 0.5, "B": 0.5}, {"C": 1.0}])
    assert out == pytest.approx({"A": (0.75 + 0.5) / 3, "B": (0.25 + 0.5) / 3, "C": 1 / 3})
    assert sum(out.values()) == pytest.approx(1.0)
    assert mean_probabilities([]) == {}
    with pytest.raises(ValueError):
        mean_probabilities([{"A": -0.1, "B": 1.1}])
    with pytest.raises(ValueError):
        mean_probabilities([{"A": 0.0}])


def test_the_threshold_test_rests_on_alpha_and_its_items() -> None:
    """The α the threshold test tests is Krippendorff's (missing verdicts too); at the
    threshold itself both one-sided p-values are ½; a mean-0.5 per-item disagreement share
    whose spread is less than the largest possible takes that largest (Wilson's reasoning)."""
    from biasscope.judge.agreement import threshold_p

    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 3, (60, 3))
    counts = (codes[:, :, None] == np.arange(3)).sum(axis=1)
    counts[::7, 0] = 0  # some items with fewer verdicts (one with none of label 0)
    alpha = float(krippendorff.alpha(value_counts=counts, level_of_measurement="nominal"))
    (above, *_), (below, *_) = threshold_p(counts, (alpha,))
    assert above == pytest.approx(0.5) and below == pytest.approx(0.5)
    (above_high, above_low), (below_high, below_low) = threshold_p(counts, (0.9, -0.9))
    assert above_high > 0.99 and above_low < 1e-6
    assert below_high == pytest.approx(1 - above_high) and below_low > 1 - 1e-6


def test_krippendorffs_reading_needs_the_items_to_show_it() -> None:
    """Two judges who agree on all of 10 items are not yet "reliable" (with 10 items, perfect
    agreement is still likely at α = 0.8); on 200 they are; coin flips on 200 items are too
    low to rely on; the summary keeps the p-values."""
    def judged(items: int, agree: bool) -> dict[str, list[str | None]]:
        rng = np.random.default_rng(items)
        first = rng.choice(["yes", "no"], items).tolist()
        second = first if agree else rng.choice(["yes", "no"], items).tolist()
        return {"j1": list(first), "j2": list(second)}

    few = agreement(judged(10, True), n_resamples=50)
    assert few.alpha.estimate == 1 and few.reading().startswith("not shown above or below")
    assert "too few items to tell" in few.sentence()
    many = agreement(judged(200, True), n_resamples=50)
    assert many.reading().startswith("reliable (above 0.8, one-sided p < 0.0001")
    assert agreement(judged(200, False), n_resamples=50).reading().startswith(
        "too low to rely on (below 0.667")
    assert set(many.thresholds) == {"above 0.8", "above 0.667", "below 0.667"}


def _library_values(counts: np.ndarray, complete: np.ndarray) -> tuple[float, float]:
    """Fleiss' κ (statsmodels) of the complete items and nominal α (``krippendorff``), NaN
    where either library has no finite value or refuses (no item with two verdicts)."""
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
    krippendorff = pytest.importorskip("krippendorff")
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = (float(inter_rater.fleiss_kappa(counts[complete], method="fleiss"))
                 if complete.any() else math.nan)
        try:
            alpha = float(krippendorff.alpha(value_counts=counts,
                                             level_of_measurement="nominal"))
        except ValueError:
            alpha = math.nan
    return tuple(v if math.isfinite(v) else math.nan for v in (kappa, alpha))  # type: ignore[return-value]


def test_fleiss_and_alpha_of_a_block_are_the_libraries_on_every_resample() -> None:
    """A block of resamples' Fleiss' κ and α in one pass are statsmodels' and
    ``krippendorff``'s, resample by resample, to 1e-12: 2-5 judges, 2-4 labels (some never
    given), missing verdicts, and the undefined cases (one label given, no complete item, no
    item with two verdicts) NaN where the libraries give none."""
    from biasscope.judge.agreement import _fleiss_alpha, _item_terms

    rng = np.random.default_rng(7)
    checked = {"fleiss": 0, "alpha": 0, "undefined": 0}
    for _ in range(120):
        judges, labels, n = int(rng.integers(2, 6)), int(rng.integers(2, 5)), int(
            rng.integers(1, 25))
        codes = rng.integers(0, int(rng.integers(1, labels + 1)), (n, judges))
        codes[rng.random((n, judges)) < rng.choice([0.0, 0.1, 0.6])] = -1
        counts = (codes[:, :, None] == np.arange(labels)).sum(axis=1)
        complete = (codes >= 0).all(axis=1)
        idx = rng.integers(0, n, (30, n))
        kappa, alpha = _fleiss_alpha(_item_terms(counts, complete, judges), labels, judges, idx)
        for row, mine in zip(idx, zip(kappa, alpha, strict=True), strict=True):
            for name, got, want in zip(("fleiss", "alpha"), mine,
                                       _library_values(counts[row], complete[row]), strict=True):
                if math.isnan(want):
                    assert math.isnan(got), (name, counts[row].tolist())
                    checked["undefined"] += 1
                else:
                    assert got == pytest.approx(want, rel=1e-12, abs=1e-12), name
                    checked[name] += 1
    assert min(checked.values()) > 200, checked


def test_agreement_needs_neither_statsmodels_nor_krippendorff(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fleiss' κ and α are computed here, so agreement needs no 'judge' extra (it asked for
    it, and called both libraries once per resample)."""
    import sys

    for name in ("statsmodels", "statsmodels.stats", "statsmodels.stats.inter_rater",
                 "krippendorff"):
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ImportError
    r = agreement({"x": list("AABA"), "y": list("AABB"), "z": list("ABBB")}, n_resamples=100)
    assert r.fleiss.estimate == pytest.approx(1 / 3) and r.alpha.estimate == pytest.approx(7 / 18)


def test_judges_alike_on_every_item_are_not_certain() -> None:
    """Two judges alike on 8 items (5 yes, 3 no): every resample is 1, yet 8 items bound the
    share that disagree only by Wilson's u = z²/(8 + z²) (0 of 8), so κ = 1 − d/(1 − p_e) is
    at least 1 − u/(1 − p_e); the bootstrap said "κ = 1 (95% CI 1 to 1)"."""
    verdicts = list("YYNYNNYY")
    r = agreement({"x": verdicts, "y": verdicts}, n_resamples=200)
    z = 1.959963984540054
    u = z ** 2 / (8 + z ** 2)
    chance = (5 / 8) ** 2 + (3 / 8) ** 2  # Cohen's from the marginals, Fleiss' Σp²: alike here
    for kappa in (r.cohen[("x", "y")], r.fleiss):
        assert (kappa.estimate, kappa.low, kappa.high) == pytest.approx(
            (1, 1 - u / (1 - chance), 1))  # 0.308
    # α's expected disagreement over its 16 pairable values: (16² − 10² − 6²)/(16·15) = 1/2
    assert (r.alpha.estimate, r.alpha.low, r.alpha.high) == pytest.approx((1, 1 - u / 0.5, 1))
    assert "Cohen's κ = 1.00 (95% CI 0.31 to 1.00)" in r.sentence()
    assert "α = 1.00 (95% CI 0.35 to 1.00), not shown above or below 0.667" in r.sentence()
    # at 90% (z = 1.645) on the same items the bound is higher
    assert agreement({"x": verdicts, "y": verdicts}, confidence=0.9,
                     n_resamples=200).cohen[("x", "y")].low > r.cohen[("x", "y")].low


def test_each_statistic_widens_only_over_its_own_items() -> None:
    """x and y disagree on the item z did not rate: Fleiss' items (all three rated) and the
    pairs with z all agree and widen; α's items and x vs y's include the disagreement and keep
    their bootstrap interval (below 1 at its high end, or 1 from resamples that miss it)."""
    r = agreement({"x": list("YYNYNNYYA"), "y": list("YYNYNNYYB"),
                   "z": [*"YYNYNNYY", None]}, n_resamples=200)
    z = 1.959963984540054
    u = z ** 2 / (8 + z ** 2)
    low = 1 - u / (1 - (5 / 8) ** 2 - (3 / 8) ** 2)
    assert r.fleiss.low == pytest.approx(low) and r.fleiss.high == 1
    assert r.cohen[("x", "z")].low == pytest.approx(low)
    assert r.cohen[("y", "z")].low == pytest.approx(low)
    assert r.alpha.estimate < 1 and r.cohen[("x", "y")].estimate < 1
    assert r.cohen[("x", "y")].low < r.cohen[("x", "y")].estimate < r.cohen[("x", "y")].high


def test_unanimous_intervals_read_as_the_threshold_tests_do() -> None:
    """On 20 items (10 of each label) alike, α's low bound is 1 − u/D_e = 0.686: above 0.667,
    below 0.8; the one-sided tests say the same (shown above 0.667, not above 0.8)."""
    verdicts = ["A"] * 10 + ["B"] * 10
    r = agreement({"x": verdicts, "y": verdicts}, n_resamples=200)
    z = 1.959963984540054
    assert r.alpha.low == pytest.approx(1 - z ** 2 / (20 + z ** 2) / (20 / 39))
    assert 0.667 < r.alpha.low < 0.8
    assert r.reading().startswith("enough for tentative conclusions (above 0.667")
