"""The trajectory claims (over one model's checkpoints), simulated the way a run's curves arise.

A gap curve is the mean over male prompts minus the mean over female prompts at each
checkpoint, the same prompts every time. Each prompt has a persistent effect (the same at every
checkpoint) and checkpoint noise that is independent, AR(1) with ρ 0.5 or 0.8, or a random walk
across checkpoints; the analysis gets every prompt's value at every checkpoint, as it does from
a run's records. Each claim's `simulate(n_sims, seed)` calls the function that makes the claim
in the analysis and counts how often it is made where it is false (or how often an interval
covers the truth). tests/core/test_calibration_trajectories.py runs them small.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

import numpy as np
import pandas as pd

from biasscope.core.curves import ItemCurves
from biasscope.core.stats import Array, adjust_pvalues, group_test_row
from biasscope.dynamics.analysis.emergence import (
    emergence_step,
    recommend_stop,
    sharpest_in,
    trend_change,
)
from biasscope.dynamics.analysis.stopping import separated, stop_test
from biasscope.dynamics.analysis.tradeoff import mirroring
from calibration_base import Claim

ALPHA = 0.01  # the analysis' default α
CONFIDENCE = 0.95
PROMPTS = 40  # per group: a --limit 80 run
TINY = 6  # per group: a small pilot
NOISES = ("independent", "AR(1) 0.5", "AR(1) 0.8", "random walk")
ITEM_SD, NOISE_SD = 0.05, 0.02  # a prompt's persistent effect; its checkpoint noise
Simulate = Callable[[int, int], tuple[int, int]]


def spaced(k: int, spacing: str) -> list[int]:
    """``k`` checkpoint steps: every 1000 steps (even), 0, 1, 2, 4, … (log), or Pythia's
    0, 1, 2, 4 … 512, then every 1000 (pythia)."""
    if spacing == "even":
        return [1000 * i for i in range(k)]
    if spacing == "pythia":
        return [0, *(2 ** i for i in range(10)), *range(1000, 1000 * (k - 10), 1000)][:k]
    return [0, *(2 ** i for i in range(k - 1))]


def process(rng: np.random.Generator, n: int, k: int, noise: str) -> Array:
    """``n`` independent series over ``k`` checkpoints with unit innovations."""
    z = rng.normal(size=(n, k))
    if noise == "random walk":
        return np.cumsum(z, axis=1)
    rho = 0.0 if noise == "independent" else float(noise.split()[-1])
    out = np.empty((n, k))
    out[:, 0] = z[:, 0]
    for j in range(1, k):
        out[:, j] = rho * out[:, j - 1] + math.sqrt(1 - rho ** 2) * z[:, j]
    return out


def prompts(rng: np.random.Generator, k: int, noise: str, n: int = PROMPTS,
            gap: Array | None = None) -> ItemCurves:
    """Male and female prompts' values at ``k`` checkpoints; ``gap``: the true gap curve (0)."""
    groups = [0.15 + rng.normal(0, ITEM_SD, (n, 1)) + NOISE_SD * process(rng, n, k, noise)
              for _ in range(2)]
    if gap is not None:
        groups[0] = groups[0] + gap
    return ItemCurves.contrast(groups[0], groups[1])


def _seed(rng: np.random.Generator) -> int:
    """A resampling seed per data set: with the analysis' fixed seed, the Monte Carlo error of
    one set of resamples would be shared by every simulated data set."""
    return int(rng.integers(2 ** 31))


def _claim(claim: str, null: str, size: str, kind: str, nominal: float,
           simulate: Simulate) -> Claim:
    return Claim(claim, null, size, "coverage" if kind == "coverage" else "false-claim",
                 nominal, simulate)


# ---------------------------------------------------------------- changes trend

def trend(noise: str, k: int, spacing: str, n: int = PROMPTS, n_resamples: int = 400
          ) -> Simulate:
    """"changes trend at step S" on a gap without any bend (flat; its level persists)."""
    steps = spaced(k, spacing)

    def simulate(n_sims: int, seed: int) -> tuple[int, int]:
        rng, hits = np.random.default_rng(seed), 0
        for _ in range(n_sims):
            items = prompts(rng, k, noise, n)
            out, _ = trend_change("m", steps, items.curve(), ALPHA, CONFIDENCE, n_resamples,
                                  items, _seed(rng))
            hits += out["claimed"] is not None
        return hits, n_sims
    return simulate


