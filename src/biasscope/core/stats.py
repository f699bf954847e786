"""Statistics for fairness dynamics: Mann-Whitney and signed-rank tests, the test of a mean,
multiple-comparison control and the tables of tests over checkpoints (Appendix D of *Fairness
Dynamics During Training*). Plain functions over records (docs/schema.md) or small arrays. The
confidence intervals of means, differences and rates are `biasscope.core.intervals`.

Conventions, and why:

- **Seeds are replicates.** A seed only permutes the order in which the options are shown, so
  the seeds of one prompt are repeated measurements of that prompt, not new prompts. Each
  prompt's value is averaged over seeds first and tests run on prompts. Pooling seeds would
  multiply n by the number of seeds with strongly correlated observations and make every
  p-value too small (anti-conservative).
- **Effect size** beside every p-value: rank-biserial correlation r = 2U/(n1·n2) - 1 with U
  SciPy's statistic for the first sample, i.e. r = P(X > Y) - P(X < Y). Positive means group 1
  (``male``, model A) tends to be larger; ±1 means the groups do not overlap.
- **Families.** p-values are corrected over the checkpoints of one model (one curve, one
  family). Holm is the default: it controls the family-wise error rate whatever the dependence
  between checkpoints; Benjamini-Hochberg (``"bh"``, false discovery rate) on request.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from biasscope.core import intervals
from biasscope.core.corrections import CORRECTIONS as CORRECTIONS
from biasscope.core.corrections import MANN_WHITNEY as MANN_WHITNEY
from biasscope.core.corrections import SIGNED_RANK as SIGNED_RANK
from biasscope.core.corrections import Correction as Correction
from biasscope.core.imports import installed_version, lazy
from biasscope.core.intervals import _finite as _finite
from biasscope.core.ranktests import mann_whitney_u, signed_rank_test
from biasscope.core.renamed import renamed
from biasscope.core.student import t_cdf

sps = lazy("scipy.stats")  # imported at first use, where a test or CI here does not serve

Array = npt.NDArray[np.float64]


@functools.cache
def scipy_rng_keyword() -> str:
    """SciPy 1.15 renamed ``random_state`` to ``rng``: the name this SciPy takes, read from its
    version (asking ``sps.bootstrap`` would import SciPy's statistics now)."""
    version = installed_version("scipy") or "0.0"
    major, minor = (int(part) for part in version.split(".")[:2])
    return "rng" if (major, minor) >= (1, 15) else "random_state"


@dataclass(frozen=True)
class GroupTest:
    """Two-sided Mann-Whitney U of group 1 against group 2, with rank-biserial effect size."""
    statistic: float
    p_value: float
    effect_size: float
    n1: int
    n2: int


# ---------------------------------------------------------------- per-prompt values


# ---------------------------------------------------------------- tests and corrections

def mann_whitney(x: npt.ArrayLike, y: npt.ArrayLike) -> GroupTest:
    """Two-sided Mann-Whitney U (SciPy's automatic exact/asymptotic choice); NaNs dropped.
    The normal approximation is `biasscope.core.ranktests`' (SciPy's numbers, without
    importing SciPy's statistics); the exact test of small samples SciPy's.

    An empty group gives NaNs; all values tied gives p = 1, r = 0 (there is no evidence of a
    difference, and SciPy's normal approximation would divide by a zero variance).
    """
    a, b = _finite(x), _finite(y)
    n1, n2 = a.size, b.size
    if n1 == 0 or n2 == 0:
        return GroupTest(math.nan, math.nan, math.nan, n1, n2)
    if np.ptp(np.concatenate([a, b])) == 0:
        return GroupTest(n1 * n2 / 2, 1.0, 0.0, n1, n2)
    found = mann_whitney_u(a, b)
    if found is None:  # exact
        res = sps.mannwhitneyu(a, b, alternative="two-sided")
        found = float(res.statistic), float(res.pvalue)
    u, p = found
    return GroupTest(u, p, 2 * u / (n1 * n2) - 1, n1, n2)


def signed_rank(differences: npt.ArrayLike) -> dict[str, float]:
    """Two-sided Wilcoxon signed-rank test of paired differences (zeros dropped, as Wilcoxon
    did) and the matched-pairs rank-biserial correlation r = (W+ − W−)/(W+ + W−): +1 when
    every non-zero difference is positive."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d) & (d != 0)]
    if d.size == 0:
        return {"statistic": math.nan, "p_value": math.nan, "effect_size": math.nan,
                "n_nonzero": 0}
    found = signed_rank_test(d)  # the normal approximation; SciPy's exact test else
    if found is None:
        result = sps.wilcoxon(d, zero_method="wilcox", alternative="two-sided")
        found = float(result.statistic), float(result.pvalue), sps.rankdata(np.abs(d))
    statistic, p, ranks = found
    plus, minus = float(ranks[d > 0].sum()), float(ranks[d < 0].sum())
    return {"statistic": statistic, "p_value": p,
            "effect_size": (plus - minus) / (plus + minus), "n_nonzero": int(d.size)}


def mean_test(values: npt.ArrayLike, draws: int = 4999, seed: int = 0) -> dict[str, float]:
    """Two-sided test of a mean of 0 that does not assume symmetry or light tails: the larger
    of the equal-tailed studentised bootstrap's p (the t of the values centred on their mean,
    resampled ``draws`` times) and Student's t's, and Cohen's d_z (mean over SD). Each fails
    where the other holds: Student's t called a right-skewed mean of 0 (Gamma(2) minus 2)
    different from 0 in 7.5% of 20-value samples, the bootstrap a heavy-tailed symmetric one
    (a difference of two Student-t(3)) in 7.5% of 40-value samples; Wilcoxon's signed-rank
    test, which tests symmetry, the skewed one in 99% of 1,508-value samples. NaN p with fewer
    than two values; all values alike: p 1 for 0, else 0."""
    x = _finite(values)
    n = x.size
    if n < 2:
        return {"p_value": math.nan, "effect_size": math.nan, "n": n}
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return {"p_value": 1.0 if mean == 0 else 0.0,
                "effect_size": 0.0 if mean == 0 else math.nan, "n": n}
    observed = mean / sd * math.sqrt(n)
    centred, rng = x - mean, np.random.default_rng(seed)
    above = below = 0
    step = max(1, (1 << 20) // n)  # about a million values at a time
    for start in range(0, draws, step):
        y = centred[rng.integers(0, n, (min(step, draws - start), n))]
        spread = y.std(axis=1, ddof=1)
        t = np.where(spread > 0, y.mean(axis=1) / np.maximum(spread, 1e-300) * math.sqrt(n),
                     0.0)
        above += int((t >= observed).sum())
        below += int((t <= observed).sum())
    p = min(1.0, 2 * min(above + 1, below + 1) / (draws + 1))
    student = 2 * t_cdf(-abs(observed), n - 1)
    return {"p_value": max(p, student), "effect_size": mean / sd, "n": n}


def adjust_pvalues(p_values: npt.ArrayLike, method: Correction = "holm") -> Array:
    """Holm (family-wise error) or Benjamini-Hochberg (false discovery rate) adjusted p-values.
    NaN p-values (tests that could not run) stay NaN and do not count towards the family."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, math.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0:
        return out
    if method == "holm":
        order = np.argsort(p[ok], kind="stable")
        adj = np.maximum.accumulate((m - np.arange(m)) * p[ok][order])
        held = np.empty(m)
        held[order] = np.minimum(adj, 1.0)
        out[ok] = held
    elif method == "bh":
        out[ok] = sps.false_discovery_control(p[ok], method="bh")
    else:
        raise ValueError(f"unknown correction {method!r}: holm or bh")
    return out


