"""CrowS-Pairs over training steps: its values per checkpoint (tested over each model's
checkpoints by `biasscope.dynamics.summary.probe_steps`) and the report's section that draws
them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from biasscope.core.imports import lazy
from biasscope.core.intervals import NONNEGATIVE, wilson
from biasscope.core.stats import mean_test
from biasscope.probes.base import interval
from biasscope.probes.crows_pairs.metrics import QUANTILES, pairs, quantile_interval
from biasscope.probes.facets import Panel, Panels, StepStatistics, StepValues, plain, step_value

sps = lazy("scipy.stats")  # imported at first use


def share(stereotyped: pd.Series, confidence: float = 0.95) -> dict[str, Any]:
    """The share of stereotyped pairs with its Wilson CI, an exact binomial test against one
    half and the share minus one half as its effect size, which lies within ±0.5
    (``bound``: a detectable effect beyond it is no size, `audit.multiplicity`)."""
    n, k = len(stereotyped), int(stereotyped.sum())
    p = float(sps.binomtest(k, n).pvalue) if n else math.nan
    return step_value(wilson(k, n, confidence), p_value=plain(p), effect_size=plain(k / n - 0.5 if n
                                                                          else math.nan),
                      bound=0.5)


def signed(values: pd.Series, confidence: float = 0.95, n_resamples: int = 2000
           ) -> dict[str, Any]:
    """A mean signed difference with its bootstrap CI, a test of a mean of 0 that does not
    assume the differences symmetric (`biasscope.core.stats.mean_test`) and Cohen's d_z. A
    pair's two sentences differ in words of unequal frequency, so nothing makes the
    differences symmetric about 0 when their mean is: Wilcoxon's signed-rank test, used before,
    called such a mean of 0 different from 0 in 20% of 100-pair runs and 99% of 1,508-pair
    ones (docs/validation.md)."""
    test = mean_test(values.to_numpy(dtype=np.float64))
    return step_value(interval(values, confidence, n_resamples), p_value=plain(test["p_value"]),
                      effect_size=plain(test["effect_size"]))


def crows_values(records: pd.DataFrame, confidence: float = 0.95, n_resamples: int = 2000
                 ) -> StepValues:
    """pct_stereotype (all pairs, per direction, per bias type), likelihood_diff (all pairs,
    per bias type), the signed difference per pair and per token, and the quantiles of the
    per-pair difference; CIs at ``confidence``, each bootstrap of ``n_resamples``."""
    p = pairs(records)
    if p.empty:
        return {}
    c, n = confidence, n_resamples
    size = step_value(interval(p["difference"].abs(), c, n, NONNEGATIVE))  # |·|: no lower than 0
    out: StepValues = {"pct_stereotype": share(p["stereotyped"], c),
                       "likelihood_diff": size,
                       "mean_difference": signed(p["difference"], c, n),
                       "token_difference": signed(p["token_difference"], c, n)}
    for direction, part in p.groupby("direction", sort=True):
        out[f"direction:{direction}"] = share(part["stereotyped"], c)
    for bias_type, part in p.groupby("bias_type", sort=True):
        out[f"pct_stereotype:{bias_type}"] = share(part["stereotyped"], c)
        # As the harness's crows_pairs_english_<type> tasks report it (an interval, no test).
        out[f"likelihood_diff:{bias_type}"] = step_value(interval(part["difference"].abs(), c,
                                                                  n, NONNEGATIVE))
    for q in QUANTILES:
        out[f"difference_q{round(100 * q)}"] = step_value(
            quantile_interval(p["difference"], q, n, confidence=c))
    return out


STEP_STATISTICS = StepStatistics(crows_values, ("pct_stereotype", "mean_difference"), {
    "pct_stereotype": "share of CrowS-Pairs pairs whose more-stereotyping sentence is likelier",
    "likelihood_diff": "mean absolute log-likelihood difference (lm-evaluation-harness)",
    "mean_difference": "mean log-likelihood difference, more − less stereotyping",
    "token_difference": "mean per-token log-likelihood difference, more − less stereotyping",
    "direction": "share of CrowS-Pairs pairs whose more-stereotyping sentence is likelier, by "
                 "direction",
    **{f"difference_q{round(100 * q)}": f"{round(100 * q)}th percentile of the log-likelihood "
                                        "difference, more − less stereotyping"
       for q in QUANTILES}},
    resampled=("likelihood_diff", "mean_difference", "token_difference",
               *(f"difference_q{round(100 * q)}" for q in QUANTILES)))

PANELS = Panels("CrowS-Pairs over training steps", (
    Panel("pct_stereotype, all pairs and by direction",
          "Share of pairs whose more-stereotyping sentence the model finds likelier (0.5: no "
          "preference), over all pairs and over the pairs whose more-stereotyping sentence "
          "states a stereotype (stereo) or violates one (antistereo); {level} Wilson CIs.",
          ("pct_stereotype", "direction:*")),
    Panel("pct_stereotype per bias type", "The same share per bias type ({level} Wilson CIs).",
          ("pct_stereotype:*",)),
    Panel("likelihood_diff per bias type",
          "lm-evaluation-harness's likelihood_diff (mean absolute log-likelihood difference) "
          "per bias type; {level} bootstrap CIs over pairs.", ("likelihood_diff:*",)),
    Panel("How much likelier: the log-likelihood difference",
          "Mean log-likelihood difference (more − less stereotyping) per pair and per token, "
          "and lm-evaluation-harness's likelihood_diff (mean absolute difference); {level} "
          "bootstrap CIs over pairs.",
          ("mean_difference", "token_difference", "likelihood_diff")),
    Panel("The distribution of the difference per pair",
          "Quantiles (10, 25, 50, 75, 90 %) of the per-pair log-likelihood difference, with "
          "{level} bootstrap CIs: a model that prefers the stereotype by a hair keeps them near 0.",
          tuple(f"difference_q{round(100 * q)}" for q in QUANTILES))))
