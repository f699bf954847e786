"""Command-line values checked where they are parsed, so a bad one is one line, not a traceback.

Most flags are a config's documented settings (`settings`), checked by the same rule in the
library and here; the rest (``--seeds 0-99999999999`` once filled memory, a file standing
where the run directory should be) are checked by the types below. ``OneLineParser`` makes
argparse's own errors one line too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any, NoReturn

from biasscope.backends.redact import redact_urls
from biasscope.core.config import Check, documented
from biasscope.core.errors import BiasscopeError


def one_line(message: str) -> str:
    """``message`` with control characters escaped (a file name may hold a newline, and an
    error names files) and every URL's credentials masked (an error may quote a model spec
    such as ``openai-compatible:http://user:KEY@host/v1#m``)."""
    message = redact_urls(message)
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class OneLineParser(argparse.ArgumentParser):
    """An argument error is one line naming the command, with where to look for the usage.

    An option of one value given twice with two values is refused (`_Once`): argparse keeps
    the last, so a flag appended to a pasted command line (``--model canned:b`` after
    ``--model canned:a``) ran something other than the line seemed to say. Every parser of the
    command is of this class (``add_subparsers`` makes its own of its parent's class), so every
    plain option of every command is checked; repeatable ones (``append``) and switches are not
    store actions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)
        #: Per parse: each single value given so far, by dest: (option, its text, its value).
        self.given: dict[str, tuple[str, str, Any]] = {}
        self.value_text = ""  # the text of the value argparse converts now

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        """As argparse's; the text given is kept for `_once`'s message (the value may be a
        tuple: ``--seeds 0-4``)."""
        self.value_text = " ".join(arg_strings)
        return super()._get_values(action, arg_strings)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(one_line(f"{self.prog}: error: {message} (see {self.prog} --help)")
                         + "\n")
        sys.exit(2)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse's, with a hint where the arguments left over are the paths an unquoted
        ``--checkpoint-glob`` pattern expanded to (the shell gave its first as the value)."""
        parsed, rest = self.parse_known_args(args, namespace)
        if rest:
            self.error(f"unrecognized arguments: {' '.join(rest)}{_expanded(parsed, rest)}")
        return parsed

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse's, but an option given ``=--`` as its value is refused: argparse drops
        the ``--`` as the end of options and stores an empty list for an option of one value,
        unchecked by its type."""
        self.given = {}
        parsed, rest = super().parse_known_args(args, namespace)
        for action in self._actions:
            value = getattr(parsed, action.dest, None)
            if (isinstance(action, argparse._StoreAction) and action.nargs is None
                    and isinstance(value, list) and not value and value is not action.default):
                self.error(f"argument {'/'.join(action.option_strings)}: expected one "
                           "value, not '--'")
        return parsed, rest


def _once(parser: argparse.ArgumentParser, flag: str, dest: str, value: Any,
          option: str | None) -> None:
    """Refuse ``flag`` given a second time with another value (the same again is harmless);
    ``option`` is the spelling used (an old one, such as ``--templates`` for ``--wordings``).
    An option given ``=--`` (an empty list) is no value, and refused as such
    (`OneLineParser.parse_known_args`) where it stands alone; beside a value it counts as
    given, with the text ``--``: ``--out=-- --out X`` stored X unchecked, the ``--`` gone."""
    if not isinstance(parser, OneLineParser) or option is None:
        return
    text = parser.value_text
    if dest in parser.given:
        before, said, was = parser.given[dest]
        if said != text and was != value:
            first, then = ((f"{before} {said}", f"{option} {text}") if before != option
                           else (said, text))
            parser.error(f"{flag} given twice ({first}, then {then}): give it once")
    parser.given[dest] = (option, text, value)


class _Once(argparse._StoreAction):
    """argparse's store, of an option that is given once (`OneLineParser`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _once(parser, max(self.option_strings, key=len, default=self.dest), self.dest, values,
              option_string)
        super().__call__(parser, namespace, values, option_string)


def _expanded(parsed: argparse.Namespace, rest: list[str]) -> str:
    """A hint to quote ``--checkpoint-glob``'s pattern, where every argument in ``rest`` is an
    existing path beside the value the shell gave it (its first match); else ""."""
    given = [str(g).partition("=")[2] or str(g) for g in getattr(parsed, "checkpoint_globs",
                                                                    None) or []]
    for value in given:
        beside = [r for r in rest if Path(r).parent == Path(value).parent and Path(r).exists()]
        if Path(value).exists() and beside and len(beside) == len(rest):
            pattern = os.path.commonprefix([value, *rest]) + "*"  # noqa: RUF071 (names)
            return (f"; the shell expanded the --checkpoint-glob pattern into these paths: quote "
                    f"it so that biasscope reads every checkpoint, e.g. --checkpoint-glob "
                    f"'{pattern}'")
    return ""


def typed(check: Check) -> Callable[[str], Any]:
    """An argparse type from a setting's check: its reason, one line, naming the option."""
    def parse(text: str) -> Any:
        try:
            return check.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse



def _parsed(parse: Callable[[str], Any], flag: str) -> Callable[[str], Any]:
    def text(value: str) -> Any:
        try:
            return parse(value)
        except (BiasscopeError, ValueError) as exc:  # argparse names the flag already
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag} ")) from None
    return text


