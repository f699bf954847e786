from __future__ import annotations

import inspect
import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, special
from scipy import stats as sps

from biasscope.judge.verbosity import (
    VerbosityBiasWarning,
    check_label_descriptions,
    length_controlled,
)


def build_judge(labels: dict[str, str]) -> None:
    """Stands in for a judge constructor: the warning should point at whoever called this."""
    check_label_descriptions(labels)


# ---------------------------------------------------------------- label descriptions

def test_warns_just_above_twice_as_long_and_names_both_labels() -> None:
    with pytest.warns(VerbosityBiasWarning) as caught:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        build_judge({"LONG": "x" * 201, "SHORT": "y" * 100})
    message = str(caught[0].message)
    assert "'LONG'" in message and "201" in message and "'SHORT'" in message and "100" in message
    assert caught[0].filename == __file__ and caught[0].lineno == line


def test_exactly_twice_as_long_does_not_warn() -> None:
    # fastrepl warns when shorter/longer < 0.5, so 200 vs 100 characters is still fine.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_label_descriptions({"LONG": "x" * 200, "SHORT": "y" * 100, "MID": "z" * 150})
        check_label_descriptions({"ONLY": "a description"})
        check_label_descriptions({})
        check_label_descriptions({"A": "", "B": ""})


def test_the_sources_example_warns_and_ratio_is_configurable() -> None:
    labels = {
        "POSITIVE": "This text expresses favorable, affirmative, or optimistic sentiments, "
                    "conveying a sense of happiness, satisfaction, or positivity in its tone and "
                    "content.",
        "NEGATIVE": "This text is bad.",
    }
    with pytest.warns(VerbosityBiasWarning, match="'POSITIVE'"):
        check_label_descriptions(labels)
    with pytest.warns(VerbosityBiasWarning):
        check_label_descriptions({"A": "abcd", "B": ""})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_label_descriptions({"A": "x" * 300, "B": "y" * 100}, ratio=3.0)
    with pytest.raises(ValueError):
        check_label_descriptions(labels, ratio=0.5)


# ---------------------------------------------------------------- length control

def _batch(n: int, slope: float, seed: int, a_longer: float = 0.8
           ) -> tuple[list[tuple[str, int, int]], np.ndarray]:
    """Verdicts where ``a`` is the longer answer in a share ``a_longer`` of pairs and wins with
    probability sigmoid(slope * tanh(Δ/σ)): no preference for a apart from length."""
    rng = np.random.default_rng(seed)
    la, lb = rng.integers(50, 500, n), rng.integers(50, 500, n)
    la[: int(a_longer * n)] += 300
    diff = (la - lb).astype(float)
    p = special.expit(slope * np.tanh(diff / diff.std()))
    wins = np.where(rng.random(n) < p, "a", "b")
    return list(zip(wins, la.tolist(), lb.tolist())), diff


def test_length_bias_is_found_and_controlled_for() -> None:
    verdicts, _ = _batch(300, slope=3.0, seed=1)
    r = length_controlled(verdicts, n_resamples=300)
    assert r.win_rate.estimate > 0.7 and r.win_rate.low > 0.6
    assert r.length_coefficient.estimate > 0 and r.length_coefficient.low > 0
    assert r.length_p_value < 1e-6
    assert abs(r.lc_win_rate.estimate - 0.5) < 0.1
    assert r.lc_win_rate.low < 0.5 < r.lc_win_rate.high
    assert r.spearman > 0 and r.spearman_p_value < 1e-6
    assert "favours the longer answer" in r.sentence()
    # one number format: the coefficient's digits from its CI, p floored
    assert re.search(r"length coefficient \+[0-9.]+ \(95% CI \+[0-9.]+ to \+[0-9.]+\), "
                     r"p < 0\.0001; Spearman ρ = \+[0-9.]+ \(p < 0\.0001\)", r.sentence())


