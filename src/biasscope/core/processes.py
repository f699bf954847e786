"""Which process wrote a temporary file: this host's name and whether a pid still runs.

Temporary files are named after their writer (``HOST~pid``), so a later run removes those of
killed writers on this host and leaves live work, and other hosts' files, alone.
"""

from __future__ import annotations

import os
import re
import socket

HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (one we may not signal counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