def settings(parser: argparse.ArgumentParser, config: Any, *only: str,
             skip: tuple[str, ...] = (), stored: bool = False,
             helps: Mapping[str, str] | None = None) -> None:
    """A flag for each documented field of ``config`` (`biasscope.core.config.setting`), or
    for those named: help, check, choices and default come from the library, so both say the
    same (``stored``: no default, the run's stored value stands; ``helps``: a field's help in
    the words of this command, by name)."""
    for f in documented(config):
        if f.name in skip or (only and f.name not in only):
            continue
        meta = f.metadata
        flag = meta["flag"] or "--" + f.name.replace("_", "-")
        kwargs: dict[str, Any] = {"dest": f.name,
                                  "help": (helps or {}).get(f.name, meta["help"])}
        if f.default is False or f.default is True:
            kwargs["action"] = "store_true" if f.default is False else "store_false"
        elif f.default is MISSING and f.default_factory is MISSING:
            kwargs["required"] = True
        elif not meta["many"] and not stored:
            kwargs["default"] = f.default
        if meta["many"]:
            kwargs["action"] = "append"
        if meta["check"] or meta["parse"]:
            kwargs["type"] = (_parsed(meta["parse"], flag) if meta["parse"]
                               else typed(meta["check"]))
        if meta["choices"]:
            kwargs["choices"] = meta["choices"]
        elif "action" not in kwargs or meta["many"]:
            kwargs["metavar"] = flag.removeprefix("--").replace("-", "_").upper()
        action = parser.add_argument(flag, **kwargs)
        # What the library uses when the flag is not given, for the reference page (a
        # repeatable or stored flag has no argparse default).
        action.library_default = None if f.default is MISSING else f.default  # type: ignore[attr-defined]
        action.stored = stored  # type: ignore[attr-defined]
        if meta["old"]:
            renamed(parser, meta["old"], f"{flag}")
        if meta["was"]:
            parser.add_argument(meta["was"], **{**kwargs, "action": _Was, "new": flag,
                                                "help": argparse.SUPPRESS})


def run_dir(text: str) -> str:
    """A run directory (``biasscope.store.directory.run_dir``), as an argparse type."""
    from biasscope.store.directory import run_dir as checked

    return str(_parsed(checked, "")(text))


class _Renamed(argparse.Action):
    """An option's old spelling: one line with the new one, never a silent alias."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.error(f"{option_string} is now {self.default}")


class _Was(argparse.Action):
    """A former spelling that still works: the value as the new flag takes it, and one line on
    stderr naming the new flag."""

    def __init__(self, *args: Any, new: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _once(parser, self.new, self.dest, values, option_string)
        print(f"biasscope: note: {option_string} is now {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def renamed(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Refuse ``old`` with a hint to ``new`` (hidden from --help)."""
    parser.add_argument(old, action=_Renamed, default=new, nargs="?", dest=f"_renamed_{old}",
                        help=argparse.SUPPRESS)


def analysis_args(parser: argparse.ArgumentParser) -> None:
    """The analysis settings a dynamics run and its report take; one not given keeps the value
    the run's last analysis stored (so no default here)."""
    from biasscope.dynamics.analysis.config import FLAGS, AnalysisConfig

    settings(parser, AnalysisConfig, *FLAGS, stored=True)


def levels_args(parser: argparse.ArgumentParser) -> None:
    """``--confidence`` and ``--resamples`` of a job that summarises at a level (``audit``,
    ``judge``, ``counterfactual``, ``sensitivity``): no default, the run's stored value stands
    (`biasscope.core.levels`)."""
    from biasscope.core.levels import Levels

    settings(parser, Levels, stored=True)


def analysis_given(args: argparse.Namespace) -> dict[str, Any]:
    """The analysis settings given on the command line (the others stay as stored)."""
    from biasscope.dynamics.analysis.config import FLAGS

    return {k: getattr(args, k) for k in FLAGS if getattr(args, k, None) is not None}


def warn_thin(summary: Any) -> None:
    """The summary's sentence that its level is too fine for its resamples
    (`biasscope.core.levels.thin_tails`), as a ``warning:`` line on stderr: the intervals
    stay at the level asked, so only the sentence tells their bounds are rough."""
    from biasscope.core.levels import said_thin

    if said := said_thin(summary):
        print(f"warning: {said}", file=sys.stderr)


def levels_given(args: argparse.Namespace) -> dict[str, Any]:
    """The levels given on the command line (`levels_args`; the others stay as stored)."""
    from biasscope.core.levels import NAMES

    return {k: getattr(args, k) for k in NAMES if getattr(args, k, None) is not None}


def from_args(config: Any, args: argparse.Namespace, **given: Any) -> Any:
    """``config`` (a dataclass) from the parsed flags of the same names and ``given``; a part that
    is itself a config (``HFConfig`` of ``DynamicsConfig``) from the same flags. A flag
    not given keeps the config's default."""
    values = {}
    for f in fields(config):
        value = getattr(args, f.name, None)
        if f.name in given:
            values[f.name] = given[f.name]
        elif is_dataclass(f.default_factory):
            values[f.name] = from_args(f.default_factory, args)
        elif value is not None or (f.default is None and hasattr(args, f.name)):
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return config(**values)


def backend_args(parser: argparse.ArgumentParser, *,
                 helps: Mapping[str, str] | None = None) -> None:
    """How to reach and pace a ``generate`` backend, and where its answers are cached;
    ``helps``: a flag's help in the command's words (``--dtype`` of ``sensitivity``, whose
    reward models take it too)."""
    from biasscope.backends.config import BackendConfig

    settings(parser, BackendConfig, helps=helps)


def failed(count: int, total: int, what: str, first_error: str) -> int:
    """Say that ``count`` of ``total`` requests failed and how to retry them; the exit code."""
    print(f"biasscope: {count} of {total} {what} failed (e.g. {first_error}); the results leave "
          "them out; rerun the same command to retry them", file=sys.stderr)
    return 1
