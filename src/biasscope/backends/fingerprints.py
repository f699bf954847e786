"""What a local model's weights are, as opposed to where they are: its fingerprint.

A local model is named by its path, so weights overwritten in place (re-saved, training
continued under the same name, another model copied over it) would keep the old model's
results. Its fingerprint says what the weights are: a SHA-256 over the name, size and SHA-256
of each weight file (``folder_fingerprint``). ``biasscope dynamics`` records it per checkpoint
(``dynamics.scoring.fingerprints``), and a local model's ``identity()`` carries it (the HF
generator and reward model), so the response cache and every run's settings tell two models
in one folder apart. The identity also carries ``files_fingerprint``, the same over the small
files beside the weights that change the answers too (``answer_files``: the tokenizer, the
chat template, ``config.json``, ``generation_config.json``, every ``*.py`` a
``trust_remote_code`` model may run): a template edited in place renders other prompts. A hub id
has no folder to hash: where its revision is not a commit (``main``, a branch, a tag), the
identity carries the ``commit`` it resolved to when it loaded (``hub_commit``), so a branch
moved between two runs is another model too. A model whose ``auto_map`` names code carries
``remote_code`` (`remote_code`): whether it runs, and the fingerprint of the modules it runs,
a hub id's read from its cache.

Hashing gigabytes takes a while, so none of it is done twice: each file's SHA-256 is cached
in ``$BIASSCOPE_FINGERPRINT_CACHE`` (default ``~/.cache/biasscope/fingerprints.json``) under
its resolved path with its size, mtime, ctime, inode and device: an unchanged file is not read
again, and any write to it (one that keeps its size and mtime too, or another file renamed
over it) changes its ctime or inode, so a changed file is never taken for the old one. A file
changed more recently than the file system's timestamp resolution is hashed but not cached (a
second write within the same tick would leave its stamp as it was). Files are hashed in
background threads, several at once (``FileDigests.start``), so a caller can start the hashing
and wait for it only when it needs the value; small files (tokenizer, config) have threads of
their own, never queued behind gigabytes of weights. One process's callers share one
``FileDigests`` through `shared` (the sweep's: the loader's tokenizer key waits on the hashes
the sweep started, no file is read twice).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from biasscope.backends.gguf_paths import provenance
from biasscope.backends.loading import PICKLE_WEIGHTS, TOKENIZER_FILES
from biasscope.backends.remote_code import NOT_RUN, code_files, names_code
from biasscope.core import steps
from biasscope.core.digest import Stamp, file_sha256, settled, stamp_of
from biasscope.core.errors import BiasscopeError
from biasscope.core.numbers import num
from biasscope.core.processes import HOST

#: Pickles a Trainer checkpoint holds beside the weights: training state, not the model.
_TRAINING_STATE = ("optimizer", "scheduler", "scaler", "rng_state", "training_args")
_KEEP = 20_000  # cache entries kept at most (those of files that still exist)
_WORKERS = max(1, min(4, os.cpu_count() or 1))  # files hashed at once
_TRIES = 3  # reads of a file that changes while it is hashed, before giving up
#: Code and named chat templates a model folder may hold (`answer_files`). Every module: the
#: ``auto_map`` of config.json or tokenizer_config.json names ``module.Class`` for a
#: ``module.py`` beside it, under any name, and it may import others beside it.
_CODE = ("*.py", "additional_chat_templates/*.jinja")
#: Files the generation defaults come from: no part of the tokenizer (`tokenizer_files`).
_NOT_TOKENIZER = ("generation_config.json",)
_COMMIT = re.compile(r"[0-9a-f]{40}")  # a revision that is a commit: pinned, cannot move

def cache_path() -> Path:
    """``$BIASSCOPE_FINGERPRINT_CACHE``, else ``~/.cache/biasscope/fingerprints.json``."""
    chosen = os.environ.get("BIASSCOPE_FINGERPRINT_CACHE")
    return (Path(chosen).expanduser() if chosen
            else Path.home() / ".cache" / "biasscope" / "fingerprints.json")


def weight_files(folder: Path) -> list[Path]:
    """The files the model is loaded from: its safetensors, else its pickle weights (not a
    Trainer's optimizer, scheduler or RNG state, which do not change the model)."""
    found = sorted(folder.glob("*.safetensors"))
    if found:
        return found
    pickles = {p for pattern in PICKLE_WEIGHTS for p in folder.glob(pattern)}
    return sorted(p for p in pickles if not p.name.startswith(_TRAINING_STATE))


def answer_files(folder: Path) -> list[Path]:
    """The files besides the weights that the loaders read and that change the answers: the
    tokenizer's (`TOKENIZER_FILES`, with its chat template, and any named ones), the config, the
    generation defaults (its end-of-text tokens) and the code a ``trust_remote_code`` model
    runs. Small files: hashing them costs nothing beside the weights. Code a
    ``trust_remote_code`` load would fetch from another repository is no file here: such a
    load is refused (`biasscope.backends.loading.refuse_remote_code`)."""
    named = {folder / n for n in (*TOKENIZER_FILES, "config.json", "generation_config.json")}
    found = {p for p in named if p.is_file()} | {
        p for pattern in _CODE for p in folder.glob(pattern) if p.is_file()}
    return sorted(found)


def tokenizer_files(folder: Path) -> list[Path]:
    """The `answer_files` a tokenizer loads from: all but the generation defaults (config.json
    names the tokenizer's class where tokenizer_config.json does not, its code may be any
    module)."""
    return [p for p in answer_files(folder) if p.name not in _NOT_TOKENIZER]


def hub_commit(source: str, revision: str | None) -> str | None:
    """The commit a hub id's revision resolved to, from huggingface_hub's cache (its
    ``refs/<revision>``, read without a request): after a load, the commit loaded. None for a
    local path, a revision that is itself a commit (pinned), or a repo not in the cache."""
    if not source or Path(source).expanduser().exists() or (
            revision and _COMMIT.fullmatch(revision)):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # comes with transformers; without it nothing loads from the hub
        return None
    try:  # every model transformers loads has one; its snapshot folder is named by the commit
        found = try_to_load_from_cache(source, "config.json", revision=revision or "main")
    except (ValueError, OSError):  # not a repo id (an in-memory label), or an unreadable cache
        return None
    if not isinstance(found, str) or Path(found).parent.parent.name != "snapshots":
        return None
    return Path(found).parent.name


def _keyed(file: Path) -> tuple[str, Stamp]:
    """The cache's key of a file (its resolved path) and its stamp now."""
    try:
        return str(file.resolve()), stamp_of(file.stat())
    except OSError as exc:
        raise BiasscopeError(f"{file}: cannot read ({exc.strerror or exc})") from None


class FileDigests:
    """File SHA-256s: the cached one while a file's stamp is unchanged, else hashed in
    background threads, each file once per process however often it is asked for."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_path()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._running: dict[tuple[str, Stamp], Future[tuple[int, str]]] = {}
        self._added: dict[str, Any] = {}  # hashed here, to be saved
        self._pools: dict[bool, ThreadPoolExecutor] = {}  # by whether the files are large
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            self._entries: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):  # none yet, or damaged: hashed anew
            self._entries = {}

    def cached(self, file: Path) -> tuple[int, str] | None:
        """(size, SHA-256) from the cache, if the file's stamp is the one cached with it."""
        return self._known(*_keyed(file))

    def _known(self, key: str, stamp: Stamp) -> tuple[int, str] | None:
        entry = self._entries.get(key)
        if isinstance(entry, dict) and entry.get("stat") == list(stamp) and entry.get("sha256"):
            return stamp[0], str(entry["sha256"])
        return None

    def start(self, file: Path, beside: str = " while it loads") -> Future[tuple[int, str]]:
        """(size, SHA-256) of the file as it is now: cached, being hashed, or hashed from now
        on in a background thread; ``beside``: what the line saying so adds (a large file's)."""
        key, stamp = _keyed(file)
        if (known := self._known(key, stamp)) is not None:
            done: Future[tuple[int, str]] = Future()
            done.set_result(known)
            return done
        with self._lock:
            running = self._running.get((key, stamp))
            if running is None:
                large = stamp[0] >= steps.LARGE_FILE
                if large not in self._pools:
                    self._pools[large] = ThreadPoolExecutor(
                        _WORKERS, "biasscope-hash" + ("" if large else "-small"))
                running = self._pools[large].submit(self._hash, Path(key), stamp)
                if large:  # once: kept while the file is unchanged
                    steps.say(f"hashing {file} ({num(stamp[0] / 2**20, 0)} MiB){beside}")
                self._running[(key, stamp)] = running
            return running

    def sha256(self, file: Path) -> tuple[int, str]:
        """`start`'s answer, waited for: nothing loads beside it (a GGUF file hashed first)."""
        return self.start(file, "").result()

    def _hash(self, file: Path, stamp: Stamp) -> tuple[int, str]:
        """Hash until the file's stamp is the same before and after the read."""
        for _ in range(_TRIES):
            digest = file_sha256(file, self._stop)
            after = os.stat(file)
            if stamp_of(after) == stamp:
                if settled(after, time.time_ns()):
                    entry = {"stat": list(stamp), "sha256": digest}
                    with self._lock:
                        self._entries[str(file)] = self._added[str(file)] = entry
                return stamp[0], digest
            stamp = stamp_of(after)
        raise BiasscopeError(f"{file} kept changing while it was read: is it still being "
                             "written? Run again once it is saved")

    def save(self) -> None:
        """Merge this process's new hashes into the cache file (another process may have added
        its own since it was read); a cache that cannot be written only costs a re-hash."""
        with self._lock:
            added = dict(self._added)
            self._added.clear()
        if not added:
            return
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            entries: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            entries = {}
        entries.update(added)
        if len(entries) > _KEEP:  # only then is it worth a stat of every entry
            entries = {k: v for k, v in entries.items() if Path(k).exists()}
            entries = dict(list(entries.items())[-_KEEP:])
        with contextlib.suppress(Exception):
            _write(self.path, entries)

    def close(self) -> None:
        """Save, and abandon the hashing nobody waits for any more (a sweep that stopped)."""
        self.save()
        self._stop.set()
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)


