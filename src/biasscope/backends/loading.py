"""Loading a model directory: every way its files can be broken is one line, not a traceback.

``from_pretrained`` fails in several voices: ``SafetensorError`` for a truncated or garbage
``.safetensors`` file, ``RuntimeError`` when the weights' shapes do not fit ``config.json``
(after logging a many-line table of the mismatched keys). ``loading`` turns each into a
``ModelError`` naming the checkpoint; the table is held back while the load runs and only
shown if the load succeeds (it then tells of weights initialised afresh).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from biasscope.core.errors import ModelError


def _errors() -> tuple[type[Exception], ...]:
    """What ``loading`` turns into one line; the callers' own ``except`` already says what a
    missing file or a hub repo without safetensors (``OSError``, ``ValueError``) means."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # safetensors comes with transformers; without it nothing loads anyway
        return (RuntimeError,)
    return (RuntimeError, SafetensorError)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _why(exc: BaseException) -> str:
    """What is wrong, said for the user rather than for the library's developers."""
    text = str(exc)
    if type(exc).__name__ == "SafetensorError":
        return (f"a .safetensors file is damaged ({first_line(exc)}): it may be truncated or "
                "not a safetensors file; copy or download it again")
    if "ignore_mismatched_sizes" in text or "size mismatch" in text:
        return ("the weights' shapes do not fit its config.json (size mismatch): the config "
                "belongs to another model size; put the matching config.json beside the weights")
    return first_line(exc)


@contextmanager
def loading(what: str) -> Iterator[None]:
    """Around one ``from_pretrained`` call of ``what`` (e.g. "checkpoint step1000")."""
    logger = logging.getLogger("transformers")
    held: list[logging.LogRecord] = []

    class Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            held.append(record)

    handlers, hold = list(logger.handlers), Hold()
    for handler in handlers:
        logger.removeHandler(handler)
    logger.addHandler(hold)
    loaded = False
    try:
        yield
        loaded = True
    except _errors() as exc:
        raise ModelError(f"cannot load {what}: {_why(exc)}") from None
    finally:
        logger.removeHandler(hold)
        for handler in handlers:
            logger.addHandler(handler)
        for record in held if loaded else ():  # a failure's table would bury its one line
            logger.handle(record)
