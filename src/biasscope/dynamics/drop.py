"""``biasscope drop``: take checkpoints out of a dynamics run, so that a wrong revision or a
broken checkpoint swept into it costs one call, not the whole run scored again.

Under the run's lock, the checkpoints' units (with their checksums, and any copy set aside as
damaged or stale) move to ``dropped/<time>/`` in the run, laid out as the run is, beside their
run.json entries, their steps' imported performance values and the summary and report as they
were; no reader of the run looks there. Their run.json entries go, run.json's ``dropped`` says
what went where (its record of a performance file still names the file whole), and
summary.json and report.html are written again from what is left: a file stating a conclusion
over the run never outlives a checkpoint it rests on. A later sweep that lists one again
scores it afresh (its units are keyed as before, and gone), its performance value from the file
given again, or, without it, back from the dropped folder where the checkpoint has the weights
it was dropped with (`restore_values`; a note says what to give where it has others).
"""

from __future__ import annotations

import datetime as dt
import shutil
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import IN_MEMORY
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.analysis.config import stored_options
from biasscope.dynamics.scoring.fingerprints import recorded as weights_of
from biasscope.dynamics.summary import write as reporting
from biasscope.store.directory import CHECKSUMS, RECORDS, RunStore
from biasscope.store.files import write_json
from biasscope.store.locks import run_lock
from biasscope.store.run_json import OWN_FILES, RUN_JSON, kind_of
from biasscope.store.units import Unit

#: The run's folder that dropped checkpoints' files go to (never read as the run's).
FOLDER = "dropped"
_SHOWN = 12  # checkpoints a refusal lists before "and N more"


class MissingPerformanceWarning(UserWarning):
    """A checkpoint listed again after `biasscope drop` has no performance value at its step."""


@dataclass(frozen=True)
class DropResult:
    store: RunStore
    #: The checkpoints taken out, as run.json named them (``model@revision``).
    dropped: list[str]
    #: Where their files went: ``RUN/dropped/<time>`` (a remote run's URL there).
    folder: str
    report: Path


def name_of(entry: Mapping[str, Any]) -> str:
    """A run.json checkpoint as a user names it: ``model@revision`` (``@main`` for none)."""
    return f"{entry.get('model')}@{entry.get('revision') or 'main'}"


def drop(run: str | Path, checkpoints: Sequence[str], data_dir: str | None = None
         ) -> DropResult:
    """Take ``checkpoints`` (``model@revision`` as run.json names them, or their identity)
    out of the dynamics run ``run`` and write its summary and report again without them.

    Refused in one line, with nothing moved: a checkpoint the run does not list (the line
    lists those it does), one scored live (its weights were in memory: it could never be
    scored again), every checkpoint of the run, or all of those with records; a run of
    another kind. ``data_dir``: as `biasscope report`'s, for the occupation statistics.
    """
    wanted = list(dict.fromkeys(str(c).strip() for c in checkpoints))
    if not wanted or not all(wanted):
        raise BiasscopeError("give the checkpoints to drop, as model@revision")
    store = RunStore(run)
    store.read_json(RUN_JSON)  # no run there: said before the lock makes a folder
    with run_lock(store):
        store.pull(RUN_JSON)
        recorded = store.read_json(RUN_JSON)
        if (kind := kind_of(recorded)) != "dynamics":
            raise BiasscopeError(f"{store.run_json} is a run of kind {kind!r}: only a "
                                 "dynamics run's checkpoints can be dropped")
        entries = [e for e in recorded.get("checkpoints", []) if isinstance(e, dict)]
        chosen = _chosen(store, entries, wanted)
        files = [f for entry in chosen for f in _files(store, recorded, entry)]
        left = set(store.unit_files()) - set(files)
        if len(chosen) == len(entries) or not left:
            raise BiasscopeError(
                f"{', '.join(map(name_of, chosen))}: "
                + ("that is every checkpoint of " if len(chosen) == len(entries) else
                   "the other checkpoints have no records yet in ")
                + f"{store.root}, and a run without records has nothing to report; move the "
                "run's folder away instead (or score the others first)")
        options = stored_options(store)  # summary.json's, before it is written again
        performance.settle(store)  # a series a killed sweep staged, before its steps move
        kept = [e for e in recorded["checkpoints"] if not any(e is c for c in chosen)]
        values, left_values = _values(store, chosen, kept)  # a bad performance.json: said now
        folder = _folder(store)
        _keep(store, folder / "checkpoints.json", {"dropped": chosen})
        if values:  # the dropped steps' performance, laid out as the run's
            _keep(store, folder / performance.FILE, {"series": values})
        for name in OWN_FILES:  # what the run said before, kept beside what it rested on
            if (store.root / name).is_file():
                shutil.copyfile(store.root / name, folder / name)
                store.publish(folder / name)
        for path in files:  # before run.json: a kill between leaves them listed, unscored
            store.move_file(path, folder / path.relative_to(store.root))
        event: dict[str, Any] = {"folder": folder.relative_to(store.root).as_posix(),
                                 "checkpoints": [name_of(e) for e in chosen]}
        if values:  # run.json's record of the file still names it whole: say what left
            event["performance"] = {m: sorted(map(int, v["values"])) for m, v in values.items()}
        events = recorded.get(performance.DROPPED)
        _keep(store, store.run_json, {
            **recorded, "updated": _now(), "checkpoints": kept,
            performance.DROPPED: [*(events if isinstance(events, list) else []), event]})
        if values:  # after run.json: `performance.load` leaves its dropped steps out meanwhile
            _keep(store, store.root / performance.FILE, left_values)
        report = _rewrite(store, options, data_dir, chosen, folder)
    where = (f"{store.remote}/{folder.relative_to(store.root).as_posix()}" if store.remote
             else str(folder))
    return DropResult(store, [name_of(e) for e in chosen], where, report)


