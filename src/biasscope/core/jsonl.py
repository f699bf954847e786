"""Reading the JSONL files users hand us: every error names the file and line; and
``json_safe``, which keeps what we write strict JSON."""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from biasscope.core.errors import BiasscopeError, DataError


def json_safe(obj: Any) -> Any:
    """NaN and inf become null: strict JSON readers (browsers, jq, Go) reject them. Here, below
    every layer, so that a probe's record columns (``option_probs``) are strict too."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def read_text(path: str | os.PathLike[str], encoding: str = "utf-8",
              error: type[BiasscopeError] = BiasscopeError) -> str:
    """The text of a file the user gave or a data file, or one line (as ``error``) naming the
    file and, for bytes that are not UTF-8, the line they are on. A leading UTF-8 byte order
    mark (Notepad, PowerShell, Excel) is no text: it would make the first line invalid JSON."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig" if encoding == "utf-8" else encoding)
    except UnicodeDecodeError as exc:
        at = data.count(b"\n", 0, exc.start) + 1
        fix = "replace it with a fresh copy" if issubclass(error, DataError) else (
            "save the file as UTF-8")
        raise error(f"{path}:{at}: not UTF-8 text (byte 0x{data[exc.start]:02x}); {fix}"
                    ) from None


#: The longest texts biasscope takes from a user's files, checked before anything is expanded
#: or parsed: a JSONL line (a prompt, a response, a counterfactual text; about 250,000 tokens,
#: beyond any model's context) and a prompt template or principle, which is expanded once per
#: item (a 20 MB template line once filled 22 GB before the kernel killed the process).
MAX_LINE = 1_000_000
MAX_TEMPLATE = 20_000


def check_length(text: str, most: int, where: str, line: int, what: str) -> None:
    """A one-line error when ``text`` (starting on ``line`` of the file ``where``) is longer
    than ``most`` characters, naming the line where it passes the limit."""
    if len(text) > most:
        at = line + text.count("\n", 0, most)
        raise BiasscopeError(f"{where}:{at}: {what} has {len(text):,} characters, more than the "
                             f"{most:,} biasscope takes; shorten it")


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """(line number, value) for every non-blank line of ``path``; a line longer than
    ``MAX_LINE`` characters is a one-line error."""
    path = Path(path)
    lines = read_text(path).splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        check_length(line, MAX_LINE, str(path), number, "the line")
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise BiasscopeError(f"{path}:{number}: not valid JSON ({why(exc)})") from None
        if _ESCAPE.search(line) and (found := lone_surrogate(value)) is not None:
            raise BiasscopeError(f"{path}:{number}: a lone UTF-16 surrogate escape \\u"
                                 f"{ord(found):04x} (half of a character, not text any model or "
                                 "server can read); remove it or write the whole character")
        yield number, value


def line_id(record: dict[str, Any], number: int, where: str,
            error: type[BiasscopeError] = BiasscopeError) -> str:
    """A line's ``id`` as text (a non-empty string or an integer), else its line number: a
    null, boolean or object would come back as "None", "True" or its repr, naming no line."""
    if "id" not in record:
        return str(number)
    given = record["id"]
    if isinstance(given, bool) or not isinstance(given, str | int) or str(given) == "":
        raise error(f"{where}: 'id' {json.dumps(given)[:40]}: give a non-empty string or an "
                    "integer, or leave it out (the line number is then the id)")
    return str(given)


# A JSON escape in the surrogate range: only lines holding one need the walk below.
_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in any string of a JSON value (keys too), else None. JSON
    can spell one (``"\\ud800"``) though UTF-8 cannot encode it: a tokenizer, an HTTP client
    or a Parquet file refuses it later, far from the line it came from."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if (match := _SURROGATE.search(item)) is not None:
                return match.group()
        elif isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
    return None


def why(exc: Exception) -> str:
    """What is wrong with a JSON text, in a few words (a RecursionError has no message)."""
    return str(getattr(exc, "msg", "")) or "nested too deeply"


def read_option_file(path: str, option: str, most: int | None = None, *, what: str) -> str:
    """The UTF-8 text of a file an option names, or one line naming both; with ``most``, a
    template of at most that many characters. A path that is no file says to give ``what``
    (`given_file`), as every file flag does, not "cannot read (No such file or directory)"."""
    given_file(option, path, what)
    try:
        text = read_text(path)
        if most is not None:
            check_length(text, most, path, 1, "the template")
        return text
    except BiasscopeError as exc:
        raise BiasscopeError(f"{option} {exc}") from None


def given_file(flag: str, path: str, what: str) -> None:
    """One line naming ``flag`` for a path that is no file (empty, missing, a folder, a device
    or pipe): reading it said only "nofile.json: cannot read (No such file or directory)", an
    empty value (an unset "$VARIABLE") read the folder ``.``, and ``/dev/null`` was said not
    to exist."""
    if not path.strip():
        raise BiasscopeError(f"{flag} is empty: give {what}")
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL in it
        raise BiasscopeError(f"{flag} {path} does not exist: give {what}") from None
    except OSError as exc:  # a folder on the way that cannot be searched
        raise BiasscopeError(f"{flag} {path} cannot be read ({exc.strerror or exc}): give "
                             f"{what}") from None
    if stat.S_ISDIR(mode):
        raise BiasscopeError(f"{flag} {path} is a directory: give {what}")
    if not stat.S_ISREG(mode):
        kind = next((f" ({name})" for test, name in _KINDS if test(mode)), "")
        raise BiasscopeError(f"{flag} {path} is not a regular file{kind}: give {what}")


#: What a path that is neither a file nor a folder is, in words (`given_file`).
_KINDS = ((stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISFIFO, "a pipe"),
          (stat.S_ISSOCK, "a socket"))
