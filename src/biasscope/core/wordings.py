"""The prompt wording as a source of uncertainty: a measure over several templates, each
wording's estimate, the estimate pooled over wordings with a two-level bootstrap CI
(wordings resampled, and items), the share of variance due to the wording, and how many
wordings agree in sign.

Why a two-level bootstrap: a wording is a draw from the wordings one could have written, just
as an item is a draw from the items one could have asked, so a CI that resamples items alone
answers "would other items change it?" and not "would another wording change it?".

Items are crossed with wordings: every wording asks the same items, so what is particular to
an item (a hard sentence, an odd occupation) moves all wordings' estimates alike. A replicate
therefore draws the items once and applies that one draw to every wording, and draws the
wordings as their own level (each row weighted by its wording's multiplicity times its item's);
resampling items independently within each wording would average the shared item effects away
and give intervals far too narrow (a pooled 95% CI covering 68% of the time with 8 wordings).
Only when no item is shared (each wording has items of its own, nested) are items drawn within
each wording. This is the "pigeonhole" bootstrap of a crossed design (Owen 2007), slightly
conservative.

A measure is a function of weighted sums of per-row columns (``Measure``): a rate is
``sum(x) / sum(n)``, a gap the difference of two such, BBQ's bias scores ratios of counts.
A bootstrap replicate is then only a set of weights, so thousands of replicates cost a few
matrix products. Rows are resampled by cluster (a WinoBias pair, an Adult pair, a BBQ example;
its seeds with it), never one by one, since the rows of a cluster are not independent.

Each wording's test against the null is not read off its bootstrap: a percentile bootstrap
over a handful of clusters is anti-conservative (with 5 sentences it gave p = 0 where the exact
p cannot fall below 0.0625, and Holm over 4 wordings claimed some wording significant in 17%
of null data sets), and its p-value of 0 claims a certainty no resampling has. It is a
sign-flip test over the clusters instead (`sign_flip_p`): each cluster's jackknife
pseudo-value, less the null, is as likely positive as negative when there is no bias, so
their sum is compared with its value under every pattern of signs (all 2^K when K ≤ 12
clusters, exact; else ``n_resamples`` random ones, p = (hits + 1) / (draws + 1)). For a
measure linear in its clusters' sums (a gap whose clusters all hold as many rows of each side,
a rate over clusters of one size) a pseudo-value is the cluster's own value and the test exact;
otherwise it is close (tests/calibration_designs.py simulates both). The per-wording interval
stays the bootstrap's, so with few clusters it may exclude the null while the test, which
decides ``significant``, does not. The pooled estimate's test is a t-test on its two-level
bootstrap standard error (`_pooled_p`), not a count of replicates, whose floor of
2 / (replicates + 1) no correction over many checkpoints could pass.

Variance share: ``s²`` is the variance of the per-wording estimates and ``noise`` what the
item draw alone gives it (T/(T−1) times the mean item-bootstrap variance of each wording's
estimate minus their mean, with one item draw for all wordings: the part of item noise that is
not shared); the between-wording variance is ``tau² = max(0, s² − noise)`` (method of moments,
as in a random-effects meta-analysis) and the share is ``tau² / (tau² + mean(v_t))`` with
``v_t`` each wording's item-bootstrap variance: 0 when the wordings differ no more than item
noise explains, 1 when the wording is all that matters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from biasscope.core.bootstrap import resample_counts
from biasscope.core.normal import ndtr
from biasscope.core.numbers import resampled_same, with_ci
from biasscope.core.stats import CORRECTIONS, Correction, adjust_pvalues

Array = npt.NDArray[np.float64]
Combine = Callable[[Mapping[str, Array]], Array]


@dataclass(frozen=True)
class Measure:
    """``combine`` maps the weighted sums of ``columns`` (name -> per-row array) to the
    measure; ``null`` is the value of no bias (0 for a gap, 0.5 for a stereotype rate)."""

    name: str
    columns: Mapping[str, Array]
    combine: Combine
    null: float = 0.0


def rate(x: npt.ArrayLike, among: npt.ArrayLike) -> tuple[dict[str, Array], Combine]:
    """Columns and combine of mean(x) over the rows where ``among`` holds."""
    n = np.asarray(among, dtype=np.float64)
    cols = {"x": np.nan_to_num(np.asarray(x, dtype=np.float64)) * n, "n": n}
    return cols, lambda s: _ratio(s["x"], s["n"])


def gap(x: npt.ArrayLike, first: npt.ArrayLike, second: npt.ArrayLike
        ) -> tuple[dict[str, Array], Combine]:
    """Columns and combine of mean(x | first) - mean(x | second)."""
    v = np.nan_to_num(np.asarray(x, dtype=np.float64))
    a, b = (np.asarray(m, dtype=np.float64) for m in (first, second))
    cols = {"xa": v * a, "na": a, "xb": v * b, "nb": b}
    return cols, lambda s: _ratio(s["xa"], s["na"]) - _ratio(s["xb"], s["nb"])


def _ratio(num: Array, den: Array) -> Array:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(den > 0, num / np.where(den > 0, den, 1), np.nan))


def _sums(weights: npt.NDArray[Any], sums: Mapping[str, npt.NDArray[Any]]
          ) -> dict[str, Array]:
    """Weighted sums per replicate: ``weights`` (replicates, clusters) by each column's
    per-cluster sums."""
    return {k: np.asarray(weights @ v, dtype=np.float64) for k, v in sums.items()}


def _interval(samples: Array, confidence: float) -> tuple[float, float]:
    ok = samples[np.isfinite(samples)]
    if ok.size < max(2, samples.size / 2):
        return math.nan, math.nan
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(ok, [tail, 100 - tail])
    return float(low), float(high)


def _pooled_p(estimate: float, two_level: Array, items_only: Array, null: float,
              wordings: int) -> float:
    """Two-sided p-value of ``null`` for the pooled estimate: its distance from the null in
    standard errors, on Student's t with Satterthwaite's degrees of freedom. The standard
    error is the two-level bootstrap's, with its wording part (the two-level variance beyond
    the items-only one) scaled by T / (T − 1): resampling T wordings with replacement shrinks
    their variance by (T − 1) / T. That part rests on T − 1 degrees of freedom, the items'
    on many, so a few wordings that differ much get a wide t and many items a normal curve
    (with 4 wordings whose spread dominates, the normal curve gave false claims at 1.5 α).
    A count of replicates beyond the null would say 0 where none crosses it, or, counted as
    (hits + 1) / (replicates + 1), never pass a correction over many checkpoints.
    NaN without a spread."""
    both, items = two_level[np.isfinite(two_level)], items_only[np.isfinite(items_only)]
    if (min(both.size, items.size) < max(2, two_level.size / 2) or not math.isfinite(estimate)
            or wordings < 2):
        return math.nan
    item_var = float(items.var(ddof=1))
    wording_var = max(0.0, float(both.var(ddof=1)) - item_var) * wordings / (wordings - 1)
    se = math.sqrt(item_var + wording_var)
    if not se > 0:
        return 1.0 if estimate == null else math.nan
    z = -abs(estimate - null) / se
    if wording_var == 0:
        return float(2 * ndtr(z))
    from scipy.special import stdtr  # only where wordings ran: a report imports no SciPy

    df = (item_var + wording_var) ** 2 * (wordings - 1) / wording_var ** 2
    return float(2 * stdtr(df, z))


#: Up to this many clusters every sign pattern is enumerated (2^12 = 4096); above, drawn.
EXACT_UP_TO = 12


def _pseudo_values(part: Mapping[str, npt.NDArray[Any]], combine: Combine) -> Array:
    """Each cluster's jackknife pseudo-value K·θ − (K − 1)·θ₋ₖ: its share of the estimate, so
    that their mean is (about) θ; the cluster's own value when θ is linear in the sums.
    Clusters without any rows for the measure (all sums 0) are left out."""
    held = np.any(np.stack([np.asarray(v) != 0 for v in part.values()]), axis=0)
    kept = {c: np.asarray(v, dtype=np.float64)[held] for c, v in part.items()}
    k = int(held.sum())
    whole = combine({c: np.array([v.sum()]) for c, v in kept.items()})
    left = combine({c: v.sum() - v for c, v in kept.items()})
    return np.asarray(k * whole[0] - (k - 1) * left, dtype=np.float64)


def sign_flip_p(values: Array, null: float, draws: int, rng: np.random.Generator) -> float:
    """Two-sided sign-flip p-value of ``null`` for cluster-level ``values``: the share of
    sign patterns of ``values - null`` whose sum is at least as far from 0 as the observed.
    Every pattern up to `EXACT_UP_TO` clusters (exact: with 5 clusters p ≥ 2/32); else
    ``draws`` random ones and (hits + 1) / (draws + 1). NaN when a value is undefined (the
    measure rests on one cluster) or fewer than two clusters hold data."""
    if values.size < 2 or not np.isfinite(values).all():
        return math.nan
    d = values - null
    d = d[np.abs(d) > 1e-12 * max(1.0, float(np.abs(d).max()))]  # a 0 flips to itself
    if d.size == 0:
        return 1.0
    observed = abs(float(d.sum())) * (1 - 1e-9)  # ties count as at least as far
    if d.size <= EXACT_UP_TO:
        signs = 1.0 - 2.0 * ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1)
        return float(np.mean(np.abs(signs @ d) >= observed))
    hits, step = 0, max(1, (1 << 20) // d.size)  # about a million signs at a time
    for start in range(0, draws, step):
        flipped = rng.integers(0, 2, (min(step, draws - start), d.size), dtype=np.int8)
        hits += int((np.abs((1.0 - 2.0 * flipped) @ d) >= observed).sum())
    return float((hits + 1) / (draws + 1))


Labels = Sequence[Any] | npt.NDArray[Any]


def wording_uncertainty(measure: Measure, wordings: Labels, clusters: Labels,
                        *, n_resamples: int = 1000, confidence: float = 0.95,
                        alpha: float = 0.05, correction: Correction = "holm", seed: int = 0
                        ) -> dict[str, Any]:
    """Per-wording estimates (item-bootstrap CI; sign-flip p-value over its clusters against
    ``measure.null``, corrected over wordings), the pooled estimate with its two-level CI
    (and the items-only CI for comparison), the variance share due to wording, sign
    agreement and a verdict sentence. ``wordings`` and ``clusters`` give each row's wording
    and the cluster (item) it is resampled with; a cluster that appears under several
    wordings is the same item asked in each (crossed: drawn once per replicate for all of
    them)."""
    names = list(dict.fromkeys(str(w) for w in wordings))
    keys = np.array([f"{w}\0{c}" for w, c in zip(wordings, clusters, strict=True)])
    uniq, index = np.unique(keys, return_inverse=True)
    owner = np.array([names.index(k.split("\0", 1)[0]) for k in uniq])
    sums = {k: np.bincount(index, weights=np.asarray(v, dtype=np.float64),
                           minlength=uniq.size) for k, v in measure.columns.items()}
    rng = np.random.default_rng(seed)
    flips = np.random.default_rng([seed, 1])  # its own stream: the bootstrap's stays as it was
    counts = _item_draws(uniq, owner, n_resamples, rng)
    picks = resample_counts(len(names), n_resamples, rng, np.int64)
    whole = measure.combine({k: np.array([v.sum()]) for k, v in sums.items()})
    per: list[dict[str, Any]] = []
    boots: list[Array] = []
    for t, name in enumerate(names):
        mine = np.flatnonzero(owner == t)
        part = {k: v[mine] for k, v in sums.items()}
        estimate = float(measure.combine({k: np.array([v.sum()]) for k, v in part.items()})[0])
        boot = measure.combine(_sums(counts[:, mine], part))
        boots.append(boot)
        low, high = _interval(boot, confidence)
        ok = boot[np.isfinite(boot)]  # none where the measure is undefined (a constant side)
        per.append({"wording": name, "estimate": estimate, "low": low, "high": high,
                    "variance": float(ok.var(ddof=1)) if ok.size > 1 else math.nan,
                    "p_value": sign_flip_p(_pseudo_values(part, measure.combine),
                                            measure.null, n_resamples, flips),
                    "clusters": int(mine.size)})
    adjusted = adjust_pvalues([p["p_value"] for p in per], correction)
    for row, p in zip(per, adjusted):
        row.update(p_adjusted=float(p), significant=bool(p < alpha))
    pooled = float(whole[0])
    items_only = measure.combine(_sums(counts, sums))
    counts *= picks[:, owner]  # in place: one (replicates, clusters) array at a time
    two_level = measure.combine(_sums(counts, sums))
    return {"measure": measure.name, "null": measure.null, "confidence": confidence,
            "correction": CORRECTIONS[correction], "alpha": alpha, "per_wording": per,
            "pooled": {**_pooled(pooled, two_level, items_only, confidence),
                       "p_value": _pooled_p(pooled, two_level, items_only, measure.null,
                                            len(names))},
            "crossed": _shared(uniq),
            **_agreement(per, pooled, measure.null), **_share(per, np.array(boots))}


def _shared(keys: npt.NDArray[Any]) -> bool:
    """Whether some item (cluster) is asked under more than one wording."""
    items = [k.split("\0", 1)[1] for k in keys]
    return len(set(items)) < len(items)


def _item_draws(keys: npt.NDArray[Any], owner: npt.NDArray[Any], n_resamples: int,
                rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """Bootstrap multiplicities of each (wording, item) key, one row per replicate. Crossed
    (some item under several wordings): the items are drawn once and every wording gets that
    draw. Nested: each wording's items are drawn within it."""
    counts = np.zeros((n_resamples, keys.size), dtype=np.float32)  # counts: exact in float32
    if _shared(keys):
        items, item = np.unique([k.split("\0", 1)[1] for k in keys], return_inverse=True)
        counts[:] = resample_counts(items.size, n_resamples, rng, np.float32)[:, item]
        return counts
    for t in np.unique(owner):
        mine = np.flatnonzero(owner == t)
        counts[:, mine] = resample_counts(mine.size, n_resamples, rng, np.float32)
    return counts


