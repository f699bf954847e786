"""Calibration of `judge-audit`'s pairwise verdicts: the first-slot test, the length
coefficient's test, the raw and length-controlled win rates' intervals and the self-preference
test, each simulated where the judge asks every pair in both orders. A pair's two verdicts
are not two independent ones: a consistent judge answers both orders alike, and a judge with
item-specific order effects takes the same slot in both. Tiny pilots (5 to 10 pairs) and
realistic audits (100 pairs).

Each claim runs the library's own statistics on simulated verdicts (no model); see
`calibration_base`. tests/judge/test_calibration_judge.py runs them small.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import numpy as np

from biasscope.backends.canned import CannedGenerator
from biasscope.judge.agreement import agreement
from biasscope.judge.biases import (
    _position,
    classifier_measures,
    pairwise_measures,
    self_preference,
)
from biasscope.judge.core import Call, Judge, Verdict
from biasscope.judge.rankings import rankings
from biasscope.judge.verbosity import length_controlled
from calibration_base import Claim

ALPHA = 0.05
WIN_RATE = 0.6  # the true share of wins for a, at any length
ICC = 2 / 3  # between a pair's two verdicts: a Beta(mean, concentration 0.5) per pair
ORDER_SD = 2.0  # logit SD of an item's own pull toward the first slot
RESAMPLES = 400  # bootstrap resamples per interval (the audit's 2000 move a bound little)
JUDGE = "judge"
Sim = Callable[[int, int], tuple[int, int]]


def _labels(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.where(rng.random(p.size) < p, "a", "b")


def pair_verdicts(rng: np.random.Generator, pairs: int, mean: float = WIN_RATE,
                  icc: float = ICC) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A judge that ignores length and position: each pair has its own P(a wins) ~ Beta with
    ``mean`` and intra-pair correlation ``icc``, both orders drawn from it (so a pair whose
    P is near 0 or 1 gets the same verdict twice, as from a consistent judge). Returns the
    forward and the backward verdicts (in a's terms) and the lengths of a and b."""
    concentration = 1 / icc - 1
    p = rng.beta(mean * concentration, (1 - mean) * concentration, pairs)
    length_a, length_b = rng.integers(20, 800, pairs), rng.integers(20, 800, pairs)
    return _labels(p, rng), _labels(p, rng), length_a, length_b


def rows(forward: np.ndarray, backward: np.ndarray, length_a: np.ndarray,
         length_b: np.ndarray) -> list[tuple[str, int, int]]:
    """The verdicts of both orders as `length_controlled` takes them (as judge-audit does)."""
    return [(str(w), int(a), int(b)) for w, a, b in zip(
        [*forward, *backward], [*length_a, *length_a], [*length_b, *length_b])]


def both_orders(pairs: int) -> list[int]:
    """Each verdict's pair: the forward verdicts, then the backward ones."""
    return [*range(pairs), *range(pairs)]


