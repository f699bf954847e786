"""Reward-model sanity (accuracy on held-out chosen/rejected pairs) and the confounds of a
perturbation (length, unchanged revisions, dependence between principles). Fast: arithmetic
reward models, a scripted perturber, fixture files in the upstream format."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasscope.core.errors import BiasscopeError
from biasscope.sensitivity.confounds import (
    Confounds,
    confound_sentences,
    edit_distance,
    effect_correlations,
    length_adjusted,
    normalised_edit_distance,
)
from biasscope.sensitivity.sanity import accuracy, read_hh_pairs
from fakes import Length
from sensitivity_fixture import write_hh_rlhf
from test_sensitivity_run import CONVS, run


def _dp(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def test_edit_distance_matches_the_textbook_recurrence() -> None:
    rng = random.Random(0)
    for _ in range(300):
        a = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 70)))
        b = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 70)))
        assert edit_distance(a, b) == _dp(a, b), (a, b)
    assert normalised_edit_distance("", "") == 0.0
    assert normalised_edit_distance("kitten", "sitting") == 3 / 7


def _frame(effect: Any, length: Any, principle: str = "p1") -> pd.DataFrame:
    n = len(effect)
    return pd.DataFrame({"model": "m", "principle": principle,
                         "prompt_id": [f"c{i}" for i in range(n)], "original": 0.0,
                         "perturbed": effect, "length_change": length})


def test_the_length_adjusted_effect_recovers_a_planted_intercept_and_slope() -> None:
    rng = np.random.default_rng(1)
    length = rng.uniform(50, 400, 200)  # every revision longer: the raw mean is mostly length
    effect = 0.3 + 0.01 * length + rng.normal(0, 0.1, 200)
    row = length_adjusted(_frame(effect, length))[0]
    assert row["mean_effect"] > 2
    assert row["adjusted_effect_low"] < 0.3 < row["adjusted_effect_high"]
    assert row["adjusted_effect_high"] - row["adjusted_effect_low"] < 0.2
    assert row["slope_per_100_chars_low"] < 1.0 < row["slope_per_100_chars_high"]
    constant = length_adjusted(_frame(effect, np.full(200, 5.0)))[0]
    assert np.isnan(constant["adjusted_effect"])  # no variation in length: nothing to adjust


def test_correlated_principles_are_found_and_independent_ones_are_not() -> None:
    rng = np.random.default_rng(2)
    common, other = rng.normal(size=60), rng.normal(size=60)
    frame = pd.concat([_frame(common, 0, "p1"), _frame(common + rng.normal(0, .2, 60), 0, "p2"),
                       _frame(other, 0, "p3")])
    rows = {(r["principle_a"], r["principle_b"]): r for r in effect_correlations(frame)}
    assert rows[("p1", "p2")]["r"] > 0.9 and rows[("p1", "p2")]["p_holm"] < 1e-6
    assert rows[("p1", "p2")]["low"] < rows[("p1", "p2")]["r"] < rows[("p1", "p2")]["high"]
    assert rows[("p1", "p3")]["low"] < 0 < rows[("p1", "p3")]["high"]


def test_a_change_common_to_two_principles_is_told_from_the_shared_original() -> None:
    """Both effects subtract the same original reward: a noisy original correlates them by
    itself. The covariance beyond it is what r leaves once the original's share is taken
    out, and only a planted common change makes it significant."""
    rng = np.random.default_rng(3)
    n = 300
    level, own = rng.normal(size=n), rng.normal(size=n)
    common = rng.normal(size=n)

    def frame(with_common: float) -> pd.DataFrame:
        rows = [pd.DataFrame({"model": "m", "principle": name, "prompt_id": np.arange(n),
                              "original": level + own, "perturbed": level + with_common
                              * common + rng.normal(size=n)}) for name in ("p1", "p2")]
        return pd.concat(rows)

    fresh = frame(0.0)
    [row] = effect_correlations(fresh)
    assert row["r"] > 0.4 and row["low"] > 0.3  # the effects do correlate
    assert row["p_holm"] > 0.05 and abs(row["r_beyond_original"]) < 0.1
    wide = fresh.pivot_table(index="prompt_id", columns="principle", values="perturbed")
    o = (level + own)
    a, b = wide["p1"].to_numpy() - o, wide["p2"].to_numpy() - o
    shared = (np.cov(o, a)[0, 1] + np.cov(o, b)[0, 1]) / 2
    assert np.cov(a, b)[0, 1] == pytest.approx(row["common_covariance"] - shared)
    assert row["r_beyond_original"] == pytest.approx(
        row["common_covariance"] / np.sqrt(np.var(a, ddof=1) * np.var(b, ddof=1)))
    assert not confound_sentences({"length": [], "unchanged": [], "correlations": [row]})
    [planted] = effect_correlations(frame(1.0))
    assert planted["p_holm"] < 1e-6 and planted["r_beyond_original"] > 0.2
    [said] = confound_sentences({"length": [], "unchanged": [], "correlations": [planted]})
    assert "m: p1 and p2" in said and "move the reward through a common change" in said


def test_accuracy_names_a_broken_reward_model() -> None:
    good = accuracy([1.0] * 90 + [0.0] * 10, [0.0] * 100)
    assert good["verdict"] == "above chance" and good["correct"] == 90
    assert good["low"] < 0.9 < good["high"] and good["effect_size"] > 0
    flat = accuracy([0.0] * 100, [0.0] * 100)  # all ties: no success, but no flipped sign
    assert flat["verdict"] == "at chance" and flat["ties"] == 100
    flipped = accuracy([0.0] * 100, [1.0] * 100)
    assert flipped["verdict"] == "below chance"


def test_the_sanity_verdict_follows_the_exact_test() -> None:
    """4 of 4 pairs won was "above chance" (Wilson's interval starts at 51%; the exact test
    says p = 0.125); a model that ties a fifth of the pairs and splits the rest evenly was
    "below chance": it prefers the rejected responses no more than the chosen."""
    from scipy.stats import binomtest

    four = accuracy([1.0] * 4, [0.0] * 4)
    assert four["verdict"] == "too few pairs" and four["low"] < 0.5
    tied = accuracy([1.0] * 190 + [-1.0] * 210 + [0.0] * 100, [0.0] * 500)
    assert tied["high"] < 0.5 and tied["verdict"] == "at chance" and tied["ties"] == 100
    flipped = accuracy([1.0] * 150 + [-1.0] * 250 + [0.0] * 100, [0.0] * 500)
    assert flipped["verdict"] == "below chance"
    exact = binomtest(56, 90).proportion_ci(method="exact")
    found = accuracy([1.0] * 56 + [-1.0] * 34, [0.0] * 90)
    assert (found["low"], found["high"]) == (exact.low, exact.high)
    assert found["verdict"] == "above chance" and found["p_value"] < 0.05


def test_one_sanity_pair_is_too_few_not_at_chance() -> None:
    """`--sanity-lines 5-5` scores one pair: that says nothing about chance (#37); six pairs
    all won are the fewest that could show a model above it."""
    from biasscope.sensitivity.sanity import MIN_PAIRS, sanity_sentence

    one = accuracy([1.0], [0.0])
    assert one["verdict"] == "too few pairs" and MIN_PAIRS == 6
    said = sanity_sentence("rm", one, "held-out")
    assert "at chance" not in said and "1 pair is too few" in said and "at least 6" in said
    assert accuracy([1.0] * 6, [0.0] * 6)["verdict"] == "above chance"
    assert accuracy([1.0] * 3 + [0.0] * 4, [0.5] * 7)["verdict"] == "at chance"


class Refusals(Length):
    """Prefers the fixture's chosen responses ("I can't help with that.")."""

    def score(self, conversations: Any) -> list[float]:
        self.scored = getattr(self, "scored", 0) + len(conversations)
        return [float("can't" in response) for _, response in conversations]


def test_sanity_is_computed_in_the_run_shown_in_the_report_and_not_scored_twice(
        tmp_path: Path) -> None:
    data = write_hh_rlhf(tmp_path / "data")
    pairs = read_hh_pairs(data, n=20, seed=0)
    good, noise = Refusals("refusals"), Length("len", scale=0.0)
    out = tmp_path / "run"
    store = run(out, models=[good, noise], sanity=pairs)
    sanity = store.read_json("summary.json")["sanity"]
    assert sanity["models"]["refusals"]["correct"] == 20
    assert sanity["models"]["len"]["verdict"] == "at chance"
    assert any("WARNING" in s and s.startswith("len:") for s in sanity["sentences"])
    assert not any("WARNING" in s for s in sanity["sentences"] if s.startswith("refusals"))
    from biasscope.report.sensitivity import write_sensitivity_report

    html = write_sensitivity_report(out).read_text()
    assert "Reward-model sanity" in html and "at chance" in html
    before = good.scored
    run(out, models=[good, noise], sanity=pairs)
    assert good.scored == before  # the rerun scores nothing again, pairs included
    with pytest.raises(BiasscopeError, match="different 'sanity'"):
        run(out, models=[good, noise], sanity=read_hh_pairs(data, n=10, seed=0))


class Verbose:
    """A perturber whose revisions only add filler (principle p1) or change nothing (p2)."""

    label = "verbose"

    def identity(self) -> dict[str, str]:
        return {"backend": "scripted", "model": "verbose"}

    def generate(self, requests: Any) -> Any:
        from biasscope.backends.base import Generation

        out = []
        for r in requests:
            text = r.messages[-1][1]
            response = text.split("Assistant: ")[-1].split("\n\nPrinciple:")[0]
            if "Critique request" in text:
                out.append(Generation("critique"))
            elif "Principle: be kind" in text:
                out.append(Generation(response + " Indeed." * (len(response) % 5 + 1)))
            else:
                out.append(Generation(response))
        return out


def test_confounds_are_summarised_and_unchanged_revisions_can_be_left_out(
        tmp_path: Path) -> None:
    convs = [c.__class__(f"c{i}", c.turns, "No." * (i + 1)) for i, c in enumerate(CONVS * 3)]
    store = run(tmp_path / "kept", perturber=Verbose(), convs=convs)
    found = store.read_json("summary.json")["directions"]["toward"]["confounds"]
    unchanged = {r["principle"]: r for r in found["unchanged"]}
    assert unchanged["p2"]["unchanged"] == 12 and unchanged["p1"]["unchanged"] == 0
    length = {r["principle"]: r for r in found["length"]}
    assert length["p1"]["slope_per_100_chars"] == pytest.approx(100.0)  # reward = length
    assert abs(length["p1"]["adjusted_effect"]) < 1e-9
    excluded = run(tmp_path / "left-out", perturber=Verbose(), convs=convs,
                   confounds=Confounds(exclude_unchanged=True))
    summary = excluded.read_json("summary.json")["directions"]["toward"]
    assert [r["principle"] for r in summary["indices"]] == ["p1"]
    assert summary["confounds"]["exclude_unchanged"] is True
    assert json.loads((tmp_path / "left-out" / "run.json").read_text())["confounds"][
        "exclude_unchanged"] is True
    with pytest.raises(BiasscopeError, match="between 0 and 1"):
        Confounds(unchanged_below=2)


class Parrot:
    """A perturber like a base model: it critiques, then 'revises' by copying the revision
    request's opening (Gemma 3 270M did this to 39 of 48 revisions)."""

    label = "parrot"

    def identity(self) -> dict[str, str]:
        return {"backend": "scripted", "model": "parrot"}

    def generate(self, requests: list[Any]) -> list[Any]:
        from biasscope.backends.base import Generation

        return [Generation(r.messages[-1][1][:120] if "Critique:" in r.messages[-1][1]
                           else "It is curt.") for r in requests]


def test_revisions_that_copy_their_request_are_counted_and_said(tmp_path: Path) -> None:
    from biasscope.sensitivity.perturb import echoed

    request = "Here is a conversation between a human and an AI assistant.\n\nHuman: Hi"
    assert echoed("Here is a conversation between a human and an AI", request, "Go away.")
    assert not echoed("Please go away, kindly and politely.", request, "Go away.")
    # A light edit keeps the response's opening, which the request also holds: no echo.
    long = "Go away now, I am busy with something else today."
    assert not echoed(long + " Sorry.", request + "\n\nAssistant: " + long, long)
    assert not echoed("Here", request, "Go away.")  # too short to tell
    store = run(tmp_path / "run", perturber=Parrot())
    found = store.read_json("summary.json")["directions"]["toward"]
    assert found["echoes"] == 8 and {r["echoes"] for r in found["validity"]} == {4}
    assert any(s.startswith("8 of 8 revisions copy their own request") for s in
               found["sentences"])
    from biasscope.report.sensitivity import write_sensitivity_report

    html = write_sensitivity_report(tmp_path / "run").read_text()
    assert "<th>echoes</th>" in html and "copy their own request" in html
    kept = run(tmp_path / "kept", perturber=Verbose())
    assert kept.read_json("summary.json")["directions"]["toward"]["echoes"] == 0


def test_sanity_pairs_can_keep_to_lines_the_reward_model_did_not_train_on(
        tmp_path: Path) -> None:
    from biasscope.sensitivity.sanity import line_range

    data = write_hh_rlhf(tmp_path / "data")
    every = read_hh_pairs(data, n=None)
    some = read_hh_pairs(data, n=None, lines=(2, 5))
    assert sorted(int(i.rsplit(":", 1)[1]) for i in some.ids) == [2, 3, 4, 5]
    assert len(every.ids) > 4 and some.source.endswith("test lines 2-5")
    assert some.settings()["lines"] == [2, 5] and "lines" not in every.settings()
    assert line_range("1-1000") == (1, 1000)
    for bad in ("1000", "5-2", "0-3", "a-b"):
        with pytest.raises(BiasscopeError, match="write FIRST-LAST"):
            line_range(bad)
    with pytest.raises(BiasscopeError, match="lines 9000-9001: no usable"):
        read_hh_pairs(data, n=None, lines=(9000, 9001))
