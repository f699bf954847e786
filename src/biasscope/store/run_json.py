"""``run.json``, written in one place: every run records its kind, and no job writes into a run
of another kind.

Each job says what its ``run.json`` holds (``build``: from what the run recorded, or from
nothing for a new run); `start_run` holds the run's lock while it reads, checks the kind,
builds and writes, so two processes started into one ``--out`` never lose each other's
entries. ``jobs.JOBS`` maps each kind to the job that writes it and the renderer that shows it.
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError
from biasscope.core.imports import installed_version
from biasscope.core.levels import Levels, stored_levels
from biasscope.store.directory import CHECKSUMS, ID_FILE, RECORDS, RunStore
from biasscope.store.files import write_bytes, write_json
from biasscope.store.locks import LOCK, run_lock

RUN_JSON = "run.json"
Build = Callable[[dict[str, Any] | None], dict[str, Any]]

#: The libraries that run a local model: their versions can change its scores.
MODEL_LIBRARIES = ("torch", "transformers", "tokenizers")
#: The backends (an identity's ``backend``) that run a local model with `MODEL_LIBRARIES`.
LOCAL_BACKENDS = ("hf", "hf-reward")
#: What a sweep records in run.json ``versions`` (with python's): it computes its analysis too.
LIBRARIES = ("biasscope", "numpy", "pandas", "scipy", *MODEL_LIBRARIES)


def versions(names: Sequence[str] = LIBRARIES) -> dict[str, str]:
    """run.json ``versions``: python's and each of ``names`` installed, so `biasscope compare`
    can say where two runs' libraries differ."""
    out = {"python": platform.python_version()}
    for name in names:
        if (version := installed_version(name)) is not None:
            out[name] = version
    return out


def model_versions(identities: Iterable[Any]) -> dict[str, str]:
    """run.json ``versions`` of a run whose models are ``identities`` (each a backend's
    ``identity()``): biasscope's, and `MODEL_LIBRARIES`' where a local model answers, judges
    or scores (a server's libraries are not this machine's)."""
    local = any(isinstance(i, Mapping) and i.get("backend") in LOCAL_BACKENDS
                for i in identities)
    return versions(("biasscope", *(MODEL_LIBRARIES if local else ())))


class OtherVersionsWarning(UserWarning):
    """A rerun runs other library versions than those its run.json keeps."""


def kept_versions(recorded: Any, now: Mapping[str, str]) -> dict[str, str]:
    """run.json ``versions`` of a run that keeps its first: those the run ``recorded`` stay
    (its results were first made with them, and a rerun that only resumes must not make them
    look made with others); those it lacks (a run from before they were recorded) are gained
    from ``now``. Never refused: upgrading a library must not lock a user out of a run."""
    return {**now, **(recorded if isinstance(recorded, Mapping) else {})}


def warn_other_versions(where: object, kept: Mapping[str, Any], now: Mapping[str, str]
                        ) -> None:
    """An `OtherVersionsWarning` where this call runs other libraries than run.json keeps
    (python's aside): what it adds is made with them."""
    other = [name for name, version in now.items()
             if name != "python" and kept.get(name) not in (None, version)]
    if other:
        warnings.warn(
            f"{where} keeps the versions its run was made with "
            f"({', '.join(f'{n} {kept[n]}' for n in other)}); this call runs "
            f"{', '.join(f'{n} {now[n]}' for n in other)}, and what it adds is made with them",
            OtherVersionsWarning, stacklevel=3)


def kind_of(recorded: Mapping[str, Any]) -> str:
    """The kind of the run whose ``run.json`` is ``recorded``. Runs from before every run
    recorded its kind are checkpoint sweeps, or intervention runs (whose settings hold the
    intervention): every other job always recorded its kind."""
    kind = recorded.get("kind")
    if isinstance(kind, str):
        return kind
    settings = recorded.get("settings")
    return "intervention" if isinstance(settings, dict) and "intervention" in settings else (
        "dynamics")


def recorded_kind(store: RunStore) -> str:
    """The kind of the run in ``store`` (one line if it holds no ``run.json``)."""
    return kind_of(store.read_json(RUN_JSON))


def readable_settings(store: RunStore, kind: str) -> Mapping[str, Any] | None:
    """The settings of the run in ``store`` where its run.json can be read and is of ``kind``;
    None otherwise, for the checks that say what is wrong with it to say so (a check made
    early, before a model loads, leaves them that)."""
    store.pull(RUN_JSON)
    if not store.run_json.is_file():
        return None
    try:
        recorded = store.read_json(RUN_JSON)
    except BiasscopeError:
        return None
    settings = recorded.get("settings")
    return settings if recorded.get("kind") == kind and isinstance(settings, Mapping) else None


