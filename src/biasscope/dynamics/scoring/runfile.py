"""``run.json`` of a checkpoint sweep: what was run, checked and extended under a lock.

A rerun into the same run directory may add checkpoints, seeds and probes; it may not change
what determines results (a probe's settings, the scoring settings, ``--limit``, the data
files' SHA-256), since one item id would then have two answers. Processes that start together
each read, check and rewrite ``run.json`` while holding ``.run.lock`` (``fcntl`` on the run
folder, or on the local staging copy of a URL run), so none loses another's checkpoints or
seeds and two dtypes never enter one run.

A URL run shared by several machines has no lock object: after writing, each writer reads the
remote ``run.json`` back and merges again until its own checkpoints and seeds are in it, which
closes the window to the few milliseconds of one upload but is not a true compare-and-swap.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from biasscope.backends.checkpoints import (
    IN_MEMORY,
    Checkpoint,
    convert_gguf,
    distinct,
    identity_of,
    unconverted,
)
from biasscope.backends.fingerprints import hub_commit
from biasscope.backends.remote_code import NOT_RUN
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.scoring.fingerprints import (
    Fingerprints,
    fingerprints,
    recorded,
    with_fingerprints,
)
from biasscope.probes import Probe
from biasscope.store.directory import RunStore
from biasscope.store.run_json import start_run, versions
from biasscope.store.settings import merge_settings
from biasscope.store.units import Unit

if TYPE_CHECKING:
    from biasscope.dynamics.scoring.units import SweepConfig

RUN_SCHEMA = "biasscope.run/1"
# Settings a rerun may add entries to (the noun for the message); the entries already
# recorded must stay the same. A data file not recorded before (another probe's, or a run
# from before data files were recorded) is added.
_GROW = {"probes": "probe", "data": "data file"}
#: Settings a run from before they were recorded gains on a rerun (`merge_settings`): an
#: intervention run's base model as it is (its fingerprints, a GGUF file's SHA-256), beside
#: the path it recorded, and the hub commit its branch loaded (known only once it has).
_ADDED = ("intervention.base", "intervention.base.commit")
#: A checkpoint's ``files_fingerprint`` and ``commit`` in words (``compare.recorded``'s).
_FILES = "tokenizer, chat template and config files"
_COMMIT = "hub commit"
_SHA = re.compile(r"[0-9a-f]{40}")  # a hub revision that is a commit
_CODE = "remote code"
#: What the refusal of a changed checkpoint says ``--rescore-changed`` redoes its units with.
_NEW = {"weights": "weights", _FILES: "files", _COMMIT: "commit", _CODE: "code"}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def init_run(store: RunStore, probes: Sequence[Probe], config: SweepConfig,
             kind: str = "dynamics", *, prints: Fingerprints | None = None,
             defer: bool = False) -> list[Checkpoint]:
    """Write or extend run.json; refuse to mix results made with different settings.

    Returns the checkpoints as this run names them (see ``checkpoints.distinct``). ``kind``:
    an intervention run's first call says so; its evaluations, and any sweep, score into it
    as into a dynamics run. ``defer``: a checkpoint new to the run whose fingerprint the cache
    does not know is listed without one, to be hashed while it loads and recorded by `admit`
    before its first unit is written.
    """
    settings = _settings(probes, config)
    # Hashed before the lock: other processes need not wait while gigabytes are read.
    later = _new_to(store, config.checkpoints) if defer else frozenset()
    config = replace(config, checkpoints=with_fingerprints(config.checkpoints, prints, later,
                                                           config.trust_remote_code))
    _refuse_before_converting(store, config)
    # Minutes for a real model: only once it is accepted, and only where run.json takes its
    # copy's provenance (a checkpoint new to the run, or its weights changed); one the run
    # lists as it is converts when the sweep has units of it left to score (`sweep`).
    listed = _listed_as_is(store, config.checkpoints)
    convert_gguf(c for c in config.checkpoints if c.identity not in listed)
    return _write_merged(store, settings, config, kind)


def _settings(probes: Sequence[Probe], config: SweepConfig) -> dict[str, Any]:
    return {"probes": {p.name: _probe_settings(p, config.limit) for p in probes},
            "limit": config.limit, **config.comparable}


def _new_to(store: RunStore, checkpoints: Sequence[Checkpoint]) -> frozenset[str]:
    """Identities of ``checkpoints`` that the run does not list yet (read without the lock:
    one listed meanwhile is compared by `admit`, under it)."""
    store.pull("run.json")
    listed = store.read_json("run.json") if store.run_json.is_file() else {}
    have = {str(e.get("identity")) for e in listed.get("checkpoints", [])}
    return frozenset(c.identity for c in checkpoints if c.identity not in have)


def _listed_as_is(store: RunStore, checkpoints: Sequence[Checkpoint]) -> frozenset[str]:
    """Identities of ``checkpoints`` that run.json lists with the weights they have now (read
    without the lock: `_merge` checks them again under it)."""
    store.pull("run.json")
    listed = store.read_json("run.json") if store.run_json.is_file() else {}
    weights = {str(e.get("identity")): recorded(e) for e in listed.get("checkpoints", [])}
    return frozenset(c.identity for c in checkpoints
                     if c.fingerprint and weights.get(c.identity) == c.fingerprint)


def _write_merged(store: RunStore, settings: dict[str, Any], config: SweepConfig,
                  kind: str = "dynamics") -> list[Checkpoint]:
    """Merge ``config`` into run.json (`start_run`: under the run's lock, checking its kind;
    ``versions`` kept from the run's first call, as an audit's are)."""
    named: list[list[Checkpoint]] = []

    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        merged, checkpoints = _merge(store, previous, settings, config)
        named.append(checkpoints)
        return merged

    start_run(store, kind, build, joins=("intervention",), kept=lambda ours: _kept(store, ours),
              now=versions())
    return named[-1]


def admit(store: RunStore, probes: Sequence[Probe], config: SweepConfig, ckpt: Checkpoint
          ) -> Checkpoint:
    """Record the fingerprints of a checkpoint that `init_run` listed without them (or the
    commit a hub checkpoint loaded), before any unit of it is written, with the checks
    `init_run` makes: the same weights and files as another step of its model are refused (and
    its entry taken out again), weights, files or a commit other than those the run recorded
    for it are refused or, with ``rescore_changed``, redone."""
    if not (ckpt.fingerprint or ckpt.files_fingerprint or ckpt.commit or ckpt.remote_code):
        return ckpt
    _admitted(store, _settings(probes, config), config, ckpt)
    return ckpt


def _admitted(store: RunStore, settings: dict[str, Any], config: SweepConfig,
              ckpt: Checkpoint) -> None:
    try:
        _write_merged(store, settings, replace(config, checkpoints=[ckpt]))
    except BiasscopeError:
        unlist(store, ckpt)
        raise


@dataclass(frozen=True)
class CommitAdmit:
    """`admit` of a Ray worker (plain data, so it pickles): once the worker has loaded a hub
    checkpoint whose revision may move, the commit it resolved to there (the worker's hub
    cache, which the load read), and one whose config the driver's cache did not hold, its
    ``remote_code`` (`Fingerprints.code`, from the worker's cache), recorded and checked before
    its first unit is written, as the local sweep's `admit` does. Its fingerprints were hashed
    up front, by the driver."""

    settings: dict[str, Any]
    config: SweepConfig

    @classmethod
    def of(cls, probes: Sequence[Probe], config: SweepConfig) -> CommitAdmit:
        return cls(_settings(probes, config), replace(config, out="", checkpoints=[]))

    def __call__(self, store: RunStore, ckpt: Checkpoint) -> None:
        found = ckpt
        commit = hub_commit(ckpt.source, ckpt.revision) if ckpt.source != IN_MEMORY else None
        if commit and commit != ckpt.commit:
            found = replace(found, commit=commit)
        if Fingerprints.code_unknown(ckpt):
            with fingerprints(self.config.trust_remote_code) as prints:
                found = prints.coded(found)
        if found.commit != ckpt.commit or found.remote_code != ckpt.remote_code:
            _admitted(store, self.settings, self.config, found)


def unlist(store: RunStore, ckpt: Checkpoint) -> None:
    """Take a checkpoint out of run.json again where it is listed without weights and has no
    unit: a refused one, as if refused before it was listed; a live step never reached."""
    if not store.run_json.is_file():
        return

    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        previous = previous or {}
        entries = previous.get("checkpoints", [])
        kept = [e for e in entries if e.get("identity") != ckpt.identity or recorded(e)
                or any(store.unit_path(u).exists() for u in _units_of(previous, e))]
        return {**previous, "checkpoints": kept}

    start_run(store, "dynamics", build, joins=("intervention",))


def _units_of(run: dict[str, Any], entry: dict[str, Any]) -> list[Unit]:
    probes = list(run.get("settings", {}).get("probes", {}))
    seeds = sorted(set(run.get("seeds", [])) | {0})
    return [Unit(str(entry["model"]), entry.get("revision"), probe, seed, entry.get("step"),
                 str(entry.get("identity"))) for probe in probes for seed in seeds]


def _refuse_before_converting(store: RunStore, config: SweepConfig) -> None:
    """Refuse a GGUF file that is not yet converted, if the run would refuse it (its weights
    changed since the run scored it, or another checkpoint holds them), before its conversion
    rather than after: its fingerprint, the file's SHA-256, is known without converting. The
    run is read without the lock; `_merge` checks again under it."""
    if not any(unconverted(c) for c in config.checkpoints):
        return
    store.pull("run.json")
    previous = store.read_json("run.json") if store.run_json.is_file() else {}
    known = [e for e in previous.get("checkpoints", []) if e.get("identity")]
    checkpoints = distinct(config.checkpoints, known)
    _refuse_twins(known, checkpoints)
    if not config.rescore_changed:  # else `_merge` sets its units aside
        _reweigh(store, known, checkpoints, ([], []), rescore=False)


def _probe_settings(probe: Probe, limit: int | None) -> dict[str, Any]:
    """A probe's config, with how ``--limit`` draws its items where the probe says (so a
    rerun drawn another way is refused; recorded only when limited, so unlimited runs from
    before it was recorded still resume)."""
    entry = dict(probe.config())
    how = getattr(probe, "limit_sample", None)
    if limit and isinstance(how, str):
        entry.setdefault("limit_sample", how)
    return entry


def _kept(store: RunStore, ours: dict[str, Any]) -> bool:
    """Whether the remote run.json still holds what this process wrote into it."""
    if not store.pull("run.json"):
        return False
    now = store.read_json("run.json")
    have = {c.get("identity") for c in now.get("checkpoints", [])}
    return (now.get("settings") == ours["settings"] and set(ours["seeds"]) <= set(now["seeds"])
            and {c["identity"] for c in ours["checkpoints"]} <= have)


def _merge(store: RunStore, previous: dict[str, Any] | None, settings: dict[str, Any],
           config: SweepConfig) -> tuple[dict[str, Any], list[Checkpoint]]:
    if previous is None:
        checkpoints = distinct(config.checkpoints)
        _refuse_twins([], checkpoints, say=True)
        return {"schema": RUN_SCHEMA, "created": _now(), "updated": _now(),
                "settings": settings, "seeds": sorted(config.seeds), "limit": config.limit,
                "checkpoints": [c.as_dict() for c in checkpoints]}, checkpoints
    before = dict(previous.get("settings", {}))
    if "limit" not in before and "limit" in previous:  # runs from before limits were settings
        before["limit"] = previous["limit"]
    _refuse_other_limit(store, before, settings)
    merged = merge_settings(store.run_json, _first_token_added(before, settings), settings,
                            grow=_GROW, added=_ADDED)
    known = _migrate(store, previous)
    checkpoints = distinct(config.checkpoints, known)
    _refuse_twins(known, checkpoints, say=True)
    seeds = set(previous.get("seeds", [])) | {0}  # unseeded probes' units are seed 0's
    known = _reweigh(store, known, checkpoints, (list(merged.get("probes", {})), sorted(seeds)),
                     config.rescore_changed)
    have = {k["identity"] for k in known}
    entries = known + [c.as_dict() for c in checkpoints if c.identity not in have]
    return {**previous, "schema": RUN_SCHEMA, "updated": _now(), "settings": merged,
            "seeds": sorted(set(previous.get("seeds", [])) | set(config.seeds)),
            "limit": config.limit, "checkpoints": entries}, checkpoints


def _first_token_added(before: dict[str, Any], now: Mapping[str, Any]) -> dict[str, Any]:
    """The run's settings with ``first_token`` on where ``now`` turns it on. Without it an
    option of several tokens is refused before any unit of its checkpoint is written, so every
    unit the run holds scores the same with it: a sweep that stored Gemma's units, then stopped
    at a tiny checkpoint's 4-token ' lawyer', resumes with the --first-token its error asked
    for (as an audit does, `audit.harness.recorded`). Turning it off stays refused: the run may
    hold first-token scores."""
    if before.get("first_token") is False and now.get("first_token") is True:
        return {**before, "first_token": True}
    return before


def _refuse_other_limit(store: RunStore, before: dict[str, Any], now: dict[str, Any]) -> None:
    """Another ``--limit`` than the run's, named by its flag: `merge_settings` would name the
    first setting it changes, a probe's ``limit_sample`` when a limit is added."""
    if "limit" not in before or before["limit"] == now["limit"]:
        return
    then, given = before["limit"], now["limit"]
    raise BiasscopeError(
        f"{store.run_json} was made {'without --limit' if then is None else f'with --limit {then}'}"
        f", and this call {'gives none' if given is None else f'gives --limit {given}'}: its "
        f"records are of those items, so give {'no --limit' if then is None else f'--limit {then}'}"
        " again, or use another --out")


