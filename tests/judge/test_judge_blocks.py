"""The judge's bootstraps (agreement intervals, each judge's leaderboard) draw their resamples
in blocks (`biasscope.core.bootstrap.index_blocks`) and reduce each before drawing the next:
they held resamples x items at once, several times over (the indices, then each item's
systems and outcomes gathered with them). The numbers are those of the single draw."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from biasscope.judge import agreement as agreement_module
from biasscope.judge import ranking_stats
from biasscope.judge.agreement import agreement
from biasscope.judge.rankings import rankings
from traced import traced_peak

SYSTEMS = ("alpha", "beta", "gamma", "delta")


def _verdicts(n: int) -> dict[str, list[str | None]]:
    """Three judges of falling accuracy on ``n`` items, three labels, a tenth missing."""
    rng = np.random.default_rng(n)
    truth = rng.choice(["A", "B", "C"], n)

    def judge(p: float) -> list[str | None]:
        out = np.where(rng.random(n) < p, truth, rng.choice(["A", "B", "C"], n))
        return [None if m else str(v) for v, m in zip(out, rng.random(n) < 0.1, strict=True)]

    return {"gpt": judge(0.8), "claude": judge(0.6), "llama": judge(0.3)}


def _games(rounds: int) -> tuple[dict[str, list[str | None]], list[tuple[str, str]], list[str]]:
    """Two judges' verdicts on every ordered pair of four systems, ``rounds`` times; each
    round's two orders of a pair are one pair."""
    authors = [p for _ in range(rounds) for p in itertools.permutations(SYSTEMS, 2)]
    rnd = random.Random(rounds)
    labels: list[str | None] = ["a", "a", "b", "tie", None]
    verdicts = {j: [rnd.choice(labels) for _ in authors] for j in ("one", "two")}
    return verdicts, authors, [min(x, y) + max(x, y) + str(i // 12)
                               for i, (x, y) in enumerate(authors)]


def test_agreement_intervals_are_those_of_the_single_draw() -> None:
    """Computed by the code that drew every resample before reducing any (seed 3)."""
    found = agreement(_verdicts(60), n_resamples=500, seed=3)
    assert {k: (v.low, v.high) for k, v in found.cohen.items()} == {
        ("gpt", "claude"): pytest.approx((0.2786694696922856, 0.6501424912971523), rel=1e-12),
        ("gpt", "llama"): pytest.approx((0.1481109228843201, 0.5363823286540046), rel=1e-12),
        ("claude", "llama"): pytest.approx((-0.07652463443099379, 0.33713296549862704),
                                           rel=1e-12)}
    assert (found.fleiss.low, found.fleiss.high) == pytest.approx(
        (0.17592744112029815, 0.4860220135651814), rel=1e-12)
    assert (found.alpha.low, found.alpha.high) == pytest.approx(
        (0.16984410414062748, 0.4452417586254588), rel=1e-12)


@pytest.mark.parametrize(("score", "expected"), [
    ("win-rate", {"one": [("alpha", 0.43011363636363636, 0.7941176470588235),
                          ("gamma", 0.3650757575757576, 0.775),
                          ("delta", 0.2777777777777778, 0.7587499999999997),
                          ("beta", 0.1090277777777778, 0.45747282608695644)],
                  "two": [("alpha", 0.4090909090909091, 0.7211666666666666),
                          ("delta", 0.369034090909091, 0.65625),
                          ("gamma", 0.30952380952380953, 0.6176470588235294),
                          ("beta", 0.25625000000000014, 0.6388888888888888)]}),
    ("bradley-terry", {"one": [("alpha", -0.1475316449672909, 0.88776770774822),
                               ("gamma", -0.3494261749915502, 0.8041932877545652),
                               ("delta", -0.5877365454469676, 0.7952985685723761),
                               ("beta", -1.2793477404656606, -0.12695261717842174)],
                       "two": [("alpha", -0.22902215055298192, 0.6173614797401483),
                               ("delta", -0.3782122612305168, 0.46949258481155287),
                               ("gamma", -0.5177695992966864, 0.30891641225447897),
                               ("beta", -0.6897932291747823, 0.3935807211198728)]})])
def test_leaderboard_intervals_are_those_of_the_single_draw(
        score: str, expected: dict[str, list[tuple[str, float, float]]]) -> None:
    """Computed by the code that drew every resample before reducing any (seed 3, the
    items resampled by pair); Bradley-Terry fits all resamples' tallies in one call, so its
    iteration stops where it did."""
    verdicts, authors, pairs = _games(4)
    found = rankings(verdicts, authors, n_resamples=500, seed=3, score=score, pairs=pairs)
    for judge, rows in expected.items():
        board = found["leaderboards"][judge]
        assert [r["system"] for r in board] == [system for system, _, _ in rows]
        assert [(r["low"], r["high"]) for r in board] == [
            pytest.approx((low, high), rel=1e-12) for _, low, high in rows]


N, RESAMPLES = 960, 2000  # one draw of them: 15 MB of indices


def _runs() -> dict[str, Callable[[], Any]]:
    verdicts, authors, pairs = _games(N // 12)
    agreed = _verdicts(N)
    return {
        "agreement": lambda: agreement(agreed, n_resamples=RESAMPLES),
        "win-rate": lambda: rankings(verdicts, authors, n_resamples=RESAMPLES),
        "win-rate by pair": lambda: rankings(verdicts, authors, n_resamples=RESAMPLES,
                                             pairs=pairs),
        "bradley-terry": lambda: rankings(verdicts, authors, n_resamples=RESAMPLES,
                                          score="bradley-terry"),
    }


@pytest.mark.parametrize("site", list(_runs()))
def test_a_judge_bootstrap_in_many_blocks_holds_one_and_gives_the_numbers_of_one(
        site: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bradley-Terry keeps resamples x systems² of tallies, never resamples x items."""
    run = _runs()[site]
    whole = run()  # 2000 resamples of 960 items: one block (agreement), two (leaderboards)
    monkeypatch.setattr(agreement_module, "_BATCH_CELLS", 1 << 12)  # 4 resamples a block
    monkeypatch.setattr(ranking_stats, "BLOCK_CELLS", 1 << 12)
    blocked, peak = traced_peak(run)
    assert peak < RESAMPLES * N * 8 / 4, f"{site}: {peak / 2**20:.1f} MiB at its peak"
    assert repr(blocked) == repr(run()) == repr(whole)
