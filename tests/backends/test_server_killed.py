"""Faults and memory of an HTTP evaluation against a real llama.cpp server (tests/llama_server.py):
the server SIGKILLed and restarted in the middle of a batch, retries running out while it is down,
and memory that does not grow with the number of requests beyond the results themselves.

Each test starts its own server on the session's tiny GGUF (the shared ``llama_server`` is never
killed)."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from biasscope.backends.base import GenerateParams, GenerateRequest, Generation
from biasscope.backends.cache import Cached, ResponseCache, request_key
from biasscope.backends.openai_http import HTTPConfig, OpenAIGenerator
from conftest import SERVER_INSTALL
from llama_server import Server, TinyLlama, serve
from require import missing_modules, require

WORDS = ("nurse", "doctor", "said", "is", "female", "male", "The", "yes", "no")
ONE_TOKEN = GenerateParams(max_tokens=1)
# A restart takes ~2 s here (1 s down + ~1 s to load); 12 retries with ceilings 0.25, 0.5, 1, 2,
# then 3 s (full jitter) sleep 13.9 s on average and less than 4 s with probability ~5e-6.
PATIENT = HTTPConfig(concurrency=4, timeout=20, max_retries=12, backoff=0.25, max_backoff=3.0)
IMPATIENT = HTTPConfig(concurrency=4, timeout=20, max_retries=1, backoff=0.01, max_backoff=0.02)


def batch(n: int, start: int = 0) -> list[GenerateRequest]:
    """``n`` distinct completion prompts (distinct cache keys), one token each."""
    return [GenerateRequest(prompt=f"The {WORDS[i % 9]} {WORDS[i // 9 % 9]} {i}",
                            params=ONE_TOKEN) for i in range(start, start + n)]


@pytest.fixture
def server(tiny_gguf: TinyLlama, tmp_path: Path) -> Iterator[Server]:
    """A server of this test's own, which it may kill."""
    require(missing_modules("llama_cpp", "fastapi", "uvicorn"), "BIASSCOPE_REQUIRE_SERVER",
            SERVER_INSTALL)
    srv = serve(tiny_gguf.path, log_path=tmp_path / "server.log")
    try:
        yield srv
    finally:
        srv.stop()


