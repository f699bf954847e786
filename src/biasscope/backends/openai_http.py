"""OpenAI-compatible HTTP generation: OpenAI itself, vLLM ``serve``, llama.cpp, Ollama, TGI, ...

Requests go out through the official ``openai`` async client, at most ``concurrency`` at a
time. Chat requests use ``/chat/completions``, plain prompts the legacy ``/completions``.
Retries are ours, not the client's, so that each is counted: 429, 5xx, timeouts, dropped
connections and malformed bodies are retried with exponential backoff and full jitter (or
after the server's ``Retry-After``); when retries run out the request becomes a failure record.
Mistakes a retry cannot fix — a rejected key, an unknown model, an unreachable server before
anything was answered — stop the run with one line that says what to do. Every error text
that is kept (failure records, messages) has the key removed first (``backends.redact``).
A base URL's own credentials (``http://user:KEY@host/v1``, ``?api-key=KEY``) are used for the
requests but never shown: ``base_url`` (identity, run.json, cache key, messages) is redacted.

Logprobs are detected, not assumed: a server that answers without them, or rejects the
parameter, is remembered as lacking them (``capabilities``) and later requests go without.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import math
import random
import re
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from biasscope.backends.base import GenerateRequest, Generation, TokenLogprob
from biasscope.backends.redact import error_line, redact_url, url_secrets
from biasscope.backends.specs import HTTPConfig as HTTPConfig  # declared with the other settings
from biasscope.core.errors import ModelError, install_hint
from biasscope.core.renamed import renamed

OPENAI_URL = "https://api.openai.com/v1"
T = TypeVar("T")
#: Told each answer as it arrives: its index among the requests, and the answer.
Answered = Callable[[int, Generation], None]


def _openai() -> Any:
    try:
        import openai
    except ImportError:
        raise ModelError("HTTP backends need the 'openai' extra: "
                         + install_hint("openai")) from None
    return openai


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion, also from inside a running loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: T = box["value"]
    return result


def retry_after(exc: Exception) -> float | None:
    """Seconds the server asked us to wait (``Retry-After``/``retry-after-ms``), if it did."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            if math.isfinite(wait := float(ms) / 1000):
                return max(0.0, wait)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:  # an HTTP date; anything else ("soon") is no hint, and the backoff decides
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time() if when.tzinfo else math.nan
    return max(0.0, seconds) if math.isfinite(seconds) else None


#: The longest a server's ``Retry-After`` is waited, per retry.
LONGEST_WAIT_S = 300.0
#: A wait at least this long is said on stderr: a silent one reads as a hung command.
SAID_WAIT_S = 30.0


def retry_wait(exc: Exception, attempt: int, backoff: float, max_backoff: float,
               label: str) -> float:
    """Seconds to wait before retry ``attempt``: what the server asked (``Retry-After``, at
    most `LONGEST_WAIT_S`), else a jittered exponential backoff. A long one is said, with what
    asked for it and how many minutes at most, so a rate-limited run is not taken for a hung one."""
    asked = retry_after(exc) or 0.0
    wait = min(LONGEST_WAIT_S, asked) or random.uniform(
        0, min(max_backoff, backoff * 2 ** (attempt - 1)))
    if wait >= SAID_WAIT_S:
        from biasscope.core.steps import say

        capped = f" (it asked {asked:.0f} s; waits are capped there)" if asked > wait else ""
        say(f"{label}: waiting {wait:.0f} s before retry {attempt}, as the server asked"
            f"{capped}" if asked else f"{label}: waiting {wait:.0f} s before retry {attempt}")
    return wait


def attempts(count: int) -> str:
    return f"{count} attempt{'' if count == 1 else 's'}"


