"""HTTP evaluation benchmark: biasscope's OpenAI-compatible backend against a local llama.cpp
server (llama-cpp-python, the tiny GGUF of tests/llama_server.py), through the response cache.

Pass 1 sends ``--requests`` distinct one-token completion requests at ``--concurrency`` through
``Cached(OpenAIGenerator(...), ResponseCache(<fresh file>))``, in chunks of ``--chunk`` (one
``generate`` call per chunk, as a long evaluation would), and reports lost items (requests with
no result or a failure record), requests/s, per-request latency (the time around each
``_send``: one HTTP attempt, queueing in the client and the server included, the semaphore wait
excluded) p50/p95/p99, and this process's RSS high-water mark after 500, 1000, ... requests.
Pass 2 runs the same requests again and must be served entirely from the cache (requests/s).

    python bench/bench_http.py                     # 2000 requests, concurrency 32
    python bench/bench_http.py --requests 4000 --out /tmp/b.md

The results are appended to BENCHMARKS.md as a section (``--out`` to write elsewhere).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from biasscope.backends.base import GenerateParams, GenerateRequest  # noqa: E402
from biasscope.backends.cache import Cached, ResponseCache  # noqa: E402
from biasscope.backends.openai_http import HTTPConfig, OpenAIGenerator  # noqa: E402
from llama_server import serve, write_tiny_gguf  # noqa: E402

WORDS = ("nurse", "doctor", "said", "is", "female", "male", "The", "yes", "no")


class Timed(OpenAIGenerator):
    """Records the wall time of every HTTP attempt."""

    latencies: list[float]

    async def _send(self, client: Any, request: GenerateRequest, logprobs: bool) -> Any:
        t0 = time.perf_counter()
        try:
            return await super()._send(client, request, logprobs)
        finally:
            self.latencies.append(time.perf_counter() - t0)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def current_rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--chunk", type=int, default=250)
    ap.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench-http-"))
    tiny = write_tiny_gguf(work / "tiny.gguf")
    requests = [GenerateRequest(prompt=f"The {WORDS[i % 9]} {WORDS[i // 9 % 9]} {i}",
                                params=GenerateParams(max_tokens=1))
                for i in range(args.requests)]
    http = HTTPConfig(concurrency=args.concurrency, timeout=60, max_retries=5,
                      backoff=0.2, max_backoff=2.0)
    load_before = os.getloadavg()[0]
    with serve(tiny.path, log_path=work / "server.log") as server:
        cache = ResponseCache(work / "cache.sqlite")  # fresh
        gen = Timed(server.model, server.base_url, config=http)
        gen.latencies = []
        wrapped = Cached(gen, cache)
        rss_start = current_rss_mib()
        marks: dict[int, tuple[float, float]] = {}
        results = []
        t0 = time.perf_counter()
        for start in range(0, len(requests), args.chunk):
            results += wrapped.generate(requests[start:start + args.chunk])
            done = len(results)
            if done % 500 == 0 or done == len(requests):
                marks[done] = (peak_rss_mib(), current_rss_mib())
        first_s = time.perf_counter() - t0
        lost = sum(1 for g in results if not g.ok) + (len(requests) - len(results))
        usage1 = wrapped.usage

        again = Cached(OpenAIGenerator(server.model, server.base_url, config=http), cache)
        t0 = time.perf_counter()
        second = again.generate(requests)
        second_s = time.perf_counter() - t0
        usage2 = again.usage
        assert [g.text for g in second] == [g.text for g in results]
    load_after = os.getloadavg()[0]

    lat = gen.latencies
    rows = {
        "requests": f"{len(requests)}",
        "lost (no result or failure record)": f"{lost}",
        "pass 1 (HTTP) requests/s": f"{len(requests) / first_s:.1f} ({first_s:.1f} s)",
        "pass 1 sent / retries": f"{usage1.sent} / {usage1.retries}",
        "latency p50 / p95 / p99 (ms)": " / ".join(f"{1000 * percentile(lat, q):.1f}"
                                                   for q in (50, 95, 99)),
        "latency max (ms)": f"{1000 * max(lat):.1f}",
        "RSS before pass 1 (MiB)": f"{rss_start:.1f}",
        **{f"peak RSS after {n} requests (MiB; current)": f"{p:.1f} ({c:.1f})"
           for n, (p, c) in marks.items() if n in (500, 1000, 2000) or n == len(requests)},
        "pass 2 (cache) requests/s": f"{len(requests) / second_s:.0f} ({second_s:.2f} s)",
        "pass 2 sent / from the cache": f"{usage2.sent} / {usage2.cached}",
    }
    import httpx
    import llama_cpp
    import openai

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = "\n".join([
        "", "<!-- bench:http:start -->", "## HTTP evaluation (local llama.cpp server)", "",
        f"Run {when} with `python bench/bench_http.py --requests {args.requests} "
        f"--concurrency {args.concurrency}` ({args.chunk} requests per `generate` call).", "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
        f"(shared), Python {platform.python_version()}, Linux {platform.release()}; "
        f"llama-cpp-python {llama_cpp.__version__} (`python -m llama_cpp.server`, 1 thread, "
        f"tiny GGUF of tests/llama_server.py), openai {openai.__version__}, httpx "
        f"{httpx.__version__}; 1-minute load average {load_before:.1f} before, "
        f"{load_after:.1f} after.", "",
        "Each request is a distinct one-token completion (`max_tokens=1`) through "
        "`Cached(OpenAIGenerator, ResponseCache(fresh file))`; latency is the time around each "
        "HTTP attempt (`_send`), so with one server thread it is mostly queueing behind the "
        "other in-flight requests. RSS is this client process's (the server runs in its own).",
        "", "| measure | value |", "| --- | ---: |",
        *(f"| {k} | {v} |" for k, v in rows.items()),
        "<!-- bench:http:end -->", ""])
    print(section)
    text = args.out.read_text() if args.out.exists() else ""
    if "<!-- bench:http:start -->" in text:  # replace an earlier run's section
        head, rest = text.split("<!-- bench:http:start -->", 1)
        tail = rest.split("<!-- bench:http:end -->", 1)[1]
        text = head.rstrip("\n") + "\n" + tail.lstrip("\n")
    args.out.write_text(text.rstrip("\n") + "\n" + section)
    return 0 if lost == 0 and usage2.sent == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