def fastest(noise: str, k: int, spacing: str, n_resamples: int = 400) -> Simulate:
    """Coverage of the fastest rate's interval, on a flat gap (every true rate is 0)."""
    steps = spaced(k, spacing)

    def simulate(n_sims: int, seed: int) -> tuple[int, int]:
        rng, covered = np.random.default_rng(seed), 0
        for _ in range(n_sims):
            items = prompts(rng, k, noise)
            out, _ = trend_change("m", steps, items.curve(), ALPHA, CONFIDENCE, n_resamples,
                                  items, _seed(rng))
            top = max(out["rates"], key=lambda r: abs(r["rate_per_1000"]))
            covered += top["low"] <= 0 <= top["high"]
        return covered, n_sims
    return simulate


# ---------------------------------------------------------------- mirrors

def mirrors(noise: str, k: int, n_resamples: int = 400) -> Simulate:
    """"performance mirrors fairness" when the two curves are unrelated: the gap from prompts
    (a random walk or AR noise about a rising trend), performance an independent curve of the
    same kind about its own rising trend."""
    def simulate(n_sims: int, seed: int) -> tuple[int, int]:
        rng, hits = np.random.default_rng(seed), 0
        for _ in range(n_sims):
            trend_gap = np.linspace(0.0, 0.05, k)
            gap = prompts(rng, k, noise, gap=trend_gap).curve()
            perf = 0.3 + np.linspace(0, 0.2, k) + 0.01 * process(rng, 1, k, noise)[0]
            _, said = mirroring("m", "accuracy", gap, perf, CONFIDENCE, n_resamples, ALPHA,
                                _seed(rng))
            hits += "performance mirrors fairness:" in said
        return hits, n_sims
    return simulate


# ---------------------------------------------------------------- the sharpest change