def _pooled(estimate: float, two_level: Array, items_only: Array, confidence: float
            ) -> dict[str, float]:
    low, high = _interval(two_level, confidence)
    items_low, items_high = _interval(items_only, confidence)
    return {"estimate": estimate, "low": low, "high": high, "items_only_low": items_low,
            "items_only_high": items_high}


def _agreement(per: Sequence[Mapping[str, Any]], pooled: float, null: float
               ) -> dict[str, int]:
    """How many wordings lean the way the pooled estimate does, reverse it, and are
    significant (after correction) in its direction and against it."""
    side = np.sign(pooled - null) if math.isfinite(pooled) else 0.0
    signs = [np.sign(p["estimate"] - null) for p in per if math.isfinite(p["estimate"])]
    agree = sum(1 for s in signs if s == side and side != 0)
    reverse = sum(1 for s in signs if s == -side and side != 0)

    def shown(way: float) -> int:
        return sum(1 for p in per if p["significant"] and side != 0
                   and np.sign(p["estimate"] - null) == way)
    return {"wordings": len(per), "agree": agree, "reverse": reverse,
            "significant": shown(side), "reverse_significant": shown(-side)}


def _share(per: Sequence[Mapping[str, Any]], boots: Array) -> dict[str, float]:
    """Between-wording variance (tau², method of moments) and its share of the total;
    ``boots``: each wording's item-bootstrap replicates, one item draw for all wordings."""
    estimates = np.array([p["estimate"] for p in per], dtype=np.float64)
    within = np.array([p["variance"] for p in per], dtype=np.float64)
    ok = np.isfinite(estimates) & np.isfinite(within)
    if ok.sum() < 2:
        return {"tau2": math.nan, "variance_share": math.nan}
    draws = boots[ok]
    draws = draws[:, np.isfinite(draws).all(axis=0)]
    if draws.shape[1] < 2:
        return {"tau2": math.nan, "variance_share": math.nan}
    spread = draws - draws.mean(axis=0)  # each wording against their mean, per draw
    k = int(ok.sum())
    noise = k / (k - 1) * float(spread.var(axis=1, ddof=1).mean())
    tau2 = max(0.0, float(estimates[ok].var(ddof=1)) - noise)
    total = tau2 + float(within[ok].mean())
    return {"tau2": tau2, "variance_share": tau2 / total if total > 0 else 0.0}


