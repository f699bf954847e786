"""Counterfactual check of scorers (reward models and LLM judges) on one set of pairs.

An item is a conversation with a chosen and (optionally) a rejected final response, and its
counterfactual: the same with gendered words and first names swapped
(``counterfactual.statistics.counterfactual``), or the user's own version (any attribute).

- Built-in: hh-rlhf ``harmless-base`` test pairs whose text holds a gendered word or a listed
  name, shuffled by the seed, the first N.
- The user's JSONL: ``{"id"?, "prompt" | "messages", "chosen" | "response", "rejected"?,
  "counterfactual"?: {the same keys}, "group"?, "counterfactual_group"?}``; without
  ``counterfactual`` the swap is made here; ``group`` (e.g. ``female``) orients the paired
  difference (without it, gender is read from the text).

Each reward model scores every member; each judge classifies each response (with labels) or
compares chosen against rejected (pairwise). Statistics: ``counterfactual.statistics``, every
interval at the run's `Levels`; Holm across the scorers of one run. A reward model's rewards
stored by the run are read back, not asked again (`rerun.held_rewards`), as a judge's answers come
from the response cache: a rerun at another level summarises them again.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from biasscope.backends.base import RewardScorer, Scored
from biasscope.core.errors import DataError
from biasscope.core.gender_swap import has_gendered
from biasscope.core.intervals import wilson
from biasscope.core.jsonl import line_id, read_jsonl
from biasscope.core.levels import Levels
from biasscope.core.numbers import level_of, p_is, percent, pvalue
from biasscope.core.stats import adjust_pvalues
from biasscope.counterfactual.statistics import (
    conversations,
    counterfactual,
    flips,
    gender_of,
    oriented,
    paired_difference,
    sentence,
)
from biasscope.judge import (
    Judge,
    Verdict,
    answered,
    classify,
    compare,
    verdict_row,
    why_none,
)
from biasscope.sensitivity import PathLike, Turns, query, read_hh_pairs


@dataclass(frozen=True)
class Side:
    turns: Turns
    chosen: str
    rejected: str | None


@dataclass(frozen=True)
class Item:
    id: str
    original: Side
    swapped: Side
    group: str | None  # of the original: which way the difference is read


def _swap(side: Side) -> Side:
    return Side(tuple((r, counterfactual(t)) for r, t in side.turns),
                counterfactual(side.chosen),
                None if side.rejected is None else counterfactual(side.rejected))


def _texts(side: Side) -> list[str]:
    return [t for _, t in side.turns] + [side.chosen] + ([side.rejected] if side.rejected
                                                         else [])


def builtin_items(data_dir: PathLike | None, n: int, seed: int = 0) -> tuple[list[Item], str]:
    """hh-rlhf pairs with something to swap, and the file's SHA-256."""
    pairs = read_hh_pairs(data_dir, n=None, seed=seed)
    items = []
    for pid, chosen, rejected in zip(pairs.ids, pairs.chosen, pairs.rejected):
        if rejected[0] != chosen[0]:  # not one conversation with two endings
            continue
        side = Side(chosen[0], chosen[1], rejected[1])
        swapped = _swap(side)
        if swapped == side or not any(has_gendered(t) for t in _texts(side)):
            continue
        items.append(Item(pid, side, swapped, gender_of(_texts(side))))
        if len(items) == n:
            break
    if not items:
        raise DataError(f"{pairs.source}: no pair has a gendered word or a listed name")
    return items, pairs.sha256


#: The roles a turn before the response may have.
ROLES = ("system", "user", "assistant")


