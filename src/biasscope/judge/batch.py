"""Batch judging of a JSONL file into a run directory: ``verdicts.jsonl``, ``summary.json``
(in the audit report's shape) and ``report.html``.

Input lines: ``{"id", "text"}`` for classification (with a label set), or ``{"id", "prompt",
"a", "b"}`` (optionally ``"model_a"``, ``"model_b"``) for pairwise judging.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.core.bootstrap import resampling
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import MAX_TEMPLATE, check_length, given_file, read_jsonl, read_text
from biasscope.core.levels import Levels
from biasscope.judge.agreement import agreement
from biasscope.judge.biases import holm_family, win_rate_sentences, win_rates
from biasscope.judge.core import Call, Judge, Verdict, refuse_reordered, why_none
from biasscope.judge.rankings import ranking_tables
from biasscope.judge.rates import answered, rate
from biasscope.judge.tasks import classify, compare
from biasscope.report.audit import write_audit_report
from biasscope.store.directory import RunStore
from biasscope.store.files import json_line, write_bytes, write_json
from biasscope.store.locks import run_lock
from biasscope.store.run_json import (
    Build,
    check_run,
    model_versions,
    refuse_foreign_folder,
    start_run,
)
from biasscope.store.settings import gain_identity, known_part, merge_settings

VERDICTS = "verdicts.jsonl"
#: An item's text fields and what each holds, for the line that names one of another type.
TEXT_FIELDS = {"text": "the text to classify", "prompt": "the user's message",
               "a": "response a", "b": "response b"}


@dataclass(frozen=True)
class Task:
    """A file's items, either all texts to classify or all pairs to compare."""

    ids: tuple[str, ...]
    texts: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str, str], ...] = ()
    authors: tuple[tuple[str | None, str | None], ...] = ()

    @property
    def pairwise(self) -> bool:
        return bool(self.pairs)


def read_task(path: str | os.PathLike[str]) -> Task:
    """The items of a JSONL file, each line checked where it is read: one line naming the file,
    the line and the field that is wrong (an id used twice, an author that is no string)."""
    ids: list[str] = []
    texts: list[str] = []
    pairs: list[tuple[str, str, str]] = []
    authors: list[tuple[str | None, str | None]] = []
    lines: dict[str, int] = {}
    systems: dict[str, tuple[str, int]] = {}  # a system's name folded -> as first spelt, line
    for number, row in read_jsonl(path):
        where = f"{path}:{number}"
        if not isinstance(row, dict):
            raise BiasscopeError(f"{where}: expected a JSON object")
        item_id = row.get("id", number)
        if isinstance(item_id, bool) or not isinstance(item_id, str | int) or item_id == "":
            raise BiasscopeError(f"{where}: 'id' must be a non-empty string or a whole number, "
                                 f"not {json.dumps(item_id)[:40]}")
        if str(item_id) in lines:
            said = f"id {str(item_id)!r}" if "id" in row else (
                f"no 'id', so its line number is its id, {str(item_id)!r},")
            raise BiasscopeError(f"{where}: {said} already used on line "
                                 f"{lines[str(item_id)]}; give each line a unique 'id'")
        lines[str(item_id)] = number
        ids.append(str(item_id))
        if row.get("text") is not None and any(row.get(k) is not None
                                               for k in ("prompt", "a", "b")):
            # One would be dropped without a word: the pair, or the text.
            raise BiasscopeError(f"{where}: gives both 'text' (classification) and 'prompt', "
                                 "'a', 'b' (pairwise): keep one")
        for key, what in TEXT_FIELDS.items():
            if row.get(key) is not None and not isinstance(row[key], str):
                raise BiasscopeError(f"{where}: {key!r} must be a string ({what}), not "
                                     f"{json.dumps(row[key])[:40]}")
        if isinstance(row.get("text"), str):
            texts.append(row["text"])
        elif all(isinstance(row.get(k), str) for k in ("prompt", "a", "b")):
            pairs.append((row["prompt"], row["a"], row["b"]))
            for side in ("model_a", "model_b"):
                if not isinstance(row.get(side), str | None):
                    raise BiasscopeError(f"{where}: {side!r} must be a string (the model that "
                                         f"wrote response {side[-1]}) or null, not "
                                         f"{json.dumps(row[side])[:40]}")
                _spelt_once(row.get(side), side, number, systems, where)
            authors.append((row.get("model_a"), row.get("model_b")))
        else:
            raise BiasscopeError(f"{where}: needs 'text' (classification) or 'prompt', 'a' and "
                                 "'b' (pairwise)")
    if texts and pairs:
        raise BiasscopeError(f"{path}: mixes texts and pairs; judge them in separate files")
    if not ids:
        raise BiasscopeError(f"{path}: no items")
    return Task(tuple(ids), tuple(texts), tuple(pairs), tuple(authors))


