"""The run's lock: one process at a time reads and rewrites ``run.json`` (``fcntl`` on POSIX,
an exclusive lock file elsewhere).

Re-entrant within a thread: a ``fcntl`` lock belongs to the process, so a second one taken on
the same file and closed would release the first (and an exclusive lock file would wait on
itself). A thread that holds the run's lock takes it again for free; another thread of the
process waits for it, as another process does.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from biasscope.core.errors import BiasscopeError
from biasscope.store.directory import RunStore
from biasscope.store.files import write_error

try:
    import fcntl
except ImportError:  # Windows: an O_EXCL lock file instead
    fcntl = None  # type: ignore[assignment]

LOCK = ".run.lock"  # a dot file: never taken for a run file, never uploaded


class _Held:
    """This process's hold on one lock file: the thread that has it, how deep, and how many
    blocks hold or wait for it (under `_GUARD`: the last to end forgets the file)."""

    def __init__(self) -> None:
        self.thread = threading.RLock()
        self.depth = 0
        self.users = 0


#: The lock files this process's blocks hold or wait for, by (pid: a forked child holds none,
#: lock file); an entry goes with its last block, so a notebook sweeping many runs keeps none.
_HELD: dict[tuple[int, str], _Held] = {}
_GUARD = threading.Lock()


@contextlib.contextmanager
def run_lock(store: RunStore, wait_s: float = 600.0) -> Iterator[None]:
    """Hold the run's lock file: one process at a time reads and rewrites ``run.json``. Taken
    again inside itself (a drop settling a staged series), it is held on: the file stays
    locked until the outermost block ends."""
    path = store.root / LOCK
    key = (os.getpid(), str(path.absolute()))
    with _GUARD:  # counted before waiting: a thread waiting on it keeps the same entry
        held = _HELD.setdefault(key, _Held())
        held.users += 1
    try:
        with held.thread:
            if held.depth:
                store.check_same_folder()
                held.depth += 1
                try:
                    yield
                finally:
                    held.depth -= 1
                return
            with _locked(store, path, wait_s):
                held.depth = 1
                try:
                    yield
                finally:
                    held.depth = 0
    finally:
        with _GUARD:
            held.users -= 1
            if not held.users:
                del _HELD[key]


@contextlib.contextmanager
def _locked(store: RunStore, path: Path, wait_s: float) -> Iterator[None]:
    """The lock file ``path`` held by this process, once."""
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
