"""Verbosity bias of an LLM judge: a warning for lopsided label descriptions (fastrepl's rule)
and a length-controlled win rate for a batch of pairwise verdicts (after AlpacaEval's).

Length control, and why each choice:

- **Model.** ``logit P(a wins) = θ + β·tanh((len_a - len_b) / σ)``, σ the standard deviation of
  the length differences in the batch (kept fixed in the bootstrap so β keeps one meaning).
  tanh bounds the pull of a single very long answer and, unlike a log length ratio, is defined
  for empty answers. Lengths are in whatever unit the caller counts (characters, tokens).
- **Ties** count as half a win (fractional logit): dropping them would discard exactly the
  verdicts where the judge saw no difference. Verdicts without a winner (``None``, e.g. a
  consensus judge that disagreed with itself) are left out.
- **Fit.** Firth's penalised likelihood (Jeffreys prior): when the longer answer always wins
  the plain maximum-likelihood slope is infinite; Firth's stays finite and is less biased in
  small batches. The p-value of β is the penalised likelihood-ratio test (Heinze & Schemper,
  2002); with ties the Bernoulli variance overstates the spread, so it errs conservative.
- **Length-controlled win rate** = σ(θ), the predicted win probability at equal length. The
  model has no other per-verdict term, so averaging that prediction over verdicts gives σ(θ).
- **Intervals** of the model terms are percentile bootstraps over verdicts (each resample
  refitted, all in one vectorised Fisher scoring); resamples where the model cannot be fitted
  are dropped, and bounds are NaN if most are. The raw win rate's is `bootstrap_mean` (BCa),
  except where every verdict is the same or there is only one: resampling then shows no
  spread, and the Wilson interval of the wins (ties half) stands in.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import special
from scipy import stats as sps

from biasscope.core.bootstrap import resample_counts
from biasscope.core.numbers import p_is, with_ci
from biasscope.core.stats import Array, Interval, bootstrap_mean, percentile_interval, wilson

OUTCOME = {"a": 1.0, "b": 0.0, "tie": 0.5}
MIN_VERDICTS = 5
_MAX_STEP = 5.0  # cap on one Newton step (as logistf's maxstep): keeps early steps sane
_BATCH_CELLS = 1_000_000  # resamples x verdicts held at once


class VerbosityBiasWarning(UserWarning):
    """Label descriptions differ so much in length that the judge may favour the longer one."""


def check_label_descriptions(descriptions: Mapping[str, str], ratio: float = 2.0) -> None:
    """Warn (VerbosityBiasWarning) when the longest description has more than ``ratio`` times the
    characters of the shortest: judges favour longer text, so a wordy label draws verdicts.

    fastrepl's rule, mirrored: it warns when, for any two descriptions, shorter/longer < 0.5;
    that is longest > 2 x shortest, strictly, so exactly 2x does not warn. The warning points
    at the caller's caller (the user code that built the judge).
    """
    if ratio < 1:
        raise ValueError(f"ratio must be at least 1, got {ratio}")
    if len(descriptions) < 2:
        return
    longest = max(descriptions, key=lambda k: len(descriptions[k]))
    shortest = min(descriptions, key=lambda k: len(descriptions[k]))
    n_long, n_short = len(descriptions[longest]), len(descriptions[shortest])
    if n_long > ratio * n_short:
        times = f"{n_long / n_short:.1f}x" if n_short else "infinitely"
        warnings.warn(
            f"label {longest!r} has a {n_long}-character description, {times} as long as label "
            f"{shortest!r} ({n_short} characters); judges favour longer text, so keep label "
            f"descriptions within {ratio:g}x of each other", VerbosityBiasWarning, stacklevel=3)


@dataclass(frozen=True)
class LengthControlled:
    """A judge's pairwise verdicts with and without the pull of answer length.

    ``win_rate`` is the raw share of verdicts for ``a`` (ties half); ``lc_win_rate`` what it would
    be at equal length; ``length_coefficient`` is β on tanh(Δlength / ``scale``) (positive: the
    longer answer is favoured). ``reason`` says why the model terms are NaN, else None.
    """
    n: int
    win_rate: Interval
    lc_win_rate: Interval
    length_coefficient: Interval
    length_p_value: float
    spearman: float
    spearman_p_value: float
    scale: float
    reason: str | None

    def sentence(self) -> str:
        """The result in plain English."""
        if self.n == 0:
            return f"No length-controlled win rate: {self.reason}."
        raw = (f"Over {self.n} verdict{'' if self.n == 1 else 's'} (ties count half), answer "
               f"a wins {self.win_rate.estimate:.0%}{_ci(self.win_rate, '.0%')}.")
        if self.reason is not None:
            return f"{raw} No length-controlled win rate: {self.reason}."
        beta, p = self.length_coefficient.estimate, self.length_p_value
        if p < 1 - self.win_rate.confidence:
            verdict = f"The judge favours the {'longer' if beta > 0 else 'shorter'} answer"
        else:
            verdict = "No evidence that answer length sways the judge"
        return (f"{raw} At equal length it would win {self.lc_win_rate.estimate:.0%}"
                f"{_ci(self.lc_win_rate, '.0%')}. {verdict}: length coefficient "
                f"{_coefficient(self.length_coefficient)}, {p_is(p)}; Spearman "
                f"ρ = {self.spearman:+.2f} ({p_is(self.spearman_p_value)}).")


def length_controlled(verdicts: pd.DataFrame | Iterable[tuple[str | None, float, float]],
                      confidence: float = 0.95, n_resamples: int = 2000,
                      seed: int = 0) -> LengthControlled:
    """Raw and length-controlled win rate of answer ``a`` over pairwise verdicts.

    ``verdicts``: (winner, len_a, len_b) tuples, or a DataFrame with columns winner, length_a,
    length_b; winner is ``"a"``, ``"b"``, ``"tie"`` or None (no verdict, left out). Degenerate
    batches (fewer than 5 verdicts, one outcome throughout, no variation in length difference)
    give NaN model terms and a ``reason``; the same seed gives the same intervals.
    """
    y, diff = _parse(verdicts)
    n = int(y.size)
    win = _win_rate(y, confidence, n_resamples, seed)
    reason, scale = _degenerate(y, diff), math.nan
    if reason is None:
        scale = float(np.std(diff))
        x = np.column_stack([np.ones(n), np.tanh(diff / scale)])
        beta, pl_full = _firth(x, y, np.ones((1, n)))
        _, pl_null = _firth(x, y, np.ones((1, n)), free=1)
        if not np.isfinite(beta).all():
            reason = "the logistic fit did not converge"
    if reason is not None:
        nan = _nan(confidence)
        return LengthControlled(n, win, nan, nan, math.nan, math.nan, math.nan, scale, reason)
    lr = max(0.0, 2 * float(pl_full[0] - pl_null[0]))
    boot = _bootstrap_fits(x, y, n_resamples, seed)
    rho = sps.spearmanr(diff, y)
    return LengthControlled(
        n, win,
        percentile_interval(float(_sigmoid(beta[0, 0])), _sigmoid(boot[:, 0]), confidence),
        percentile_interval(float(beta[0, 1]), boot[:, 1], confidence),
        float(sps.chi2.sf(lr, df=1)), float(rho.statistic), float(rho.pvalue), scale, None)


def _win_rate(y: Array, confidence: float, n_resamples: int, seed: int) -> Interval:
    """The share of wins (ties half) with its bootstrap interval; where every verdict is the
    same, or there is one, resampling shows no spread though there is some (three wins for a
    gave 100% to 100%), so the Wilson interval of the wins instead, as beside it for the
    verdict rate (with ties, a Wilson interval is conservative)."""
    if y.size == 0:
        return _nan(confidence)
    if y.size < 2 or np.ptp(y) == 0:
        found = wilson(float(y.sum()), int(y.size), confidence)
        return Interval(float(found["estimate"]), float(found["low"]), float(found["high"]),
                        confidence)
    return bootstrap_mean(y, confidence, n_resamples, seed=seed)


def _parse(verdicts: pd.DataFrame | Iterable[tuple[str | None, float, float]]
           ) -> tuple[Array, Array]:
    """Outcomes for ``a`` (1, 0.5, 0) and length differences a - b, verdicts without a winner
    dropped; unknown winners and missing or negative lengths raise ValueError."""
    if isinstance(verdicts, pd.DataFrame):
        verdicts = zip(verdicts["winner"], verdicts["length_a"], verdicts["length_b"])
    rows = [(winner, len_a, len_b) for winner, len_a, len_b in verdicts]
    kept = [r for r in rows if not pd.isna(r[0])]
    bad = {r[0] for r in kept} - OUTCOME.keys()
    if bad:
        raise ValueError(f"unknown winners {sorted(map(str, bad))}: expected a, b, tie or None")
    lengths = np.array([[r[1], r[2]] for r in kept], dtype=np.float64).reshape(-1, 2)
    if not (np.isfinite(lengths).all() and (lengths >= 0).all()):
        raise ValueError("lengths must be finite and non-negative")
    y = np.array([OUTCOME[str(r[0])] for r in kept], dtype=np.float64)
    return y, np.asarray(lengths[:, 0] - lengths[:, 1])


def _degenerate(y: Array, diff: Array) -> str | None:
    """Why the length model cannot be fitted, or None when it can."""
    if y.size == 0:
        return "there are no verdicts"
    if y.size < MIN_VERDICTS:
        return (f"only {y.size} verdict{'' if y.size == 1 else 's'}, at least {MIN_VERDICTS} "
                "are needed")
    if np.ptp(y) == 0:
        winner = next(k for k, v in OUTCOME.items() if v == y[0])
        what = "a tie" if winner == "tie" else f"a win for {winner}"
        return f"every verdict is {what}, so length cannot explain any difference between them"
    if np.ptp(diff) == 0:
        return (f"every pair differs in length by the same amount ({diff[0]:g}), so its effect "
                "cannot be told apart from a preference for a")
    return None


def _firth(x: Array, y: Array, w: Array, free: int | None = None, max_iter: int = 200,
           tol: float = 1e-8) -> tuple[Array, Array]:
    """Firth-penalised logistic fits of (fractional) outcomes ``y`` on design ``x`` (n x k), one
    per row of frequency weights ``w`` (B x n), by Fisher scoring on Firth's modified score.

    With ``free`` only the first ``free`` coefficients move and the rest stay 0, the penalty
    still that of the full design: the restricted fit of the penalised likelihood-ratio test.
    Returns coefficients (B x k) and penalised log-likelihoods (B); rows that are singular or
    do not converge are NaN.
    """
    n_fits, k = w.shape[0], x.shape[1]
    m = k if free is None else free
    beta = np.zeros((n_fits, k))
    active = np.ones(n_fits, dtype=bool)
    singular = np.zeros(n_fits, dtype=bool)
    xx = _outer(x)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        p = _sigmoid(beta[idx] @ x.T)
        wv = w[idx] * p * (1 - p)
        info = (wv @ xx).reshape(-1, k, k)
        bad = ~(np.abs(np.linalg.det(info)) > 1e-12 * np.abs(info).max(axis=(1, 2)) ** k)
        info[bad] = np.eye(k)
        hat = wv * (np.linalg.inv(info).reshape(-1, k * k) @ xx.T)
        score = (w[idx] * (y - p) + hat * (0.5 - p)) @ x
        step = np.linalg.solve(info[:, :m, :m], score[:, :m, None])[:, :, 0]
        big = np.abs(step).max(axis=1, keepdims=True)
        step *= np.minimum(1.0, _MAX_STEP / np.maximum(big, 1e-300))
        beta[idx[:, None], np.arange(m)] += step
        singular[idx[bad]] = True
        active[idx[(big[:, 0] < tol) | bad]] = False
        if not active.any():
            break
    beta[active | singular] = np.nan
    return beta, _penalised_loglik(x, y, w, beta)


def _penalised_loglik(x: Array, y: Array, w: Array, beta: Array) -> Array:
    """Log-likelihood plus half the log-determinant of the Fisher information (Firth)."""
    eta = np.nan_to_num(beta) @ x.T
    loglik = (w * (-y * np.logaddexp(0, -eta) - (1 - y) * np.logaddexp(0, eta))).sum(axis=1)
    p = _sigmoid(eta)
    k = x.shape[1]
    _, logdet = np.linalg.slogdet(((w * p * (1 - p)) @ _outer(x)).reshape(-1, k, k))
    return np.where(np.isfinite(beta).all(axis=1), loglik + 0.5 * logdet, np.nan)


def _bootstrap_fits(x: Array, y: Array, n_resamples: int, seed: int) -> Array:
    """(θ, β) refitted on ``n_resamples`` resamples of the verdicts (multinomial weights)."""
    rng = np.random.default_rng(seed)
    n = y.size
    batch = max(1, _BATCH_CELLS // n)
    out = []
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        w = resample_counts(n, size, rng)
        out.append(_firth(x, y, w)[0])
    return np.concatenate(out) if out else np.zeros((0, x.shape[1]))


def _outer(x: Array) -> Array:
    """x_i x_j per verdict (n x k²): the Fisher information of all fits is then one GEMM."""
    return np.asarray((x[:, :, None] * x[:, None, :]).reshape(x.shape[0], -1))


def _sigmoid(z: npt.ArrayLike) -> Array:
    return np.asarray(special.expit(np.asarray(z, dtype=np.float64)))


def _nan(confidence: float) -> Interval:
    return Interval(math.nan, math.nan, math.nan, confidence)


def _ci(iv: Interval, spec: str) -> str:
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return ""
    return f" ({iv.confidence:.0%} CI {iv.low:{spec}} to {iv.high:{spec}})"


def _coefficient(iv: Interval) -> str:
    return with_ci(iv.estimate, iv.low, iv.high, iv.confidence, signed=True)
