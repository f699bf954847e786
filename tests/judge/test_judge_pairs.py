"""judge-audit asks every pair in both orders: the two verdicts of a pair are one unit of every
interval and test (length control, first slot, invalid answers, self-preference, rankings),
not two independent trials. Counting them twice made the intervals too narrow and the
p-values too small; docs/validation.md's judge-audit rows measure by how much."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from biasscope.backends.canned import CannedGenerator
from biasscope.core.intervals import wilson
from biasscope.judge.biases import _position, clustered_rate, self_preference
from biasscope.judge.core import Call, Judge, Verdict
from biasscope.judge.rankings import rankings
from biasscope.judge.verbosity import length_controlled


def _batch(n: int, seed: int) -> list[tuple[str, int, int]]:
    """One verdict per pair, lengths unrelated to the winner."""
    rng = np.random.default_rng(seed)
    wins = rng.choice(["a", "b", "tie"], n, p=[0.5, 0.4, 0.1])
    return [(str(w), int(a), int(b)) for w, a, b in zip(
        wins, rng.integers(20, 800, n), rng.integers(20, 800, n))]


def test_a_consistent_judges_two_orders_count_as_one_verdict() -> None:
    """The same verdict in both orders says what one verdict says: given the pairs, the
    length control of both orders is that of one order (old: 2n independent verdicts, so
    every interval narrower by about √2 and the p-value smaller)."""
    once = _batch(30, 1)
    both = length_controlled(once + once, n_resamples=300, pairs=[*range(30), *range(30)])
    alone = length_controlled(once, n_resamples=300)
    assert both.n == 60 and both.pairs == 30 and alone.pairs is None
    for field in ("win_rate", "lc_win_rate", "length_coefficient"):
        got, want = getattr(both, field), getattr(alone, field)
        assert (got.low, got.estimate, got.high) == pytest.approx(
            (want.low, want.estimate, want.high), abs=1e-6), field
    assert both.length_p_value == pytest.approx(alone.length_p_value, rel=1e-6)
    assert both.spearman_p_value == pytest.approx(alone.spearman_p_value)
    assert "Over 30 pairs (60 verdicts, ties half, each pair counting once), answer a wins" \
        in both.sentence()
    counted_twice = length_controlled(once + once, n_resamples=300)
    assert counted_twice.length_p_value < both.length_p_value
    assert (counted_twice.win_rate.high - counted_twice.win_rate.low
            < 0.8 * (both.win_rate.high - both.win_rate.low))


def test_pairs_left_out_and_a_pair_judged_once() -> None:
    """A verdict without a winner leaves its pair with its other verdict; pairs that score
    alike on average cannot be told apart by length; pair ids must match the verdicts."""
    rows = [("a", 10, 5), ("b", 10, 5), ("a", 3, 9), (None, 3, 9)] * 3
    r = length_controlled(rows, pairs=[0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])
    assert r.pairs == 6 and r.n == 9 and r.reason is None
    assert r.win_rate.estimate == pytest.approx(0.75)  # pairs 0.5 and 1, each counted once
    split = length_controlled([("a", 10, 5), ("b", 10, 5), ("b", 3, 9), ("a", 3, 9)] * 3,
                              pairs=np.repeat(np.arange(6), 2))
    assert split.reason is not None and "come to the same share for a (50%)" in split.reason
    few = length_controlled([("a", 1, 2), ("b", 2, 1)] * 4, pairs=[0, 0, 1, 1, 2, 2, 3, 3])
    assert few.reason == "only 4 pairs, at least 5 are needed"
    with pytest.raises(ValueError, match="3 pair ids for 2 verdicts"):
        length_controlled([("a", 1, 2), ("b", 2, 1)], pairs=[0, 1, 2])


def test_length_intervals_are_profile_likelihood_intervals() -> None:
    """Both bounds of β and of the length-controlled win rate lie where the penalised
    likelihood-ratio test reaches p = 0.05, so β's interval excludes 0 exactly when its
    p-value is below 0.05 (old: a bootstrap over verdicts, which covered 86% at 5 verdicts)."""
    from scipy import optimize, special
    from scipy import stats as sps

    rows = _batch(12, 4)
    r = length_controlled(rows)
    y = np.array([{"a": 1.0, "b": 0.0, "tie": 0.5}[w] for w, _, _ in rows])
    diff = np.array([a - b for _, a, b in rows], dtype=float)
    x = np.column_stack([np.ones(y.size), np.tanh(diff / diff.std())])

    def penalised(coef: np.ndarray) -> float:
        p = special.expit(x @ coef)
        info = (x * (p * (1 - p))[:, None]).T @ x
        return float(np.sum(y * np.log(p) + (1 - y) * np.log(1 - p))
                     + 0.5 * np.linalg.slogdet(info)[1])

    best = -optimize.minimize(lambda c: -penalised(c), np.zeros(2), method="Nelder-Mead",
                              options={"xatol": 1e-10, "fatol": 1e-12}).fun
    for j, bounds in ((0, special.logit([r.lc_win_rate.low, r.lc_win_rate.high])),
                      (1, [r.length_coefficient.low, r.length_coefficient.high])):
        for held in bounds:
            other = optimize.minimize_scalar(
                lambda v, held=held, j=j: -penalised(np.array([held, v][::1 - 2 * j])),
                bracket=(-1, 1))
            assert 2 * (best + other.fun) == pytest.approx(sps.chi2.ppf(0.95, 1), abs=2e-3)
    excludes = not (r.length_coefficient.low <= 0 <= r.length_coefficient.high)
    assert excludes == (r.length_p_value < 0.05)


def _call(label: str, order: tuple[str, str]) -> Verdict:
    return Verdict(label, None, calls=(Call("j", order, None, label, None, label),))


def test_the_first_slot_test_counts_items_not_answers() -> None:
    """Nine items where the judge takes the first slot in both orders, three where it takes
    the second: 18 of 24 answers, but 12 items. The binomial test over answers said p =
    0.023; the sign flips over items say 598/4096 = 0.146, and the interval is the Wilson
    interval of 9 of 12."""
    first = [True] * 9 + [False] * 3
    forward = [_call("a" if f else "b", ("a", "b")) for f in first]
    backward = [_call("b" if f else "a", ("b", "a")) for f in first]
    found = _position(forward, backward, 2, fixed=("tie",))["first_slot_rate"]
    assert found["estimate"] == 0.75 and found["n"] == 24 and found["clusters"] == 12
    assert found["p_value"] == pytest.approx(598 / 4096)
    assert (found["low"], found["high"]) == pytest.approx(
        (wilson(9, 12)["low"], wilson(9, 12)["high"]))
    assert found["effect_size"] == pytest.approx(2 * math.asin(math.sqrt(0.75)) - math.pi / 2)


def test_invalid_answers_in_both_orders_are_one_items() -> None:
    bad = dataclasses.replace(_call("a", ("a", "b")), label=None, reason="invalid")
    good = _call("a", ("a", "b"))
    forward = [bad] * 3 + [good] * 9
    found = _position(forward, forward, 2)["invalid_rate"]
    assert found["n"] == 24 and found["clusters"] == 12
    assert found["high"] == pytest.approx(wilson(3, 12)["high"])  # not wilson(6, 24)


def test_self_preference_counts_pairs() -> None:
    """A judge that picks its own response in both orders of 7 pairs and the other's in both
    orders of 2: p = 0.18 over 9 pairs (the binomial test over 18 verdicts said 0.031)."""
    judge = Judge(CannedGenerator(["A"], label="me"))
    authors = [("me", "you")] * 9
    labels = ["a"] * 7 + ["b"] * 2
    verdicts = [Verdict(label, None) for label in labels * 2]
    (row,) = self_preference(judge, verdicts, authors * 2, [*range(9), *range(9)])
    assert row["pairs"] == 9 and row["verdicts"] == 18 and row["own_wins"] == 14
    found = row["own_win_rate"]
    assert found["p_value"] == pytest.approx(2 * (1 + 9 + 36) / 512)
    assert found["high"] == pytest.approx(wilson(7, 9)["high"])
    (plain,) = self_preference(judge, verdicts, authors * 2)  # every verdict its own pair
    assert plain["pairs"] == 18 and plain["own_win_rate"]["p_value"] == pytest.approx(
        0.030884, abs=1e-5)


def test_a_clustered_rate_of_single_answers_is_the_binomial_one() -> None:
    """One answer per item: the Wilson interval, and the sign flips are the exact binomial
    test (up to 12 items; Monte Carlo above)."""
    from scipy import stats as sps

    hits = [True] * 9 + [False] * 2
    found = clustered_rate(hits, range(11), 0.5)
    assert found["p_value"] == pytest.approx(sps.binomtest(9, 11).pvalue)
    assert (found["low"], found["high"]) == pytest.approx(
        (wilson(9, 11)["low"], wilson(9, 11)["high"]))
    assert clustered_rate([], [], 0.5)["n"] == 0


def test_rankings_resample_a_pair_with_both_its_orders() -> None:
    """A consistent judge's two orders of each pair rank as its one order does: the pairs
    are resampled with both verdicts, and a system that won every game gets the Wilson
    interval of its pairs, not of twice as many games."""
    authors = [("alpha", "beta"), ("beta", "gamma"), ("alpha", "gamma"), ("gamma", "beta")] * 3
    labels = ["a", "b", "a", "tie"] * 3
    once = rankings({"j": labels}, authors, n_resamples=300)
    both = rankings({"j": labels * 2}, authors * 2, n_resamples=300,
                    pairs=[*range(12), *range(12)])
    assert both["leaderboards"] == once["leaderboards"]
    alpha = {r["system"]: r for r in both["leaderboards"]["j"]}["alpha"]
    assert alpha["estimate"] == 1.0 and alpha["low"] == pytest.approx(wilson(6, 6)["low"])
    twice = rankings({"j": labels * 2}, authors * 2, n_resamples=300)
    assert {r["system"]: r for r in twice["leaderboards"]["j"]}["alpha"]["low"] > alpha["low"]


def test_rankings_pad_pairs_of_fewer_verdicts() -> None:
    """A pair one of whose orders has no named authors (left out) is drawn with the one it
    has: every resample holds as many games as pairs allow, no game counted twice."""
    authors = [("alpha", "beta"), ("beta", "alpha"), ("alpha", "beta"), (None, None)]
    found = rankings({"j": ["a", "b", "b", "a"]}, authors, n_resamples=200,
                     pairs=[0, 0, 1, 1])
    board = {r["system"]: r for r in found["leaderboards"]["j"]}
    assert board["alpha"]["estimate"] == pytest.approx(2 / 3)
    assert 0 <= board["alpha"]["low"] <= 2 / 3 <= board["alpha"]["high"] <= 1


def test_a_judge_that_prefers_the_middle_label_shows_no_position_preference() -> None:
    """Three labels shown in one order and its reverse: a judge that always answers the
    middle one never picks the first slot, and that is a label preference, not a position
    one (tested as chance 1/3 it was p < 0.0001); picking the first slot in both orders is."""
    order = ("x", "y", "z")

    def verdicts(pick: Callable[[tuple[str, ...]], str], shown: tuple[str, ...]
                 ) -> list[Verdict]:
        return [Verdict(pick(shown), None, calls=(Call("j", shown, pick(shown), pick(shown),
                                                       None, ""),)) for _ in range(20)]

    middle = _position(verdicts(lambda o: o[1], order), verdicts(lambda o: o[1], order[::-1]),
                       3)["first_slot_rate"]
    assert middle["estimate"] == 0.0 and middle["p_value"] == 1.0
    assert middle["tested_against"] == "last slot"
    first = _position(verdicts(lambda o: o[0], order), verdicts(lambda o: o[0], order[::-1]),
                      3)["first_slot_rate"]
    assert first["estimate"] == 1.0 and first["p_value"] < 0.001 and first["effect_size"] > 3


def test_consensus_gives_no_verdict_on_one_order_alone() -> None:
    """consensus decides only where both orders agree: a reversed order answered outside
    the keys (or a failed request) left the first order's answer standing as the verdict,
    the position preference consensus is there to remove."""
    from biasscope.backends.base import GenerateRequest, Generation
    from biasscope.judge.core import JudgingConfig
    from biasscope.judge.tasks import compare

    config = JudgingConfig(position="consensus")
    pairs = [("Question?", "Yes.", "No.")]
    first, *_ = compare(Judge(CannedGenerator(("A", "zzz")), config), pairs)
    assert first.label is None and first.reason == "invalid" and len(first.calls) == 2

    class Down(CannedGenerator):
        def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
            self.turn += 1  # the first order answered, the reversed one failed
            return [Generation("A") if self.turn == 1 else Generation("", error="HTTP 500")]

    failed, *_ = compare(Judge(Down(("A",)), config), pairs)
    assert failed.label is None and failed.reason == "failed" and len(failed.calls) == 2


def test_permute_gives_no_verdict_from_some_orders_alone(tmp_path, capsys) -> None:
    """permute averages over every order: with two options and the second order answered
    outside the keys, the first order alone was the verdict, its position preference
    unchecked. Now no verdict, counted as invalid (as consensus does)."""
    import json

    from biasscope.cli.main import main
    from biasscope.judge.core import JudgingConfig
    from biasscope.judge.tasks import compare

    config = JudgingConfig(position="permute")
    pairs = [("Question?", "Yes.", "No.")]
    half, *_ = compare(Judge(CannedGenerator(("A", "zzz")), config), pairs)
    assert half.label is None and half.reason == "invalid" and len(half.calls) == 2
    whole, *_ = compare(Judge(CannedGenerator(("A", "B")), config), pairs)
    assert whole.label == "a" and whole.reason == ""  # "B" in the reversed order is a
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "prompt": f"Q{i}?", "a": "yes", "b": "no"})
                            + "\n" for i in range(2)))
    assert main(["judge", "--model", "canned:A|zzz", "--input", str(path), "--out",
                 str(tmp_path / "run"), "--position", "permute", "--no-cache"]) == 0
    assert "0 of 2 items got a verdict; no verdict: 2 answers outside the keys." in \
        capsys.readouterr().out


def test_position_is_measured_per_judge(tmp_path, capsys) -> None:
    """One judge always takes the first slot and another always the second: pooled, their
    answers read 50%, p = 1.0 (no position preference); each judge is measured alone."""
    import json

    from biasscope.cli.main import main

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"id": i, "prompt": f"Q{i}?", "a": "yes", "b": "no"})
                             + "\n" for i in range(8)))
    out = tmp_path / "audit"
    assert main(["judge-audit", "--model", "first=canned:A", "--model", "second=canned:B",
                 "--input", str(pairs), "--out", str(out), "--no-cache"]) == 0
    printed = capsys.readouterr().out
    head = json.loads((out / "summary.json").read_text())["probes"]["judge-audit"]["headline"]
    assert "first_slot_rate" not in head and "position_consistency" not in head
    first, second = head["first_slot_rate:first"], head["first_slot_rate:second"]
    assert (first["estimate"], second["estimate"]) == (1.0, 0.0)
    assert first["clusters"] == second["clusters"] == 8
    assert first["p_value"] == second["p_value"] == pytest.approx(2 / 256)
    assert head["position_consistency:first"]["estimate"] == 0.0
    assert head["position_consistency:second"]["estimate"] == 0.0
    assert "Judge first picked the option shown first in 100% of 16 answers" in printed
    assert "Judge second picked the option shown first in 0% of 16 answers" in printed
    assert "50%" not in printed.split("By judge first's verdicts")[0]


def _audit(tmp_path, capsys, n: int, *models: str, authors: bool = False
           ) -> tuple[dict, str]:
    import json

    from biasscope.cli.main import main

    pairs = tmp_path / f"pairs{n}.jsonl"
    pairs.write_text("".join(json.dumps({
        "id": i, "prompt": f"Q{i}?", "a": "yes" * (1 + i % 3), "b": "no",
        **({"model_a": "first", "model_b": "other"} if authors else {})}) + "\n"
        for i in range(n)))
    out = tmp_path / f"audit{n}"
    argv = ["judge-audit", *(w for m in models for w in ("--model", m)), "--input", str(pairs),
            "--out", str(out), "--no-cache"]
    assert main(argv) == 0
    result = json.loads((out / "summary.json").read_text())["probes"]["judge-audit"]
    return result, capsys.readouterr().out


def test_the_audits_tests_are_holm_controlled(tmp_path, capsys) -> None:
    """Two judges' first-slot tests are one family: over 6 pairs each judge always takes its
    slot, p = 2/64 = 0.031 each, Holm 0.0625: no verdict (before, each was read alone).
    Over 8 pairs, 0.0078 each, Holm 0.016: each judge prefers its slot."""
    found, printed = _audit(tmp_path, capsys, 6, "first=canned:A", "second=canned:B")
    for name in ("first", "second"):
        test = found["headline"][f"first_slot_rate:{name}"]
        assert test["p_value"] == pytest.approx(2 / 64)
        assert test["p_holm"] == pytest.approx(4 / 64)
        assert f"No evidence that judge {name} prefers either slot" in printed
    assert "prefers the option shown" not in printed
    assert "(Holm over the audit's 2 tests: 0.062)" in printed
    _, printed = _audit(tmp_path, capsys, 8, "first=canned:A", "second=canned:B")
    assert "Judge first prefers the option shown first" in printed
    assert "Judge second prefers the option shown second" in printed


def test_one_judges_family_holds_first_slot_length_and_self_preference(tmp_path,
                                                                       capsys) -> None:
    """One judge that always answers A, over 10 pairs it wrote answer a of: the first-slot,
    length and self-preference tests are one family, each with its raw and its Holm p; its
    own response wins as often as the first slot, half the time: no self-preference."""
    found, printed = _audit(tmp_path, capsys, 10, "first=canned:A", authors=True)
    head = found["headline"]
    tested = [k for k, v in head.items() if "p_holm" in v]
    assert tested == ["first_slot_rate", "self_preference:first"]  # length: every pair splits
    assert head["first_slot_rate"]["p_holm"] == pytest.approx(2 * 2 / 1024)
    assert head["self_preference:first"]["p_holm"] == pytest.approx(1.0)
    assert found["tables"]["self_preference"][0]["own_win_rate"]["p_holm"] == 1.0
    assert "The judge prefers the option shown first" in printed
    assert ("Judge first picked its own response in 50% of 20 verdicts on 10 pairs" in printed
            and "No evidence that judge first prefers or avoids its own responses" in printed)


def test_the_length_verdict_reads_the_adjusted_p() -> None:
    """A length effect significant alone (p < 0.05) is no verdict when Holm's p is not."""
    rows = [("a" if a > b else "b", a, b) for a, b in zip(range(10, 40, 3), range(40, 10, -3))]
    rows[0], rows[-1] = ("b", *rows[0][1:]), ("a", *rows[-1][1:])
    lc = length_controlled(rows)
    assert lc.length_p_value < 0.05
    assert "The judge favours the" in lc.sentence()
    held = lc.sentence(p_holm=0.2, tests=3)
    assert "No evidence that answer length sways the judge" in held
    assert "(Holm over the audit's 3 tests: 0.20)" in held


