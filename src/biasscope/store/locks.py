"""The run's lock: one process at a time reads and rewrites ``run.json`` (``fcntl`` on POSIX,
an exclusive lock file elsewhere)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

from biasscope.core.errors import BiasscopeError
from biasscope.store.directory import RunStore
from biasscope.store.files import write_error

try:
    import fcntl
except ImportError:  # Windows: an O_EXCL lock file instead
    fcntl = None  # type: ignore[assignment]

LOCK = ".run.lock"  # a dot file: never taken for a run file, never uploaded


@contextlib.contextmanager
def run_lock(store: RunStore, wait_s: float = 600.0) -> Iterator[None]:
    """Hold the run's lock file: one process at a time reads and rewrites ``run.json``."""
    path = store.root / LOCK
    store.check_same_folder()  # never recreate a folder deleted under this run
    try:
        store.root.mkdir(parents=True, exist_ok=True)
        if fcntl is not None:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.lockf(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
                    break
                except FileExistsError:
                    if time.monotonic() > deadline:
                        raise BiasscopeError(f"{path} is held by another biasscope; if none "
                                             "is running, delete it") from None
                    time.sleep(0.05)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        store.check_same_folder()
        yield
    finally:
        if fcntl is not None:
            fcntl.lockf(fd, fcntl.LOCK_UN)
        os.close(fd)
        if fcntl is None:
            path.unlink(missing_ok=True)
