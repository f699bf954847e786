"""Request kinds a backend answers. Each is a small protocol; backends implement what they can."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from biasscope.core.config import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    SEED,
    check_settings,
    setting,
)
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
        check_settings(self)

    @property
    def wants_logprobs(self) -> bool:
        return self.logprobs or self.top_logprobs > 0


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
