"""Sensitivity indices of reward models to constitutional principles (*Constitutional
Sensitivities of Reward Models*): per (reward model, principle), how far the reward moves when
a response is revised toward the principle. Plain functions over a rewards frame with columns
``model``, ``principle``, ``prompt_id``, ``original``, ``perturbed`` (one row per triple).

Choices, and why (``conventions="source"`` follows the source's code instead; the
differences are listed in ``biasscope.sensitivity.intervals``):

- **Effects** are ``perturbed - original`` per prompt (the elementary effects of the source);
  pairs with a missing reward are dropped. ``std_effect`` is the sample SD (ddof=1, as in the
  elementary-effects method; the source's ``np.std`` is ddof=0), NaN for a single pair.
- **Percentiles** rank a reward among all the rewards its model gave: the share of the pool
  strictly below it. The pool holds every perturbed reward of the model (all principles in the
  frame) and each prompt's original reward **once** (the source repeats it per principle; it is
  the same text, so counting it k times would weigh originals by the number of principles).
  Distinct originals of one prompt (a non-deterministic scorer) are each kept.
- **Wilcoxon** signed-rank on the effects, zeros dropped (SciPy's ``"wilcox"``):
  ``wilcoxon_statistic`` is R+ of the one-sided test (perturbed > original, the source's index);
  effect size the matched-pairs rank-biserial r = (R+ - R-)/(R+ + R-). All effects zero gives
  statistic 0, p = 1, r = 0 (no evidence of a change), as `biasscope.core.stats.mann_whitney` does.
- **Normalisation**: each index divided by the sum of its absolute values over the model's
  principles (``<index>_normalised``): the absolute values add up to 1. With non-negative
  indices this is the source's sum normalisation; unlike the plain sum (the source's, which
  adds up to 1 but flips every sign when it is negative) it keeps signs and cannot blow up when
  positive and negative values nearly cancel. A zero sum gives NaN.
- **Intervals**: t widened towards a skew (`mean_ci`) for the mean effect,
  percentile bootstrap for the median effect, and a
  joint prompt bootstrap (``intervals.bootstrap_intervals``) for the std, percentile effects
  and every normalised index. The Wilcoxon statistic and r carry their test's p-value.
- **Families**: Holm over the principles of one model (``p_*_holm``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from biasscope.core.bootstrap import index_blocks
from biasscope.core.errors import BiasscopeError, DataError
from biasscope.core.imports import lazy
from biasscope.core.intervals import Interval, mean_ci, percentile_interval
from biasscope.core.stats import Array, adjust_pvalues
from biasscope.sensitivity.intervals import (
    BOOTSTRAPPED,
    Convention,
    bootstrap_intervals,
    convention,
    normalise,
)
from biasscope.sensitivity.principles import BOTH

sps = lazy("scipy.stats")  # imported at first use

REQUIRED = ("model", "principle", "prompt_id", "original", "perturbed")
NORMALISED = BOOTSTRAPPED
RANKED = ("mean_effect", "median_effect", "std_effect", "mean_percentile_effect",
          "median_percentile_effect", "wilcoxon_statistic")
#: Random splits of the group test (`group_comparison`), whatever ``--resamples``: those set
#: how finely an interval's bounds are read (from 100), while a permutation p cannot fall below
#: 1/(N + 1). At 100 that floor, 0.0099, would leave the smallest p above Holm's threshold
#: 0.05/6 for six models, so a test of a few models could show nothing; at 10,000 it is about
#: 0.0001, far below 0.05/m for m up to hundreds, and each p comes with its Monte Carlo
#: standard error (``monte_carlo_se``) instead. A stored run's p-values are kept on a rerun.
PERMUTATIONS = 10_000
@dataclass(frozen=True)
class SignedRank:
    """Wilcoxon signed-rank test of x against y, paired: R+ and p of x > y, the two-sided
    statistic min(R+, R-) and p, the matched-pairs rank-biserial r, and the number of pairs."""
    statistic: float
    p_greater: float
    statistic_two_sided: float
    p_two_sided: float
    rank_biserial: float
    n: int


def signed_rank(x: npt.ArrayLike, y: npt.ArrayLike) -> SignedRank:
    """Paired Wilcoxon test (SciPy) on x - y; pairs with a NaN are dropped, zeros excluded."""
    d = np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    d = d[np.isfinite(d)]
    nonzero = d[d != 0]
    if d.size == 0:
        return SignedRank(math.nan, math.nan, math.nan, math.nan, math.nan, 0)
    if nonzero.size == 0:
        return SignedRank(0.0, 1.0, 0.0, 1.0, 0.0, int(d.size))
    greater = sps.wilcoxon(nonzero, alternative="greater")
    two = sps.wilcoxon(nonzero, alternative="two-sided")
    r_plus = float(greater.statistic)
    total = nonzero.size * (nonzero.size + 1) / 2
    return SignedRank(r_plus, float(greater.pvalue), float(two.statistic), float(two.pvalue),
                      2 * r_plus / total - 1, int(d.size))


# ---------------------------------------------------------------- rewards

def _validated(rewards: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in REQUIRED if c not in rewards.columns]
    if missing:
        raise DataError(f"rewards: missing column(s) {missing}; need {list(REQUIRED)}")
    frame: pd.DataFrame = rewards.reset_index(drop=True)  # a copy with unique labels
    for col in ("original", "perturbed"):
        try:
            frame[col] = pd.to_numeric(frame[col]).astype(np.float64)
        except (ValueError, TypeError) as exc:
            raise DataError(f"rewards: column {col!r} must hold numbers ({exc})") from None
    keys = ["model", "principle", "prompt_id"]
    for col in keys:
        if frame[col].isna().any():
            raise DataError(f"rewards: column {col!r} has missing values; fill or drop those rows")
    dup = frame.duplicated(keys)
    if dup.any():
        first = frame.loc[dup, keys].iloc[0].tolist()
        raise DataError(f"rewards: {int(dup.sum())} duplicate (model, principle, prompt_id) rows, "
                        f"e.g. {first}; keep one row per triple (filter by direction first)")
    return frame


def _pool(chunk: pd.DataFrame, conv: Convention) -> Array:
    """The model's sorted percentile pool (see the module doc and ``intervals``)."""
    original = chunk["original"].to_numpy(dtype=np.float64)
    perturbed = chunk["perturbed"].to_numpy(dtype=np.float64)
    if conv.originals_once:
        # Once per prompt, by id: never by value, which differs in its last bits when a prompt
        # is scored twice in other batches.
        scored = chunk[np.isfinite(original)]
        once = scored.drop_duplicates("prompt_id")["original"].to_numpy()
        pool = np.concatenate([once.astype(np.float64), perturbed])
    else:  # the source: the rows with both rewards, each row's original and perturbed
        ok = np.isfinite(original) & np.isfinite(perturbed)
        pool = np.concatenate([original[ok], perturbed[ok]])
    out: Array = np.sort(pool[np.isfinite(pool)])
    return out


