"""``biasscope probe``: ask a model every item of each audit probe, store one unit per probe,
and summarise with each probe's metrics.

Three ways to get an answer, one record shape:

* ``GenerationResponder``: any ``generate`` backend (API or local) writes text; the probe's
  detector reads it. Requests go through the response cache, so a rerun sends nothing.
* ``OptionScorer``: a local Hugging Face model scores each option as a continuation of the
  chat-rendered prompt; the answer is the most probable option (no generation, no parsing).
* ``StoredResponses``: a JSONL file of ``{"item_id", "response"}`` another tool produced.

A unit (model, probe) is written atomically when its probe is done; a rerun skips it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from biasscope.audit.base import RECORD_COLUMNS, AuditProbe
from biasscope.backends.base import GenerateParams, GenerateRequest, Generator
from biasscope.errors import BiasscopeError
from biasscope.items import Item
from biasscope.jsonl import read_jsonl
from biasscope.runs.store import RunStore, Unit, write_json


@dataclass(frozen=True)
class Response:
    text: str | None
    source: str  # "generation" | "option_scores" | "stored"
    option_probs: Mapping[str, float] | None = None
    error: str | None = None


class Responder(Protocol):
    label: str

    def respond(self, probe: AuditProbe, items: Sequence[Item]) -> list[Response]: ...


class GenerationResponder:
    """Text from a ``generate`` backend (wrap it in ``backends.cache.Cached`` to cache)."""

    def __init__(self, generator: Generator, params: GenerateParams | None = None) -> None:
        self.generator, self.label = generator, generator.label
        self.params = params or GenerateParams(max_tokens=64)

    def respond(self, probe: AuditProbe, items: Sequence[Item]) -> list[Response]:
        requests = [GenerateRequest(messages=probe.messages(i), params=self.params, id=i.id)
                    for i in items]
        return [Response(g.text if g.ok else None, "generation", error=g.error)
                for g in self.generator.generate(requests)]


class OptionScorer:
    """The most probable option of a local model, from each option's full log-probability."""

    def __init__(self, generator: Any) -> None:  # an HFGenerator
        self.generator, self.label = generator, generator.label

    def respond(self, probe: AuditProbe, items: Sequence[Item]) -> list[Response]:
        out = []
        for item in items:
            request = GenerateRequest(messages=probe.messages(item), id=item.id)
            scores, _ = self.generator.option_logprobs(request, item.continuations)
            logprobs = [scores[c] for c in item.continuations]
            top = max(logprobs)
            weights = [math.exp(v - top) for v in logprobs]
            probs = {o: w / sum(weights) for o, w in zip(item.options, weights)}
            out.append(Response(max(probs, key=lambda o: probs[o]), "option_scores", probs))
        return out


class StoredResponses:
    """Responses produced elsewhere: ``{"item_id": ..., "response": ...}`` per line."""

    def __init__(self, path: str | os.PathLike[str], label: str | None = None) -> None:
        self.path = Path(path)
        self.label = label or self.path.stem
        self.by_id: dict[str, str | None] = {}
        seen: dict[str, int] = {}
        for number, row in read_jsonl(self.path):
            if not isinstance(row, dict) or "item_id" not in row or not isinstance(
                    row.get("response"), (str, type(None))):
                raise BiasscopeError(f"{self.path}:{number}: needs 'item_id' and a 'response' "
                                     "string (or null)")
            item_id = str(row["item_id"])
            seen[item_id] = seen.get(item_id, 0) + 1
            self.by_id[item_id] = row["response"]
        repeated = sorted(k for k, n in seen.items() if n > 1)
        if repeated:
            more = " ..." if len(repeated) > 20 else ""
            raise BiasscopeError(f"{self.path}: item ids appear more than once: "
                                 f"{', '.join(repeated[:20])}{more}")
        self.used: set[str] = set()

    def respond(self, probe: AuditProbe, items: Sequence[Item]) -> list[Response]:
        out = []
        for item in items:
            if item.id in self.by_id:
                self.used.add(item.id)
                out.append(Response(self.by_id[item.id], "stored"))
            else:
                out.append(Response(None, "stored", error="no response in " + self.path.name))
        return out

    def unknown_ids(self) -> list[str]:
        return sorted(set(self.by_id) - self.used)