def run_levels(store: RunStore, given: Mapping[str, Any] | None) -> Levels:
    """The levels ``given`` (``--confidence``, ``--resamples``) over those the run's
    summary.json stored (`stored_levels`): a rerun at another level is no other setting of
    the run (run.json does not record it). A summary.json that cannot be read stores none:
    the run's answers are summarised again."""
    try:
        summary = store.read_json("summary.json") if store.summary_json.is_file() else None
    except BiasscopeError:
        summary = None
    return stored_levels(summary, store.summary_json, given)


#: What a run writes beside run.json under fixed names: in a folder without run.json they are
#: someone else's.
OWN_FILES = ("summary.json", "report.html")


def refuse_foreign_folder(store: RunStore) -> None:
    """A local folder without run.json that holds a run's `OWN_FILES` is someone else's."""
    if store.remote is None and not store.run_json.is_file() and (
            taken := [n for n in OWN_FILES if (store.root / n).exists()]):
        raise BiasscopeError(f"{store.root} holds {' and '.join(taken)} but no run.json: it is "
                             "no biasscope run, and one there would replace them; use another "
                             "--out")


def start_run(store: RunStore, kind: str, build: Build, joins: Collection[str] = (),
              kept: Callable[[dict[str, Any]], bool] | None = None,
              now: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Write ``run.json`` as ``build`` makes it from what the run recorded (``None``: a new
    run), with ``kind`` first, and return it.

    A run of another kind is refused in one line, before anything is written, except the
    kinds in ``joins`` (checkpoints scored into an intervention run are scored as any sweep's),
    which keep their own kind. ``kept``: whether a URL run's ``run.json``, read back, still
    holds what this process wrote; other machines have no lock to wait on, so it is built again
    until it does. ``now``: this call's library versions (`versions`); run.json keeps the
    ones it recorded (`kept_versions`), and a call under others is told (`warn_other_versions`).
    """
    refuse_foreign_folder(store)
    with run_lock(store):
        for _ in range(8):
            previous, have = _recorded(store, kind, joins)
            written = {"kind": have, **{k: v for k, v in build(previous).items() if k != "kind"}}
            if now is not None:
                written["versions"] = kept_versions((previous or {}).get("versions"), now)
            was = store.run_json.read_bytes() if previous is not None else None
            write_json(store.run_json, written)
            store.wrote(store.run_json, was)
            store.publish(store.run_json)
            if store.remote is None or kept is None or kept(written):
                if now is not None:
                    warn_other_versions(store.run_json, written["versions"], now)
                return written
            time.sleep(random.uniform(0.05, 0.5))  # another machine wrote between: build again
    raise BiasscopeError(f"{store.remote}/{RUN_JSON} keeps changing under other writers; run "
                         "the same command again")


@contextmanager
def unsettled(store: RunStore, holds: Callable[[], bool], folders: Sequence[str] = (), *,
              rerun: bool = False, files: Sequence[str] = ()) -> Iterator[None]:
    """A run.json this call wrote, taken away again when the call stops (a one-line error, an
    interrupt, a training error) before the run ``holds`` anything: the rerun with the mistake
    put right (the server's URL, the model's path, a smaller batch) is not refused for
    settings a run of nothing recorded. ``folders`` (under the run: ``train``) that this call
    made go too where they hold no file, so --out is left as it was.

    ``rerun``: a call into an existing run gets its run.json back as it was before the call
    when it stops before ``holds`` anything new (``holds``: whether anything was added since
    the call began), so a probe or checkpoint it added, with its data files' hashes, does not
    stay listed without results. What earlier calls wrote is that very content, kept.
    ``files`` (under the run: ``performance.json``) that the call writes beside run.json are
    put back with it (removed where the call made them), so neither outlasts the other.

    Each is put back under the run's lock, and only where it is still as this call left it
    (`RunStore.own`): a file another call wrote since this one began is theirs too, and
    stays as they left it (run.json with their entries, performance.json with their series).

    A first call that stops so leaves no trace either: the run's lock and id files and its
    ``records``/``checksums`` folders go where it made them, and ``--out`` itself (with the
    parents it made) where it was not there before and now holds no file. A folder that was
    there keeps every file it held."""
    local = store.remote is None
    fresh = local and not store.run_json.is_file()
    before = store.run_json.read_bytes() if local and rerun and not fresh else None
    made = [store.root / name for name in (*folders, RECORDS, CHECKSUMS)
            if not (store.root / name).exists()]
    dots = [store.root / name for name in (ID_FILE, LOCK) if not (store.root / name).exists()]
    new = _first_missing(store.root) if fresh else None
    beside = {store.root / name: (store.root / name).read_bytes()
              if (store.root / name).is_file() else None for name in files} if local else {}
    watched = {**beside, store.run_json: before} if local else {}
    added = [path for path in watched if path not in store.own]  # an outer call's stay its
    store.own.update({path: watched[path] for path in added})
    try:
        yield
    except BaseException:
        if not holds():
            if fresh:
                _unstart(store, beside, made, dots, new)
            elif back := {**beside, **({store.run_json: before} if before is not None
                                        else {})}:
                with run_lock(store):
                    _give_back(store, back)
        raise
    finally:
        for path in added:
            store.own.pop(path, None)


def _give_back(store: RunStore, was: Mapping[Path, bytes | None]) -> bool:
    """Under the run's lock, each file as it was before the call (``was``: removed where it
    made it) where it is still as this call left it (`RunStore.own`); one another call wrote
    since stays as they left it. Where run.json (last in ``was``) is another call's so, none
    is given back: it holds this call's entries too, and vouches for what this call wrote
    beside it. Whether it was not."""
    def now(path: Path) -> bytes | None:
        return path.read_bytes() if path.is_file() else None

    def theirs(path: Path, held: bytes | None) -> bool:
        return path not in store.own or store.own[path] != held

    if store.run_json in was and (held := now(store.run_json)) != was[store.run_json] and (
            theirs(store.run_json, held)):
        return False
    for path, then in was.items():
        held = now(path)
        if held == then or theirs(path, held):
            continue
        if then is None:
            path.unlink(missing_ok=True)
        else:
            write_bytes(path, then)
        store.wrote(path, held)
    return True


def _unstart(store: RunStore, beside: Mapping[Path, bytes | None], made: Sequence[Path],
             dots: Sequence[Path], new: Path | None) -> None:
    """A first call that stored nothing takes away what it wrote, under the run's lock, and
    only where run.json is still its own (`RunStore.own`): another call started into the
    same new --out meanwhile keeps its run.json and the files beside it (both it vouches for)."""
    if store.run_json.is_file():
        try:
            with run_lock(store):
                mine = _give_back(store, {**beside, store.run_json: None})
        except (BiasscopeError, OSError):  # the folder gone or replaced: nothing of ours left
            return
        if not mine:
            return
    else:
        _give_back(store, beside)
    for folder in made:
        _remove_empty(folder)
    _unmake(store, dots, new)


def _first_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist yet (None: it exists):
    what a call that makes ``path`` makes."""
    missing = None
    path = path.absolute()
    for place in (path, *path.parents):
        if place.exists():
            return missing
        missing = place
    return missing


def _unmake(store: RunStore, dots: Sequence[Path], new: Path | None) -> None:
    """Take away the lock and id files a first call made (``dots``: those not there before),
    and the folders it made (``new``: the outermost) where they hold nothing else."""
    if store.run_json.exists() or store.unit_files():
        return  # another process's run, begun meanwhile: its lock and id stay with it
    for path in dots:
        path.unlink(missing_ok=True)
    store.forget_identity()
    if new is not None:
        _remove_empty(new)


def rewritten(path: Path) -> Callable[[], bool]:
    """`unsettled`'s ``holds`` for a call that writes its results whole into one file (a
    judge's verdicts, counterfactual scores): whether ``path`` holds something, and other than
    when this was called."""
    before = path.read_bytes() if path.is_file() else None

    def holds() -> bool:
        try:
            now = path.read_bytes()
        except OSError:
            return False
        return bool(now) and now != before

    return holds


def _remove_empty(folder: Path) -> None:
    """``folder`` and the folders in it, those that hold no file (one that does stays)."""
    for where, _, _ in os.walk(folder, topdown=False):  # the innermost first
        with contextlib.suppress(OSError):  # not empty: it keeps what it holds
            Path(where).rmdir()


def refuse_other_kind(store: RunStore, kind: str, joins: Collection[str] = ()) -> None:
    """Refuse a ``--out`` that holds another kind of run (or someone else's files) as
    `start_run` would, before a job's costly work (a GGUF file hashed, a model loaded): a read
    of run.json, so every job checks it with its flags. `start_run` checks it again under the
    run's lock."""
    refuse_foreign_folder(store)
    _recorded(store, kind, joins)


def check_run(store: RunStore, kind: str, build: Build, joins: Collection[str] = ()) -> None:
    """Refuse what `start_run` would refuse (another kind of run, and whatever ``build``
    refuses: a changed setting), writing nothing: for a job that checks before its requests
    and writes run.json with its results, so that a call that stores none leaves run.json as
    it was (no ``versions`` or identity gained from a call that added nothing)."""
    refuse_foreign_folder(store)
    with run_lock(store):
        previous, _ = _recorded(store, kind, joins)
        build(previous)


def _recorded(store: RunStore, kind: str, joins: Collection[str]
              ) -> tuple[dict[str, Any] | None, str]:
    """What run.json records (None: a new run) and its kind, under the run's lock; a run of
    another kind than ``kind`` (or ``joins``) refused in one line."""
    store.pull(RUN_JSON)  # a URL run: what other machines wrote since
    previous = store.read_json(RUN_JSON) if store.run_json.is_file() else None
    have = kind if previous is None else kind_of(previous)
    if have != kind and have not in joins:
        article = "an" if kind[0] in "aeiou" else "a"
        raise BiasscopeError(f"{store.run_json} is not {article} {kind} run ({have}); "
                             "use another --out")
    return previous, have