class OpenAIGenerator:
    """One model behind one OpenAI-compatible endpoint."""

    def __init__(self, model: str, base_url: str = OPENAI_URL, api_key: str | None = None,
                 config: HTTPConfig | None = None, kind: str = "openai-compatible") -> None:
        if not model:
            raise ModelError(f"{kind}: no model name given")
        # The URL as given, credentials and all, is used for requests only; ``base_url`` is
        # what is recorded and shown, and keys the cache (a rotated credential still hits it).
        self._url = base_url.rstrip("/")
        self.model, self.base_url, self.kind = model, redact_url(self._url), kind
        self.config = config or HTTPConfig()
        self.label = f"{kind}:{model}"
        self._api_key = api_key or "EMPTY"  # local servers take any key; held in memory only
        self._secrets: tuple[str, ...] = (*((api_key,) if api_key else ()),
                                          *url_secrets(self._url))
        self.capabilities: dict[str, bool] = {}
        self._checked = False

    def identity(self) -> dict[str, str]:
        return {"backend": self.kind, "base_url": self.base_url, "model": self.model}

    def _say(self, exc: BaseException) -> str:
        """An error's first line without the key: every error text we keep goes through here."""
        return error_line(exc, self._secrets)

    def tokenize(self, text: str) -> list[int] | None:
        """The server's token ids for ``text`` (what ``logit_bias`` keys are), or None when
        the server exposes no tokenizer: llama.cpp's and vLLM's ``/tokenize``, llama-cpp-python's
        ``/extras/tokenize``; OpenAI's own models through ``tiktoken`` when it is installed."""
        if self.kind == "openai":
            try:
                import tiktoken
            except ImportError:
                return None
            try:
                return list(tiktoken.encoding_for_model(self.model).encode(text))
            except KeyError:
                return None
        if "tokenize" not in self.capabilities or self.capabilities["tokenize"]:
            if not self._checked:  # a judge tokenizes first: say a wrong URL or model as such
                run_sync(self._check_alone())
            ids = self._tokenize_patiently(text)
            self.capabilities["tokenize"] = ids is not None
            return ids
        return None

    def _tokenize_patiently(self, text: str) -> list[int] | None:
        """A tokenizer that did not answer (a one-request-at-a-time server busy with another
        client) is asked again like a request, never taken for "no tokenizer": that would
        silently drop a judge's logit_bias for the rest of the run."""
        http, last = self.config, ""
        for attempt in range(http.max_retries + 1):
            try:
                return _server_tokenize(self._url, self.model, text, self._api_key,
                                        http.timeout)
            except _NoAnswer as exc:
                last = self._say(exc)
            if attempt < http.max_retries:
                time.sleep(random.uniform(0, min(http.max_backoff, http.backoff * 2**attempt)))
        raise ModelError(f"{self.label}: the server's tokenizer did not answer in "
                         f"{http.max_retries + 1} attempts ({last}); raise --timeout or "
                         "--retries, or run when the server is less busy")

    def _client(self) -> Any:
        # The client appends each endpoint to the base URL's text, query and all: a query
        # (``?api-version=``, ``?api-key=``) goes with every request instead.
        url, _, query = self._url.partition("?")
        return _openai().AsyncOpenAI(base_url=url, api_key=self._api_key,
                                     default_query=dict(parse_qsl(query)) or None,
                                     max_retries=0, timeout=self.config.timeout)

    def generate(self, requests: Sequence[GenerateRequest],
                 on_answer: Answered | None = None) -> list[Generation]:
        """The answers in order; ``on_answer(i, answer)`` as each arrives, so that a run
        stopped midway (killed, a key revoked) has kept what it paid for."""
        return run_sync(self.agenerate(requests, on_answer))

    async def agenerate(self, requests: Sequence[GenerateRequest],
                        on_answer: Answered | None = None) -> list[Generation]:
        if not requests:
            return []
        async with self._client() as client:
            if not self._checked:
                await self._check(client)
            gate = asyncio.Semaphore(self.config.concurrency)
            tasks = [asyncio.ensure_future(self._told(client, gate, r, i, on_answer))
                     for i, r in enumerate(requests)]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                # A request that stops the run (bad key, no such model): end the others
                # before the client closes, not after, when they would outlive it.
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    async def _check_alone(self) -> None:
        async with self._client() as client:
            await self._check(client)

    async def _check(self, client: Any) -> None:
        """Fail fast, with what to do, on an unreachable server, a bad key or a wrong model."""
        openai = _openai()
        try:
            served = [m.id async for m in client.models.list()]
        except openai.AuthenticationError:
            raise ModelError(f"{self.label}: {self.base_url} rejected the API key; set the "
                             "right key (--api-key-env NAME or OPENAI_API_KEY)") from None
        except openai.APIConnectionError as exc:
            raise ModelError(f"{self.label}: cannot reach {self.base_url} ({self._say(exc)}); "
                             "start the server or fix the base URL") from None
        except (openai.APIStatusError, openai.APIResponseValidationError, ValueError):
            served = []  # no usable /models: the first request will tell
        if served and self.model not in served:
            raise ModelError(f"{self.label}: {self.base_url} does not serve {self.model!r}; it "
                             f"serves {', '.join(sorted(served)[:10])}")
        self._checked = True

    async def _told(self, client: Any, gate: asyncio.Semaphore, request: GenerateRequest,
                    index: int, on_answer: Answered | None) -> Generation:
        generation = await self._one(client, gate, request)
        if on_answer is not None:
            on_answer(index, generation)
        return generation

    async def _one(self, client: Any, gate: asyncio.Semaphore,
                   request: GenerateRequest) -> Generation:
        openai = _openai()
        http = self.config
        async with gate:
            attempt = 0
            while True:
                attempt += 1
                logprobs = request.params.wants_logprobs and self.capabilities.get(
                    "logprobs", True)
                try:
                    response = await self._send(client, request, logprobs)
                    return self._parse(response, request, attempt)
                except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                    # Not the server's text: some servers echo part of the key back.
                    raise ModelError(f"{self.label}: {self.base_url} refused the request "
                                     f"(HTTP {exc.status_code}); check the API key and its "
                                     "permissions") from None
                except openai.NotFoundError as exc:
                    raise ModelError(f"{self.label}: {self.base_url} has no such model or "
                                     f"endpoint ({self._say(exc)}); check the model name "
                                     "and base URL") from None
                except openai.BadRequestError as exc:
                    if logprobs and "logprob" in str(exc).lower():
                        self.capabilities["logprobs"] = False
                        attempt -= 1
                        continue  # not a retry: the same request, without what it can't do
                    return Generation("", attempts=attempt,
                                      error=f"{self.label} rejected the request: "
                                      f"{self._say(exc)}")
                except (openai.RateLimitError, openai.InternalServerError,
                        openai.APIConnectionError, openai.APIResponseValidationError,
                        openai.APIStatusError, ValueError) as exc:
                    status = getattr(exc, "status_code", None)
                    if isinstance(exc, openai.APIStatusError) and status is not None and (
                            status < 500 and status not in (408, 409, 429)):
                        return Generation("", attempts=attempt, error=f"{self.label}: "
                                          f"HTTP {status}: {self._say(exc)}")
                    if attempt > http.max_retries:
                        what = f"HTTP {status}" if status else type(exc).__name__
                        if isinstance(exc, (openai.APIResponseValidationError, ValueError)):
                            what = "malformed response" + (
                                ", not JSON" if isinstance(exc, json.JSONDecodeError) else "")
                        return Generation("", attempts=attempt, error=(
                            f"{self.label}: gave up after {attempts(attempt)} ({what}: "
                            f"{self._say(exc)})"))
                    await asyncio.sleep(retry_wait(exc, attempt, http.backoff, http.max_backoff,
                                                   self.label))

    def _body(self, request: GenerateRequest, logprobs: bool) -> dict[str, Any]:
        """The request's keyword arguments: ``messages`` (chat) or ``prompt`` (completions)."""
        p = request.params
        body: dict[str, Any] = {"model": self.model, "temperature": p.temperature}
        if p.seed is not None:
            body["seed"] = p.seed
        if p.stop:
            body["stop"] = list(p.stop)
        if p.logit_bias:
            body["logit_bias"] = {str(token): bias for token, bias in p.logit_bias}
        if request.messages is None:
            body.update(prompt=request.prompt, max_tokens=p.max_tokens)
            if logprobs:
                body["logprobs"] = p.top_logprobs
            return body
        body["messages"] = [{"role": role, "content": text} for role, text in request.messages]
        # OpenAI's own API has moved to max_completion_tokens; other servers know max_tokens.
        body["max_completion_tokens" if self.kind == "openai" else "max_tokens"] = p.max_tokens
        if logprobs:
            body["logprobs"] = True
            if p.top_logprobs:
                body["top_logprobs"] = p.top_logprobs
        return body

    async def _send(self, client: Any, request: GenerateRequest, logprobs: bool) -> Any:
        body = self._body(request, logprobs)
        if request.messages is not None:
            return await client.chat.completions.create(**body)
        return await client.completions.create(**body)

    def _parse(self, response: Any, request: GenerateRequest, attempt: int) -> Generation:
        """The answer, or ``Malformed`` for a body not of the API's shape: it is retried like
        a 5xx and, when retries run out, a failure record, never an (empty) answer."""
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise Malformed(f"no choices in the response of {self.base_url}")
        choice, chat = choices[0], request.messages is not None
        part = "message" if chat else "text"
        said = getattr(getattr(choice, "message", None), "content", _NONE) if chat else (
            getattr(choice, "text", None))  # a chat's content may be null, a completion's not
        if said is _NONE or (said is None and not chat):
            raise Malformed(f"a choice without its {part} in the response of {self.base_url}")
        if not isinstance(said, (str, type(None))):
            raise Malformed(f"the {part} is not text in the response of {self.base_url}")
        finish = getattr(choice, "finish_reason", None)
        try:
            tokens = (_chat_tokens if chat else _completion_tokens)(
                getattr(choice, "logprobs", None))  # litellm may omit it
            usage = getattr(response, "usage", None)
            used = (int(getattr(usage, "prompt_tokens", 0) or 0),
                    int(getattr(usage, "completion_tokens", 0) or 0))
        except (AttributeError, TypeError, ValueError, OverflowError) as exc:
            raise Malformed(f"logprobs or usage of the wrong shape in the response of "
                            f"{self.base_url} ({exc})") from None
        if request.params.wants_logprobs and "logprobs" not in self.capabilities:
            self.capabilities["logprobs"] = tokens is not None
        return Generation(
            text=whole(said or ""), finish_reason=finish if isinstance(finish, str) else None,
            tokens=tokens, prompt_tokens=used[0], completion_tokens=used[1], attempts=attempt)


