"""Calibration of `biasscope intervene`'s verdict, that this run of the intervention beat the
control's (or did worse), and of its table's p-values of the difference in differences of the
male lean over prompts (Holm over the steps). The nulls are two runs whose prompts move alike
on average: symmetric noise that accumulates over steps (a random walk per prompt), and an
intervention that moves a tenth of the prompts far one way and the rest a little the other,
averaging 0 (a skewed difference: Wilcoxon's signed-rank test, the rule before, tests symmetry
and took it for a difference). Tiny runs (40 prompts) and WinoBias-sized ones (400).

With several training runs per arm (``--runs``), the verdict is about the intervention: its
null adds what one run cannot see, each run's own drift (the data order moves all of a run's
prompts together, a random walk per run and arm), and the skewed move is the same in every run
(a property of the prompt): 2, 3 and 5 runs per arm. A third null has no run drift at all,
where the prompts' noise, which the interval's item term must not count twice, is all.

Each claim runs the library's own statistics (`analysis.differences`, `analysis.recommend`)
on simulated per-prompt leans (no model); see `calibration_base`.
tests/intervene/test_calibration_intervene.py runs them small.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from biasscope.intervene import analysis
from calibration_base import Claim

ALPHA = 0.05
STEPS = (10, 20, 30, 40, 50)
NOISE = 0.01  # SD of a prompt's lean change per step, each arm (a random walk)
MOVE = 0.02  # the skewed null: a tenth of the prompts move +9 x MOVE, the rest −MOVE
RUN_DRIFT = 0.01  # SD of a run's shared lean change per step, each arm (several runs)
CONFIG = analysis.InterventionAnalysisConfig(n_resamples=400)


def leans(rng: np.random.Generator, prompts: int, skewed: bool
          ) -> dict[tuple[str, int], dict[str, pd.Series]]:
    """Per (arm, step) each prompt's male lean: a shared start (leaning male, mean 0.2), each
    arm's own random walk from it, and with ``skewed`` the intervention's move (mean 0 over
    the population of prompts), growing to its full size by the last step."""
    index = pd.RangeIndex(prompts)
    start = rng.normal(0.2, 0.1, prompts)
    move = (np.where(rng.random(prompts) < 0.1, 9 * MOVE, -MOVE) if skewed
            else np.zeros(prompts))
    out = {}
    for arm in ("arm", "control"):
        walk = np.cumsum(rng.normal(0, NOISE, (len(STEPS), prompts)), axis=0)
        out[(arm, 0)] = {"male_lean": pd.Series(start, index)}
        for k, step in enumerate(STEPS):
            shift = move * (k + 1) / len(STEPS) if arm == "arm" else 0.0
            out[(arm, step)] = {"male_lean": pd.Series(start + walk[k] + shift, index)}
    return out


def run_leans(rng: np.random.Generator, prompts: int, runs: int, skewed: bool,
              drift: float = RUN_DRIFT) -> dict[tuple[str, int], dict[str, pd.Series]]:
    """As `leans`, with ``runs`` runs per arm (named as `analysis.run_name` names them): each
    run's arms walk from the shared start with their own per-prompt noise plus a drift of the
    whole run (SD ``drift`` a step); the skewed move is the prompts', the same in every run."""
    index = pd.RangeIndex(prompts)
    start = rng.normal(0.2, 0.1, prompts)
    move = (np.where(rng.random(prompts) < 0.1, 9 * MOVE, -MOVE) if skewed
            else np.zeros(prompts))
    out = {}
    for run in range(1, runs + 1):
        for arm in ("arm", "control"):
            name = analysis.run_name(arm, run)
            walk = np.cumsum(rng.normal(0, NOISE, (len(STEPS), prompts)), axis=0)
            shared = np.cumsum(rng.normal(0, drift, len(STEPS)))
            out[(name, 0)] = {"male_lean": pd.Series(start, index)}
            for k, step in enumerate(STEPS):
                shift = move * (k + 1) / len(STEPS) if arm == "arm" else 0.0
                out[(name, step)] = {"male_lean": pd.Series(start + walk[k] + shared[k] + shift,
                                                            index)}
    return out