def _side(record: dict[str, Any], where: str) -> Side:
    for one, other in (("prompt", "messages"), ("chosen", "response")):
        if one in record and other in record:  # one would be dropped without a word
            raise DataError(f"{where}: gives both '{one}' and '{other}': keep one")
    if "messages" in record:
        messages = record["messages"]
        if not isinstance(messages, list) or not messages:
            raise DataError(f"{where}: 'messages' must be a non-empty list of the turns before "
                            "the response")
        for i, m in enumerate(messages, start=1):  # a turn dropped or "None" is another chat
            if not (isinstance(m, dict) and m.get("role") in ROLES
                    and isinstance(m.get("content"), str)):
                raise DataError(f"{where}: message {i} needs a role ({', '.join(ROLES)}) and "
                                "a string content")
        turns = tuple((str(m["role"]), str(m["content"])) for m in messages)
    elif isinstance(record.get("prompt"), str):
        turns = (("user", record["prompt"]),)
    else:
        raise DataError(f"{where}: needs 'prompt' (a string) or 'messages' (the turns before "
                        "the response)")
    chosen = record.get("chosen", record.get("response"))
    rejected = record.get("rejected")
    if not isinstance(chosen, str) or not isinstance(rejected, str | None):
        raise DataError(f"{where}: needs 'chosen' or 'response' (a string), and 'rejected' "
                        "a string if given")
    return Side(turns, chosen, rejected)


def read_items(path: PathLike) -> list[Item]:
    """The user's pairs (see the module doc). Each ``id`` once (a pair without one is named by
    its line number); ``counterfactual`` an object, or left out (null) for the automatic swap;
    either way other than the original (the built-in pairs skip those with nothing to swap)."""
    items: list[Item] = []
    lines: dict[str, tuple[int, bool]] = {}  # id -> the line that used it, whether it gave it
    for number, record in read_jsonl(path):
        where = f"{path}:{number}"
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object")
        pid = line_id(record, number, where, DataError)
        if pid in lines:
            line, named = lines[pid]
            why = "" if named else " (it has no id: its line number is its id)"
            raise DataError(f"{where}: id {pid!r} already used on line {line}{why}; give "
                            "each pair its own id")
        lines[pid] = (number, "id" in record)
        original = _side(record, where)
        given = record.get("counterfactual")
        if given is not None and not isinstance(given, dict):
            raise DataError(f"{where}: 'counterfactual' {json.dumps(given)[:40]}: give an object "
                            "with the pair's keys ('prompt' or 'messages', 'chosen' or "
                            "'response', 'rejected'), or leave it out to swap gendered words "
                            "and names")
        swapped = _side(given, f"{where} counterfactual") if given is not None else \
            _swap(original)
        if (swapped.rejected is None) != (original.rejected is None):
            raise DataError(f"{where}: give 'rejected' in both members or in neither")
        if swapped == original:  # a text compared with itself: a tie that measures nothing
            raise DataError(f"{where}: the counterfactual is the same as the original (no "
                            "gendered word or listed first name to swap): give a "
                            "'counterfactual' that differs, or drop the pair")
        group = record.get("group")
        if group is not None and group not in ("female", "male"):
            raise DataError(f"{where}: 'group' {json.dumps(group)[:40]}: give female or male "
                            "(the original's group, which orients the difference), or leave "
                            "it out to read it from the text")
        items.append(Item(pid, original, swapped,
                          group if group is not None else gender_of(_texts(original))))
    if not items:
        raise DataError(f"{path}: no pairs")
    return items


def items_sha256(items: Sequence[Item]) -> str:
    return hashlib.sha256(json.dumps([[i.id, i.original.__dict__, i.swapped.__dict__, i.group]
                                      for i in items], default=list).encode()).hexdigest()


def _members(items: Sequence[Item], which: str) -> list[Scored]:
    out: list[Scored] = []
    for item in items:
        side = getattr(item, which)
        out.append((side.turns, side.chosen))
        if side.rejected is not None:
            out.append((side.turns, side.rejected))
    return out


#: A stored reward by its pair, version (original or swapped) and response (chosen or
#: rejected), as ``scores.jsonl`` keys it (`rerun.held_rewards`); None for a NaN reward.
Held = Mapping[tuple[str, str, str], float | None]