def _reweigh(store: RunStore, known: list[dict[str, Any]], checkpoints: Sequence[Checkpoint],
             units: tuple[list[str], list[int]], rescore: bool) -> list[dict[str, Any]]:
    """run.json's entries with the fingerprints (weights' and files', and ``remote_code``) of
    ``checkpoints``: recorded where the run had none (a run from before them: unknown, so
    trusted); one scored with ``--trust-remote-code`` given without it, or the other way round,
    is refused naming the flag (`_refuse_switched`); a
    checkpoint whose weights or files changed since it was scored (a hub one: whose revision
    now resolves to another commit) is refused, or with
    ``rescore`` its units (``units``: the run's probes and seeds) are set aside to be redone
    and its entry becomes the new one."""
    now = {c.identity: c for c in checkpoints
           if c.fingerprint or c.files_fingerprint or c.commit or c.remote_code}
    out = []
    for entry in known:
        ckpt = now.get(str(entry.get("identity")))
        if ckpt is None:
            out.append(entry)
            continue
        pairs = {"weights": (recorded(entry), ckpt.fingerprint),
                 _FILES: (entry.get("files_fingerprint"), ckpt.files_fingerprint),
                 _COMMIT: (entry.get("commit"), ckpt.commit),
                 _CODE: (entry.get("remote_code"), ckpt.remote_code)}
        _refuse_switched(entry, ckpt)
        changed = {k: (a, b) for k, (a, b) in pairs.items() if a and b and a != b}
        if not changed and not any(b and not a for a, b in pairs.values()):
            out.append(entry)
            continue
        if changed:
            if not rescore:
                said = ", ".join(f"{k} {a[:12]} then, {b[:12]} now" for k, (a, b) in
                                 changed.items())
                raise BiasscopeError(
                    f"checkpoint {ckpt.identity} changed since {store.root} scored it ({said}): "
                    "use another --out, or pass --rescore-changed to redo its units with the "
                    f"new {_NEW[next(iter(changed))]}")
            probes, seeds = units
            for probe in probes:
                for seed in seeds:
                    store.retire(Unit(str(entry["model"]), entry.get("revision"), probe, seed,
                                      entry.get("step"), ckpt.identity))
        out.append({**entry, **ckpt.as_dict(), "model": entry["model"]})
    return out


