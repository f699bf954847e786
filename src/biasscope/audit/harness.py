"""``biasscope audit``: ask a model every item of each audit probe, store one unit per probe,
and summarise with each probe's metrics.

Three ways to get an answer, one record shape:

* ``GenerationResponder``: any ``generate`` backend (API or local) writes text; the probe's
  detector reads it. Requests go through the response cache, so a rerun sends nothing.
* ``OptionScorer``: a local Hugging Face model scores each option as a continuation of the
  chat-rendered prompt; the answer is the most probable option (no generation, no parsing).
* ``StoredResponses``: a JSONL file of ``{"item_id", "response"}`` another tool produced.

Whole-sentence probes (CrowS-Pairs, StereoSet) and next-token ones (Winogender) are not asked
but scored: a `biasscope.audit.scored.LogprobScorer` gives each sentence's log-likelihood or
each option's next-token log-prob, and the probe's own facets summarise the records
(`biasscope.audit.scored`).

A unit (model, probe) is written atomically when every item of its probe was answered; a
rerun skips it. A request that failed (the server said no, retries ran out) is no answer: its
probe's unit is not written, the summary leaves it out and counts it, and a rerun asks again
(answers already paid for come from the response cache). ``run.json`` records what determines
the results (the responder: backend and generation settings, or the responses file's SHA-256;
the limit; each probe's options and the SHA-256 of its items, and of each whole data file
they were read from) and a rerun that differs is refused (``biasscope.store.settings``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from biasscope.audit import multiplicity, scored
from biasscope.backends.base import GenerateParams, GenerateRequest, Generator, plain_chat
from biasscope.core.bootstrap import Resampled, resampling
from biasscope.core.digest import file_sha256
from biasscope.core.errors import BiasscopeError
from biasscope.core.items import Item
from biasscope.core.jsonl import read_jsonl
from biasscope.core.levels import Levels, said_thin, same_levels
from biasscope.data.sources import hashed, refuse_other_data
from biasscope.probes import PROBES, Probe
from biasscope.probes.base import AskedProbe, Response, records
from biasscope.probes.choices import read_choice
from biasscope.report.audit import REPORT, audit_page
from biasscope.store.directory import RunStore
from biasscope.store.files import json_line, write_bytes, write_json
from biasscope.store.locks import run_lock
from biasscope.store.run_json import model_versions, refuse_foreign_folder, start_run
from biasscope.store.settings import gain_identity, merge_settings, sha256_json
from biasscope.store.units import Unit


def prompt_settings(generator: Any, plain: bool) -> dict[str, Any]:
    """How the prompts were read, for run.json: ``prompt: plain`` with ``--plain-prompt``, and
    ``chat_template: False`` where a local model has none, so its chats were read as the same
    plain text (`render_chat`): without it, two runs that differ only in ``--plain-prompt``
    look asked differently though the model read the same tokens. A server's template is not
    known here, so nothing is said of it."""
    tokenizer = getattr(generator, "tokenizer", None)
    bare = tokenizer is not None and not getattr(tokenizer, "chat_template", None)
    return {**({"prompt": "plain"} if plain else {}), **({"chat_template": False} if bare else {})}


class Responder(Protocol):
    label: str

    def respond(self, probe: AskedProbe, items: Sequence[Item]) -> list[Response]: ...


def ask(probe: AskedProbe, item: Item, plain: bool, params: GenerateParams | None = None
        ) -> GenerateRequest:
    """The request for ``item``: its chat, or with ``plain`` the chat as one plain prompt
    (`plain_chat`; a base model's reading, sent to a server's ``/completions``)."""
    messages = probe.messages(item)
    return GenerateRequest(prompt=plain_chat(messages), params=params or GenerateParams(),
                           id=item.id) if plain else GenerateRequest(
        messages=messages, params=params or GenerateParams(), id=item.id)


class GenerationResponder:
    """Text from a ``generate`` backend (wrap it in ``backends.cache.Cached`` to cache).

    With ``params.top_logprobs``, the options' probabilities are also read from the first
    answer token's alternatives (`read_choice`) where the options' first tokens tell them apart.
    """

    def __init__(self, generator: Generator, params: GenerateParams | None = None,
                 plain: bool = False) -> None:
        self.generator, self.label = generator, generator.label
        self.params = params or GenerateParams(max_tokens=64)
        self.plain = plain

    def settings(self) -> dict[str, Any]:
        return {"scoring": "generate", "backend": self.generator.identity(),
                "params": asdict(self.params), **prompt_settings(self.generator, self.plain)}

    def respond(self, probe: AskedProbe, items: Sequence[Item]) -> list[Response]:
        requests = [ask(probe, i, self.plain, self.params) for i in items]
        out = []
        for item, g in zip(items, self.generator.generate(requests)):
            reading = read_choice(g, item.options) if g.ok and g.tokens else None
            probs = reading.probs if reading is not None and reading.source == "logprobs" else None
            out.append(Response(g.text if g.ok else None, "generation", probs, error=g.error,
                                failed=not g.ok))
        return out


class OptionScorer:
    """The most probable option of a local model, from each option's full log-probability."""

    def __init__(self, generator: Any, plain: bool = False) -> None:  # an HFGenerator
        self.generator, self.label, self.plain = generator, generator.label, plain

    def settings(self) -> dict[str, Any]:
        return {"scoring": "options", "backend": self.generator.identity(),
                **prompt_settings(self.generator, self.plain)}

    def respond(self, probe: AskedProbe, items: Sequence[Item]) -> list[Response]:
        requests = [ask(probe, item, self.plain) for item in items]
        check = getattr(self.generator, "check_options", None)
        if check is not None:  # an item too long for the model: refused before any is scored
            check(requests, [item.continuations for item in items])
        out = []
        for item, request in zip(items, requests):
            scores, _ = self.generator.option_logprobs(request, item.continuations)
            logprobs = [scores[c] for c in item.continuations]
            top = max(logprobs)
            weights = [math.exp(v - top) for v in logprobs]
            probs = {o: w / sum(weights) for o, w in zip(item.options, weights)}
            out.append(Response(max(probs, key=lambda o: probs[o]), "option_scores", probs))
        return out