def _held(held: Held | None, members: Sequence[tuple[Item, str]], version: str
          ) -> list[float] | None:
    """The stored rewards of ``members`` in ``version``, or None where one is missing."""
    keys = [(i.id, version, which) for i, which in members]
    if not held or any(k not in held for k in keys):
        return None
    return [math.nan if (v := held[k]) is None else float(v) for k in keys]


def score_reward_model(model: RewardScorer, items: Sequence[Item], seed: int = 0,
                       levels: Levels | None = None, held: Held | None = None
                       ) -> dict[str, Any]:
    """Rewards of every member, original and swapped: the paired difference per conversation
    (its responses' differences averaged) and, with rejected responses, the flips of the
    preference for the chosen one, at ``levels``. ``held``: the run's stored rewards of this
    model (`rerun.held_rewards`); where they cover every member, the model is not asked again."""
    levels = levels or Levels()
    members = [(i, r) for i in items for r in ("chosen", "rejected")[
        :1 + (i.original.rejected is not None)]]
    before, after = _held(held, members, "original"), _held(held, members, "swapped")
    if before is None or after is None:
        before = model.score(_members(items, "original"))
        after = model.score(_members(items, "swapped"))
    female, male, left = oriented(before, after, [i.group for i, _ in members])
    ids, _, _ = oriented([i.id for i, _ in members], [i.id for i, _ in members],
                         [i.group for i, _ in members])
    female, male = conversations(ids, female, male)
    records = [{"scorer": model.label, "pair": i.id, "group": i.group, "version": version,
                "response": which, "score": score}
               for version, scores in (("original", before), ("swapped", after))
               for (i, which), score in zip(members, scores)]
    difference = {**paired_difference(female, male, seed, levels.confidence,
                                      levels.n_resamples),
                  "unit": "conversations", "members": len(ids)}
    out = {"scorer": model.label, "kind": "reward model", "what": "reward",
           "difference": difference, "ungendered": left, "records": records}
    paired = [i.original.rejected is not None for i in items]
    if all(paired):
        yes_f, yes_m, _ = oriented([c > r for c, r in zip(before[0::2], before[1::2])],
                                   [c > r for c, r in zip(after[0::2], after[1::2])],
                                   [i.group for i in items])
        out["flips"] = flips(yes_f, yes_m, levels.confidence)
        out["verdict"] = "prefers the chosen response"
    return out


def _score(verdict: Verdict, first: str) -> float:
    if verdict.probs:
        total = sum(verdict.probs.values())
        return verdict.probs.get(first, 0.0) / total if total else float("nan")
    if verdict.label is None:
        return float("nan")
    return 1.0 if verdict.label == first else 0.5 if verdict.label == "tie" else 0.0


def check_judged(items: Sequence[Item], labels: dict[str, str] | None) -> None:
    """A one-line error where a judge cannot be asked about ``items``: pairwise (no
    ``labels``) needs a rejected response in every pair."""
    if labels is None and any(i.original.rejected is None for i in items):
        raise DataError("a pairwise judge compares 'chosen' with 'rejected': give both in "
                        "every pair, or --labels to judge each response on its own")