def _spelt_once(name: str | None, side: str, number: int,
                systems: dict[str, tuple[str, int]], where: str) -> None:
    """Refuse a system's name spelt two ways ("GPT-4", "gpt-4 "): the leaderboards and
    self-preference match names exactly, so it would rank as two systems."""
    if name is None:
        return
    first, line = systems.setdefault(name.strip().casefold(), (name, number))
    if first != name:
        raise BiasscopeError(f"{where}: {side!r} {name!r} is spelt {first!r} on line {line}; "
                             "write each system's name the same way on every line")


def read_labels(path: str | os.PathLike[str]) -> dict[str, str]:
    """The label set of a JSON file: name -> description (shown in every question, so
    bounded like a template)."""
    text = read_text(path)
    check_length(text, MAX_TEMPLATE, str(path), 1, "the label set")
    try:
        labels = json.loads(text, object_pairs_hook=lambda pairs: _once(pairs, path))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BiasscopeError(f"{path}: cannot read a label set ({exc}); write a JSON object of "
                             "name: description") from None
    if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise BiasscopeError(f"{path}: write the labels as a JSON object of name: description")
    return labels


def labels_of(flag: str, path: str, what: str) -> dict[str, str]:
    """`read_labels` of the file ``flag`` names, its errors naming the flag; a path that is
    no file says to give ``what`` (`given_file`), not "nofile.json: cannot read"."""
    given_file(flag, path, what)
    try:
        return read_labels(path)
    except BiasscopeError as exc:
        raise BiasscopeError(f"{flag} {exc}") from None


