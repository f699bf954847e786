"""Reading a multiple-choice answer from a generation: from logprobs where the backend gave
them, from the text where it did not.

From logprobs, each option's probability is the mass the first answer token's top-k list puts
on tokens that begin that option (``" male"``, ``"Male"``, ``"▁male"``); the options'
probabilities are renormalised to sum to one and the mass on no option is reported beside them
(``missing_mass``: a large value means the top-k list did not cover the options, or the model
wanted to say something else). A token that begins several options (``"fe"`` for ``female`` and
``fees``) is ambiguous and counts as missing.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from biasscope.backends.base import Generation, TokenLogprob

#: Word-piece markers some tokenizers put before a token (SentencePiece, GPT-2 byte BPE).
_MARKERS = " \t\n▁Ġ"


@dataclass(frozen=True)
class OptionReading:
    """The answer to one multiple-choice request.

    ``source``: ``"logprobs"`` (``probs`` set), ``"text"`` (parsed from the text) or
    ``"none"`` (the text names no option, or the request failed: counted, not dropped).
    """

    answer: str | None
    source: str
    probs: dict[str, float] | None = None
    missing_mass: float | None = None


def _norm(text: str) -> str:
    return text.strip(_MARKERS).lower()


def option_probabilities(top: Sequence[tuple[str, float]], options: Sequence[str]) -> tuple[
        dict[str, float], float] | None:
    """Renormalised option probabilities and the missing mass, from one top-k list."""
    mass = dict.fromkeys(options, 0.0)
    covered = 0.0
    for token, logprob in top:
        piece = _norm(token)
        starts = [o for o in options if piece and _norm(o).startswith(piece)]
        if len(starts) == 1:
            p = math.exp(min(logprob, 0.0))  # a server's logprob above 0 is noise, not >1
            mass[starts[0]] += p
            covered += p
    if covered <= 0.0:
        return None
    return {o: m / covered for o, m in mass.items()}, max(0.0, 1.0 - covered)


def normalise(text: str) -> str:
    """An answer text as compared: whitespace trimmed and runs of it collapsed, so that an
    option stored as ``"The friend "`` is named by ``"the friend"``."""
    return " ".join(text.split())


def _mentions(key: str, answer: str) -> npt.NDArray[np.int64]:
    """(start, end) of each whole-word, case-blind mention of ``key``, in order."""
    found = [m.span() for m in re.finditer(rf"\b{re.escape(key)}\b", answer, re.IGNORECASE)]
    return np.array(found, dtype=np.int64).reshape(-1, 2)


def _covered(inner: npt.NDArray[np.int64], outer: npt.NDArray[np.int64]
             ) -> npt.NDArray[np.bool_]:
    """Which ``inner`` mentions lie inside some ``outer`` mention: among the outer mentions
    that start at or before one, the furthest end reaches its end (sorted starts, running
    maximum of ends, one binary search each)."""
    if not len(outer):
        return np.zeros(len(inner), dtype=bool)
    reach = np.maximum.accumulate(outer[:, 1])
    before = np.searchsorted(outer[:, 0], inner[:, 0], side="right") - 1
    return (before >= 0) & (reach[np.maximum(before, 0)] >= inner[:, 1])


def _named(answer: str, keyed: Sequence[tuple[str, str]]) -> set[str]:
    """The options with a mention no other option's mention covers ("specified" inside "not
    specified" is not named). Only a text that another option's text contains can be covered,
    so only those options are located mention by mention; linear in the answer's length."""
    named: set[str] = set()
    for key, option in keyed:
        outer = [k for k, o in keyed if o != option and key.lower() in k.lower()]
        if not outer:
            if re.search(rf"\b{re.escape(key)}\b", answer, re.IGNORECASE):
                named.add(option)
        else:
            free = np.ones(len(spans := _mentions(key, answer)), dtype=bool)
            for k in outer:
                free &= ~_covered(spans, _mentions(k, answer))
            if free.any():
                named.add(option)
        if len(named) > 1:
            break
    return named


