"""What a user checks before trusting a judge: how much its verdicts depend on the order of
the options, on their names, on the length of the responses, and on who wrote them.

Every number is a rate with a Wilson interval, or a test with its effect size (Cohen's h
against the rate expected without the bias). The judge is asked with ``position="fixed"``
(the identity order, then the reversed order) so its own preferences are not averaged away.

Both orders of an item are one item asked twice, not two: a consistent judge answers them
alike, and a judge that takes the first slot for some items (and the second for others) does
so in both. So rates over the answers of both orders (the first slot, invalid answers, own
wins) have Wilson intervals of their effective size (`clustered_wilson`, items as clusters;
`judge.rates`) and are tested by sign flips over items (`sign_flip_p`: an item's excess over
the chance share is as likely positive as negative when the judge has no preference on
average, whatever its item-specific ones), and the length control counts pairs. Counting
every answer as a trial called a first-slot preference that is not there in 9% of 100-pair
audits, a self-preference in 10-12% (docs/validation.md).

Every measure of a bias is per judge model (position, invalid answers, name sensitivity,
length, self-preference): several judges' answers pooled (or their aggregated verdict) hide
opposite preferences. Only the panel's win rates are the aggregated verdict's, labelled so. The
audit's tests are one family (`holm_family`): every verdict it prints reads the Holm-adjusted p.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from biasscope.core.numbers import level_of, p_is, pvalue
from biasscope.core.stats import adjust_pvalues
from biasscope.judge.core import Judge, Verdict
from biasscope.judge.rankings import ranking_tables
from biasscope.judge.rates import answered, clustered_rate, rate
from biasscope.judge.tasks import CLASSIFY, COMPARE, classify, compare
from biasscope.judge.verbosity import LengthControlled, length_controlled

ALPHA = 0.05  # of every verdict the audit prints, after Holm over its tests


def _labels(judge: Judge) -> list[str]:
    return [m.label for m in judge.models]


def _each(names: Sequence[str | None]) -> list[tuple[str | None, str]]:
    """Each judge to measure alone and its headline keys' suffix: one judge is the verdicts
    themselves (no suffix, as one judge's audit has always read), several ``:NAME``."""
    return [(None, "")] if len(names) < 2 else [(n, f":{n}") for n in names]


def _label(verdict: Verdict, name: str | None) -> str | None:
    """Judge ``name``'s own label (None: the verdict's)."""
    return verdict.label if name is None else verdict.by_judge.get(name, verdict.label)


def _invalid(verdict: Verdict, name: str | None) -> bool:
    """Whether judge ``name`` (None: the verdict) answered outside the keys."""
    if name is None:
        return verdict.reason == "invalid"
    calls = [c for c in verdict.calls if c.model == name]
    return (bool(calls) and all(c.label is None for c in calls)
            and not all(c.error for c in calls))


def _answers(judge: Judge, forward: Sequence[Verdict], backward: Sequence[Verdict],
             head: dict[str, Any], confidence: float = 0.95) -> list[str]:
    """Each of several judges' answered share of both orders' questions into ``head``, and
    a sentence for each that answered fewer than the panel gave verdicts: its measures are
    silent where it has no answers, which no other sentence says."""
    items = [*range(len(forward)), *range(len(backward))]
    found, short = answered(_fixed(judge), [*forward, *backward], items, confidence)
    head.update(found)
    return [f"Judge {name} answered {k} of {total} questions ({len(forward)} items in both "
            f"orders; {why}): its measures cover only those it answered."
            for name, k, total, why in short]


def _fixed(judge: Judge) -> Judge:
    return Judge(judge.models, replace(judge.config, position="fixed"))


def _position(forward: Sequence[Verdict], backward: Sequence[Verdict], n_choices: int,
              fixed: Sequence[str] = (), judges: Sequence[str] | None = None,
              confidence: float = 0.95) -> dict[str, dict[str, Any]]:
    """Item i's verdicts are ``forward[i]`` and ``backward[i]``: rates over both are
    clustered by item. A position preference belongs to a judge model, so each of several
    ``judges`` (labels; None: those the calls name) is measured on its own answers, under
    ``position_consistency:JUDGE``, ``first_slot_rate:JUDGE`` and ``invalid_rate:JUDGE``:
    pooled, a judge that always took the first slot and one that always took the second read
    as 50%, p = 1, and an answer counted invalid only where every judge's was."""
    names: list[str | None] = list(
        dict.fromkeys(c.model for v in (*forward, *backward) for c in v.calls)
        if judges is None else judges)
    out: dict[str, dict[str, Any]] = {}
    for name, suffix in _each(names):
        out[f"position_consistency{suffix}"], out[f"first_slot_rate{suffix}"] = _one_judge(
            forward, backward, n_choices, fixed, name, confidence)
    items = [*range(len(forward)), *range(len(backward))]
    for name, suffix in _each(names):
        out[f"invalid_rate{suffix}"] = clustered_rate(
            [_invalid(v, name) for v in (*forward, *backward)], items, confidence=confidence)
    return out


def _one_judge(forward: Sequence[Verdict], backward: Sequence[Verdict], n_choices: int,
               fixed: Sequence[str], name: str | None, confidence: float = 0.95
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Position consistency and the first-slot rate of judge ``name`` (None: every call and
    the verdicts, one judge), their intervals at ``confidence``."""
    both = [(_label(f, name), _label(b, name)) for f, b in zip(forward, backward)
            if _label(f, name) and _label(b, name)]
    same = sum(f == b for f, b in both)
    items = [*range(len(forward)), *range(len(backward))]
    calls = [(i, c) for i, v in zip(items, (*forward, *backward)) for c in v.calls
             if c.label is not None and c.label not in fixed
             and (name is None or c.model == name)]
    slots = [(c.order.index(c.label), len(c.order)) for _, c in calls]
    # The backward order is the forward one reversed, so without a position preference a
    # label is picked as often shown first as shown last. With two options that is the
    # chance share; with more, the judge's preference among the labels sets how often the
    # first is picked (one it likes in the middle is never first), so first is set against last.
    chance = (1 / n_choices if n_choices == 2
              else [float(slot == shown - 1) for slot, shown in slots])
    first = clustered_rate([slot == 0 for slot, _ in slots], [i for i, _ in calls], chance,
                           confidence)
    if n_choices > 2 and first["n"]:
        first["tested_against"] = "last slot"
    return rate(same, len(both), confidence=confidence), first


def classifier_biases(judge: Judge, texts: Sequence[str], labels: Mapping[str, str],
                     instruction: str = CLASSIFY, ids: Sequence[str] = (),
                     confidence: float = 0.95) -> dict[str, Any]:
    """Position consistency, first-slot preference and name sensitivity of a classifier,
    each judge's own where there are several (``ids``: the texts' names, `Judge.run`), every
    interval at ``confidence``."""
    fixed = _fixed(judge)
    forward = classify(fixed, texts, labels, instruction, ids=ids)
    # The same labels again: warned of once, above (the command printed three notes).
    backward = classify(fixed, texts, dict(reversed(list(labels.items()))), instruction,
                        warn=False, ids=ids)
    found = classifier_measures(judge, forward, backward, len(labels), confidence)
    head, sentences = found["headline"], found["sentences"]
    names = tuple(labels)
    if all(n and " " not in n for n in names) and len(set(names)) == len(names):
        # Asked as the lettered verdicts were (reasoning, log-probs, seed), but with the names
        # as keys, which are no single tokens to bias toward.
        named = Judge(judge.models, replace(fixed.config, keys=names, logit_bias=False))
        by_name = classify(named, texts, labels, instruction, warn=False, ids=ids)
        for name, suffix in _each(_labels(judge)):
            sentences.append(_name_sensitivity(head, forward, by_name, name, suffix,
                                               confidence))
    else:
        sentences.append("Name sensitivity was not measured: label names with spaces cannot "
                         "be answered as one word.")
    return found


def _name_sensitivity(head: dict[str, Any], lettered: Sequence[Verdict],
                      named: Sequence[Verdict], name: str | None, suffix: str,
                      confidence: float = 0.95) -> str:
    """Judge ``name``'s share of verdicts that change when asked with the label names as
    keys, into ``head``, and its sentence (None: the verdicts, one judge)."""
    pairs = [(_label(a, name), _label(b, name)) for a, b in zip(lettered, named)
             if _label(a, name) and _label(b, name)]
    head[f"name_sensitivity{suffix}"] = ns = rate(sum(a != b for a, b in pairs), len(pairs),
                                                  confidence=confidence)
    of = "" if name is None else f" of judge {name}"
    if pairs:
        return (f"Showing the user's label names instead of neutral keys changed "
                f"{ns['estimate']:.0%} of verdicts{of} ({level_of(confidence)} CI "
                f"{ns['low']:.0%} to "
                f"{ns['high']:.0%}).")
    return (f"Name sensitivity{of} could not be measured: asked with the label names as "
            f"answer keys, none of {len(named)} answers named a label that could be set "
            "against the lettered verdict.")


def classifier_measures(judge: Judge, forward: Sequence[Verdict], backward: Sequence[Verdict],
                        n_labels: int, confidence: float = 0.95) -> dict[str, Any]:
    """What `classifier_biases` says of the verdicts in both orders (the labels in one
    order and its reverse), name sensitivity aside: each judge's position measures, their
    tests one family (`holm_family`), and the sentences, at ``confidence``."""
    head = _position(forward, backward, n_labels, judges=_labels(judge), confidence=confidence)
    missing = _answers(judge, forward, backward, head, confidence)
    tests = holm_family(head)
    return {"headline": head, "tables": {},
            "sentences": [*missing, *_sentences(head, tests, confidence)], "examples": []}


def pairwise_biases(judge: Judge, pairs: Sequence[tuple[str, str, str]],
                   authors: Sequence[tuple[str | None, str | None]] = (),
                   instruction: str = COMPARE, ranking: str = "win-rate",
                   ids: Sequence[str] = (), confidence: float = 0.95,
                   n_resamples: int = 2000) -> dict[str, Any]:
    """Position consistency, first-slot preference, length dependence and self-preference
    (``ids``: the pairs' names, `Judge.run`); every interval at ``confidence``, every
    bootstrap of ``n_resamples``."""
    fixed = _fixed(judge)
    forward = compare(fixed, pairs, instruction, ids=ids)
    swapped = [(q, b, a) for q, a, b in pairs]
    backward = [_swap(v) for v in compare(fixed, swapped, instruction, ids=ids)]
    found = pairwise_measures(judge, [(len(a), len(b)) for _, a, b in pairs], forward,
                              backward, authors, n_resamples, confidence)
    # Both orders: no position advantage. The leaderboards hold their own family (Holm
    # over each judge's pairs of systems), a question about the systems, not the judge.
    ranked, said = ranking_tables(_labels(judge), [*forward, *backward], [*authors, *authors],
                                  ranking, pairs=[*range(len(pairs)), *range(len(pairs))],
                                  confidence=confidence, n_resamples=n_resamples)
    found["tables"].update(ranked)
    found["sentences"] += said
    return found


def pairwise_measures(judge: Judge, lengths: Sequence[tuple[int, int]],
                      forward: Sequence[Verdict], backward: Sequence[Verdict],
                      authors: Sequence[tuple[str | None, str | None]] = (),
                      n_resamples: int = 2000, confidence: float = 0.95) -> dict[str, Any]:
    """What `pairwise_biases` says of the verdicts on each pair in both orders (``backward``
    in the forward order's terms; ``lengths``: each pair's answers'), its leaderboards
    aside: the position, length and self-preference measures (each judge's own where there
    are several, and the panel's win rates), their tests one family (`holm_family`), and the
    sentences. ``n_resamples``: the win rates' bootstrap's; every interval at
    ``confidence``."""
    head = _position(forward, backward, 2, fixed=("tie",), judges=_labels(judge),
                     confidence=confidence)
    missing = _answers(judge, forward, backward, head, confidence)
    # Both orders: a win rate (and its length control) from one order alone would measure
    # the first slot's advantage, not answer a's. Each pair's two verdicts are one unit.
    ids = [*range(len(lengths)), *range(len(lengths))]
    fits, panel = win_rates(judge, [*forward, *backward], [*lengths, *lengths], head,
                            n_resamples, pairs=ids, confidence=confidence)
    tables: dict[str, list[dict[str, Any]]] = {}
    if authors:
        rows = self_preference(judge, [*forward, *backward], [*authors, *authors], ids,
                               confidence)
        tables["self_preference"] = rows
        for row in rows:
            head[f"self_preference:{row['judge']}"] = row["own_win_rate"]
    tests = holm_family(head)
    for row in tables.get("self_preference", []):
        row["own_win_rate"] = head[f"self_preference:{row['judge']}"]
    said = win_rate_sentences(judge, head, fits, panel, tests)
    return {"headline": head, "tables": tables,
            "sentences": [*missing, *_sentences(head, tests, confidence), *said,
                          *_self_sentences(head, tests, confidence)],
            "examples": []}


#: Each judge's length fit: its name (None: one judge, the verdicts), its headline suffix.
Fits = list[tuple[str | None, str, LengthControlled]]


def win_rates(judge: Judge, verdicts: Sequence[Verdict], lengths: Sequence[tuple[int, int]],
              head: dict[str, Any], n_resamples: int = 2000,
              pairs: Sequence[Hashable] | None = None, confidence: float = 0.95
              ) -> tuple[Fits, LengthControlled | None]:
    """Each judge's raw and length-controlled win rate of answer a and its length test, into
    ``head`` (``win_rate_a:JUDGE``, ...; one judge: no suffix), and where there are several
    the panel's win rates (``panel_win_rate_a``, ...): the aggregated verdict of a judge
    that favours the longer answer and one that favours the shorter shows no length effect,
    so the panel's is no test of a judge's bias. The fits, and the panel's (None: one
    judge). ``lengths``: each verdict's answers'; ``pairs``: each verdict's pair; every
    interval at ``confidence``."""
    both = list(zip(verdicts, lengths))
    fits: Fits = []
    for name, suffix in _each(_labels(judge)):
        lc = length_controlled([(_label(v, name), a, b) for v, (a, b) in both], confidence,
                               n_resamples=n_resamples, pairs=pairs)
        head[f"length_coefficient{suffix}"] = {**lc.length_coefficient.as_dict(),
                                               "p_value": lc.length_p_value,
                                               "effect_size": lc.spearman}
        head[f"win_rate_a{suffix}"] = lc.win_rate.as_dict()
        head[f"length_controlled_win_rate_a{suffix}"] = lc.lc_win_rate.as_dict()
        fits.append((name, suffix, lc))
    if len(judge.models) < 2:
        return fits, None
    panel = length_controlled([(v.label, a, b) for v, (a, b) in both], confidence,
                              n_resamples=n_resamples, pairs=pairs)
    head["panel_win_rate_a"] = panel.win_rate.as_dict()
    head["panel_length_controlled_win_rate_a"] = panel.lc_win_rate.as_dict()
    return fits, panel


def win_rate_sentences(judge: Judge, head: Mapping[str, Any], fits: Fits,
                       panel: LengthControlled | None, tests: int,
                       family: str = "the audit's") -> list[str]:
    """`win_rates` in words: each judge's length verdict by its Holm-adjusted p over
    ``family``'s ``tests``, then the panel's win rates."""
    said = [lc.sentence(head[f"length_coefficient{suffix}"].get("p_holm"), tests, name,
                        family) for name, suffix, lc in fits]
    if panel is not None:
        said.append(panel.win_rates(f"The panel's verdicts ({judge.config.aggregate} of "
                                    f"{len(judge.models)} judges)"))
    return said


def holm_family(head: dict[str, Any]) -> int:
    """``p_holm`` beside the ``p_value`` of every test in ``head`` (the first slot, the
    length coefficient and self-preference, each per judge), Holm over them all, and how
    many they are. One audit asks all these questions at once: read each at its raw
    p < 0.05, audits of 3 judges without any of the biases said one had some in 20% of 100-pair
    runs (docs/validation.md has the rates now). Tests that could not run (NaN) are no part of
    the family."""
    tested = [k for k, v in head.items() if isinstance(v, Mapping)
              and isinstance(v.get("p_value"), (int, float)) and math.isfinite(v["p_value"])]
    for key, held in zip(tested, adjust_pvalues([head[k]["p_value"] for k in tested], "holm")):
        head[key] = {**head[key], "p_holm": float(held)}
    return len(tested)


def _swap(verdict: Verdict) -> Verdict:
    """A verdict on (b, a) in the original's terms."""
    flip = {"a": "b", "b": "a", "tie": "tie"}
    probs = {flip[k]: p for k, p in verdict.probs.items()} if verdict.probs else None
    calls = tuple(replace(c, order=tuple(flip[o] for o in c.order),
                          label=flip[c.label] if c.label else None) for c in verdict.calls)
    by_judge = {k: flip[v] if v else None for k, v in verdict.by_judge.items()}
    return replace(verdict, label=flip[verdict.label] if verdict.label else None, probs=probs,
                   calls=calls, by_judge=by_judge)


def self_preference(judge: Judge, verdicts: Sequence[Verdict],
                    authors: Sequence[tuple[str | None, str | None]],
                    pairs: Sequence[Hashable] | None = None, confidence: float = 0.95
                    ) -> list[dict[str, Any]]:
    """Per judge model that wrote one of the two responses: how often it picks its own (give
    verdicts in both orders, so that a position preference cancels, and ``pairs``, each
    verdict's pair: a pair's verdicts are then one unit of the interval and the sign-flip
    test; without it every verdict is its own pair and the test the exact binomial one)."""
    ids = list(range(len(verdicts))) if pairs is None else list(pairs)
    rows = []
    for model in judge.models:
        inner = getattr(model, "inner", model)  # behind the response cache
        # A server's model name; a local judge's `model` is its weights, no name (and read,
        # they would load a deferred judge whose every answer is cached).
        served = getattr(inner, "__dict__", {}).get("model")
        names = {model.label, inner.label, *([served] if isinstance(served, str) else [])}
        won: list[bool] = []
        of: list[Hashable] = []
        for verdict, (author_a, author_b), pair in zip(verdicts, authors, ids):
            mine = [side for side, who in (("a", author_a), ("b", author_b)) if who in names]
            label = verdict.by_judge.get(model.label, verdict.label)
            if len(mine) != 1 or label not in ("a", "b"):
                continue
            won.append(label == mine[0])
            of.append(pair)
        if won:
            found = (rate(sum(won), len(won), 0.5, confidence) if pairs is None
                     else clustered_rate(won, of, 0.5, confidence))
            rows.append({"judge": model.label, "pairs": len(set(of)), "verdicts": len(won),
                         "own_wins": sum(won), "own_win_rate": found})
    return rows


#: How a first-slot test over more than two options reads (see `_position`).
_AGAINST_LAST = (", first shown set against last shown, as the judge's preference among the "
                 "labels decides how often the first is picked")


def _held(test: Mapping[str, Any], tests: int) -> str:
    """The raw p-value, and Holm's over the audit's ``tests`` where there are several."""
    holm = (f" (Holm over the audit's {tests} tests: {pvalue(test['p_holm'])})"
            if tests > 1 and "p_holm" in test else "")
    return f"{p_is(test['p_value'])}{holm}"


def _shown(test: Mapping[str, Any]) -> bool:
    """Whether a test's verdict is a finding: Holm's p below `ALPHA` (its raw p where it
    was no part of a family)."""
    return bool(test.get("p_holm", test["p_value"]) < ALPHA)


def _sentences(head: Mapping[str, Any], tests: int = 1, confidence: float = 0.95
               ) -> list[str]:
    """The position measures in words, each judge's own where there are several;
    each verdict reads the Holm-adjusted p over the audit's ``tests``."""
    out, level = [], level_of(confidence)
    for key, value in head.items():
        measure, _, name = key.partition(":")
        if measure == "position_consistency" and value["n"]:
            pc, who = value, f"judge {name}" if name else "the judge"
            out.append(f"With the options in reverse order {who} gave the same verdict for "
                       f"{pc['estimate']:.0%} of items ({level} CI "
                       f"{pc['low']:.0%} to {pc['high']:.0%}, n = {pc['n']}).")
        elif measure == "first_slot_rate" and value["n"]:
            fs, who = value, f"judge {name}" if name else "the judge"
            last = "last" if "tested_against" in fs else "second"
            subject = who[0].upper() + who[1:]  # not .capitalize(): it lowercases the name
            verdict = (f"{subject} prefers the option shown "
                       f"{'first' if fs['effect_size'] > 0 else last}" if _shown(fs)
                       else f"No evidence that {who} prefers either slot")
            out.append(f"{subject} picked the option shown first in "
                       f"{fs['estimate']:.0%} of {fs['n']} answers on {fs['clusters']} items "
                       f"({level} CI {fs['low']:.0%} to {fs['high']:.0%}, items as clusters). "
                       f"{verdict}: sign-flip test over items against no position preference"
                       f"{_AGAINST_LAST if 'tested_against' in fs else ''} "
                       f"{_held(fs, tests)}, Cohen's h = {fs['effect_size']:+.2f}.")
        elif measure == "invalid_rate" and value["n"] and value["estimate"]:
            # Said, not only tabled: a judge whose every answer missed the keys (a server
            # answering empty text) otherwise printed "no verdicts" and nothing of why.
            who = f"Judge {name}" if name else "The judge"
            out.append(f"{who} answered outside the answer keys in {value['estimate']:.0%} "
                       f"of {value['n']} answers on {value['clusters']} items ({level} CI "
                       f"{value['low']:.0%} to {value['high']:.0%}, items as clusters); "
                       "the other measures leave those answers out.")
    return out


def _self_sentences(head: Mapping[str, Any], tests: int, confidence: float = 0.95
                    ) -> list[str]:
    """Each judge's self-preference in words, its verdict by the Holm-adjusted p."""
    out = []
    for key, sp in head.items():
        measure, _, name = key.partition(":")
        if measure != "self_preference" or not sp["n"] or "p_value" not in sp:
            continue
        verdict = (f"Judge {name} {'prefers' if sp['effect_size'] > 0 else 'avoids'} its own "
                   "responses" if _shown(sp)
                   else f"No evidence that judge {name} prefers or avoids its own responses")
        out.append(f"Judge {name} picked its own response in {sp['estimate']:.0%} of "
                   f"{sp['n']} verdicts on {sp.get('clusters', sp['n'])} pairs "
                   f"({level_of(confidence)} CI "
                   f"{sp['low']:.0%} to {sp['high']:.0%}, pairs as clusters). {verdict}: "
                   "sign-flip test over "
                   f"pairs against 50% {_held(sp, tests)}, Cohen's h = "
                   f"{sp['effect_size']:+.2f}.")
    return out
