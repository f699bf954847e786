"""A job's settings, documented and range-checked where they are declared.

A config field made with `setting` carries its help text and its check; the command line turns
such fields into flags (``--batch-size`` for ``batch_size``) and a config checks them when it
is made (`check_settings`), so a notebook and the CLI refuse the same values in the same words
(``--limit 0`` once meant "no limit", ``--concurrency 0`` was quietly 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import Field, dataclass, field, fields
from typing import Any

from biasscope.core.errors import BiasscopeError


@dataclass(frozen=True)
class Check:
    """A number (``whole``: an int) that ``ok`` accepts; ``why`` follows the value when not."""

    whole: bool
    ok: Callable[[float], bool]
    why: str

    def problem(self, value: Any) -> str | None:
        """Why ``value`` fails this check (None when it passes)."""
        kinds = int if self.whole else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            return f"{value!r} is not {'a whole number' if self.whole else 'a number'}"
        if not math.isfinite(value):
            return f"{value!r} is not a finite number"
        return None if self.ok(value) else f"{value} {self.why}"

    def parse(self, text: str) -> int | float:
        """``text`` as the number it must be; ValueError saying why not."""
        what = "a whole number" if self.whole else "a number"
        try:
            value: int | float = int(text) if self.whole else float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not {what}") from None
        if not math.isfinite(value):
            raise ValueError(f"{text!r} is not a finite number")
        if not self.ok(value):
            raise ValueError(f"{value if self.whole else format(value, 'g')} {self.why}")
        return value


#: A count that 0 would make meaningless (``limit``); 0 or more (``retries``: none); a seed
#: NumPy and servers accept; a timeout; a temperature; a share such as the demo's ``bias``.
POSITIVE_INT = Check(True, lambda v: v >= 1, "is not 1 or more")
NON_NEGATIVE_INT = Check(True, lambda v: v >= 0, "is negative: give 0 or more")
SEED = Check(True, lambda v: 0 <= v < 2**32, f"is not a seed from 0 to {2**32 - 1}")
POSITIVE = Check(False, lambda v: v > 0, "is not above 0")
NON_NEGATIVE = Check(False, lambda v: v >= 0, "is negative: give 0 or more")
PROBABILITY = Check(False, lambda v: 0.0 <= v <= 1.0, "is not between 0 and 1")


def comma_entries(text: str) -> list[str]:
    """The entries of a comma-separated value (``a, b`` as ``["a", "b"]``; blank text as
    none); ValueError, saying what to do, for an empty entry (``a,,b``, ``a,``) or an entry
    given twice, which would otherwise be skipped or merged unsaid."""
    if not text.strip():
        return []
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise ValueError(f"{text.strip()!r} has an empty entry between commas; remove the "
                         "extra comma")
    if twice := list(dict.fromkeys(p for p in parts if parts.count(p) > 1)):
        raise ValueError(f"{text.strip()!r} names {', '.join(twice)} more than once; name "
                         "each once")
    return parts


def described(help: str, *, check: Check | None = None,
              choices: Sequence[str] | None = None, flag: str | None = None,
              many: bool = False, parse: Callable[[str], Any] | None = None,
              old: str | None = None, was: str | None = None) -> dict[str, Any]:
    """The metadata of a documented setting; ``field(metadata=described(...))`` declares a
    required one (type checkers read a bare ``field`` call as no default).

    ``flag``: the option's name where it is not ``--name-with-dashes`` (``--model`` for
    ``models``; ``--no-X`` for a setting that is on by default); ``many``: the option may be
    repeated, each value one more entry; ``parse``: how the command line's text becomes the
    value (a BiasscopeError or ValueError saying why not); ``old``: the flag's former spelling,
    refused with a pointer to the new one; ``was``: a former spelling that still works, with
    a one-line hint to the new one."""
    return {"help": help, "check": check, "choices": tuple(choices) if choices else None,
            "flag": flag, "many": many, "parse": parse, "old": old, "was": was}


def setting(default: Any, help: str, **how: Any) -> Any:
    """A config field with a default and its help; ``how``: as `described` takes."""
    return field(default=default, metadata=described(help, **how))


def documented(config: Any) -> list[Field[Any]]:
    """The fields of ``config`` (a dataclass or its type) made with `setting`."""
    return [f for f in fields(config) if "help" in f.metadata]


def check_settings(config: Any) -> None:
    """Refuse, in one line naming the setting, a value its check or choices do not allow.

    A list setting given as one string (``models="EleutherAI/pythia-160m"``,
    ``seeds="0-4"``) means what the flag given once means, not its characters: it is parsed
    as the command line parses it. Its entries must be of the annotated kind and pass the
    setting's check one by one (``seeds=[0.5]`` is refused, as ``--seeds 0.5`` is)."""
    for f in documented(config):
        value = getattr(config, f.name)
        if value is None or value is f.default:
            continue
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        check, choices = f.metadata["check"], f.metadata["choices"]
        if _listed(f):
            value = _as_list(f, flag, value)
            object.__setattr__(config, f.name, value)
            why = next(filter(None, (_entry_problem(f, check, v) for v in value)), None)
        else:
            why = check.problem(value) if check else None
            if choices and value not in choices:
                why = f"{value!r} is not one of {', '.join(choices)}"
        if why:
            raise BiasscopeError(f"{flag} ({f.name}): {why}")


#: The entry kinds a list setting's annotation may name.
_KINDS: dict[str, type] = {"str": str, "int": int}


def _listed(f: Field[Any]) -> bool:
    """Whether ``f`` holds a list of values (a repeatable flag, or a sequence annotation)."""
    outer = str(f.type).split("[", 1)[0].strip()
    return bool(f.metadata["many"]) or outer in ("Sequence", "tuple", "list")


def _as_list(f: Field[Any], flag: str, value: Any) -> Any:
    """``value`` as a list setting's value: a string as its flag's text, any other iterable
    but a mapping as its entries (a range or generator made a list, so run.json can hold it;
    a tuple where the annotation says so, so a frozen config stays hashable)."""
    if isinstance(value, str):
        parse = f.metadata["parse"]
        try:
            value = [value] if parse is None else parse(value)
        except ValueError as exc:
            raise BiasscopeError(f"{flag} ({f.name}): {exc}") from None
    elif isinstance(value, (bytes, dict)) or not hasattr(value, "__iter__"):
        raise BiasscopeError(f"{flag} ({f.name}): give a list, not {type(value).__name__} "
                             f"{value!r}")
    if str(f.type).startswith("tuple["):
        return tuple(value)
    return value if isinstance(value, (list, tuple)) else list(value)


def _entry_problem(f: Field[Any], check: Check | None, entry: Any) -> str | None:
    """Why one entry of a list setting is not allowed (None when it is)."""
    inner = str(f.type).partition("[")[2].split(",")[0].rstrip("]").strip()
    choices = f.metadata["choices"]
    if choices and entry not in choices:
        return f"{entry!r} is not one of {', '.join(choices)}"
    if check is not None:
        return check.problem(entry)
    kind = _KINDS.get(inner)
    if kind is str and not isinstance(entry, str):
        return f"{entry!r} is not text"
    if kind is int and (isinstance(entry, bool) or not isinstance(entry, int)):
        return f"{entry!r} is not a whole number"
    return None