#: What each line of a responses file is, for the errors that say a line is not it.
RESPONSE_LINE = ('{"item_id": ..., "response": ...} (ids from `biasscope items`; response: the '
                 'model\'s text, or null for no answer)')


def response_row(path: Path, number: int, row: Any) -> tuple[str, str | None]:
    """The (item id, response) of one line of a responses file, or one line saying what the
    line lacks."""
    where = f"{path}:{number}"
    if not isinstance(row, dict):
        raise BiasscopeError(f"{where}: expected a JSON object {RESPONSE_LINE}, not "
                             f"{json.dumps(row)[:40]}")
    for field in ("item_id", "response"):
        if field not in row:
            raise BiasscopeError(f"{where}: no {field!r} field; each line is {RESPONSE_LINE}")
    if not isinstance(row["item_id"], str):
        raise BiasscopeError(f"{where}: 'item_id' must be a string (an id from `biasscope "
                             f"items`), not {json.dumps(row['item_id'])[:40]}")
    if not isinstance(row["response"], (str, type(None))):
        raise BiasscopeError(f"{where}: 'response' must be a string (the model's text) or "
                             f"null (no answer), not {json.dumps(row['response'])[:40]}")
    return row["item_id"], row["response"]


class StoredResponses:
    """Responses produced elsewhere: ``{"item_id": ..., "response": ...}`` per line."""

    def __init__(self, path: str | os.PathLike[str], label: str | None = None) -> None:
        self.path = Path(path)
        self.label = label or self.path.stem
        self.by_id: dict[str, str | None] = {}
        lines: dict[str, list[int]] = {}
        for number, row in read_jsonl(self.path):
            item_id, text = response_row(self.path, number, row)
            self.by_id[item_id] = text
            lines.setdefault(item_id, []).append(number)
        if not lines:
            raise BiasscopeError(f"{self.path}: no responses in the file; write one "
                                 f"{RESPONSE_LINE} per line")
        repeated = sorted((n[1], k, n) for k, n in lines.items() if len(n) > 1)
        if repeated:  # named at the first line that repeats an id, each id with its lines
            shown = ", ".join(f"{k} (lines {', '.join(map(str, n[:3]))}"
                              f"{', ...' if len(n) > 3 else ''})" for _, k, n in repeated[:10])
            more = ", ..." if len(repeated) > 10 else ""
            raise BiasscopeError(f"{self.path}:{repeated[0][0]}: item ids appear more than "
                                 f"once: {shown}{more}; keep one response per item id")
        self.sha256 = file_sha256(self.path)

    def settings(self) -> dict[str, Any]:
        return {"scoring": "stored", "responses_sha256": self.sha256}

    def respond(self, probe: AskedProbe, items: Sequence[Item]) -> list[Response]:
        return [Response(self.by_id[i.id], "stored") if i.id in self.by_id else
                Response(None, "stored", error="no response in " + self.path.name)
                for i in items]

    def require_some(self, known: Iterable[str]) -> None:
        """A one-line error when no id of the file is an item the run asks: another probe,
        --limit or --wordings than the items were exported with (nothing is written)."""
        if not set(self.by_id) & set(known):
            raise BiasscopeError(
                f"{self.path}: none of its {len(self.by_id)} item ids is an item this run asks "
                f"(e.g. {next(iter(self.by_id))!r}); answer the items `biasscope items` "
                "exports with the same --probe, --limit and --wordings")

    def unknown_ids(self, known: Iterable[str]) -> list[str]:
        """The file's ids that are no item of ``known``: from the items a run asks, not from
        those answered in this call (a rerun answers none: its units are stored)."""
        return sorted(set(self.by_id) - set(known))


