"""The metrics of next-token option records (*Fairness Dynamics During Training*), as plain
functions over records: the unit metrics of WinoBias, and of any probe asked ``next_token``
that declares none of its own.

Records carry, per item, ``option_logprobs`` (full-vocabulary log-softmax at each option's
token, options in the probe's canonical order), ``answer`` (index of the correct option),
``answer_label``, ``target_rank`` and the item's groups (``split``, ``kind``, ``stereotype``…).

- Average Rank (AR): mean ``target_rank`` per correct answer.
- Accuracy: argmax over the options equals the answer.
- JSD by Parts (Appendix B): with P the softmax over the option scores, P_ideal the one-hot
  answer and M = (P + P_ideal) / 2, the part of option i on prompt j is
  ``(D(P_ideal(i), M(i)) + D(P(i), M(i))) / 2`` with ``D(a, b) = a·ln(a/b)`` and 0·ln 0 = 0;
  JSD-P_i over a subset W is the mean of the parts over W. The parts of a prompt sum to its
  Jensen-Shannon divergence (natural log) from the one-hot answer.
- Stereotype Accuracy (Appendix C.2, after Biderman et al.): on pro-stereotypical prompts that
  ask for the referenced occupation's gender, the share where the stereotypical gender is more
  probable than the other gender. 0.5 is unbiased; 0 and 1 are most biased.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from biasscope.core.columns import categorical

#: The gendered options, whose gaps `dynamics_metrics` adds when a probe offers both.
GENDERS = ("male", "female")
#: A correct option's JSD-P lies in [0, ½ ln 2] (natural log; 0 when the model puts all its
#: mass on the answer, ½ ln 2 when it puts none), so a gap between two groups' means lies in
#: [−½ ln 2, ½ ln 2]. Appendix B of the dynamics source; tests/dynamics/test_metrics.py
#: checks both ends.
MAX_GAP = math.log(2) / 2


def option_logprob_matrix(records: pd.DataFrame) -> np.ndarray:
    """(items, options) array of full-vocabulary option log-probs."""
    if records.empty:
        return np.zeros((0, 0))
    rows = records["option_logprobs"].tolist()
    if len({len(row) for row in rows}) == 1:  # the usual case: one flat copy, then a view
        return np.asarray(np.concatenate(rows), dtype=np.float64).reshape(len(rows), -1)
    return np.asarray(np.stack(rows), dtype=np.float64)


def option_probs(records: pd.DataFrame) -> np.ndarray:
    """P(x)_y: softmax over the option scores (equal to renormalised option probabilities)."""
    return _softmax(option_logprob_matrix(records))


def _softmax(lp: np.ndarray) -> np.ndarray:
    """Row-wise softmax of option log-probs: each row on its own, so a subset's rows equal
    the rows of the whole (metrics slice one matrix instead of rebuilding it per subset)."""
    if lp.size == 0:
        return lp
    shifted = lp - lp.max(axis=1, keepdims=True)
    p = np.exp(shifted)
    return np.asarray(p / p.sum(axis=1, keepdims=True))


def _d_to_mid(a: np.ndarray, other: np.ndarray) -> np.ndarray:
    """D(a, M) = a·ln(a/M) with M = (a + other)/2, elementwise, 0·ln 0 = 0.

    Written as a·ln(2a/(a + other)) so that subnormal probabilities cannot underflow M to 0.
    """
    out = np.zeros_like(a, dtype=np.float64)
    nz = a > 0
    out[nz] = a[nz] * np.log(2 * a[nz] / (a[nz] + other[nz]))
    return out


def jsd_parts(probs: np.ndarray, answers: Sequence[int] | np.ndarray) -> np.ndarray:
    """Per prompt and option, that option's part of the JS divergence from the one-hot answer."""
    probs = np.asarray(probs, dtype=np.float64)
    ideal = np.zeros_like(probs)
    ideal[np.arange(len(probs)), np.asarray(answers, dtype=np.int64)] = 1.0
    return np.asarray(0.5 * (_d_to_mid(ideal, probs) + _d_to_mid(probs, ideal)))


def record_jsd_parts(records: pd.DataFrame) -> np.ndarray:
    return jsd_parts(option_probs(records), records["answer"].to_numpy())


@dataclass(frozen=True)
class OptionScores:
    """One records frame's option log-probs and what metrics derive from them, each computed
    once: a report reduces each unit's records twice (the analysis' values and the
    breakdowns'), and each rebuilt them (the matrix three times per unit)."""

    logprobs: np.ndarray  # `option_logprob_matrix`
    answers: np.ndarray

    @classmethod
    def of(cls, records: pd.DataFrame) -> OptionScores:
        return cls(option_logprob_matrix(records), records["answer"].to_numpy(dtype=np.int64))

    @functools.cached_property
    def probs(self) -> np.ndarray:
        """`option_probs`."""
        return _softmax(self.logprobs)

    @functools.cached_property
    def parts(self) -> np.ndarray:
        """`record_jsd_parts`."""
        return jsd_parts(self.probs, self.answers)

    @functools.cached_property
    def correct(self) -> np.ndarray:
        """`correct`."""
        return np.asarray(self.logprobs.argmax(axis=1) == self.answers)