def length_false_claims(n: int, seed: int, *, pairs: int) -> tuple[int, int]:
    """How often the audit says the judge favours the longer (or shorter) answer when it
    ignores length."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        lc = length_controlled(rows(*pair_verdicts(rng, pairs)), n_resamples=10,
                               pairs=both_orders(pairs))
        hits += bool(lc.length_p_value < ALPHA)
    return hits, n


def win_rate_coverage(n: int, seed: int, *, pairs: int, controlled: bool, orders: int = 2
                      ) -> tuple[int, int]:
    """How often the raw (or the length-controlled) win rate's 95% CI covers the true win
    rate, of the data sets where the audit gives one (a length-controlled one needs 5 pairs
    and two outcomes). ``orders`` 1: one verdict per pair, as `biasscope judge` asks."""
    rng = np.random.default_rng(seed)
    hits = given = 0
    for _ in range(n):
        forward, backward, length_a, length_b = pair_verdicts(rng, pairs)
        if orders == 1:
            found, ids = rows(forward, np.array([]), length_a, length_b), None
        else:
            found, ids = rows(forward, backward, length_a, length_b), both_orders(pairs)
        lc = length_controlled(found, n_resamples=RESAMPLES, seed=int(rng.integers(2**31)),
                               pairs=ids)
        iv = lc.lc_win_rate if controlled else lc.win_rate
        if np.isfinite(iv.low) and np.isfinite(iv.high):
            given += 1
            hits += bool(iv.low <= WIN_RATE <= iv.high)
    return hits, given


def _verdict(label: str, order: tuple[str, str]) -> Verdict:
    return Verdict(label, None, calls=(Call(JUDGE, order, None, label, None, label),))


def slot_verdicts(rng: np.random.Generator, pairs: int, sd: float = ORDER_SD
                  ) -> tuple[list[Verdict], list[Verdict]]:
    """A judge without a position preference on average that has one per item: it takes the
    first slot with P = expit(u), u ~ Normal(0, ``sd``) per item, in both orders (backward
    verdicts mapped back to a's terms, as judge-audit's are)."""
    q = 1 / (1 + np.exp(-rng.normal(0, sd, pairs)))
    first_forward, first_backward = rng.random(pairs) < q, rng.random(pairs) < q
    forward = [_verdict("a" if f else "b", ("a", "b")) for f in first_forward]
    backward = [_verdict("b" if f else "a", ("b", "a")) for f in first_backward]
    return forward, backward


def slot_false_claims(n: int, seed: int, *, pairs: int) -> tuple[int, int]:
    """How often the first-slot test says the judge prefers a slot when on average it
    prefers neither."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        found = _position(*slot_verdicts(rng, pairs), 2, fixed=("tie",))
        hits += bool(found["first_slot_rate"]["p_value"] < ALPHA)
    return hits, n


#: A classifier's three labels as shown in the forward order, and how often a judge without a
#: position preference picks each on average: the middle one most, so it is rarely first.
LABELS = ("x", "y", "z")
LABEL_SHARES = (0.2, 0.6, 0.2)


def label_verdicts(rng: np.random.Generator, items: int, concentration: float = 2.0
                   ) -> tuple[list[Verdict], list[Verdict]]:
    """A classifier judge without a position preference but with one among its labels: each
    item has its own label shares ~ Dirichlet(``concentration`` x `LABEL_SHARES`), both orders
    (the forward one and its reverse) drawn from them."""
    shares = rng.dirichlet(concentration * np.array(LABEL_SHARES), items)
    out = []
    for order in (LABELS, LABELS[::-1]):
        picks = [LABELS[int(rng.choice(3, p=s))] for s in shares]
        out.append([Verdict(p, None, calls=(Call(JUDGE, order, p, p, None, p),))
                    for p in picks])
    return out[0], out[1]