def _once(pairs: list[tuple[str, Any]], path: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON object whose names differ: JSON keeps the last of two equal ones, so a label
    named twice would be judged as one, its first description gone without a word."""
    names = [name for name, _ in pairs]
    if twice := next((name for name in names if names.count(name) > 1), None):
        raise BiasscopeError(f"{path}: label {twice!r} is named twice; give each label once")
    return dict(pairs)


def verdict_row(item_id: str, verdict: Verdict) -> dict[str, Any]:
    return {"id": item_id, "label": verdict.label, "probs": verdict.probs,
            "reason": verdict.reason or None, "by_judge": verdict.by_judge,
            "calls": [{"model": c.model, "order": list(c.order), "key": c.key,
                       "label": c.label, "raw": c.raw, "error": c.error} for c in verdict.calls]}


def judge_task(judge: Judge, task: Task, labels: Mapping[str, str] | None = None
               ) -> list[Verdict]:
    """One verdict per item of ``task``."""
    if task.pairwise:
        return compare(judge, task.pairs, ids=task.ids)
    if labels is None:
        raise BiasscopeError("classification needs a label set (--labels FILE.json)")
    return classify(judge, task.texts, labels, ids=task.ids)


def write_verdicts(path: Path, ids: Sequence[str], verdicts: Sequence[Verdict]) -> None:
    write_bytes(path, "".join(json_line(verdict_row(i, v))
                              for i, v in zip(ids, verdicts)).encode("utf-8"))


def failed(verdict: Verdict) -> bool:
    """Whether a request behind the verdict failed: then it is no answer of the judge, and
    a rerun asks again (the response cache keeps only answers)."""
    return any(c.error for c in verdict.calls)


def stored_verdicts(path: Path) -> dict[str, Verdict]:
    """The verdicts an earlier call wrote to ``verdicts.jsonl``, by item id, those whose
    requests all came back (no other kind: what a run once stored as a failure is asked
    again). Empty when there is no such file."""
    if not path.is_file():
        return {}
    found = {}
    for number, row in read_jsonl(path):
        try:
            calls = tuple(Call(str(c["model"]), tuple(c["order"]), c["key"], c["label"], None,
                               str(c["raw"]), c["error"]) for c in row["calls"])
            verdict = Verdict(row["label"], _probs(row["probs"]), row["reason"] or "", calls,
                              dict(row["by_judge"]))
            item_id = str(row["id"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise BiasscopeError(f"{path}:{number}: not a verdict as biasscope writes it; "
                                 "use another --out") from None
        if not failed(verdict):
            found[item_id] = verdict
    return found


def _probs(stored: dict[str, float | None] | None) -> dict[str, float] | None:
    """A verdict's probabilities as computed: a NaN is stored as null (strict JSON)."""
    if stored is None:
        return None
    return {label: math.nan if p is None else p for label, p in dict(stored).items()}


@dataclass(frozen=True)
class Failures:
    """Requests that failed: ``items`` left without a verdict until a rerun, ``kept`` that
    keep the verdict an earlier call stored."""

    items: int
    requests: int
    of: int
    first_error: str
    kept: int = 0

    def sentence(self, total: int, what: str = "requests") -> str:
        """What failed and what became of the items (``what``: the requests' noun)."""
        parts = [f"{self.items} of {total} items have no verdict yet"] if self.items else []
        if self.kept:
            parts.append(f"{self.kept} keep the verdict an earlier call stored")
        return (f"{self.requests} of {self.of} {what} failed (e.g. {self.first_error}): "
                f"{'; '.join(parts)}; rerun the same command to retry them.")


def write_judged(store: RunStore, judge: Judge, task: Task, verdicts: Sequence[Verdict],
                 ranking: str = "win-rate", levels: Levels | None = None
                 ) -> tuple[dict[str, Any], Path, Failures | None]:
    """Write ``verdicts.jsonl``, ``summary.json`` and the report of a judge run from this
    call's verdicts: an item whose requests failed keeps the verdict an earlier call stored
    (same settings, checked by `start`) or is left out, never stored as an answer. Under the
    run's lock, all computed before the first file is written, at ``levels`` (stored in
    summary.json). The result, the report and the failures (None when every request came
    back)."""
    calls = [c for v in verdicts for c in v.calls]
    errors = [c.error for c in calls if c.error]
    with run_lock(store):
        earlier = stored_verdicts(store.root / VERDICTS) if errors else {}
        kept = [(k, v if not failed(v) else earlier.get(i))
                for k, (i, v) in enumerate(zip(task.ids, verdicts))]
        keep = [(k, v) for k, v in kept if v is not None]
        again = sum(failed(v) and i in earlier for i, v in zip(task.ids, verdicts))
        judged = Task(tuple(task.ids[k] for k, _ in keep),
                      tuple(task.texts[k] for k, _ in keep) if task.texts else (),
                      tuple(task.pairs[k] for k, _ in keep) if task.pairs else (),
                      tuple(task.authors[k] for k, _ in keep) if task.authors else ())
        got = [v for _, v in keep]
        with resampling() as resampled:
            result = batch_result(judge, judged, got, ranking, of=len(task.ids),
                                  levels=levels)
        missing = None
        if errors:
            missing = Failures(len(task.ids) - len(got), len(errors), len(calls), errors[0],
                               again)
            result.update(failed_requests=len(errors), requests=len(calls),
                          failed_items=missing.items)
            result["sentences"].insert(0, missing.sentence(len(task.ids)))
            result["notes"].insert(0, result["sentences"][0])
        store.root.mkdir(parents=True, exist_ok=True)
        write_verdicts(store.root / VERDICTS, judged.ids, got)
        return result, finish(store, "judge", result, levels, resampled.drawn), missing


def check(out: str | os.PathLike[str] | RunStore, kind: str, models: Sequence[str],
          settings: Mapping[str, Any], described: Mapping[str, Any] | None = None,
          known: bool = False) -> RunStore:
    """Before any request: an existing run is checked as `start` checks it (another kind, or
    other ``settings``, refused in one line) without writing, a folder that holds a run's
    files without run.json refused. run.json waits for the results (`start`, as they are
    written): a first call that fails (a 401, a model not served) leaves none behind to
    refuse the corrected command, and a call that stores nothing leaves an existing one as
    it was. A judge run's verdicts.jsonl without run.json is refused too: no judge run
    leaves one. ``known``: ``settings["judges"]`` holds each judge's identity as known
    before it loads (`judges_before_loading`), and each recorded one is compared on those
    keys alone: the same check, in the same words, before a local judge loads; the rest once
    it has."""
    store = out if isinstance(out, RunStore) else RunStore(Path(out))
    if store.run_json.is_file() or store.remote is not None:
        check_run(store, kind, _build(store, models, settings, described, known))
        return store
    refuse_foreign_folder(store)
    if kind == "judge" and (store.root / VERDICTS).exists():
        # run.json is written before verdicts.jsonl: without it, the file is someone else's
        raise BiasscopeError(f"{store.root} holds {VERDICTS} but no run.json: it is no "
                             "biasscope run, and a judge run there would replace it; use "
                             "another --out")
    return store


def start(out: str | os.PathLike[str] | RunStore, kind: str, models: Sequence[str],
          settings: Mapping[str, Any], described: Mapping[str, Any] | None = None
          ) -> RunStore:
    """``run.json`` of a judge run: a folder holding another kind of run is refused first,
    then a rerun whose ``settings`` (what decides the results) differ from those recorded, in
    one line naming the setting, before anything is written. ``described``: what run.json
    says beside them (each judge's spec). ``versions`` are kept from the run's first call."""
    store = out if isinstance(out, RunStore) else RunStore(Path(out))
    start_run(store, kind, _build(store, models, settings, described),
              now=model_versions((settings.get("judges") or {}).values()))
    return store


def _build(store: RunStore, models: Sequence[str], settings: Mapping[str, Any],
           described: Mapping[str, Any] | None, known: bool = False) -> Build:
    """run.json of a judge run from what it recorded: ``settings`` merged over the recorded
    ones (a changed one refused), with ``described``; ``known``: see `check`."""
    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        if previous is not None:
            _same_order(store, previous, list(settings.get("judges") or {}))
        before = None if previous is None else gain_identity(previous.get("settings", {}),
                                                             settings)
        if known and before is not None and isinstance(before.get("judges"), Mapping):
            now = settings.get("judges") or {}
            before = {**before, "judges": {
                name: known_part(entry, now[name]) if name in now else entry
                for name, entry in before["judges"].items()}}
        merged = dict(settings) if before is None else merge_settings(
            store.run_json, before, settings,
            added=("labels",))  # a run made before recorded its label set by SHA-256 only
        return {"model": ", ".join(models), **(described or {}), "settings": merged}

    return build


def _same_order(store: RunStore, previous: Mapping[str, Any], judges: Sequence[str]) -> None:
    """A rerun giving the run's judges in another order, refused (`refuse_reordered`)."""
    had = list((previous.get("settings") or {}).get("judges") or {})
    refuse_reordered(store.run_json, had, judges, "--model")


def write_run(out: str | os.PathLike[str], kind: str, models: Sequence[str],
              settings: Mapping[str, Any], result: Mapping[str, Any]) -> Path:
    """``run.json`` and ``summary.json`` in the audit report's shape, then the report."""
    return finish(start(out, kind, models, settings), kind, result)


def finish(store: RunStore, kind: str, result: Mapping[str, Any],
           levels: Levels | None = None, bootstrapped: bool = True) -> Path:
    """``summary.json`` in the audit report's shape, with the ``levels`` its intervals are
    at (and the sentence saying they are too fine for the resamples, where they are and some
    interval was ``bootstrapped``), then the report."""
    whose = "the judge audit's" if kind == "judge-audit" else "the judge's"
    store.remove_stale_temp_files()  # a killed call's: this one has passed every check
    write_json(store.summary_json, {"probes": {kind: dict(result)}, "analysis": (
        levels or Levels()).stored(whose, bootstrapped)})
    return write_audit_report(store.root)


def batch_result(judge: Judge, task: Task, verdicts: Sequence[Verdict],
                 ranking: str = "win-rate", of: int | None = None,
                 levels: Levels | None = None) -> dict[str, Any]:
    """What a batch of verdicts says, in the audit report's shape: how many are verdicts and
    why the others are not, the label counts, how many each of several judges answered,
    inter-judge agreement and the length-controlled win rate (pairwise). ``of``: the items
    of the file, where some are not in ``task`` (their requests failed), so that the count
    says so. ``notes``: the
    sentences a reader must not miss, those that say something was left out, got no
    verdict or could not be measured (the command prints them; the rest is in the report).
    Every interval at ``levels``' confidence, every bootstrap of its resamples."""
    from collections import Counter

    levels = levels or Levels()
    c, resamples = levels.confidence, levels.n_resamples
    n = len(verdicts)
    if n == 0:  # every item's requests failed (`write_judged` says so)
        return {"items": 0, "headline": {"verdict_rate": rate(0, 0)}, "tables": {},
                "sentences": [], "notes": [], "examples": []}
    reasons = Counter(v.reason for v in verdicts if v.label is None)
    head: dict[str, Any] = {"verdict_rate": rate(n - sum(reasons.values()), n, confidence=c)}
    head.update({f"{reason}_rate": rate(count, n, confidence=c)
                 for reason, count in reasons.items()})
    labels = Counter(str(v.label) for v in verdicts if v.label is not None)
    tables: dict[str, list[dict[str, Any]]] = {
        "labels": [{"label": k, "verdicts": c, "share": c / n} for k, c in labels.items()]}
    waiting = (of or n) - n
    each, short = answered(judge, verdicts, confidence=c)  # several judges: each one's
    head.update(each)
    sentences = [f"{n - sum(reasons.values())} of {n + waiting} items got a verdict"
                 + (f"; no verdict: {why_none(reasons)}" if reasons else "")
                 + (f"; {waiting} not yet ({'its' if waiting == 1 else 'their'} requests "
                    "failed)" if waiting else "")
                 + "".join(f"; judge {name} answered {k} of {total} ({why})"
                           for name, k, total, why in short) + "."]
    notes = sentences[:1] if reasons or waiting or short else []
    if len(judge.models) > 1:
        table = {m.label: [v.by_judge.get(m.label) for v in verdicts] for m in judge.models}
        agreed = agreement(table, c, resamples)
        head["fleiss_kappa"] = agreed.fleiss.as_dict()
        head["krippendorff_alpha"] = {**agreed.alpha.as_dict(), "reading": agreed.reading(),
                                      **{f"p_{k.replace(' ', '_')}": v
                                         for k, v in agreed.thresholds.items()}}
        tables["cohen_kappa"] = [{"judges": f"{a} / {b}", **iv.as_dict()}
                                 for (a, b), iv in agreed.cohen.items()]
        sentences.append(agreed.sentence())
        if not math.isfinite(agreed.alpha.estimate):
            notes.append(sentences[-1])
    if task.pairwise:
        # As judge-audit: each judge's own length test (Holm over them) and the panel's.
        lengths: dict[str, Any] = {}
        fits, panel = win_rates(judge, verdicts, [(len(a), len(b)) for _, a, b in task.pairs],
                                lengths, resamples, confidence=c)
        tests = holm_family(lengths)
        head.update(lengths)
        said = win_rate_sentences(judge, lengths, fits, panel, tests, "the run's")
        sentences += said
        fitted = [lc for *_, lc in fits] + ([panel] if panel is not None else [])
        notes += [s for s, lc in zip(said, fitted) if lc.n == 0 or lc.reason is not None]
        ranked, said = ranking_tables([m.label for m in judge.models], verdicts, task.authors,
                                      ranking, notes=notes, confidence=c,
                                      n_resamples=resamples)
        tables.update(ranked)
        sentences += said
    invalid = [{"item_id": i, "prompt": None, "response": c.raw, "label": None}
               for i, v in zip(task.ids, verdicts) if v.reason == "invalid" for c in v.calls][:5]
    return {"items": n, "headline": head, "tables": tables, "sentences": sentences,
            "notes": notes, "examples": invalid}