def group_test_row(x: Array, y: Array, names: tuple[str, str]) -> dict[str, Any]:
    t = mann_whitney(x, y)
    m1 = float(x.mean()) if x.size else math.nan
    m2 = float(y.mean()) if y.size else math.nan
    return {f"n_{names[0]}": t.n1, f"n_{names[1]}": t.n2, f"mean_{names[0]}": m1,
            f"mean_{names[1]}": m2, "gap": m1 - m2, "statistic": t.statistic,
            "p_value": t.p_value, "effect_size": t.effect_size, "test": MANN_WHITNEY}


def paired_test_row(x: Array, y: Array, names: tuple[str, str]) -> dict[str, Any]:
    """`group_test_row` for ``x[i]`` and ``y[i]`` one pair: Wilcoxon's signed-rank test of
    the differences and the matched-pairs rank-biserial r (`signed_rank`). Within WinoBias
    pairs the two prompts' values moved against each other (Pearson −0.77 on Gemma 3 270M), so
    Mann-Whitney over the prompts called a gap of 0 significant 6% of the time at α 0.01. All
    differences 0: p 1, r 0, as `mann_whitney` gives all values tied."""
    t = signed_rank(x - y)
    if t["n_nonzero"] == 0 and x.size:
        t = {"statistic": 0.0, "p_value": 1.0, "effect_size": 0.0}
    m1 = float(x.mean()) if x.size else math.nan
    m2 = float(y.mean()) if y.size else math.nan
    return {f"n_{names[0]}": x.size, f"n_{names[1]}": y.size, f"mean_{names[0]}": m1,
            f"mean_{names[1]}": m2, "gap": m1 - m2, "statistic": t["statistic"],
            "p_value": t["p_value"], "effect_size": t["effect_size"], "test": SIGNED_RANK}