def test_longer_always_wins_separation_stays_finite() -> None:
    rng = np.random.default_rng(3)
    la, lb = rng.integers(0, 400, 40), rng.integers(0, 400, 40)
    la[:30] += 200  # a is mostly the longer answer and the longer answer always wins
    verdicts = [("a" if x > y else "b", x, y) for x, y in zip(la, lb)]
    r = length_controlled(verdicts, n_resamples=200)
    assert r.reason is None and r.win_rate.estimate > 0.7
    assert math.isfinite(r.length_coefficient.estimate) and r.length_coefficient.estimate > 0
    assert abs(r.lc_win_rate.estimate - 0.5) < abs(r.win_rate.estimate - 0.5)
    assert r.length_p_value < 0.001


def _penalised_nll(coef: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    p = special.expit(x @ coef)
    info = (x * (p * (1 - p))[:, None]).T @ x
    ll = np.sum(y * np.log(p) + (1 - y) * np.log(1 - p))
    return float(-(ll + 0.5 * np.linalg.slogdet(info)[1]))


def test_fit_matches_a_direct_maximisation_of_firths_likelihood() -> None:
    verdicts, diff = _batch(80, slope=1.0, seed=5)
    verdicts[:10] = [("tie", a, b) for _, a, b in verdicts[:10]]  # ties count half
    r = length_controlled(verdicts, n_resamples=50)
    y = np.array([{"a": 1.0, "b": 0.0, "tie": 0.5}[w] for w, _, _ in verdicts])
    x = np.column_stack([np.ones(y.size), np.tanh(diff / diff.std())])
    full = optimize.minimize(_penalised_nll, np.zeros(2), args=(x, y), method="Nelder-Mead",
                             options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000})
    null = optimize.minimize_scalar(lambda t: _penalised_nll(np.array([t, 0.0]), x, y))
    assert r.length_coefficient.estimate == pytest.approx(full.x[1], abs=1e-5)
    assert r.lc_win_rate.estimate == pytest.approx(special.expit(full.x[0]), abs=1e-5)
    assert r.length_p_value == pytest.approx(sps.chi2.sf(2 * (null.fun - full.fun), 1), rel=1e-4)
    assert r.scale == pytest.approx(diff.std())
    assert r.spearman == pytest.approx(pd.Series(diff).corr(pd.Series(y), method="spearman"))


def test_no_length_effect_is_not_reported_as_one() -> None:
    rng = np.random.default_rng(7)
    verdicts = [(w, int(a), int(b)) for w, a, b in zip(
        rng.choice(["a", "b", "tie"], 200), rng.integers(10, 900, 200), rng.integers(10, 900, 200))]
    r = length_controlled(verdicts, n_resamples=200)
    assert r.length_p_value > 0.05
    assert r.length_coefficient.low < 0 < r.length_coefficient.high
    assert "No evidence" in r.sentence()


def test_ties_half_none_left_out_and_dataframe_input() -> None:
    rows = [("a", 10, 5), ("b", 3, 9), ("tie", 4, 4), ("tie", 8, 1), (None, 1, 1), ("a", 2, 7),
            ("b", 6, 2)]
    r = length_controlled(rows, n_resamples=100)
    assert r.n == 6 and r.win_rate.estimate == pytest.approx(0.5)
    frame = pd.DataFrame(rows, columns=["winner", "length_a", "length_b"])
    assert length_controlled(frame, n_resamples=100) == r
    assert length_controlled(rows, n_resamples=100, seed=0) == r  # same seed, same intervals


@pytest.mark.parametrize(("rows", "why"), [
    ([], "no verdicts"),
    ([("a", 3, 1), ("b", 1, 3), ("a", 5, 1)], "only 3 verdicts"),
    ([("a", 3, 1), ("a", 1, 3)] * 4, "every verdict is a win for a"),
    ([("tie", 3, 1), ("tie", 1, 3)] * 4, "every verdict is a tie"),
    ([("a", 3, 1), ("b", 5, 3)] * 4, "differs in length by the same amount"),
])
def test_degenerate_batches_give_nan_and_say_why(rows: list[tuple[str, int, int]],
                                                 why: str) -> None:
    r = length_controlled(rows, n_resamples=100)
    assert r.reason is not None and why in r.reason and why in r.sentence()
    assert math.isnan(r.lc_win_rate.estimate) and math.isnan(r.length_coefficient.estimate)
    assert math.isnan(r.length_p_value) and math.isnan(r.spearman)


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="unknown winners"):
        length_controlled([("A", 1, 2)])
    with pytest.raises(ValueError, match="non-negative"):
        length_controlled([("a", -1, 2)])