_SHARED: ContextVar[FileDigests | None] = ContextVar("biasscope_digests", default=None)


@contextlib.contextmanager
def shared(digests: FileDigests) -> Iterator[FileDigests]:
    """``digests`` as the one `in_use` gives inside the block (and in the threads it starts
    with ``copy_context``): the sweep's, which its loader's `tokenizer_key` waits on."""
    token = _SHARED.set(digests)
    try:
        yield digests
    finally:
        _SHARED.reset(token)


@contextlib.contextmanager
def in_use() -> Iterator[FileDigests]:
    """The `shared` digests, else one of its own over the cache, saved at the end."""
    current = _SHARED.get()
    if current is not None:
        yield current
        return
    own = FileDigests()
    try:
        yield own
    finally:
        own.close()


def combined(hashes: Mapping[str, tuple[int, str]]) -> str:
    """The fingerprint of weight files from each one's (size, SHA-256) by file name: the
    SHA-256 of that listing as canonical JSON (``store.settings.sha256_json`` of it)."""
    text = json.dumps({name: list(h) for name, h in hashes.items()}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def folder_fingerprint(folder: str | os.PathLike[str], digests: FileDigests | None = None
                       ) -> str | None:
    """The fingerprint of a local model folder's weights (``weight_files``), or None where it
    holds none (not a folder, or weights elsewhere). ``digests``: the caller's own, left open;
    without it the cache is read and saved here."""
    if digests is None:
        own = FileDigests()
        try:
            return folder_fingerprint(folder, own)
        finally:
            own.close()
    return start_fingerprint(folder, digests)()


def start_fingerprint(folder: str | os.PathLike[str], digests: FileDigests,
                      files: Callable[[Path], list[Path]] = weight_files
                      ) -> Callable[[], str | None]:
    """Start hashing a folder's weight files (``files``: its others; every file at once, in the
    background); the call returned waits for the folder's fingerprint (``folder_fingerprint``)."""
    root = Path(folder).expanduser()
    found = files(root)
    running = [digests.start(f) for f in found]
    return lambda: combined({f.relative_to(root).as_posix(): r.result()
                             for f, r in zip(found, running)}) if found else None


def remote_code(source: str, revision: str | None, trusted: bool, digests: FileDigests
                ) -> dict[str, str]:
    """What an identity says of the code a model's ``auto_map`` names: ``remote_code``, the
    fingerprint of its files (`remote_code.code_files`, a hub id's from its cache) where the
    model is trusted to run it, "not run" where it is not (transformers' own classes load);
    nothing where it names none. Refused where the code cannot be hashed (not in the cache,
    or another repository's)."""
    if not trusted:
        return {"remote_code": NOT_RUN} if names_code(source, revision) else {}
    files = code_files(source, revision)
    if files is None:
        return {}
    running = {name: digests.start(file) for name, file in files.items()}
    return {"remote_code": combined({name: r.result() for name, r in running.items()})}


@contextlib.contextmanager
def fingerprint_while_loading(source: str, revision: str | None = None, trusted: bool = False
                              ) -> Iterator[Callable[[], dict[str, str]]]:
    """For a model loaded from ``source`` inside the block: its files hashed while they load
    (the hash and the loader read the same files, so one read from the disk serves both), the
    call yielded waiting for what the identity adds: the weights' ``fingerprint`` and the other
    `answer_files`' ``files_fingerprint``. A hub id: the ``commit`` its ``revision`` resolved to
    (`hub_commit`, once loaded; nothing where the revision is a commit). Either: `remote_code`,
    ``trusted`` saying whether the load runs the model's own code. Nothing for a GGUF file's
    converted copy (its identity names the file's SHA-256, which covers the tokenizer and chat
    template the file holds). The cache is saved at the end; a failed load abandons the
    hashing."""
    local = Path(source).expanduser().is_dir()
    if local and provenance(source) is not None:
        yield lambda: {}
        return
    digests = FileDigests()
    try:
        weights = start_fingerprint(source, digests) if local else lambda: None
        others = start_fingerprint(source, digests, answer_files) if local else lambda: None

        def prints() -> dict[str, str]:
            found = {"fingerprint": weights(), "files_fingerprint": others(),
                     "commit": None if local else hub_commit(source, revision),
                     **remote_code(source, revision, trusted, digests)}
            return {k: v for k, v in found.items() if v}

        yield prints
    finally:
        digests.close()


def _write(path: Path, entries: dict[str, Any]) -> None:
    """The cache file written whole or not at all: through a temp file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{HOST}~{os.getpid()}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(entries, handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["FileDigests", "answer_files", "cache_path", "combined",
           "fingerprint_while_loading", "folder_fingerprint", "hub_commit", "in_use",
           "remote_code", "settled", "shared", "stamp_of", "start_fingerprint",
           "tokenizer_files", "weight_files"]