class Reads:
    """A judge that reads its question and answers ``pick`` of the options shown, (key,
    text) in order: a length or a name preference without a model."""

    def __init__(self, label: str, pick: Callable[[list[tuple[str, str]]], str]) -> None:
        self.label, self.pick = label, pick

    def identity(self) -> dict[str, str]:
        return {"backend": "scripted", "model": self.label}

    def generate(self, requests: list) -> list:
        import re

        from biasscope.backends.base import Generation

        out = []
        for r in requests:
            user = r.messages[-1][1]
            shown = (re.findall(r"Response (\S+):\n(.*?)\n\n", user, re.S)
                     or re.findall(r"^(\S+)\. (.*)$", user, re.M))
            out.append(Generation(self.pick(shown), finish_reason="stop"))
        return out


def _longer(shown: list[tuple[str, str]]) -> str:
    return max(shown, key=lambda o: len(o[1]))[0]


def _shorter(shown: list[tuple[str, str]]) -> str:
    return min(shown, key=lambda o: len(o[1]))[0]


def _long_and_short_apart(head: dict[str, Any], said: str) -> None:
    """Each judge's own length test found its preference, and the panel, tied on every pair,
    has no win rate (NaN)."""
    assert head["length_coefficient:long"]["estimate"] > 0
    assert head["length_coefficient:short"]["estimate"] < 0
    assert "Judge long favours the longer answer" in said
    assert "Judge short favours the shorter answer" in said
    assert head["panel_win_rate_a"]["estimate"] != head["panel_win_rate_a"]["estimate"]


