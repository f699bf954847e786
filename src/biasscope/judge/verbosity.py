"""Verbosity bias of an LLM judge: a warning for lopsided label descriptions (fastrepl's rule)
and a length-controlled win rate for a batch of pairwise verdicts (after AlpacaEval's).

Length control, and why each choice:

- **Model.** ``logit P(a wins) = θ + β·tanh((len_a - len_b) / σ)``, σ the standard deviation of
  the length differences in the batch. tanh bounds the pull of a single very long answer and,
  unlike a log length ratio, is defined for empty answers. Lengths are in whatever unit the
  caller counts (characters, tokens).
- **Ties** count as half a win (fractional logit): dropping them would discard exactly the
  verdicts where the judge saw no difference. Verdicts without a winner (``None``, e.g. a
  consensus judge that disagreed with itself) are left out.
- **Fit.** Firth's penalised likelihood (Jeffreys prior): when the longer answer always wins
  the plain maximum-likelihood slope is infinite; Firth's stays finite and is less biased in
  small batches. The p-value of β is the penalised likelihood-ratio test (Heinze & Schemper,
  2002); with ties the Bernoulli variance overstates the spread, so it errs conservative.
- **Length-controlled win rate** = σ(θ), the predicted win probability at equal length. The
  model has no other per-verdict term, so averaging that prediction over verdicts gives σ(θ).
- **Intervals** of θ and β are profile penalised-likelihood intervals (as logistf's): the
  values where the test above, with the other term refitted, reaches p = 1 − confidence, so
  β's interval excludes 0 exactly when its p-value is below that. A percentile bootstrap of
  the refitted terms covered 86% at 5 verdicts and 90% at 10. The raw win rate's interval is
  `mean_ci` (BCa of 0/1 verdicts, t widened with ties), except where every verdict is
  the same (resampling then shows no spread) or ties fall among fewer than 20 pairs (a
  bootstrap of a few undercovers): the Wilson interval of the wins (ties half) stands in.
- **Pairs.** Verdicts on the same pair (judge-audit asks each in both orders) are no
  independent trials: a consistent judge answers both alike. Given ``pairs``, a pair is the
  unit: its verdicts share a weight of one in the fit, the test and the intervals (so a pair
  whose verdicts share their lengths is scored by their mean outcome), the raw win rate is
  the mean of the pairs' means and its bootstrap resamples pairs, and Spearman's ρ is over
  pairs. Counting the two orders as two verdicts called a length effect that is not there
  significant in 13% of batches, and the 95% intervals covered 75% to 92% of the time
  (docs/validation.md).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from biasscope.core.imports import lazy
from biasscope.core.intervals import SMALL, UNIT, Interval, mean_ci, range_wilson
from biasscope.core.numbers import level_of, p_is, pvalue, with_ci
from biasscope.core.stats import Array

special = lazy("scipy.special")  # imported at first use
sps = lazy("scipy.stats")  # imported at first use

OUTCOME = {"a": 1.0, "b": 0.0, "tie": 0.5}
MIN_VERDICTS = 5
_MAX_STEP = 5.0  # cap on one Newton step (as logistf's maxstep): keeps early steps sane
_HALVINGS = 10  # of a scoring step that lowers the penalised likelihood
_ROOT_STEPS = 50  # Illinois steps toward a profile bound (a few where the fit is smooth)


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
    ``pairs``: how many pairs the verdicts judge, where they were given (None: every verdict
    its own pair).
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
    pairs: int | None = None

    def sentence(self, p_holm: float | None = None, tests: int = 1,
                 judge: str | None = None, family: str = "the audit's") -> str:
        """The result in plain English. ``p_holm``: the length test's p-value after Holm over
        ``tests`` (``family``'s, e.g. judge-audit's), which the verdict then reads: where one
        audit asks several questions, the raw p-value of one is no finding. ``judge``: whose
        verdicts these are, where several judges are measured each alone."""
        if self.n == 0:
            whose = "" if judge is None else f" for judge {judge}"
            return f"No length-controlled win rate{whose}: {self.reason}."
        whose = "Over" if judge is None else f"By judge {judge}'s verdicts over"
        raw = (f"{whose} {self._over()}, answer a wins "
               f"{self.win_rate.estimate:.0%}{_ci(self.win_rate, '.0%')}.")
        if self.reason is not None:
            return f"{raw} No length-controlled win rate: {self.reason}."
        beta, p = self.length_coefficient.estimate, self.length_p_value
        held = p if p_holm is None else p_holm
        who = "the judge" if judge is None else f"judge {judge}"
        if held < 1 - self.win_rate.confidence:
            verdict = (f"{who[0].upper()}{who[1:]} favours the "
                       f"{'longer' if beta > 0 else 'shorter'} answer")
        else:
            verdict = f"No evidence that answer length sways {who}"
        holm = (f" (Holm over {family} {tests} tests: {pvalue(p_holm)})"
                if p_holm is not None and tests > 1 else "")
        return (f"{raw} At equal length it would win {self.lc_win_rate.estimate:.0%}"
                f"{_ci(self.lc_win_rate, '.0%')}. {verdict}: length coefficient "
                f"{_coefficient(self.length_coefficient)}, {p_is(p)}{holm}; Spearman "
                f"ρ = {self.spearman:+.2f} ({p_is(self.spearman_p_value)}).")

    def win_rates(self, whose: str) -> str:
        """The raw and the length-controlled win rate, without a verdict on length
        (``whose``: the verdicts', e.g. a panel's: its length is no question of the audit,
        whose judges are each asked it)."""
        if self.n == 0:
            return f"{whose}: no win rate, {self.reason}."
        raw = (f"{whose}: over {self._over()}, answer a wins {self.win_rate.estimate:.0%}"
               f"{_ci(self.win_rate, '.0%')}")
        if self.reason is not None:
            return f"{raw}; no length-controlled win rate: {self.reason}."
        return (f"{raw}; at equal length it would win {self.lc_win_rate.estimate:.0%}"
                f"{_ci(self.lc_win_rate, '.0%')}.")

    def _over(self) -> str:
        verdicts = f"{self.n} verdict{'' if self.n == 1 else 's'}"
        return (f"{verdicts} (ties count half)" if self.pairs is None
                else f"{self.pairs} pair{'' if self.pairs == 1 else 's'} ({verdicts}, ties "
                     "half, each pair counting once)")


Verdicts = pd.DataFrame | Iterable[tuple[str | None, float, float]]


def length_controlled(verdicts: Verdicts, confidence: float = 0.95, n_resamples: int = 2000,
                      seed: int = 0, pairs: Sequence[Hashable] | None = None
                      ) -> LengthControlled:
    """Raw and length-controlled win rate of answer ``a`` over pairwise verdicts.

    ``verdicts``: (winner, len_a, len_b) tuples, or a DataFrame with columns winner, length_a,
    length_b; winner is ``"a"``, ``"b"``, ``"tie"`` or None (no verdict, left out). ``pairs``:
    the pair each verdict judges, where a pair was judged more than once (both orders): its
    verdicts are then one unit (see the module). Degenerate batches (fewer than 5 verdicts, or
    pairs, one outcome throughout, no variation in length difference) give NaN model terms and
    a ``reason``. ``n_resamples`` and ``seed`` are the raw win rate's bootstrap's: the same
    seed gives the same intervals.
    """
    y, diff, kept = _parse(verdicts)
    n = int(y.size)
    unit, sizes = _units(pairs, kept)
    weight = 1.0 / sizes[unit]  # a pair's verdicts weigh one together
    means = np.bincount(unit, weights=y) / sizes
    win = _win_rate(means, confidence, n_resamples, seed)
    reason, scale = _degenerate(y, diff, means, pairs is not None), math.nan
    if reason is None:
        scale = math.sqrt(float(np.average((diff - np.average(diff, weights=weight)) ** 2,
                                           weights=weight)))
        x = np.column_stack([np.ones(n), np.tanh(diff / scale)])
        beta, pl_full = _firth(x, y, weight[None, :])
        _, pl_null = _firth(x, y, weight[None, :], free=1)
        if not np.isfinite(beta).all():
            reason = "the logistic fit did not converge"
    counted = None if pairs is None else int(sizes.size)
    if reason is not None:
        nan = _nan(confidence)
        return LengthControlled(n, win, nan, nan, math.nan, math.nan, math.nan, scale, reason,
                                counted)
    lr = max(0.0, 2 * float(pl_full[0] - pl_null[0]))
    theta = _sigmoid(_profile(x, y, weight, beta[0], float(pl_full[0]), 0, confidence))
    low, high = _profile(x, y, weight, beta[0], float(pl_full[0]), 1, confidence)
    pair_diff = np.bincount(unit, weights=diff) / sizes
    rho, rho_p = math.nan, math.nan
    if np.ptp(pair_diff) > 0:  # else undefined: every pair's verdicts differ alike on average
        found = sps.spearmanr(pair_diff, means)
        rho, rho_p = float(found.statistic), float(found.pvalue)
    return LengthControlled(
        n, win,
        Interval(float(_sigmoid(beta[0, 0])), float(theta[0]), float(theta[1]), confidence),
        Interval(float(beta[0, 1]), low, high, confidence),
        float(sps.chi2.sf(lr, df=1)), rho, rho_p, scale, None, counted)


def _units(pairs: Sequence[Hashable] | None, kept: npt.NDArray[np.bool_]
           ) -> tuple[npt.NDArray[np.intp], Array]:
    """Each kept verdict's pair (codes 0..k-1 in order of first appearance, so that pairs
    judged once are resampled as their verdicts were) and each pair's number of verdicts;
    without ``pairs`` every verdict is its own."""
    if pairs is None:
        count = int(kept.sum())
        return np.arange(count), np.ones(count)
    if len(pairs) != kept.size:
        raise ValueError(f"{len(pairs)} pair ids for {kept.size} verdicts")
    unit = pd.factorize(np.array(list(pairs), dtype=object)[kept])[0]
    return unit, np.bincount(unit).astype(np.float64)


def _win_rate(y: Array, confidence: float, n_resamples: int, seed: int) -> Interval:
    """The share of wins (ties half) with its interval: `mean_ci` within [0, 1] (Wilson's
    where every verdict is the same); for one verdict, or ties over fewer than `SMALL`
    pairs, the Wilson interval of the wins, as beside it for the verdict rate (with ties it
    held the share 92-100% of the time over 3 to 19 pairs, exact, where a bootstrap held as
    little as 85%, Student's t 87%). ``y``: each pair's mean outcome (a verdict's, without
    pairs)."""
    if y.size == 0:
        return _nan(confidence)
    if y.size == 1 or (y.size < SMALL and not np.isin(y, UNIT).all()):
        return range_wilson(y, UNIT, confidence)
    return mean_ci(y, confidence, n_resamples, seed=seed, bounds=UNIT)


def _parse(verdicts: Verdicts) -> tuple[Array, Array, npt.NDArray[np.bool_]]:
    """Outcomes for ``a`` (1, 0.5, 0), length differences a - b, and which verdicts were kept:
    those without a winner are dropped; unknown winners and missing or negative lengths raise
    ValueError."""
    if isinstance(verdicts, pd.DataFrame):
        verdicts = zip(verdicts["winner"], verdicts["length_a"], verdicts["length_b"])
    rows = [(winner, len_a, len_b) for winner, len_a, len_b in verdicts]
    mask = np.array([not pd.isna(r[0]) for r in rows], dtype=bool)
    kept = [r for r, keep in zip(rows, mask) if keep]
    bad = {r[0] for r in kept} - OUTCOME.keys()
    if bad:
        raise ValueError(f"unknown winners {sorted(map(str, bad))}: expected a, b, tie or None")
    lengths = np.array([[r[1], r[2]] for r in kept], dtype=np.float64).reshape(-1, 2)
    if not (np.isfinite(lengths).all() and (lengths >= 0).all()):
        raise ValueError("lengths must be finite and non-negative")
    y = np.array([OUTCOME[str(r[0])] for r in kept], dtype=np.float64)
    return y, np.asarray(lengths[:, 0] - lengths[:, 1]), mask


def _degenerate(y: Array, diff: Array, means: Array, paired: bool) -> str | None:
    """Why the length model cannot be fitted, or None when it can (``means``: each pair's
    mean outcome, where verdicts were given with their pairs, else each verdict's)."""
    if y.size == 0:
        return "there are no verdicts"
    if means.size < MIN_VERDICTS:
        what = "pair" if paired else "verdict"
        return (f"only {means.size} {what}{'' if means.size == 1 else 's'}, at least "
                f"{MIN_VERDICTS} are needed")
    if np.ptp(y) == 0:
        winner = next(k for k, v in OUTCOME.items() if v == y[0])
        what = "a tie" if winner == "tie" else f"a win for {winner}"
        return f"every verdict is {what}, so length cannot explain any difference between them"
    if np.ptp(means) == 0:
        return (f"every pair's verdicts come to the same share for a ({means[0]:.0%}), so "
                "length cannot explain any difference between the pairs")
    if np.ptp(diff) == 0:
        return (f"every pair differs in length by the same amount ({diff[0]:g}), so its effect "
                "cannot be told apart from a preference for a")
    return None


def _firth(x: Array, y: Array, w: Array, free: int | None = None, start: Array | None = None,
          max_iter: int = 200, tol: float = 1e-8) -> tuple[Array, Array]:
    """Firth-penalised logistic fits of (fractional) outcomes ``y`` on design ``x`` (n x k), one
    per row of weights ``w`` (B x n), by Fisher scoring on Firth's modified score.

    With ``free`` only the first ``free`` coefficients move and the rest stay at ``start``
    (B x k; 0 without it), the penalty still that of the full design: the restricted fits of
    the penalised likelihood-ratio test and of the profile intervals. Returns coefficients
    (B x k) and penalised log-likelihoods (B); rows that are singular or do not converge are
    NaN.
    """
    n_fits, k = w.shape[0], x.shape[1]
    m = k if free is None else free
    beta = np.zeros((n_fits, k)) if start is None else np.array(start, dtype=np.float64)
    active = np.ones(n_fits, dtype=bool)
    singular = np.zeros(n_fits, dtype=bool)
    level = _penalised_loglik(x, y, w, beta)
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
        step *= np.minimum(1.0, _MAX_STEP / np.maximum(np.abs(step).max(axis=1,
                                                                   keepdims=True), 1e-300))
        step, level[idx] = _halved(x, y, w[idx], beta[idx], step, score[:, :m], level[idx])
        big = np.abs(step).max(axis=1, keepdims=True)
        beta[idx[:, None], np.arange(m)] += step
        singular[idx[bad]] = True
        active[idx[(big[:, 0] < tol) | bad]] = False
        if not active.any():
            break
    beta[active | singular] = np.nan
    return beta, _penalised_loglik(x, y, w, beta)


def _halved(x: Array, y: Array, w: Array, beta: Array, step: Array, score: Array,
            before: Array) -> tuple[Array, Array]:
    """``step`` (on the first coefficients), halved up to `_HALVINGS` times until it raises the
    penalised log-likelihood ``before`` it by at least a quarter of what its slope
    (``score``, the likelihood's gradient there) promises (Armijo's rule), and the
    likelihood after it. Fisher scoring on Firth's score leaves out the penalty's curvature:
    far from the optimum (a profile's held value) a full step can overshoot to the mirror
    point and swing about the optimum for hundreds of steps. A step that no halving makes good
    is 0: the fit is then as good as the arithmetic allows."""
    m = step.shape[1]
    for _ in range(_HALVINGS + 1):
        moved = beta.copy()
        moved[:, :m] += step
        after = _penalised_loglik(x, y, w, moved)
        promised = 0.25 * (step * score).sum(axis=1)
        worse = ~(after >= before + promised - 1e-12 * np.abs(before))
        if not worse.any():
            return step, after
        step[worse] /= 2
    step[worse] = 0.0
    return step, np.where(worse, before, after)


def _penalised_loglik(x: Array, y: Array, w: Array, beta: Array) -> Array:
    """Log-likelihood plus half the log-determinant of the Fisher information (Firth)."""
    eta = np.nan_to_num(beta) @ x.T
    loglik = (w * (-y * np.logaddexp(0, -eta) - (1 - y) * np.logaddexp(0, eta))).sum(axis=1)
    p = _sigmoid(eta)
    k = x.shape[1]
    _, logdet = np.linalg.slogdet(((w * p * (1 - p)) @ _outer(x)).reshape(-1, k, k))
    return np.where(np.isfinite(beta).all(axis=1), loglik + 0.5 * logdet, np.nan)


def _profile(x: Array, y: Array, w: Array, beta: Array, pl: float, j: int,
             confidence: float) -> tuple[float, float]:
    """The profile penalised-likelihood interval of coefficient ``j``: on each side of its
    estimate the value where twice the drop of the penalised log-likelihood, the other terms
    refitted with ``j`` held there, reaches the χ²(1) quantile. Bracketed by doubling steps
    from the estimate (1/4 to 2, then up to 64 on the logit scale: beyond, a win rate prints
    as 0 or 1), then found by the Illinois method on the signed root of the drop, which is
    nearly linear in the held value, each fit started from the last. NaN where no step
    reaches it."""
    k = x.shape[1]
    moved = x[:, [i for i in range(k) if i != j] + [j]]  # held term last: `_firth`'s free
    crit = math.sqrt(float(sps.chi2.ppf(confidence, df=1)))
    rest = np.delete(beta, j)

    def excess(values: Array, guess: Array) -> tuple[Array, Array]:
        """sqrt(2 x the drop) - its critical value at each held value (NaN: no fit), and the
        other terms fitted there, each fit started from ``guess`` (the estimate's where that
        fit failed)."""
        guess = np.where(np.isfinite(guess), guess, rest)
        fit, found = _firth(moved, y, np.repeat(w[None, :], values.size, axis=0), free=k - 1,
                            start=np.column_stack([guess, values]), tol=1e-6)
        return np.sqrt(np.maximum(2 * (pl - found), 0.0)) - crit, fit[:, :-1]

    est, sides = float(beta[j]), np.array([-1.0, 1.0])
    inner, g_in = np.full(2, est), np.full(2, -crit)
    free_in = np.tile(rest, (2, 1))
    outer, g_out, free_out = np.full(2, math.nan), np.full(2, math.nan), free_in.copy()
    for steps in (2.0 ** np.arange(-2, 2), *([2.0 ** i] for i in range(2, 7))):
        for side in np.flatnonzero(np.isnan(outer)):  # not yet bracketed
            tried = est + sides[side] * np.asarray(steps)
            g, free = excess(tried, np.repeat(free_in[side][None, :], tried.size, axis=0))
            over = np.flatnonzero(g >= 0)  # a fit that fails (NaN) is not over
            below = np.flatnonzero(g[: over[0] if over.size else g.size] < 0)
            if below.size:
                i = below[-1]
                inner[side], g_in[side], free_in[side] = tried[i], g[i], free[i]
            if over.size:
                i = over[0]
                outer[side], g_out[side], free_out[side] = tried[i], g[i], free[i]
    if np.isnan(outer).any():
        return math.nan, math.nan
    found, last = inner, np.zeros(2, dtype=bool)
    for step in range(_ROOT_STEPS):
        mid = (inner * g_out - outer * g_in) / (g_out - g_in)  # false position
        mid = np.where(np.isfinite(mid), mid, (inner + outer) / 2)  # after a failed fit
        g, free = excess(mid, np.where((np.abs(g_in) < np.abs(g_out))[:, None], free_in,
                                       free_out))
        found = mid
        if np.all((np.abs(g) < 1e-4) | (np.abs(outer - inner) < 1e-9)):
            break
        hit = g >= 0  # a failed fit is not over: the bound errs outward
        # Illinois: an end kept twice running has its value halved, so that it moves next
        again = (hit == last) & (step > 0)
        g_in = np.where(hit, np.where(again, g_in / 2, g_in), g)
        g_out = np.where(hit, g, np.where(again, g_out / 2, g_out))
        free_in = np.where(hit[:, None], free_in, free)
        free_out = np.where(hit[:, None], free, free_out)
        inner, outer, last = np.where(hit, inner, mid), np.where(hit, mid, outer), hit
    return float(found[0]), float(found[1])


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
    return f" ({level_of(iv.confidence)} CI {iv.low:{spec}} to {iv.high:{spec}})"


def _coefficient(iv: Interval) -> str:
    return with_ci(iv.estimate, iv.low, iv.high, iv.confidence, signed=True)