class Malformed(ValueError):
    """A server's answer that is not of the API's shape (no choices, a choice without its
    message, logprobs of another shape): retried, then a failure record."""


_NONE = object()  # an attribute that is not there at all


_SURROGATE = re.compile("[\ud800-\udfff]")


def whole(text: str) -> str:
    """``text`` with each lone UTF-16 surrogate replaced by U+FFFD. A server's JSON may spell
    half a character (``"\\ud83d"``, a byte-level token cut mid-emoji); UTF-8 cannot hold it,
    so neither the cache nor the output file could, and the answer keeps a visible mark."""
    return _SURROGATE.sub("\ufffd", text) if isinstance(text, str) and not text.isascii() else text


def _token(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a token that is not text: {value!r:.40}")
    return whole(value)


def _logprob(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a logprob that is not a number: {value!r:.40}")
    return float(value)


def _listed(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{what} is not a list: {value!r:.40}")
    return value


def _chat_tokens(logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    """The tokens of a chat answer's ``logprobs``; ``TypeError`` when they are of another shape
    (a list, a string, tokens without a number): read as "no logprobs", a broken body would
    turn the server's logprobs off for the rest of the run."""
    if logprobs is None:
        return None
    if isinstance(logprobs, (list, str, bytes, int, float)):
        raise TypeError(f"logprobs is not an object: {logprobs!r:.40}")
    content = getattr(logprobs, "content", None)
    if content is None:
        return None
    return tuple(TokenLogprob(_token(t.token), _logprob(t.logprob), tuple(
        (_token(a.token), _logprob(a.logprob))
        for a in _listed(t.top_logprobs or [], "top_logprobs")))
        for t in _listed(content, "logprobs.content"))


def _completion_tokens(logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    """The tokens of a completion's ``logprobs``; ``TypeError`` when they are of another
    shape (see ``_chat_tokens``), lists of different lengths included."""
    if logprobs is None:
        return None
    if isinstance(logprobs, (list, str, bytes, int, float)):
        raise TypeError(f"logprobs is not an object: {logprobs!r:.40}")
    tokens = getattr(logprobs, "tokens", None)
    if tokens is None:
        return None
    tokens = _listed(tokens, "logprobs.tokens")
    values = _listed(logprobs.token_logprobs or [None] * len(tokens), "token_logprobs")
    tops = _listed(logprobs.top_logprobs or [None] * len(tokens), "top_logprobs")
    if not len(tokens) == len(values) == len(tops):
        raise TypeError(f"{len(tokens)} tokens, {len(values)} logprobs and {len(tops)} "
                        "top_logprobs")
    for top in tops:
        if not isinstance(top, (dict, type(None))):
            raise TypeError(f"a top_logprobs entry is not an object: {top!r:.40}")
    return tuple(
        TokenLogprob(_token(token), _logprob(value) if value is not None else float("nan"),
                     tuple(sorted(((_token(k), _logprob(v)) for k, v in (top or {}).items()),
                                  key=lambda kv: -kv[1])))
        for token, value, top in zip(tokens, values, tops))


class _NoAnswer(Exception):
    """A tokenize endpoint that is there but did not answer this time (timeout, refused, 5xx)."""


# Statuses that mean "no tokenizer here" (no such endpoint, another request shape, no access);
# any other failure is one to retry.
_ABSENT = frozenset({400, 401, 403, 404, 405, 422, 501})


def _server_tokenize(base_url: str, model: str, text: str, key: str,
                     timeout: float = 10.0) -> list[int] | None:
    """Try the tokenize endpoints servers expose; leading special tokens (BOS) are removed by
    tokenizing the empty string too. None when no endpoint is there; ``_NoAnswer`` when one
    did not answer."""
    import urllib.error
    import urllib.request

    url_of, authorization = _tokenize_url(base_url, key)
    attempts = [(url_of("/extras/tokenize"), {"input": "{text}"}),  # llama-cpp-python
                (url_of("/tokenize"), {"model": model, "prompt": "{text}"}),  # vLLM
                (url_of("/tokenize"), {"content": "{text}"})]  # llama.cpp server
    for url, shape in attempts:
        found: list[list[int]] = []
        shown = redact_url(url)
        for value in (text, ""):
            body = {k: (value if v == "{text}" else v) for k, v in shape.items()}
            request = urllib.request.Request(
                url, json.dumps(body).encode(), {"Content-Type": "application/json",
                                                 "Authorization": authorization})
            try:
                with urllib.request.urlopen(request, timeout=timeout) as response:
                    tokens = json.loads(response.read()).get("tokens")
            except urllib.error.HTTPError as exc:
                if exc.code in _ABSENT:
                    break
                raise _NoAnswer(f"{shown}: HTTP {exc.code}") from None
            except (urllib.error.URLError, OSError) as exc:
                raise _NoAnswer(f"{shown}: {getattr(exc, 'reason', exc)}") from None
            except (ValueError, AttributeError, RecursionError):
                break
            ids: list[Any] = [t.get("id") if isinstance(t, dict) else t for t in tokens
                              ] if isinstance(tokens, list) else [None]
            if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                break  # not token ids (strings, floats, objects without "id"): no tokenizer
            found.append(ids)
        if len(found) == 2:
            ids, prefix = found
            return ids[len(prefix):] if ids[: len(prefix)] == prefix else ids
    return None


def _tokenize_url(base_url: str, key: str) -> tuple[Callable[[str], str], str]:
    """Each tokenize endpoint's URL beside the server root, and the Authorization header: the
    base URL's user info is sent as Basic auth, as the HTTP client does for the other
    requests (urllib cannot take it in the URL), and its query goes with every endpoint."""
    parts = urlsplit(base_url)
    user, at, host = parts.netloc.rpartition("@")
    name, _, password = user.partition(":")
    authorization = "Basic " + base64.b64encode(
        f"{unquote(name)}:{unquote(password)}".encode()).decode() if at else f"Bearer {key}"
    root = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path

    def url_of(endpoint: str) -> str:
        return urlunsplit(parts._replace(netloc=host, path=root + endpoint))
    return url_of, authorization


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"HTTPOptions": "HTTPConfig"}, globals().__getitem__)