def test_length_and_win_rates_are_measured_per_judge() -> None:
    """One judge always picks the longer answer, another the shorter: their aggregated
    verdict is a tie on every pair, so the length test read no verdicts and said nothing.
    Each judge's length test is its own (one Holm family with the first-slot tests), and
    the panel's win rates are labelled as the panel's."""
    from biasscope.judge.biases import pairwise_biases

    pairs = [(f"Q{i}?", "x" * (5 + 3 * i), "y" * (62 - 3 * i)) for i in range(20)]
    found = pairwise_biases(Judge([Reads("long", _longer), Reads("short", _shorter)]), pairs)
    head, said = found["headline"], " ".join(found["sentences"])
    assert "length_coefficient" not in head and "win_rate_a" not in head
    _long_and_short_apart(head, said)
    for name in ("long", "short"):
        assert head[f"length_coefficient:{name}"]["p_holm"] < 0.05
    assert "By judge long's verdicts over 20 pairs (40 verdicts" in said
    assert "(Holm over the audit's 4 tests:" in said
    assert "The panel's verdicts (mean of 2 judges): no win rate, there are no verdicts." in said


def test_the_judge_commands_win_rates_are_each_judges_and_the_panels() -> None:
    """`biasscope judge` with several judges gave one length-controlled win rate of the
    aggregated verdicts, unlabelled: a judge for the longer answer and one for the shorter
    tied on every pair and it said nothing. As judge-audit: each judge's own (its length
    test in one Holm family), the aggregated one labelled the panel's; one judge as before."""
    from biasscope.judge.batch import Task, batch_result
    from biasscope.judge.core import JudgingConfig
    from biasscope.judge.tasks import compare

    pairs = tuple((f"Q{i}?", "x" * (5 + 3 * i), "y" * (62 - 3 * i)) for i in range(20))
    task = Task(tuple(str(i) for i in range(20)), pairs=pairs)
    fixed = JudgingConfig(position="fixed")
    panel = Judge([Reads("long", _longer), Reads("short", _shorter)], fixed)
    found = batch_result(panel, task, compare(panel, pairs))
    head, said = found["headline"], " ".join(found["sentences"])
    assert "win_rate_a" not in head and "length_controlled_win_rate_a" not in head
    _long_and_short_apart(head, said)
    assert head["win_rate_a:long"]["estimate"] == head["win_rate_a:short"]["estimate"] == 0.5
    assert "length_controlled_win_rate_a:short" in head
    assert "(Holm over the run's 2 tests:" in said
    assert "The panel's verdicts (mean of 2 judges): no win rate" in said
    alone = Judge([Reads("long", _longer)], fixed)
    one = batch_result(alone, task, compare(alone, pairs))
    assert one["headline"]["win_rate_a"]["estimate"] == 0.5
    assert not any(":" in k or k.startswith("panel") for k in one["headline"])
    assert "The judge favours the longer answer" in " ".join(one["sentences"])
    assert "Holm" not in " ".join(one["sentences"])