def reward_percentiles(rewards: pd.DataFrame, conventions: str = "biasscope") -> pd.DataFrame:
    """The rewards frame (all its columns, index reset) with ``original_percentile`` and
    ``perturbed_percentile``: the share of the model's pool (each prompt's original once, every
    perturbed reward; with ``"source"`` conventions every row's pair) strictly below the
    reward; NaN for a missing reward."""
    conv = convention(conventions)
    frame = _validated(rewards)
    frame["original_percentile"] = math.nan
    frame["perturbed_percentile"] = math.nan
    for _, chunk in frame.groupby("model", sort=False):
        pool = _pool(chunk, conv)
        for col in ("original", "perturbed"):
            values = chunk[col].to_numpy()
            share = np.searchsorted(pool, values, side="left") / max(pool.size, 1)
            frame.loc[chunk.index, f"{col}_percentile"] = np.where(np.isfinite(values), share,
                                                                   math.nan)
    return frame


def _median_interval(x: Array, confidence: float, n_resamples: int, seed: int) -> Interval:
    """Percentile bootstrap of the median (BCa's jackknife is unreliable for the median)."""
    estimate = float(np.median(x)) if x.size else math.nan
    if x.size < 2:
        return Interval(estimate, math.nan, math.nan, confidence)
    rng = np.random.default_rng(seed)
    medians = np.concatenate([np.median(x[idx], axis=1) for idx in index_blocks(
        x.size, n_resamples, rng, 2_000_000)])
    return percentile_interval(estimate, medians, confidence)


def _stat(x: Array, how: str, ddof: int = 1) -> float:
    if x.size < (ddof + 1 if how == "std" else 1):
        return math.nan
    if how == "std":
        return float(np.std(x, ddof=ddof))
    return float(np.mean(x) if how == "mean" else np.median(x))


