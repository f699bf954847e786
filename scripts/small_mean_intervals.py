"""Coverage and width of 95% intervals of a mean of a few items, skewed and not: the evidence
for `biasscope.core.intervals.skewed_t_interval`, the interval of `mean_ci`
(docs/explanation/statistics.md, "A mean of a few items"). ``--large`` runs 20 to 200 items
instead, where `mean_ci` was BCa until 2026-12: the evidence that it no longer is.

Candidates: Student's t; Johnson's (1978) skewness-corrected t (its shift, the form in use,
and with its quadratic term); Hall's (1992) cubic transformation of t with normal and with
t quantiles; the bootstrap-t (studentised); BCa; and biasscope's, t widened to Hall's
(normal quantiles) where that reaches further, computed by `mean_ci` itself with the items'
range where they have one (a run's accuracies keep [0, 1]: samples all at 0 or 1 are
bootstrapped, samples without spread get Wilson's).

Usage (one core, about two minutes at 4000 samples)::

    PYTHONPATH=src python scripts/small_mean_intervals.py --samples 4000
    PYTHONPATH=src python scripts/small_mean_intervals.py --large --samples 2000

``--large`` (about two minutes at 2000 samples) compares t, BCa, Hesterberg's (2015) expanded
BCa (its normal quantile replaced by sqrt(n/(n-1)) times t's, n - 1 degrees of freedom), the
bootstrap-t and biasscope's over the realistic skewed items (JSD-like, a prompt's accuracy
over 3 seeds, its mean rank over 3 seeds, lognormal) and two symmetric ones; its bootstraps
draw one set of 1999 resamples a cell, shared by the cell's samples (each interval is still
a bootstrap interval of its sample; the coverage is the same in expectation).

Prints one CSV row per (items, n, method): coverage, misses below and above, the median
width and the mean ratio of each sample's width to t's.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from biasscope.core.intervals import mean_ci

Array = np.ndarray
Draw = Callable[[np.random.Generator, tuple[int, int]], Array]
RESAMPLES = 1999


def _sigmoid(z: Array) -> Array:
    return 1 / (1 + np.exp(-z))


def _jsd(p: Array, q: Array) -> Array:
    m = (p + q) / 2
    def kl(a: Array, b: Array) -> Array:
        return a * np.log(a / b) + (1 - a) * np.log((1 - a) / (1 - b))
    return (kl(p, m) + kl(q, m)) / 2


def _accuracy(r: np.random.Generator, s: tuple[int, int]) -> Array:
    """A prompt's accuracy over 3 seeds (0, 1/3, 2/3, 1), its chance of being right Beta(2, 0.7):
    a mostly right model, skewed left."""
    return r.binomial(3, r.beta(2, 0.7, s)) / 3


def _rank(r: np.random.Generator, s: tuple[int, int]) -> Array:
    """A prompt's mean rank over 3 seeds: 1 + a lognormal (log-median 1, spread 1.3, the seeds'
    0.3 about it), rounded, in a vocabulary of 50,277: mostly 2 to 10, now and then thousands."""
    base = r.normal(1.0, 1.3, s)[..., None] + r.normal(0, 0.3, (*s, 3))
    return np.minimum(np.exp(base).round() + 1, 50277).mean(-1)


def _items() -> dict[str, tuple[Draw, float, tuple[float, float] | None]]:
    """name: (draw, true mean, bounds)."""
    big = np.random.default_rng(99)
    jsd = float(_jsd(_sigmoid(big.normal(0, 1.5, 4_000_000)),
                     _sigmoid(big.normal(0, 1.5, 4_000_000))).mean())
    pdiff = float((_sigmoid(big.normal(-1, 1.5, 4_000_000)) ** 2
                   - _sigmoid(big.normal(-1, 1.5, 4_000_000)) ** 3).mean())
    return {
        "normal": (lambda r, s: r.normal(0, 1, s), 0.0, None),
        "exponential": (lambda r, s: r.exponential(1, s), 1.0, None),
        "lognormal(sigma 1)": (lambda r, s: r.lognormal(0, 1, s), math.exp(0.5), None),
        "bimodal 0.8 N(0 1) + 0.2 N(4 1)": (
            lambda r, s: np.where(r.random(s) < 0.8, r.normal(0, 1, s), r.normal(4, 1, s)),
            0.8, None),
        "Beta(0.5 2)": (lambda r, s: r.beta(0.5, 2, s), 0.2, (0.0, 1.0)),
        "JSD of two answers": (
            lambda r, s: _jsd(_sigmoid(r.normal(0, 1.5, s)), _sigmoid(r.normal(0, 1.5, s))),
            jsd, (0.0, math.log(2))),
        "log-prob difference (Gumbel + noise)": (
            lambda r, s: r.gumbel(0, 1, s) + 0.3 * r.normal(0, 1, s), 0.5772156649, None),
        "probability difference": (
            lambda r, s: _sigmoid(r.normal(-1, 1.5, s)) ** 2 - _sigmoid(r.normal(-1, 1.5, s)) ** 3,
            pdiff, (-1.0, 1.0)),
        "difference of two t(3)": (lambda r, s: r.standard_t(3, s) - r.standard_t(3, s), 0.0,
                                   None),
        "accuracy over 3 seeds": (_accuracy, float(_accuracy(big, (4_000_000,)).mean()),
                                  (0.0, 1.0)),
        "mean rank over 3 seeds": (_rank, float(_rank(big, (4_000_000,)).mean()),
                                   (1.0, math.inf)),
    }


#: The items ``--large`` runs: the realistic skewed ones, lognormal, and two symmetric.
LARGE = ("normal", "JSD of two answers", "accuracy over 3 seeds", "mean rank over 3 seeds",
         "lognormal(sigma 1)", "exponential", "difference of two t(3)")


def _moments(x: Array) -> tuple[Array, Array, Array]:
    n = x.shape[1]
    m = x.mean(1)
    d = x - m[:, None]
    s = np.sqrt((d ** 2).sum(1) / (n - 1))
    skew = (d ** 3).mean(1) / (d ** 2).mean(1) ** 1.5
    return m, s, skew


def t_ci(x: Array, alpha: float) -> tuple[Array, Array]:
    n = x.shape[1]
    m, s, _ = _moments(x)
    h = sps.t.ppf(1 - alpha / 2, n - 1) * s / math.sqrt(n)
    return m - h, m + h


def johnson_ci(x: Array, alpha: float, quadratic: bool) -> tuple[Array, Array]:
    """t1 = (D + mu3/(6 s^2 n) [+ mu3/(3 s^4) D^2]) sqrt(n)/s, D = mean - mu, inverted."""
    n = x.shape[1]
    m, s, skew = _moments(x)
    mu3 = skew * (s ** 2 * (n - 1) / n) ** 1.5
    shift, k = mu3 / (6 * s ** 2 * n), mu3 / (3 * s ** 4)
    q = sps.t.ppf(1 - alpha / 2, n - 1) * s / math.sqrt(n)
    if not quadratic:
        return m + shift - q, m + shift + q
    out = []
    for c in (q, -q):
        with np.errstate(invalid="ignore", divide="ignore"):
            root = (-1 + np.sqrt(1 - 4 * k * (shift - c))) / (2 * k)
        out.append(m - np.where(np.abs(k) > 1e-12, root, c - shift))
    return out[0], out[1]


def hall_ci(x: Array, alpha: float, quantiles: str) -> tuple[Array, Array]:
    """T = sqrt(n)(S + g S^2/3 + g^2 S^3/27 + g/(6n)), S = (mean - mu)/s (Zhou and Dinh 2005)."""
    n = x.shape[1]
    m, s, g = _moments(x)
    q = sps.t.ppf(1 - alpha / 2, n - 1) if quantiles == "t" else sps.norm.ppf(1 - alpha / 2)
    def studentised(t: float) -> Array:
        v = t / math.sqrt(n) - g / (6 * n)
        c = np.cbrt(1 + g * v)
        return 3 * v / (c * c + c + 1)
    return m - studentised(q) * s, m - studentised(-q) * s


def _resampled(x: Array, rng: np.random.Generator) -> Array:
    idx = rng.integers(0, x.shape[1], (x.shape[0], RESAMPLES, x.shape[1]))
    return np.take_along_axis(x[:, None, :], idx, 2)


def bootstrap_t_ci(x: Array, alpha: float, rng: np.random.Generator) -> tuple[Array, Array]:
    n = x.shape[1]
    m, s, _ = _moments(x)
    lows, highs = [], []
    for i in range(0, len(x), 50):
        y = _resampled(x[i:i + 50], rng)
        my, sy, centre = y.mean(2), y.std(2, ddof=1), m[i:i + 50, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(sy > 0, (my - centre) / (sy / math.sqrt(n)),
                         np.sign(my - centre) * np.inf)
        lo_q, hi_q = np.quantile(t, [alpha / 2, 1 - alpha / 2], axis=1)
        se = s[i:i + 50] / math.sqrt(n)
        lows.append(m[i:i + 50] - hi_q * se)
        highs.append(m[i:i + 50] - lo_q * se)
    return np.concatenate(lows), np.concatenate(highs)


def bca_ci(x: Array, alpha: float, rng: np.random.Generator) -> tuple[Array, Array]:
    m = x.mean(1)
    d = x - m[:, None]
    accel = (d ** 3).sum(1) / (6 * ((d ** 2).sum(1)) ** 1.5)
    lows, highs = [], []
    for i in range(0, len(x), 50):
        means = _resampled(x[i:i + 50], rng).mean(2)
        z0 = sps.norm.ppf(np.clip((means < m[i:i + 50, None]).mean(1), 1e-9, 1 - 1e-9))
        a = accel[i:i + 50]
        for z, out in ((sps.norm.ppf(alpha / 2), lows), (sps.norm.ppf(1 - alpha / 2), highs)):
            p = sps.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
            # a sample without spread (3 prompts each right under every seed) has no BCa
            # interval (0/0 acceleration); SciPy's then falls back on the percentile one: a point
            out.append(np.array([np.quantile(row, pp) if np.isfinite(pp) else mu
                                 for row, pp, mu in zip(means, p, m[i:i + 50])]))
    return np.concatenate(lows), np.concatenate(highs)


def _counted(x: Array, rng: np.random.Generator) -> tuple[Array, Array]:
    """One set of resample counts for every sample of the cell: the resampled means and sums
    of squares, (samples, RESAMPLES) each."""
    n = x.shape[1]
    counts = np.zeros((RESAMPLES, n))
    np.add.at(counts, (np.arange(RESAMPLES)[:, None], rng.integers(0, n, (RESAMPLES, n))), 1)
    return x @ counts.T / n, (x ** 2) @ counts.T / n


def _row_quantiles(values: Array, levels: Array) -> Array:
    ordered = np.sort(values, 1)
    position = np.clip(levels * (values.shape[1] - 1), 0, values.shape[1] - 1)
    low = np.floor(position).astype(int)
    high, weight, rows = np.minimum(low + 1, values.shape[1] - 1), position - low, np.arange(
        len(values))
    return (1 - weight) * ordered[rows, low] + weight * ordered[rows, high]


def large_cis(x: Array, alpha: float, rng: np.random.Generator) -> dict[str, tuple[Array, Array]]:
    """BCa, expanded BCa and the bootstrap-t from one shared set of resample counts."""
    n = x.shape[1]
    m, s, _ = _moments(x)
    means, squares = _counted(x, rng)
    share = ((means < m[:, None]).sum(1) + (means <= m[:, None]).sum(1)) / (2 * RESAMPLES)
    z0 = sps.norm.ppf(np.clip(share, 1e-9, 1 - 1e-9))
    d = x - m[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        accel = np.nan_to_num((d ** 3).sum(1) / (6 * ((d ** 2).sum(1)) ** 1.5))

    def bca(z: float) -> tuple[Array, Array]:
        ends = [sps.norm.cdf(z0 + (z0 + q) / (1 - accel * (z0 + q))) for q in (-z, z)]
        return _row_quantiles(means, ends[0]), _row_quantiles(means, ends[1])
    se = s / math.sqrt(n)
    spread = np.sqrt(np.maximum(squares - means ** 2, 0) * n / (n - 1)) / math.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (means - m[:, None]) / spread
    t = np.where(np.isfinite(t), t, np.sign(means - m[:, None]) * 1e9)
    t_low, t_high = (_row_quantiles(t, np.full(len(x), q)) for q in (alpha / 2, 1 - alpha / 2))
    return {"BCa": bca(sps.norm.ppf(1 - alpha / 2)),
            "BCa expanded": bca(math.sqrt(n / (n - 1)) * sps.t.ppf(1 - alpha / 2, n - 1)),
            "bootstrap-t": (m - t_high * se, m - t_low * se)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--large", action="store_true", help="20 to 200 items")
    args = parser.parse_args()
    alpha = 1 - args.confidence
    print("items,n,method,coverage,miss_low,miss_high,median_width,width_over_t")
    for k, (name, (draw, mu, bounds)) in enumerate(_items().items()):
        if args.large and name not in LARGE:
            continue
        for n in (20, 30, 50, 100, 200) if args.large else (3, 5, 8, 12, 19):
            rng = np.random.default_rng([k, n])
            x = draw(rng, (args.samples, n))
            ours = [mean_ci(row, args.confidence, bounds=bounds) for row in x]
            found = {"t": t_ci(x, alpha), **large_cis(x, alpha, rng),
                     "biasscope (t or Hall's, the wider)": (np.array([c.low for c in ours]),
                                                             np.array([c.high for c in ours]))
                     } if args.large else {
                "t": t_ci(x, alpha),
                "Johnson": johnson_ci(x, alpha, quadratic=False),
                "Johnson, quadratic": johnson_ci(x, alpha, quadratic=True),
                "Hall, t quantiles": hall_ci(x, alpha, "t"),
                "Hall, normal quantiles": hall_ci(x, alpha, "normal"),
                "bootstrap-t": bootstrap_t_ci(x, alpha, rng),
                "BCa": bca_ci(x, alpha, rng),
                "biasscope (t or Hall's, the wider)": (np.array([c.low for c in ours]),
                                                        np.array([c.high for c in ours])),
            }
            t_width = None
            for method, (low, high) in found.items():
                if bounds is not None:
                    low, high = np.maximum(low, bounds[0]), np.minimum(high, bounds[1])
                low, high = np.nan_to_num(low, nan=-np.inf), np.nan_to_num(high, nan=np.inf)
                width = high - low
                t_width = width if t_width is None else t_width  # t's, clipped as the others
                print(f'"{name}",{n},"{method}",{np.mean((low <= mu) & (mu <= high)):.4f},'
                      f"{np.mean(low > mu):.4f},{np.mean(high < mu):.4f},"
                      f"{np.median(width):.4g},{np.mean(width / t_width):.3f}", flush=True)


if __name__ == "__main__":
    main()