def _refuse_switched(entry: Mapping[str, Any], ckpt: Checkpoint) -> None:
    """A checkpoint the run scored running the code its ``auto_map`` names, given without
    ``--trust-remote-code`` (or the other way round), refused naming the flag: transformers'
    own classes and the model's own code are two models, whose units would mix in one curve
    (``--rescore-changed`` is for a checkpoint whose files changed, not for another flag)."""
    then, now = entry.get("remote_code"), ckpt.remote_code
    if not (then and now) or (then == NOT_RUN) == (now == NOT_RUN):
        return
    if then == NOT_RUN:
        raise BiasscopeError(
            f"checkpoint {ckpt.identity} was scored without --trust-remote-code (transformers' "
            "own classes, not the code its auto_map names): drop --trust-remote-code, or use "
            "another --out")
    raise BiasscopeError(
        f"checkpoint {ckpt.identity} was scored with --trust-remote-code (the code its auto_map "
        "names): give --trust-remote-code again, or use another --out")


def _refuse_twins(known: Sequence[dict[str, Any]], checkpoints: Sequence[Checkpoint],
                  say: bool = False) -> None:
    """One model's curve may not hold the same checkpoint twice: a renamed or copied folder
    would be a new step holding an old step's weights and files, and a hub id at a branch
    (``@main``) and at the commit it resolved to would be scored twice. The same weights beside
    other tokenizer, chat template or config files score other answers: not twins (an entry
    recorded before its files were is matched by its weights). Under two model names the same
    weights are legitimate (two runs branched from one checkpoint share it), so ``say`` notes
    them in one line: their results are the same. Twins a run already holds are left as they
    are. A hub checkpoint of a branch or tag is matched by the commit it loaded (`admit`), or
    before it loads by the one the Hugging Face cache resolves it to; a run's entry of one given
    again, by that rather than the one recorded (its branch may have moved). ``remote_code``
    tells no twins apart: the code a folder runs is among the files ``files_fingerprint``
    covers (a hub id's, in the commit), so under one --trust-remote-code the same weights and
    files run the same code; it differs only where a call switches the flag, and a copy scored
    the other way is still one step twice in its curve."""
    holders: dict[str, list[tuple[str, str, str | None]]] = {}  # weights -> identity, model, files
    given = {c.identity: _weights(c) for c in checkpoints}
    for entry in known:
        weights = recorded(entry) or (None if given.get(str(entry.get("identity"))) else
                                      _hub_commit(entry.get("source"), entry.get("revision"),
                                                  entry.get("commit")))
        if weights is not None:
            holders.setdefault(weights, []).append(
                (str(entry["identity"]), str(entry["model"]), entry.get("files_fingerprint")))
    for ckpt in checkpoints:
        weights = given[ckpt.identity]
        if not weights:
            continue
        files = ckpt.files_fingerprint
        have = [(i, m) for i, m, f in holders.setdefault(weights, [])
                if not (f and files) or f == files]
        same = [i for i, m in have if m == ckpt.model and i != ckpt.identity]
        if same and not ckpt.fingerprint:
            raise BiasscopeError(
                f"checkpoints {same[0]} and {ckpt.identity} are one hub commit "
                f"({weights.rpartition('@')[2][:12]}, model {ckpt.model}): it would be scored "
                "twice in its curves; give only one of them, or use another --out")
        if same:
            raise BiasscopeError(
                f"checkpoints {same[0]} and {ckpt.identity} hold the same weights and "
                f"{_FILES} (model {ckpt.model}): a renamed or copied checkpoint would appear "
                "twice in its curves; give only one of them, or use another --out")
        if say and have and all(i != ckpt.identity for i, _ in have):
            other, model = have[0]
            print(f"biasscope: note: {ckpt.identity} (model {ckpt.model}) holds the same weights "
                  f"as {other} (model {model}): their results will be the same", file=sys.stderr)
        holders[weights].append((ckpt.identity, ckpt.model, files))


