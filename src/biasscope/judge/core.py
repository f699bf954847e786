"""A judge that does not let label names, option order or one model decide the verdict.

Every question is put as a multiple choice over *positions*: the choices (the user's labels, or
the two responses) are shown in some order, the i-th under the neutral key ``keys[i]`` (A, B,
C, ...). The judge never sees the user's label names; its answer is mapped back through the
order. Where the backend takes ``logit_bias`` and its tokenizer is reachable, the answer is
restricted to the keys (``max_tokens=1``); where it returns logprobs, the verdict carries the
full distribution over labels. An answer outside the keys is recorded as invalid with its raw
text, never raised.

Position strategies (``JudgingConfig.position``):

* ``shuffle`` (default, as fastrepl): a new seeded order, so a new key for every label, per item.
* ``consensus``: the identity order, then — unless the first answer sat in the exact middle —
  the reversed order; if the two disagree there is no verdict (``reason="disagreement"``),
  nor if one of them is no answer (``invalid``, ``failed``): one order alone is not a consensus.
* ``permute``: every order (or ``samples`` seeded ones), label probabilities averaged (one-hot
  votes where there are no logprobs): balanced position calibration. An order without a valid
  answer leaves no verdict (``invalid``, ``failed``): the orders that answered would carry
  their position preference into it (with two options, one order alone decided).
* ``fixed``: the identity order only (for measuring a judge's biases, see ``judge.biases``).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from biasscope.backends.base import GenerateParams, GenerateRequest, Generation, Generator
from biasscope.core.errors import BiasscopeError
from biasscope.core.renamed import renamed
from biasscope.judge.agreement import majority, mean_probabilities
from biasscope.probes.base import Messages

KEYS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
POSITIONS = ("shuffle", "consensus", "permute", "fixed")
#: Builds the question for one item, given the choices in the order shown and their keys.
Render = Callable[[int, tuple[str, ...], tuple[str, ...]], Messages]


class JudgeError(BiasscopeError):
    """A judge that cannot be set up as asked (labels, keys, tokenizer)."""


@dataclass(frozen=True)
class JudgingConfig:
    position: str = "shuffle"
    samples: int | None = None  # permute: None = every order (at most 24), else seeded orders
    reasoning: bool = False  # chain of thought: reason first, then "Answer: <key>"
    seed: int = 0
    keys: tuple[str, ...] = KEYS
    aggregate: str = "mean"  # several judges: "mean" probabilities or "majority" vote
    top_logprobs: int = 20
    max_reasoning_tokens: int = 512
    logit_bias: bool = True


@dataclass(frozen=True)
class Call:
    """One question to one judge model: the order shown, what it answered."""

    model: str
    order: tuple[str, ...]
    key: str | None  # None: invalid answer (or failed request, see ``error``)
    label: str | None
    probs: dict[str, float] | None
    raw: str
    error: str | None = None


@dataclass(frozen=True)
class Verdict:
    """A judgement in the user's labels (pairwise: ``"a"``, ``"b"`` or ``"tie"``).

    ``label`` is None when there is no verdict; ``reason`` then says why: ``invalid`` (answers
    outside the keys), ``disagreement`` (consensus), ``tie`` (equal averaged probabilities or
    votes), ``failed`` (requests failed).
    """

    label: str | None
    probs: dict[str, float] | None
    reason: str = ""
    calls: tuple[Call, ...] = ()
    by_judge: dict[str, str | None] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.label is not None


#: Why there is no verdict (`Verdict.reason`), counted in words.
NO_VERDICT = {"invalid": ("answer outside the keys", "answers outside the keys"),
              "disagreement": ("disagreement of the two orders", "disagreements of the orders"),
              "tie": ("tie", "ties"), "failed": ("failed request", "failed requests")}


def why_none(reasons: Mapping[str, int]) -> str:
    """``{'invalid': 2, 'tie': 1}`` as "2 answers outside the keys, 1 tie"."""
    said = []
    for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        one, many = NO_VERDICT.get(reason, (reason, reason))
        said.append(f"{count} {one if count == 1 else many}")
    return ", ".join(said)


def check_keys(keys: Sequence[str], needed: int) -> tuple[str, ...]:
    if len(keys) < needed:
        raise JudgeError(f"{needed} choices need {needed} keys; {len(keys)} given")
    chosen = tuple(keys[:needed])
    if len(set(chosen)) != len(chosen):
        raise JudgeError(f"judge keys must differ; got {', '.join(chosen)}")
    if any(len(k.strip()) != len(k) or not k for k in chosen):
        raise JudgeError("judge keys must be non-empty and carry no spaces")
    return chosen


def key_token_ids(model: Generator, keys: Sequence[str]) -> dict[str, list[int]] | None:
    """The backend's token ids of each key (bare and after a space), when its tokenizer is
    reachable; None when it is not. A key that is no single token is an error."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None:
        def encode(text: str) -> list[int] | None:
            return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    elif hasattr(model, "tokenize"):
        encode = model.tokenize
    else:
        return None
    out: dict[str, list[int]] = {}
    for key in keys:
        ids = {tuple(t) for t in (encode(key), encode(" " + key)) if t is not None}
        if not ids:
            return None
        single = sorted({t[0] for t in ids if len(t) == 1})
        if not single:
            raise JudgeError(f"judge key {key!r} is not a single token for {model.label}; "
                             "choose other keys (JudgingConfig.keys)")
        out[key] = single
    return out


