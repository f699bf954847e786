"""Each judge's leaderboard of the judged systems, Kendall's τ between judges, and the
"depends on the judge" sentence only when a reversal is beyond the bootstrap's doubt."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from biasscope.judge.core import Verdict
from biasscope.judge.rankings import ranking_tables, rankings

SYSTEMS = ("alpha", "beta", "gamma")


def _items(rounds: int) -> list[tuple[str, str]]:
    return [pair for _ in range(rounds) for pair in itertools.permutations(SYSTEMS, 2)]


def _judge(authors: list[tuple[str, str]], order: tuple[str, ...], p: float,
           seed: int) -> list[str | None]:
    """Picks the system earlier in ``order`` with probability ``p``."""
    rng = random.Random(seed)
    out: list[str | None] = []
    for x, y in authors:
        better = "a" if order.index(x) < order.index(y) else "b"
        out.append(better if rng.random() < p else {"a": "b", "b": "a"}[better])
    return out


def test_opposite_judges_make_the_leaderboard_depend_on_the_judge() -> None:
    authors = _items(20)
    found = rankings({"one": _judge(authors, SYSTEMS, 0.9, 1),
                      "two": _judge(authors, SYSTEMS[::-1], 0.9, 2),
                      "three": _judge(authors, SYSTEMS, 0.9, 3)}, authors)
    assert [r["system"] for r in found["leaderboards"]["one"]] == list(SYSTEMS)
    top = found["leaderboards"]["one"][0]
    assert top["low"] < top["estimate"] < top["high"]
    taus = {t["judges"]: t for t in found["tau"]}
    assert taus["one / two"]["estimate"] == pytest.approx(-1.0)
    assert taus["one / three"]["estimate"] == pytest.approx(1.0)
    assert any(s.startswith("The leaderboard's order depends on the judge") and
               "one ranks alpha above gamma, two the reverse" in s for s in found["sentences"])


def test_no_such_sentence_when_the_judges_agree_or_differ_within_noise() -> None:
    authors = _items(20)
    agree = rankings({"one": _judge(authors, SYSTEMS, 0.9, 1),
                      "two": _judge(authors, SYSTEMS, 0.9, 2)}, authors)
    assert agree["sentences"][-1] == ("The judges' point estimates put the systems in the "
                                      "same order.")
    authors = _items(2)  # six comparisons per system: coin flips cannot be told apart
    noise = rankings({"one": _judge(authors, SYSTEMS, 0.5, 4),
                      "two": _judge(authors, SYSTEMS, 0.5, 5)}, authors)
    assert not any("depends on the judge" in s for s in noise["sentences"])


def test_the_report_tables_use_each_judges_own_verdicts_and_ties_count_half() -> None:
    authors = [("alpha", "beta")] * 4
    verdicts = [Verdict("a", None, by_judge={"j1": "a", "j2": "b"}),
                Verdict("tie", None, by_judge={"j1": "tie", "j2": "b"}),
                Verdict(None, None, by_judge={"j1": "a", "j2": None}),
                Verdict("a", None, by_judge={"j1": "a", "j2": "b"})]
    tables, sentences = ranking_tables(["j1", "j2"], verdicts, authors)
    board = {(r["judge"], r["system"]): r["estimate"] for r in tables["leaderboard"]}
    assert board[("j1", "alpha")] == pytest.approx(3.5 / 4)
    assert board[("j2", "beta")] == 1.0
    assert "kendall_tau" in tables
    assert sentences[0].startswith("j1's leaderboard by point estimate: alpha")
    assert ranking_tables(["j1"], verdicts, [(None, None)] * 4) == ({}, [])


def test_bradley_terry_recovers_a_planted_ordering_with_unbalanced_pairings() -> None:
    """Planted strengths θ = (+1, 0, −1), pairings unbalanced (alpha mostly meets the weakest,
    gamma, so its win rate says as much about its opponents as about it): Bradley-Terry's
    intervals cover the planted strengths."""
    import math

    theta = {"alpha": 1.0, "beta": 0.0, "gamma": -1.0}
    rng = random.Random(7)
    authors = [("alpha", "gamma")] * 300 + [("beta", "gamma")] * 60 + [("alpha", "beta")] * 60
    authors += [(y, x) for x, y in authors[::2]]
    verdicts: list[str | None] = [
        "a" if rng.random() < 1 / (1 + math.exp(theta[y] - theta[x])) else "b"
        for x, y in authors]
    found = rankings({"j": verdicts}, authors, score="bradley-terry", n_resamples=400)
    board = {r["system"]: r for r in found["leaderboards"]["j"]}
    assert [r["system"] for r in found["leaderboards"]["j"]] == list(SYSTEMS)
    for system, truth in theta.items():
        assert board[system]["low"] < truth < board[system]["high"]
    assert sum(r["estimate"] for r in board.values()) == pytest.approx(0.0, abs=1e-9)
    assert found["score"] == "bradley-terry" and "alpha (θ +" in found["sentences"][0]
    # The exact fit: no virtual ties, two systems, 30 wins of 40 -> θa − θb = ln 3.
    from biasscope.judge.ranking_stats import bradley_terry
    a, b = (np.zeros(40, dtype=np.intp), np.ones(40, dtype=np.intp))
    won = np.array([[1.0] * 30 + [0.0] * 10])
    fit = bradley_terry(a[None, :], b[None, :], won, 2, prior=0.0)[0]
    assert fit[0] - fit[1] == pytest.approx(math.log(3))
    # A system that won everything still gets a finite strength (the virtual ties).
    sweep = bradley_terry(a[None, :], b[None, :], np.ones((1, 40)), 2)[0]
    assert np.isfinite(sweep).all() and sweep[0] > sweep[1]


def test_bradley_terry_reverses_with_opposite_judges_and_is_a_judge_setting() -> None:
    authors = _items(20)
    found = rankings({"one": _judge(authors, SYSTEMS, 0.9, 1),
                      "two": _judge(authors, SYSTEMS[::-1], 0.9, 2)}, authors,
                     score="bradley-terry", n_resamples=300)
    assert any("depends on the judge" in s and "bradley terry difference" in s
               for s in found["sentences"])
    with pytest.raises(ValueError, match="unknown ranking score"):
        rankings({"one": []}, [], score="elo")
    from biasscope.core.errors import BiasscopeError
    from biasscope.judge.job import JudgeConfig
    with pytest.raises(BiasscopeError, match="ranking"):
        JudgeConfig(out="x", models=["m"], input="i.jsonl", ranking="elo")


def test_no_verdicts_give_no_leaderboard_and_unjudged_systems_go_unranked() -> None:
    """A judge that never gave a valid answer has no leaderboard (it once printed
    "X's leaderboard: m1 (nan%) > m2 (nan%)"); a system none of whose pairs got a verdict is
    named unranked, not ranked last at NaN, and cannot make judges "order systems differently"."""
    authors = [("m1", "m2"), ("m2", "m1"), ("m1", "m3")]
    verdicts = [Verdict(None, None, "invalid", by_judge={"mute": None, "j": "a"}),
                Verdict(None, None, "invalid", by_judge={"mute": None, "j": "b"}),
                Verdict(None, None, "invalid", by_judge={"mute": None, "j": None})]
    tables, sentences = ranking_tables(["mute"], verdicts, authors)
    assert tables == {} and sentences == [
        "mute gave no verdict on a pair of named systems: no leaderboard is possible without "
        "verdicts."]
    tables, sentences = ranking_tables(["mute", "j"], verdicts, authors)
    assert {r["judge"] for r in tables["leaderboard"]} == {"j"}
    assert {r["system"] for r in tables["leaderboard"]} == {"m1", "m2"}
    assert "kendall_tau" not in tables
    assert sentences[1] == ("j's leaderboard by point estimate: m1 (100%), m2 (0%) (m3: no "
                            "verdict on its pairs, so unranked). No two are shown apart at 5% "
                            "(Holm over 1 pair of systems).")
    assert not any("nan" in s or "differently" in s for s in sentences)
    again = rankings({"one": ["a", "b", None], "two": ["a", "b", "a"]}, authors)
    assert not any("differently" in s for s in again["sentences"])
    assert again["sentences"][-1] == ("The judges' point estimates put the systems in the "
                                      "same order.")


def test_a_system_that_won_every_game_gets_a_wilson_interval_not_a_point() -> None:
    """Resampling three wins of three gives 100% to 100%: the Wilson interval of its wins."""
    authors = [("alpha", "beta"), ("beta", "alpha"), ("alpha", "beta")]
    found = rankings({"j": ["a", "b", "a"]}, authors, n_resamples=200)
    board = {r["system"]: r for r in found["leaderboards"]["j"]}
    assert board["alpha"]["estimate"] == 1.0 and board["alpha"]["high"] == 1.0
    assert board["alpha"]["low"] == pytest.approx(0.4385, abs=1e-3)  # Wilson, 3 of 3
    assert board["beta"]["low"] == 0.0 and board["beta"]["high"] == pytest.approx(0.5615,
                                                                                   abs=1e-3)
    tie = rankings({"j": ["tie", "tie"]}, authors[:2], n_resamples=200)["leaderboards"]["j"]
    assert all(r["low"] < 0.5 < r["high"] for r in tie)  # ties half: 1 of 2 games


def test_each_leaderboard_names_the_systems_shown_apart_and_the_differences() -> None:
    """Point estimates order the board; only differences significant after Holm over the
    judge's pairs are said, each with its effect (the difference) and p-values."""
    authors = _items(20)
    found = rankings({"one": _judge(authors, SYSTEMS, 0.9, 1)}, authors)
    assert found["sentences"][0].startswith("one's leaderboard by point estimate: alpha (")
    assert found["sentences"][0].endswith(
        "Shown apart at 5% (Holm over 3 pairs of systems): alpha above beta, gamma; beta above "
        "gamma.")
    rows = {(r["higher"], r["lower"]): r for r in found["differences"]}
    assert set(rows) == {("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")}
    for row in rows.values():
        assert row["difference"] > 0 and row["p_value"] <= row["p_holm"] < 0.05
    authors = _items(2)  # coin flips, six comparisons a system
    noise = rankings({"one": _judge(authors, SYSTEMS, 0.5, 4)}, authors)
    assert noise["sentences"][0].endswith(
        "No two are shown apart at 5% (Holm over 3 pairs of systems).")
    tables, _ = ranking_tables(["j"], [Verdict(v, None) for v in _judge(authors, SYSTEMS, 0.5,
                                                                        4)], authors)
    assert len(tables["leaderboard_differences"]) == 3