@pytest.mark.parametrize(("rows", "low", "high", "said"), [
    # SciPy's binomtest(3, 3).proportion_ci(method="wilson"): 0.4385 to 1
    ([("a", 1, 2)] * 3, 0.4385, 1.0, "100% (95% CI 44% to 100%)"),
    ([("a", 1, 2)], 0.2065, 1.0, "Over 1 verdict (ties count half), answer a wins 100% "
                                 "(95% CI 21% to 100%)"),
    ([("b", 1, 2)] * 12, 0.0, 0.2425, "0% (95% CI 0% to 24%)"),
    ([("tie", 1, 2)] * 4, 0.1500, 0.8500, "50% (95% CI 15% to 85%)"),
])
def test_a_win_rate_without_spread_gets_an_honest_interval(rows, low, high, said) -> None:
    """Every verdict the same (or just one): a bootstrap collapses to a point (three wins for
    a gave "100% (95% CI 100% to 100%)"), so the Wilson interval of the wins stands in."""
    r = length_controlled(rows, n_resamples=200)
    assert r.win_rate.low == pytest.approx(low, abs=1e-3)
    assert r.win_rate.high == pytest.approx(high, abs=1e-3)
    assert said in r.sentence()


def test_the_win_rates_level_is_written_as_chosen() -> None:
    """Before: at 99.9% the sentence said "(100% CI …)" (`.0%`), a level no interval has."""
    verdicts, _ = _batch(60, slope=0.0, seed=2)
    said = length_controlled(verdicts, confidence=0.999, n_resamples=200).sentence()
    assert "(99.9% CI " in said and "100% CI" not in said


def test_a_classifier_audit_warns_of_lopsided_labels_once(tmp_path) -> None:
    """judge-audit classifies in two orders and by name: the warning came from each of the
    three calls, so the command printed its note three times."""
    import json

    from biasscope.backends.canned import CannedGenerator
    from biasscope.cli.main import main
    from biasscope.judge.biases import classifier_biases
    from biasscope.judge.core import Judge

    labels = {"POSITIVE": "Happy.", "NEGATIVE": "The text is sad, gloomy and unhappy."}
    with pytest.warns(VerbosityBiasWarning) as caught:
        classifier_biases(Judge(CannedGenerator(["A"])), ["Day 1.", "Day 2."], labels)
    assert len(caught) == 1
    texts, names = tmp_path / "texts.jsonl", tmp_path / "labels.json"
    texts.write_text("".join(json.dumps({"id": i, "text": f"Day {i}."}) + "\n"
                             for i in range(3)))
    names.write_text(json.dumps(labels))
    with pytest.warns(VerbosityBiasWarning) as caught:
        assert main(["judge-audit", "--model", "canned:A", "--input", str(texts), "--labels",
                     str(names), "--out", str(tmp_path / "audit"), "--no-cache"]) == 0
    assert len(caught) == 1


@pytest.mark.parametrize(("n", "shares"), [(4, (0.35, 0.3, 0.35)), (5, (0.45, 0.1, 0.45)),
                                           (11, (0.6, 0.3, 0.1)), (13, (0.1, 0.8, 0.1))])
def test_a_win_rate_with_ties_over_a_few_pairs_holds_its_level(
        n: int, shares: tuple[float, float, float]) -> None:
    """Losses, ties and wins drawn with ``shares``: the 95% interval's exact coverage of the
    true win rate over every outcome. The BCa bootstrap held it 87-91% of the time in these
    four cases, Student's t within [0, 1] 92-98%; the Wilson interval of the wins, ties half,
    96-100% (it errs wide: a tie varies less than a win or a loss)."""
    from biasscope.judge.verbosity import _win_rate

    truth = shares[1] / 2 + shares[2]
    held = 0.0
    for losses in range(n + 1):
        for ties in range(n + 1 - losses):
            wins = n - losses - ties
            y = np.r_[np.ones(wins), np.full(ties, 0.5), np.zeros(losses)]
            ci = _win_rate(y, 0.95, 500, seed=0)
            if ci.low <= truth <= ci.high:
                held += sps.multinomial.pmf([losses, ties, wins], n, shares)
    assert held >= 0.93
