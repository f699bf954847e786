"""Do two curves over the same checkpoints move together? A test that trends cannot fool.

Two curves of one training run are not pairs of independent draws: each is correlated from
one checkpoint to the next (the same items at every checkpoint; neighbouring checkpoints share
most of their weights), and two unrelated random walks are rank-correlated beyond a bootstrap
interval over checkpoints about a third of the time over 20 checkpoints. So the curves'
*changes* are compared, over pairs of consecutive checkpoints that share no checkpoint:
(K−2, K−1), (K−4, K−3), … (the first checkpoint left out when K is odd). For a random walk
these changes are independent; for noise about a trend (AR(1), any ρ from 0 to 1) nearly so
(correlation at most 1/8). Overlapping changes would not do: those of independent noise
correlate at −1/2, and the test would claim too often.

If the two curves' changes are unrelated, every pairing of one curve's changes with the
other's is equally likely, so the permutation distribution of Spearman's ρ between them gives
an exact p-value (all n! pairings up to 8 changes, else ``n_resamples`` random ones). The
interval is Fisher's z with the Bonett-Wright variance (1 + ρ²/2)/(n − 3), from 4 changes on.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from biasscope.core.imports import lazy
from biasscope.core.stats import Array

sps = lazy("scipy.stats")  # imported at first use

EXACT = 8  # up to this many changes, all n! pairings


@dataclass(frozen=True)
class Comovement:
    """Spearman's ρ of two curves' non-overlapping changes (``estimate``) with its interval
    and permutation p-value; ``levels``: ρ of the curves themselves (descriptive only)."""

    estimate: float
    low: float
    high: float
    p_value: float
    smallest_p: float  # the smallest p-value this many changes can give
    n: int  # changes compared
    checkpoints: int
    confidence: float
    levels: float
    constant: bool = False  # a curve's changes are all equal: ρ undefined

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def changes(values: npt.ArrayLike) -> Array:
    """The changes over consecutive pairs of checkpoints that share none, ending at the last."""
    v = np.asarray(values, dtype=np.float64)
    start = v.size % 2
    return np.asarray(v[start + 1::2] - v[start::2])


def _constant(change: Array, values: Array) -> bool:
    """All changes equal, up to rounding (a straight line's changes differ in the last bits)."""
    return bool(np.ptp(change) <= 1e-9 * max(float(np.abs(values).max()), 1e-300))


def _rho(rx: Array, ry: Array) -> Array:
    """Pearson correlation of centred rank vectors (rows of ``ry`` against ``rx``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((ry @ rx) / np.sqrt((rx ** 2).sum() * (ry ** 2).sum(axis=-1)))


def _pairings(ry: Array, n_resamples: int, seed: int) -> tuple[Array, bool]:
    """Every ordering of ``ry`` (exact) or ``n_resamples`` random ones."""
    n = ry.size
    if n <= EXACT:
        return ry[np.array(list(itertools.permutations(range(n))))], True
    rng = np.random.default_rng(seed)
    return rng.permuted(np.tile(ry, (n_resamples, 1)), axis=1), False


def comovement(x: npt.ArrayLike, y: npt.ArrayLike, confidence: float = 0.95,
               n_resamples: int = 2000, seed: int = 0) -> Comovement:
    """Whether ``x`` and ``y`` (values at the same checkpoints, in step order) change
    together; NaN estimate with fewer than 3 changes."""
    xv, yv = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    dx, dy = changes(xv), changes(yv)
    n, k = dx.size, xv.size
    levels = (float(sps.spearmanr(xv, yv).statistic)
              if k >= 3 and np.ptp(xv) > 0 and np.ptp(yv) > 0 else math.nan)
    smallest = 2 / math.factorial(n) if n <= EXACT else 1 / (n_resamples + 1)
    nan = math.nan
    if n < 3 or _constant(dx, xv) or _constant(dy, yv):
        return Comovement(nan, nan, nan, nan, min(smallest, 1.0), n, k, confidence, levels,
                          constant=n >= 3)
    rx, ry = sps.rankdata(dx), sps.rankdata(dy)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    rho = float(_rho(rx, ry))
    null, exact = _pairings(ry, n_resamples, seed)
    extreme = int(np.sum(np.abs(_rho(rx, null)) >= abs(rho) - 1e-12))
    p = extreme / null.shape[0] if exact else (1 + extreme) / (null.shape[0] + 1)
    low = high = nan
    if n >= 4:
        z = math.atanh(max(min(rho, 0.9999), -0.9999))
        half = float(sps.norm.ppf((1 + confidence) / 2)) * math.sqrt((1 + rho ** 2 / 2) / (n - 3))
        low, high = math.tanh(z - half), math.tanh(z + half)
    return Comovement(rho, low, high, p, min(smallest, 1.0), n, k, confidence, levels)