def _chosen(store: RunStore, entries: list[dict[str, Any]], wanted: list[str]
            ) -> list[dict[str, Any]]:
    """run.json's entries of the ``wanted`` checkpoints, each refused in one line where the run
    lists none by that name (the line lists those it does) or it was scored live."""
    chosen: list[dict[str, Any]] = []
    for name in wanted:
        found = [e for e in entries if name in (name_of(e), str(e.get("identity")))]
        if not found:
            names = [name_of(e) for e in entries]
            shown = ", ".join(names[:_SHOWN]) + (f" and {len(names) - _SHOWN} more"
                                                 if len(names) > _SHOWN else "")
            raise BiasscopeError(f"checkpoint {name!r}: {store.run_json} lists no such "
                                 f"checkpoint; give one as model@revision of those it lists: "
                                 f"{shown or 'none'}")
        if found[0].get("source") == IN_MEMORY:
            raise BiasscopeError(
                f"checkpoint {name}: a step scored live, from weights in memory that are gone, "
                "so it could never be scored again: it stays in the run (start the live run "
                "anew with another out to leave it out)")
        chosen.extend(e for e in found if not any(e is c for c in chosen))
    return chosen


def _files(store: RunStore, run: Mapping[str, Any], entry: Mapping[str, Any]) -> list[Path]:
    """Every file of the checkpoint's units: each (probe, seed) the run lists, keyed by its
    identity or by name and revision as a run made before identities keyed it; the unit, its
    checksum, and any copy set aside (``.corrupt-<n>``, ``.stale-<n>``)."""
    probes = run.get("settings", {}).get("probes", {})
    seeds = sorted({int(s) for s in run.get("seeds", [])} | {0})
    identity = entry.get("identity")
    keys = {Unit(str(entry["model"]), entry.get("revision"), probe, seed, entry.get("step"),
                 checkpoint).key
            for probe in probes for seed in seeds
            for checkpoint in ({None, str(identity)} if identity else {None})}
    found: list[Path] = []
    for key in sorted(keys):
        found += sorted(store.records_dir.glob(f"{key}.parquet*"))
        found += [p for p in [store.checksums_dir / f"{key}.parquet.sha256"] if p.is_file()]
    return found