def test_invalid_answers_and_name_sensitivity_are_measured_per_judge() -> None:
    """A judge that answers outside the keys beside one that answers: the aggregated
    verdict stood (invalid 0%). A judge whose verdict moves with the label names beside one
    whose does not: their aggregated verdicts under names tied, so the pooled rate read
    neither. Each is now its own."""
    from biasscope.judge.biases import classifier_biases

    labels = {"POSITIVE": "The text is happy.", "NEGATIVE": "The text is sad."}
    texts = [f"Text {i}." for i in range(6)]
    first = Reads("first", lambda shown: shown[0][0])
    found = classifier_biases(Judge([first, CannedGenerator(["zzz"], label="mute")]), texts,
                              labels)
    head = found["headline"]
    assert "invalid_rate" not in head
    assert head["invalid_rate:mute"]["estimate"] == 1.0
    assert head["invalid_rate:first"]["estimate"] == 0.0
    alphabet = Reads("alphabet", lambda shown: min(k for k, _ in shown))
    found = classifier_biases(Judge([first, alphabet]), texts, labels)
    head, said = found["headline"], found["sentences"]
    assert "name_sensitivity" not in head
    assert head["name_sensitivity:first"]["estimate"] == 0.0
    assert head["name_sensitivity:alphabet"]["estimate"] == 1.0  # A is POSITIVE, then NEGATIVE
    assert head["name_sensitivity:alphabet"]["n"] == 6
    assert ("Showing the user's label names instead of neutral keys changed 100% of verdicts "
            "of judge alphabet") in " ".join(said)