def test_a_win_rate_difference_is_tested_against_the_coin_flip_variance() -> None:
    """Six wins of six head to head: the normal approximation to the binomial test,
    z = (2 x 6/6 − 1) √6, where the bootstrap (no spread: every resample 6 of 6) said "shown"
    at p = 0. Asked in both orders, a pair's two verdicts count as one draw: z = √3."""
    from biasscope.core.normal import ndtr

    once = rankings({"j": ["a"] * 6}, [("x", "y")] * 6, n_resamples=100)
    (row,) = once["differences"]
    assert row["p_value"] == pytest.approx(2 * ndtr(-6**0.5))
    both = rankings({"j": ["a", "a", "a", "b", "b", "b"]}, [("x", "y")] * 3 + [("y", "x")] * 3,
                    n_resamples=100, pairs=[0, 1, 2, 0, 1, 2])
    (row,) = both["differences"]
    assert (row["higher"], row["difference"]) == ("x", 1.0)
    assert row["p_value"] == pytest.approx(2 * ndtr(-3**0.5))


def test_pairs_of_a_system_against_itself_are_counted_and_said(tmp_path, capsys) -> None:
    """model_a = model_b: the pair says nothing of a rank, so it is left out, and now said
    (it was dropped without a word); judge-audit's two orders of a pair count once."""
    authors = [("alpha", "beta"), ("alpha", "alpha"), ("beta", "alpha"), ("beta", "beta")]
    found = rankings({"j": ["a", "a", "b", "b"]}, authors, n_resamples=50)
    assert found["items"] == 2 and found["same_system"] == 2
    assert found["sentences"][0] == ("2 pairs name the same system as model_a and model_b: "
                                     "left out of the leaderboards, which rank systems against "
                                     "others.")
    both = rankings({"j": ["a"] * 8}, authors * 2, n_resamples=50, pairs=[*range(4)] * 2)
    assert both["same_system"] == 2
    clean = rankings({"j": ["a", "b"]}, [("alpha", "beta")] * 2, n_resamples=50)
    assert clean["same_system"] == 0 and "same system" not in " ".join(clean["sentences"])
    assert "2 pairs name the same system as model_a and model_b" in _audit_said(
        tmp_path, authors, capsys)


