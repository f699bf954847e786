"""A run directory at an fsspec URL (``s3://bucket/run``, ``gs://…``, ``memory://…``).

The workers of a cluster share one run through it. Each process works in a local staging
folder (under ``$BIASSCOPE_CACHE_DIR/runs``, default ``~/.cache/biasscope/runs``) that every
Path-based reader uses unchanged; `RunStore` pulls the remote's files into it and pushes each
file it writes. Object stores make each upload atomic, so it is one put; other filesystems
(sftp, hdfs, …) get a temp name and a move.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from biasscope.core.cache_root import cache_root
from biasscope.core.errors import BiasscopeError, install_hint
from biasscope.core.processes import HOST

# Object stores: a put is atomic (the object appears whole or not at all) and a move is a copy.
_ATOMIC_PUT = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss",
                         "memory"})
_EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}


def is_remote(root: str | Path) -> bool:
    return isinstance(root, str) and "://" in root and not root.startswith("file://")


class Remote:
    """The remote side of a run: list, read and write its files by name relative to the run."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        try:
            from fsspec.core import url_to_fs  # only remote runs need fsspec

            self.fs, path = url_to_fs(self.url)
        except ImportError as exc:
            extra = _EXTRAS.get(self.url.split("://", 1)[0], "remote")
            raise BiasscopeError(f"cannot open run {self.url}: {exc}; "
                                 f"{install_hint(extra)}") from None
        except ValueError as exc:
            raise BiasscopeError(f"cannot open run {self.url}: {exc}") from None
        self.path = str(path).rstrip("/")

    @property
    def staging(self) -> Path:
        """This machine's local copy of the run."""
        return cache_root() / "runs" / hashlib.sha256(self.url.encode()).hexdigest()[:16]

    def files(self) -> dict[str, Any]:
        """Every file of the run (relative name -> size), listed afresh; {} for a new run."""
        try:
            self.fs.invalidate_cache(self.path)  # listings other workers made stale
            found = self.fs.find(self.path, detail=True)
        except FileNotFoundError:
            return {}
        except Exception as exc:  # fsspec backends raise their own types
            raise self._error(f"list {self.url}", exc) from None
        return {str(name).rstrip("/")[len(self.path):].lstrip("/"): info.get("size")
                for name, info in found.items()}

    def pull(self, relative: str) -> bytes | None:
        """One file's bytes, or None if the remote has no such file."""
        try:
            return bytes(self.fs.cat_file(f"{self.path}/{relative}"))
        except FileNotFoundError:
            return None
        except Exception as exc:  # fsspec backends raise their own types
            raise self._error(f"read {self.url}/{relative}", exc) from None

    def push(self, relative: str, data: bytes) -> None:
        """Write one file whole: readers see the old file or the new one, never a part."""
        target = f"{self.path}/{relative}"
        try:
            protocols = self.fs.protocol
            if _ATOMIC_PUT & ({protocols} if isinstance(protocols, str) else set(protocols)):
                self.fs.pipe_file(target, data)
                return
            folder, _, name = target.rpartition("/")
            tmp = f"{folder}/.{name}.{HOST}~{os.getpid()}.{os.urandom(4).hex()}.tmp"
            self.fs.pipe_file(tmp, data)
            try:
                self.fs.mv(tmp, target)
            except NotImplementedError:  # no move here: the direct put is all there is
                self.fs.rm(tmp)
                self.fs.pipe_file(target, data)
        except Exception as exc:  # fsspec backends raise their own types
            raise self._error(f"upload {self.url}/{relative}", exc) from None

    def remove(self, relative: str) -> None:
        """Delete one file; one that is gone already is fine."""
        try:
            self.fs.rm_file(f"{self.path}/{relative}")
        except FileNotFoundError:
            return
        except Exception as exc:  # fsspec backends raise their own types
            raise self._error(f"delete {self.url}/{relative}", exc) from None

    @staticmethod
    def _error(what: str, exc: Exception) -> BiasscopeError:
        return BiasscopeError(f"cannot {what} ({type(exc).__name__}: {exc}); check the URL and "
                              "credentials, then run the same command again (finished units "
                              "are kept)")
