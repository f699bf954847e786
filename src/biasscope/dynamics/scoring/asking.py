"""Probes asked by chat (BBQ, professional bias, Adult) in checkpoint sweeps: option scoring.

Each checkpoint scores every option's full continuation after the item's chat turns (rendered
by the tokenizer's chat template, else as a plain prompt), as ``biasscope audit --scoring
options`` does but with all (item, option) sequences of a unit in length-sorted batches (the
same log-probs up to float rounding, ~1e-6 in float32); the likeliest option is the answer and
the probe's detector reads it. A unit's
records are the audit's (``label``, ``hit``, ``option_probs``, the item's groups; see
``biasscope.probes.base.records``) with the unit's columns (model, revision, step, seed,
checkpoint) and each option's log-prob, so per-step statistics can use the probe's own metrics
on any slice of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from biasscope.backends.base import OptionScore
from biasscope.core.errors import BiasscopeError
from biasscope.core.items import Item
from biasscope.probes.base import Detector, Messages, Response, records
from biasscope.probes.base import option_metrics as option_metrics  # re-exported
from biasscope.store.units import Unit

REQUEST = "options"


@dataclass(frozen=True)
class Asking:
    """How a probe asks its items and reads the answers: each item's chat turns and the
    probe's detector. Plain data, so a unit job that carries it pickles (Ray)."""

    messages: tuple[Messages, ...]
    detector: Detector


def asking_of(probe: Any, items: Sequence[Item]) -> Asking:
    """The chat turns of ``items`` and the probe's detector; a one-line error for a probe that
    cannot be asked by chat."""
    if not callable(getattr(probe, "messages", None)) or getattr(probe, "detector", None) is None:
        raise BiasscopeError(f"probe {probe.name} says it takes {REQUEST!r} requests but has no "
                             "messages() and detector to ask and read them")
    return Asking(tuple(probe.messages(i) for i in items), probe.detector)


def score_options(scorer: Any, items: Sequence[Item], asking: Asking) -> list[OptionScore]:
    """The scorer's option scores (``score_options``), or a one-line error naming it."""
    method = getattr(scorer, "score_options", None)
    if method is None:
        raise BiasscopeError(f"backend {scorer.label} cannot answer {REQUEST!r} requests")
    scores: list[OptionScore] = method(items, asking.messages)
    return scores


def option_frame(unit: Unit, items: Sequence[Item], scores: Sequence[OptionScore],
                 asking: Asking) -> pd.DataFrame:
    """One row per item: the audit's record columns, the unit and the option log-probs."""
    responses = []
    for item, score in zip(items, scores, strict=True):
        top = max(score.option_logprobs)
        weights = [math.exp(v - top) for v in score.option_logprobs]
        probs = {o: w / sum(weights) for o, w in zip(item.options, weights)}
        responses.append(Response(max(probs, key=lambda o: probs[o]), "option_scores", probs))
    frame = records(_Reader(unit.probe, asking.detector), items, responses)
    unit_columns = {"model": unit.model, "revision": unit.revision, "step": unit.step,
                    "seed": unit.seed, "checkpoint": unit.checkpoint}
    for column, value in unit_columns.items():  # the unit's, over any group of that name
        frame[column] = [value] * len(frame)
    frame["options"] = [list(i.options) for i in items]
    frame["answer"] = [i.answer for i in items]
    frame["option_logprobs"] = [list(s.option_logprobs) for s in scores]
    frame["step"] = frame["step"].astype("Int64")
    return frame


@dataclass(frozen=True)
class _Reader:
    name: str
    detector: Detector
