"""Command-line values checked where they are parsed, so a bad one is one line, not a traceback.

Most flags are a config's documented settings (`settings`), checked by the same rule in the
library and here; the rest (``--seeds 0-99999999999`` once filled memory, a file standing
where the run directory should be) are checked by the types below. ``OneLineParser`` makes
argparse's own errors one line too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, NoReturn

from biasscope.core.config import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    PROBABILITY,
    SEED,
    Check,
    documented,
)
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


def typed(check: Check) -> Callable[[str], Any]:
    """An argparse type from a setting's check: its reason, one line, naming the option."""
    def parse(text: str) -> Any:
        try:
            return check.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


positive_int, non_negative_int, seed = typed(POSITIVE_INT), typed(NON_NEGATIVE_INT), typed(SEED)
positive_float, non_negative_float = typed(POSITIVE), typed(NON_NEGATIVE)
probability = typed(PROBABILITY)


def settings(parser: argparse.ArgumentParser, config: Any, *only: str,
             skip: tuple[str, ...] = ()) -> None:
    """A flag for each documented field of ``config`` (`biasscope.core.config.setting`), or
    for those named: help, check, choices and default come from the library, so both say the
    same."""
    for f in documented(config):
        if f.name in skip or (only and f.name not in only):
            continue
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        options: dict[str, Any] = {"dest": f.name, "help": f.metadata["help"]}
        if f.default is False:
            options["action"] = "store_true"
        elif f.default is MISSING:
            options["required"] = True
        else:
            options["default"] = f.default
        if f.metadata["check"]:
            options["type"] = typed(f.metadata["check"])
        if f.metadata["choices"]:
            options["choices"] = f.metadata["choices"]
        if f.name == "out":
            options["type"] = run_dir
        parser.add_argument(flag, **options)


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


def performance_probe(text: str) -> str:
    """``lambada``, ``perplexity`` or ``perplexity:FILE`` (FILE checked now)."""
    name, colon, file = text.partition(":")
    if text in ("lambada", "perplexity") or (name == "perplexity" and colon and
                                             Path(file).expanduser().is_file()):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: give lambada, perplexity or perplexity:FILE "
                                     "(an existing file of held-out documents)")


class _Renamed(argparse.Action):
    """An option's old spelling: one line with the new one, never a silent alias."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.error(f"{option_string} is now {self.default}")


def renamed(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Refuse ``old`` with a hint to ``new`` (hidden from --help)."""
    parser.add_argument(old, action=_Renamed, default=new, nargs="?", dest=f"_renamed_{old}",
                        help=argparse.SUPPRESS)


def analysis_args(parser: argparse.ArgumentParser) -> None:
    """The analysis options a dynamics run and its report take (`AnalysisOptions`)."""
    parser.add_argument("--correction", choices=["holm", "bh"],
                        help="multiple-comparison control across checkpoints (default holm)")
    parser.add_argument("--alpha", type=float, help="significance level (default 0.01)")
    parser.add_argument("--min-gap", type=float,
                        help="smallest JSD-P gap of interest, from 0 to ½ ln 2 ≈ 0.347 (the "
                        "largest possible gap): emergence needs a significant gap at least this "
                        "large (default 0: significance alone)")
    parser.add_argument("--budget", type=float,
                        help="performance loss allowed when recommending where to stop "
                        "(fraction of the final checkpoint's; default 0.02)")


def analysis_given(args: argparse.Namespace) -> dict[str, Any]:
    """The analysis options given on the command line (the others stay as stored)."""
    from biasscope.dynamics.analysis_options import FLAGS

    return {k: getattr(args, k) for k in FLAGS if getattr(args, k, None) is not None}


def probe_list(args: argparse.Namespace, default: list[str]) -> list[str]:
    """``--probe``, repeatable, each a probe spec or a comma list of them."""
    return list(args.probe or default)


def probe_arg(parser: argparse.ArgumentParser, what: str, default: str = "") -> None:
    """``--probe``, the one probe flag of every command: repeatable, comma lists accepted."""
    parser.add_argument("--probe", action="append", help=f"{what}; repeatable or a comma "
                        "list, e.g. --probe winobias-gender --probe bbq:Age,Religion "
                        "(`biasscope probes` lists them)" + (f"; default {default}" if default
                                                             else ""))
    renamed(parser, "--probes", "--probe (repeatable; comma lists are accepted)")


def from_args(config: Any, args: argparse.Namespace, **given: Any) -> Any:
    """``config`` (a dataclass) from the options of the same names, and ``given``."""
    known = {f.name: getattr(args, f.name) for f in fields(config) if hasattr(args, f.name)}
    return config(**{**known, **given})


def backend_args(parser: argparse.ArgumentParser) -> None:
    """How to reach and pace a ``generate`` backend, and where its answers are cached."""
    from biasscope.backends.config import BackendConfig

    settings(parser, BackendConfig)


def backend_config(args: argparse.Namespace) -> Any:
    from biasscope.backends.config import BackendConfig

    return from_args(BackendConfig, args)


def failed(count: int, total: int, what: str, first_error: str) -> int:
    """Say that ``count`` of ``total`` requests failed and how to retry them; the exit code."""
    print(f"biasscope: {count} of {total} {what} failed (e.g. {first_error}); the results leave "
          "them out; rerun the same command to retry them", file=sys.stderr)
    return 1
