"""The response cache: a rerun of the same evaluation sends no requests.

Entries are content-addressed: the key is the SHA-256 of the backend's ``identity()`` (kind,
endpoint, model, revision — never a credential) and the full request (messages or prompt and
every parameter). The caller's request id is not part of it, so two probes asking the same
question share one answer. One SQLite file (WAL mode) is shared by every run and process on a
machine; failures are never cached, so a rerun retries them, and a row that holds no
answer (broken JSON, another shape) is a miss, asked again and overwritten (``_load``).

A cache that cannot be opened, read or written (corrupt, a directory in its place, a full disk,
read-only) stops the run in one line naming the file and what to do (``_unusable``); each
answer is committed as it is cached, so a failed write loses none cached before it.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from biasscope.backends.base import GenerateRequest, Generation, Generator, TokenLogprob
from biasscope.core.errors import BiasscopeError


def default_cache_path() -> Path:
    """``$BIASSCOPE_RESPONSE_CACHE``, else ``~/.cache/biasscope/responses.sqlite``."""
    chosen = os.environ.get("BIASSCOPE_RESPONSE_CACHE")
    return Path(chosen).expanduser() if chosen else (
        Path.home() / ".cache" / "biasscope" / "responses.sqlite")


def request_key(identity: Mapping[str, str], request: GenerateRequest) -> str:
    payload = {
        "backend": dict(identity),
        "messages": [list(m) for m in request.messages] if request.messages else None,
        "prompt": request.prompt,
        "params": asdict(request.params),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a lone surrogate in a prompt is a valid Python str, and its key too.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _dump(generation: Generation) -> str:
    return json.dumps(asdict(replace(generation, cached=False)), separators=(",", ":"))


def _load(text: Any) -> Generation | None:
    """The cached answer, or None for a row that holds none (JSON cut short by a crash or
    another tool, another shape, a failure): a miss, asked again and overwritten. Its key says
    what it answered, so asking costs one request; an error would have the whole file deleted
    for one row, and reading the row as it is would put a wrong answer in a run."""
    try:
        data = json.loads(text)
        tokens = data.pop("tokens")
        if tokens is not None:
            tokens = tuple(TokenLogprob(t["token"], t["logprob"], tuple(
                (token, logprob) for token, logprob in t["top"])) for t in tokens)
        generation = Generation(**data, tokens=tokens)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    numbers = [logprob for t in generation.tokens or () for logprob in
               (t.logprob, *(v for _, v in t.top))]
    words = [generation.text, *(w for t in generation.tokens or ()
                                for w in (t.token, *(k for k, _ in t.top)))]
    counts = (generation.prompt_tokens, generation.completion_tokens, generation.attempts)
    sound = (generation.ok and isinstance(generation.finish_reason, (str, type(None)))
             and all(isinstance(w, str) for w in words)
             and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers)
             and all(type(n) is int for n in counts))
    return generation if sound else None


class ResponseCache:
    """Generations by request key, in one SQLite file."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            # Each answer is committed as it arrives; in WAL mode NORMAL syncs the disk at
            # checkpoints only, so a commit costs microseconds, not an fsync (4 ms each: 8 s
            # of 2000 answers). A killed process loses none; only a power cut can lose the
            # last answers, which a rerun asks again.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses "
                             "(key TEXT PRIMARY KEY, generation TEXT NOT NULL)")
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise self._unusable(exc, "open") from None

    def _unusable(self, exc: BaseException, doing: str) -> BiasscopeError:
        """The one line for a cache SQLite refused: a corrupt file can only be deleted (its
        answers are lost); anything else (full disk, no permission, a directory in its place,
        locked) leaves the answers in it, and another file does for this run."""
        text = str(exc) or type(exc).__name__
        if self.path.is_dir():
            return BiasscopeError(f"response cache {self.path} is a directory: pass a file with "
                                  "--cache (or --no-cache)")
        if isinstance(exc, sqlite3.DatabaseError) and any(
                word in text for word in ("not a database", "malformed", "corrupt")):
            return BiasscopeError(f"response cache {self.path}: cannot {doing} it ({text}): it "
                                  "is corrupt; delete it (its answers are lost), or pass another "
                                  "--cache or --no-cache")
        kept = "; the answers cached so far are kept" if doing == "write" else ""
        return BiasscopeError(f"response cache {self.path}: cannot {doing} it ({text}){kept}; "
                              "free space or fix its permissions, or pass another --cache or "
                              "--no-cache")

    def get_many(self, keys: Iterable[str]) -> dict[str, Generation]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Generation] = {}
        with self._lock:
            try:
                for start in range(0, len(wanted), 500):
                    chunk = wanted[start:start + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(
                        f"SELECT key, generation FROM responses WHERE key IN ({marks})", chunk)
                    found.update((key, answer) for key, text in rows
                                 if (answer := _load(text)) is not None)
            except sqlite3.Error as exc:
                raise self._unusable(exc, "read") from None
        return found

    def put(self, key: str, generation: Generation) -> None:
        if not generation.ok:
            return
        with self._lock:
            try:
                self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)",
                                 (key, _dump(generation)))
                self._db.commit()
            except sqlite3.Error as exc:
                # The failed insert only: every answer committed before it stays.
                with contextlib.suppress(sqlite3.Error):
                    self._db.rollback()
                raise self._unusable(exc, "write") from None

    def __len__(self) -> int:
        with self._lock:
            try:
                return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
            except sqlite3.Error as exc:
                raise self._unusable(exc, "read") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()


