"""What a local checkpoint's weights are, as opposed to where they are.

A checkpoint's identity is its path, so a checkpoint overwritten in place (re-saved, training
continued under the same name) would keep its old results, and a renamed one would be scored
again as a new step. Its fingerprint says what the weights are: a SHA-256 over the name, size
and SHA-256 of each weight file (a GGUF file: the file's own SHA-256). ``run.json`` records it
per checkpoint and a rerun compares (see ``runs.runfile``). Hashing gigabytes takes a while,
so each file's hash is cached by path, size, mtime and ctime in ``$BIASSCOPE_FINGERPRINT_CACHE``
(default ``~/.cache/biasscope/fingerprints.json``): an unchanged checkpoint is not re-read.
Hub checkpoints (pinned by revision) and weights scored in memory have none.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import IN_MEMORY, Checkpoint
from biasscope.backends.gguf import provenance
from biasscope.backends.loading import PICKLE_WEIGHTS
from biasscope.core import steps
from biasscope.core.numbers import num
from biasscope.store.settings import sha256_file, sha256_json

#: Pickles a Trainer checkpoint holds beside the weights: training state, not the model.
_TRAINING_STATE = ("optimizer", "scheduler", "scaler", "rng_state", "training_args")
_KEEP = 20_000  # cache entries kept at most (those of files that still exist)


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


class _Hashes:
    """File SHA-256s, reused while a file's path, size, mtime and ctime are unchanged."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.changed = False
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            self.entries: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):  # none yet, or damaged: hashed anew
            self.entries = {}

    def sha256(self, file: Path) -> tuple[int, str]:
        stat = file.stat()
        key = str(file.resolve())
        stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]
        entry = self.entries.get(key)
        if isinstance(entry, dict) and entry.get("stat") == stamp and entry.get("sha256"):
            return stat.st_size, str(entry["sha256"])
        if stat.st_size >= steps.LARGE_FILE:  # once: the hash is kept while the file is unchanged
            steps.say(f"hashing {file} ({num(stat.st_size / 2**20, 0)} MiB)")
        digest = sha256_file(file)
        self.entries[key] = {"stat": stamp, "sha256": digest}
        self.changed = True
        return stat.st_size, digest

    def save(self) -> None:
        """Write the cache back; a cache that cannot be written only costs a re-hash."""
        if not self.changed:
            return
        from biasscope.store.files import write_json

        kept = {k: v for k, v in self.entries.items() if Path(k).exists()}
        kept = dict(list(kept.items())[-_KEEP:])
        with contextlib.suppress(Exception):
            write_json(self.path, kept)


def fingerprint(ckpt: Checkpoint, hashes: _Hashes | None = None) -> str | None:
    """The checkpoint's content fingerprint, or None where it has no local files."""
    if ckpt.source == IN_MEMORY:
        return None
    made = provenance(ckpt.source)
    if made is not None and made.get("sha256"):  # a GGUF file: its own SHA-256
        return str(made["sha256"])
    folder = Path(ckpt.source).expanduser()
    files = weight_files(folder) if folder.is_dir() else []
    if not files:
        return None
    own = hashes or _Hashes(cache_path())
    listing = {f.name: own.sha256(f) for f in files}
    if hashes is None:
        own.save()
    return sha256_json(listing)


def with_fingerprints(checkpoints: Sequence[Checkpoint]) -> list[Checkpoint]:
    """The checkpoints with their fingerprints filled in (one cache read and write)."""
    hashes = _Hashes(cache_path())
    out = [c if c.fingerprint else replace(c, fingerprint=fingerprint(c, hashes))
           for c in checkpoints]
    hashes.save()
    return out


def recorded(entry: dict[str, Any]) -> str | None:
    """The fingerprint a run.json checkpoint entry records (an older run's GGUF entry: its
    file's SHA-256); None where the run never recorded one."""
    made = entry.get("gguf")
    value = entry.get("fingerprint") or (made.get("sha256") if isinstance(made, dict) else None)
    return str(value) if value else None
