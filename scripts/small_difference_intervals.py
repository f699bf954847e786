"""Coverage and width of 95% intervals of a difference of two groups' means: the evidence for
`biasscope.core.intervals.mean_difference_ci` (docs/explanation/statistics.md, "A difference of
two small groups"); ``--large`` runs 20 to 200 items a group, where it was BCa until 2026-12.

Candidates: the BCa bootstrap (each group resampled on its own, as `mean_difference_ci` was
at 20 items a group and more); Welch's t (Welch-Satterthwaite degrees of freedom); Welch's widened
to Hall's (1992) transformation where that reaches further, with the skewness of the
difference of means, (m3x/n1^2 - m3y/n2^2) / (m2x/n1 + m2y/n2)^1.5 (the two-sample form of
Zhou and Dinh 2005); and biasscope's, computed by `mean_difference_ci` itself.

Usage (one core, about two minutes at 4000 samples)::

    PYTHONPATH=src python scripts/small_difference_intervals.py --samples 4000
    PYTHONPATH=src python scripts/small_difference_intervals.py --large --samples 2000

``--large`` (about a minute at 2000 samples) adds groups alike (the null of no gap: JSD-P,
mean ranks, lognormal) and accuracies over 3 seeds, and Hesterberg's (2015) expanded BCa (the
normal quantile replaced by Welch's t quantile times the square root of Welch's variance over
the bootstrap's, s^2/n against (n-1)/n s^2/n a group); its bootstraps draw one set of 1999
resamples a group per cell, shared by the cell's samples.

Prints one CSV row per (groups, sizes, method): coverage, misses below and above, the median
width and the mean ratio of each sample's width to Welch's.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from biasscope.core import intervals

Array = np.ndarray
Draw = Callable[[np.random.Generator, tuple[int, int]], Array]
HALF_LN2 = math.log(2) / 2
SIZES = ((3, 3), (5, 8), (12, 12), (19, 25), (30, 30))
LARGE_SIZES = ((20, 20), (30, 30), (50, 50), (100, 100), (200, 200))
RESAMPLES = 1999


def _jsdp(p: Array) -> Array:
    """A correct option's JSD-P at probability p: in [0, ½ ln 2], 0 at p = 1."""
    return 0.5 * (np.log(2 / (1 + p)) + p * np.log(2 * p / (1 + p)))


def _jsd_draw(mu: float, sigma: float) -> Draw:
    return lambda r, s: _jsdp(1 / (1 + np.exp(-r.normal(mu, sigma, s))))


def _accuracy(r: np.random.Generator, s: tuple[int, int]) -> Array:
    """A prompt's accuracy over 3 seeds, its chance of being right Beta(2, 0.7)."""
    return r.binomial(3, r.beta(2, 0.7, s)) / 3


def _rank(r: np.random.Generator, s: tuple[int, int]) -> Array:
    """A prompt's mean rank over 3 seeds (scripts/small_mean_intervals.py's)."""
    base = r.normal(1.0, 1.3, s)[..., None] + r.normal(0, 0.3, (*s, 3))
    return np.minimum(np.exp(base).round() + 1, 50277).mean(-1)


def _large_groups() -> dict[str, tuple[Draw, Draw, float, tuple[float, float] | None]]:
    """``--large``'s groups: `_groups`' skewed ones, and groups alike (no gap)."""
    jsd_bounds = (-HALF_LN2, HALF_LN2)
    lognormal: Draw = lambda r, s: r.lognormal(0, 1, s)  # noqa: E731
    return {**{k: v for k, v in _groups().items() if k != "normal"},
            "JSD-P alike (p ~ logit N(2, 1.5) both)": (_jsd_draw(2.0, 1.5), _jsd_draw(2.0, 1.5),
                                                       0.0, jsd_bounds),
            "accuracy over 3 seeds, alike": (_accuracy, _accuracy, 0.0, (-1.0, 1.0)),
            "mean rank over 3 seeds, alike": (_rank, _rank, 0.0, None),
            "lognormal, alike": (lognormal, lognormal, 0.0, None)}