def label_slot_false_claims(n: int, seed: int, *, items: int) -> tuple[int, int]:
    """How often the first-slot test of a three-label classifier says the judge prefers a
    slot when it prefers a label in the middle but no position."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        found = _position(*label_verdicts(rng, items), len(LABELS))
        hits += bool(found["first_slot_rate"]["p_value"] < ALPHA)
    return hits, n


def own_verdicts(rng: np.random.Generator, pairs: int
                 ) -> tuple[list[Verdict], list[tuple[str, str]], list[int]]:
    """A judge that wrote one response of every pair (a or b at random) and does not prefer
    its own on average: each pair has its own P(own wins) ~ Beta(symmetric, ICC 2/3), both
    orders drawn from it. The verdicts of both orders, their authors and their pairs."""
    concentration = 1 / ICC - 1
    p = rng.beta(concentration / 2, concentration / 2, pairs)
    mine_a = rng.random(pairs) < 0.5
    authors = [(JUDGE, "other") if m else ("other", JUDGE) for m in mine_a]
    verdicts = []
    for _ in range(2):
        own = rng.random(pairs) < p
        verdicts += [Verdict("a" if o == m else "b", None) for o, m in zip(own, mine_a)]
    return verdicts, [*authors, *authors], both_orders(pairs)


def self_preference_false_claims(n: int, seed: int, *, pairs: int) -> tuple[int, int]:
    """How often the audit says the judge prefers (or avoids) its own responses when on
    average it does neither."""
    rng = np.random.default_rng(seed)
    judge = Judge(CannedGenerator(["A"], label=JUDGE))
    hits = 0
    for _ in range(n):
        verdicts, authors, ids = own_verdicts(rng, pairs)
        (row,) = self_preference(judge, verdicts, authors, pairs=ids)
        hits += bool(row["own_win_rate"]["p_value"] < ALPHA)
    return hits, n


def leaderboard_verdicts(rng: np.random.Generator, systems: int, items: int, judges: int
                        ) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """Judges that share every system's strength (Bradley-Terry, all equal: the hardest case
    for an order) and judge each item independently: pairs of systems drawn at random, one
    verdict per judge and item. Their verdicts and the items' authors."""
    names = [f"s{k}" for k in range(systems)]
    x = rng.integers(0, systems, items)
    y = (x + rng.integers(1, systems, items)) % systems
    table = {f"j{k}": np.where(rng.random(items) < 0.5, "a", "b").tolist()
             for k in range(judges)}
    return table, [(names[a], names[b]) for a, b in zip(x, y)]


def leaderboard_false_claims(n: int, seed: int, *, systems: int, items: int, judges: int
                             ) -> tuple[int, int]:
    """How often the report says the leaderboard's order depends on the judge when every
    judge holds the same order (here, none)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        found = rankings(*leaderboard_verdicts(rng, systems, items, judges),
                         n_resamples=RESAMPLES, seed=int(rng.integers(2**31)))
        hits += any("depends on the judge" in s for s in found["sentences"])
    return hits, n


def paired_leaderboard_verdicts(rng: np.random.Generator, systems: int, pairs: int
                                ) -> tuple[dict[str, list[str]], list[tuple[str, str]], list[int]]:
    """One judge asked every pair in both orders, as judge-audit asks, about systems of equal
    strength: each pair has its own P(a wins) ~ Beta(symmetric, ICC 2/3), both orders drawn
    from it (the backward verdicts in a's terms). The verdicts, the authors and the pairs."""
    table, authors = leaderboard_verdicts(rng, systems, pairs, 1)
    concentration = 1 / ICC - 1
    p = rng.beta(concentration / 2, concentration / 2, pairs)
    table = {"j0": [*_labels(p, rng), *_labels(p, rng)]}
    return table, [*authors, *authors], both_orders(pairs)


def shown_apart_false_claims(n: int, seed: int, *, systems: int, items: int, score: str,
                             orders: int = 1) -> tuple[int, int]:
    """How often a judge's leaderboard shows some system above another when all are equally
    strong (``items``: pairs, with ``orders`` 2 each asked in both orders)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        if orders == 2:
            table, authors, ids = paired_leaderboard_verdicts(rng, systems, items)
        else:
            (table, authors), ids = leaderboard_verdicts(rng, systems, items, 1), None
        found = rankings(table, authors, n_resamples=RESAMPLES, seed=int(rng.integers(2**31)),
                         score=score, pairs=ids)
        hits += any("Shown apart" in s for s in found["sentences"])
    return hits, n


def agreeing_verdicts(rng: np.random.Generator, items: int, judges: int, labels: int,
                      alpha: float, missing: float) -> dict[str, list[str | None]]:
    """Judges who each give an item's true label (drawn uniformly) with probability √α and a
    uniformly drawn label otherwise, so that Krippendorff's α is ``alpha`` in the population
    (two such judges disagree with probability (1 − α)(1 − 1/labels), the disagreement
    expected by chance); each verdict missing with probability ``missing``."""
    truth = rng.integers(0, labels, items)
    table: dict[str, list[str | None]] = {}
    for k in range(judges):
        said = np.where(rng.random(items) < alpha ** 0.5, truth,
                        rng.integers(0, labels, items))
        gone = rng.random(items) < missing
        table[f"j{k}"] = [None if g else str(v) for v, g in zip(said, gone)]
    return table


def reading_false_claims(n: int, seed: int, *, items: int, judges: int, labels: int,
                         alpha: float, missing: float, said: tuple[str, ...]
                         ) -> tuple[int, int]:
    """How often the agreement sentence reads α as one of ``said`` where the true α is the
    threshold (0.8 for "reliable"; 0.667 for "at least enough for tentative conclusions", and
    for "too low to rely on")."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        found = agreement(agreeing_verdicts(rng, items, judges, labels, alpha, missing),
                          n_resamples=20)
        hits += found.reading().startswith(said)
    return hits, n


