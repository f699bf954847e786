"""Probes the audit scores from log-probabilities instead of asking: whole sentences
(CrowS-Pairs, StereoSet) and next-token readings (Winogender).

A ``continuation`` probe's items are sentences, each scored by its log-likelihood summed over
its tokens after the model's start token; a ``next_token`` probe's items are prompts, each
scored by its options' log-probs at the next token (an option of several tokens by its first
token only with ``--first-token``, as ``biasscope dynamics`` scores it). A local model scores
both as a checkpoint sweep does (``HFScorer.score_continuation_shared`` and
``score_next_token_shared``: the same numbers as ``biasscope dynamics`` gives for the same
weights); a completions server scores them from its echo
(`biasscope.backends.echo.EchoScorer`). The echo gives each option's log-prob but not its rank
over the whole vocabulary, so a server's next-token records hold no ``target_rank``. WinoBias
is refused: its measures are the dynamics analysis (`require_statistics`). The audit unit
holds one record per item in the sweep's record shape, so the probe's own facets give its
numbers:
``step_statistics`` the headline (with CIs, tests and effect sizes, Holm-adjusted with the
probe's other tests in the summary) and ``unit_metrics`` the plain numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from biasscope.audit.multiplicity import ALPHA
from biasscope.core.errors import BiasscopeError
from biasscope.core.items import Item
from biasscope.core.numbers import finite, with_ci
from biasscope.probes import PROBES, Probe, requests_of
from biasscope.probes.facets import Absent
from biasscope.probes.wording_measures import across_wordings

#: The request kinds the audit scores from a model's log-probabilities, and what of the model
#: each reads (for the refusals).
SCORED = {"continuation": "each whole sentence's log-likelihood",
          "next_token": "its options' log-probabilities at the next token"}


def scored_kind(probe: Probe) -> str | None:
    """The request kind the audit scores ``probe`` with, or None where it is asked (a probe
    that takes ``options`` or ``generate`` requests is asked, whatever else it takes)."""
    kinds = requests_of(probe)
    if {"options", "generate"} & set(kinds):
        return None
    return next((k for k in kinds if k in SCORED), None)


def is_scored(probe: Probe) -> bool:
    """Whether the audit scores ``probe`` (sentences or next tokens) rather than asking it."""
    return scored_kind(probe) is not None


def why_not(spec: str, probe: Probe, reason: str) -> BiasscopeError:
    """The one-line refusal of a backend that cannot score ``probe``."""
    what = SCORED[scored_kind(probe) or "continuation"]
    return BiasscopeError(
        f"{spec}: {probe.name} is scored from {what}, which {reason}; use a local model "
        "(--model hf:DIR or a .gguf file) or a completions server that echoes prompt log-probs "
        "(openai-compatible:URL#MODEL)")


def require_statistics(name: str) -> None:
    """Refuse, in one line, a scored probe without step statistics: the audit's headline is a
    probe's own values with their CIs. WinoBias' measures are the dynamics analysis (gap
    tests, emergence; Average Rank, the answer token's rank over the whole vocabulary, which a
    server's echo does not give); LAMBADA and perplexity measure performance, a curve beside
    the bias curves of a sweep. Unknown names pass: loading them says they are unknown."""
    info = PROBES.get(name)
    if info is None or not set(info.requests) & set(SCORED):
        return
    if {"options", "generate"} & set(info.requests):  # asked, not scored
        return
    if not isinstance(stats := info.step_statistics, Absent):
        return
    if "next_token" in info.requests:
        why = (f"{name} has none ({stats.reason}; its Average Rank needs the answer token's "
               "rank over the whole vocabulary, which a server's echo does not give)")
    else:
        why = (f"{name} has none: it measures performance, the curve a sweep draws beside "
               "its bias measures")
    raise BiasscopeError(
        f"probe {name} cannot be audited: the audit reports a scored probe's own values "
        f"with CIs, and {why}; score it with `biasscope dynamics --model DIR --probe {name}`")


class LogprobScorer:
    """Log-probabilities from a local model or a server's echo: ``backend`` has
    ``score_continuation`` and ``score_next_token`` (a local one also their ``_shared``
    forms, which the sweep uses)."""

    def __init__(self, backend: Any, identity: dict[str, str], method: str,
                 first_token: bool = False) -> None:
        self.backend, self.identity, self.method = backend, identity, method
        self.first_token = first_token
        self.label = backend.label

    def settings(self, kinds: Sequence[str]) -> dict[str, Any]:
        """What run.json records of how each request kind in ``kinds`` is scored."""
        return {kind: {"method": self.method, "backend": self.identity,
                       **({"first_token": self.first_token} if kind == "next_token" else {})}
                for kind in kinds}

    def score(self, kind: str, items: Sequence[Item]) -> list[Any]:
        shared = getattr(self.backend, f"score_{kind}_shared", None)
        if shared is not None:
            return list(shared(items, [True] * len(items)))
        if kind == "next_token":
            return list(self.backend.score_next_token(items, self.first_token))
        return list(self.backend.score_continuation(items))


def local(generator: Any, first_token: bool = False) -> LogprobScorer:
    """The model of an ``HFGenerator``, scored as a sweep scores a checkpoint: loaded when
    the first item is scored (a deferred generator's weights load then, not for a call whose
    every unit is stored)."""
    config = dataclasses.replace(generator.config, first_token=first_token)
    return LogprobScorer(_OnFirstUse(generator, config), generator.identity(), "local",
                         first_token)


class _OnFirstUse:
    """An ``HFScorer`` over a generator's model, made when first asked for a method."""

    def __init__(self, generator: Any, config: Any) -> None:
        self.generator, self.config, self.label = generator, config, generator.label
        self.scorer: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or "scorer" not in self.__dict__:
            raise AttributeError(name)
        if self.scorer is None:
            from biasscope.backends.hf import HFScorer

            g = self.generator
            self.scorer = HFScorer(g.ckpt, g.model, g.tokenizer, self.config)
        return getattr(self.scorer, name)


def echo(generator: Any, first_token: bool = False) -> LogprobScorer:
    """A completions server (an ``OpenAIGenerator``), from its echo."""
    from biasscope.backends.echo import EchoScorer

    return LogprobScorer(EchoScorer(generator), generator.identity(), "echo", first_token)


def items_digest(items: Sequence[Item]) -> list[Any]:
    """What is scored of each item, for the run's items hash."""
    return [[i.id, i.prompt, list(i.continuations), i.answer, dict(i.groups)] for i in items]


def _interval(value: Any) -> tuple[Any, Any, Any]:
    return value.get("estimate"), value.get("low"), value.get("high")


def _fields(score: Any) -> dict[str, Any]:
    values = score if isinstance(score, Mapping) else dataclasses.asdict(score)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


def scored_records(model: str, probe: str, items: Sequence[Item], scores: Sequence[Any],
                   source: str) -> pd.DataFrame:
    """One row per item in a sweep's record shape (no checkpoint step): the item's groups
    and its score (a sentence's ``logprob``, ``greedy``, ``tokens``; a prompt's
    ``option_logprobs`` and, locally, ``target_rank``), and how it was scored (``source``:
    local or echo)."""
    rows = [{"model": model, "revision": None, "step": None, "probe": probe, "seed": 0,
             "source": source,
             "item_id": item.id, **dict(item.groups), "options": list(item.options),
             "answer": item.answer, "answer_label": item.options[item.answer],
             **_fields(score)} for item, score in zip(items, scores, strict=True)]
    frame: pd.DataFrame = pd.DataFrame(rows)
    return frame


def summary_entry(probe: str, records: pd.DataFrame, confidence: float = 0.95,
                  n_resamples: int = 2000) -> dict[str, Any]:
    """A scored probe's entry of summary.json: its step statistics as the headline (the
    caller controls their multiplicity), its unit metrics, and a sentence per leading value;
    every interval at ``confidence``, every bootstrap of ``n_resamples``."""
    info = PROBES[probe]
    stats, metrics = info.step_statistics, info.unit_metrics
    wordings = list(dict.fromkeys(records["template"].astype(str))) if (
        "template" in records) else []
    shown = records  # under several wordings: the first's, as an asked probe's headline
    if len(wordings) > 1:
        shown = records[records["template"].astype(str) == wordings[0]]
    values = {} if isinstance(stats, Absent) else stats.values(shown, confidence, n_resamples)
    tables: dict[str, list[dict[str, Any]]] = {}
    headline, said = values, list[str]()
    if not isinstance(stats, Absent):
        headline, tables = _per_group(values, stats.groups, stats.names)
        for name in stats.headline:
            if (value := headline.get(name)) is not None:
                size = f"n = {value.get('n')}"
                shown_ci = with_ci(*_interval(value), confidence, extra=size,
                                   same=stats.same(name, confidence))
                said.append(f"{stats.names.get(name, name)}: {shown_ci}.")
        said += stats.findings(values, ALPHA) if stats.findings else []
    across = across_wordings(probe, records, confidence=confidence,
                             n_resamples=n_resamples) if len(wordings) > 1 else {}
    if len(wordings) > 1 and not isinstance(stats, Absent):
        said[:0] = [r["verdict"] for r in across.values()]  # they lead
        said.append(f"The numbers below are for wording {wordings[0]} (the table 'headline "
                    f"by wording' gives each under all {len(wordings)}); the verdicts above "
                    "pool them.")
        tables = {"headline by wording": _by_wording(records, wordings, stats, confidence,
                                                     n_resamples), **tables}
    if "option_logprobs" in records and "target_rank" not in records:
        said.append("Scored from a server's echo: each option's log-prob at the next token, "
                    "without its rank over the whole vocabulary (no measure here reads it).")
    return {"items": len(records), "request": next(k for k in info.requests if k in SCORED),
            "sources": records["source"].value_counts().to_dict(),
            "detector": None, "no_response": 0, "headline": headline,
            "metrics": {} if isinstance(metrics, Absent) else metrics(shown),
            "tables": tables, "sentences": said, "examples": [],
            **({"wordings": across} if across else {})}


def _by_wording(records: pd.DataFrame, wordings: Sequence[str], stats: Any,
                confidence: float = 0.95, n_resamples: int = 2000) -> list[dict[str, Any]]:
    """A row per headline value (groups left out), a column per wording: its estimate and
    CI under that wording alone."""
    rows: dict[str, dict[str, Any]] = {}
    for wording in wordings:
        values = stats.values(records[records["template"].astype(str) == wording], confidence,
                              n_resamples)
        for name, value in _per_group(values, stats.groups, stats.names)[0].items():
            rows.setdefault(name, {"metric": name})[wording] = (
                with_ci(*_interval(value), confidence, same=stats.same(name, confidence))
                if finite(
                    value.get("estimate")) else "–")
    return list(rows.values())


def _per_group(values: Mapping[str, Any], groups: Sequence[str], names: Mapping[str, str]
               ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The headline without the values given per group (60 occupations are not 60 headline
    numbers, nor 60 more tests in its Holm family), and a table of each such value: a row per
    group."""
    headline = {k: v for k, v in values.items() if k.split(":", 1)[0] not in groups}
    tables = {}
    for prefix in groups:
        rows = [{"group": k.split(":", 1)[1], **v} for k, v in values.items()
                if k.startswith(f"{prefix}:")]
        if rows:
            tables[names.get(prefix, prefix)] = rows
    return headline, tables