def export_items(probe: Probe, path: str | os.PathLike[str], seed: int = 0,
                 limit: int | None = None) -> int:
    """Every item of ``seed`` (or the ones ``probe`` asks with this ``limit``) with its stable
    id, prompt, chat turns (probes asked by chat), options and the continuations scored, as
    JSONL; the number written."""
    items = probe_items(probe, limit, seed)
    chat = getattr(probe, "messages", None)

    def turns(item: Item) -> dict[str, Any]:
        return {"messages": [{"role": r, "content": c} for r, c in chat(item)]} if chat else {}

    lines = [json_line({"item_id": i.id, "probe": probe.name, "prompt": i.prompt, **turns(i),
                        "options": list(i.options), "continuations": list(i.continuations),
                        "answer": i.options[i.answer], "groups": dict(i.groups)})
             for i in items]  # strict: a NaN group value is null
    # Atomic, and a failed write leaves no temp file and the old file whole.
    write_bytes(Path(path), "".join(lines).encode("utf-8", "backslashreplace"))
    return len(items)


@dataclass(frozen=True)
class Pending:
    """A probe whose unit is not written because requests failed: its answered records (the
    summary uses them, marked incomplete) and how many failed."""

    answered: pd.DataFrame
    failed: int
    asked: int
    first_error: str | None


def items_digest(probe: AskedProbe, items: Sequence[Item]) -> str:
    """SHA-256 of exactly what is asked and scored: a changed or emptied data file, another
    template or another selection changes it."""
    if scored.is_scored(probe):
        return sha256_json(scored.items_digest(items))
    return sha256_json([[i.id, list(probe.messages(i)), list(i.options), list(i.continuations),
                         i.answer, dict(i.groups)] for i in items])