def jsd_by_parts(records: pd.DataFrame, options: Sequence[str]) -> dict[str, float]:
    """JSD-P of each option over the given subset of prompts (empty subset: NaN)."""
    if records.empty:
        return {o: float("nan") for o in options}
    means = record_jsd_parts(records).mean(axis=0)
    return {o: float(v) for o, v in zip(options, means)}


def _by_label(records: pd.DataFrame, labels: Iterable[str]) -> dict[str, np.ndarray]:
    """Each label's records (``answer_label``), as a mask; all False for a label not there."""
    found = categorical(records["answer_label"])
    codes = found.codes
    where = {str(label): k for k, label in enumerate(found.categories)}
    return {label: codes == where.get(label, -2) for label in labels}


def _mean(values: np.ndarray) -> float:
    """The mean of the finite values (NaN for none), as a pandas group mean skips NaN: the
    same number, as values here are whole (ranks, hits), so every sum is exact."""
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else float("nan")


def average_rank(records: pd.DataFrame, labels: Iterable[str]) -> dict[str, float]:
    """Mean rank of the correct option's token per correct answer (lower is better)."""
    ranks = records["target_rank"].to_numpy(dtype=np.float64, na_value=np.nan)
    return {label: _mean(ranks[mask]) for label, mask in _by_label(records, labels).items()}


def correct(records: pd.DataFrame) -> np.ndarray:
    return np.asarray(option_logprob_matrix(records).argmax(axis=1) == records["answer"].to_numpy())


def accuracy(records: pd.DataFrame, labels: Iterable[str],
             hits: np.ndarray | None = None) -> dict[str, float]:
    """Accuracy overall (``all``) and per correct answer. ``hits``: the records' `correct`,
    if already computed."""
    won = np.asarray(correct(records) if hits is None else hits, dtype=np.float64)
    out = {"all": _mean(won)}
    out.update({label: _mean(won[mask]) for label, mask in _by_label(records, labels).items()})
    return out


def stereotype_accuracy(records: pd.DataFrame, options: Sequence[str],
                        lp: np.ndarray | None = None) -> float:
    """Share of pro-stereotypical referenced prompts where the stereotypical gender wins.
    ``lp``: the records' `option_logprob_matrix`, if already built."""
    chosen = ((records["split"] == "pro") & (records["kind"] == "referenced")).to_numpy()
    if not chosen.any():
        return float("nan")
    lp = (option_logprob_matrix(records) if lp is None else lp)[chosen]
    male, female = options.index("male"), options.index("female")
    stereo_male = (records["stereotype"] == "male").to_numpy()[chosen]
    stereo_lp = np.where(stereo_male, lp[:, male], lp[:, female])
    other_lp = np.where(stereo_male, lp[:, female], lp[:, male])
    return float((stereo_lp > other_lp).mean())


def dynamics_metrics(records: pd.DataFrame) -> dict[str, float]:
    """Every headline metric of one unit (one checkpoint, probe and seed), as a flat dict.

    Keys: ``average_rank/<answer>``, ``accuracy/all``, ``accuracy/<answer>``,
    ``jsdp/<subset>/<option>`` for subsets ``all``, ``answer=<label>``, ``split=pro|anti``;
    ``jsdp_correct/<answer>`` (the correct option's JSD-P on prompts with that answer);
    ``jsdp_gap`` (male minus female of those); ``jsdp_not_specified/<gender>`` (gendered
    options on prompts whose answer is ``not specified``); ``stereotype_accuracy``.
    """
    options = tuple(records["options"].iloc[0]) if len(records) else ()
    out: dict[str, float] = {}
    out.update({f"average_rank/{k}": v for k, v in average_rank(records, options).items()})
    # The option matrix and JSD parts once, sliced per subset: rows do not depend on others.
    scores = OptionScores.of(records)
    out.update({f"accuracy/{k}": v
                for k, v in accuracy(records, options, scores.correct).items()})
    lp = scores.logprobs
    parts = scores.parts if len(records) else np.zeros((0, len(options)))
    subsets: dict[str, np.ndarray] = {"all": np.ones(len(records), dtype=bool)}
    subsets.update({f"answer={o}": mask for o, mask in _by_label(records, options).items()})
    if "split" in records:
        subsets.update({f"split={s}": (records["split"] == s).to_numpy()
                        for s in ("pro", "anti")})
    for name, mask in subsets.items():
        means = parts[mask].mean(axis=0) if mask.any() else np.full(len(options), np.nan)
        for option, value in zip(options, means):
            out[f"jsdp/{name}/{option}"] = float(value)
    for label in options:
        out[f"jsdp_correct/{label}"] = out[f"jsdp/answer={label}/{label}"]
    if set(GENDERS) <= set(options):
        out["jsdp_gap"] = out["jsdp_correct/male"] - out["jsdp_correct/female"]
        if "not specified" in options:
            for g in GENDERS:
                out[f"jsdp_not_specified/{g}"] = out[f"jsdp/answer=not specified/{g}"]
        if {"split", "kind", "stereotype"} <= set(records.columns):
            out["stereotype_accuracy"] = stereotype_accuracy(records, options, lp)
    return out