def test_each_judges_reason_is_read_from_its_calls_as_stored(tmp_path) -> None:
    """A judge whose two orders disagree on every pair, beside one that reads the answers:
    the other decides every item. Its reason is its own (`Judge.reason` from its calls),
    the same read back from verdicts.jsonl (stored without probabilities)."""
    from biasscope.judge.batch import Task, batch_result, stored_verdicts, write_verdicts
    from biasscope.judge.core import JudgingConfig
    from biasscope.judge.tasks import compare

    pairs = tuple((f"Q{i}?", "x" * (5 + i), "y") for i in range(4))
    task = Task(tuple(str(i) for i in range(4)), pairs=pairs)
    panel = Judge([Reads("long", _longer), CannedGenerator(["A"], label="first")],
                  JudgingConfig(position="consensus"))
    verdicts = compare(panel, pairs)
    found = batch_result(panel, task, verdicts)
    assert found["sentences"][0] == ("4 of 4 items got a verdict; judge first answered 0 of 4 "
                                     "(4 disagreements of the orders).")
    assert found["headline"]["answered_rate:long"]["estimate"] == 1.0
    write_verdicts(tmp_path / "verdicts.jsonl", task.ids, verdicts)
    back = list(stored_verdicts(tmp_path / "verdicts.jsonl").values())
    assert [panel.reason(v, "first") for v in back] == ["disagreement"] * 4
    assert [panel.reason(v, "long") for v in back] == [""] * 4