def records(probe: AuditProbe, items: Sequence[Item], responses: Sequence[Response]
            ) -> pd.DataFrame:
    """One row per item: the response, what the detector read, and the item's groups."""
    rows = []
    for item, response in zip(items, responses):
        if clash := set(item.groups) & set(RECORD_COLUMNS):
            raise ValueError(f"{probe.name}: item groups may not reuse record columns {clash}")
        found = probe.detector.detect(item, response.text) if response.text is not None else None
        rows.append({
            "probe": probe.name, "item_id": item.id, "prompt": item.prompt,
            "answer_label": item.options[item.answer], "response": response.text,
            "source": response.source, "label": found.label if found else None,
            "refused": bool(found.refused) if found else False,
            "hit": found.hit if found else None,
            "option_probs": json.dumps(dict(response.option_probs))
            if response.option_probs is not None else None,
            "error": response.error, **dict(item.groups)})
    frame: pd.DataFrame = pd.DataFrame(rows)
    for column in RECORD_COLUMNS:
        if column not in frame:
            frame[column] = None
    return frame


def export_items(probe: AuditProbe, path: str | os.PathLike[str], seed: int = 0,
                 limit: int | None = None) -> int:
    """Every item (or the ones ``probe`` asks with this ``limit``) with its stable id, chat
    turns and options, as JSONL; the number written."""
    items = probe_items(probe, limit) if limit else probe.items(seed)
    lines = [json.dumps({"item_id": i.id, "probe": probe.name, "prompt": i.prompt,
                         "messages": [{"role": r, "content": c} for r, c in probe.messages(i)],
                         "options": list(i.options), "answer": i.options[i.answer],
                         "groups": dict(i.groups)}, ensure_ascii=False) for i in items]
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(temp, target)
    return len(items)


def run_audit(probes: Sequence[AuditProbe], responder: Responder, out: str | os.PathLike[str],
              limit: int | None = None) -> RunStore:
    """Answer every probe's items (units already stored are kept) and write summary.json."""
    store = RunStore(Path(out))
    store.root.mkdir(parents=True, exist_ok=True)
    settings = {"kind": "audit", "model": responder.label, "limit": limit,
                "probes": {p.name: p.config() for p in probes}}
    if store.run_json.is_file():
        before = store.read_json("run.json")
        if before.get("kind") != "audit" or before.get("model") != responder.label:
            raise BiasscopeError(f"{store.root} holds another run ({before.get('model')}); "
                                 "use another --out")
    write_json(store.run_json, settings)
    for probe in probes:
        unit = Unit(model=responder.label, revision=None, probe=probe.name, seed=0)
        if store.has(unit):
            continue
        items = probe_items(probe, limit)
        store.write_unit(unit, records(probe, items, responder.respond(probe, items)))
    unknown = responder.unknown_ids() if isinstance(responder, StoredResponses) else []
    write_json(store.summary_json, summarise(store, probes, unknown))
    return store


def probe_items(probe: AuditProbe, limit: int | None) -> list[Item]:
    """The items a run asks: all, or those ``limit`` keeps: the probe's own selection where it
    has one (``limited``: BBQ samples whole examples stratified by category, Adult keeps whole
    pairs), else the first ``limit``."""
    items = probe.items(0)
    if not limit:
        return items
    pick = getattr(probe, "limited", None)
    return list(pick(items, limit)) if callable(pick) else items[:limit]


def summarise(store: RunStore, probes: Sequence[AuditProbe], unknown_ids: Sequence[str] = ()
              ) -> dict[str, Any]:
    """Each probe's metrics from its stored records, plus what could not be answered."""
    frames: dict[str, list[pd.DataFrame]] = {p.name: [] for p in probes}
    for frame in store.iter_units():
        name = str(frame["probe"].iloc[0]) if len(frame) else ""
        if name in frames:
            frames[name].append(frame)
    out: dict[str, Any] = {"probes": {}, "unknown_response_ids": list(unknown_ids)}
    for probe in probes:
        if not frames[probe.name]:
            continue
        recs = pd.concat(frames[probe.name], ignore_index=True)
        missing = int(recs["response"].isna().sum())
        out["probes"][probe.name] = {
            "items": len(recs), "no_response": missing,
            "sources": recs["source"].value_counts().to_dict(),
            "detector": probe.detector.name, **probe.metrics(recs),
            "examples": examples(recs)}
    return out


def examples(recs: pd.DataFrame, n: int = 5) -> list[dict[str, Any]]:
    """A few hits, to read what the detector caught."""
    hits = recs[recs["hit"].fillna(False).astype(bool)]
    return [{"item_id": r.item_id, "prompt": r.prompt, "response": r.response,
             "label": r.label} for r in hits.head(n).itertuples()]


__all__ = ["GenerationResponder", "OptionScorer", "Response", "StoredResponses",
           "export_items", "records", "run_audit", "summarise"]
