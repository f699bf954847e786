"""When a gap emerges, where it changed most, and which checkpoint to stop at (Appendix D of
*Fairness Dynamics During Training*): the step-level statistics built on ``biasscope.core.stats``.

Claims about the curve's shape (the sharpest change, a change of trend) are tested on the
prompts' values at every checkpoint, resampling prompts with the same draw at every checkpoint
(`biasscope.core.curves`): the curve's errors are correlated from one checkpoint to the next.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from biasscope.core.changepoint import MIN_POINTS, changepoint, rates
from biasscope.core.curves import ItemCurves, max_t
from biasscope.core.intervals import Interval, mean_difference_ci
from biasscope.core.numbers import num, p_is, resampled_ci, setting_percent, with_ci
from biasscope.core.stats import Array
from biasscope.dynamics.analysis.gap_tests import prompt_values
from biasscope.probes.winobias import GENDERS
from biasscope.probes.winobias.values import pair_rows


@dataclass(frozen=True)
class StopRecommendation:
    """Where to stop; gaps are absolute (lower is fairer), changes are % of the final value."""
    step: int
    performance: float
    final_performance: float
    gap: float
    final_gap: float
    performance_change_pct: float
    gap_change_pct: float
    pareto_steps: tuple[int, ...]
    sentence: str
    #: the adjusted p of "|gap| smaller than the final's" for the pick (or, when the final
    #: checkpoint is kept, for the earlier one with the smallest |gap|); None: not tested
    p_adjusted: float | None = None
    candidates: int = 0  # earlier checkpoints within the budget, tested together


@dataclass(frozen=True)
class GapChange:
    """Change of the group gap between two consecutive checkpoints, over the prompts both have;
    ``pairs``: how many consecutive changes it was the largest of (its interval holds for all
    of them at once; 1 for an interval of one pair alone)."""
    step_from: int
    step_to: int
    gap_from: float
    gap_to: float
    change: Interval
    n_prompts: int
    pairs: int = 1


# ---------------------------------------------------------------- emergence

def emergence_step(steps: Sequence[int], p_adjusted: npt.ArrayLike, alpha: float = 0.01,
                   gaps: npt.ArrayLike | None = None, min_gap: float = 0.0) -> int | None:
    """First step from which every later checkpoint is significant (None if the last is not).

    With ``gaps``, a checkpoint also counts only if its gap has the final checkpoint's sign (a
    gap that is significant but flips direction has not yet emerged) and a magnitude of at least
    ``min_gap`` (the smallest gap of interest: with near-identical prompts a deterministic model's
    tiny systematic differences are significant at any size).
    """
    order = np.argsort(np.asarray(steps), kind="stable")
    sig = np.asarray(p_adjusted, dtype=np.float64)[order] < alpha
    if sig.size == 0:
        return None
    if gaps is not None:
        sign = np.sign(np.asarray(gaps, dtype=np.float64)[order])
        magnitude = np.abs(np.asarray(gaps, dtype=np.float64)[order])
        sig &= (sign != 0) & (sign == sign[-1]) & (magnitude >= min_gap)
    if sig.size == 0 or not sig[-1]:
        return None
    misses = np.flatnonzero(~sig)
    return int(np.asarray(steps)[order][misses[-1] + 1 if misses.size else 0])


def sharpest_change(records: pd.DataFrame, value: str = "jsdp_correct",
                    groups: tuple[str, str] = GENDERS, confidence: float = 0.95,
                    n_resamples: int = 2000, seed: int = 0) -> GapChange | None:
    """The largest change of the group gap between consecutive checkpoints of one model, with
    `sharpest_of`'s interval (a bootstrap-t band over all the changes). None with fewer than
    two checkpoints."""
    pv = prompt_values(records[records["answer_label"].isin(groups)], value).dropna(
        subset=["step"])
    if pv["model"].nunique() > 1:
        raise ValueError("sharpest_change takes the records of one model")
    per_step = {step: chunk for step, chunk in pv.groupby("step", sort=True)}
    return sharpest_of(per_step, groups, confidence, n_resamples, seed)


def prompt_matrix(per_step: Mapping[Any, pd.DataFrame]) -> pd.DataFrame:
    """Per prompt (rows: prompt, answer_label) its value at each step (columns, sorted), from
    per-step frames of prompt, answer_label and value; a frame with a ``template`` column (a
    value per wording) is averaged over the wordings of each prompt."""
    frames = []
    for step, frame in per_step.items():
        if "template" in frame:
            frame = frame.groupby(["prompt", "answer_label"], sort=False, observed=True)[
                "value"].mean().reset_index()
        frames.append(frame[["prompt", "answer_label", "value"]].assign(step=step))
    if not frames:
        empty: pd.DataFrame = pd.DataFrame(
            index=pd.MultiIndex.from_arrays([[], []], names=["prompt", "answer_label"]))
        return empty
    both = pd.concat(frames, ignore_index=True)
    wide: pd.DataFrame = both.pivot_table(index=["prompt", "answer_label"], columns="step",
                                          values="value", observed=True, dropna=False)
    ordered: pd.DataFrame = wide.reindex(columns=sorted(wide.columns))
    return ordered


def item_curves(wide: pd.DataFrame, columns: Sequence[Any] | None = None,
                groups: tuple[str, str] = GENDERS) -> ItemCurves:
    """``wide`` (`prompt_matrix`) at ``columns`` (default all) as the contrast of the groups'
    prompts; prompts without a value there are left out. Where the prompts are WinoBias pairs
    (`prompt_pair`: each pair one prompt of each group, asked at the same columns) the curves
    are the pairs' differences (`ItemCurves.paired`): a run draws pairs, and a pair's two
    prompts move against each other, so resampling them apart understated every error."""
    values = wide if columns is None else wide.reindex(columns=list(columns))
    label = values.index.get_level_values("answer_label").to_numpy()
    matrix = values.to_numpy(dtype=np.float64)
    asked = np.isfinite(matrix).any(axis=1)
    rows = pair_rows(values.index.get_level_values("prompt").to_numpy(), label, asked, groups)
    if rows is not None and (np.isfinite(matrix[rows[0]]) == np.isfinite(matrix[rows[1]])).all():
        return ItemCurves.paired(matrix[rows[0]], matrix[rows[1]])
    return ItemCurves.contrast(*(matrix[(label == g) & asked] for g in groups))


def sharpest_of(per_step: Mapping[Any, pd.DataFrame], groups: tuple[str, str] = GENDERS,
                confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
                ) -> GapChange | None:
    """The largest change of the group gap between consecutive checkpoints (``per_step``: per
    step the per-prompt values: prompt, answer_label, value), with a CI that holds although the
    pair was picked for being the largest.

    Each change is over the prompts with values at both checkpoints (so it equals the
    difference of the groups' mean per-prompt changes). The interval is a simultaneous
    bootstrap-t band over all the consecutive changes: prompts are resampled within each group,
    the same draw for every pair, and the band's half-width is the quantile of the largest
    studentised deviation over the pairs times the chosen pair's standard error. An interval
    for the largest change alone would be too narrow: among 19 changes of a flat curve, the
    largest lies outside its own 95% interval most of the time. None with fewer than two
    checkpoints or no pair with prompts of both groups."""
    return sharpest_in(prompt_matrix(per_step), groups, confidence, n_resamples, seed)


def sharpest_in(wide: pd.DataFrame, groups: tuple[str, str] = GENDERS,
                confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
                ) -> GapChange | None:
    """`sharpest_of` from its `prompt_matrix` (a column per step, sorted)."""
    found = [step_change(wide, s0, s1, groups)
             for s0, s1 in itertools.pairwise(sorted(wide.columns))]
    pairs = [c for c in found if c is not None]
    best = functools.reduce(larger_change, pairs, None)
    if best is None:
        return None
    changes = pd.DataFrame({j: wide[c.step_to] - wide[c.step_from]
                            for j, c in enumerate(pairs)})
    items = item_curves(changes, groups=groups)
    test = max_t(items, np.eye(len(pairs)), n_resamples, np.random.default_rng(seed))
    chosen = next(j for j, c in enumerate(pairs) if c is best)
    interval = Interval(best.change, math.nan, math.nan, confidence)
    if test is not None:
        se, q = float(test.se[chosen]), test.quantile(confidence)
        half = 0.0 if se == 0 else q * se
        if math.isfinite(half):
            interval = Interval(best.change, best.change - half, best.change + half, confidence)
    return GapChange(int(best.step_from), int(best.step_to), best.gaps[0], best.gaps[1],
                     interval, sum(x.size for x in best.samples), len(pairs))


@dataclass(frozen=True)
class StepChange:
    """The gap change between two checkpoints, with the per-prompt changes of each group."""
    change: float
    step_from: int
    step_to: int
    samples: tuple[Array, ...]
    gaps: tuple[float, float]


def step_change(wide: pd.DataFrame, s0: Any, s1: Any, groups: tuple[str, str] = GENDERS
                ) -> StepChange | None:
    """Change of the gap from step ``s0`` to ``s1`` of ``wide`` (per-prompt values, indexed
    by prompt and answer_label, a column per step; other steps may be absent): over prompts
    with finite values at both. None when a group has no such prompt."""
    label = wide.index.get_level_values("answer_label").to_numpy()
    v0, v1 = wide[s0].to_numpy(), wide[s1].to_numpy()
    masks = [np.isfinite(v0) & np.isfinite(v1) & (label == g) for g in groups]
    if not all(m.any() for m in masks):
        return None
    change = float((v1 - v0)[masks[0]].mean() - (v1 - v0)[masks[1]].mean())
    gaps = tuple(float(v[masks[0]].mean() - v[masks[1]].mean()) for v in (v0, v1))
    return StepChange(change, s0, s1, tuple((v1 - v0)[m] for m in masks), (gaps[0], gaps[1]))


def larger_change(best: StepChange | None, other: StepChange | None) -> StepChange | None:
    """The larger in size of two changes; the earlier (``best``) on a tie."""
    if other is not None and (best is None or abs(other.change) > abs(best.change)):
        return other
    return best


def change_interval(best: StepChange | None, confidence: float = 0.95) -> GapChange | None:
    """One pair's change with its CI for that pair alone: not adjusted for picking the largest
    of several (the analysis uses `sharpest_of`, whose interval is). The change is the
    difference of the groups' mean per-prompt changes, so its interval is theirs
    (`mean_difference_ci`: Welch's t widened to Hall's; the BCa bootstrap used before covered
    3 and 3 prompts' gaps 66-82% of the time). Unbounded (the change may be of any value's
    gap, ranks too): groups whose changes are each all alike get NaN bounds, no interval."""
    if best is None:
        return None
    samples = best.samples
    interval = mean_difference_ci(samples[0], samples[1], confidence)
    return GapChange(int(best.step_from), int(best.step_to), best.gaps[0], best.gaps[1],
                     interval, sum(x.size for x in samples))


# ---------------------------------------------------------------- early stopping

def pareto_front(gaps: npt.ArrayLike, performance: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Checkpoints no other checkpoint beats on both |gap| (lower) and performance (higher)."""
    g = np.abs(np.asarray(gaps, dtype=np.float64))
    p = np.asarray(performance, dtype=np.float64)
    ok = np.isfinite(g) & np.isfinite(p)
    g, p = np.where(ok, g, np.inf), np.where(ok, p, -np.inf)
    no_worse = (g[:, None] <= g[None, :]) & (p[:, None] >= p[None, :])  # [j, i]: j vs i
    better = (g[:, None] < g[None, :]) | (p[:, None] > p[None, :])
    return np.asarray(ok & ~(no_worse & better & ok[:, None]).any(axis=0))


def _pct(value: float, reference: float) -> float:
    return 100 * (value - reference) / abs(reference) if reference != 0 else math.nan


def _pct_text(change: float, value: float, reference: float) -> str:
    """``+3.1%``; a change relative to 0 has no percentage, so the two values instead."""
    if math.isfinite(change):
        return f"{num(change, signed=True)}%"
    return f"{num(value)} against {num(reference)}"


def eligible_steps(steps: Sequence[int], gaps: npt.ArrayLike, performance: npt.ArrayLike,
                   budget: float = 0.02) -> list[int]:
    """The steps (sorted) with a finite gap whose performance is at most ``budget`` (relative)
    below the last step's: the candidates for a stop, the last one included."""
    order = np.argsort(np.asarray(steps), kind="stable")
    s = np.asarray(steps)[order]
    g = np.asarray(gaps, dtype=np.float64)[order]
    p = np.asarray(performance, dtype=np.float64)[order]
    if s.size == 0:
        return []
    keep = np.isfinite(g) & (p >= p[-1] - budget * abs(p[-1]))
    return [int(x) for x in s[keep]]


def recommend_stop(steps: Sequence[int], gaps: npt.ArrayLike, performance: npt.ArrayLike,
                   budget: float = 0.02, gap_name: str = "male-female JSD-P gap",
                   tested: Mapping[int, float] | None = None, alpha: float = 0.01
                   ) -> StopRecommendation:
    """The checkpoint with the smallest |gap| whose performance is at most ``budget`` (relative)
    below the final checkpoint's and whose |gap| is shown smaller than the final's; ties go to
    higher performance, then the earlier step.

    ``tested``: each earlier candidate's adjusted p-value for "its |gap| is smaller than the
    final's" (`biasscope.dynamics.analysis.stopping.stop_test`), a candidate counting below
    ``alpha``; None: not tested, so the final checkpoint is kept (the smallest of several
    noisy |gap|s lies below the final one most of the time, whatever the truth). The pick is
    always on the Pareto front, and the final checkpoint is always eligible.
    """
    order = np.argsort(np.asarray(steps), kind="stable")
    s = np.asarray(steps)[order]
    g = np.abs(np.asarray(gaps, dtype=np.float64)[order])
    p = np.asarray(performance, dtype=np.float64)[order]
    if s.size == 0 or not (math.isfinite(p[-1]) and math.isfinite(g[-1])):
        raise ValueError("the final checkpoint needs a finite gap and performance")
    within = set(eligible_steps(s.tolist(), g, p, budget))
    shown = {k for k, v in (tested or {}).items() if v < alpha}
    eligible = np.flatnonzero([x in within and (x == s[-1] or x in shown) for x in s])
    pick = eligible[np.lexsort((s[eligible], -p[eligible], g[eligible]))[0]]
    perf_pct, gap_pct = _pct(float(p[pick]), float(p[-1])), _pct(float(g[pick]), float(g[-1]))
    if pick == s.size - 1:
        sentence, p_pick = _kept_final(s, g, within, tested, budget, gap_name)
    else:
        p_pick = (tested or {}).get(int(s[pick]))
        perf_text = _pct_text(perf_pct, float(p[pick]), float(p[-1]))
        gap_text = _pct_text(gap_pct, float(g[pick]), float(g[-1]))
        sentence = (f"stop at step {s[pick]}: performance {perf_text} against the final "
                    f"checkpoint, {gap_name} {gap_text} (shown smaller than the final's: "
                    f"{p_is(p_pick, 'adjusted p')} over the {len(within) - 1} earlier "
                    "checkpoint" + ("s" if len(within) > 2 else "") + " within the budget)")
    front = tuple(int(x) for x in s[pareto_front(g, p)])
    return StopRecommendation(int(s[pick]), float(p[pick]), float(p[-1]), float(g[pick]),
                              float(g[-1]), perf_pct, gap_pct, front, sentence, p_pick,
                              len(within) - 1)


def _kept_final(s: npt.NDArray[Any], g: Array, within: set[int],
                tested: Mapping[int, float] | None, budget: float, gap_name: str
                ) -> tuple[str, float | None]:
    """Why the final checkpoint is kept (nothing within the budget, nothing smaller, nothing
    shown smaller, or nothing tested), and the adjusted p of the smallest earlier |gap|."""
    head = f"train to the end (step {s[-1]}): "
    loss = f"within a {setting_percent(budget)} performance loss"
    smaller = [k for k in range(s.size - 1) if s[k] in within and g[k] < g[-1]]
    if len(within) == 1:
        return head + f"no earlier checkpoint is {loss}", None
    if not smaller:
        return head + f"no earlier checkpoint {loss} has a smaller {gap_name}", None
    best = min(smaller, key=lambda k: (g[k], s[k]))
    point = f"step {s[best]}'s, {num(g[best])} against {num(g[-1])}"
    if tested is None:
        return (head + f"whether an earlier checkpoint {loss} has a smaller {gap_name} is not "
                f"tested (the smallest by point estimates is {point})"), None
    p_best = tested.get(int(s[best]))
    return (head + f"no earlier checkpoint {loss} has a {gap_name} shown smaller than the "
            f"final's (the smallest is {point}: {p_is(p_best, 'adjusted p')} over the "
            f"{len(within) - 1} tested together)"), p_best


# ---------------------------------------------------------------- change of trend

def gap_series(table: pd.DataFrame) -> tuple[list[int], Array]:
    """The steps and gaps of a checkpoint test table (rows without a step left out)."""
    rows = table.dropna(subset=["step"])
    return rows["step"].astype(int).tolist(), np.asarray(rows["gap"].to_numpy(dtype=float))


def trend_change(model: str, steps: Sequence[int], gaps: npt.ArrayLike, alpha: float = 0.01,
                 confidence: float = 0.95, n_resamples: int = 2000,
                 items: ItemCurves | None = None, seed: int = 0
                 ) -> tuple[dict[str, Any], list[str]]:
    """The gap's rates of change per 1000 steps between checkpoints, and the one-changepoint
    test against a single trend on the step and the log-step scale (`core.changepoint`), with
    the sentences a reviewer accepts: a change of trend is claimed only on a scale whose
    bootstrap p is below α/2 (Bonferroni over the two scales).

    ``items``: the gap's prompts, one column per entry of ``steps`` (`item_curves`). The test
    and the rates' intervals resample them; without them nothing is tested (a curve alone
    cannot tell a bend from errors correlated across checkpoints) and the rates have no
    interval. ``seed``: the resampling's."""
    found = {scale: changepoint(steps, gaps, scale, confidence, n_resamples, seed, items)
             for scale in ("step", "log")}
    step_rates = rates(steps, gaps)
    if items is not None:
        _rate_band(step_rates, steps, items, confidence, n_resamples, seed)
    claimed = [c for c in found.values() if c is not None and c.p_value < alpha / 2]
    out: dict[str, Any] = {
        "rates": step_rates, "alpha": alpha,
        "changepoint": {s: (c.as_dict() if c else None) for s, c in found.items()},
        "claimed": claimed[0].scale if claimed else None}
    sentences = [_fastest(model, step_rates, confidence)] if step_rates else []
    tested = [c for c in found.values() if c is not None and math.isfinite(c.p_value)]
    if found["step"] is None:
        sentences.append(f"{model}: a change of trend needs at least {MIN_POINTS} checkpoints; "
                         "none is tested.")
    elif claimed:
        c = claimed[0]
        scale = "training step" if c.scale == "step" else "log step"
        sentences.append(
            f"{model}: the gap changes trend at step {c.step:.0f} ("
            f"{resampled_ci(c.low, c.high, '.0f', confidence, 'put it there')}; against "
            f"{scale}: slope change "
            f"{num(c.slope_change, signed=True)}, {p_is(c.p_value, 'bootstrap p')} < α/2 "
            "against a single trend, prompts resampled).")
    elif not tested:
        why = ("the prompts' values at each checkpoint are needed" if items is None else
               "it needs at least two prompts of each group")
        sentences.append(f"{model}: a change of trend is not tested: {why}, as the curve's "
                         "errors are correlated from one checkpoint to the next.")
    else:
        ps = ", ".join(f"{c.scale} {p_is(c.p_value)}" for c in tested)
        sentences.append(f"{model}: no change of trend in the gap is shown: a single trend "
                         f"is not rejected ({ps}; α/2 = {alpha / 2:g}).")
    return out, sentences


def _rate_band(step_rates: list[dict[str, float]], steps: Sequence[int], items: ItemCurves,
               confidence: float, n_resamples: int, seed: int) -> None:
    """Each rate's interval (``low``, ``high`` per 1000 steps, in place): one simultaneous
    band over all the rates, so that the fastest keeps its coverage although it was picked."""
    if not step_rates:
        return
    column = {int(s): k for k, s in reversed(list(enumerate(steps)))}
    functionals = np.zeros((len(step_rates), items.columns))
    for row, r in zip(functionals, step_rates, strict=True):
        per = 1000 / (r["step_to"] - r["step_from"])
        row[column[int(r["step_from"])]], row[column[int(r["step_to"])]] = -per, per
    test = max_t(items, functionals, n_resamples, np.random.default_rng(seed))
    if test is None:
        return
    q = test.quantile(confidence)
    for r, se in zip(step_rates, test.se, strict=True):
        half = 0.0 if se == 0 else q * float(se)
        r["low"], r["high"] = (r["rate_per_1000"] - half, r["rate_per_1000"] + half) if (
            math.isfinite(half)) else (math.nan, math.nan)


#: A max-t band of no width (`with_ci`'s ``same``): its standard error over prompts is 0.
STILL = "the prompts' changes do not vary, so no interval"


def _fastest(model: str, step_rates: list[dict[str, float]], confidence: float) -> str:
    """The sentence of the fastest rate, with its simultaneous interval when it has one."""
    top = max(step_rates, key=lambda r: abs(r["rate_per_1000"]))
    where = f"{model}: the gap changes fastest between steps {top['step_from']} and " \
            f"{top['step_to']}"
    change = num(top["change"], signed=True)
    if "low" not in top:
        return f"{where}: {num(top['rate_per_1000'], signed=True)} per 1000 steps ({change} " \
               "in all)."
    band = f"one band for all {len(step_rates)} changes"
    rate = with_ci(top["rate_per_1000"], top["low"], top["high"], confidence, True, band,
                   same=STILL)
    return f"{where}: per 1000 steps {rate}, {change} in all."
