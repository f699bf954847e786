"""What a local checkpoint's weights are, as opposed to where they are.

A checkpoint's identity is its path, so a checkpoint overwritten in place (re-saved, training
continued under the same name) would keep its old results, and a renamed one would be scored
again as a new step. Its fingerprint says what the weights are: a SHA-256 over the name, size
and SHA-256 of each weight file (a GGUF file: the file's own SHA-256). ``run.json`` records it
per checkpoint and a rerun compares (see ``dynamics.runfile``).

Hashing gigabytes takes a while, so none of it waits where it need not:

- Each file's SHA-256 is cached in ``$BIASSCOPE_FINGERPRINT_CACHE`` (default
  ``~/.cache/biasscope/fingerprints.json``) under its resolved path with its size, mtime,
  ctime, inode and device: an unchanged file is not read again, and any write to it (one that
  keeps its size and mtime too, or another file renamed over it) changes its ctime or inode,
  so a changed file is never taken for the old one. A file changed more recently than the file
  system's timestamp resolution is hashed but not cached (a second write within the same tick
  would leave its stamp as it was).
- Files are hashed in background threads, several at once. A sweep starts a checkpoint's
  hashing when the checkpoint starts to load (the hash reads the files beside the loader's
  read-ahead, so one read from the disk serves both), and needs its fingerprint only before
  the checkpoint's first unit is written (``runfile.admit``): a checkpoint new to the run is
  hashed while it loads and is scored, not before the sweep starts.

Hub checkpoints (pinned by revision) and weights scored in memory have none.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import IN_MEMORY, Checkpoint
from biasscope.backends.gguf import provenance
from biasscope.backends.loading import PICKLE_WEIGHTS
from biasscope.core import steps
from biasscope.core.digest import file_sha256
from biasscope.core.errors import BiasscopeError
from biasscope.core.numbers import num
from biasscope.store.files import write_json
from biasscope.store.settings import sha256_json

#: Pickles a Trainer checkpoint holds beside the weights: training state, not the model.
_TRAINING_STATE = ("optimizer", "scheduler", "scaler", "rng_state", "training_args")
_KEEP = 20_000  # cache entries kept at most (those of files that still exist)
_WORKERS = max(1, min(4, os.cpu_count() or 1))  # files hashed at once
_TRIES = 3  # reads of a file that changes while it is hashed, before giving up

#: What a cached hash is checked against: size, mtime, ctime, inode, device.
Stamp = tuple[int, int, int, int, int]


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


def stamp_of(stat: os.stat_result) -> Stamp:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev)


def settled(stat: os.stat_result, now_ns: int) -> bool:
    """Whether any later write must change the file's ctime: it lies further back than the
    timestamps' resolution (2 s where they are whole seconds, else 0.1 s: a kernel tick)."""
    resolution = 2_000_000_000 if stat.st_ctime_ns % 1_000_000_000 == 0 else 100_000_000
    return now_ns - stat.st_ctime_ns > resolution


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
        self._pool: ThreadPoolExecutor | None = None
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

    def start(self, file: Path) -> Future[tuple[int, str]]:
        """(size, SHA-256) of the file as it is now: cached, being hashed, or hashed from now
        on in a background thread."""
        key, stamp = _keyed(file)
        if (known := self._known(key, stamp)) is not None:
            done: Future[tuple[int, str]] = Future()
            done.set_result(known)
            return done
        with self._lock:
            running = self._running.get((key, stamp))
            if running is None:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(_WORKERS, "biasscope-hash")
                running = self._pool.submit(self._hash, Path(key), stamp)
                if stamp[0] >= steps.LARGE_FILE:  # once: kept while the file is unchanged
                    steps.say(f"hashing {file} ({num(stamp[0] / 2**20, 0)} MiB) while it loads")
                self._running[(key, stamp)] = running
            return running

    def sha256(self, file: Path) -> tuple[int, str]:
        return self.start(file).result()

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
            write_json(self.path, entries)

    def close(self) -> None:
        """Save, and abandon the hashing nobody waits for any more (a sweep that stopped)."""
        self.save()
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


