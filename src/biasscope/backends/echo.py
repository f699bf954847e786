"""Option scoring through a completions server: each option's log-probability as the
continuation of the prompt, read back from the server's echo of prompt + option.

The request is ``/completions`` with ``echo``, ``logprobs`` and one new token; the option's
log-prob is the sum over the echoed tokens that start inside the option's text. Offsets count
in the server's detokenised echo (which may differ from the prompt at its start: SentencePiece's
space prefix), so the option is located from the end: it ends where the new token begins.
lm-evaluation-harness scores multiple choice through servers the same way. llama.cpp's server
needs ``--logits_all``; vLLM echoes too; OpenAI's own API no longer does. A server cannot
echo a chat, so the prompt is the plain one (`plain_chat`).

Next-token items (``next_token``: Winogender) are scored the same way, each option's log-prob
being its first token's after the prompt (one token, or the first with ``--first-token``).

Whole sentences (``continuation`` items with no prompt: CrowS-Pairs, StereoSet) are sent alone;
the server puts its start token (BOS) in front, and the sentence's log-likelihood is the sum
over every echoed token after it, as a local model scores it after BOS. That needs the first
real token's log-prob given BOS. vLLM echoes the BOS itself (log-prob null) and then every
sentence token with its value; llama-cpp-python's server (0.3.x) drops the BOS from the echo
and returns null for the first sentence token, although it computed it (OpenAI's old API did
the same), so the sum would silently lose a token: such a server is refused in one line.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from biasscope.backends.base import ContinuationScore, GenerateRequest, plain_chat
from biasscope.backends.openai_http import (
    OpenAIGenerator,
    _openai,
    attempts,
    retry_wait,
    run_sync,
)
from biasscope.core.errors import ModelError
from biasscope.core.items import Item


@dataclass(frozen=True)
class EchoNextToken:
    """A prompt's options at the next token, as a server's echo gives them: each option's
    log-prob (its first token's), but not the answer's rank over the whole vocabulary
    (`NextTokenScore.target_rank`), which the echo does not hold."""

    option_logprobs: tuple[float, ...]


class EchoScorer:
    """`HFGenerator.option_logprobs` for a model behind an OpenAI-compatible server."""

    def __init__(self, generator: OpenAIGenerator) -> None:
        if generator.kind == "openai":
            raise ModelError(f"{generator.label}: OpenAI's API does not echo prompt "
                             "log-probs; option scoring needs a completions server with echo "
                             "(llama.cpp with --logits_all, vLLM), or use --scoring generate")
        self.generator, self.label = generator, generator.label

    def identity(self) -> dict[str, str]:
        return {**self.generator.identity(), "method": "echo"}

    def option_logprobs(self, request: GenerateRequest,
                        options: Sequence[str]) -> tuple[dict[str, float], float]:
        """Each option's summed log-prob after the request's prompt, and the mass on none."""
        prompt = request.prompt if request.messages is None else plain_chat(request.messages)
        echoed = run_sync(self._all([f"{prompt}{o}" for o in options]))
        scores = {o: self._continuation(request, o, e) for o, e in zip(options, echoed)}
        return scores, max(0.0, 1.0 - sum(math.exp(v) for v in scores.values()))

    def _continuation(self, request: GenerateRequest, option: str,
                      echoed: tuple[Any, int]) -> float:
        return sum(v for _, v in self._option_tokens(f"request {request.id!r}", option, echoed))

    def _option_tokens(self, where: str, option: str, echoed: tuple[Any, int]
                       ) -> list[tuple[str, float]]:
        """The echoed tokens of ``option`` at the end of the prompt + option echo, each with
        its log-prob."""
        choice, generated = echoed
        logprobs = choice.logprobs  # None from a server that ignores ``echo``
        tokens, values, offsets = (list(getattr(logprobs, name, None) or []) for name in (
            "tokens", "token_logprobs", "text_offset"))
        if not tokens or not offsets or len(offsets) != len(tokens):
            raise ModelError(f"{self.label}: the server echoed no token offsets for {where}; it "
                             "cannot score options (llama.cpp: start it with --logits_all "
                             "true), use --scoring generate")
        end = offsets[-1] if generated else len(choice.text)
        start = end - len(option)
        found: list[tuple[str, float]] = []
        for token, value, offset in zip(tokens, values, offsets):
            if offset < start < offset + len(token):
                raise ModelError(f"{self.label}: option {option!r} of {where} merges with the "
                                 "prompt's last token on this server; it cannot be scored apart "
                                 "(end the prompt with a space or start the option with one)")
            if start <= offset < end:
                if value is None:
                    raise ModelError(f"{self.label}: no log-prob for an option token of {where}")
                found.append((str(token), float(value)))
        if not found:
            raise ModelError(f"{self.label}: option {option!r} of {where} has no echoed tokens")
        return found

    def score_next_token(self, items: Sequence[Item], first_token: bool = False
                         ) -> list[EchoNextToken]:
        """Each option's log-prob at the next token after the item's prompt, from the echo of
        prompt + option: an option of one token on this server, or with ``first_token`` the
        first of several (else one line refuses it, as a local model's scoring does)."""
        echoed = run_sync(self._all([f"{it.prompt}{c}" for it in items
                                     for c in it.continuations]))
        out, at = [], 0
        for item in items:
            values = []
            for option in item.continuations:
                pieces = self._option_tokens(f"item {item.id!r}", option, echoed[at])
                at += 1
                if len(pieces) > 1 and not first_token:
                    raise ModelError(
                        f"{self.label}: option {option!r} of item {item.id!r} is {len(pieces)} "
                        f"tokens {[t for t, _ in pieces]} on this server; pass --first-token to "
                        "score its first token")
                values.append(pieces[0][1])
            out.append(EchoNextToken(tuple(values)))
        return out

    def score_continuation(self, items: Sequence[Item]) -> list[ContinuationScore]:
        """Each whole sentence's summed log-prob after the server's start token (items with no
        prompt: their answer continuation is the text), from its echo."""
        if prompted := [it.id for it in items if it.prompt]:
            raise ValueError(f"items with a prompt cannot be scored as whole texts: {prompted[0]}")
        texts = [it.continuations[it.answer] for it in items]
        if not items:
            return []
        # The first alone: a server that withholds the first token is refused after one request.
        first = self._sentence(items[0].id, texts[0], run_sync(self._all(texts[:1]))[0])
        echoed = run_sync(self._all(texts[1:]))
        return [first, *(self._sentence(it.id, text, e)
                         for it, text, e in zip(items[1:], texts[1:], echoed))]

    def _sentence(self, item_id: str, text: str, echoed: tuple[Any, int]) -> ContinuationScore:
        """The sum over the echoed tokens after the start token; greedy where each token is its
        position's likeliest among the alternatives the server listed."""
        choice, generated = echoed
        logprobs = choice.logprobs
        tokens = list(getattr(logprobs, "tokens", None) or [])
        values = list(getattr(logprobs, "token_logprobs", None) or [])
        tops = list(getattr(logprobs, "top_logprobs", None) or [])
        count = len(tokens) - generated  # the prompt's echoed tokens
        if count < 1 or len(values) != len(tokens):
            raise ModelError(f"{self.label}: the server echoed no log-probs for item {item_id!r}; "
                             "it cannot score whole sentences (llama.cpp: start it with "
                             "--logits_all true)")
        start_echoed = values[0] is None and "".join(tokens[1:count]).strip() == text.strip()
        if not start_echoed:
            raise ModelError(
                f"{self.label}: the server's echo of item {item_id!r} has no log-prob for the "
                "sentence's first token after the start token (llama-cpp-python's server returns "
                "null there), so its whole-sentence log-likelihood cannot be read; score it with "
                "a local model (--model hf:DIR or a .gguf file) or through a server that echoes "
                "the start token (vLLM)")
        body = values[1:count]
        if not body or any(v is None for v in body):
            raise ModelError(f"{self.label}: no log-prob for a token of item {item_id!r}")
        greedy = len(tops) >= count and all(
            top is not None and float(v) >= max(top.values()) for v, top in zip(
                body, tops[1:count]))
        return ContinuationScore(float(sum(body)), bool(greedy), len(body))

    async def _all(self, texts: Sequence[str]) -> list[Any]:
        async with self.generator._client() as client:
            gate = asyncio.Semaphore(self.generator.config.concurrency)
            return list(await asyncio.gather(*(self._one(client, gate, t) for t in texts)))

    async def _one(self, client: Any, gate: asyncio.Semaphore, text: str) -> Any:
        """One echo, retried on 429, 5xx, timeouts and dropped connections as generation is;
        anything else, or retries run out, stops the run in one line (a rerun resumes)."""
        openai, opts, say = _openai(), self.generator.config, self.generator._say
        async with gate:
            for attempt in range(1, opts.max_retries + 2):
                try:
                    response = await client.completions.create(
                        model=self.generator.model, prompt=text, echo=True, logprobs=1,
                        max_tokens=1, temperature=0.0)
                    usage = getattr(response, "usage", None)
                    return response.choices[0], int(getattr(usage, "completion_tokens", 1) or 0)
                except (openai.RateLimitError, openai.InternalServerError,
                        openai.APIConnectionError) as exc:
                    if attempt > opts.max_retries:
                        raise ModelError(f"{self.label}: gave up after {attempts(attempt)} "
                                         f"({say(exc)}); rerun to resume") from None
                    await asyncio.sleep(retry_wait(exc, attempt, opts.backoff,
                                                   opts.max_backoff, self.label))
                except (openai.APIError, AttributeError, IndexError, TypeError) as exc:
                    raise ModelError(f"{self.label}: cannot score options through "
                                     f"{self.generator.base_url} ({say(exc)}); use --scoring "
                                     "generate") from None
        raise AssertionError("unreachable")