def test_a_judges_name_is_printed_as_spelt(tmp_path, capsys) -> None:
    """"Judge GPT-4" read "Judge gpt-4" at the start of the first-slot sentence."""
    _, printed = _audit(tmp_path, capsys, 4, "GPT-4=canned:A", "Mistral=canned:B")
    assert "Judge GPT-4 picked the option shown first in 100% of 8 answers" in printed
    assert "Judge Mistral picked the option shown first in 0% of 8 answers" in printed


def test_answers_outside_the_keys_are_said_not_only_tabled(tmp_path, capsys) -> None:
    """Seen on a llama.cpp-speaking server that answered empty text: judge-audit printed only
    "No length-controlled win rate: there are no verdicts." (its invalid rate, 100%, was in
    the report's table alone), so nothing said why. Each judge's share is now a sentence."""
    import json

    from biasscope.cli.main import main

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"id": f"p{i}", "prompt": "Q?", "a": "yes", "b": "no"})
                             + "\n" for i in range(4)))
    assert main(["judge-audit", "--model", "canned:zzz", "--input", str(pairs), "--out",
                 str(tmp_path / "run"), "--no-cache"]) == 0
    said = capsys.readouterr().out
    assert ("The judge answered outside the answer keys in 100% of 8 answers on 4 items (95% CI "
            "51% to 100%, items as clusters); the other measures leave those answers out."
            ) in said
    from biasscope.judge.biases import classifier_biases

    labels = {"POSITIVE": "The text is happy.", "NEGATIVE": "The text is sad."}
    first = Reads("first", lambda shown: shown[0][0])
    found = classifier_biases(Judge([first, CannedGenerator(["zzz"], label="mute")]),
                              ["One.", "Two."], labels)
    said = " ".join(found["sentences"])
    assert "Judge mute answered outside the answer keys in 100% of 4 answers on 2 items" in said
    assert "Judge first answered outside" not in said  # 0%: nothing to say
