"""Does a series change trend? One changepoint against a single trend, over checkpoints.

"Bias emerges suddenly" is a claim about the shape of the gap against training: a single
straight trend fits badly, and a trend that bends at some step S fits well. The model here is
continuous segmented (hinge) regression, y = a + b·x + c·(x − S)₊, with x the step or the log
step; c is the change of slope at S, and S is the least-squares bend among the candidates.

The test needs the curve's items (`biasscope.core.curves.ItemCurves`: per prompt its value at
every checkpoint), because a curve's errors are correlated from one checkpoint to the next (the
same prompts at every checkpoint; neighbouring checkpoints share most of their weights), and a
bootstrap over checkpoints that assumes otherwise claimed a bend in half the random walks it
was shown. The slope change at every candidate bend is a linear function of the curve, so each
prompt contributes one number to it; the statistic is the largest |c| / se over the candidates
(se from the prompts), and its null distribution is the bootstrap-t distribution of that
maximum, prompts resampled within each group with the same draw at every checkpoint. Taking the
maximum accounts for S being chosen to fit. The CIs of S and of the slope change come from the
same resampling: the whole curve recomputed and refitted per resample.

Without items (a bare curve) the fit is given, untested (p and CIs NaN). Needs at least two
checkpoints on each side of S (6 in all) and two prompts per group. Everything is vectorised
over bootstrap replicates and candidates (`_designs`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from biasscope.core.curves import ItemCurves, max_t
from biasscope.core.stats import Array

Scale = Literal["step", "log"]
MIN_POINTS = 6  # two parameters per segment and two points beyond the bend on each side
CELLS = 2_000_000  # bootstrap fits at once: replicates × (candidates + checkpoints)


@dataclass(frozen=True)
class Changepoint:
    """The bend S (in steps) with its bootstrap CI, the slopes before and after (per 1000 steps
    on the step scale; per unit of ln(step + 1) on the log scale), the slope change with its CI,
    the sup-F statistic of the curve (descriptive), and the test: the largest studentised slope
    change over the candidate bends (``t_statistic``) and its item-bootstrap p-value."""

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
    t_statistic: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def transform(steps: npt.ArrayLike, scale: Scale) -> Array:
    """x for the regression: the step (in thousands, so slopes read per 1000 steps) or
    ln(step + 1) (step 0 is a checkpoint)."""
    s = np.asarray(steps, dtype=np.float64)
    return np.asarray(s / 1000 if scale == "step" else np.log1p(s))


def untransform(x: float, scale: Scale) -> float:
    return float(x * 1000 if scale == "step" else math.expm1(x))


class _Designs(NamedTuple):
    """The least-squares pieces shared by every fit on one set of x and candidate bends."""

    line_pinv: Array  # (2, n): the single line's coefficients from y
    maker: Array  # (n, n): I − X X⁺, the single line's residuals from y
    hinges: Array  # (candidates, n): (x − S)₊ per candidate S
    coef_rows: Array  # (candidates, n): the hinge's coefficient from y, per candidate
    gains: Array  # (candidates,): RSS(line) − RSS(bend) per unit of squared coefficient


def _designs(x: Array, candidates: Array) -> _Designs:
    """By Frisch-Waugh-Lovell, the hinge's coefficient is y's product with the hinge made
    orthogonal to the line, over that column's squared norm; adding it lowers the line's RSS
    by the coefficient squared times that norm. One matrix product per set of curves then
    fits every candidate."""
    line = np.column_stack([np.ones_like(x), x])
    pinv = np.linalg.pinv(line)
    maker = np.eye(x.size) - line @ pinv
    hinges = np.maximum(x[None, :] - candidates[:, None], 0.0)
    residual = hinges @ maker  # the maker is symmetric
    norms = (residual ** 2).sum(axis=1)
    return _Designs(pinv, maker, hinges, residual / norms[:, None], norms)


def _fit(y: Array, d: _Designs) -> tuple[Array, Array, Array]:
    """sup-F over candidates, the best candidate's index and coefficients (intercept, slope,
    slope change), per row of y."""
    n = y.shape[-1]
    rss0 = ((y @ d.maker) ** 2).sum(-1)
    change = y @ d.coef_rows.T  # (reps, candidates)
    gain = change ** 2 * d.gains
    best = gain.argmax(axis=1)
    rows = np.arange(y.shape[0])
    low = np.maximum(rss0 - gain[rows, best], 1e-300)
    f = (rss0 - low) / (low / (n - 3))
    c = change[rows, best]
    ab = (y - c[:, None] * d.hinges[best]) @ d.line_pinv.T
    return f, best, np.column_stack([ab, c])


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
                seed: int = 0, items: ItemCurves | None = None) -> Changepoint | None:
    """The one-changepoint fit of ``values`` against training step; None with fewer than
    `MIN_POINTS` finite checkpoints. ``items``: the curve's items, one column per entry of
    ``steps`` (their contrast must be ``values``); without them nothing is tested."""
    s, y = np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)
    keep = np.isfinite(s) & np.isfinite(y)
    order = np.argsort(s[keep], kind="stable")
    x, y = transform(s[keep][order], scale), y[keep][order]
    cand = candidates_between(x)
    if x.size < MIN_POINTS or cand.size == 0:
        return None
    designs = _designs(x, cand)
    f, best, coef = _fit(y[None, :], designs)
    b, c = float(coef[0][1]), float(coef[0][2])
    tested: tuple[float, ...] = (math.nan,) * 6
    if items is not None:
        chosen = items.select(np.flatnonzero(keep)[order])
        if not np.allclose(chosen.curve(), y, rtol=1e-9, atol=1e-12):
            raise ValueError("changepoint: the items' contrast is not the curve given")
        tested = _item_test(chosen, cand, designs, confidence, n_resamples, seed)
    t, p, lo, hi, clo, chi = tested
    return Changepoint(scale, untransform(float(cand[int(best[0])]), scale),
                       untransform(lo, scale) if math.isfinite(lo) else math.nan,
                       untransform(hi, scale) if math.isfinite(hi) else math.nan,
                       b, b + c, c, clo, chi, float(f[0]), p, int(x.size), confidence, t)


def _item_test(items: ItemCurves, cand: Array, designs: _Designs, confidence: float,
               n_resamples: int, seed: int) -> tuple[float, ...]:
    """(t, p, S low, S high, slope change low, high) from resampling the items: the test on
    the slope changes at every candidate (`max_t`), the CIs from refitting resampled curves."""
    rng = np.random.default_rng(seed)
    test = max_t(items, designs.coef_rows, n_resamples, rng)
    if test is None:
        return (math.nan,) * 6
    bends, changes = [], []
    per = max(1, CELLS // (cand.size + items.columns))
    for start in range(0, n_resamples, per):
        curves = items.resampled(items.draws(min(per, n_resamples - start), rng))
        _, which, coef = _fit(curves, designs)
        bends.append(cand[which])
        changes.append(coef[:, 2])
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(np.concatenate(bends), [tail, 100 - tail])
    clo, chi = np.percentile(np.concatenate(changes), [tail, 100 - tail])
    return (test.statistic(), test.p_value(), float(lo), float(hi), float(clo), float(chi))


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