def _correct(rows: pd.DataFrame, by: str | None, correction: Correction,
             alpha: float) -> pd.DataFrame:
    rows["p_adjusted"] = math.nan
    for idx in (rows.groupby(by, sort=False).groups.values() if by else [rows.index]):
        rows.loc[idx, "p_adjusted"] = adjust_pvalues(rows.loc[idx, "p_value"], correction)
    rows["significant"] = rows["p_adjusted"] < alpha
    return rows


def tests_table(rows: Sequence[dict[str, Any]], keys: tuple[str, ...], names: tuple[str, str],
                step_dtype: Any, by: str | None, correction: Correction, alpha: float
                ) -> pd.DataFrame:
    """Test rows (of `checkpoint_rows` or `model_rows`, gathered over checkpoints) as a table
    with p-values corrected within each ``by`` group (None: over all rows)."""
    table = pd.DataFrame(list(rows), columns=_columns(keys, names))
    return _correct(table.astype({"step": step_dtype}), by, correction, alpha)


def _columns(keys: tuple[str, ...], names: tuple[str, str]) -> list[str]:
    return [*keys, *(f"n_{g}" for g in names), *(f"mean_{g}" for g in names), "gap",
            "statistic", "p_value", "effect_size", "test"]


#: What moved to `biasscope.core.intervals`, still given from here for one release: these by
#: the same names, and the three that no longer bootstrap a mean of values with spread (t or
#: Welch widened towards a skew, `biasscope.core.hall`) by the names of what they give.
_MOVED = ("Interval", "percentile_interval", "MEAN", "DIFFERENCE", "SMALL", "UNIT",
          "t_interval", "skewed_t_interval", "range_wilson", "flat_difference", "none_differ",
          "wilson", "boundary_rate", "paired_boundary_difference", "clustered_wilson",
          "group_t_interval")
_RENAMED = {"bootstrap_mean": "mean_ci", "bootstrap_means": "mean_cis",
            "bootstrap_difference": "mean_difference_ci"}


def _bootstrap_difference(x: npt.ArrayLike, y: npt.ArrayLike, confidence: float = 0.95,
                          n_resamples: int = 2000, method: str = "BCa", seed: int = 0,
                          bounds: tuple[float, float] | None = None) -> intervals.Interval:
    """``bootstrap_difference`` with its old arguments, for one release: `mean_difference_ci`
    resamples nothing (Welch's widened at any size; no interval below two items a group), so
    ``n_resamples``, ``method`` and ``seed`` change none of its numbers and it no longer takes
    them; a call that passes them still runs."""
    return intervals.mean_difference_ci(x, y, confidence, bounds)


#: What an old name gives where the new one's arguments changed (else the new one itself).
_OLD_SIGNATURES = {"mean_difference_ci": _bootstrap_difference}

if not TYPE_CHECKING:  # the old names and place, for one release
    __getattr__ = renamed(__name__, {old: f"biasscope.core.intervals.{new}" for old, new in
                                     [*((name, name) for name in _MOVED), *_RENAMED.items()]},
                          lambda new: _OLD_SIGNATURES.get(new.rpartition(".")[2]) or getattr(
                              intervals, new.rpartition(".")[2]))
