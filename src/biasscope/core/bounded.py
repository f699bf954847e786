"""A t statistic for a contrast of means of bounded values that does not collapse when the
items agree: the contrast Σ wₖ·mean(xₖ) of independent samples whose values lie in known
ranges (a prompt's JSD-P in [0, ½ ln 2], a paired difference of accuracies in [−1, 1]).

Welch's t fails twice on such data. When every item agrees (all paired differences 0) its
standard error is 0 and any margin is "shown"; and when a difference is made of a few items
that jump across the range (a quantised model that changes 3 answers of 80), the observed
variance is far below the variance the tested difference implies, so an interval from it is
too short. Two repairs, both from the intervals for proportions:

- **a score-type variance** (as Wilson's interval tests a proportion with the variance under
  the null): the statistic for a null difference Δ₀ ≠ 0 uses, for the sample that carries
  Δ₀, at least the variance of the least variable values with that mean made of jumps of the
  sample's reach D (the most one item can move it): a share a/D of items at D and the rest at
  0, variance a(D − a) with a = |Δ₀|/|wₖ|; the sample is the one where this gives the
  smallest total (the least favourable null). For 0/1 values this is Wilson's variance;
- **pseudo-observations** (Agresti & Min 2005) for a sample with no spread (every value
  equal, or a single item): half an item at each end of its range and one at its centre, so
  identical differences are not "significant" by a standard error of 0. Samples with a spread
  keep their own variance, so a small, consistent shift over many items is still found.

The interval is the set of Δ₀ the statistic does not reject at the t quantile (Satterthwaite's
degrees of freedom), so a TOST and the interval agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from biasscope.core.imports import lazy
from biasscope.core.stats import Array

optimize = lazy("scipy.optimize")  # imported at first use

Bounds = tuple[float, float]


def augmented(x: Array, bounds: Bounds) -> tuple[float, float, int]:
    """Mean and variance of ``x`` with the pseudo-observations, and their total weight."""
    low, high = bounds
    values = np.r_[x, low, high, (low + high) / 2]
    weights = np.r_[np.ones(x.size), 0.5, 0.5, 1.0]
    total = x.size + 2
    mean = float(weights @ values) / total
    return mean, float(weights @ (values - mean) ** 2) / (total - 1), total


def spread(x: Array, bounds: Bounds) -> tuple[float, float, int]:
    """Mean, variance and size of a sample: its own, or with the pseudo-observations (variance
    and size only) when it has no spread."""
    mean = float(x.mean())
    if x.size >= 2 and np.ptp(x) > 0:
        return mean, float(x.var(ddof=1)), int(x.size)
    _, var, total = augmented(x, bounds)
    return mean, var, total


def reach(bounds: Bounds, paired: bool) -> float:
    """The most one item can move its sample's mean away from the most favourable data (all
    paired differences 0, or all values equal): a paired difference to its farther bound, a
    value across the whole range."""
    low, high = bounds
    return max(abs(low), abs(high)) if paired else high - low


@dataclass(frozen=True)
class Contrast:
    """The samples of a contrast: per sample its weight, mean, variance, size (`spread`) and
    reach."""

    weights: tuple[float, ...]
    means: tuple[float, ...]
    variances: tuple[float, ...]
    sizes: tuple[int, ...]
    reaches: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[Array], weights: Sequence[float],
           bounds: Sequence[Bounds], paired: bool) -> Contrast:
        parts = [spread(x, b) for x, b in zip(samples, bounds, strict=True)]
        return cls(tuple(float(w) for w in weights), tuple(p[0] for p in parts),
                   tuple(p[1] for p in parts), tuple(p[2] for p in parts),
                   tuple(abs(float(w)) * reach(b, paired) for w, b in zip(weights, bounds,
                                                                         strict=True)))

    @property
    def centre(self) -> float:
        return float(sum(w * m for w, m in zip(self.weights, self.means, strict=True)))

    def _pieces(self) -> list[float]:
        return [w * w * v / n for w, v, n in zip(self.weights, self.variances, self.sizes,
                                                 strict=True)]

    @property
    def df(self) -> float:
        """Satterthwaite's degrees of freedom of the samples."""
        pieces = self._pieces()
        total = sum(pieces)
        denom = sum(p * p / (n - 1) for p, n in zip(pieces, self.sizes, strict=True))
        return total * total / denom if denom > 0 else float(sum(n - 1 for n in self.sizes))

    def variance(self, null: float) -> float:
        """The contrast's variance for the null difference ``null``: observed, with the
        least favourable sample's variance raised to the score-type floor."""
        observed = sum(self._pieces())
        if null == 0:
            return observed
        best = math.inf
        for w, v, n, d in zip(self.weights, self.variances, self.sizes, self.reaches,
                              strict=True):
            a = min(abs(null), d)  # the sample's shift, in the contrast's units
            floor = a * (d - a)  # two-point values 0 and d with mean a (w² times a variance)
            best = min(best, observed + max(0.0, floor - w * w * v) / n)
        return best

    def statistic(self, null: float) -> float:
        """(centre − null) / its standard error under the null."""
        var = self.variance(null)
        diff = self.centre - null
        if var <= 0:
            return 0.0 if diff == 0 else math.copysign(math.inf, diff)
        return diff / math.sqrt(var)

    def interval(self, quantile: float) -> tuple[float, float]:
        """The nulls whose statistic lies within ±``quantile``."""
        centre = self.centre
        widest = sum(self._pieces()) + max(d * d / 4 / n for d, n in zip(self.reaches,
                                                                        self.sizes))
        far = quantile * math.sqrt(widest) * 1.01 + 1e-12

        def ends(sign: float) -> float:
            def gap(offset: float) -> float:
                return abs(self.statistic(centre + sign * offset)) - quantile
            return centre + sign * float(optimize.brentq(gap, 0.0, far, xtol=1e-14))
        return ends(-1.0), ends(1.0)


__all__ = ["Bounds", "Contrast", "augmented", "reach", "spread"]