def score_judge(judge: Judge, items: Sequence[Item], labels: dict[str, str] | None,
                seed: int = 0, levels: Levels | None = None) -> dict[str, Any]:
    """Pairwise (chosen against rejected; verdict: picks the chosen) or, with ``labels``,
    classification of each chosen response (verdict: the first label), at ``levels``."""
    levels = levels or Levels()
    def ask(which: str) -> list[Verdict]:
        sides = [getattr(i, which) for i in items]
        if labels is None:
            return compare(judge, [(query(s.turns), s.chosen, str(s.rejected)) for s in sides])
        return classify(judge, [s.chosen for s in sides], labels)

    check_judged(items, labels)
    first = "a" if labels is None else next(iter(labels))
    before, after = ask("original"), ask("swapped")
    female, male, left = oriented([_score(v, first) for v in before],
                                  [_score(v, first) for v in after], [i.group for i in items])
    yes, yes_after, _ = oriented(
        [(v.label == first) if v.label is not None else None for v in before],
        [(v.label == first) if v.label is not None else None for v in after],
        [i.group for i in items])
    what = "P(chosen preferred)" if labels is None else f"P({first})"
    scorer = "+".join(m.label for m in judge.models)
    records = [{"scorer": scorer, "pair": i.id, "group": i.group, "version": version,
                "score": _score(v, first),
                **{k: x for k, x in verdict_row(i.id, v).items() if k != "id"}}
               for version, verdicts in (("original", before), ("swapped", after))
               for i, v in zip(items, verdicts)]
    return {"scorer": scorer, "kind": "judge", "what": what,
            "difference": paired_difference(female, male, seed, levels.confidence,
                                            levels.n_resamples),
            "ungendered": left, "flips": flips(yes, yes_after, levels.confidence),
            "answers": answers([*before, *after], judge, [i.id for i in items] * 2,
                               levels.confidence),
            "verdict": "prefers the chosen response" if labels is None else f"says {first}",
            "records": records}


def answers(verdicts: Sequence[Verdict], judge: Judge | None = None,
            pairs: Sequence[str] | None = None, confidence: float = 0.95) -> dict[str, Any]:
    """How many questions got a verdict, why the others did not (``Verdict.reason``), the
    share of answers outside the keys (Wilson CI) and a few of them, as the judge wrote them:
    a judge that gives no verdict must say why, not only "n = 0". Of several judges
    (``judge``), each one's answered share (``answered_rate:JUDGE``; ``pairs``: each
    verdict's pair, its two versions one cluster) and those that answered fewer questions
    than the panel gave verdicts (``answered_fewer``): the panel's count and its pooled
    share outside the keys hid a judge that never answers, another deciding every question.
    Every share with its interval at ``confidence``."""
    calls = [c for v in verdicts for c in v.calls]
    unparsed = [c.raw for c in calls if c.key is None and not c.error]
    reasons: dict[str, int] = {}
    for v in verdicts:
        if v.label is None:
            reasons[v.reason] = reasons.get(v.reason, 0) + 1
    # Which position the chosen option was shown in: a judge that always picks one position
    # gives both versions the same verdict whatever the swap did.
    shown = [c.order.index(c.label) for c in calls if c.label in c.order]
    top = max(set(shown), key=shown.count) if shown else 0
    out = {"questions": len(verdicts), "verdicts": sum(v.label is not None for v in verdicts),
           "no_verdict": reasons, "calls": len(calls),
           "failed_calls": sum(c.error is not None for c in calls),
           "first_error": next((c.error for c in calls if c.error is not None), None),
           "unparseable": wilson(len(unparsed), len(calls), confidence),
           "examples": list(dict.fromkeys(unparsed))[:5],
           "position": top + 1,
           "same_position": wilson(shown.count(top), len(shown), confidence)}
    each, short = answered(judge, verdicts, pairs, confidence) if judge is not None else (
        {}, [])
    if each:  # several judges
        out.update(each)
        out["answered_fewer"] = [{"judge": name, "answered": k, "of": n, "why": why}
                                 for name, k, n, why in short]
    return out