@dataclass
class Usage:
    """What a run cost: requests actually sent versus answered from the cache, tokens paid."""

    requests: int = 0
    sent: int = 0
    cached: int = 0
    failed: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    first_error: str | None = None

    def add(self, generation: Generation, sent: bool) -> None:
        self.requests += 1
        self.failed += not generation.ok
        if self.first_error is None and generation.error:
            self.first_error = generation.error
        if not sent:
            self.cached += 1
            return
        self.sent += 1
        self.retries += max(0, generation.attempts - 1)
        self.prompt_tokens += generation.prompt_tokens
        self.completion_tokens += generation.completion_tokens

    def line(self) -> str:
        return (f"{self.requests} requests: {self.sent} sent, {self.cached} from the cache, "
                f"{self.failed} failed, {self.retries} retries; tokens paid: "
                f"{self.prompt_tokens} prompt + {self.completion_tokens} completion")


class Cached:
    """A generator behind the cache, counting usage: only misses reach ``inner``, and
    identical requests within one call are sent once."""

    def __init__(self, inner: Generator, cache: ResponseCache | None) -> None:
        self.inner = inner
        self.cache = cache
        self.label = inner.label
        self.usage = Usage()

    def identity(self) -> dict[str, str]:
        return self.inner.identity()

    @property
    def tokenizer(self) -> Any:
        """The inner backend's tokenizer, if it has one (a judge's keys are checked on it)."""
        return getattr(self.inner, "tokenizer", None)

    def tokenize(self, text: str) -> list[int] | None:
        tokenize = getattr(self.inner, "tokenize", None)
        return tokenize(text) if tokenize is not None else None

    def _send(self, todo: dict[str, GenerateRequest]) -> list[Generation]:
        """The misses' answers, each cached as it arrives where the backend tells them one by
        one (an HTTP backend): a run stopped midway keeps every answer it paid for."""
        cache, keys = self.cache, list(todo)
        if cache is None:
            return self.inner.generate(list(todo.values()))
        try:
            told = "on_answer" in inspect.signature(self.inner.generate).parameters
        except (TypeError, ValueError):  # not introspectable: answers cached at the end
            told = False
        if told:
            return self.inner.generate(list(todo.values()),  # type: ignore[call-arg]
                                       on_answer=lambda i, g: cache.put(keys[i], g))
        answers = self.inner.generate(list(todo.values()))
        for key, generation in zip(keys, answers):
            cache.put(key, generation)
        return answers

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        identity = self.inner.identity()
        keys = [request_key(identity, r) for r in requests]
        hits = self.cache.get_many(keys) if self.cache is not None else {}
        todo = {k: r for k, r in zip(keys, requests) if k not in hits}
        fresh = dict(zip(todo, self._send(todo))) if todo else {}
        out, counted = [], set[str]()
        for key in keys:
            if key in hits:
                result = replace(hits[key], cached=True)
                self.usage.add(result, sent=False)
            else:
                result = fresh[key]
                self.usage.add(result, sent=key not in counted)
                counted.add(key)
            out.append(result)
        return out