_FINAL = re.compile(r"answer\s*[:\-]\s*\(?([A-Za-z0-9]+)\)?", re.IGNORECASE)
_FIRST = re.compile(r"^\W*([A-Za-z0-9]+)\b")


def read_key(generation: Generation, keys: Sequence[str], reasoning: bool) -> tuple[
        str | None, dict[str, float] | None]:
    """The key answered and, from the first answer token's logprobs, each key's probability
    renormalised over the keys (an exact match of the token, not a prefix)."""
    text = generation.text.strip()
    if reasoning:
        found = _FINAL.findall(text)
        key = found[-1] if found and found[-1] in keys else None
        return key, None
    match = _FIRST.match(text)
    key = match.group(1) if match and match.group(1) in keys else None
    first = next((t for t in generation.tokens or () if t.token.strip()), None)
    if first is None:
        return key, None
    mass = dict.fromkeys(keys, 0.0)
    for token, logprob in first.top or ((first.token, first.logprob),):
        piece = token.strip().lstrip("▁Ġ")
        if piece in mass:
            mass[piece] += math.exp(min(logprob, 0.0))
    total = sum(mass.values())
    return key, ({k: v / total for k, v in mass.items()} if total > 0 else None)


def orders(n: int, config: JudgingConfig, rng: random.Random) -> list[tuple[int, ...]]:
    """The orders (permutations of choice indices) of the first round for one item."""
    identity = tuple(range(n))
    if config.position in ("fixed", "consensus"):
        return [identity]
    if config.position == "shuffle":
        order = list(identity)
        rng.shuffle(order)
        return [tuple(order)]
    every = list(itertools.permutations(identity))
    if config.samples is None and len(every) <= 24:
        return every
    return rng.sample(every, min(len(every), config.samples or 24))


