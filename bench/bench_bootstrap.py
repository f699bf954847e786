"""Bootstraps in blocks of resamples against the single draw of every resample: peak memory,
time, and that the numbers are the same.

Usage::

    python bench/bench_bootstrap.py [--resamples 2000,10000,100000] [--out BENCHMARKS.md]

A percentile bootstrap over a probe's items drew ``rng.integers(0, n, (n_resamples, n))``
at once, gathered the values with it and reduced the rows: resamples x items of indices and
as much again of values. Now `biasscope.core.bootstrap.index_blocks` draws blocks of whole
rows (the single draw's, bit for bit) and each block is reduced before the next is drawn.
Measured here, each in a fresh process per method and resample count:

- **CrowS-Pairs' median** over 1508 pairs (its real count; synthetic log-likelihood
  differences): blocks, `biasscope.probes.crows_pairs.metrics.quantile_interval`; all at
  once, the same statistic of the single draw (the code before blocks).
- **The judge's agreement** (`biasscope.judge.agreement.agreement`: Cohen's κ of every pair of
  3 judges, Fleiss' κ, Krippendorff's α) over 1508 items, 3 labels, a tenth of verdicts
  missing: blocks, the library call; all at once, the same statistics of the single draw (the
  code before blocks, from the module's own helpers); and **library calls**, the blocks with
  each resample's Fleiss' κ and α a statsmodels and a ``krippendorff`` call (the code before
  they were one pass a block), its numbers within 1e-12 of the blocks'. Not at 100,000
  resamples: all at once would hold 4.5 GB.
- **The judge's leaderboard** (`biasscope.judge.rankings.rankings`, Bradley-Terry) of 4
  systems by 2 judges over 1512 verdicts: blocks, the library call; all at once, each
  judge's scores fitted to the single draw (the code before blocks). Not at 100,000
  resamples: all at once would hold about 9 GB.

Each child first runs the bootstrap on 10 resamples (so that no figure counts lazy imports:
statsmodels, ``krippendorff``), then timed (wall seconds, the median of up to 3 calls while
they take under 2 s together) with its resident memory's high-water mark reset just before
each (``/proc/self/clear_refs``): **RSS** is the first call's peak (``VmHWM``) minus the
resident memory before it. Then once more under ``tracemalloc``:
**traced** is the peak of what Python and NumPy allocated during the call. Both methods'
results are compared by ``repr`` (every digit of every interval). The ``bootstrap`` section
of ``--out`` is replaced.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from bench_sweep import write_section
from biasscope.core.bootstrap import BLOCK_CELLS

ITEMS = 1508  # CrowS-Pairs' pairs
SYSTEMS = ("alpha", "beta", "gamma", "delta")
CASES = {"crows-median": "CrowS-Pairs' median", "agreement": "judge agreement",
         "leaderboard": "judge leaderboard (Bradley-Terry)"}
MOST = {"crows-median": 100_000, "agreement": 10_000, "leaderboard": 10_000}


def crows(method: str, n_resamples: int) -> Callable[[], Any]:
    from biasscope.core.intervals import percentile_interval
    from biasscope.probes.crows_pairs.metrics import quantile_interval

    x = np.random.default_rng(0).normal(0.2, 1.5, ITEMS)
    if method == "blocks":
        return lambda: quantile_interval(x, 0.5, n_resamples)

    def at_once() -> dict[str, Any]:  # the code before blocks, line for line
        rng = np.random.default_rng(0)
        draws = np.quantile(x[rng.integers(0, x.size, (n_resamples, x.size))], 0.5, axis=1)
        ci = percentile_interval(float(np.quantile(x, 0.5)), draws, 0.95)
        return {"estimate": ci.estimate, "low": ci.low, "high": ci.high, "n": int(x.size)}
    return at_once


def agreement(method: str, n_resamples: int) -> Callable[[], Any]:
    from biasscope.judge import agreement as ag

    rng = np.random.default_rng(1)
    truth = rng.choice(["A", "B", "C"], ITEMS)

    def judge(p: float) -> list[str | None]:
        out = np.where(rng.random(ITEMS) < p, truth, rng.choice(["A", "B", "C"], ITEMS))
        return [None if m else str(v) for v, m in zip(out, rng.random(ITEMS) < 0.1, strict=True)]

    verdicts = {"gpt": judge(0.8), "claude": judge(0.6), "llama": judge(0.3)}
    if method == "blocks":
        return lambda: ag.agreement(verdicts, n_resamples=n_resamples)

    def at_once() -> Any:
        judges, codes, n_labels = ag._encode(verdicts)
        n = codes.shape[0]
        idx = np.random.default_rng(0).integers(0, n, (n_resamples, n))
        full = np.arange(n)[None, :]
        cohen = {(judges[j], judges[k]): ag.percentile_interval(
            float(ag._cohen(codes[:, j], codes[:, k], n_labels, full)[0]),
            ag._cohen(codes[:, j], codes[:, k], n_labels, idx), 0.95)
            for j, k in itertools.combinations(range(len(judges)), 2)}
        counts = (codes[:, :, None] == np.arange(n_labels)).sum(axis=1)
        complete = np.asarray((codes >= 0).all(axis=1))
        terms = ag._item_terms(counts, complete, len(judges))
        (fleiss_full, alpha_full), (fleiss_boot, alpha_boot) = (
            ag._fleiss_alpha(terms, n_labels, len(judges), rows) for rows in (full, idx))
        fleiss = ag.percentile_interval(float(fleiss_full[0]), fleiss_boot, 0.95)
        alpha = ag.percentile_interval(float(alpha_full[0]), alpha_boot, 0.95)
        above, below = ag.threshold_p(counts, (0.8, 0.667))
        return ag.Agreement(judges, cohen, fleiss, alpha, n, int(complete.sum()),
                            {"above 0.8": above[0], "above 0.667": above[1],
                             "below 0.667": below[1]})
    if method == "at once":
        return at_once

    def calls() -> Any:  # the blocks before Fleiss' κ and α were one pass a block
        from krippendorff import alpha as kalpha
        from statsmodels.stats.inter_rater import fleiss_kappa

        def library(counts: Any, complete: Any) -> tuple[float, float]:
            if counts.shape[1] < 2:
                return math.nan, math.nan
            with np.errstate(divide="ignore", invalid="ignore"):
                kappa = float(fleiss_kappa(counts[complete])) if complete.any() else math.nan
                a = (float(kalpha(value_counts=counts, level_of_measurement="nominal"))
                     if (counts.sum(axis=1) >= 2).any() else math.nan)
            return tuple(v if math.isfinite(v) else math.nan for v in (kappa, a))  # type: ignore[return-value]

        judges, codes, n_labels = ag._encode(verdicts)
        n = codes.shape[0]
        pairs = list(itertools.combinations(range(len(judges)), 2))
        counts = (codes[:, :, None] == np.arange(n_labels)).sum(axis=1)
        complete = np.asarray((codes >= 0).all(axis=1))
        boot: dict[Any, list[Any]] = {key: [] for key in [*pairs, "fleiss", "alpha"]}
        for block in ag.index_blocks(n, n_resamples, np.random.default_rng(0), ag._BATCH_CELLS):
            for j, k in pairs:
                boot[(j, k)].append(ag._cohen(codes[:, j], codes[:, k], n_labels, block))
            found = np.array([library(counts[r], complete[r]) for r in block])
            boot["fleiss"].append(found[:, 0])
            boot["alpha"].append(found[:, 1])
        full = np.arange(n)[None, :]
        cohen = {(judges[j], judges[k]): ag.percentile_interval(
            float(ag._cohen(codes[:, j], codes[:, k], n_labels, full)[0]),
            np.concatenate(boot[(j, k)]), 0.95) for j, k in pairs}
        whole = library(counts, complete)
        fleiss, alpha = (ag.percentile_interval(whole[i], np.concatenate(boot[key]), 0.95)
                         for i, key in enumerate(("fleiss", "alpha")))
        above, below = ag.threshold_p(counts, (0.8, 0.667))
        return ag.Agreement(judges, cohen, fleiss, alpha, n, int(complete.sum()),
                            {"above 0.8": above[0], "above 0.667": above[1],
                             "below 0.667": below[1]})
    return calls


def leaderboard(method: str, n_resamples: int) -> Callable[[], Any]:
    from biasscope.core.intervals import percentile_interval
    from biasscope.judge.ranking_stats import bradley_terry
    from biasscope.judge.rankings import rankings

    authors = [p for _ in range(ITEMS // 12 + 1) for p in itertools.permutations(SYSTEMS, 2)]
    rng = np.random.default_rng(2)
    labels = np.array(["a", "a", "b", "tie"])
    verdicts = {j: [str(v) for v in rng.choice(labels, len(authors))] for j in ("one", "two")}
    if method == "blocks":
        def blocked() -> Any:
            found = rankings(verdicts, authors, n_resamples=n_resamples, score="bradley-terry")
            return {j: [(r["system"], r["low"], r["high"]) for r in board]
                    for j, board in found["leaderboards"].items()}
        return blocked

    def at_once() -> Any:
        code = {s: k for k, s in enumerate(sorted(SYSTEMS))}
        a = np.array([code[x] for x, _ in authors])
        b = np.array([code[y] for _, y in authors])
        idx = np.random.default_rng(0).integers(0, a.size, (n_resamples, a.size))
        out = {}
        for judge, said in verdicts.items():
            won = np.array([{"a": 1.0, "b": 0.0, "tie": 0.5}[v] for v in said])
            estimate = bradley_terry(a[None, :], b[None, :], won[None, :], len(SYSTEMS))[0]
            boot = bradley_terry(a[idx], b[idx], won[idx], len(SYSTEMS))
            rows = [(s, percentile_interval(float(estimate[k]), boot[:, k], 0.95))
                    for s, k in code.items()]
            out[judge] = [(s, ci.low, ci.high) for s, ci in
                          sorted(rows, key=lambda r: -r[1].estimate)]
        return out
    return at_once


def _apart(one: str, other: str) -> float:
    """The largest difference between the numbers of two results' reprs (NaN where they
    hold different numbers of them, or NaN in different places)."""
    found = [np.array([float(v) for v in re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?|nan", text)])
             for text in (one, other)]
    if found[0].shape != found[1].shape or (np.isnan(found[0]) != np.isnan(found[1])).any():
        return math.nan
    return float(np.nanmax(np.abs(found[0] - found[1]), initial=0.0))


def _kib(field: str) -> int:
    found = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    return int(found.group(1)) if found else 0


def child(case: str, method: str, n_resamples: int) -> dict[str, Any]:
    """One method's bootstrap: wall seconds (the median of up to 3 calls, while they take
    under 2 s together) and the RSS high-water mark of the first, then the traced peak of one
    more; after a call of 10 resamples, so that no figure counts lazy imports."""
    make = {"crows-median": crows, "agreement": agreement, "leaderboard": leaderboard}[case]
    make(method, 10)()
    run = make(method, n_resamples)
    walls: list[float] = []
    rss = 0.0
    while len(walls) < 3 and sum(walls) < 2:
        base = _kib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        start = time.perf_counter()
        result = run()
        walls.append(time.perf_counter() - start)
        rss = rss or (_kib("VmHWM") - base) / 1024
        del result
    tracemalloc.start()
    traced_result = run()
    traced = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {"wall": median(walls), "calls": len(walls), "rss": rss, "traced": traced,
            "result": repr(traced_result)}


def measure(case: str, method: str, n_resamples: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", case, method, str(n_resamples)],
                         check=True, capture_output=True, text=True)
    found: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resamples", default="2000,10000,100000")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], int(args.child[2]))))
        return 0
    started, clock = dt.datetime.now(dt.timezone.utc), time.perf_counter()
    loads = [os.getloadavg()[0]]
    rows = []
    for case in args.cases.split(","):
        for n_resamples in (int(r) for r in args.resamples.split(",")):
            if n_resamples > MOST[case]:
                continue
            methods = ("at once", "blocks", *(("library calls",) if case == "agreement" else ()))
            found = {m: measure(case, m, n_resamples) for m in methods}
            same = found["at once"]["result"] == found["blocks"]["result"]
            rows.append((case, n_resamples, found, same))
            print(case, n_resamples, {m: {k: v for k, v in f.items() if k != "result"}
                                      for m, f in found.items()}, same, flush=True)
    loads.append(os.getloadavg()[0])
    if not all(same for *_, same in rows):
        raise SystemExit("blocks and the single draw disagree: " + ", ".join(
            f"{case} at {r}" for case, r, _, same in rows if not same))
    lines = [
        "## Bootstraps in blocks of resamples against the single draw (CPU)", "",
        f"Run {started:%Y-%m-%d %H:%M} UTC with `python bench/bench_bootstrap.py --resamples "
        f"{args.resamples} --out BENCHMARKS.md` ({time.perf_counter() - clock:.0f} s in all) on "
        f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores (shared), Python "
        f"{platform.python_version()}, NumPy {np.__version__}; 1-minute load average "
        f"{loads[0]:.1f} before and {loads[1]:.1f} after.", "",
        "**all at once**: `rng.integers(0, n, (resamples, n))`, then the statistic of every "
        "row (the code before blocks); **blocks**: the library call, whose "
        "`biasscope.core.bootstrap.index_blocks` draws the same rows a block at a time (at most "
        f"2**{BLOCK_CELLS.bit_length() - 1} indices for a probe's bootstrap, 2**21 for the "
        "agreement's, 2**20 for the leaderboard's) and reduces each before the next; a probe's "
        "statistic gets each block's gathered values without its indices "
        "(`biasscope.core.bootstrap.block_statistics`). Each in a fresh process: **traced**, "
        "the peak `tracemalloc` counts during the call (NumPy's arrays included); **RSS**, "
        "the peak resident memory during the call above what the process held before it; "
        "wall seconds, the median of up to 3 calls (while they took under 2 s together). "
        "*same*: every digit of the results equal.", "",
        "| bootstrap | items | resamples | traced MiB: at once | blocks | RSS MiB: at once "
        "| blocks | seconds: at once | blocks | same |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |"]
    for case, n_resamples, found, same in rows:
        once, blocks = found["at once"], found["blocks"]
        items = 12 * (ITEMS // 12 + 1) if case == "leaderboard" else ITEMS
        lines.append(
            f"| {CASES[case]} | {items:,} | {n_resamples:,} | {once['traced']:.0f} | "
            f"{blocks['traced']:.0f} | {once['rss']:.0f} | {blocks['rss']:.0f} | "
            f"{once['wall']:.2f} | {blocks['wall']:.2f} | {'yes' if same else 'no'} |")
    crows_rows = {r: f for c, r, f, _ in rows if c == "crows-median"}
    if len(crows_rows) > 2:
        low, mid, high = sorted(crows_rows)[-3:]
        traced = {r: {m: f[m]["traced"] for m in f} for r, f in crows_rows.items()}
        lines += ["", f"CrowS-Pairs' median from {mid:,} to {high:,} resamples: the traced peak "
                  f"grows {traced[high]['at once'] / traced[mid]['at once']:.1f}x all at once "
                  f"and {traced[high]['blocks'] / traced[mid]['blocks']:.2f}x in blocks, "
                  f"whose peak is one full block's ({BLOCK_CELLS // ITEMS:,} resamples of "
                  f"{ITEMS:,} items: its indices and the values gathered with them) from "
                  f"{low:,} resamples on, {traced[low]['blocks']:.0f} MiB against the single "
                  f"draw's {traced[low]['at once']:.0f} there."]
    for _, n_resamples, found, _ in rows:
        if "library calls" not in found:
            continue
        calls, blocks = found["library calls"], found["blocks"]
        lines += ["", f"The judge's agreement at {n_resamples:,} resamples with each resample's "
                  "Fleiss' κ and α a statsmodels and a `krippendorff` call (**library calls**, "
                  "the code before they were one pass a block, `_fleiss_alpha`) against the "
                  f"blocks: {calls['wall']:.2f} s → {blocks['wall']:.2f} s, traced peak "
                  f"{calls['traced']:.0f} → {blocks['traced']:.0f} MiB, RSS {calls['rss']:.0f} "
                  f"→ {blocks['rss']:.0f} MiB; the numbers at most "
                  f"{_apart(calls['result'], blocks['result']):.0e} apart."]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.out:
        write_section(args.out, "bootstrap", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