#: What a printed verdict of judge-audit says of a bias it shows (after Holm over its tests);
#: "No evidence that judge j prefers or avoids its own responses" is none.
BIAS_SHOWN = re.compile(r"prefers the option shown|favours the (longer|shorter) answer|"
                        r"prefers its own|(?<!or )avoids its own")


def _said(sentences: list[str]) -> bool:
    return any(BIAS_SHOWN.search(s) for s in sentences)


def _answer(judge: str, label: str, order: tuple[str, ...]) -> Verdict:
    """One judge's verdict as `Judge` makes it (a one-hot distribution, no log-probs)."""
    return Verdict(label, {label: 1.0}, calls=(Call(judge, order, None, label, None, label),))


def unbiased_judges(rng: np.random.Generator, judges: Judge, pairs: int
                    ) -> tuple[list[tuple[int, int]], list[Verdict], list[Verdict],
                               list[tuple[str, str]]]:
    """Judges without a position, length or self-preference on average, asked about every
    pair in both orders: a pair has its own P(a wins) ~ Beta mean `WIN_RATE`, ICC `ICC`
    (shared by the judges: they read the same answers), each judge its own pull toward the
    first slot per pair (logit ~ Normal(0, `ORDER_SD`)); lengths are drawn apart from all
    of it, and one answer of each pair was written by one of the judges (at random), the
    other by someone else. The lengths, the verdicts of both orders (backward in a's terms,
    aggregated as `Judge` aggregates them) and the authors."""
    concentration = 1 / ICC - 1
    p = np.clip(rng.beta(WIN_RATE * concentration, (1 - WIN_RATE) * concentration, pairs),
                1e-6, 1 - 1e-6)
    content = np.log(p / (1 - p))
    lengths = list(zip(rng.integers(20, 800, pairs).tolist(),
                       rng.integers(20, 800, pairs).tolist()))
    names = [m.label for m in judges.models]
    forward: list[list[Verdict]] = [[] for _ in range(pairs)]
    backward: list[list[Verdict]] = [[] for _ in range(pairs)]
    for name in names:
        pull = rng.normal(0, ORDER_SD, pairs)
        a_first = rng.random(pairs) < 1 / (1 + np.exp(-(content + pull)))
        a_second = rng.random(pairs) < 1 / (1 + np.exp(-(content - pull)))
        for i in range(pairs):
            forward[i].append(_answer(name, "a" if a_first[i] else "b", ("a", "b")))
            backward[i].append(_answer(name, "a" if a_second[i] else "b", ("b", "a")))
    writer = rng.integers(0, len(names), pairs)
    own_a = rng.random(pairs) < 0.5
    authors = [(names[w], "other") if a else ("other", names[w]) for w, a in zip(writer, own_a)]
    return (lengths, [judges._aggregate(v) for v in forward],
            [judges._aggregate(v) for v in backward], authors)


