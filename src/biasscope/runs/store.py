"""The run directory: ``run.json``, ``records/<unit>.parquet``, ``summary.json``.

A unit (model, revision, probe, seed) is the unit of work and of storage. Every file is
written to a temporary name in the same directory, flushed to disk and renamed into place,
so a killed run leaves either a whole unit file or none, and resumes without double counts.

Renames do not protect against later damage (a bad disk, a bad copy, a truncating sync), so
each unit's SHA-256 goes to ``checksums/<unit>.parquet.sha256`` (``sha256sum`` format; kept
out of ``records/`` so that folder holds only records), written after the parquet. A unit
counts as done only when it matches; a damaged one is moved aside to
``records/<unit>.parquet.corrupt-<n>`` (kept, never read) and redone.

``root`` may also be an fsspec URL (``s3://bucket/run``, ``gs://…``, ``memory://…``), so the
workers of a cluster share one run. Then ``root`` is a local staging folder (a cache of the
remote, under ``$BIASSCOPE_CACHE_DIR/runs`` or ``~/.cache/biasscope/runs``) that every
Path-based reader uses unchanged: the remote's files are pulled into it on construction, a
unit missing there is pulled by ``has``, and each unit written is uploaded, parquet then
checksum. Other files are uploaded by ``publish``. Object stores make each upload atomic, so
it is one put; other filesystems (sftp, hdfs, …) get a temp name and a move. ``file://`` is a
plain local path.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import math
import os
import re
import socket
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from biasscope.errors import BiasscopeError

RECORDS = "records"
CHECKSUMS = "checksums"
_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"
# Object stores: a put is atomic (the object appears whole or not at all) and a move is a copy.
_ATOMIC_PUT = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss",
                         "memory"})
_TMP = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9-]+)~(?P<pid>\d+)\.[^.]+\.tmp$")


@dataclass(frozen=True)
class Unit:
    model: str
    revision: str | None
    probe: str
    seed: int
    step: int | None = None

    @property
    def key(self) -> str:
        """A file-safe, collision-free name: readable parts plus a short hash of the exact ones."""
        exact = json.dumps([self.model, self.revision, self.probe, self.seed])
        digest = hashlib.sha256(exact.encode()).hexdigest()[:10]
        parts = [self.model.replace("/", "--"), self.revision or "main", self.probe,
                 f"seed{self.seed}"]
        safe = "__".join(re.sub(r"[^A-Za-z0-9._=-]+", "_", p) for p in parts)
        return f"{safe}__{digest}"


def _atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o666 & ~_umask()
    # Host and pid in the name let a later run tell a dead writer's leftovers from live work.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_HOST}~{os.getpid()}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)  # mkstemp makes 0600; results should be as readable as any file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


class CorruptUnitWarning(UserWarning):
    """A unit file failed its checksum and was moved aside to be redone."""


_FIXES = {
    errno.ENOSPC: "no space left on device; free disk space",
    errno.EDQUOT: "disk quota exceeded; free space or raise the quota",
    errno.EACCES: "permission denied; fix the folder's permissions",
    errno.EPERM: "operation not permitted; fix the folder's permissions",
    errno.EROFS: "read-only file system; use a writable --out",
}


def _write_error(path: Path, exc: OSError) -> BiasscopeError:
    """One line that says what to do, since a traceback for a full disk helps nobody."""
    fix = _FIXES.get(exc.errno or 0)
    if fix is None:
        return BiasscopeError(f"cannot write {path}: {exc.strerror or exc}")
    return BiasscopeError(f"cannot write {path}: {fix}, then run the same command again "
                          "(finished units are kept)")


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; an OSError becomes a one-line BiasscopeError."""
    try:
        _atomic_write(path, lambda h: h.write(data))
    except OSError as exc:
        raise _write_error(path, exc) from None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temp_files(folder: Path) -> list[Path]:
    """Delete temp files left by killed writers on this host; others' live work is kept."""
    removed = []
    for path in folder.glob(".*.tmp") if folder.is_dir() else []:
        match = _TMP.match(path.name)
        if match and match["host"] == _HOST and not _alive(int(match["pid"])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _reads_as_parquet(data: bytes) -> bool:
    import pyarrow.parquet as pq

    try:
        pq.read_table(io.BytesIO(data))
    except Exception:  # pyarrow raises several types for a damaged file
        return False
    return True


def _json_safe(obj: Any) -> Any:
    """NaN and inf become null: strict JSON readers (browsers, jq, Go) reject them."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def write_json(path: Path, obj: Any) -> None:
    text = json.dumps(_json_safe(obj), indent=2, allow_nan=False, default=str)
    write_bytes(path, (text + "\n").encode())


def _staging_dir(url: str) -> Path:
    base = os.environ.get("BIASSCOPE_CACHE_DIR")
    cache = Path(base).expanduser() if base else Path.home() / ".cache" / "biasscope"
    return cache / "runs" / hashlib.sha256(url.encode()).hexdigest()[:16]


def _remote_error(what: str, exc: Exception) -> BiasscopeError:
    return BiasscopeError(f"cannot {what} ({type(exc).__name__}: {exc}); check the URL and "
                          "credentials, then run the same command again (finished units are "
                          "kept)")


class RunStore:
    """One run directory. Safe to share between processes: units never overlap."""

    def __init__(self, root: str | Path) -> None:
        text = root if isinstance(root, str) else ""
        self.remote: str | None = None  # the fsspec URL of a remote run, else None
        self.fs: Any = None  # its fsspec filesystem
        self._remote_path = ""  # the run's path on ``fs``
        if "://" in text and not text.startswith("file://"):
            self.remote = text.rstrip("/")
            try:
                from fsspec.core import url_to_fs  # only remote runs need fsspec

                self.fs, path = url_to_fs(self.remote)
            except ImportError as exc:
                extra = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}.get(
                    self.remote.split("://", 1)[0], "remote")
                raise BiasscopeError(f"cannot open run {self.remote}: {exc}; pip install "
                                     f"'biasscope[{extra}]'") from None
            except ValueError as exc:
                raise BiasscopeError(f"cannot open run {self.remote}: {exc}") from None
            self._remote_path = str(path).rstrip("/")
            root = _staging_dir(self.remote)
        elif text.startswith("file://"):
            root = text.removeprefix("file://")
        self.root = Path(root)
        self.records_dir = self.root / RECORDS
        self.checksums_dir = self.root / CHECKSUMS
        # key -> (size, mtime_ns) of a file already verified, so `has` hashes each file once.
        self._verified: dict[str, tuple[int, int]] = {}
        if self.fs is not None:
            self.refresh()

    def _remote(self, path: Path) -> str:
        """The remote name of a staged file: the same place under the remote root."""
        relative = path.resolve().relative_to(self.root.resolve())
        return f"{self._remote_path}/{relative.as_posix()}"

    def refresh(self) -> None:
        """Copy the remote's run files into staging: JSON files, units and their checksums
        (those other workers wrote since, too). A no-op for a local run."""
        if self.fs is None:
            return
        try:
            self.fs.invalidate_cache(self._remote_path)  # listings other workers made stale
            found = self.fs.find(self._remote_path, detail=True)
        except FileNotFoundError:
            return  # a new run
        except Exception as exc:  # fsspec backends raise their own types
            raise _remote_error(f"list {self.remote}", exc) from None
        for name, info in found.items():
            relative = str(name).rstrip("/")[len(self._remote_path):].lstrip("/")
            folder, _, base = relative.rpartition("/")
            wanted = ((folder == "" and base.endswith(".json"))
                      or (folder == RECORDS and base.endswith(".parquet"))
                      or (folder == CHECKSUMS and base.endswith(".parquet.sha256")))
            if not wanted or base.startswith("."):
                continue
            local = self.root / relative
            with contextlib.suppress(OSError):
                if local.stat().st_size == info.get("size") and folder:
                    continue  # a unit file is never rewritten in place: same size, same file
            self._pull(name, local)

    def _pull(self, name: str, local: Path) -> bool:
        """Copy one remote file into staging; False if the remote has no such file."""
        try:
            data = self.fs.cat_file(name)
        except FileNotFoundError:
            return False
        except Exception as exc:  # fsspec backends raise their own types
            raise _remote_error(f"read {self.remote}/{local.relative_to(self.root)}",
                                exc) from None
        write_bytes(local, bytes(data))
        return True

    def publish(self, path: Path) -> None:
        """Upload one staged file of a remote run (a no-op for a local run)."""
        if self.fs is None:
            return
        target = self._remote(Path(path))
        data = Path(path).read_bytes()
        try:
            protocols = self.fs.protocol
            if _ATOMIC_PUT & ({protocols} if isinstance(protocols, str) else set(protocols)):
                self.fs.pipe_file(target, data)
                return
            folder, _, name = target.rpartition("/")
            tmp = f"{folder}/.{name}.{_HOST}~{os.getpid()}.{os.urandom(4).hex()}.tmp"
            self.fs.pipe_file(tmp, data)
            try:
                self.fs.mv(tmp, target)
            except NotImplementedError:  # no move here: the direct put is all there is
                self.fs.rm(tmp)
                self.fs.pipe_file(target, data)
        except Exception as exc:  # fsspec backends raise their own types
            raise _remote_error(f"upload {self.remote}/{Path(path).relative_to(self.root)}",
                                exc) from None

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def summary_json(self) -> Path:
        return self.root / "summary.json"

    def unit_path(self, unit: Unit) -> Path:
        return self.records_dir / f"{unit.key}.parquet"

    def checksum_path(self, unit: Unit) -> Path:
        return self.checksums_dir / f"{unit.key}.parquet.sha256"

    def has(self, unit: Unit) -> bool:
        """Whether the unit is done: its file exists and matches its checksum.

        A damaged file is quarantined (with a CorruptUnitWarning) so the unit is redone. A file
        without a checksum (older biasscope, or killed between the two writes) is accepted if
        it reads as parquet, and its checksum is recorded then.
        """
        path = self.unit_path(unit)
        if self.fs is not None and not path.exists():  # pulled only if the remote has it
            if not self._pull(self._remote(path), path):
                return False
            self._pull(self._remote(self.checksum_path(unit)), self.checksum_path(unit))
        try:
            stat = path.stat()
        except FileNotFoundError:
            return False
        if self._verified.get(unit.key) == (stat.st_size, stat.st_mtime_ns):
            return True
        data = path.read_bytes()
        actual = hashlib.sha256(data).hexdigest()
        try:
            expected: str | None = self.checksum_path(unit).read_text().split()[0]
        except (FileNotFoundError, UnicodeDecodeError, IndexError):  # damaged: recheck
            expected = None
        if expected is None:
            if not _reads_as_parquet(data):
                self._quarantine(unit, "unreadable and has no checksum")
                return False
            # A read-only run can still be checked; a later writer records the checksum.
            with contextlib.suppress(BiasscopeError):
                self._write_checksum(unit, actual)
        elif expected != actual:
            self._quarantine(unit, f"SHA-256 {actual[:12]} is not the recorded {expected[:12]}")
            return False
        self._verified[unit.key] = (stat.st_size, stat.st_mtime_ns)
        return True

    def write_unit(self, unit: Unit, records: pd.DataFrame) -> Path:
        """Write the parquet, then its checksum: a unit without a valid pair is not done."""
        path = self.unit_path(unit)
        data = records.to_parquet(None, index=False)
        try:
            _atomic_write(path, lambda h: h.write(data))
        except OSError as exc:
            raise _write_error(path, exc) from None
        try:
            self._write_checksum(unit, hashlib.sha256(data).hexdigest())
        except BiasscopeError:
            path.unlink(missing_ok=True)  # half a unit would be adopted unchecked next time
            raise
        try:
            self.publish(path)
            self.publish(self.checksum_path(unit))
        except BiasscopeError:  # not shared yet: redo it rather than trust the staged copy
            path.unlink(missing_ok=True)
            self.checksum_path(unit).unlink(missing_ok=True)
            raise
        stat = path.stat()
        self._verified[unit.key] = (stat.st_size, stat.st_mtime_ns)
        return path

    def _write_checksum(self, unit: Unit, digest: str) -> None:
        write_bytes(self.checksum_path(unit), f"{digest}  {unit.key}.parquet\n".encode())

    def _quarantine(self, unit: Unit, why: str) -> None:
        """Move a damaged unit file aside: never read again, but kept for inspection."""
        path = self.unit_path(unit)
        n = 1
        while (aside := path.with_name(f"{path.name}.corrupt-{n}")).exists():
            n += 1
        try:
            os.replace(path, aside)
        except OSError as exc:
            raise _write_error(aside, exc) from None
        self.checksum_path(unit).unlink(missing_ok=True)
        self._verified.pop(unit.key, None)
        warnings.warn(f"records file {path} is damaged ({why}); moved to {aside.name}, "
                      "the unit will be redone", CorruptUnitWarning, stacklevel=3)

    def read_json(self, name: str) -> dict[str, Any]:
        path = self.root / name
        try:
            loaded: dict[str, Any] = json.loads(path.read_text())
        except FileNotFoundError:
            raise BiasscopeError(f"{path} not found: is {self.root} a biasscope run?") from None
        except json.JSONDecodeError as exc:
            raise BiasscopeError(f"{path} is not valid JSON (line {exc.lineno})") from None
        return loaded

    def unit_files(self) -> list[Path]:
        """Unit files only: the glob leaves out temp files and ``.corrupt-<n>`` quarantine."""
        return sorted(self.records_dir.glob("*.parquet"))

    def iter_units(self) -> Iterator[pd.DataFrame]:
        for path in self.unit_files():
            try:
                yield pd.read_parquet(path)
            except Exception as exc:  # pyarrow raises several types for a damaged file
                raise BiasscopeError(
                    f"records file {path} is unreadable ({type(exc).__name__}); delete it and "
                    "run the same command again to redo that unit") from None

    def records(self) -> pd.DataFrame:
        frames = list(self.iter_units())
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def unit_dict(self, unit: Unit) -> dict[str, Any]:
        return {**asdict(unit), "key": unit.key}