class Counting(OpenAIGenerator):
    """Sets ``reached`` once ``trigger`` responses have come back (counted in the event loop)."""

    def __init__(self, *args: Any, trigger: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trigger, self.answered, self.reached = trigger, 0, threading.Event()

    async def _send(self, client: Any, request: GenerateRequest, logprobs: bool) -> Any:
        response = await super()._send(client, request, logprobs)
        self.answered += 1
        if self.answered >= self.trigger:
            self.reached.set()
        return response


class Crash(threading.Thread):
    """Once ``gen`` has had ``trigger`` answers: SIGKILL the server, and ``restart_after``
    seconds later start it again on the same port (or leave it down when None)."""

    def __init__(self, server: Server, gen: Counting, restart_after: float | None) -> None:
        super().__init__(daemon=True)
        self.server, self.gen, self.restart_after = server, gen, restart_after
        self.answered_at_kill = -1
        self.down_for = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            if not self.gen.reached.wait(timeout=60):
                raise TimeoutError("the batch never reached the kill point")
            t0 = time.monotonic()
            self.server.kill()
            self.answered_at_kill = self.gen.answered
            if self.restart_after is not None:
                time.sleep(self.restart_after)
                self.server.start()
                self.down_for = time.monotonic() - t0
        except BaseException as exc:  # reported by the test
            self.error = exc


def crash_during(server: Server, gen: Counting, cache: ResponseCache,
                 requests: list[GenerateRequest], restart_after: float | None,
                 ) -> tuple[list[Generation], Cached, Crash]:
    wrapped = Cached(gen, cache)
    crash = Crash(server, gen, restart_after)
    crash.start()
    try:
        out = wrapped.generate(requests)
    finally:
        gen.reached.set()  # never leave the thread waiting
        crash.join(timeout=90)
    assert not crash.is_alive() and crash.error is None, crash.error
    return out, wrapped, crash


def test_a_server_killed_and_restarted_mid_batch_costs_nothing_twice(server, tmp_path):
    requests = batch(60)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    gen = Counting(server.model, server.base_url, config=PATIENT, trigger=15)
    out, wrapped, crash = crash_during(server, gen, cache, requests, restart_after=1.0)

    assert 15 <= crash.answered_at_kill < 60 and crash.down_for >= 1.0
    assert [g.error for g in out if not g.ok] == []  # retries carried every request
    assert all(g.text for g in out) and len(out) == 60
    assert max(g.attempts for g in out) > 1 and wrapped.usage.retries > 0  # the crash was felt
    assert wrapped.usage.sent == 60 and wrapped.usage.failed == 0 and len(cache) == 60

    # A rerun of the same batch (a fresh process would build the same generator) pays nothing.
    again = Cached(OpenAIGenerator(server.model, server.base_url, config=PATIENT), cache)
    second = again.generate(requests)
    assert again.usage.sent == 0 and again.usage.cached == 60
    assert all(g.cached for g in second)
    assert [g.text for g in second] == [g.text for g in out]


def test_retries_run_out_while_the_server_is_down(server, tmp_path):
    requests = batch(60)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    gen = Counting(server.model, server.base_url, config=IMPATIENT, trigger=15)
    out, wrapped, crash = crash_during(server, gen, cache, requests, restart_after=None)
    assert not server.running()

    ok = [g for g in out if g.ok]
    failed = [g for g in out if not g.ok]
    # No exception: the requests the dead server could not answer are failure records.
    assert len(ok) >= 15 and failed, (len(ok), crash.answered_at_kill)
    assert all("gave up after 2 attempts" in (g.error or "") and g.attempts == 2 for g in failed)
    assert all(g.text == "" and not g.cached for g in failed)
    assert len(cache) == len(ok)  # the answered ones are kept, failures never are
    assert wrapped.usage.failed == len(failed) and wrapped.usage.sent == 60

    server.start()  # same port: the cache keys (backend, URL, model, request) still match
    again = Cached(OpenAIGenerator(server.model, server.base_url, config=PATIENT), cache)
    second = again.generate(requests)
    assert again.usage.sent == len(failed) and again.usage.cached == len(ok)
    assert all(g.ok for g in second) and len(cache) == 60
    assert [g.text for g, first in zip(second, out) if first.ok] == [g.text for g in ok]


# --- memory -----------------------------------------------------------------------------------

def traced(run: Any) -> tuple[int, int, int]:
    """(peak above the start, held while the result is alive, left after it is dropped), bytes
    as tracemalloc counts them (Python allocations only; SQLite's page cache is not counted)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = run()
        held, peak = tracemalloc.get_traced_memory()
        del result
        gc.collect()
        left = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return peak - base, held - base, left - base


def test_memory_does_not_grow_with_the_number_of_requests(server, tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    gen = OpenAIGenerator(server.model, server.base_url, config=HTTPConfig(
        concurrency=8, timeout=20, max_retries=3, backoff=0.05, max_backoff=0.2))
    gen.generate(batch(4, start=10_000))  # warm: the /models check, imports, the client

    # Each path: a batch, a 4x larger one, and the larger one again (new HTTP keys each time). The
    # first runs of a size grow containers that stay grown (asyncio's task set, the allocator's
    # free lists: ~10-30 kB); the repeat shows what a run of that size leaves for good.
    small, large = 20, 80
    http = [traced(lambda n=n, s=s: Cached(gen, cache).generate(batch(n, start=s)))
            for n, s in ((small, 0), (large, 1000), (large, 2000))]

    # The cached path: 100 and 400 requests answered from the cache (filled directly: the
    # entries are what an HTTP pass would have stored under the same keys).
    identity = gen.identity()
    stored = Generation(" an", finish_reason="length", prompt_tokens=6, completion_tokens=1)
    for request in batch(400, start=20_000):
        cache.put(request_key(identity, request), stored)
    hits = [traced(lambda n=n, s=s: Cached(gen, cache).generate(batch(n, start=s)))
            for n, s in ((100, 20_000), (400, 20_000), (400, 20_000))]

    for name, runs, (n1, n2) in (("http", http, (small, large)), ("cached", hits, (100, 400))):
        (peak1, held1, _), _, (peak2, held2, left2) = runs
        # Nothing stays behind once the results are dropped: a retained result (a Generation,
        # its request and key: >= 700 bytes) would leave >= 56 kB (http) or 280 kB (cached).
        assert left2 < 16_000 + 300 * n2, (name, runs)
        # The peak grows with the batch by a bounded cost per request (the result, its request,
        # its key and, on the HTTP path, its pending task), not by anything that accumulates.
        per_request = (peak2 - peak1) / (n2 - n1)
        assert per_request < 12_000, (name, per_request, runs)
        assert held2 < 4 * held1 + 40_000, (name, runs)
