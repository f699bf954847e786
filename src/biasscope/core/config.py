"""A job's settings, documented and range-checked where they are declared.

A config field made with `setting` carries its help text and its check; the command line turns
such fields into flags (``--batch-size`` for ``batch_size``) and a config checks them when it
is made (`check_settings`), so a notebook and the CLI refuse the same values in the same words
(``--limit 0`` once meant "no limit", ``--concurrency 0`` was quietly 1).
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

from biasscope.core.errors import BiasscopeError

T = TypeVar("T")


def percent_hint(value: Any) -> str:
    """Where a fraction is asked, what to write for a ``value`` that reads as a percentage
    (above 1, below 100: ``--alpha 5`` for 5%): ``": write 0.05 for 5%"``; "" for any other."""
    real = isinstance(value, (int, float)) and not isinstance(value, bool)
    if real and math.isfinite(value) and 1 < value < 100:
        return f": write {round(value / 100, 12):g} for {value:g}%"
    return ""


def written(value: Any) -> Any:
    """``value`` as a user writes it in a flag: a float without a spurious ``.0`` (``--alpha 5``
    parses as 5.0, and "--alpha 5.0" is not what they wrote); any other value as it is."""
    if isinstance(value, float) and math.isfinite(value) and float(f"{value:g}") == value:
        return f"{value:g}"
    return value


@dataclass(frozen=True)
class Check:
    """A number (``whole``: an int) that ``ok`` accepts; ``why`` follows the value when not.
    ``fraction``: a value refused that reads as a percentage says the fraction to write."""

    whole: bool
    ok: Callable[[float], bool]
    why: str
    fraction: bool = False

    def _why(self, value: float) -> str:
        return self.why + (percent_hint(value) if self.fraction else "")

    def problem(self, value: Any) -> str | None:
        """Why ``value`` fails this check (None when it passes)."""
        kinds = int if self.whole else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            return f"{value!r} is not {'a whole number' if self.whole else 'a number'}"
        if not math.isfinite(value):
            return f"{value!r} is not a finite number"
        return None if self.ok(value) else f"{value} {self._why(value)}"

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
            raise ValueError(f"{value if self.whole else format(value, 'g')} {self._why(value)}")
        return value


#: A count that 0 would make meaningless (``limit``); 0 or more (``retries``: none); a seed
#: NumPy and servers accept; a timeout; a temperature; a share such as the demo's ``bias``.
POSITIVE_INT = Check(True, lambda v: v >= 1, "is not 1 or more")
NON_NEGATIVE_INT = Check(True, lambda v: v >= 0, "is negative: give 0 or more")
SEED = Check(True, lambda v: 0 <= v < 2**32, f"is not a seed from 0 to {2**32 - 1}")
POSITIVE = Check(False, lambda v: v > 0, "is not above 0")
NON_NEGATIVE = Check(False, lambda v: v >= 0, "is negative: give 0 or more")
PROBABILITY = Check(False, lambda v: 0.0 <= v <= 1.0, "is not between 0 and 1", fraction=True)


def plain_scalar(value: Any) -> Any:
    """A NumPy scalar (``np.bool_``, ``np.int64``, ``np.float32`` ... as a notebook's arrays
    give them) as the Python bool, int or float it stands for, which the checks and run.json
    take; any other value as it is. NumPy is not imported for it."""
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        item = value.item()
        if isinstance(item, (bool, int, float)):
            return item
    return value


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
              old: str | None = None, was: str | None = None,
              numbers: bool = False) -> dict[str, Any]:
    """The metadata of a documented setting; ``field(metadata=described(...))`` declares a
    required one (type checkers read a bare ``field`` call as no default).

    ``flag``: the option's name where it is not ``--name-with-dashes`` (``--model`` for
    ``models``; ``--no-X`` for a setting that is on by default); ``many``: the option may be
    repeated, each value one more entry; ``parse``: how the command line's text becomes the
    value (a BiasscopeError or ValueError saying why not); ``old``: the flag's former spelling,
    refused with a pointer to the new one; ``was``: a former spelling that still works, with
    a one-line hint to the new one; ``numbers``: a text setting whose text may be a number
    (``--margin 0.02``) takes a number as that text."""
    return {"help": help, "check": check, "choices": tuple(choices) if choices else None,
            "flag": flag, "many": many, "parse": parse, "old": old, "was": was,
            "numbers": numbers}


def setting(default: Any, help: str, **how: Any) -> Any:
    """A config field with a default and its help; ``how``: as `described` takes."""
    return field(default=default, metadata=described(help, **how))


def same_setting(config: Any, name: str, default: Any = MISSING,
                 help: str | None = None) -> Any:
    """A field declared as ``config``'s setting ``name`` is (its help, check and default, or
    ``default`` and ``help``, the words of where it is used): a setting two configs hold, such
    as a command's flag and the library config it is handed to, is declared once, so both
    refuse the same values in the same words."""
    f = next(f for f in fields(config) if f.name == name)
    metadata = f.metadata if help is None else {**f.metadata, "help": help}
    return field(default=f.default if default is MISSING else default, metadata=metadata)


def documented(config: Any) -> list[Field[Any]]:
    """The fields of ``config`` (a dataclass or its type) made with `setting`."""
    return [f for f in fields(config) if "help" in f.metadata]


def check_settings(config: Any) -> None:
    """Refuse, in one line naming the setting, a value its check or choices do not allow.

    A list setting given as one string (``models="EleutherAI/pythia-160m"``,
    ``seeds="0-4"``) means what the flag given once means, not its characters: it is parsed
    as the command line parses it. Its entries must be of the annotated kind and pass the
    setting's check one by one (``seeds=[0.5]`` is refused, as ``--seeds 0.5`` is).

    Any other field must be of its annotated kind (`_scalar`): None only where the annotation
    allows it; a path (``Path("runs/a")``) stands for its text; text given for a number is
    the flag's text, parsed as the command line parses it (``limit="8"``); a number is text
    only where the setting says its text may be a number (``margin=0.02``) or it names one of
    the choices (``base_rate=0.5``). A setting whose flag's text is parsed is parsed now (an
    ``out`` where a file stands is refused before the run starts). A part (``scoring``,
    ``backend``...) given as a mapping of its settings is made from them.

    A setting is named as its flag and field (``--every (every)``), the words of a command
    and its library config alike; a config no command takes (``has_flags = False`` on its
    class: `LiveConfig`) names the field alone, the argument its caller wrote."""
    flagged = getattr(type(config), "has_flags", True)
    for f in fields(config):
        value = getattr(config, f.name)
        made = _part(f, value)
        if made is not value:
            object.__setattr__(config, f.name, made)
        if made is not value or value is f.default or _is_part(f):
            continue
        flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
        label = f"{flag} ({f.name})" if flagged and "help" in f.metadata else f.name
        check, choices = f.metadata.get("check"), f.metadata.get("choices")
        if _listed(f) and value is None:
            why = None if "None" in str(f.type) else "give a list, not None"
        elif _listed(f):
            value = _as_list(f, label, value)
            why = next(filter(None, (_entry_problem(f, check, v) for v in value)), None)
        else:
            value, why = _scalar(f, flag, value)
            if why is None and value is not None:
                why = check.problem(value) if check else None
                if choices and value not in choices:
                    why = f"{value!r} is not one of {', '.join(choices)}"
        if why:
            raise BiasscopeError(f"{label}: {why}")
        object.__setattr__(config, f.name, value)


#: What a value of each kind a scalar annotation may name is, in an error.
_WHAT = {"str": "text", "Path": "a path", "int": "a whole number", "float": "a number",
         "bool": "True or False"}


def _kinds(f: Field[Any]) -> set[str]:
    """The kinds of a plain annotation (``str | None``: str, None); empty for any other."""
    kinds = {part.strip() for part in str(f.type).split("|")}
    return kinds if kinds <= {*_WHAT, "None"} else set()


def _is(kind: str, value: Any) -> bool:
    if kind in ("int", "float") and isinstance(value, bool):
        return False
    return isinstance(value, {"str": str, "Path": os.PathLike, "int": numbers.Integral,
                              "float": numbers.Real, "bool": bool}[kind])


def _scalar(f: Field[Any], flag: str, value: Any) -> tuple[Any, str | None]:
    """``value`` as the kind ``f`` is annotated with, or why it is not (see `check_settings`)."""
    kinds = _kinds(f)
    if not kinds:
        return value, None
    value = plain_scalar(value)
    what = " or ".join(_WHAT[k] for k in _WHAT if k in kinds)
    if value is None:
        return value, None if "None" in kinds else f"give {what}, not None"
    if "str" in kinds and "Path" not in kinds and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if "str" in kinds and not isinstance(value, (str, bool)) and isinstance(value, numbers.Real):
        choices = f.metadata.get("choices") or ()
        same = [c for c in choices if _number(c) == value]
        if _text_number(f, value):
            value = str(value)
        elif same:
            value = same[0]
    if kinds & {"int", "float"} and "str" not in kinds and isinstance(value, str):
        check = f.metadata.get("check") or Check("int" in kinds, lambda v: True, "")
        try:
            value = check.parse(value)
        except ValueError as exc:
            return value, str(exc)
    if not any(_is(kind, value) for kind in kinds - {"None"}):
        return value, f"{value!r} is not {what}"
    parse = f.metadata.get("parse")
    if parse is not None and isinstance(value, (str, os.PathLike)):
        try:
            parsed = parse(os.fspath(value))
        except (BiasscopeError, ValueError) as exc:
            return value, str(exc).removeprefix(f"{flag} ")
        value = value if isinstance(value, os.PathLike) else parsed
    return value, None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def made(kind: type[T], value: Any, name: str) -> T:
    """``value`` as the config ``kind``: as it is, or made from a mapping of its settings
    (``scoring={"batch_size": 8}``, a refused one named ``scoring.batch_size``); anything else
    refused in one line naming ``name``."""
    if isinstance(value, kind):
        return value
    if isinstance(value, Mapping):
        names = {part.name for part in fields(kind) if part.init}  # type: ignore[arg-type]
        unknown = sorted(map(str, set(value) - names))
        if unknown:
            raise BiasscopeError(f"{name}: {kind.__name__} has no setting {', '.join(unknown)} "
                                 f"(it has {', '.join(sorted(names))})")
        try:
            return kind(**value)
        except BiasscopeError as exc:
            nested = _nested(str(exc), name, names)
            if nested == str(exc):
                raise
            raise type(exc)(nested) from None
    raise BiasscopeError(f"{name}: give {kind.__name__}(...) or a dict of its settings, not "
                         f"{type(value).__name__} {value!r}")


def _nested(message: str, part: str, names: set[str]) -> str:
    """A part's refusal of one of its settings (``names``) with the part's name before the
    setting's (``--concurrency (http.concurrency): …``, ``http.backoff: …``): the setting was
    given inside the dict ``part``, so the message says where. Any other message as it is."""
    flagged = re.match(r"(--[\w-]+) \(([\w.]+)\): ", message)
    if flagged and flagged[2].split(".")[0] in names:
        return f"{flagged[1]} ({part}.{flagged[2]}): {message[flagged.end():]}"
    bare = re.match(r"([\w.]+): ", message)
    if bare and bare[1].split(".")[0] in names:
        return f"{part}.{message}"
    return message


def _is_part(f: Field[Any]) -> bool:
    """Whether ``f`` is a part (a config of its own, ``scoring``) or a mapping."""
    kind = f.default_factory
    return ((isinstance(kind, type) and is_dataclass(kind))
            or str(f.type).split("[", 1)[0].strip() in ("Mapping", "dict"))


def _part(f: Field[Any], value: Any) -> Any:
    """A part (a config of its own) made from a mapping of its settings, refused when it is
    something else; a mapping checked as one; any other field's value as it is."""
    kind = f.default_factory
    if isinstance(kind, type) and is_dataclass(kind):
        return made(kind, value, f.name)
    outer = str(f.type).split("[", 1)[0].strip()
    if outer in ("Mapping", "dict") and not isinstance(value, Mapping):
        raise BiasscopeError(f"{f.name}: give a dict, not {type(value).__name__} {value!r}")
    return value