class Judge:
    """One or several judge models behind the same strategies."""

    def __init__(self, models: Generator | Sequence[Generator],
                 config: JudgingConfig | None = None) -> None:
        self.models = list(models) if isinstance(models, Sequence) else [models]
        if not self.models:
            raise JudgeError("give at least one judge model")
        labels = [m.label for m in self.models]
        if twice := sorted({x for x in labels if labels.count(x) > 1}):
            # Verdicts and agreement are keyed by label: two judges under one would merge.
            raise JudgeError(f"two judge models are both labelled {twice[0]!r}; give each a "
                             "distinct label (on the command line: --model NAME=SPEC)")
        self.config = config or JudgingConfig()
        if self.config.position not in POSITIONS:
            raise JudgeError(f"unknown position strategy {self.config.position!r}; use one "
                             f"of {', '.join(POSITIONS)}")
        if self.config.aggregate not in ("mean", "majority"):
            raise JudgeError("aggregate must be 'mean' or 'majority'")
        self._ids: dict[tuple[int, tuple[str, ...]], dict[str, list[int]] | None] = {}

    def run(self, n_items: int, choices: Sequence[str], render: Render,
            extra: Sequence[str] = (), ids: Sequence[str] = ()) -> list[Verdict]:
        """Judge ``n_items`` questions over ``choices`` (positioned: keys by position) plus
        ``extra`` answers that never move and take the keys after them (pairwise "tie").
        ``ids`` name the items to the backends (a local model's refusal of a question too long
        for it names the item); without them an item is named by its place, ``#1`` on."""
        if ids and len(ids) != n_items:
            raise JudgeError(f"{len(ids)} ids for {n_items} items: give one id per item")
        names = tuple(ids) or tuple(f"#{i + 1}" for i in range(n_items))
        every = check_keys(self.config.keys, len(choices) + len(extra))
        keys = every[:len(choices)]
        fixed = dict(zip(every[len(choices):], extra))
        per_judge = [self._one_model(m, names, tuple(choices), keys, fixed, render)
                     for m in self.models]
        return [self._aggregate([v[i] for v in per_judge]) for i in range(n_items)]

    def _params(self, model: Generator, keys: Sequence[str]) -> GenerateParams:
        config = self.config
        if config.reasoning:
            return GenerateParams(max_tokens=config.max_reasoning_tokens, seed=config.seed)
        bias: tuple[tuple[int, float], ...] = ()
        if config.logit_bias:
            slot = (id(model), tuple(keys))
            if slot not in self._ids:
                self._ids[slot] = key_token_ids(model, keys)
            ids = self._ids[slot]
            if ids is not None:
                bias = tuple((t, 100.0) for k in keys for t in ids[k])
        return GenerateParams(max_tokens=1, seed=config.seed, logit_bias=bias,
                              top_logprobs=config.top_logprobs)

    def _ask(self, model: Generator, asks: Sequence[tuple[int, tuple[int, ...]]],
             names: tuple[str, ...], choices: tuple[str, ...], keys: tuple[str, ...],
             extra: dict[str, str], render: Render) -> list[Call]:
        all_keys = (*keys, *extra)
        params = self._params(model, all_keys)
        requests = [GenerateRequest(messages=render(i, tuple(choices[j] for j in order),
                                                    all_keys), params=params, id=names[i])
                    for i, order in asks]
        calls = []
        for (_, order), gen in zip(asks, model.generate(requests)):
            shown = tuple(choices[j] for j in order)
            key, key_probs = read_key(gen, all_keys, self.config.reasoning) if gen.ok else (
                None, None)
            mapping = {**dict(zip(keys, shown)), **extra}
            probs = ({mapping[k]: p for k, p in key_probs.items()} if key_probs else None)
            calls.append(Call(model.label, shown, key, mapping.get(key) if key else None,
                              probs, gen.text, gen.error))
        return calls

    def _one_model(self, model: Generator, names: tuple[str, ...], choices: tuple[str, ...],
                   keys: tuple[str, ...], extra: dict[str, str], render: Render
                   ) -> list[Verdict]:
        n_items = len(names)
        rng = random.Random(self.config.seed)
        asks = [(i, order) for i in range(n_items)
                for order in orders(len(choices), self.config, rng)]
        calls = self._ask(model, asks, names, choices, keys, extra, render)
        by_item: list[list[Call]] = [[] for _ in range(n_items)]
        for (i, _), call in zip(asks, calls):
            by_item[i].append(call)
        if self.config.position == "consensus":
            middle = len(choices) // 2 if len(choices) % 2 else None
            # An answer in the exact middle (or a fixed one such as "tie") stays put when the
            # order is reversed: asking again would prove nothing.
            again = [(i, tuple(reversed(range(len(choices))))) for i, cs in enumerate(by_item)
                     if cs[0].label is not None and cs[0].label not in extra.values()
                     and cs[0].order.index(cs[0].label) != middle]
            for (i, _), call in zip(again, self._ask(model, again, names, choices, keys,
                                                     extra, render)):
                by_item[i].append(call)
        return [self._verdict(cs) for cs in by_item]

    def reason(self, verdict: Verdict, model: str) -> str:
        """Why judge ``model`` (a label) gave ``verdict``'s item no label of its own, as
        `Verdict.reason`: `by_judge` keeps its label only, but its calls are kept (stored
        without probabilities, which only split a tie: a label they give is one).
        "" where it gave one."""
        if verdict.by_judge.get(model, verdict.label) is not None:
            return ""
        return self._verdict([c for c in verdict.calls if c.model == model]).reason or "tie"

    def _verdict(self, calls: list[Call]) -> Verdict:
        valid = [c for c in calls if c.label is not None]
        if not valid:
            reason = "failed" if all(c.error for c in calls) else "invalid"
            return Verdict(None, None, reason, tuple(calls))
        if self.config.position in ("consensus", "permute") and len(valid) < len(calls):
            # Some orders alone: their position preference would stand as the verdict.
            lost = [c for c in calls if c.label is None]
            reason = "failed" if all(c.error for c in lost) else "invalid"
            return Verdict(None, None, reason, tuple(calls))
        if self.config.position == "consensus" and len({c.label for c in valid}) > 1:
            return Verdict(None, None, "disagreement", tuple(calls))
        probs = mean_probabilities([c.probs if c.probs else {str(c.label): 1.0}
                                    for c in valid])
        top = max(probs.values())
        best = [label for label, p in probs.items() if p == top]
        if len(best) > 1:
            return Verdict(None, probs, "tie", tuple(calls))
        return Verdict(best[0], probs, "", tuple(calls))

    def _aggregate(self, verdicts: list[Verdict]) -> Verdict:
        calls = tuple(c for v in verdicts for c in v.calls)
        by_judge = {m.label: v.label for m, v in zip(self.models, verdicts)}
        if len(verdicts) == 1:
            return replace(verdicts[0], by_judge=by_judge)
        valid = [v for v in verdicts if v.label is not None]
        if not valid:
            return Verdict(None, None, verdicts[0].reason, calls, by_judge)
        if self.config.aggregate == "majority":
            label = majority([v.label for v in valid])
            return Verdict(label, None, "" if label else "tie", calls, by_judge)
        probs = mean_probabilities([v.probs or {str(v.label): 1.0} for v in valid])
        top = max(probs.values())
        best = [k for k, p in probs.items() if p == top]
        return Verdict(best[0] if len(best) == 1 else None, probs,
                       "" if len(best) == 1 else "tie", calls, by_judge)


def refuse_reordered(where: object, had: Sequence[str], given: Sequence[str], flag: str
                     ) -> None:
    """One line where ``given`` names the judges ``had`` names (a run's, as ``where`` holds
    them) in another order: order decides results (an item no judge labelled takes the first
    judge's reason, "invalid" or "disagreement"; the panel's mean probabilities are summed in
    that order, and a last-digit difference can make or break a tie), so the run is the same
    only in its own order. ``flag``: the one that gives the judges."""
    if sorted(had) == sorted(given) and list(had) != list(given):
        raise BiasscopeError(f"{where} has its judges in the order {', '.join(had)}, and this "
                             f"call gives {', '.join(given)}: the order can change the results, "
                             f"so give {flag} in the run's order, or use another --out")


__all__ = ["KEYS", "NO_VERDICT", "Call", "Judge", "JudgeError", "JudgingConfig", "Verdict",
           "key_token_ids", "read_key", "refuse_reordered", "why_none"]


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"JudgeOptions": "JudgingConfig"}, globals().__getitem__)