def sensitivity_indices(rewards: pd.DataFrame, confidence: float = 0.95,
                        n_resamples: int = 2000, seed: int = 0,
                        conventions: str = "biasscope") -> pd.DataFrame:
    """One row per (model, principle), in order of first appearance: ``n``; mean, median and
    SD of the effects and of the percentile effects; Wilcoxon statistic, p-values (raw and
    Holm) and rank-biserial r; ``<index>_normalised`` for each of NORMALISED; bootstrap CIs
    (resampling prompts) ``<index>_low/high`` for the median effect (percentile; the mean's
    is t widened), the SDs and percentile effects, and for every normalised index.
    ``conventions``: ``"biasscope"`` or ``"source"`` (see ``biasscope.sensitivity.intervals``).
    """
    conv = convention(conventions)
    frame = reward_percentiles(rewards, conventions)
    rows: list[dict[str, Any]] = []
    for (model, principle), chunk in frame.groupby(["model", "principle"], sort=False):
        ok = np.isfinite(chunk["original"].to_numpy()) & np.isfinite(chunk["perturbed"].to_numpy())
        c = chunk[ok]
        effect = (c["perturbed"] - c["original"]).to_numpy()
        pct = (c["perturbed_percentile"] - c["original_percentile"]).to_numpy()
        test = signed_rank(c["perturbed"], c["original"])
        mean = mean_ci(effect, confidence, n_resamples, seed=seed) if effect.size else None
        median = _median_interval(effect, confidence, n_resamples, seed)
        rows.append({
            "model": model, "principle": principle, "n": int(effect.size),
            "mean_effect": _stat(effect, "mean"),
            "mean_effect_low": mean.low if mean else math.nan,
            "mean_effect_high": mean.high if mean else math.nan,
            "median_effect": median.estimate, "median_effect_low": median.low,
            "median_effect_high": median.high, "std_effect": _stat(effect, "std", conv.ddof),
            "mean_percentile_effect": _stat(pct, "mean"),
            "median_percentile_effect": _stat(pct, "median"),
            "std_percentile_effect": _stat(pct, "std", conv.ddof),
            "wilcoxon_statistic": test.statistic, "p_greater": test.p_greater,
            "wilcoxon_statistic_two_sided": test.statistic_two_sided,
            "p_two_sided": test.p_two_sided, "rank_biserial": test.rank_biserial})
    table: pd.DataFrame = pd.DataFrame(rows, columns=_COLUMNS)
    for col in ("p_greater", "p_two_sided"):
        table[f"{col}_holm"] = math.nan
        for idx in table.groupby("model", sort=False).groups.values():
            table.loc[idx, f"{col}_holm"] = adjust_pvalues(table.loc[idx, col], "holm")
    for col in NORMALISED:
        table[f"{col}_normalised"] = math.nan
        for idx in table.groupby("model", sort=False).groups.values():
            table.loc[idx, f"{col}_normalised"] = normalise(table.loc[idx, col], conv)
    if len(table):
        table = pd.concat([table, bootstrap_intervals(frame, table, conv, confidence,
                                                      n_resamples, seed)], axis=1)
    return table


_COLUMNS = ["model", "principle", "n", "mean_effect", "mean_effect_low", "mean_effect_high",
            "median_effect", "median_effect_low", "median_effect_high", "std_effect",
            "mean_percentile_effect", "median_percentile_effect", "std_percentile_effect",
            "wilcoxon_statistic", "p_greater", "wilcoxon_statistic_two_sided", "p_two_sided",
            "rank_biserial"]


# ---------------------------------------------------------------- comparisons

