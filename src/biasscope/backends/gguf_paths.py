"""Where a GGUF file's converted copy and saved tokenizer live in ``$BIASSCOPE_GGUF_CACHE``,
and how a folder is written there whole: apart from `backends.gguf`, which reads the files
(their header, SHA-256, tokenizer and weights), because the fingerprints read this layout
(`provenance`: a folder that is a file's converted copy) and `backends.gguf` hashes through
the fingerprints' cache (`backends.fingerprints.FileDigests`): one module holding both would
import itself round.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from biasscope.core.processes import HOST, alive

SUFFIX = ".gguf"
PROVENANCE = "gguf.json"
TOKENIZERS = "tokenizers"  # <cache>/tokenizers/<sha256>/: a file's tokenizer alone
SAVED_TOKENIZER = "gguf-tokenizer.json"  # written last: what the folder was saved from
# ``.<sha256[:16]>-<host>~<pid>-<random>``; older biasscope wrote ``.<sha256[:16]>-<random>``.
_SCRATCH = re.compile(r"^\.[0-9a-f]{16}-(?:(?P<host>[A-Za-z0-9-]+)~(?P<pid>\d+)-)?[^/]*$")
_ABANDONED_S = 24 * 3600  # an old-style scratch folder untouched this long is a dead one's


def is_gguf(source: str | os.PathLike[str]) -> bool:
    return str(source).lower().endswith(SUFFIX)


def cache_root() -> Path:
    """``$BIASSCOPE_GGUF_CACHE``, else ``~/.cache/biasscope/gguf``."""
    chosen = os.environ.get("BIASSCOPE_GGUF_CACHE")
    return Path(chosen).expanduser() if chosen else Path.home() / ".cache" / "biasscope" / "gguf"


def provenance(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """What a converted cache directory was made from, or None for any other directory."""
    file = Path(directory) / PROVENANCE
    if not file.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(file.read_text())
    except (OSError, ValueError):
        return None
    return data


def scratch(parent: Path, sha: str) -> Path:
    """A new temporary folder in ``parent`` for the file ``sha``, named as
    `remove_stale_scratch` tells a dead process's."""
    return Path(tempfile.mkdtemp(prefix=f".{sha[:16]}-{HOST}~{os.getpid()}-", dir=parent))


def remove_stale_scratch(root: Path, sha: str) -> list[Path]:
    """Delete the temporary folders in ``root`` of killed conversions (or tokenizer saves) of
    the file ``sha``: those of a dead process on this host, and old-style ones (no process id)
    untouched for a day. One still running, here or on another host sharing the cache, keeps
    its folder."""

    removed = []
    for path in root.glob(f".{sha[:16]}-*") if root.is_dir() else []:
        match = _SCRATCH.match(path.name)
        if match is None or not path.is_dir():
            continue
        stale = False
        if match["pid"] is not None:
            stale = match["host"] == HOST and not alive(int(match["pid"]))
        else:
            with contextlib.suppress(OSError):
                stale = time.time() - path.stat().st_mtime > _ABANDONED_S
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


__all__ = ["PROVENANCE", "SAVED_TOKENIZER", "SUFFIX", "TOKENIZERS", "cache_root", "is_gguf",
           "provenance", "remove_stale_scratch", "scratch"]