def _values(store: RunStore, chosen: list[dict[str, Any]], kept: list[dict[str, Any]]
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The performance.json entries of the dropped checkpoints' steps (per model: its source
    and those steps' values), and performance.json without them. A step another checkpoint
    of the model still holds keeps its value."""
    held = {(e.get("model"), e.get("step")) for e in kept}
    gone = {(str(e.get("model")), e["step"]) for e in chosen
            if isinstance(e.get("step"), int) and (e.get("model"), e["step"]) not in held}
    store.pull(performance.FILE)
    if not gone or not (store.root / performance.FILE).is_file():
        return {}, {}
    data = store.read_json(performance.FILE)
    series = data.get("series")
    if not isinstance(series, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("values"), dict) for v in series.values()):
        raise BiasscopeError(f"{store.root / performance.FILE}: field series: not a series of "
                             "step values per model; put back the file the run wrote")
    moved: dict[str, Any] = {}
    left: dict[str, Any] = {}
    for model, entry in series.items():
        out = {k: v for k, v in entry["values"].items() if (model, _step(k)) in gone}
        if out:
            moved[model] = {**entry, "values": out}
        left[model] = {**entry, "values": {k: v for k, v in entry["values"].items()
                                           if k not in out}}
    return moved, {**data, "series": left}


def _step(key: str) -> int | None:
    return int(key) if key.lstrip("-").isdigit() else None


def _folder(store: RunStore) -> Path:
    """A new ``dropped/<UTC time>`` folder of the run (``-2``... where one is there)."""
    base = store.root / FOLDER / dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = base.with_name(f"{base.name}-{n}")
    for sub in (RECORDS, CHECKSUMS):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return folder


def _keep(store: RunStore, path: Path, data: Mapping[str, Any]) -> None:
    write_json(path, data)
    store.publish(path)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _rewrite(store: RunStore, options: Any, data_dir: str | None,
             chosen: list[dict[str, Any]], folder: Path) -> Path:
    """The run's summary and report again, from what is left. Where the analysis fails, those
    it did not write again leave the run (onto their copies in the dropped ``folder``: a
    remote run's too) rather than speak for the dropped checkpoints, and the line says how to
    write them."""
    try:
        # looked up as it is called: a sweep imports this module for `restore_values`
        report = reporting.write_dynamics_report(store, options=options, data_dir=data_dir)
    except BiasscopeError as exc:
        for name in OWN_FILES:
            path, kept = store.root / name, folder / name
            if path.is_file() and kept.is_file() and path.read_bytes() == kept.read_bytes():
                store.move_file(path, kept)
        raise BiasscopeError(
            f"dropped {', '.join(map(name_of, chosen))} from {store.root}, but its summary and "
            f"report could not be written again ({exc}); put that right and run `biasscope "
            f"report {store.remote or store.root}`") from None
    store.publish(store.summary_json)
    store.publish(report)
    return report


def restore_values(store: RunStore) -> None:
    """The performance value of each step `biasscope drop` took out of performance.json whose
    checkpoint the run lists again and performance.json still lacks (the sweep that listed it
    gave no series): back from its dropped folder where the checkpoint listed has the weights
    the dropped one had (its fingerprint, or its hub commit), the value measured on them. Where
    it has others, or the value is not there, a note says the step has none and what to give.
    Under the run's lock: a value another call saves meanwhile is neither lost nor doubled."""
    with run_lock(store):
        _restore_values(store)


def _restore_values(store: RunStore) -> None:
    store.pull(RUN_JSON)
    run = store.read_json(RUN_JSON)
    listed = {(e.get("model"), e.get("step")): e for e in run.get("checkpoints", [])
              if isinstance(e, dict)}
    events = run.get(performance.DROPPED)
    latest: dict[tuple[str, int], Mapping[str, Any]] = {}  # the last drop of each step
    for event in events if isinstance(events, list) else ():
        steps = event.get("performance") if isinstance(event, dict) else None
        for model, gone in (steps.items() if isinstance(steps, dict) else ()):
            latest.update({(model, s): event for s in gone if (model, s) in listed})
    held = _held_values(store)
    for (model, step), event in sorted(latest.items()):
        if step in held.get(model, {}):
            continue  # given again (the file copied whole), or restored already
        found = _dropped_value(store, event, model, step)
        if found is not None and _same_weights(found[0], listed[model, step]):
            performance.add(store, model, step, found[1], found[2])
            continue
        why = ("other weights than those it was dropped with" if found is not None
               else "no value in its dropped folder")
        warnings.warn(
            f"{model} step {step}: listed again after `biasscope drop`, with {why}, so it has "
            "no performance value; give the model's series again (--performance-csv or "
            "--lm-eval-results) for one", MissingPerformanceWarning, stacklevel=2)


def _held_values(store: RunStore) -> dict[str, set[int]]:
    """Per model, the steps performance.json holds a value of."""
    store.pull(performance.FILE)
    if not (store.root / performance.FILE).is_file():
        return {}
    series = store.read_json(performance.FILE).get("series")
    return {str(m): {int(k) for k in e["values"]} for m, e in
            (series.items() if isinstance(series, dict) else ())
            if isinstance(e, dict) and isinstance(e.get("values"), dict)}


def _dropped_value(store: RunStore, event: Mapping[str, Any], model: str, step: int
                   ) -> tuple[Mapping[str, Any], float, str] | None:
    """The dropped checkpoint's run.json entry, its value at ``step`` and the series' source,
    as the drop ``event`` kept them in its folder; None where they are not there."""
    kept, values = (f"{event.get('folder')}/{name}" for name in ("checkpoints.json",
                                                                 performance.FILE))
    try:
        store.pull(kept)
        store.pull(values)
        dropped = store.read_json(kept)["dropped"]
        entry = store.read_json(values)["series"][model]
        value = float(entry["values"][str(step)])
    except (BiasscopeError, AttributeError, KeyError, TypeError, ValueError):
        return None
    found = next((e for e in dropped if isinstance(e, dict) and e.get("model") == model
                  and e.get("step") == step), None) if isinstance(dropped, list) else None
    return None if found is None else (found, value, str(entry.get("source", "performance")))


def _same_weights(dropped: Mapping[str, Any], listed: Mapping[str, Any]) -> bool:
    """Whether two run.json checkpoint entries record the same weights: their fingerprints,
    else their hub commits (neither recorded: not known to be the same)."""
    then, now = weights_of(dict(dropped)), weights_of(dict(listed))
    if then or now:
        return then == now
    return dropped.get("commit") is not None and dropped.get("commit") == listed.get("commit")