def audit_false_claims(n: int, seed: int, *, judges: int, pairs: int) -> tuple[int, int]:
    """How often a pairwise judge-audit of ``judges`` judges without any bias prints that
    some judge has one (a slot, a length or its own responses preferred)."""
    rng = np.random.default_rng(seed)
    judge = Judge([CannedGenerator(["A"], label=f"j{k}") for k in range(judges)])
    hits = 0
    for _ in range(n):
        lengths, forward, backward, authors = unbiased_judges(rng, judge, pairs)
        found = pairwise_measures(judge, lengths, forward, backward, authors, n_resamples=10)
        hits += _said(found["sentences"])
    return hits, n


def classifier_audit_false_claims(n: int, seed: int, *, judges: int, items: int
                                  ) -> tuple[int, int]:
    """How often a three-label classifier judge-audit of ``judges`` judges, each without a
    position preference but preferring the middle label (`label_verdicts`), prints that
    some judge prefers a slot."""
    rng = np.random.default_rng(seed)
    judge = Judge([CannedGenerator(["A"], label=f"j{k}") for k in range(judges)])
    hits = 0
    for _ in range(n):
        forward: list[list[Verdict]] = [[] for _ in range(items)]
        backward: list[list[Verdict]] = [[] for _ in range(items)]
        for model in judge.models:
            ahead, behind = label_verdicts(rng, items)
            for i in range(items):
                forward[i].append(replace(ahead[i], calls=tuple(
                    replace(c, model=model.label) for c in ahead[i].calls)))
                backward[i].append(replace(behind[i], calls=tuple(
                    replace(c, model=model.label) for c in behind[i].calls)))
        found = classifier_measures(judge, [judge._aggregate(v) for v in forward],
                                    [judge._aggregate(v) for v in backward], len(LABELS))
        hits += _said(found["sentences"])
    return hits, n


CONSISTENT = (f"length ignored, P(a wins) per pair ~ Beta mean {WIN_RATE:g}, ICC {ICC:.2f} "
              "between its two orders")


