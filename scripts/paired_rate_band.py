"""Coverage of the rates' band ("the gap changes fastest between steps A and B") on WinoBias
pairs, resampled apart (as the analysis did) and as pairs (`ItemCurves.paired`), how often
"stop at step S" is claimed where the gap never changes (`stop_test`, α = 0.01), and how often
one checkpoint's gap test calls a gap of 0 significant and its 95% interval misses 0
(`checkpoint_rows`, the summary's ``jsdp_gap`` interval), prompts taken apart and as pairs.

A run draws WinoBias pairs: one male and one female prompt a pronoun apart. What a sentence
does to the model's pronoun pulls the pair's two prompts apart, so their values move against
each other across checkpoints. Here each pair has such a tilt (a random walk over the
checkpoints, its steps growing with training, as in the demo, where the prompts barely differ
before step 40), plus each prompt's own noise; the true gap curve is the demo's. The band must
cover all the true rates at once, and so the fastest's, 95% of the time. For the stop, the
gap is the demo's final one at every checkpoint, every checkpoint within the budget, and an
earlier stop is a false claim; the prompts are named as a run names them (pairs) or not
(resampled apart, as the analysis did). For the gap test, one checkpoint with no gap, where a
pair's two prompts share ``tilt`` of their variance with opposite signs (Pearson −tilt: −0.77
was Gemma 3 270M's JSD-P, −0.41 its target rank), each pair's labels swapped at random.

    PYTHONPATH=src python scripts/paired_rate_band.py --n-sims 2000 [--part stop|gap]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from biasscope.core.changepoint import rates
from biasscope.core.curves import ItemCurves
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.analysis.emergence import _rate_band, recommend_stop
from biasscope.dynamics.analysis.gap_tests import checkpoint_rows
from biasscope.dynamics.analysis.stopping import stop_test
from biasscope.dynamics.summary.build import _gap_interval

STEPS = [0, 9, 15, 26, 43, 73, 124, 210, 355, 600]  # the demo's checkpoints
GAP = np.array([0.0, -0.0012, -0.0031, -0.0083, -0.0476, -0.1087, -0.1337, -0.2245,
                -0.2925, -0.1980])  # its gap at --limit 40
ALPHA = 0.01  # the analysis' default
SCALE = np.array([0.0, 1e-5, 1e-5, 1e-5, 2e-4, 5e-4, 2e-3, 1e-2, 4e-2, 6e-2])  # tilt's steps


def pairs(rng: np.random.Generator, n: int, tilt: float, gap: np.ndarray = GAP
          ) -> tuple[np.ndarray, np.ndarray]:
    """Male and female prompts' values of ``n`` pairs; ``tilt``: the share of each
    checkpoint's variance that the pair's two prompts share with opposite signs."""
    walk = np.cumsum(rng.normal(size=(n, len(STEPS))) * SCALE, axis=1)
    own = [np.cumsum(rng.normal(size=(n, len(STEPS))) * SCALE, axis=1) for _ in range(2)]
    a, b = math.sqrt(tilt), math.sqrt(1 - tilt)
    male = 0.07 + gap / 2 + a * walk + b * own[0]
    female = 0.07 - gap / 2 - a * walk + b * own[1]
    return male, female


def coverage(n: int, tilt: float, n_sims: int, seed: int, n_resamples: int
             ) -> dict[str, tuple[int, int]]:
    """Per way of resampling: (simulations whose band covers every true rate, whose band of
    the fastest covers its true rate)."""
    truth = {(r["step_from"], r["step_to"]): r["rate_per_1000"] for r in rates(STEPS, GAP)}
    rng = np.random.default_rng(seed)
    out = {"apart": [0, 0], "pairs": [0, 0]}
    for _ in range(n_sims):
        male, female = pairs(rng, n, tilt)
        draw = int(rng.integers(2 ** 31))
        for way, items in (("apart", ItemCurves.contrast(male, female)),
                           ("pairs", ItemCurves.paired(male, female))):
            found = rates(STEPS, items.curve())
            _rate_band(found, STEPS, items, 0.95, n_resamples, draw)
            hit = [r["low"] <= truth[r["step_from"], r["step_to"]] <= r["high"] for r in found]
            top = max(range(len(found)), key=lambda j: abs(found[j]["rate_per_1000"]))
            out[way][0] += all(hit)
            out[way][1] += hit[top]
    return {k: (v[0], v[1]) for k, v in out.items()}


def history(male: np.ndarray, female: np.ndarray, named: bool) -> dict[int, pd.DataFrame]:
    """The stop test's per-step prompt values; ``named``: the prompts named as a run's pairs
    (``pro-d-i`` and ``anti-d-i``), else names that do not pair up."""
    n = len(male)
    names = ([f"winobias-gender:{k}-d-{i}:referenced" for k in ("pro", "anti")
              for i in range(n)] if named else [f"p{i}" for i in range(2 * n)])
    labels = ["male"] * n + ["female"] * n
    values = np.vstack([male, female])
    return {s: pd.DataFrame({"prompt": names, "answer_label": labels, "value": values[:, j]})
            for j, s in enumerate(STEPS)}


def stops(n: int, tilt: float, n_sims: int, seed: int, n_resamples: int) -> dict[str, int]:
    """Per way of resampling: simulations that recommend an earlier stop (all false)."""
    rng = np.random.default_rng(seed)
    out = {"apart": 0, "pairs": 0}
    flat = np.full(len(STEPS), GAP[-1])
    for _ in range(n_sims):
        male, female = pairs(rng, n, tilt, flat)
        draw = int(rng.integers(2 ** 31))
        gaps = male.mean(axis=0) - female.mean(axis=0)
        for way in out:
            test = stop_test(history(male, female, way == "pairs"), STEPS[:-1], STEPS[-1],
                             0.95, n_resamples, draw)
            tested = {} if test is None else dict(zip(test.steps, test.p_adjusted, strict=True))
            rec = recommend_stop(STEPS, gaps, np.full(len(STEPS), 0.5), tested=tested,
                                 alpha=ALPHA)
            out[way] += rec.step != STEPS[-1]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-sims", type=int, default=2000)
    parser.add_argument("--resamples", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--part", choices=("rates", "stop", "gap", "both"), default="both")
    args = parser.parse_args()
    if args.part in ("rates", "both"):
        rate_table(args)
    if args.part in ("stop", "both"):
        stop_table(args)
    if args.part == "gap":
        gap_table(args)


def rate_table(args: argparse.Namespace) -> None:
    print("| pairs | tilt shared | resampled | all rates covered | the fastest covered |")
    print("| --- | --- | --- | --- | --- |")
    for n, tilt in ((10, 0.9), (10, 0.0), (40, 0.9)):
        found = coverage(n, tilt, args.n_sims, args.seed, args.resamples)
        for way, (every, fastest) in found.items():
            print(f"| {n} | {tilt:.0%} | {way} | {every / args.n_sims:.3f} | "
                  f"{fastest / args.n_sims:.3f} |", flush=True)


def stop_table(args: argparse.Namespace) -> None:
    print(f"| pairs | tilt shared | resampled | stop at step S claimed (α = {ALPHA}) |")
    print("| --- | --- | --- | --- |")
    for n, tilt in ((10, 0.9), (10, 0.0), (40, 0.9)):
        claimed = stops(n, tilt, args.n_sims, args.seed, args.resamples)
        for way, hits in claimed.items():
            print(f"| {n} | {tilt:.0%} | {way} | {hits / args.n_sims:.4f} |", flush=True)


def gap_claims(n: int, tilt: float, n_sims: int, seed: int) -> dict[str, tuple[int, int]]:
    """Per way (prompts apart or as pairs): (simulations whose gap test says significant at
    α, whose 95% gap interval misses 0), at one checkpoint with no gap."""
    rng = np.random.default_rng(seed)
    out = {"apart": [0, 0], "pairs": [0, 0]}
    options = AnalysisConfig(confidence=0.95)
    for _ in range(n_sims):
        male, female = pairs(rng, n, tilt, np.zeros(len(STEPS)))
        swap = (rng.random(n) < 0.5)[:, None]
        male, female = np.where(swap, female, male), np.where(swap, male, female)
        for way, found in out.items():
            frame = history(male, female, way == "pairs")[STEPS[-1]]
            frame = frame.assign(model="m", step=STEPS[-1], seeds=1)
            row, = checkpoint_rows(frame)
            low, high = _gap_interval(frame, options)
            found[0] += row["p_value"] < ALPHA
            found[1] += not low <= 0 <= high
    return {k: (v[0], v[1]) for k, v in out.items()}


def gap_table(args: argparse.Namespace) -> None:
    print(f"| pairs | Pearson within a pair | prompts | gap called significant (α = {ALPHA}) "
          "| 95% interval misses 0 |")
    print("| --- | --- | --- | --- | --- |")
    for n, tilt in ((50, 0.77), (10, 0.77), (50, 0.41), (50, 0.0)):
        found = gap_claims(n, tilt, args.n_sims, args.seed)
        for way, (claims, misses) in found.items():
            print(f"| {n} | {0.0 - tilt:.2f} | {way} | {claims / args.n_sims:.4f} | "
                  f"{misses / args.n_sims:.4f} |", flush=True)


if __name__ == "__main__":
    main()
