"""A curve over checkpoints that is a contrast of item means, and its item bootstrap.

A gap curve is the male prompts' mean minus the female prompts' mean at each checkpoint, over
the same prompts every time. Its errors are correlated from one checkpoint to the next: the
prompts are the same, and neighbouring checkpoints share most of their weights. So no test may
treat the checkpoints as independent draws (a residual bootstrap over checkpoints claims a bend
in a random walk half the time). What is random is the prompts: resampling them within each
group, the same draw at every checkpoint, gives curves whose errors have the real dependence,
whatever it is.

`max_t` turns that into simultaneous inference on several linear functionals of the curve
(the slope changes at every candidate bend, the changes between every pair of consecutive
checkpoints): the bootstrap-t distribution of the largest studentised deviation, each
replicate studentised by its own item-level standard errors, which keeps small samples honest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from biasscope.core.bootstrap import forget_drawn, resample_counts
from biasscope.core.stats import Array

BATCH = 250  # bootstrap replicates computed at once (memory: BATCH × items × columns)


@dataclass(frozen=True)
class ItemCurves:
    """Per group an (items × columns) array of item values, NaN where an item was not asked,
    and the group's sign in the contrast (``(1, -1)``: first group minus second)."""

    groups: tuple[Array, ...]
    signs: tuple[float, ...]

    @classmethod
    def contrast(cls, first: Array, second: Array) -> ItemCurves:
        """The first group's mean minus the second's."""
        return cls((np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)),
                   (1.0, -1.0))

    @classmethod
    def paired(cls, first: Array, second: Array) -> ItemCurves:
        """The mean of the pairs' differences, row i of ``first`` against row i of ``second``:
        each pair is resampled whole, as it was drawn. Resampled within each group instead,
        pairs whose two sides move against each other (a WinoBias pair's male and female
        prompt, one pronoun apart) looked up to 1.4 times surer than they are."""
        return cls((np.asarray(first, dtype=np.float64) - np.asarray(second, dtype=np.float64),),
                   (1.0,))

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(g.shape[0] for g in self.groups)

    @property
    def columns(self) -> int:
        return int(self.groups[0].shape[1]) if self.groups else 0

    def select(self, columns: npt.ArrayLike) -> ItemCurves:
        """The curves at these column indices, in this order."""
        index = np.asarray(columns, dtype=np.intp)
        return ItemCurves(tuple(g[:, index] for g in self.groups), self.signs)

    def curve(self) -> Array:
        """The contrast of the group means per column (over the items asked there)."""
        out = np.zeros(self.columns)
        for sign, g in zip(self.signs, self.groups, strict=True):
            asked = np.isfinite(g).sum(axis=0)
            total = np.where(np.isfinite(g), g, 0.0).sum(axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                out = out + sign * np.where(asked > 0, total / np.maximum(asked, 1), math.nan)
        return out

    def filled(self) -> tuple[Array, ...]:
        """Each group with a missing value replaced by its group's mean in that column: the
        curve is unchanged, and the item counts once everywhere."""
        out = []
        for g in self.groups:
            asked = np.isfinite(g)
            means = np.where(asked, g, 0.0).sum(axis=0) / np.maximum(asked.sum(axis=0), 1)
            out.append(np.where(asked, g, means[None, :]))
        return tuple(out)

    def draws(self, n: int, rng: np.random.Generator) -> tuple[Array, ...]:
        """``n`` item resamples per group: how often each item is drawn (with replacement,
        the group's size), one draw used at every column."""
        return tuple(resample_counts(size, n, rng) for size in self.sizes)

    def resampled(self, draws: tuple[Array, ...]) -> Array:
        """The curve of each resample (rows of ``draws``), from `filled` values."""
        out = np.zeros((draws[0].shape[0], self.columns))
        for sign, g, w in zip(self.signs, self.filled(), draws, strict=True):
            out += sign * (w @ g) / g.shape[0]
        return out


@dataclass(frozen=True)
class MaxT:
    """Linear functionals of a curve with item-level standard errors, and replicates of the
    largest studentised deviation over them."""

    estimates: Array
    se: Array
    replicates: Array  # max over functionals of |θ* − θ| / se*, one per resample

    def statistic(self) -> float:
        """The largest |θ| / se: the test of "every functional is 0"."""
        return float(_studentised(np.abs(self.estimates)[None, :], self.se[None, :])[0])

    def p_value(self) -> float:
        """Bootstrap-t p of `statistic`: (1 + replicates at least as large) / (1 + n)."""
        t = self.statistic()
        return float((1 + np.sum(self.replicates >= t * (1 - 1e-12))) / (self.replicates.size + 1))

    def quantile(self, confidence: float) -> float:
        """The simultaneous critical value: all functionals within ±q·se with ``confidence``."""
        return float(np.quantile(self.replicates, confidence, method="higher"))


def _moments(values: Array, weights: Array) -> tuple[Array, Array]:
    """Per resample (rows of ``weights``) the weighted mean of each column of ``values``
    and the squared standard error of that mean (unbiased variance over the items / n)."""
    n = values.shape[0]
    mean = weights @ values / n
    square = weights @ values ** 2 / n
    variance = np.maximum(square - mean ** 2, 0.0) * n / max(n - 1, 1)
    return mean, variance / n


def _studentised(deviation: Array, se: Array) -> Array:
    """Max over columns of deviation / se; a zero se counts as exact (0 when the deviation is
    0 too, else infinite)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, deviation / np.where(se > 0, se, 1.0),
                     np.where(deviation > 1e-12 * (1 + np.abs(deviation)), np.inf, 0.0))
    return np.asarray(t.max(axis=1))


def max_t(items: ItemCurves, functionals: Array, n_resamples: int,
          rng: np.random.Generator) -> MaxT | None:
    """θ = functionals · curve (one row per functional) with item-level standard errors, and
    the bootstrap-t replicates of max |θ* − θ| / se* (items resampled within groups, the same
    draw at every column). None when a group has fewer than two items, or no functional."""
    a = np.asarray(functionals, dtype=np.float64)
    if min(items.sizes, default=0) < 2 or a.shape[0] == 0:
        return None
    projected = [g @ a.T for g in items.filled()]  # per item, its value of each functional
    ones = tuple(np.ones((1, size)) for size in items.sizes)
    theta, var = _combine(projected, ones, items.signs)
    estimates, se = theta[0], np.sqrt(var[0])
    replicates = []
    for draws in _resamples(items.sizes, n_resamples, rng):
        boot, boot_var = _combine(projected, draws, items.signs)
        replicates.append(_studentised(np.abs(boot - estimates), np.sqrt(boot_var)))
    return MaxT(estimates, se, np.concatenate(replicates) if replicates else np.zeros(0))


def forget_resamples() -> None:
    """Drop the draws `resample_counts` keeps (tens of megabytes), once an analysis is done."""
    forget_drawn()


def _resamples(sizes: tuple[int, ...], n_resamples: int, rng: np.random.Generator
               ) -> list[tuple[Array, ...]]:
    """`ItemCurves.draws` of ``n_resamples`` in batches of `BATCH`. The analysis tests several
    functionals of one curve (the sharpest change, the rates' band, the changepoint), each
    from a fresh generator of the same seed over the same items: `resample_counts` gives
    the draws it kept again."""
    curves = ItemCurves(tuple(np.zeros((size, 0)) for size in sizes), (1.0,) * len(sizes))
    return [curves.draws(min(BATCH, n_resamples - start), rng)
            for start in range(0, n_resamples, BATCH)]


def _combine(projected: list[Array], weights: tuple[Array, ...], signs: tuple[float, ...]
             ) -> tuple[Array, Array]:
    theta: Array = np.zeros(0)
    var: Array = np.zeros(0)
    for k, (values, w, sign) in enumerate(zip(projected, weights, signs, strict=True)):
        mean, sq = _moments(values, w)
        theta, var = (sign * mean, sq) if k == 0 else (theta + sign * mean, var + sq)
    return theta, var
