"""Model bias as a ranking: each judge's leaderboard of the judged systems, and whether the
leaderboard's order depends on the judge (the judging source's example of model bias).

Input: pairwise verdicts (``a``, ``b``, ``tie`` or None) per judge model, and who wrote each
response (``model_a``, ``model_b``). Conventions, and why:

- **Score** of a system under a judge: its win rate over the comparisons it took part in, a
  tie counting half (no model of strength needed, and it reads as a share). With several
  judges each judge's own verdicts are used (``Verdict.by_judge``).
- **Or a Bradley-Terry score** (``score="bradley-terry"``): the log-strength θ of the model
  P(x beats y) = 1 / (1 + exp(θy − θx)), centred to mean 0 over the systems, fitted by
  Hunter's MM iteration; a tie is half a win to each side. Unlike the win rate it accounts
  for whom each system met, which matters when the pairings are unbalanced. Every two systems
  also get one virtual tie, a weak pull toward equal strength that keeps θ finite for a
  system that won (or lost) everything and joins systems that never met.
- **Intervals**: percentile bootstrap over items (2000 resamples; one resample of the items
  serves every judge and system, so differences and rank correlations keep their pairing). A
  win rate whose resamples all agree (a system that won, or lost, every game) gets the Wilson
  interval of its wins instead: resampling shows no spread there though there is some.
  Verdicts of one pair (judge-audit asks each in both orders) are resampled together, and
  that Wilson interval counts the pair's games as one cluster (`clustered_wilson`): a
  consistent judge answers both orders alike, so they are no two draws. The resamples are
  drawn in blocks, each brought down to its tallies per system (wins, games; for
  Bradley-Terry, the games of every two systems) before the next is drawn, and the scores
  are fitted to all resamples' tallies at once: the single draw's numbers, bit for bit (the
  Bradley-Terry iteration stops on all resamples together, as it did), never resamples x
  items at once.
- **A system against itself** (``model_a`` = ``model_b``) says nothing of its rank: such
  pairs are left out, counted and said in one sentence. So are pairs that name only one of
  their two systems (``model_a`` given, ``model_b`` missing, or the reverse): a game needs
  both sides.
- **No verdict, no score**: a system none of whose pairs got a verdict from a judge is left
  off that judge's leaderboard (named unranked; the ``unranked`` table lists them), and a
  judge without verdicts has none.
- **Agreement of leaderboards**: Kendall's τ-b between two judges' scores over the systems,
  with the bootstrap interval.
- **Which systems are shown apart**: each judge's leaderboard lists the systems by point
  estimate and names the pairs whose difference is significant after Holm over that judge's
  pairs of systems. A win-rate difference is tested against a bound on its variance: every
  verdict lies in [0, 1], so no outcome varies more than a coin flip, and a pair's verdicts
  together no more than if they always agreed. It holds its level from a 6-item pilot on,
  where the bootstrap's standard error said "shown" for equal systems in 23% of 6-item runs
  of two systems and 15% of 12-item runs of three (a t-test of the items' contributions:
  10%). A Bradley-Terry difference is tested with the bootstrap's standard error (scaled to
  the unbiased variance) against Student's t on the pairs that involve either system, less
  one.
- **The sentence** "the leaderboard's order depends on the judge" is written only when the
  data support it: for some two systems one judge puts x above y and another y above x, each
  score difference significant after Holm over every pair of systems and judge (the claim is
  a union over them: each pair's own interval found reversals among judges that share one
  order in 12% of runs with 8 systems and 3 judges). Otherwise the report says the orders
  differ only within their uncertainty, or that their point estimates agree. The pairs it
  finds reversed are the ``leaderboard_reversals`` table: each judge's difference, with its
  ``p_holm`` over that family.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.intervals import percentile_interval
from biasscope.core.numbers import num
from biasscope.core.stats import Array, adjust_pvalues
from biasscope.judge.ranking_stats import (
    SCORES,
    difference_test,
    draw_blocks,
    kendall_tau,
    score_interval,
)

_OUTCOME = {"a": 1.0, "b": 0.0, "tie": 0.5}


def rankings(verdicts: Mapping[str, Sequence[str | None]],
             authors: Sequence[tuple[str | None, str | None]], confidence: float = 0.95,
             n_resamples: int = 2000, seed: int = 0, score: str = "win-rate",
             pairs: Sequence[Hashable] | None = None) -> dict[str, Any]:
    """Per judge the systems' scores (win rates, or Bradley-Terry log-strengths) with CIs
    (``leaderboards``), Kendall's τ between judges (``tau``) and the sentences. Items without
    two named, different authors are left out. ``pairs``: each item's pair, where a pair was
    judged more than once (both orders): its items are then resampled together. Pairs of a
    system against itself (``same_system``) and pairs naming only one system (``one_named``)
    are counted and said, not ranked. ``notes``: the sentences that say what was left out
    (those pairs, systems or judges without a verdict), which a reader must not miss.
    ``reversals``: each judge's significant difference of every two systems that judges put
    in opposite orders (its ``p_holm`` over every pair of systems and judge), which the
    sentence names a few of where there are many."""
    if score not in SCORES:
        raise ValueError(f"unknown ranking score {score!r}; use one of {', '.join(SCORES)}")
    tally, finish = SCORES[score]
    keep = [i for i, (x, y) in enumerate(authors) if x and y and x != y]
    systems = sorted({str(s) for i in keep for s in authors[i]})
    code = {s: k for k, s in enumerate(systems)}
    a = np.array([code[str(authors[i][0])] for i in keep], dtype=np.intp)
    b = np.array([code[str(authors[i][1])] for i in keep], dtype=np.intp)
    unit = (np.arange(len(keep)) if pairs is None
            else pd.factorize(np.array([pairs[i] for i in keep], dtype=object))[0])
    outcomes = {judge: np.array([_OUTCOME.get(str(labels[i]), math.nan) for i in keep])
                for judge, labels in verdicts.items()}
    # Each block of resamples comes down to its tallies (per resample and system) before the
    # next is drawn; each judge's scores are fitted to all resamples' tallies at once. Index
    # len(keep) is no game (a's and b's 0, no outcome): it pads pairs of fewer items.
    a_any, b_any = np.append(a, 0), np.append(b, 0)
    won_any = {judge: np.append(won, math.nan) for judge, won in outcomes.items()}
    tallies: dict[str, list[tuple[Array, Array]]] = {judge: [] for judge in verdicts}
    for idx in draw_blocks(unit, n_resamples, np.random.default_rng(seed)):
        a_idx, b_idx = a_any[idx], b_any[idx]
        for judge, won in won_any.items():
            tallies[judge].append(tally(a_idx, b_idx, won[idx], len(systems)))
    boards: dict[str, Any] = {}
    estimates, boots, tests = {}, {}, {}
    for judge, won in outcomes.items():
        estimates[judge] = finish(*tally(a[None, :], b[None, :], won[None, :], len(systems)))[0]
        boots[judge] = finish(*(np.concatenate(t) for t in zip(*tallies.pop(judge),
                                                                strict=True)))
        # A system without a verdict on any of its pairs has no score: left off the board.
        boards[judge] = sorted(({"system": s, **score_interval(
            score, float(estimates[judge][k]), boots[judge][:, k], won, (a == k, b == k),
            unit, confidence)} for k, s in enumerate(systems)
            if math.isfinite(estimates[judge][k])), key=lambda r: -r["estimate"])
        ranked = [k for k in range(len(systems)) if math.isfinite(estimates[judge][k])]
        tests[judge] = {(x, y): difference_test(
            score, estimates[judge], boots[judge], x, y, (a, b, won, unit))
            for x, y in itertools.combinations(ranked, 2)}
    taus = []
    for j, k in itertools.combinations([j for j in verdicts if _ranked(estimates[j]) > 1], 2):
        taus.append({"judges": f"{j} / {k}", **percentile_interval(
            float(kendall_tau(estimates[j][None, :], estimates[k][None, :])[0]),
            kendall_tau(boots[j], boots[k]), confidence).as_dict()})
    differences = _differences(systems, estimates, tests)
    same, said = _itself(authors, pairs)
    one, unnamed = _one_named(authors, pairs)
    notes = [*said, *unnamed]
    reversals: list[dict[str, Any]] = []
    sentences = [*notes, *_sentences(systems, estimates, tests, differences, confidence, score,
                                     notes, reversals)]
    return {"systems": systems, "items": len(keep), "same_system": same, "one_named": one,
            "score": score, "leaderboards": boards, "differences": differences, "tau": taus,
            "reversals": reversals, "sentences": sentences, "notes": notes}


def _itself(authors: Sequence[tuple[str | None, str | None]],
            pairs: Sequence[Hashable] | None = None) -> tuple[int, list[str]]:
    """How many pairs (``pairs``: each item's, else every item its own) set a system against
    itself, and the sentence that says so (none where there are none): they were left out
    of the leaderboards without a word."""
    ids = range(len(authors)) if pairs is None else pairs
    same = len({i for i, (x, y) in zip(ids, authors) if x and x == y})
    if not same:
        return 0, []
    names = "pair names" if same == 1 else "pairs name"
    return same, [f"{same} {names} the same system as model_a and model_b: left out of the "
                  "leaderboards, which rank systems against others."]


def _one_named(authors: Sequence[tuple[str | None, str | None]],
               pairs: Sequence[Hashable] | None = None) -> tuple[int, list[str]]:
    """How many pairs (as for `_itself`) name one author and not the other, and the sentence
    that says so (none where there are none): they were left out without a word."""
    ids = range(len(authors)) if pairs is None else pairs
    one = len({i for i, (x, y) in zip(ids, authors) if bool(x) != bool(y)})
    if not one:
        return 0, []
    names = "pair names only one of its" if one == 1 else "pairs name only one of their"
    return one, [f"{one} {names} two systems (model_a or model_b missing): left out of the "
                 "leaderboards, which need both."]


def _ranked(estimates: Array) -> int:
    return int(np.isfinite(estimates).sum())


def _differences(systems: list[str], estimates: Mapping[str, Array],
                 tests: Mapping[str, Mapping[tuple[int, int], tuple[int, float]]]
                 ) -> list[dict[str, Any]]:
    """Every judge's pairs of ranked systems, the higher by point estimate first: the score
    difference (the effect), its p-value and Holm's over that judge's pairs."""
    rows = []
    for judge, found in tests.items():
        held = adjust_pvalues([p for _, p in found.values()], "holm")
        for ((x, y), (sign, p)), q in zip(found.items(), held):
            high, low = (x, y) if sign >= 0 else (y, x)
            rows.append({"judge": judge, "higher": systems[high], "lower": systems[low],
                         "difference": float(estimates[judge][high] - estimates[judge][low]),
                         "p_value": p, "p_holm": float(q)})
    return rows


def _sentences(systems: list[str], estimates: Mapping[str, Array],
               tests: Mapping[str, Mapping[tuple[int, int], tuple[int, float]]],
               differences: Sequence[Mapping[str, Any]], confidence: float, score: str,
               notes: list[str], reversals: list[dict[str, Any]]) -> list[str]:
    """Each judge's leaderboard in words, and whether the order depends on the judge; a
    judge's sentence that leaves systems (or its whole leaderboard) out also into ``notes``,
    the differences of the pairs it finds reversed into ``reversals``."""
    out = []
    alpha = 1 - confidence

    def shown(value: float) -> str:
        return f"{value:.0%}" if score == "win-rate" else f"θ {num(value, signed=True)}"

    for judge in estimates:
        ranked = [k for k in range(len(systems)) if math.isfinite(estimates[judge][k])]
        if not ranked:
            out.append(f"{judge} gave no verdict on a pair of named systems: no leaderboard "
                       "is possible without verdicts.")
            notes.append(out[-1])
            continue
        order = sorted(ranked, key=lambda k: -estimates[judge][k])
        unranked = [systems[k] for k in range(len(systems)) if k not in ranked]
        said = f"{judge}'s leaderboard by point estimate: " + _some(
            [f"{systems[k]} ({shown(estimates[judge][k])})" for k in order]) + (
            f" ({_some(unranked)}: no verdict on {'its' if len(unranked) == 1 else 'their'}"
            " pairs, so unranked)" if unranked else "") + "."
        if len(order) > 1:
            said += " " + _shown_apart(judge, [systems[k] for k in order], differences, alpha)
        if max(len(order), len(unranked)) > NAMED:  # shown apart: lists shorter than order
            said += _ALL
        out.append(said)
        if unranked:
            notes.append(said)
    # Only judges that order two systems or more can agree or disagree about an order.
    judges = [j for j in estimates if _ranked(estimates[j]) > 1]
    if len(judges) < 2 or len(systems) < 2:
        return out
    every = [(x, y, judge, *tests[judge][x, y]) for x, y in itertools.combinations(
        range(len(systems)), 2) for judge in judges if (x, y) in tests[judge]]
    differ = any(len({float(np.sign(d)) for j in judges
                      if math.isfinite(d := estimates[j][x] - estimates[j][y])}) > 1
                 for x, y in itertools.combinations(range(len(systems)), 2))
    held = adjust_pvalues([p for *_, p in every], "holm")
    sure: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for (x, y, judge, sign, p), q in zip(every, held):
        if q < alpha:
            high, low = (x, y) if sign > 0 else (y, x)
            sure.setdefault((x, y), []).append({
                "judge": judge, "higher": systems[high], "lower": systems[low],
                "difference": float(estimates[judge][high] - estimates[judge][low]),
                "p_value": p, "p_holm": float(q)})
    conflicts = []
    for (x, y), rows in sure.items():
        if len({r["higher"] for r in rows}) == 2:
            reversals += rows
            up = next(r["judge"] for r in rows if r["higher"] == systems[x])
            down = next(r["judge"] for r in rows if r["higher"] == systems[y])
            conflicts.append(f"{up} ranks {systems[x]} above {systems[y]}, {down} the reverse")
    pairs = len({(x, y) for x, y, *_ in every})
    family = f"Holm over {len(every)} tests: {pairs} pairs of systems x {len(judges)} judges"
    if conflicts:
        out.append("The leaderboard's order depends on the judge: "
                   + _some(conflicts, "; ", "pairs")
                   + f" (each {score.replace('-', ' ')} difference significant at "
                   f"{alpha:.0%}, {family})." + (_ALL if len(conflicts) > NAMED else ""))
    elif differ:
        out.append("The judges order some systems differently, but only within their "
                   f"uncertainty: no reversal is significant at {alpha:.0%} ({family}).")
    else:
        out.append("The judges' point estimates put the systems in the same order.")
    return out


#: Names (systems, reversed pairs) a sentence gives in full; of more it names `FIRST` and
#: counts the rest (the tables hold them all): 40 systems printed whole bury the sentence.
NAMED, FIRST = 5, 3
_ALL = " The report and summary.json list them all."


def _some(names: Sequence[str], sep: str = ", ", more: str = "") -> str:
    """``names`` joined by ``sep``, or the first `FIRST` and how many more where they exceed
    `NAMED`; ``more`` says more of what, after ``sep``, where a name is a list itself ("a
    above b, c and 2 more; and 4 more pairs", not "... c and 2 more and 4 more")."""
    if len(names) <= NAMED:
        return sep.join(names)
    first, rest = sep.join(names[:FIRST]), len(names) - FIRST
    return f"{first}{sep}and {rest} more {more}" if more else f"{first} and {rest} more"


def _shown_apart(judge: str, order: Sequence[str], differences: Sequence[Mapping[str, Any]],
                 alpha: float) -> str:
    """Which of a judge's systems are shown above which (``order``: by point estimate)."""
    rows = [r for r in differences if r["judge"] == judge]
    family = f"Holm over {len(rows)} pair{'s' if len(rows) != 1 else ''} of systems"
    above: dict[str, list[str]] = {}
    for row in rows:
        if row["p_holm"] < alpha:
            above.setdefault(row["higher"], []).append(row["lower"])
    if not above:
        return f"No two are shown apart at {alpha:.0%} ({family})."
    groups = [f"{s} above {_some(sorted(above[s], key=order.index))}"
              for s in order if s in above]
    return (f"Shown apart at {alpha:.0%} ({family}): "
            f"{_some(groups, '; ', 'systems above others')}.")


def ranking_tables(judges: Sequence[str], verdicts: Sequence[Any],
                   authors: Sequence[tuple[str | None, str | None]], score: str = "win-rate",
                   pairs: Sequence[Hashable] | None = None, notes: list[str] | None = None,
                   confidence: float = 0.95, n_resamples: int = 2000
                   ) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The judge reports' ranking tables and sentences from ``Verdict``s (each judge's own
    label where several judged); nothing where fewer than two systems wrote the responses.
    ``pairs``, ``confidence`` and ``n_resamples`` as for `rankings`; ``notes``, where given,
    gains `rankings`' notes."""
    named = {s for pair in authors for s in pair if s}
    if len(named) < 2 or not verdicts:
        said = [*_itself(authors, pairs)[1], *_one_named(authors, pairs)[1]]
        if notes is not None:
            notes += said
        return {}, said
    table = {j: [v.by_judge.get(j, v.label) if len(judges) > 1 else v.label for v in verdicts]
             for j in judges}
    found = rankings(table, authors, confidence, n_resamples, score=score, pairs=pairs)
    board = [{"judge": j, "rank": r + 1, "score": score, **row}
             for j, rows in found["leaderboards"].items() for r, row in enumerate(rows)]
    tables = {"leaderboard": board} if board else {}  # no verdict: no leaderboard
    # Those a judge's leaderboard sentence names unranked (it names a few of many).
    unranked = [{"judge": j, "system": s} for j, rows in found["leaderboards"].items() if rows
                for s in found["systems"] if s not in {r["system"] for r in rows}]
    if unranked:
        tables["unranked"] = unranked
    if found["differences"]:
        tables["leaderboard_differences"] = found["differences"]
    if found["reversals"]:  # those the "depends on the judge" sentence names a few of
        tables["leaderboard_reversals"] = found["reversals"]
    if found["tau"]:
        tables["kendall_tau"] = found["tau"]
    if notes is not None:
        notes += found["notes"]
    return tables, found["sentences"]


__all__ = ["SCORES", "ranking_tables", "rankings"]