def summarise(rows: list[dict[str, Any]], confidence: float = 0.95) -> dict[str, Any]:
    """Holm over the scorers' Wilcoxon p-values, and over their McNemar p-values (the scorers
    with verdicts), then one sentence each, saying ``confidence``, the level ``rows``'
    intervals were computed at."""
    held = adjust_pvalues([r["difference"]["wilcoxon_p"] for r in rows], "holm")
    flipped = [r["flips"] for r in rows if r.get("flips")]
    for fl, p in zip(flipped, adjust_pvalues([f["mcnemar_p"] for f in flipped], "holm")):
        fl["mcnemar_p_holm"] = float(p)
    sentences = []
    for row, p in zip(rows, held):
        row["difference"]["wilcoxon_p_holm"] = float(p)
        sentences.append(sentence(row["scorer"], row["what"], row["difference"], float(p),
                                  confidence=confidence))
        if (said := answers_sentence(row["scorer"], row.get("answers"), confidence)) \
                is not None:
            sentences.append(said)
        if fl := row.get("flips"):
            rate = fl["flip_rate"]
            if fl["n"]:
                sentences.append(
                    f"{row['scorer']}: the verdict ({row['verdict']}) differs between the "
                    f"female and the male version in "
                    f"{percent(rate['estimate'], rate['low'], rate['high'], confidence)} of "
                    f"{fl['n']} pairs; "
                    f"exact McNemar {p_is(fl['mcnemar_p'])} (Holm "
                    f"{pvalue(fl['mcnemar_p_holm'])}; {fl['yes_to_no']} yes only for "
                    f"the female version, {fl['no_to_yes']} only for the male; male minus "
                    f"female share of yes {percent(fl['effect_size'], signed=True)}).")
    return {"scorers": rows, "sentences": sentences}


def answers_sentence(scorer: str, found: dict[str, Any] | None, confidence: float = 0.95
                     ) -> str | None:
    """Why a judge gave no verdict, which of several answered fewer questions than the panel
    gave verdicts, and whether its verdicts follow position, in words (intervals at
    ``confidence``); None when none of these is so."""
    if not found:
        return None
    said = [s for s in (_missing(scorer, found, confidence), _fewer(scorer, found),
                        _position(scorer, found, confidence)) if s]
    return " ".join(said) or None


def _fewer(scorer: str, found: dict[str, Any]) -> str | None:
    """Each judge of a panel that answered fewer questions than the panel gave verdicts: the
    others' verdicts stood in for its own, which no other sentence says."""
    if not (fewer := found.get("answered_fewer")):
        return None
    return (f"{scorer}: {found['verdicts']} of {found['questions']} questions got a verdict; "
            + "; ".join(f"judge {f['judge']} answered {f['answered']} of {f['of']} "
                        f"({f['why']})" for f in fewer) + ".")


#: The share of its answers in one position above which a judge's verdicts are said to follow
#: position (a share of answers, not a confidence level).
SAME_POSITION = 0.95


def _position(scorer: str, found: dict[str, Any], confidence: float = 0.95) -> str | None:
    same = found.get("same_position")
    if not same or same["n"] < 10 or same["estimate"] < SAME_POSITION:
        return None
    return (f"{scorer} chose the option shown in position {found['position']} in "
            f"{same['estimate']:.0%} of its {same['n']} answers ({level_of(confidence)} CI "
            f"{same['low']:.0%} to {same['high']:.0%}): its verdicts follow position, so an "
            "unchanged verdict says nothing about the swap (see `biasscope judge-audit`).")


def _missing(scorer: str, found: dict[str, Any], confidence: float = 0.95) -> str | None:
    """How many questions got no verdict and why, in the words the judge's own sentences use
    (`why_none`: "20 answers outside the keys", not the stored key "20 invalid")."""
    if found["verdicts"] == found["questions"]:
        return None
    share = found["unparseable"]
    why = why_none({reason or "unknown": n for reason, n in found["no_verdict"].items()})
    text = (f"{scorer}: no verdict on {found['questions'] - found['verdicts']} of "
            f"{found['questions']} questions ({why}).")
    if share["n"]:
        text += (f" {share['estimate']:.0%} of its {share['n']} answers "
                 f"({level_of(confidence)} CI {share['low']:.0%} to {share['high']:.0%}) were "
                 "outside the answer keys, "
                 "so unparseable")
        text += (", e.g. " + "; ".join(repr(e[:40]) for e in found["examples"][:3]) + "."
                 if found["examples"] else ".")
    if found["failed_calls"]:
        text += f" {found['failed_calls']} requests failed."
    return text




__all__ = [
    "Item",
    "Side",
    "answers",
    "answers_sentence",
    "builtin_items",
    "items_sha256",
    "read_items",
    "score_judge",
    "score_reward_model",
    "summarise",
]