def run_settings(responder: Responder, probes: Sequence[AskedProbe], limit: int | None,
                 items: Mapping[str, Sequence[Item]],
                 scorer: scored.LogprobScorer | None = None,
                 data: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What run.json records, and a rerun must repeat, for these results (``scored``: how
    each request kind of the scored probes is scored, where the run has such probes;
    ``data``: the SHA-256 of each whole data file the probes were read from)."""
    settings = getattr(responder, "settings", None)
    kinds = sorted({k for p in probes if (k := scored.scored_kind(p)) is not None})
    how = {"scored": scorer.settings(kinds)} if scorer is not None and kinds else {}
    return {"kind": "audit", "model": responder.label, "limit": limit,
            "responder": settings() if settings else {"scoring": type(responder).__name__},
            **how, **({"data": dict(data)} if data else {}),
            "probes": {p.name: {**p.config(), "items_sha256": items_digest(p, items[p.name])}
                       for p in probes}}


def run_versions(settings: Mapping[str, Any]) -> dict[str, str]:
    """The versions that can change an audit's records, for run.json ``versions`` (not a
    setting: `store.run_json.kept_versions`): those of the models that answer or score."""
    how = [settings.get("responder"), *(settings.get("scored") or {}).values()]
    return model_versions(h.get("backend") for h in how if isinstance(h, Mapping))


def run_audit(probes: Sequence[AskedProbe], responder: Responder, out: str | os.PathLike[str],
              limit: int | None = None, scorer: scored.LogprobScorer | None = None,
              others: Sequence[AskedProbe] = (), data: Mapping[str, Path] | None = None,
              levels: Levels | None = None) -> RunStore:
    """Answer every probe's items (units already stored are kept) and write summary.json and
    the report rendered from it (``report.html``);
    ``scorer`` scores the probes scored from log-probs (`biasscope.audit.scored`).

    A rerun whose settings differ from run.json's is refused (one line naming the setting).
    Probes with failed requests are left unwritten; summary.json counts the failures
    (``failed_requests`` of the ``requests`` this call made) and a rerun asks them again. A
    new run whose every request failed writes nothing (no run.json to refuse the corrected
    command, no summary.json that would make the folder look foreign) and stops in one line.
    A scored probe's requests are retried as option scoring's are; when retries run
    out the run stops with nothing of that probe written, and a rerun scores it again.

    ``others``: probes of the run this call does not ask; where summary.json has no entry of
    one (unreadable, or lost), the entry is rebuilt from its stored units (nothing is asked).
    ``data``: the data files the probes were read from (`biasscope.data.sources.recording`),
    whose whole SHA-256 run.json records and a rerun must match (`refuse_other_data`).
    ``levels``: the confidence level and resamples of the summary (default 95%, 2000), stored
    in it; where summary.json's entries are at others, every probe is summarised again.
    """
    levels = levels or Levels()
    store = RunStore(Path(out))
    items = {p.name: probe_items(p, limit) for p in probes}
    if scorer is None and (needy := [p.name for p in probes if scored.is_scored(p)]):
        raise ValueError(f"probes {needy} need a log-prob scorer")
    if isinstance(responder, StoredResponses):
        responder.require_some(i.id for p in probes for i in items[p.name])
    read = dict(data or {})
    settings = run_settings(responder, probes, limit, items, scorer, hashed(read))
    now = run_versions(settings)
    started = False

    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        if previous is None:
            return settings
        refuse_other_data(store.root, previous.get("data"), read, settings.get("data", {}))
        return merge_settings(
            store.run_json, recorded(gain_identity(previous, settings), settings), settings,
            grow={"probes": "probe", "scored": "request kind", "data": "data file"})

    def start() -> None:
        """run.json, written with what is first written: a new run that fails before it
        (a model the server does not serve, a server that cannot score) leaves no run.json
        to refuse the corrected command. A run that exists is checked before any request."""
        nonlocal started
        if not started:
            start_run(store, "audit", build, now=now)
            started = True

    if store.run_json.is_file() or store.remote is not None:
        start()
    else:
        refuse_foreign_folder(store)
    pending: dict[str, Pending] = {}
    sent = 0
    for probe in probes:
        unit = Unit(model=responder.label, revision=None, probe=probe.name, seed=0)
        asked = items[probe.name]
        if store.has(unit, rows=len(asked)):  # one record per item: a short file is redone
            continue
        if (kind := scored.scored_kind(probe)) is not None:
            assert scorer is not None
            scores = scorer.score(kind, asked)
            sent += len(asked)
            start()
            store.write_unit(unit, scored.scored_records(
                responder.label, probe.name, asked, scores, scorer.method))
            continue
        responses = responder.respond(probe, asked)
        sent += len(asked)
        failed = [r.failed for r in responses]
        if not all(failed):  # every request failed: nothing of this probe to keep
            start()
        if not any(failed):
            store.write_unit(unit, records(probe, asked, responses))
            continue
        kept = [(i, r) for i, r in zip(asked, responses) if not r.failed]
        pending[probe.name] = Pending(
            records(probe, [i for i, _ in kept], [r for _, r in kept]), sum(failed),
            len(asked), next(r.error for r in responses if r.failed))
    unknown = responder.unknown_ids(i.id for p in probes for i in items[p.name]) if isinstance(
        responder, StoredResponses) else []
    if not started and pending:  # a new run with no answer: no run.json to refuse a fix
        first = next(iter(pending.values())).first_error
        raise BiasscopeError(f"all {sent} requests failed (e.g. {first}); nothing was written "
                             f"to {store.root}: fix what the error says (or wait for the "
                             "server) and run the command again")
    start()  # every unit was stored already: run.json still records this call's probes
    with resampling() as resampled:  # a few items: t intervals, no bootstrap
        summary = summarise(store, probes, unknown, pending, levels)
        store.check_same_folder()
        # Under the run's lock, summary.json and the report rendered from it: another call
        # into this run may be writing its own pair, and each report says what it says.
        with run_lock(store):
            written = {**with_earlier_probes(store, summary, others, levels, resampled),
                       "requests": sent,
                       "analysis": levels.stored("the audit's", resampled.drawn)}
            page = audit_page(store, store.read_json("run.json"), written)
            store.remove_stale_temp_files()  # a killed call's: this one passed every check
            write_json(store.summary_json, written)
            write_bytes(store.root / REPORT, page)
    return store


def with_earlier_probes(store: RunStore, summary: Mapping[str, Any],
                        others: Sequence[AskedProbe] = (), levels: Levels | None = None,
                        resampled: Resampled | None = None) -> dict[str, Any]:
    """``summary`` with the entries of the run's other probes from its summary.json: a call
    that adds or reruns one probe summarises only the probes it asks, and the others' units
    are the files an earlier call summarised (units are never rewritten), so their entries
    still hold. An entry summary.json lacks (unreadable, or lost) is summarised again from the
    stored units of its probe in ``others``; so is every entry where summary.json was
    summarised at other ``levels``. In run.json's probe order. ``resampled`` is noted as
    drawn where an entry is kept from a summary.json whose intervals were bootstrapped (it
    said its level too fine for them)."""
    levels = levels or Levels()
    earlier: Any = {}
    held: Any = None
    if store.summary_json.is_file():
        try:
            held = store.read_json("summary.json")
            earlier = held.get("probes") or {} if same_levels(held, levels) else {}
        except (BiasscopeError, AttributeError):  # unreadable: rebuilt from the units
            earlier = {}
    if not isinstance(earlier, dict):
        earlier = {}
    now = summary["probes"]
    if resampled is not None and said_thin(held) and any(k not in now for k in earlier):
        resampled.drawn = True
    if lost := [p for p in others if p.name not in now and p.name not in earlier]:
        earlier = {**earlier, **summarise(store, lost, levels=levels)["probes"]}
    order = dict.fromkeys([*store.read_json("run.json").get("probes", {}), *now])
    return {**summary, "probes": {name: now[name] if name in now else earlier[name]
                                  for name in order if name in now or name in earlier}}


def recorded(previous: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, Any]:
    """What run.json recorded, with next-token scoring's ``first_token`` turned on where
    ``now`` turns it on: without it an option of several tokens is refused, never written, so
    what the run holds scores the same with it (a run refused for such an option resumes with
    --first-token). Turning it off stays refused: the run may hold first-token scores."""
    out = dict(previous)
    before = (out.get("scored") or {}).get("next_token")
    after = (now.get("scored") or {}).get("next_token")
    if before and after and before.get("first_token") is False and after.get("first_token"):
        out["scored"] = {**out["scored"], "next_token": {**before, "first_token": True}}
    return out


def probe_items(probe: Probe, limit: int | None, seed: int = 0) -> list[Item]:
    """The items a run asks: all, or those ``limit`` keeps: the probe's own selection where it
    has one (``limited``: BBQ samples whole examples stratified by category, Adult keeps whole
    pairs), else the first ``limit``."""
    items = probe.items(seed)
    if not limit:
        return items
    pick = getattr(probe, "limited", None)
    return list(pick(items, limit)) if callable(pick) else items[:limit]


def summarise(store: RunStore, probes: Sequence[AskedProbe], unknown_ids: Sequence[str] = (),
              pending: Mapping[str, Pending] | None = None, levels: Levels | None = None
              ) -> dict[str, Any]:
    """Each probe's metrics from its stored records, plus what could not be answered; every
    interval at ``levels``' confidence, every bootstrap of its resamples.

    A pending probe is summarised from its answered records only: a failed request is not an
    unparsed answer. Its entry says ``incomplete`` and how many requests ``failed``.
    """
    pending, levels = pending or {}, levels or Levels()
    c, n = levels.confidence, levels.n_resamples
    frames: dict[str, list[pd.DataFrame]] = {p.name: [] for p in probes}
    for frame in store.iter_units():
        name = str(frame["probe"].iloc[0]) if len(frame) else ""
        if name in frames and name not in pending:
            frames[name].append(frame)
    for name, held in pending.items():
        frames[name] = [held.answered] if len(held.answered) else []
    out: dict[str, Any] = {
        "probes": {}, "unknown_response_ids": list(unknown_ids),
        "failed_requests": sum(p.failed for p in pending.values()),
        "first_error": next((p.first_error for p in pending.values()), None)}
    for probe in probes:
        waiting = pending.get(probe.name)
        if scored.is_scored(probe):
            if frames[probe.name]:
                read = scored.summary_entry(
                    probe.name, pd.concat(frames[probe.name], ignore_index=True), c, n)
                out["probes"][probe.name] = controlled(read, probe.name, c)
            continue
        entry: dict[str, Any] = {"items": 0, "no_response": 0, "sources": {},
                                 "detector": probe.detector.name, "headline": {},
                                 "tables": {}, "sentences": [], "examples": []}
        if frames[probe.name]:
            recs = pd.concat(frames[probe.name], ignore_index=True)
            entry.update({
                "items": len(recs), "no_response": int(recs["response"].isna().sum()),
                "sources": recs["source"].value_counts().to_dict(),
                **probe.metrics(recs, c, n), "examples": examples(recs)})
            entry = controlled(entry, probe.name, c)
        elif waiting is None:
            continue
        if waiting is not None:
            entry.update(incomplete=True, failed=waiting.failed)
            entry["sentences"] = [
                f"Incomplete: {waiting.failed} of {waiting.asked} requests failed (e.g. "
                f"{waiting.first_error}); these results leave them out. Run the same command "
                "again to retry them.", *entry.get("sentences", [])]
        out["probes"][probe.name] = entry
    return out


def controlled(entry: dict[str, Any], probe: str, confidence: float = 0.95) -> dict[str, Any]:
    """``entry`` with its headline's tests Holm-adjusted as one family and the sentence on
    which are significant after it and what the run could have detected of the others, each
    test named in ``probe``'s words (`ProbeInfo.name_of`), its intervals at ``confidence``."""
    info = PROBES.get(probe)
    entry = {**entry, "headline": multiplicity.control(entry["headline"],
                                                       confidence=confidence)}
    same = (lambda key: info.same_of(key, confidence)) if info else None
    said = multiplicity.holm_sentence(entry["headline"], info.name_of if info else None,
                                      same=same, confidence=confidence)
    if said is not None:
        entry["sentences"] = [*entry.get("sentences", []), said]
    return entry


def examples(recs: pd.DataFrame, n: int = 5) -> list[dict[str, Any]]:
    """A few hits, to read what the detector caught."""
    hits = recs[recs["hit"].fillna(False).astype(bool)]
    return [{"item_id": r.item_id, "prompt": r.prompt, "response": r.response,
             "label": r.label} for r in hits.head(n).itertuples()]


__all__ = ["GenerationResponder", "OptionScorer", "Response", "StoredResponses",
           "export_items", "records", "run_audit", "summarise"]