def verdict(result: Mapping[str, Any], label: str | None = None) -> str:
    """One sentence: whether ``label`` (default the measure's name) holds across wordings."""
    what = label or str(result["measure"])
    pooled, null = result["pooled"], result["null"]
    n, agree, reverse = result["wordings"], result["agree"], result["reverse"]
    span = "pooled " + with_ci(pooled["estimate"], pooled["low"], pooled["high"],
                               result["confidence"], extra="over wordings and items",
                               same=resampled_same(result["confidence"]))  # a bootstrap's
    share = result["variance_share"]
    shared = "" if not math.isfinite(share) else f"; {share:.0%} of its variance is the wording's"
    significant = (f"{result['significant']} significant after "
                   f"{result['correction']}")
    if not (pooled["low"] > null or pooled["high"] < null):
        return (f"{what} is not established across wordings ({span} includes {null:g}): "
                f"{agree} of {n} wordings lean its way, {reverse} the other, "
                f"{significant}{shared}.")
    reversed_ = result.get("reverse_significant", 0)
    if reversed_:
        return (f"{what} depends on wording: {reversed_} of {n} wordings reverse it "
                f"significantly after {result['correction']} ({span}; {significant})"
                f"{shared}.")
    if reverse:
        return (f"{what} holds overall, in {agree} of {n} wordings ({span}; {significant}); "
                f"{reverse} lean the other way, none significantly{shared}.")
    return f"{what} holds across {agree} of {n} wordings ({span}; {significant}){shared}."


__all__ = ["Measure", "gap", "rate", "sign_flip_p", "verdict", "wording_uncertainty"]