def _weights(ckpt: Checkpoint) -> str | None:
    """What tells a checkpoint's weights apart: its fingerprint, else a hub checkpoint's
    `_hub_commit` (a branch's from the cache where it has not loaded yet)."""
    if ckpt.fingerprint or ckpt.source == IN_MEMORY:
        return ckpt.fingerprint
    return _hub_commit(ckpt.source, ckpt.revision,
                       ckpt.commit or hub_commit(ckpt.source, ckpt.revision))


def _hub_commit(source: Any, revision: Any, commit: Any) -> str | None:
    """``source@commit`` of a hub checkpoint whose commit is known: the one its branch or tag
    loaded (``commit``), or its revision where that is a commit; None for any other."""
    pinned = commit or (revision if isinstance(revision, str) and _SHA.fullmatch(revision)
                        else None)
    return f"{source}@{pinned}" if pinned and source else None


def _migrate(store: RunStore, previous: dict[str, Any]) -> list[dict[str, Any]]:
    """run.json's checkpoints with their identities. A run made before identities keyed its
    units by name and revision: those are rekeyed by identity, except where two checkpoints
    shared a name and revision, whose one unit is set aside (which of the two was scored is
    unknown) and which are left out, to be named anew and redone. Relative sources resolve
    against the working directory."""
    entries: list[dict[str, Any]] = list(previous.get("checkpoints", []))
    if all(e.get("identity") for e in entries):
        return entries
    ids = [e.get("identity") or identity_of(str(e["model"]), str(e["source"]), e.get("revision"))
           for e in entries]
    owners: dict[tuple[str, str | None], set[str]] = defaultdict(set)
    for entry, identity in zip(entries, ids):
        owners[(entry["model"], entry.get("revision"))].add(identity)
    probes = list(previous.get("settings", {}).get("probes", {}))
    seeds = sorted(set(previous.get("seeds", [])) | {0})
    for entry, identity in zip(entries, ids):
        shared = owners[(entry["model"], entry.get("revision"))]
        for probe in probes:
            for seed in seeds:
                old = Unit(entry["model"], entry.get("revision"), probe, seed, entry.get("step"))
                if not store.unit_path(old).exists():
                    continue
                if len(shared) > 1:
                    store.set_aside(store.unit_path(old), "an older biasscope gave the "
                                    f"checkpoints {' and '.join(sorted(shared))} this one unit")
                elif store.has(old):
                    store.rekey(old, replace(old, checkpoint=identity))
    unique: dict[str, dict[str, Any]] = {}
    for entry, identity in zip(entries, ids):
        if len(owners[(entry["model"], entry.get("revision"))]) == 1:  # else: named anew
            unique.setdefault(identity, {**entry, "identity": identity})
    return list(unique.values())