def test_pairs_that_name_one_author_are_counted_and_said(tmp_path, capsys) -> None:
    """model_a given and model_b missing (or the reverse): no game between two systems, so
    left out, and now said (it was dropped without a word); both orders count once."""
    authors = [("alpha", "beta"), ("alpha", None), (None, "beta"), ("beta", "alpha"),
               (None, None)]
    found = rankings({"j": ["a"] * 5}, authors, n_resamples=50)
    assert found["items"] == 2 and found["one_named"] == 2
    assert found["sentences"][0] == ("2 pairs name only one of their two systems (model_a or "
                                     "model_b missing): left out of the leaderboards, which "
                                     "need both.")
    both = rankings({"j": ["a"] * 10}, authors * 2, n_resamples=50, pairs=[*range(5)] * 2)
    assert both["one_named"] == 2
    one = rankings({"j": ["a"] * 3}, [("alpha", None), ("alpha", "beta"), ("beta", "alpha")],
                   n_resamples=50)
    assert one["one_named"] == 1 and one["sentences"][0].startswith(
        "1 pair names only one of its two systems")
    clean = rankings({"j": ["a", "b"]}, [("alpha", "beta"), (None, None)], n_resamples=50)
    assert clean["one_named"] == 0 and "only one" not in " ".join(clean["sentences"])
    # Fewer than two systems named in full: no leaderboard, and still said.
    _, said = ranking_tables(["j"], [Verdict("a", None, "", (), {})], [("alpha", None)])
    assert said == ["1 pair names only one of its two systems (model_a or model_b missing): "
                    "left out of the leaderboards, which need both."]
    assert "2 pairs name only one of their two systems" in _audit_said(tmp_path, authors,
                                                                         capsys)


