"""Two runs' headline measures compared checkpoint by checkpoint: the difference (A − B) with
its interval, the TOST verdict within a margin, and the smallest difference the comparison
could have detected.

Checkpoints are matched by (model, step); when the runs share none and each has exactly one
(the usual "original against quantised" case, where the labels differ), those two are compared;
checkpoints only one run has are named in the notes. Runs are compared on the wordings both
asked, each item averaged over them, and on the seeds both asked (`biasscope.compare.design`).
Items are paired by their key where both runs saw the same items; items only one run saw are
left out of a paired comparison and counted. Runs with too few items in common (fewer than
half of the smaller run's, or fewer than two in a group) are compared unpaired, which the
result says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from biasscope.compare import design
from biasscope.compare.measures import MEASURES, Values, comparable, why_not
from biasscope.core.equivalence import (
    Equivalence,
    contrast_equivalence,
    jackknife_equivalence,
    minimum_items,
    paired_binary_equivalence,
    sentence,
)
from biasscope.core.errors import BiasscopeError
from biasscope.core.power import minimum_detectable_effect

Checkpoint = tuple[str, "int | None"]


@dataclass(frozen=True)
class Comparison:
    """One measure of one probe at one pair of checkpoints."""

    probe: str
    measure: str
    words: str
    a: str
    b: str
    estimate_a: float
    estimate_b: float
    result: Equivalence
    only_a: int
    only_b: int
    mde: float
    sentence: str
    wordings: int = 1  # the wordings both runs asked, each item averaged over them

    def as_dict(self) -> dict[str, Any]:
        return {"probe": self.probe, "measure": self.measure, "words": self.words,
                "a": self.a, "b": self.b, "estimate_a": self.estimate_a,
                "estimate_b": self.estimate_b, **self.result.as_dict(),
                "only_a": self.only_a, "only_b": self.only_b,
                "minimum_detectable_difference": self.mde, "wordings": self.wordings,
                "sentence": self.sentence}


def margin_for(measure: str, margins: Mapping[str, float] | float | None) -> float:
    """The margin asked for (one number for all, or per measure), else the default; refused
    above the measure's largest meaningful margin (JSD-P: the largest gap, ½ ln 2)."""
    known = MEASURES[measure]
    if isinstance(margins, Mapping):
        value = float(margins.get(measure, known.margin))
    else:
        value = known.margin if margins is None else float(margins)
    one = "" if isinstance(margins, Mapping) else (
        "; or give each measure its own (--margin MEASURE=NUMBER, repeatable)")
    return check_margin(measure, value, one)


def check_margin(measure: str, value: float, hint: str = "") -> float:
    """``value``, or a one-line error naming ``--margin`` where it is not above 0 and at most
    the measure's largest meaningful margin (``hint``: what else the command takes)."""
    top = MEASURES[measure].max_margin
    if not 0 < value <= top:
        raise BiasscopeError(f"--margin {value:g} for {measure}: give a number above 0 and at "
                             f"most {top:.3g} (the measure's largest range){hint}")
    return value


def fewest_items(values: Values, margin: float, alpha: float) -> int:
    """The fewest items per group from which `compare_values` could show ``values``' measure
    equivalent within ±``margin`` (fewer are ``too few items`` whatever their values): the
    floor `biasscope.core.equivalence` applies, where one item moves a sample by its weight
    times the measure's range, paired or not. ``biasscope power`` plans no fewer."""
    weights = [1.0] if values.statistic is not None else list(values.weights.values())
    return measure_floor(values.measure, margin, alpha, weights)


def measure_floor(measure: str, margin: float, alpha: float,
                  weights: Sequence[float] = (1.0,)) -> int:
    """`fewest_items` of ``measure`` from its range alone: every measure weighs each group's
    mean by ±1, so the default weight is each one's (``biasscope power --sd`` has no items)."""
    low, high = MEASURES[measure].bounds
    return max(minimum_items(margin, alpha, abs(w) * (high - low)) for w in weights)


def _paired(a: Values, b: Values) -> dict[str, pd.Index] | None:
    """The common item keys per group, or None when the runs share too few to pair."""
    common = {g: a.groups[g].index.intersection(b.groups[g].index) for g in a.groups}
    for g, keys in common.items():
        smaller = min(len(a.groups[g]), len(b.groups[g]))
        if len(keys) < 2 or len(keys) < smaller / 2:
            return None
    return common


