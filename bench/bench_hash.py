"""A checkpoint's SHA-256 beside running Python: biasscope's block size against hashlib's own.

Usage::

    python bench/bench_hash.py [--gib 2.8] [--dir /var/tmp] [--repeats 3] [--out BENCHMARKS.md]

A sweep hashes a checkpoint's weight files in background threads while its prefetch thread
loads the checkpoint and its main thread scores the one before: both run Python most of the
time. Each block a hashing thread reads takes the GIL back twice (after the read, after the
hash), and a thread running Python keeps it for up to the switch interval (5 ms) each time.

This writes a file of ``--gib`` GiB of random bytes (the size of a Pythia-1.4b checkpoint in
bfloat16 by default), reads it once so that it is in the page cache, and times, in a thread,
``biasscope.core.digest.file_sha256`` with 8, 32 and 64 MiB blocks (biasscope used 8 MiB
before) and Python's own ``hashlib.file_digest``, each alone and beside a thread that runs
plain Python: wall time and the hashing thread's CPU time, medians of ``--repeats``. Every
digest is checked equal. The section ``hash`` of ``--out`` is replaced.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import median

from bench_sweep import write_section
from biasscope.core import digest

BLOCKS = (1 << 23, 1 << 25, 1 << 26)


def busy(stop: threading.Event) -> None:
    """Plain Python, as a sweep's load or scoring runs between its native calls."""
    total = 0
    while not stop.is_set():
        for i in range(1000):
            total += i


def timed(hash_file: Callable[[], str], beside: bool) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``hash_file`` in a thread of its own, and its digest."""
    stop, out = threading.Event(), {}
    other = threading.Thread(target=busy, args=(stop,))
    if beside:
        other.start()

    def run() -> None:
        start, cpu = time.perf_counter(), time.thread_time()
        out["hex"] = hash_file()
        out["wall"], out["cpu"] = time.perf_counter() - start, time.thread_time() - cpu

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    stop.set()
    if beside:
        other.join()
    return out["wall"], out["cpu"], out["hex"]


def with_block(path: Path, block: int) -> Callable[[], str]:
    def hash_file() -> str:
        saved, digest.BLOCK = digest.BLOCK, block
        try:
            return digest.file_sha256(path)
        finally:
            digest.BLOCK = saved
    return hash_file


def hashlib_own(path: Path) -> Callable[[], str]:
    def hash_file() -> str:
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    return hash_file


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=2.8)
    parser.add_argument("--dir", type=Path, default=None, help="where the file is written")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    methods = {f"biasscope, {b >> 20} MiB blocks": b for b in BLOCKS}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-hash-", dir=args.dir) as tmp:
        path = Path(tmp) / "weights.bin"
        with path.open("wb") as out:
            left = int(args.gib * 2**30)
            while left > 0:
                left -= out.write(os.urandom(min(left, 1 << 26)))
        with_block(path, 1 << 26)()  # into the page cache
        runs: dict[str, Callable[[], str]] = {
            **{name: with_block(path, block) for name, block in methods.items()},
            "`hashlib.file_digest`": hashlib_own(path)}
        digests = set()
        for name, run in runs.items():
            for beside in (False, True):
                seen = [timed(run, beside) for _ in range(args.repeats)]
                digests.update(s[2] for s in seen)
                rows.append((name, beside, median(s[0] for s in seen),
                             median(s[1] for s in seen)))
                print(rows[-1], flush=True)
    if len(digests) != 1:
        raise SystemExit(f"the methods disagree: {sorted(digests)}")
    alone = {name: wall for name, beside, wall, _ in rows if not beside}
    lines = [
        "## A checkpoint's SHA-256 beside running Python (CPU)", "",
        f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC with `python "
        f"bench/bench_hash.py --gib {args.gib} --repeats {args.repeats}` on {platform.machine()}"
        f", {len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}: a "
        f"{args.gib} GiB file in the page cache, hashed in a thread alone and beside a thread "
        "running plain Python (as a sweep's load and scoring run beside its hashing); wall and "
        f"the hashing thread's CPU seconds, medians of {args.repeats}; every digest equal.", "",
        "| method | alone: wall / CPU s | beside Python: wall / CPU s | beside / alone |",
        "| --- | --- | --- | ---: |"]
    for name in runs:
        (_, _, w0, c0), (_, _, w1, c1) = [r for r in rows if r[0] == name]
        lines.append(f"| {name} | {w0:.2f} / {c0:.2f} | {w1:.2f} / {c1:.2f} | "
                     f"{w1 / alone[name]:.2f}x |")
    section = "\n".join(lines) + "\n"
    print(section)
    if args.out:
        write_section(args.out, "hash", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