def parse_choice(text: str, options: Sequence[str]) -> str | None:
    """The option a free-text answer names: the whole answer, else its opening words when a
    punctuation mark closes them ("Male, because ..."), else the only option mentioned anywhere.
    None when it names no option or hedges between several ("male or female"). Options and
    answer are compared after ``normalise`` and without case; the option is returned as given.
    Linear in the answer's length (a model can write megabytes)."""
    answer = text.strip().strip(".!\"'`*").strip()
    keyed = [(key, o) for o in options if (key := normalise(o))]
    by_norm = {key.lower(): o for key, o in keyed}
    if (whole := normalise(answer).lower()) in by_norm:
        return by_norm[whole]
    for key, option in sorted(keyed, key=lambda k: len(k[0]), reverse=True):
        if re.match(rf"\W*{re.escape(key)}\s*[.,;:!?)\n]", answer, flags=re.IGNORECASE):
            return option
    named = _named(answer, keyed)
    return named.pop() if len(named) == 1 else None


_SENTENCE_END = re.compile(r"(?<=[.?!:])\s+")
_PUNCT = ".,;:!?\"'`*()[]"


def _word(word: str) -> str:
    """A word as echoes are compared: without case and surrounding punctuation."""
    return word.lower().strip(_PUNCT) or word.lower()


def echo_end(text: str, prompt: str, options: Sequence[str]) -> int:
    """Where a model's own words begin in ``text``: after the sentences and lines of
    ``prompt`` it repeated first (a base model completing "Is it? Answer yes or no." with
    "Answer yes or no. Yes"), whose options would otherwise be read as its answer. A sentence
    that is only an option is never taken for an echo (a few-shot "Yes." in the prompt, an
    answer "Yes."); words are compared without case and surrounding punctuation."""
    keys = {" ".join(_word(w) for w in o.split()) for o in options}
    by_first: dict[str, set[tuple[str, ...]]] = {}
    for line in prompt.splitlines():
        for sentence in _SENTENCE_END.split(line.strip()):
            words = tuple(_word(w) for w in sentence.split())
            if words and " ".join(words) not in keys:
                by_first.setdefault(words[0], set()).add(words)
    if not by_first:
        return 0
    longest = {first: sorted(parts, key=len, reverse=True) for first, parts in by_first.items()}
    # Bounded: a model that repeats the prompt for megabytes is read from where this stops.
    cap = 2 * sum(len(p) for parts in longest.values() for p in parts) + 1
    found = [(m.end(), _word(m.group())) for m in itertools.islice(re.finditer(r"\S+", text),
                                                                    cap)]
    said = [w for _, w in found]
    at, cut = 0, 0
    while at < len(said):
        part = next((p for p in longest.get(said[at], ()) if tuple(said[at:at + len(p)]) == p),
                    None)
        if part is None:
            break
        at += len(part)
        cut = found[at - 1][0]
    return cut


def _tokens_after(tokens: Sequence[TokenLogprob], text: str, cut: int
                  ) -> Sequence[TokenLogprob]:
    """The tokens from ``cut`` of ``text`` on; none where they do not spell the text up to
    it or one spans it (then the answer's first token is not known: the text is read)."""
    at = 0
    for index, token in enumerate(tokens):
        if at >= cut:
            return tokens[index:] if at == cut and "".join(
                t.token for t in tokens[:index]) == text[:cut] else ()
        at += len(token.token)
    return ()


def read_choice(generation: Generation, options: Sequence[str], prompt: str = ""
                ) -> OptionReading:
    """Logprobs first (the first generated token's alternatives), the text otherwise; both
    after any echo of ``prompt`` the generation begins with (`echo_end`)."""
    cut = echo_end(generation.text, prompt, options) if prompt and generation.ok else 0
    tokens: Sequence[TokenLogprob] = generation.tokens or ()
    if cut:
        tokens = _tokens_after(tokens, generation.text, cut)
    # The first token that says something: a leading space or newline may be its own token.
    first = next((t for t in tokens if _norm(t.token)), None)
    if first is not None:
        top = first.top or ((first.token, first.logprob),)
        found = option_probabilities(top, options)
        if found is not None:
            probs, missing = found
            return OptionReading(max(probs, key=lambda o: probs[o]), "logprobs", probs, missing)
    answer = parse_choice(generation.text[cut:], options) if generation.ok else None
    return OptionReading(answer, "text" if answer is not None else "none")
