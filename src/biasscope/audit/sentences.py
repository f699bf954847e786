"""Whole-sentence probes in the audit (CrowS-Pairs, StereoSet): scored, not asked.

Such a probe takes ``continuation`` requests: each sentence's log-likelihood summed over its
tokens after the model's start token. A local model scores them as a checkpoint sweep does
(``HFScorer.score_continuation_shared``: the same numbers as ``biasscope dynamics`` gives for
the same weights); a completions server scores them from the echo of each sentence
(`biasscope.backends.echo.EchoScorer.score_continuation`). The audit unit holds one record per
sentence in the sweep's record shape, so the probe's own facets give its numbers:
``step_statistics`` the headline (with CIs, tests and effect sizes, Holm-adjusted with the
probe's other tests in the summary) and ``unit_metrics`` the plain numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import pandas as pd

from biasscope.core.errors import BiasscopeError
from biasscope.core.items import Item
from biasscope.core.numbers import with_ci
from biasscope.probes import PROBES, Probe, requests_of
from biasscope.probes.facets import Absent

#: The request kinds the audit scores from a model's log-probabilities.
SCORED = ("continuation",)


def is_scored(probe: Probe) -> bool:
    """Whether the audit scores ``probe`` (whole sentences) rather than asking it."""
    return bool(set(requests_of(probe)) & set(SCORED))


def why_not(spec: str, probe: str, reason: str) -> BiasscopeError:
    """The one-line refusal of a backend that cannot score whole sentences."""
    return BiasscopeError(
        f"{spec}: {probe} is scored from each whole sentence's log-likelihood, which {reason}; "
        "use a local model (--model hf:DIR or a .gguf file) or a completions server that echoes "
        "prompt log-probs (openai-compatible:URL#MODEL)")


class SentenceScorer:
    """Whole-sentence log-likelihoods from a local model or a server's echo: ``backend`` has
    ``score_continuation`` (and a local one ``score_continuation_shared``)."""

    def __init__(self, backend: Any, identity: dict[str, str], method: str) -> None:
        self.backend, self.identity, self.method = backend, identity, method
        self.label = backend.label

    def settings(self) -> dict[str, Any]:
        return {"scoring": "continuation", "method": self.method, "backend": self.identity}

    def score(self, items: Sequence[Item]) -> list[Any]:
        shared = getattr(self.backend, "score_continuation_shared", None)
        if shared is not None:
            return list(shared(items, [True] * len(items)))
        return list(self.backend.score_continuation(items))


def local(generator: Any) -> SentenceScorer:
    """The loaded model of an ``HFGenerator``, scored as a sweep scores a checkpoint."""
    from biasscope.backends.hf import HFScorer

    scorer = HFScorer(generator.ckpt, generator.model, generator.tokenizer, generator.config)
    return SentenceScorer(scorer, generator.identity(), "local")


def echo(generator: Any) -> SentenceScorer:
    """A completions server (an ``OpenAIGenerator``), from the echo of each sentence."""
    from biasscope.backends.echo import EchoScorer

    return SentenceScorer(EchoScorer(generator), generator.identity(), "echo")


def items_digest(items: Sequence[Item]) -> list[Any]:
    """What is scored of each item, for the run's items hash."""
    return [[i.id, i.prompt, list(i.continuations), i.answer, dict(i.groups)] for i in items]


def _interval(value: Any) -> tuple[Any, Any, Any]:
    return value.get("estimate"), value.get("low"), value.get("high")


def sentence_records(model: str, probe: str, items: Sequence[Item], scores: Sequence[Any],
                     source: str) -> pd.DataFrame:
    """One row per sentence in a sweep's record shape (no checkpoint step): the item's groups
    and its score (``logprob``, ``greedy``, ``tokens``), and how it was scored (``source``:
    local or echo)."""
    rows = [{"model": model, "revision": None, "step": None, "probe": probe, "seed": 0,
             "source": source,
             "item_id": item.id, **dict(item.groups), "options": list(item.options),
             "answer": item.answer, "answer_label": item.options[item.answer],
             **asdict(score)} for item, score in zip(items, scores, strict=True)]
    frame: pd.DataFrame = pd.DataFrame(rows)
    return frame


def summary_entry(probe: str, records: pd.DataFrame) -> dict[str, Any]:
    """A scored probe's entry of summary.json: its step statistics as the headline (the
    caller controls their multiplicity), its unit metrics, and a sentence per leading value."""
    info = PROBES[probe]
    stats, metrics = info.step_statistics, info.unit_metrics
    headline = {} if isinstance(stats, Absent) else stats.values(records)
    said = []
    if not isinstance(stats, Absent):
        for name in stats.headline:
            if (value := headline.get(name)) is not None:
                size = f"n = {value.get('n')}"
                said.append(f"{stats.names.get(name, name)}: "
                            f"{with_ci(*_interval(value), extra=size)}.")
    return {"items": len(records), "request": "continuation",
            "sources": records["source"].value_counts().to_dict(),
            "detector": None, "no_response": 0, "headline": headline,
            "metrics": {} if isinstance(metrics, Absent) else metrics(records),
            "tables": {}, "sentences": said, "examples": []}