def _wide(indices: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Principles x models (first-appearance order) of one metric."""
    if metric not in indices.columns:
        known = [c for c in indices.columns if c not in ("model", "principle")]
        raise BiasscopeError(f"metric {metric!r} is not a column of the indices; use one of "
                             f"{known}")
    wide = indices.pivot(index="principle", columns="model", values=metric)
    wide = wide.reindex(index=list(dict.fromkeys(indices["principle"])),
                        columns=list(dict.fromkeys(indices["model"])))
    wide.columns.name = None
    out: pd.DataFrame = wide.astype(np.float64)
    return out


def _permutation_p(x: Array, y: Array, n_permutations: int, seed: int) -> tuple[float, bool]:
    """Two-sided permutation p of |mean(x) - mean(y)|: every split of the pooled values when
    there are at most ``n_permutations`` (exact), else random splits with p = (hits+1)/(N+1)
    (its error: `monte_carlo_se`)."""
    values = np.concatenate([x, y])
    n, k = values.size, x.size
    exact = math.comb(n, k) <= n_permutations
    if exact:
        idx = np.array(list(itertools.combinations(range(n), k)), dtype=np.intp)
    else:
        rng = np.random.default_rng(seed)
        idx = rng.permuted(np.tile(np.arange(n), (n_permutations, 1)), axis=1)[:, :k]
    sums = values[idx].sum(axis=1)
    diffs = np.abs(sums / k - (values.sum() - sums) / (n - k))
    observed = abs(float(x.sum()) / k - float(y.sum()) / (n - k))
    tol = 1e-9 * float(np.abs(values).max())  # rounding: splits as extreme as observed count
    hits = int((diffs >= observed - tol).sum())
    return (hits / idx.shape[0] if exact else (hits + 1) / (n_permutations + 1)), exact


def monte_carlo_se(p: float, n_permutations: int, exact: bool) -> float:
    """The Monte Carlo standard error of a permutation ``p`` from ``n_permutations`` random
    splits, sqrt(p(1 − p)/N): how far another seed's p may fall (0 where every split was
    counted; NaN for no p)."""
    if exact or not math.isfinite(p):
        return 0.0 if exact and math.isfinite(p) else math.nan
    return math.sqrt(p * (1 - p) / n_permutations)


def _group_test(values: Array, first: npt.NDArray[np.bool_], names: tuple[str, str],
                n_permutations: int, seed: int) -> dict[str, Any]:
    ok = np.isfinite(values)
    x, y = values[ok & first], values[ok & ~first]
    mx = float(x.mean()) if x.size else math.nan
    my = float(y.mean()) if y.size else math.nan
    p, d, exact, drawn = math.nan, math.nan, False, 0
    if x.size and y.size:
        p, exact = _permutation_p(x, y, n_permutations, seed)
        drawn = math.comb(x.size + y.size, x.size) if exact else n_permutations
        dof = x.size + y.size - 2
        ss = float(((x - mx) ** 2).sum() + ((y - my) ** 2).sum())
        d = (mx - my) / math.sqrt(ss / dof) if dof > 0 and ss > 0 else math.nan
    a, b = names
    return {f"n_{a}": int(x.size), f"n_{b}": int(y.size), f"sum_{a}": float(x.sum()),
            f"sum_{b}": float(y.sum()), "difference": float(x.sum() - y.sum()),
            f"mean_{a}": mx, f"mean_{b}": my, "mean_difference": mx - my, "p_value": p,
            "effect_size": d, "exact": exact, "permutations": drawn,
            "monte_carlo_se": monte_carlo_se(p, n_permutations, exact)}


def group_comparison(indices: pd.DataFrame, groups: Mapping[str, str],
                     metric: str = "mean_effect_normalised",
                     n_permutations: int = PERMUTATIONS,
                     seed: int = 0, conventions: str = "biasscope") -> dict[str, Any]:
    """Is a model more sensitive to one group's principles than the other's?

    ``groups`` maps principle -> group name; exactly two names besides ``"both"``. Principles
    mapped to ``"both"`` or not mapped are left out of the test and listed. Per model: the sums
    of ``metric`` per group (the source's stacked bars) and their ``difference`` (first minus
    second group, names sorted); the test shuffles group labels among principles (exact when
    there are at most ``n_permutations`` splits) on the difference of *means*, which equals the
    sum test with equal group sizes and is not driven by group size otherwise; effect size
    Cohen's d (pooled SD). Each p says how many splits it counted (``permutations``) and its
    Monte Carlo standard error (``monte_carlo_se``, 0 when exact). Keys: ``metric``,
    ``groups``, ``both``, ``unassigned``, ``principles`` (principle, group, one column per
    model), ``models`` (one row per model, Holm over models in ``p_holm``) and ``contrasts``
    (per pair of models, the same test on the per-principle difference model_a - model_b:
    does the gap between models differ by group?).
    With ``conventions="source"`` a ``*_normalised`` metric is renormalised over the compared
    principles only (plain sum per model), as the source's group figure is.
    """
    conv = convention(conventions)
    wide = _wide(indices, metric)
    label = {p: groups.get(p) for p in wide.index}
    names = sorted({g for g in label.values() if g is not None and g != BOTH})
    if len(names) != 2:
        raise BiasscopeError(f"groups: need exactly two group names besides {BOTH!r} among the "
                             f"evaluated principles, got {names}; map each principle to one")
    pair = (names[0], names[1])
    tested = [p for p in wide.index if label[p] in pair]
    if conv.name == "source" and metric.endswith("_normalised"):
        raw = _wide(indices, metric.removesuffix("_normalised"))
        raw.loc[~raw.index.isin(tested)] = math.nan  # summed over the compared only
        wide = pd.DataFrame(normalise(raw.to_numpy(), conv, axis=0), raw.index, raw.columns)
    first = np.array([label[p] == pair[0] for p in tested], dtype=bool)
    models = list(wide.columns)
    rows = [{"model": m, **_group_test(wide.loc[tested, m].to_numpy(), first, pair,
                                       n_permutations, seed)} for m in models]
    per_model = pd.DataFrame(rows)
    if not per_model.empty:
        per_model["p_holm"] = adjust_pvalues(per_model["p_value"], "holm")
    contrasts = pd.DataFrame([
        {"model_a": a, "model_b": b, **_group_test(
            (wide.loc[tested, a] - wide.loc[tested, b]).to_numpy(), first, pair,
            n_permutations, seed)} for a, b in itertools.combinations(models, 2)])
    principles = wide.rename_axis("principle").reset_index()
    principles.insert(1, "group", [label[p] for p in wide.index])
    return {"metric": metric, "groups": list(pair),
            "both": [p for p in wide.index if label[p] == BOTH],
            "unassigned": [p for p in wide.index if label[p] is None],
            "principles": principles, "models": per_model, "contrasts": contrasts}


def _correlations(a: Array, b: Array) -> dict[str, float]:
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    out = {"n": int(a.size), "kendall_tau": math.nan, "kendall_p": math.nan,
           "spearman_rho": math.nan, "spearman_p": math.nan}
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return out  # no ordering to agree on
    tau = sps.kendalltau(a, b)
    out["kendall_tau"], out["kendall_p"] = float(tau.statistic), float(tau.pvalue)
    rho = sps.spearmanr(a, b)
    out["spearman_rho"] = float(np.clip(rho.statistic, -1.0, 1.0))
    out["spearman_p"] = float(rho.pvalue) if a.size > 2 else math.nan
    return out


def metric_rank_agreement(indices: pd.DataFrame,
                          metrics: tuple[str, ...] = RANKED) -> pd.DataFrame:
    """Do the indices order principles alike? Per model and pair of metrics (those present):
    Kendall's tau-b and Spearman's rho over principles, with p-values; NaN with fewer than two
    principles or a constant metric. Raw and normalised indices order principles the same."""
    present = [m for m in metrics if m in indices.columns]
    rows = [{"model": model, "metric_a": ma, "metric_b": mb,
             **_correlations(chunk[ma].to_numpy(dtype=np.float64),
                             chunk[mb].to_numpy(dtype=np.float64))}
            for model, chunk in indices.groupby("model", sort=False)
            for ma, mb in itertools.combinations(present, 2)]
    out: pd.DataFrame = pd.DataFrame(rows, columns=[
        "model", "metric_a", "metric_b", "n", "kendall_tau", "kendall_p", "spearman_rho",
        "spearman_p"])
    return out


def model_comparison(indices: pd.DataFrame,
                     metric: str = "mean_effect_normalised") -> pd.DataFrame:
    """Principles x models table of ``metric``. With exactly two models, ``attrs["test"]``
    holds a two-sided Wilcoxon signed-rank test across principles of the first model against
    the second (principles paired): model_a, model_b, n, statistic, p_value, and the
    rank-biserial ``effect_size`` (positive: model_a higher)."""
    wide = _wide(indices, metric)
    if wide.shape[1] == 2:
        a, b = wide.columns
        test = signed_rank(wide[a], wide[b])
        wide.attrs["test"] = {"model_a": a, "model_b": b, "n": test.n,
                              "statistic": test.statistic_two_sided,
                              "p_value": test.p_two_sided, "effect_size": test.rank_biserial}
    return wide


__all__ = ["NORMALISED", "RANKED", "REQUIRED", "SignedRank", "group_comparison",
           "metric_rank_agreement", "model_comparison", "reward_percentiles",
           "sensitivity_indices", "signed_rank"]
