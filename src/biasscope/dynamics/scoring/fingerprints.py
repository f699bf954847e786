"""What a local checkpoint's weights are, as opposed to where they are.

A checkpoint's identity is its path, so a checkpoint overwritten in place (re-saved, training
continued under the same name) would keep its old results, and a renamed one would be scored
again as a new step. Its fingerprint says what the weights are: a SHA-256 over the name, size
and SHA-256 of each weight file (a GGUF file: the file's own SHA-256). ``run.json`` records it
per checkpoint and a rerun compares (see ``dynamics.runfile``).

Hashing gigabytes takes a while, so none of it waits where it need not:

- Each file's SHA-256 is cached (``backends.fingerprints.FileDigests``, which the HF backends'
  ``identity()`` shares): an unchanged file is not read again, a changed one always is.
- Files are hashed in background threads, several at once. A sweep starts a checkpoint's
  hashing when the checkpoint starts to load (the hash reads the files beside the loader's
  read-ahead, so one read from the disk serves both), and needs its fingerprint only before
  the checkpoint's first unit is written (``runfile.admit``): a checkpoint new to the run is
  hashed while it loads and is scored, not before the sweep starts.

Hub checkpoints (pinned by revision) and weights scored in memory have none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import IN_MEMORY, Checkpoint
from biasscope.backends.fingerprints import (
    FileDigests,
    combined,
    folder_fingerprint,
    weight_files,
)
from biasscope.backends.gguf import provenance


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
        return True, combined({f.name: h for f, h in zip(files, hashes) if h})

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
        return folder_fingerprint(ckpt.source, self.digests)

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