def _groups() -> dict[str, tuple[Draw, Draw, float, tuple[float, float] | None]]:
    """name: (first group's draw, second's, true difference, bounds of the difference)."""
    big = np.random.default_rng(99)
    jsd = {k: float(_jsd_draw(mu, sd)(big, (4_000_000,)).mean())
           for k, (mu, sd) in {"a": (2.0, 1.5), "b": (1.0, 1.5), "c": (0.0, 2.5),
                               "d": (1.0, 1.0)}.items()}
    jsd_bounds = (-HALF_LN2, HALF_LN2)
    return {
        "normal": (lambda r, s: r.normal(0, 1, s), lambda r, s: r.normal(0, 1, s), 0.0, None),
        "normal, SD 3 and 1": (lambda r, s: r.normal(0, 3, s), lambda r, s: r.normal(0, 1, s),
                               0.0, None),
        "exponential": (lambda r, s: r.exponential(1, s), lambda r, s: r.exponential(1, s),
                        0.0, None),
        "exponential, scale 2 and 0.5": (lambda r, s: r.exponential(2, s),
                                         lambda r, s: r.exponential(0.5, s), 1.5, None),
        "JSD-P, a trained model (p ~ logit N(2, 1.5) and N(1, 1.5))": (
            _jsd_draw(2.0, 1.5), _jsd_draw(1.0, 1.5), jsd["a"] - jsd["b"], jsd_bounds),
        "JSD-P, unequal spread (logit N(0, 2.5) and N(1, 1))": (
            _jsd_draw(0.0, 2.5), _jsd_draw(1.0, 1.0), jsd["c"] - jsd["d"], jsd_bounds),
    }


def _moments(x: Array) -> tuple[Array, Array, Array]:
    """Mean, biased second and third central moments of each row."""
    m = x.mean(1)
    d = x - m[:, None]
    return m, (d ** 2).mean(1), (d ** 3).mean(1)


def welch_ci(x: Array, y: Array, alpha: float) -> tuple[Array, Array]:
    n1, n2 = x.shape[1], y.shape[1]
    mx, vx, _ = _moments(x)
    my, vy, _ = _moments(y)
    a, b = vx * n1 / (n1 - 1) / n1, vy * n2 / (n2 - 1) / n2  # s^2 / n
    df = (a + b) ** 2 / (a ** 2 / (n1 - 1) + b ** 2 / (n2 - 1))
    half = sps.t.ppf(1 - alpha / 2, df) * np.sqrt(a + b)
    return mx - my - half, mx - my + half