def compare_values(a: Values, b: Values, margin: float, alpha: float = 0.05
                   ) -> tuple[Equivalence, int, int]:
    """TOST of A − B, paired on common item keys where possible; with the items only A and only
    B had that a paired comparison left out. Paired yes/no items (a flip) get Tango's score
    test; other means Welch's with pseudo-observations at the measure's bounds; ratios the
    jackknife over their clusters (`biasscope.core.equivalence`)."""
    low, high = MEASURES[a.measure].bounds
    common = _paired(a, b)
    if common is not None:
        only_a = sum(len(a.groups[g]) - len(k) for g, k in common.items())
        only_b = sum(len(b.groups[g]) - len(k) for g, k in common.items())
        if a.statistic is None:
            pairs = [(a.groups[g][k].to_numpy(), b.groups[g][k].to_numpy())
                     for g, k in common.items()]
            if (low, high) == (0.0, 1.0) and len(pairs) == 1 and all(
                    np.isin(v, (0.0, 1.0)).all() for v in pairs[0]):
                return paired_binary_equivalence(*pairs[0], margin, alpha), only_a, only_b
            spread = high - low
            return (contrast_equivalence([x - y for x, y in pairs], list(a.weights.values()),
                                         margin, alpha, True, [(-spread, spread)] * len(pairs)),
                    only_a, only_b)
        keys = next(iter(common.values()))
        xs = (next(iter(a.groups.values()))[keys].to_numpy(),
              next(iter(b.groups.values()))[keys].to_numpy())
        return (jackknife_equivalence(xs, _difference(a, b), [a.clusters_of(keys)], margin,
                                      alpha, True, (low, high)), only_a, only_b)
    if a.statistic is None:
        samples = [s.to_numpy() for s in (*a.groups.values(), *b.groups.values())]
        weights = [*a.weights.values(), *(-w for w in b.weights.values())]
        return (contrast_equivalence(samples, weights, margin, alpha, False,
                                     [(low, high)] * len(samples)), 0, 0)
    sa, sb = (next(iter(v.groups.values())) for v in (a, b))
    return (jackknife_equivalence((sa.to_numpy(), sb.to_numpy()), _difference(a, b),
                                  [a.clusters_of(sa.index), b.clusters_of(sb.index)], margin,
                                  alpha, False, (low, high)), 0, 0)


def _difference(a: Values, b: Values) -> Any:
    first, second = a.statistic, b.statistic
    assert first is not None and second is not None

    def diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(first(x, axis=axis) - second(y, axis=axis))
    return diff


def detectable(result: Equivalence, power: float = 0.8) -> float:
    """The smallest difference this comparison finds with probability ``power`` (two-sided at
    its α)."""
    return minimum_detectable_effect(result.se, result.df, result.alpha, power)


def checkpoints(records: pd.DataFrame) -> dict[Checkpoint, pd.DataFrame]:
    """The records of each (model, step); a missing step is None."""
    if records.empty:
        return {}
    steps = records["step"] if "step" in records else pd.Series(None, index=records.index)
    keys = [(str(m), None if pd.isna(s) else int(s)) for m, s in zip(records["model"], steps,
                                                                      strict=True)]
    index = pd.Series(keys, index=records.index)
    return {k: records[index.map(lambda x, k=k: x == k)] for k in dict.fromkeys(keys)}


def label(checkpoint: Checkpoint) -> str:
    model, step = checkpoint
    return model if step is None else f"{model}@{step}"


def match(a: list[Checkpoint], b: list[Checkpoint]) -> list[tuple[Checkpoint, Checkpoint]]:
    """Checkpoint pairs: those with the same (model, step), else the one of each run."""
    same = [k for k in a if k in b]
    if same:
        return [(k, k) for k in same]
    if len(a) == 1 and len(b) == 1:
        return [(a[0], b[0])]
    raise BiasscopeError(f"the runs share no (model, step) and one has several checkpoints "
                         f"({', '.join(map(label, a))} against {', '.join(map(label, b))}): "
                         "compare runs of one checkpoint each, or with the same labels")


Wordings = Mapping[str, Mapping[str, str]]  # probe -> wording label -> what the wording is


