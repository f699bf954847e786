"""Calibration of `biasscope sensitivity`'s verdicts: that two principles move the reward
through a common change (the confounds' sentence), that a reward model is above or below
chance on held-out pairs (the sanity sentence), and that the reward rises most for one
principle.

Every principle's effect subtracts the same original reward, so the principles' effects are
correlated even when each revision is an independent draw; the nulls here are the ways a
revision can relate to the response it revises (a fresh response of the prompt, an edit of
it, halfway), with heavy tails and pilots of 5 prompts. The sanity nulls are reward models
at chance, with and without ties (a saturated reward ties many pairs).

Each claim runs the library's own functions on simulated rewards (no model); see
`calibration_base`. tests/sensitivity/test_calibration_sensitivity.py runs them small.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from biasscope.sensitivity.confounds import confound_sentences, effect_correlations
from biasscope.sensitivity.sanity import accuracy
from biasscope.sensitivity.summary import leader
from calibration_base import Claim

ALPHA = 0.05
PRINCIPLES = 4
SHIFTS = np.linspace(0.0, 0.9, PRINCIPLES)  # each principle's own mean effect


def rewards(rng: np.random.Generator, prompts: int, kept: float, tails: bool = False,
            shifts: np.ndarray = SHIFTS) -> pd.DataFrame:
    """One reward model's rewards, as `effect_correlations` takes them: a prompt's level
    (SD 1), the original response's own quality on top (SD 1), each revision the prompt's
    level, ``kept`` of the original's own quality, its principle's shift and its own quality
    (SD 1): no change common to two principles. ``kept`` 0: a fresh response; 1: an edit of
    the original. ``tails``: Student-t with 3 degrees of freedom (scaled to SD 1)."""
    def draw(size: int) -> np.ndarray:
        if tails:
            return rng.standard_t(3, size) / np.sqrt(3.0)
        return rng.normal(size=size)

    level, own = draw(prompts), draw(prompts)
    original = level + own
    return pd.DataFrame({
        "model": "rm", "principle": np.repeat([f"p{k}" for k in range(PRINCIPLES)], prompts),
        "prompt_id": np.tile(np.arange(prompts), PRINCIPLES),
        "original": np.tile(original, PRINCIPLES),
        "perturbed": np.concatenate([level + kept * own + shift + draw(prompts)
                                     for shift in shifts])})


def common_change_false_claims(n: int, seed: int, *, prompts: int, kept: float,
                               tails: bool = False) -> tuple[int, int]:
    """How often the report says some pair of principles moves the reward through a common
    change when none does."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        found = {"length": [], "unchanged": [],
                 "correlations": effect_correlations(rewards(rng, prompts, kept, tails))}
        hits += any("common change" in s for s in confound_sentences(found))
    return hits, n


def chance_false_claims(n: int, seed: int, *, pairs: int, ties: float) -> tuple[int, int]:
    """How often the sanity check calls a reward model at chance above or below it: each
    pair tied with probability ``ties``, else the chosen response higher with probability
    one half."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n):
        tied = rng.random(pairs) < ties
        higher = rng.random(pairs) < 0.5
        chosen = np.where(tied, 0.0, np.where(higher, 1.0, -1.0))
        verdict = accuracy(chosen.tolist(), [0.0] * pairs)["verdict"]
        hits += verdict in ("above chance", "below chance")
    return hits, n


def rises_most_false_claims(n: int, seed: int, *, prompts: int, kept: float,
                            tails: bool = False) -> tuple[int, int]:
    """How often the summary says the reward "rises most" for one principle when the two
    largest mean effects are equal (shifts 0, 0.3, 0.9, 0.9)."""
    rng = np.random.default_rng(seed)
    hits = 0
    shifts = np.array([0.0, 0.3, 0.9, 0.9])
    for _ in range(n):
        frame = rewards(rng, prompts, kept, tails, shifts)
        effect = (frame["perturbed"] - frame["original"]).groupby(frame["principle"]).mean()
        hits += leader(frame, "rm", str(effect.idxmax()))["leads"]
    return hits, n


def _claims() -> list[Claim]:
    out = []
    nulls = [(0.0, False, "fresh revisions: each a new response of the prompt"),
             (1.0, False, "edits: each revision the original plus its own change"),
             (0.5, True, "revisions keep half the original's own quality, Student-t(3)")]
    for kept, tails, null in nulls:
        for prompts in (5, 12, 40) if kept == 0.0 else (12, 40):
            out.append(Claim(
                "principles move the reward through a common change (sensitivity "
                "confounds, Holm p < 0.05)",
                f"{null}; no change common to two principles",
                f"{prompts} prompts x {PRINCIPLES} principles", "false-claim", ALPHA,
                partial(common_change_false_claims, prompts=prompts, kept=kept,
                        tails=tails)))
    for ties, sizes in ((0.0, (4, 6, 20, 50, 500)), (0.2, (50, 500))):
        null = "P(chosen higher) 0.5" + (f", {ties:.0%} of pairs tied" if ties else "")
        for pairs in sizes:
            out.append(Claim(
                "the reward model is above/below chance (sensitivity sanity)", null,
                f"{pairs} pairs", "false-claim", ALPHA,
                partial(chance_false_claims, pairs=pairs, ties=ties)))
    for kept, tails, null in nulls:
        for prompts in (5, 40):
            out.append(Claim(
                "the reward rises most for principle P (sensitivity)",
                f"{null}; the two largest mean effects equal", f"{prompts} prompts x "
                f"{PRINCIPLES} principles", "false-claim", ALPHA,
                partial(rises_most_false_claims, prompts=prompts, kept=kept, tails=tails)))
    return out


CLAIMS: list[Claim] = _claims()

__all__ = ["CLAIMS"]