def hall_ci(x: Array, y: Array, alpha: float) -> tuple[Array, Array]:
    """T = t + g t^2/3 + g^2 t^3/27 + g/6, t the Welch statistic, g the skewness of the
    difference of means; normal quantiles, inverted in closed form."""
    n1, n2 = x.shape[1], y.shape[1]
    mx, vx, tx = _moments(x)
    my, vy, ty = _moments(y)
    se = np.sqrt(vx / (n1 - 1) + vy / (n2 - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.nan_to_num((tx / n1 ** 2 - ty / n2 ** 2) / (vx / n1 + vy / n2) ** 1.5)
    z = sps.norm.ppf(1 - alpha / 2)

    def studentised(q: float) -> Array:
        v = q - g / 6
        c = np.cbrt(1 + g * v)
        return 3 * v / (c * c + c + 1)

    return mx - my - studentised(z) * se, mx - my - studentised(-z) * se


def bca_ci(x: Array, y: Array, confidence: float) -> tuple[Array, Array]:
    """The BCa interval `mean_difference_ci` gives at 20 items a group and more."""
    found = [intervals._bootstrap((a, b), intervals.DIFFERENCE, confidence, 2000, "BCa", 0)
             for a, b in zip(x, y, strict=True)]
    return np.array([c.low for c in found]), np.array([c.high for c in found])


def _counted(x: Array, rng: np.random.Generator) -> Array:
    """Each sample's resampled means from one set of resample counts, (samples, RESAMPLES)."""
    n = x.shape[1]
    counts = np.zeros((RESAMPLES, n))
    np.add.at(counts, (np.arange(RESAMPLES)[:, None], rng.integers(0, n, (RESAMPLES, n))), 1)
    return np.asarray(x @ counts.T / n)


def _row_quantiles(values: Array, levels: Array) -> Array:
    ordered = np.sort(values, 1)
    position = np.clip(levels * (values.shape[1] - 1), 0, values.shape[1] - 1)
    low = np.floor(position).astype(int)
    high, weight = np.minimum(low + 1, values.shape[1] - 1), position - low
    rows = np.arange(len(values))
    return np.asarray((1 - weight) * ordered[rows, low] + weight * ordered[rows, high])


def large_bca(x: Array, y: Array, alpha: float, rng: np.random.Generator
              ) -> dict[str, tuple[Array, Array]]:
    """BCa (SciPy's two-sample acceleration) and Hesterberg's expanded BCa from shared counts."""
    n1, n2 = x.shape[1], y.shape[1]
    resampled = _counted(x, rng) - _counted(y, rng)
    mx, vx, _ = _moments(x)
    my, vy, _ = _moments(y)
    estimate = mx - my
    share = ((resampled < estimate[:, None]).sum(1)
             + (resampled <= estimate[:, None]).sum(1)) / (2 * RESAMPLES)
    z0 = sps.norm.ppf(np.clip(share, 1e-9, 1 - 1e-9))
    ux, uy = x - mx[:, None], my[:, None] - y  # (n - 1)(mean of the jackknife - each)
    with np.errstate(invalid="ignore", divide="ignore"):
        accel = np.nan_to_num(((ux ** 3).sum(1) / n1 ** 3 + (uy ** 3).sum(1) / n2 ** 3) / 6
                              / ((ux ** 2).sum(1) / n1 ** 2 + (uy ** 2).sum(1) / n2 ** 2) ** 1.5)
    a, b = vx / (n1 - 1), vy / (n2 - 1)  # s^2 / n
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (a + b) ** 2 / (a ** 2 / (n1 - 1) + b ** 2 / (n2 - 1))
        wider = np.sqrt((a + b) / (vx / n1 + vy / n2)) * sps.t.ppf(1 - alpha / 2, df)

    def bca(z: Array) -> tuple[Array, Array]:
        ends = [sps.norm.cdf(z0 + (z0 + q) / (1 - accel * (z0 + q))) for q in (-z, z)]
        return _row_quantiles(resampled, ends[0]), _row_quantiles(resampled, ends[1])
    return {"BCa": bca(np.full(len(x), sps.norm.ppf(1 - alpha / 2))),
            "BCa expanded": bca(np.nan_to_num(wider, nan=sps.norm.ppf(1 - alpha / 2)))}


def ours_ci(x: Array, y: Array, confidence: float,
            bounds: tuple[float, float] | None) -> tuple[Array, Array]:
    found = [intervals.mean_difference_ci(a, b, confidence, bounds=bounds)
             for a, b in zip(x, y, strict=True)]
    return np.array([c.low for c in found]), np.array([c.high for c in found])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--large", action="store_true", help="20 to 200 items a group")
    args = parser.parse_args()
    alpha = 1 - args.confidence
    print("groups,n1,n2,method,coverage,miss_low,miss_high,median_width,width_over_welch")
    groups = _large_groups() if args.large else _groups()
    for k, (name, (first, second, delta, bounds)) in enumerate(groups.items()):
        for n1, n2 in LARGE_SIZES if args.large else SIZES:
            rng = np.random.default_rng([k, n1, n2])
            x, y = first(rng, (args.samples, n1)), second(rng, (args.samples, n2))
            welch = welch_ci(x, y, alpha)
            hall = hall_ci(x, y, alpha)
            found = {
                "Welch": welch,
                **(large_bca(x, y, alpha, rng) if args.large
                   else {"BCa": bca_ci(x, y, args.confidence)}),
                "Hall, normal quantiles": hall,
                "Welch or Hall, the wider": (np.minimum(welch[0], hall[0]),
                                             np.maximum(welch[1], hall[1])),
                "biasscope": ours_ci(x, y, args.confidence, bounds),
            }
            welch_width = None
            for method, (low, high) in found.items():
                if bounds is not None:
                    low, high = np.maximum(low, bounds[0]), np.minimum(high, bounds[1])
                low, high = np.nan_to_num(low, nan=-np.inf), np.nan_to_num(high, nan=np.inf)
                width = high - low
                welch_width = width if method == "Welch" else welch_width
                ratio = (f"{np.mean(width / welch_width):.3f}" if welch_width is not None
                         else "")
                print(f'"{name}",{n1},{n2},"{method}",'
                      f"{np.mean((low <= delta) & (delta <= high)):.4f},"
                      f"{np.mean(low > delta):.4f},{np.mean(high < delta):.4f},"
                      f"{np.median(width):.4g},{ratio}", flush=True)


if __name__ == "__main__":
    main()
