"""Command-line values checked where they are parsed, so a bad one is one line, not a traceback.

The argparse types refuse what the command could only misread (``--limit 0`` once meant "no
limit", ``--concurrency 0`` was quietly 1, ``--seeds 0-99999999999`` filled memory); the
readers turn a file the user named into text or JSON with errors that name the option and the
file. ``OneLineParser`` makes argparse's own errors one line too.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, NoReturn

from biasscope.core.errors import BiasscopeError


def one_line(message: str) -> str:
    """``message`` with control characters escaped: a file name may hold a newline, and an
    error names files."""
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class OneLineParser(argparse.ArgumentParser):
    """An argument error is one line naming the command, with where to look for the usage."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(one_line(f"{self.prog}: error: {message} (see {self.prog} --help)")
                         + "\n")
        sys.exit(2)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_int(text: str) -> int:
    """1 or more (a count that 0 would make meaningless, such as ``--limit``)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def non_negative_int(text: str) -> int:
    """0 or more (``--retries 0`` means no retry)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: give 0 or more")
    return value


def seed(text: str) -> int:
    """A random seed: a whole number from 0 to 2**32 - 1 (what NumPy and servers accept)."""
    value = _int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"{value} is not a seed from 0 to {2**32 - 1}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (``--timeout``)."""
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value:g} is not above 0")
    return value


def non_negative_float(text: str) -> float:
    """A finite number, 0 or more (``--temperature``, ``--gpus-per-unit``)."""
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value:g} is negative: give 0 or more")
    return value


def probability(text: str) -> float:
    """A number from 0 to 1 (``--bias``)."""
    value = _float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value:g} is not between 0 and 1")
    return value


def seed_spec(text: str) -> str:
    """``0-4`` or ``0,2,7``, checked now (a bounded number of seeds); kept as written."""
    from biasscope.backends.checkpoints import parse_seeds

    try:
        parse_seeds(text)
    except BiasscopeError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--seeds ")) from None
    return text


def run_dir(text: str) -> str:
    """A run directory (or an fsspec URL): refused now if a file stands where it should be."""
    from biasscope.store.remote import is_remote

    if not text.strip():
        raise argparse.ArgumentTypeError("give a directory")
    if is_remote(text):
        return text
    path = Path(text.removeprefix("file://")).expanduser()
    for place in (path, *path.parents):
        try:
            if not place.exists():
                continue
        except OSError as exc:  # a name too long for the file system, say
            raise argparse.ArgumentTypeError(f"{text}: {exc.strerror or exc}") from None
        if not place.is_dir():
            what = "is a file" if place == path else f"is inside the file {place}"
            raise argparse.ArgumentTypeError(f"{text} {what}: give a directory")
        break
    return text


def given(args: argparse.Namespace, defaults: dict[str, Any]) -> list[str]:
    """The options of ``defaults`` (dest -> default) that ``args`` sets otherwise, as written
    (``--scoring options``, ``--plain-prompt``): for refusing those another option makes
    meaningless, rather than ignoring them."""
    out = []
    for dest, default in defaults.items():
        value = getattr(args, dest)
        if value != default:
            flag = "--" + dest.replace("_", "-")
            out.append(flag if isinstance(value, bool) else f"{flag} {value}")
    return out


def read_text(path: str, option: str) -> str:
    """The UTF-8 text of a file an option names, or one line naming both."""
    from biasscope.core.jsonl import read_text

    try:
        return read_text(path)
    except BiasscopeError as exc:
        raise BiasscopeError(f"{option} {exc}") from None


_ENTRY: dict[str, type | tuple[type, ...]] = {
    "model": str, "revisions": list, "checkpoint_glob": str, "name": (str, type(None))}


def models_file(path: str) -> list[dict[str, Any]]:
    """The entries of ``--models-file``: ``{model[, revisions]}`` or ``{checkpoint_glob[,
    name]}`` objects, each field of the right type, or one line naming the entry and field."""
    where = f"--models-file {path}"
    try:
        loaded = json.loads(read_text(path, "--models-file"))
    except (json.JSONDecodeError, RecursionError) as exc:
        from biasscope.core.jsonl import why

        line = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise BiasscopeError(f"{where}: not valid JSON ({why(exc)}{line})") from None
    if not isinstance(loaded, list):
        raise BiasscopeError(f"{where}: expected a JSON list of entries")
    for number, entry in enumerate(loaded, start=1):
        if not isinstance(entry, dict) or not ({"model", "checkpoint_glob"} & set(entry)):
            raise BiasscopeError(f"{where}: entry {number} needs 'model' or 'checkpoint_glob'")
        for field, value in entry.items():
            kinds = _ENTRY.get(field)
            if kinds is None:
                raise BiasscopeError(f"{where}: entry {number} has an unknown field {field!r} "
                                     f"(use {', '.join(_ENTRY)})")
            listed: list[Any] = value if isinstance(value, list) else []
            if not isinstance(value, kinds) or not all(isinstance(r, str) for r in listed):
                want = "a list of strings" if field == "revisions" else "a string"
                raise BiasscopeError(f"{where}: entry {number}: {field!r} must be {want}, "
                                     f"not {json.dumps(value)[:40]}")
    return loaded
