"""Request kinds a backend answers. Each is a small protocol; backends implement what they can."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from biasscope.core.config import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    SEED,
    check_settings,
    plain_scalar,
    setting,
)
from biasscope.core.errors import BiasscopeError
from biasscope.core.items import Item


@dataclass(frozen=True)
class NextTokenScore:
    """The next-token distribution after a prompt, reduced to what metrics need.

    ``option_logprobs``: log-softmax over the whole vocabulary at each option's token.
    ``target_rank``: 1 + the number of vocabulary tokens with a strictly higher logit than
    the correct option's token (1 = most probable).
    """

    option_logprobs: tuple[float, ...]
    target_rank: int


class NextTokenScorer(Protocol):
    """Answers ``next_token`` requests: one score per item, in the order given."""

    label: str

    def score_next_token(self, items: Sequence[Item]) -> list[NextTokenScore]: ...


@dataclass(frozen=True)
class ContinuationScore:
    """How a model continues a context with the item's answer continuation.

    ``logprob``: summed log-probability of the continuation's tokens; ``greedy``: whether
    greedy decoding would produce exactly those tokens (LAMBADA's last-word accuracy).
    """

    logprob: float
    greedy: bool
    tokens: int


class ContinuationScorer(Protocol):
    """Answers ``continuation`` requests: context = ``item.prompt``, continuation =
    ``item.continuations[item.answer]``."""

    label: str

    def score_continuation(self, items: Sequence[Item]) -> list[ContinuationScore]: ...


# --- generate ---------------------------------------------------------------------------------

Role = str  # "system" | "user" | "assistant"


@dataclass(frozen=True)
class GenerateParams:
    """Sampling and output settings of one ``generate`` request (all part of its cache key).

    ``logit_bias`` pairs a backend token id with a bias in [-100, 100] (OpenAI's convention);
    a mapping (``{1234: 100}``, or OpenAI's JSON with ``"1234"``) is taken as its pairs.
    ``top_logprobs`` > 0 implies ``logprobs``.
    """

    temperature: float = setting(0.0, "sampling temperature", check=NON_NEGATIVE)
    max_tokens: int = setting(256, "the answer's token limit", check=POSITIVE_INT)
    seed: int | None = setting(None, "sampling seed, for servers that take one", check=SEED)
    stop: tuple[str, ...] = setting((), "stop string; repeatable", many=True)
    logit_bias: tuple[tuple[int, float], ...] = ()
    logprobs: bool = False
    top_logprobs: int = setting(0, "ask for per-token logprobs with this many alternatives",
                                check=NON_NEGATIVE_INT)

    def __post_init__(self) -> None:
        object.__setattr__(self, "logit_bias", _logit_bias(self.logit_bias))
        check_settings(self)
        if "" in self.stop:  # found in every text: each answer would be cut to nothing
            raise BiasscopeError("--stop (stop): an empty stop string ends every answer "
                                 "before it starts; drop it")

    @property
    def wants_logprobs(self) -> bool:
        return self.logprobs or self.top_logprobs > 0


def _logit_bias(value: Any) -> tuple[tuple[int, float], ...]:
    """``logit_bias`` as (token id, bias) pairs, from pairs or a mapping; anything else is one
    line naming it (a server rejects or drops what it cannot read; a local model indexes its
    vocabulary with the ids)."""
    say = "give a dict of token ids to biases from -100 to 100, e.g. {1234: 100}"
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise BiasscopeError(f"logit_bias: {value!r} is not token ids and biases; {say}")
    pairs = list(value.items()) if isinstance(value, Mapping) else list(value)
    out = []
    for pair in pairs:
        if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
            raise BiasscopeError(f"logit_bias: {pair!r} is no (token id, bias) pair; {say}")
        token, bias = (plain_scalar(v) for v in pair)
        if isinstance(token, str) and token.isascii() and token.isdigit():
            token = int(token)  # OpenAI's JSON keys
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise BiasscopeError(f"logit_bias: token id {token!r} is not a whole number from "
                                 f"0; {say}")
        if (isinstance(bias, bool) or not isinstance(bias, (int, float))
                or not math.isfinite(bias) or not -100 <= bias <= 100):
            raise BiasscopeError(f"logit_bias: token {token}'s bias {bias!r} is not a number "
                                 f"from -100 to 100; {say}")
        out.append((token, float(bias)))
    return tuple(out)


def plain_chat(messages: Sequence[tuple[str, str]]) -> str:
    """A chat as one plain prompt: ``role: content`` lines, then ``assistant:``. What a model
    without a chat template reads (a base model, locally or on a server's ``/completions``)."""
    return "".join(f"{role}: {content}\n" for role, content in messages) + "assistant:"


@dataclass(frozen=True)
class GenerateRequest:
    """Chat ``messages`` ((role, content) pairs) or a plain ``prompt``: exactly one of them.

    ``id`` is the caller's handle for the result; it is not part of the request's identity.
    """

    messages: tuple[tuple[Role, str], ...] | None = None
    prompt: str | None = None
    params: GenerateParams = GenerateParams()
    id: str = ""

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError(f"request {self.id!r}: give exactly one of messages and prompt")

    @property
    def is_chat(self) -> bool:
        return self.messages is not None


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability and the top alternatives at its position
    (``top``: (token, logprob) pairs, most probable first; empty when not asked for)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Generation:
    """What a backend wrote for one request.

    ``tokens`` is None when the backend returned no logprobs (not asked for, or not
    supported: callers fall back to the text). ``error`` is set, and ``text`` empty, when the
    request failed for good (retries spent): a failure record, not an exception.
    """

    text: str
    finish_reason: str | None = None
    tokens: tuple[TokenLogprob, ...] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    attempts: int = 1
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Generator(Protocol):
    """Answers ``generate`` requests: one generation per request, in the order given.

    ``identity()`` is what, beside the request, decides the answer (backend kind, endpoint,
    model, revision); it keys the response cache and never holds a secret.
    """

    label: str

    def identity(self) -> dict[str, str]: ...

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]: ...


# --- option scores ----------------------------------------------------------------------------


@dataclass(frozen=True)
class OptionScore:
    """Each option's summed log-prob as the continuation of the item's chat."""

    option_logprobs: tuple[float, ...]


# --- reward -----------------------------------------------------------------------------------

#: A conversation to score: the turns so far ((role, content) pairs) and the final assistant
#: response.
Scored = tuple[tuple[tuple[Role, str], ...], str]


class RewardScorer(Protocol):
    """Answers ``reward`` requests: one scalar per conversation, in the order given."""

    label: str

    def identity(self) -> dict[str, str]: ...

    def score(self, conversations: Sequence[Scored]) -> list[float]: ...