#: The entry kinds a list setting's annotation may name.
_KINDS: dict[str, type] = {"str": str, "int": int}


def _listed(f: Field[Any]) -> bool:
    """Whether ``f`` holds a list of values (a repeatable flag, or a sequence annotation)."""
    outer = str(f.type).split("[", 1)[0].strip()
    return bool(f.metadata.get("many")) or outer in ("Sequence", "tuple", "list")


def _as_list(f: Field[Any], label: str, value: Any) -> Any:
    """``value`` as a list setting's value: a string as its flag's text, any other iterable
    but a mapping as its entries (a range or generator made a list, so run.json can hold it;
    a tuple where the annotation says so, so a frozen config stays hashable)."""
    inner = _inner(f)
    if inner == "str" and isinstance(value, os.PathLike):
        value = os.fspath(value)  # one path: its text, as the flag given it once
    elif _text_number(f, value):
        value = [value]  # one number whose text the flag takes: one entry
    if isinstance(value, str):
        parse = f.metadata.get("parse")
        try:
            value = [value] if parse is None else parse(value)
        except ValueError as exc:
            raise BiasscopeError(f"{label}: {exc}") from None
    elif isinstance(value, (bytes, dict)) or not hasattr(value, "__iter__"):
        raise BiasscopeError(f"{label}: give a list, not {type(value).__name__} "
                             f"{value!r}")
    value = value if isinstance(value, (list, tuple)) else list(value)  # read a generator once
    if inner == "str" and any(isinstance(v, os.PathLike) or _text_number(f, v) for v in value):
        value = [os.fspath(v) if isinstance(v, os.PathLike) else str(v)
                 if _text_number(f, v) else v for v in value]
    if any(plain_scalar(v) is not v for v in value):  # NumPy's numbers (np.arange(3))
        value = [plain_scalar(v) for v in value]
    if str(f.type).startswith("tuple["):
        return tuple(value)
    return value


def _inner(f: Field[Any]) -> str:
    """The entry kind a list setting's annotation names (``Sequence[str]``: str)."""
    return str(f.type).partition("[")[2].split(",")[0].rstrip("]").strip()


def _text_number(f: Field[Any], value: Any) -> bool:
    """Whether ``value`` is a number a setting that takes numbers as text takes as its text."""
    return (bool(f.metadata.get("numbers")) and isinstance(value, numbers.Real)
            and not isinstance(value, bool))


def _entry_problem(f: Field[Any], check: Check | None, entry: Any) -> str | None:
    """Why one entry of a list setting is not allowed (None when it is)."""
    inner = _inner(f)
    choices = f.metadata.get("choices")
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