def compare_runs(a: pd.DataFrame, b: pd.DataFrame,
                 margins: Mapping[str, float] | float | None = None, alpha: float = 0.05,
                 wordings: tuple[Wordings, Wordings] | None = None
                 ) -> tuple[list[Comparison], list[str]]:
    """Every headline measure of every probe both record sets hold, compared A − B on the
    design both share (`biasscope.compare.design`), and notes on what was not compared.
    ``wordings``: per run, per probe, its wordings as run.json records them (without it,
    wordings are known by their labels)."""
    out, notes = [], []
    in_a, in_b = set(a.get("probe", ())), set(b.get("probe", ()))
    for probe in sorted(in_a ^ in_b):
        notes.append(f"{probe}: not compared: only run {'A' if probe in in_a else 'B'} has it.")
    for probe in sorted(in_a & in_b):
        if (why := why_not(probe)) is not None:
            notes.append(f"{probe}: not compared: {why}.")
    for probe in [p for p in comparable() if p in in_a & in_b]:
        sig_a, sig_b = ((w.get(probe, {}) for w in wordings) if wordings else ({}, {}))
        ra, rb, note, common = design.shared(a[a["probe"] == probe], b[b["probe"] == probe],
                                             sig_a, sig_b)
        if not common:
            notes.append(f"{probe}: not compared: {note}.")
            continue
        if note:
            notes.append(f"{probe}: {note}.")
        ca, cb = checkpoints(ra), checkpoints(rb)
        if (gone := design.missing(list(ca), list(cb), label)) is not None:
            notes.append(f"{probe}: {gone}.")
        for ka, kb in match(list(ca), list(cb)):
            sa, sb, seeds = design.same_seeds(ca[ka], cb[kb])
            if seeds is not None:
                notes.append(f"{probe} {label(ka)} − {label(kb)}: "
                             f"{'not compared: ' if sa.empty else ''}{seeds}.")
            if not sa.empty:
                said = "; ".join(n for n in (note, seeds) if n) or None
                found, none = _compared(probe, ka, kb, sa, sb, margins, alpha, common, said)
                out += found
                notes += none
    return out, notes


def _compared(probe: str, ka: Checkpoint, kb: Checkpoint, ra: pd.DataFrame, rb: pd.DataFrame,
              margins: Mapping[str, float] | float | None, alpha: float, wordings: int,
              note: str | None) -> tuple[list[Comparison], list[str]]:
    """The measures both checkpoints have items for, compared; a note for each other one
    (the demo's WinoBias once had no pro/anti pairs: a verdict on n = 0 is none)."""
    facet = comparable()[probe]
    va = {v.measure: v for v in facet.values(ra) if v.has_items()}
    vb = {v.measure: v for v in facet.values(rb) if v.has_items()}
    out, notes = [], []
    for m in facet.measures:
        if m.name not in va or m.name not in vb:
            whose = (f"no {m.items} in either run" if m.name not in va and m.name not in vb
                     else f"run {'B' if m.name in va else 'A'} has no {m.items}")
            notes.append(f"{probe} {m.words}, {label(ka)} − {label(kb)}: not compared: "
                         f"{whose}.")
    for name in [m for m in va if m in vb]:
        margin = margin_for(name, margins)
        result, only_a, only_b = compare_values(va[name], vb[name], margin, alpha)
        words = MEASURES[name].words
        clusters = va[name].clusters
        text = sentence(f"{probe} {words}, {label(ka)} − {label(kb)}", result,
                        clusters="clusters" if clusters is None else str(clusters.name))
        a, b = va[name], vb[name]
        if only_a or only_b:
            text += (f"; left out of the pairs: {only_a} items only A has, {only_b} only B "
                     "has")
            # A and B over the pairs A − B is of: over each run's own items they were 0.100
            # and -0.250 beside A − B = +0.65 (a real run's unread answers left out)
            if (pairs := _paired(a, b)) is not None:
                a, b = a.on(pairs), b.on(pairs)
        if note:
            text += f"; {note}"
        out.append(Comparison(probe, name, words, label(ka), label(kb), a.estimate(),
                              b.estimate(), result, only_a, only_b, detectable(result),
                              text, wordings))
    return out, notes


def compare_records(a: pd.DataFrame, b: pd.DataFrame,
                    margins: Mapping[str, float] | float | None = None, alpha: float = 0.05
                    ) -> list[Comparison]:
    """Every headline measure of every probe both record sets hold, compared A − B
    (`compare_runs` without its notes)."""
    return compare_runs(a, b, margins, alpha)[0]
