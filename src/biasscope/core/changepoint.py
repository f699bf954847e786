"""Does a series change trend? One changepoint against a single trend, over checkpoints.

"Bias emerges suddenly" is a claim about the shape of the gap against training: a single
straight trend fits badly, and a trend that bends at some step S fits well. The model here is
continuous segmented (hinge) regression, y = a + b·x + c·(x − S)₊, with x the step or the log
step; c is the change of slope at S. The test compares it with the single line y = a + b·x by
the largest F statistic over the candidate S. Because S is chosen to fit, that F does not follow
the F distribution (Davies' problem: the p-value would be too small), so its null distribution
is simulated by a residual bootstrap of the single-line fit. The CI of S, and of the slope
change, come from a residual bootstrap of the segmented fit.

Assumptions, said in docs/claims.md: the checkpoint values' errors are exchangeable (about equal
variance, independent across checkpoints: each checkpoint is scored on its own, but the
prompts are the same, so a prompt-level quirk shared by all checkpoints is part of the trend,
not of the noise); at least 2 checkpoints on each side of S (6 in all). Everything is vectorised
over bootstrap replicates: each candidate S has a fixed residual-maker matrix.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from biasscope.core.stats import Array

Scale = Literal["step", "log"]
MIN_POINTS = 6  # two parameters per segment and two points beyond the bend on each side


@dataclass(frozen=True)
class Changepoint:
    """The bend S (in steps) with its bootstrap CI, the slopes before and after (per 1000 steps
    on the step scale; per unit of ln(step + 1) on the log scale), the slope change with its CI,
    the sup-F statistic and its bootstrap p-value."""

    scale: Scale
    step: float
    low: float
    high: float
    slope_before: float
    slope_after: float
    slope_change: float
    slope_change_low: float
    slope_change_high: float
    f_statistic: float
    p_value: float
    n_checkpoints: int
    confidence: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def transform(steps: npt.ArrayLike, scale: Scale) -> Array:
    """x for the regression: the step (in thousands, so slopes read per 1000 steps) or
    ln(step + 1) (step 0 is a checkpoint)."""
    s = np.asarray(steps, dtype=np.float64)
    return np.asarray(s / 1000 if scale == "step" else np.log1p(s))


def untransform(x: float, scale: Scale) -> float:
    return float(x * 1000 if scale == "step" else math.expm1(x))


def _maker(design: Array) -> Array:
    """I − X X⁺: applied to y, the residuals of the least-squares fit on X."""
    return np.asarray(np.eye(design.shape[0]) - design @ np.linalg.pinv(design))


def _designs(x: Array, candidates: Array) -> tuple[Array, Array, Array]:
    """The single line's design, and per candidate bend the hinge design's pseudo-inverse and
    residual-maker, stacked."""
    line = np.column_stack([np.ones_like(x), x])
    bends = np.stack([np.column_stack([line, np.maximum(x - c, 0.0)]) for c in candidates])
    pinvs = np.linalg.pinv(bends)
    return line, pinvs, np.eye(x.size) - bends @ pinvs


def _fit(y: Array, line: Array, pinvs: Array, makers: Array) -> tuple[Array, Array, Array]:
    """sup-F over candidates, the best candidate's index and coefficients, per row of y."""
    n = y.shape[-1]
    rss0 = ((y @ _maker(line).T) ** 2).sum(-1)
    rss1 = ((makers @ y.T) ** 2).sum(1)  # (candidates, reps)
    best = rss1.argmin(axis=0)
    low = np.maximum(rss1[best, np.arange(y.shape[0])], 1e-300)
    f = (rss0 - low) / (low / (n - 3))
    return f, best, np.einsum("rkn,rn->rk", pinvs[best], y)


def candidates_between(x: Array, per_gap: int = 4) -> Array:
    """Candidate bends: the checkpoints from the third to the third-last and points between
    them, so that at least two checkpoints lie strictly on each side of every candidate."""
    inner = np.unique(x)[2:-2]
    if inner.size == 0:
        return inner
    grid = [np.linspace(a, b, per_gap, endpoint=False) for a, b in itertools.pairwise(inner)]
    return np.unique(np.concatenate([*grid, inner]))


def changepoint(steps: Sequence[int] | npt.ArrayLike, values: npt.ArrayLike,
                scale: Scale = "step", confidence: float = 0.95, n_resamples: int = 999,
                seed: int = 0) -> Changepoint | None:
    """The one-changepoint fit of ``values`` against training step; None with fewer than
    `MIN_POINTS` finite checkpoints."""
    s, y = np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)
    keep = np.isfinite(s) & np.isfinite(y)
    order = np.argsort(s[keep], kind="stable")
    x, y = transform(s[keep][order], scale), y[keep][order]
    cand = candidates_between(x)
    if x.size < MIN_POINTS or cand.size == 0:
        return None
    line, pinvs, makers = _designs(x, cand)
    f, best, coef = _fit(y[None, :], line, pinvs, makers)
    rng = np.random.default_rng(seed)
    null_fit = y - y @ _maker(line).T
    null_res = y - null_fit
    boot0 = null_fit + rng.choice(null_res, size=(n_resamples, x.size), replace=True)
    f0, _, _ = _fit(boot0, line, pinvs, makers)
    p = float((1 + np.sum(f0 >= f[0] - 1e-12 * abs(f[0]))) / (n_resamples + 1))
    fitted = y - makers[int(best[0])] @ y
    boot1 = fitted + rng.choice(y - fitted, size=(n_resamples, x.size), replace=True)
    _, b1, c1 = _fit(boot1, line, pinvs, makers)
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(cand[b1], [tail, 100 - tail])
    clo, chi = np.percentile(c1[:, 2], [tail, 100 - tail])
    b, c = float(coef[0][1]), float(coef[0][2])
    return Changepoint(scale, untransform(float(cand[int(best[0])]), scale),
                       untransform(float(lo), scale), untransform(float(hi), scale),
                       b, b + c, c, float(clo), float(chi), float(f[0]), p, int(x.size),
                       confidence)


def rates(steps: Sequence[int], values: npt.ArrayLike) -> list[dict[str, float]]:
    """Change between consecutive checkpoints, raw and per 1000 steps: on spacings as uneven as
    Pythia's (1, 2, 4 … 512, then every 1000) only the rate compares across pairs."""
    s = np.asarray(steps, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(s, kind="stable")
    s, v = s[order], v[order]
    return [{"step_from": int(s[i]), "step_to": int(s[i + 1]),
             "change": float(v[i + 1] - v[i]),
             "rate_per_1000": float(1000 * (v[i + 1] - v[i]) / (s[i + 1] - s[i]))}
            for i in range(s.size - 1) if s[i + 1] > s[i]]