def run_false_claims(n: int, seed: int, *, prompts: int, runs: int, skewed: bool,
                     verdict: bool = True, drift: float = RUN_DRIFT) -> tuple[int, int]:
    """How often the verdict over ``runs`` runs per arm says the intervention beat the
    control, or did worse (``verdict``; with one run, the verdict read as if it were about the
    intervention), or the table calls the difference in differences significant at some step,
    when the intervention moves prompts by 0 on average (every step within the budget)."""
    rng = np.random.default_rng(seed)
    cost = {s: {"estimate": 0.0, "low": -0.01, "high": 0.01} for s in STEPS}
    names = [(analysis.run_name("arm", r), analysis.run_name("control", r))
             for r in range(1, runs + 1)]
    hits = 0
    for _ in range(n):
        series = run_leans(rng, prompts, runs, skewed, drift)
        did = analysis.differences(series, [a for a, _ in names], [c for _, c in names], STEPS,
                                   CONFIG, ("male_lean",))
        if not verdict:
            hits += any(d["test"]["p_adjusted"] < ALPHA for d in did["male_lean"].values())
            continue
        lean0 = float(series[("control", 0)]["male_lean"].mean())
        said = analysis.recommend("arm", STEPS, did["male_lean"], cost, lean0, CONFIG, runs)
        hits += not said["sentence"].startswith("The data cannot tell")
    return hits, n


def false_claims(n: int, seed: int, *, prompts: int, skewed: bool, verdict: bool
                 ) -> tuple[int, int]:
    """How often the verdict says this run of the intervention beat the control's, or did
    worse (``verdict``), or the report's table calls the difference in differences significant
    at some step, when their prompts move alike on average (every step within the budget)."""
    rng = np.random.default_rng(seed)
    cost = {s: {"estimate": 0.0, "low": -0.01, "high": 0.01} for s in STEPS}
    hits = 0
    for _ in range(n):
        series = leans(rng, prompts, skewed)
        did = analysis.differences(series, "arm", "control", STEPS, CONFIG, ("male_lean",))
        if verdict:
            lean0 = float(series[("control", 0)]["male_lean"].mean())
            said = analysis.recommend("arm", STEPS, did["male_lean"], cost, lean0, CONFIG)
            hits += not said["sentence"].startswith("The data cannot tell")
        else:
            hits += any(d["test"]["p_adjusted"] < ALPHA for d in did["male_lean"].values())
    return hits, n


def _claims() -> list[Claim]:
    out = []
    for skewed, null in ((False, f"both arms' prompts walk at random (SD {NOISE:g} a step)"),
                         (True, f"as above, and the intervention moves a tenth of the prompts "
                                f"+{9 * MOVE:g} and the rest −{MOVE:g} (mean 0)")):
        for prompts in (40, 400):
            for verdict, said in ((True, "this run of the intervention beat the control's, or "
                                         "did worse (intervene)"),
                                  (False, "the difference in differences is significant at a "
                                          "step (intervene's table, Holm over steps)")):
                out.append(Claim(
                    said, null, f"{prompts} prompts x {len(STEPS)} steps", "false-claim",
                    ALPHA, partial(false_claims, prompts=prompts, skewed=skewed,
                                   verdict=verdict)))
    for skewed, drift, null in (
            (False, RUN_DRIFT, f"each run's prompts walk at random (SD {NOISE:g} a step) and "
                               f"the run drifts (SD {RUN_DRIFT:g} a step)"),
            (True, RUN_DRIFT, f"as above, and the intervention moves a tenth of the prompts "
                              f"+{9 * MOVE:g} and the rest −{MOVE:g} in every run (mean 0)"),
            (False, 0.0, f"each run's prompts walk at random (SD {NOISE:g} a step); runs do "
                         "not drift (the prompts' noise is all there is)")):
        for runs in (2, 3, 5):
            for prompts in (40, 400):
                for verdict, said in ((True, "the intervention beat the control, or did worse "
                                             "(intervene --runs)"),
                                      (False, "the difference in differences is significant at "
                                              "a step (intervene --runs' table, Holm over "
                                              "steps)")):
                    out.append(Claim(
                        said, null, f"{runs} runs per arm x {prompts} prompts x {len(STEPS)} "
                        "steps", "false-claim", ALPHA, partial(
                            run_false_claims, prompts=prompts, runs=runs, skewed=skewed,
                            verdict=verdict, drift=drift)))
    return out


CLAIMS: list[Claim] = _claims()

__all__ = ["CLAIMS"]