def _claims() -> list[Claim]:
    out = []
    for pairs in (8, 100):
        out.append(Claim(
            "the judge prefers a slot (judge-audit first-slot test, p < 0.05)",
            f"no preference on average; per item P(first) = expit(Normal(0, {ORDER_SD:g})), "
            "one answer per order", f"{pairs} pairs x 2 orders", "false-claim", ALPHA,
            partial(slot_false_claims, pairs=pairs)))
    for items in (8, 100):
        out.append(Claim(
            "the judge prefers a slot (judge-audit first-slot test, p < 0.05)",
            "3 labels, no position preference, the middle one preferred (per item label "
            f"shares ~ Dirichlet, mean {'/'.join(f'{s:g}' for s in LABEL_SHARES)})",
            f"{items} items x 2 orders", "false-claim", ALPHA,
            partial(label_slot_false_claims, items=items)))
    for pairs in (10, 100):
        out.append(Claim(
            "the judge favours the longer/shorter answer (judge-audit length coefficient, "
            "p < 0.05)", CONSISTENT, f"{pairs} pairs x 2 orders", "false-claim", ALPHA,
            partial(length_false_claims, pairs=pairs)))
    for controlled, what in ((False, "raw"), (True, "length-controlled")):
        for pairs in (5, 20, 100):
            out.append(Claim(
                f"judge-audit {what} win rate 95% CI covers", CONSISTENT,
                f"{pairs} pairs x 2 orders (where an interval is given)", "coverage", 0.95,
                partial(win_rate_coverage, pairs=pairs, controlled=controlled)))
    for pairs in (5, 10):
        out.append(Claim(
            "judge length-controlled win rate 95% CI covers",
            f"length ignored, P(a wins) per pair ~ Beta mean {WIN_RATE:g}, one verdict each",
            f"{pairs} pairs (where an interval is given)", "coverage", 0.95,
            partial(win_rate_coverage, pairs=pairs, controlled=True, orders=1)))
    for pairs in (10, 100):
        out.append(Claim(
            "the judge prefers/avoids its own responses (judge-audit self-preference, "
            "p < 0.05)", "no preference on average; per pair P(own wins) ~ Beta(symmetric), "
            f"ICC {ICC:.2f} between its two orders", f"{pairs} pairs x 2 orders",
            "false-claim", ALPHA, partial(self_preference_false_claims, pairs=pairs)))
    for judges, pairs in ((1, 10), (1, 100), (2, 10), (2, 30), (3, 30), (3, 100)):
        out.append(Claim(
            "some judge has a bias: a slot, a length or its own responses preferred "
            "(judge-audit, any verdict, Holm over the audit's tests)",
            f"judges without any on average: per pair P(a wins) ~ Beta mean {WIN_RATE:g}, "
            f"ICC {ICC:.2f}; each judge's pull to the first slot per pair ~ "
            f"Normal(0, {ORDER_SD:g}) on the logit; lengths apart; one answer per pair by one "
            "of the judges", f"{judges} judge{'s' if judges > 1 else ''}, {pairs} pairs x 2 "
            "orders", "false-claim", ALPHA,
            partial(audit_false_claims, judges=judges, pairs=pairs)))
    for judges, items in ((2, 10), (3, 100)):
        out.append(Claim(
            "some judge prefers a slot (classifier judge-audit, any verdict, Holm over the "
            "audit's tests)", "3 labels, no position preference, each judge prefers the "
            f"middle one (per item label shares ~ Dirichlet, mean "
            f"{'/'.join(f'{s:g}' for s in LABEL_SHARES)})",
            f"{judges} judges, {items} items x 2 orders", "false-claim", ALPHA,
            partial(classifier_audit_false_claims, judges=judges, items=items)))
    for systems, items, judges in ((4, 60, 2), (8, 300, 3), (12, 300, 4)):
        out.append(Claim(
            "the leaderboard's order depends on the judge (judge rankings)",
            "judges share every system's strength (all equal), each verdict a coin flip",
            f"{systems} systems, {items} items, {judges} judges", "false-claim", ALPHA,
            partial(leaderboard_false_claims, systems=systems, items=items, judges=judges)))
    for score, systems, items, orders in (
            ("win-rate", 2, 6, 1), ("win-rate", 3, 12, 1), ("win-rate", 3, 12, 2),
            ("win-rate", 4, 60, 1), ("win-rate", 8, 300, 1), ("win-rate", 8, 100, 2),
            ("bradley-terry", 3, 12, 1), ("bradley-terry", 4, 60, 1),
            ("bradley-terry", 8, 300, 1)):
        null = "every system equally strong, each verdict a coin flip"
        if orders == 2:
            null = ("every system equally strong; per pair P(a wins) ~ Beta(symmetric), ICC "
                    f"{ICC:.2f} between its two orders")
        out.append(Claim(
            f"a judge's leaderboard shows one system above another ({score}, Holm)", null,
            f"{systems} systems, {items} {'pairs x 2 orders' if orders == 2 else 'items'}",
            "false-claim", ALPHA, partial(shown_apart_false_claims, systems=systems,
                                          items=items, score=score, orders=orders)))
    for said, alpha in ((("reliable",), 0.8),
                        (("enough for tentative conclusions", "reliable"), 0.667),
                        (("too low to rely on",), 0.667)):
        for items, judges, labels, missing in ((10, 2, 2, 0.0), (50, 3, 3, 0.0),
                                               (200, 2, 2, 0.0), (200, 3, 2, 0.2)):
            out.append(Claim(
                f"the judges' agreement is {' or '.join(said)} (Krippendorff's α, judge)",
                f"true α = {alpha:g}: each judge right with probability √α, else a random "
                f"label{f'; {missing:.0%} of verdicts missing' if missing else ''}",
                f"{items} items, {judges} judges, {labels} labels", "false-claim", ALPHA,
                partial(reading_false_claims, items=items, judges=judges, labels=labels,
                        alpha=alpha, missing=missing, said=said)))
    return out


CLAIMS: list[Claim] = _claims()

__all__ = ["CLAIMS"]