def sharpest(noise: str, k: int, n: int = PROMPTS, jump: float = 0.0,
             n_resamples: int = 400) -> Simulate:
    """Coverage of the sharpest change's interval: of the chosen pair's true change (0 on a
    flat gap; ``jump`` between the middle checkpoints, else 0)."""
    true = np.zeros(k)
    true[k // 2:] = jump
    index = pd.MultiIndex.from_arrays([[f"p{i}" for i in range(2 * n)],
                                       ["male"] * n + ["female"] * n],
                                      names=["prompt", "answer_label"])

    def simulate(n_sims: int, seed: int) -> tuple[int, int]:
        rng, covered = np.random.default_rng(seed), 0
        for _ in range(n_sims):
            items = prompts(rng, k, noise, n, gap=true)
            wide = pd.DataFrame(np.vstack(items.groups), index=index, columns=range(k))
            found = sharpest_in(wide, confidence=CONFIDENCE, n_resamples=n_resamples,
                                seed=_seed(rng))
            assert found is not None
            truth = true[found.step_to] - true[found.step_from]
            covered += found.change.low <= truth <= found.change.high
        return covered, n_sims
    return simulate


# ---------------------------------------------------------------- significant from step S

def emerges(noise: str, k: int, n: int = PROMPTS, onset: int | None = None) -> Simulate:
    """"significant from step S on" (Mann-Whitney per checkpoint, Holm over the checkpoints)
    where it is false: no gap at all (``onset`` None), or a gap of 0.05 from checkpoint
    ``onset`` on and S earlier. With k = 1, "significant at its one checkpoint"."""
    gap = np.zeros(k) if onset is None else np.where(np.arange(k) >= onset, 0.05, 0.0)

    def simulate(n_sims: int, seed: int) -> tuple[int, int]:
        rng, hits = np.random.default_rng(seed), 0
        for _ in range(n_sims):
            male, female = prompts(rng, k, noise, n, gap=gap).groups
            rows = [group_test_row(male[:, j], female[:, j], ("male", "female"))
                    for j in range(k)]
            adjusted = adjust_pvalues([r["p_value"] for r in rows], "holm")
            step = emergence_step(list(range(k)), adjusted, ALPHA, gaps=[r["gap"] for r in rows])
            hits += step is not None and (onset is None or step < onset)
        return hits, n_sims
    return simulate


# ---------------------------------------------------------------- where to stop

def _history(items: ItemCurves, steps: list[int]) -> dict[int, pd.DataFrame]:
    """The analysis' per-step prompt values (prompt, answer_label, value) of ``items``."""
    male, female = items.groups
    names = [f"p{i}" for i in range(len(male) + len(female))]
    labels = ["male"] * len(male) + ["female"] * len(female)
    values = np.vstack([male, female])
    return {s: pd.DataFrame({"prompt": names, "answer_label": labels, "value": values[:, j]})
            for j, s in enumerate(steps)}


def stops(noise: str, k: int, n: int = PROMPTS, gap: float = 0.0, rise: float = 0.0,
          n_resamples: int = 400) -> Simulate:
    """"stop at step S" (every checkpoint within the budget, as when performance plateaus):
    under a gap that is the same at every checkpoint (``rise`` 0) it is false whatever S; with
    a gap rising by ``rise`` over the checkpoints, the claim counted is the picked step's gain
    band missing its true gain, out of the runs that recommend a stop."""
    steps = list(range(0, 1000 * k, 1000))
    true = gap + np.linspace(0.0, rise, k)

    def simulate(n_sims: int, seed: int) -> tuple[int, int]:
        rng, hits, made = np.random.default_rng(seed), 0, 0
        for _ in range(n_sims):
            items = prompts(rng, k, noise, n, gap=true)
            test = stop_test(_history(items, steps), steps[:-1], steps[-1], CONFIDENCE,
                             n_resamples, _seed(rng))
            assert test is not None
            rec = recommend_stop(steps, items.curve(), np.full(k, 0.5),
                                 tested=dict(zip(test.steps, test.p_adjusted, strict=True)),
                                 alpha=ALPHA)
            if not rise:
                hits, made = hits + (rec.step != steps[-1]), made + 1
            elif rec.step != steps[-1]:
                band = test.interval(rec.step)
                truth = abs(true[-1]) - abs(true[steps.index(rec.step)])
                hits, made = hits + (band.low <= truth <= band.high), made + 1
        return hits, made
    return simulate


def stops_from_intervals(noise: str, k: int, n: int = PROMPTS, gap: float = 0.0) -> Simulate:
    """A probe's "stop at step S", from its checkpoints' intervals alone (`separated`), under
    a gap the same at every checkpoint; each interval the gap's normal 95% one over the same
    prompts, so the checkpoints' errors are as correlated as the prompts make them."""
    steps = list(range(0, 1000 * k, 1000))
    z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)

    def simulate(n_sims: int, seed: int) -> tuple[int, int]:
        rng, hits = np.random.default_rng(seed), 0
        for _ in range(n_sims):
            male, female = prompts(rng, k, noise, n, gap=np.full(k, gap)).groups
            estimate = male.mean(axis=0) - female.mean(axis=0)
            se = np.sqrt(male.var(axis=0, ddof=1) / n + female.var(axis=0, ddof=1) / n)
            tested = separated(dict(zip(steps, estimate, strict=True)),
                               dict(zip(steps, estimate - z * se, strict=True)),
                               dict(zip(steps, estimate + z * se, strict=True)), steps[-1],
                               CONFIDENCE)
            rec = recommend_stop(steps, estimate, np.full(k, 0.5), tested=tested, alpha=ALPHA)
            hits += rec.step != steps[-1]
        return hits, n_sims
    return simulate


