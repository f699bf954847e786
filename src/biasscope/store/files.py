"""Files written whole or not at all, with one-line errors that say what to do (a full disk, a
read-only folder), and the leftovers of killed writers cleaned up on this host only."""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import json_safe as json_safe  # its home is below the probes
from biasscope.core.processes import HOST, alive

_TMP = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9-]+)~(?P<pid>\d+)\.[^.]+\.tmp$")


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write through a temp file in the same folder, flushed and renamed into place: a
    killed writer leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o666 & ~_umask()
    # Host and pid in the name let a later run tell a dead writer's leftovers from live work.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{HOST}~{os.getpid()}.",
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


_FIXES = {
    errno.ENOSPC: "no space left on device; free disk space",
    errno.EDQUOT: "disk quota exceeded; free space or raise the quota",
    errno.EACCES: "permission denied; fix the folder's permissions",
    errno.EPERM: "operation not permitted; fix the folder's permissions",
    errno.EROFS: "read-only file system; use a writable --out",
}


def write_error(path: Path, exc: OSError) -> BiasscopeError:
    """One line that says what to do, since a traceback for a full disk helps nobody."""
    fix = _FIXES.get(exc.errno or 0)
    if fix is None:
        return BiasscopeError(f"cannot write {path}: {exc.strerror or exc}")
    return BiasscopeError(f"cannot write {path}: {fix}, then run the same command again "
                          "(finished units are kept)")


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; an OSError becomes a one-line BiasscopeError."""
    try:
        atomic_write(path, lambda h: h.write(data))
    except OSError as exc:
        raise write_error(path, exc) from None


def move_aside(path: Path, why: str) -> Path:
    """Rename ``path`` to ``<name>.<why>-<n>`` (the first n free): kept, never read again."""
    n = 1
    while (aside := path.with_name(f"{path.name}.{why}-{n}")).exists():
        n += 1
    try:
        os.replace(path, aside)
    except OSError as exc:
        raise write_error(aside, exc) from None
    return aside


def remove_stale_temp_files(folder: Path) -> list[Path]:
    """Delete temp files left by killed writers on this host; others' live work is kept."""
    removed = []
    for path in folder.glob(".*.tmp") if folder.is_dir() else []:
        match = _TMP.match(path.name)
        if match and match["host"] == HOST and not alive(int(match["pid"])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def json_line(obj: Any) -> str:
    """One line of a JSONL run file, strict as ``write_json``'s: NaN and inf are null (read
    back as None; a reader that computes with them turns it back into NaN)."""
    return json.dumps(json_safe(obj), ensure_ascii=False, allow_nan=False) + "\n"


def write_json(path: Path, obj: Any) -> None:
    text = json.dumps(json_safe(obj), indent=2, allow_nan=False, default=str)
    write_bytes(path, (text + "\n").encode())