class Fingerprints:
    """Checkpoint fingerprints over one ``FileDigests``."""

    def __init__(self, digests: FileDigests | None = None) -> None:
        self.digests = digests or FileDigests()

    @staticmethod
    def own(ckpt: Checkpoint) -> tuple[bool, str | None]:
        """(True, its fingerprint) where none needs hashing here: one already known, a GGUF
        file's own SHA-256, or None for weights without local files."""
        if ckpt.fingerprint or ckpt.source == IN_MEMORY:
            return True, ckpt.fingerprint
        made = provenance(ckpt.source)
        if made is not None and made.get("sha256"):
            return True, str(made["sha256"])
        folder = Path(ckpt.source).expanduser()
        return (False, None) if folder.is_dir() and weight_files(folder) else (True, None)

    def cached(self, ckpt: Checkpoint) -> tuple[bool, str | None]:
        """(True, fingerprint) if it is known without reading a weight file, else (False,
        None)."""
        known, value = self.own(ckpt)
        if known:
            return known, value
        files = weight_files(Path(ckpt.source).expanduser())
        hashes = [self.digests.cached(f) for f in files]
        if any(h is None for h in hashes):
            return False, None
        return True, sha256_json({f.name: list(h) for f, h in zip(files, hashes) if h})

    def start(self, ckpt: Checkpoint) -> None:
        """Start hashing the checkpoint's weight files in the background."""
        if not self.own(ckpt)[0]:
            for file in weight_files(Path(ckpt.source).expanduser()):
                self.digests.start(file)

    def of(self, ckpt: Checkpoint) -> str | None:
        """The checkpoint's fingerprint (waits for its hashing), or None where it has no local
        files."""
        known, value = self.own(ckpt)
        if known:
            return value
        files = weight_files(Path(ckpt.source).expanduser())
        running = [self.digests.start(f) for f in files]  # all at once, then waited for
        return sha256_json({f.name: list(h.result()) for f, h in zip(files, running)})

    def close(self) -> None:
        self.digests.close()


@contextlib.contextmanager
def fingerprints() -> Iterator[Fingerprints]:
    """Fingerprints over the cache, saved (and background hashing abandoned) at the end."""
    prints = Fingerprints()
    try:
        yield prints
    finally:
        prints.close()


def fingerprint(ckpt: Checkpoint) -> str | None:
    """The checkpoint's content fingerprint, or None where it has no local files."""
    with fingerprints() as prints:
        return prints.of(ckpt)


def with_fingerprints(checkpoints: Sequence[Checkpoint], prints: Fingerprints | None = None,
                      later: frozenset[str] = frozenset()) -> list[Checkpoint]:
    """The checkpoints with their fingerprints filled in, hashed in parallel; those whose
    identity is in ``later`` only where the cache knows them (the rest are hashed while the
    sweep loads them, see ``runfile.admit``)."""
    if prints is None:
        with fingerprints() as own:
            return with_fingerprints(checkpoints, own, later)
    for ckpt in checkpoints:
        if ckpt.identity not in later:
            prints.start(ckpt)  # every file at once, before any is waited for
    out = []
    for ckpt in checkpoints:
        value = prints.cached(ckpt)[1] if ckpt.identity in later else prints.of(ckpt)
        out.append(replace(ckpt, fingerprint=value) if value != ckpt.fingerprint else ckpt)
    prints.digests.save()
    return out


def recorded(entry: dict[str, Any]) -> str | None:
    """The fingerprint a run.json checkpoint entry records (an older run's GGUF entry: its
    file's SHA-256); None where the run never recorded one."""
    made = entry.get("gguf")
    value = entry.get("fingerprint") or (made.get("sha256") if isinstance(made, dict) else None)
    return str(value) if value else None