def _audit_said(tmp_path, authors, capsys) -> str:
    """What `biasscope judge-audit` prints for one pair per (model_a, model_b) in ``authors``
    (None: the field left out as null), every verdict "a"."""
    import json

    from biasscope.cli.main import main

    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "prompt": "Q?", "a": "yes", "b": "no",
                                        "model_a": x, "model_b": y}) + "\n"
                            for i, (x, y) in enumerate(authors)))
    assert main(["judge-audit", "--model", "canned:A", "--input", str(path), "--out",
                 str(tmp_path / "audit"), "--no-cache"]) == 0
    return str(capsys.readouterr().out)


def test_a_sentence_of_many_systems_names_a_few_and_the_tables_hold_them_all() -> None:
    """Forty systems unranked made one printed line of forty names: a list of more than five
    names its first three and counts the rest; the tables keep every system."""
    ranked = [f"r{k}" for k in range(7)]
    unjudged = [f"u{k}" for k in range(6)]
    authors = [*itertools.combinations(ranked, 2), *((ranked[0], u) for u in unjudged)]
    labels = ["a"] * 21 + [None] * 6  # the earlier-named system wins: r0 first, r6 last
    notes: list[str] = []
    tables, sentences = ranking_tables(
        ["mute", "j"], [Verdict(x, None, by_judge={"mute": None, "j": x}) for x in labels],
        authors, notes=notes)
    said = next(s for s in sentences if s.startswith("j's"))
    assert said == ("j's leaderboard by point estimate: r0 (100%), r1 (83%), r2 (67%) and 4 "
                    "more (u0, u1, u2 and 3 more: no verdict on their pairs, so unranked). "
                    "Shown apart at 5% (Holm over 21 pairs of systems): r0 above r6. The report "
                    "and summary.json list them all.")
    assert said in notes
    assert [r["system"] for r in tables["leaderboard"]] == ranked
    assert tables["unranked"] == [{"judge": "j", "system": u} for u in unjudged]
    short, _ = ranking_tables(["j"], [Verdict("a", None), Verdict(None, None)],
                              [("m1", "m2"), ("m1", "m3")])
    assert short["unranked"] == [{"judge": "j", "system": "m3"}]


def test_shown_apart_and_reversals_name_a_few_of_many_and_the_tables_hold_them_all() -> None:
    """Ten systems, two judges of opposite orders: "Shown apart" named every system each is
    shown above, and "depends on the judge" all 28 reversed pairs, in one printed line each.
    Each names a few of many as the leaderboard does; leaderboard_differences holds every
    pair and the new leaderboard_reversals every reversed one."""
    systems = [f"s{k}" for k in range(10)]
    authors = [pair for _ in range(10) for pair in itertools.combinations(systems, 2)]
    verdicts = [Verdict("a", None, by_judge={"one": "a", "two": "b"}) for _ in authors]
    tables, sentences = ranking_tables(["one", "two"], verdicts, authors)
    one = next(s for s in sentences if s.startswith("one's"))
    assert one.endswith("Shown apart at 5% (Holm over 45 pairs of systems): s0 above s3, s4, "
                        "s5 and 4 more; s1 above s4, s5, s6 and 3 more; s2 above s5, s6, s7, "
                        "s8, s9; and 4 more systems above others. The report and summary.json "
                        "list them all.")
    assert sentences[-1] == (
        "The leaderboard's order depends on the judge: one ranks s0 above s3, two the reverse; "
        "one ranks s0 above s4, two the reverse; one ranks s0 above s5, two the reverse; and 25 "
        "more pairs (each win rate difference significant at 5%, Holm over 90 tests: 45 pairs "
        "of systems x 2 judges). The report and summary.json list them all.")
    differences = tables["leaderboard_differences"]
    assert len(differences) == 90
    assert sum(r["p_holm"] < 0.05 for r in differences if r["judge"] == "one") == 28
    reversed_ = tables["leaderboard_reversals"]
    assert len(reversed_) == 56 and all(r["p_holm"] < 0.05 for r in reversed_)
    assert [(r["judge"], r["higher"], r["lower"]) for r in reversed_[:4]] == [
        ("one", "s0", "s3"), ("two", "s3", "s0"), ("one", "s0", "s4"), ("two", "s4", "s0")]
    assert len({frozenset((r["higher"], r["lower"])) for r in reversed_}) == 28
