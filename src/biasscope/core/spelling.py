"""How a message names a setting: as the user gives it, ``--data-dir`` to the command and
``data_dir=`` to a Python call.

The library cannot tell who called it, so the command line says so (`on_command_line`, around
each command) and a message asks `option`: a notebook user told to "pass --data-dir" has no
such flag to pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_COMMAND_LINE: ContextVar[bool] = ContextVar("biasscope_command_line", default=False)


def option(name: str, value: str = "") -> str:
    """``--data-dir`` on the command line, ``data_dir=`` elsewhere, for the setting ``name``
    (written as its Python keyword); with ``value``: ``--data-dir DIR`` or ``data_dir=DIR``."""
    if _COMMAND_LINE.get():
        return "--" + name.replace("_", "-") + (f" {value}" if value else "")
    return f"{name}={value}"


@contextmanager
def on_command_line() -> Iterator[None]:
    """Within this block, messages name settings by their flags."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)
