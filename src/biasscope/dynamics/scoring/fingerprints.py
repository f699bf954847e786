"""What a local checkpoint's weights are, as opposed to where they are.

A checkpoint's identity is its path, so a checkpoint overwritten in place (re-saved, training
continued under the same name) would keep its old results, and a renamed one would be scored
again as a new step. Its fingerprint says what the weights are: a SHA-256 over the name, size
and SHA-256 of each weight file (a GGUF file: the file's own SHA-256). Its ``files_fingerprint``
is the same over the files beside them that change the scores too (``answer_files``: the
tokenizer, chat template and config files; a tokenizer edited in place encodes other ids), as a
local model's identity holds it. ``run.json`` records both per checkpoint and a rerun compares
(see ``dynamics.runfile``).

Hashing gigabytes takes a while, so none of it waits where it need not:

- Each file's SHA-256 is cached (``backends.fingerprints.FileDigests``, which the HF backends'
  ``identity()`` shares): an unchanged file is not read again, a changed one always is.
- Files are hashed in background threads, several at once. A sweep starts a checkpoint's
  hashing (its weights and its answer files together) when the checkpoint starts to load (the
  hash reads the files beside the loader's read-ahead, so one read from the disk serves both),
  and needs its fingerprints only before the checkpoint's first unit is written
  (``runfile.admit``): a checkpoint new to the run is hashed while it loads and is scored, not
  before the sweep starts.

Hub checkpoints and weights scored in memory have none; a GGUF file has no
``files_fingerprint`` (its SHA-256 covers the tokenizer and template inside it). A hub
checkpoint whose revision is not a commit (``main``, a branch, a tag) records instead the
``commit`` it loaded (``backends.fingerprints.hub_commit``, read from huggingface_hub's cache
once it has loaded: before, the cache may still name the commit a branch pointed at last time).
A checkpoint whose ``auto_map`` names code records ``remote_code`` (`Fingerprints.code`):
whether ``--trust-remote-code`` ran it, and which, as a model's identity elsewhere holds it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import IN_MEMORY, Checkpoint
from biasscope.backends.fingerprints import (
    FileDigests,
    answer_files,
    combined,
    folder_fingerprint,
    hub_commit,
    remote_code,
    shared,
    start_fingerprint,
    weight_files,
)
from biasscope.backends.gguf_paths import provenance


class Fingerprints:
    """Checkpoint fingerprints over one ``FileDigests``; ``trusted``: whether the sweep loads
    with ``trust_remote_code`` (`code`)."""

    def __init__(self, digests: FileDigests | None = None, trusted: bool = False) -> None:
        self.digests = digests or FileDigests()
        self.trusted = trusted

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

    @staticmethod
    def files_own(ckpt: Checkpoint) -> tuple[bool, str | None]:
        """`own` for ``files_fingerprint``: None where `files_folder` has no answer files."""
        if ckpt.files_fingerprint:
            return True, ckpt.files_fingerprint
        return (False, None) if files_folder(ckpt) else (True, None)

    def known(self, ckpt: Checkpoint) -> bool:
        """Whether both fingerprints are known without hashing."""
        return self.own(ckpt)[0] and self.files_own(ckpt)[0]

    def cached(self, ckpt: Checkpoint) -> Checkpoint | None:
        """``ckpt`` with both fingerprints where they are known without reading a file, else
        None."""
        folder = Path(ckpt.source).expanduser()
        (weights, value), (others, files) = self.own(ckpt), self.files_own(ckpt)
        value = value if weights else self._from_cache(folder, weight_files)
        files = files if others else self._from_cache(folder, answer_files)
        if (not weights and value is None) or (not others and files is None):
            return None
        return self.coded(replace(ckpt, fingerprint=value, files_fingerprint=files))

    def _from_cache(self, root: Path, files: Callable[[Path], list[Path]]) -> str | None:
        """The fingerprint of ``files(root)`` (`start_fingerprint`'s) if the cache knows every
        one of them, else None."""
        found = files(root)
        hashes = [self.digests.cached(f) for f in found]
        if not found or any(h is None for h in hashes):
            return None
        return combined({f.relative_to(root).as_posix(): h for f, h in zip(found, hashes) if h})

    def start(self, ckpt: Checkpoint) -> None:
        """Start hashing the checkpoint's weight files and answer files in the background."""
        folder = Path(ckpt.source).expanduser()
        if not self.own(ckpt)[0]:
            for file in weight_files(folder):
                self.digests.start(file)
        if not self.files_own(ckpt)[0]:
            for file in answer_files(folder):
                self.digests.start(file)

    def of(self, ckpt: Checkpoint) -> str | None:
        """The checkpoint's fingerprint (waits for its hashing), or None where it has no local
        files."""
        known, value = self.own(ckpt)
        if known:
            return value
        return folder_fingerprint(ckpt.source, self.digests)

    def files_of(self, ckpt: Checkpoint) -> str | None:
        """The checkpoint's ``files_fingerprint`` (waits for its hashing), or None."""
        known, value = self.files_own(ckpt)
        if known:
            return value
        return start_fingerprint(ckpt.source, self.digests, answer_files)()

    def filled(self, ckpt: Checkpoint) -> Checkpoint:
        """``ckpt`` with both fingerprints (waits for their hashing)."""
        value, files = self.of(ckpt), self.files_of(ckpt)
        if (value, files) != (ckpt.fingerprint, ckpt.files_fingerprint):
            ckpt = replace(ckpt, fingerprint=value, files_fingerprint=files)
        return self.coded(ckpt)

    def code(self, ckpt: Checkpoint) -> str | None:
        """The checkpoint's ``remote_code`` where its ``auto_map`` names code: the code files'
        fingerprint where the sweep trusts it, else "not run" (`backends.fingerprints.
        remote_code`; a few small files, never the weights). None for weights in memory, a
        GGUF file's copy, or a model naming none (a hub id's config not yet in the cache:
        `code_unknown`)."""
        if ckpt.source == IN_MEMORY or provenance(ckpt.source) is not None:
            return None
        found = remote_code(ckpt.source, ckpt.revision, self.trusted, self.digests)
        return found.get("remote_code")

    def coded(self, ckpt: Checkpoint) -> Checkpoint:
        """``ckpt`` with its `code`."""
        code = self.code(ckpt)
        return replace(ckpt, remote_code=code) if code and code != ckpt.remote_code else ckpt

    @staticmethod
    def code_unknown(ckpt: Checkpoint) -> bool:
        """Whether the checkpoint is a hub id listed without ``remote_code``: its config may
        not have been in the cache before it loaded (`loaded` reads it then)."""
        return (ckpt.remote_code is None and ckpt.source != IN_MEMORY
                and provenance(ckpt.source) is None
                and not Path(ckpt.source).expanduser().is_dir())

    @staticmethod
    def movable(ckpt: Checkpoint) -> bool:
        """Whether the checkpoint is a hub id whose revision may move (not a commit): its
        ``commit`` is known only once it has loaded (`loaded`)."""
        return (ckpt.source != IN_MEMORY and provenance(ckpt.source) is None
                and hub_commit(ckpt.source, ckpt.revision) is not None)

    def loaded(self, ckpt: Checkpoint) -> Checkpoint:
        """`filled`, with the commit a hub checkpoint loaded: call it once it has loaded."""
        ckpt = self.filled(ckpt)
        commit = hub_commit(ckpt.source, ckpt.revision) if ckpt.source != IN_MEMORY else None
        return replace(ckpt, commit=commit) if commit and commit != ckpt.commit else ckpt

    def close(self) -> None:
        self.digests.close()


@contextlib.contextmanager
def fingerprints(trusted: bool = False) -> Iterator[Fingerprints]:
    """Fingerprints over the cache, saved (and background hashing abandoned) at the end; its
    digests are the ones the loader's tokenizer key uses meanwhile (``fingerprints.shared``).
    ``trusted``: the sweep loads with ``trust_remote_code`` (`Fingerprints.code`)."""
    prints = Fingerprints(trusted=trusted)
    try:
        with shared(prints.digests):
            yield prints
    finally:
        prints.close()


def files_folder(ckpt: Checkpoint) -> Path | None:
    """The folder whose `answer_files` a checkpoint's ``files_fingerprint`` covers: a local
    model folder holding any; None for a hub id, weights in memory or a GGUF file's converted
    copy (the file's SHA-256, its fingerprint, covers the tokenizer and template inside it)."""
    if ckpt.source == IN_MEMORY or provenance(ckpt.source) is not None:
        return None
    folder = Path(ckpt.source).expanduser()
    return folder if folder.is_dir() and answer_files(folder) else None


def fingerprint(ckpt: Checkpoint) -> str | None:
    """The checkpoint's content fingerprint, or None where it has no local files."""
    with fingerprints() as prints:
        return prints.of(ckpt)


def with_fingerprints(checkpoints: Sequence[Checkpoint], prints: Fingerprints | None = None,
                      later: frozenset[str] = frozenset(), trusted: bool = False
                      ) -> list[Checkpoint]:
    """The checkpoints with their fingerprints (weights' and files', and ``remote_code``)
    filled in, hashed in parallel; those whose identity is in ``later`` only where the cache
    knows both (the rest are hashed while the sweep loads them, see ``runfile.admit``).
    ``trusted``: as `fingerprints`, where ``prints`` is not given."""
    if prints is None:
        with fingerprints(trusted) as own:
            return with_fingerprints(checkpoints, own, later)
    for ckpt in checkpoints:
        if ckpt.identity not in later:
            prints.start(ckpt)  # every file at once, before any is waited for
    out = [(prints.cached(ckpt) or ckpt) if ckpt.identity in later else prints.filled(ckpt)
           for ckpt in checkpoints]
    prints.digests.save()
    return out


def recorded(entry: dict[str, Any]) -> str | None:
    """The fingerprint a run.json checkpoint entry records (an older run's GGUF entry: its
    file's SHA-256); None where the run never recorded one."""
    made = entry.get("gguf")
    value = entry.get("fingerprint") or (made.get("sha256") if isinstance(made, dict) else None)
    return str(value) if value else None