def _claims() -> list[Claim]:
    out = []
    for noise, k, n, gap in (("independent", 10, PROMPTS, 0.03), ("AR(1) 0.8", 10, PROMPTS, 0.03),
                             ("random walk", 20, PROMPTS, 0.03), ("random walk", 10, TINY, 0.03),
                             ("AR(1) 0.5", 20, PROMPTS, 0.0), ("AR(1) 0.8", 3, TINY, 0.03),
                             ("random walk", 3, PROMPTS, 0.0)):
        shape = f"a gap of {gap:g} at every checkpoint" if gap else "no gap"
        out.append(_claim("stop at step S (smaller |gap| shown)", f"{noise}, {shape}",
                          f"{k} checkpoints, {n}+{n} prompts", "false-claim", ALPHA,
                          stops(noise, k, n, gap)))
    for noise, k in (("AR(1) 0.8", 10), ("AR(1) 0.5", 20)):
        out.append(_claim("the stop's fairness gain (band)", f"{noise}, a gap rising 0 to 0.05",
                          f"{k} checkpoints, {PROMPTS}+{PROMPTS} prompts", "coverage",
                          CONFIDENCE, stops(noise, k, PROMPTS, 0.0, 0.05)))
    for noise, k, n in (("independent", 10, PROMPTS), ("random walk", 20, PROMPTS),
                        ("AR(1) 0.8", 10, TINY)):
        out.append(_claim("a probe's stop at step S (from the intervals)",
                          f"{noise}, a gap of 0.03 at every checkpoint",
                          f"{k} checkpoints, {n}+{n} prompts", "false-claim", ALPHA,
                          stops_from_intervals(noise, k, n, 0.03)))
    for noise in NOISES:
        for k in (8, 10, 20):
            for spacing in ("even", "log"):
                out.append(_claim("changes trend at step S", noise,
                                  f"{k} {spacing}-spaced checkpoints, {PROMPTS}+{PROMPTS} "
                                  "prompts", "false-claim", ALPHA, trend(noise, k, spacing)))
    for noise in NOISES[1:]:
        out.append(_claim("changes trend at step S", noise,
                          f"20 pythia-spaced checkpoints, {PROMPTS}+{PROMPTS} prompts",
                          "false-claim", ALPHA, trend(noise, 20, "pythia")))
    for noise in ("AR(1) 0.8", "random walk"):
        out.append(_claim("changes trend at step S", noise,
                          f"10 even-spaced checkpoints, {TINY}+{TINY} prompts", "false-claim",
                          ALPHA, trend(noise, 10, "even", TINY)))
        out.append(_claim("changes trend at step S", noise,  # the fewest it tests (MIN_POINTS)
                          f"6 even-spaced checkpoints, {TINY}+{TINY} prompts", "false-claim",
                          ALPHA, trend(noise, 6, "even", TINY)))
        out.append(_claim("changes fastest between steps A and B (CI)", noise,
                          f"20 log-spaced checkpoints, {PROMPTS}+{PROMPTS} prompts", "coverage",
                          CONFIDENCE, fastest(noise, 20, "log")))
    for noise in NOISES:
        for k in (6, 10, 20, 40):
            out.append(_claim("performance mirrors fairness", f"{noise}, unrelated curves",
                              f"{k} checkpoints", "false-claim", ALPHA, mirrors(noise, k)))
    for noise, k, n, jump in (("independent", 20, PROMPTS, 0.0), ("AR(1) 0.5", 20, PROMPTS, 0.0),
                              ("random walk", 20, PROMPTS, 0.0), ("AR(1) 0.8", 8, PROMPTS, 0.0),
                              ("AR(1) 0.8", 10, PROMPTS, 0.02), ("AR(1) 0.5", 10, TINY, 0.0),
                              ("independent", 2, TINY, 0.0), ("random walk", 3, PROMPTS, 0.0),
                              ("AR(1) 0.8", 3, TINY, 0.0), ("AR(1) 0.8", 3, TINY, 0.02)):
        shape = "a jump" if jump else "flat"
        out.append(_claim("the sharpest change (CI)", f"{noise}, {shape} gap",
                          f"{k} checkpoints, {n}+{n} prompts", "coverage", CONFIDENCE,
                          sharpest(noise, k, n, jump)))
    for noise, k, n, onset in (("independent", 1, TINY, None), ("independent", 1, PROMPTS, None),
                               ("AR(1) 0.8", 10, PROMPTS, None),
                               ("random walk", 20, PROMPTS, None),
                               ("random walk", 10, TINY, None), ("AR(1) 0.5", 10, PROMPTS, 5),
                               ("random walk", 20, PROMPTS, 10), ("AR(1) 0.8", 2, TINY, None),
                               ("AR(1) 0.8", 3, PROMPTS, None), ("independent", 3, TINY, None),
                               ("AR(1) 0.5", 3, PROMPTS, 2)):
        what = "significant" if k == 1 else "significant from step S"
        shape = "no gap" if onset is None else f"a gap from checkpoint {onset + 1}"
        out.append(_claim(what, f"{noise}, {shape}", f"{k} checkpoint{'s' * (k > 1)}, "
                          f"{n}+{n} prompts", "false-claim", ALPHA, emerges(noise, k, n, onset)))
    return out


CLAIMS: list[Claim] = _claims()
