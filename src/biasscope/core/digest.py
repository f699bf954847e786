"""A file's SHA-256, as every part of biasscope computes it.

Large blocks, read into one reused buffer: hashlib lets go of the GIL while it hashes and the
read while it waits, but each block takes the GIL back twice, and a thread running Python
beside the hash (a sweep's load or scoring) keeps it for up to the interpreter's switch
interval (5 ms) each time. With 8 MiB blocks a 2.8 GiB checkpoint took 5.3 s to hash beside a
sweep's load on an H200 (2.6 s of it on the CPU), and 6.0 s against 2.0 s alone beside a busy
Python thread on 2 cores; with 64 MiB blocks 2.8 s there (``bench/bench_hash.py``).
"""

from __future__ import annotations

import hashlib
import os
import threading

from biasscope.core.errors import BiasscopeError

#: Bytes read per step; a smaller file gets a buffer of its own size.
BLOCK = 1 << 26
_SMALLEST = 1 << 16  # a file that grows while it is read still goes in sizeable steps


def file_sha256(path: str | os.PathLike[str], stop: threading.Event | None = None) -> str:
    """The file's SHA-256 (hex); an unreadable file is a one-line error. ``stop``: abandon
    the read (nobody waits for it any more)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb", buffering=0) as handle:
            size = os.fstat(handle.fileno()).st_size
            buffer = bytearray(max(_SMALLEST, min(BLOCK, size)))
            view = memoryview(buffer)
            while count := handle.readinto(buffer):
                digest.update(view[:count])
                if stop is not None and stop.is_set():
                    raise BiasscopeError(f"{path}: hashing abandoned")
    except OSError as exc:
        raise BiasscopeError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return digest.hexdigest()


#: What a file's hash is kept against: size, mtime, ctime, inode, device. Any write to the file
#: (one that keeps its size and mtime too) changes its ctime, and another file renamed over it
#: its inode.
Stamp = tuple[int, int, int, int, int]


def stamp_of(stat: os.stat_result) -> Stamp:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev)


def settled(stat: os.stat_result, now_ns: int) -> bool:
    """Whether any later write must change the file's ctime: it lies further back than the
    timestamps' resolution (2 s where they are whole seconds, else 0.1 s: a kernel tick)."""
    resolution = 2_000_000_000 if stat.st_ctime_ns % 1_000_000_000 == 0 else 100_000_000
    return now_ns - stat.st_ctime_ns > resolution
