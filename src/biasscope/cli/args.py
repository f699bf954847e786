"""Command-line values checked where they are parsed, so a bad one is one line, not a traceback.

The argparse types refuse what the command could only misread (``--limit 0`` once meant "no
limit", ``--concurrency 0`` was quietly 1, ``--seeds 0-99999999999`` filled memory); the
readers turn a file the user named into text or JSON with errors that name the option and the
file. ``OneLineParser`` makes argparse's own errors one line too.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from dataclasses import fields
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


def _number(text: str, whole: bool) -> float:
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        what = "a whole number" if whole else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not whole and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _checked(whole: bool, ok: Callable[[float], bool], why: str) -> Callable[[str], Any]:
    """An argparse type: a number (``whole``: an int) that ``ok`` accepts, else ``why``."""
    def check(text: str) -> Any:
        value = _number(text, whole)
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{value if whole else format(value, 'g')} {why}")
        return value
    return check


# A count that 0 would make meaningless (``--limit``); 0 or more (``--retries 0``: none);
# a seed NumPy and servers accept; ``--timeout``; ``--temperature``; ``--bias``.
positive_int = _checked(True, lambda v: v >= 1, "is not 1 or more")
non_negative_int = _checked(True, lambda v: v >= 0, "is negative: give 0 or more")
seed = _checked(True, lambda v: 0 <= v < 2**32, f"is not a seed from 0 to {2**32 - 1}")
positive_float = _checked(False, lambda v: v > 0, "is not above 0")
non_negative_float = _checked(False, lambda v: v >= 0, "is negative: give 0 or more")
probability = _checked(False, lambda v: 0.0 <= v <= 1.0, "is not between 0 and 1")


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


def templates_arg(parser: argparse.ArgumentParser) -> None:
    """``--templates``: the wordings every probe is asked under (docs/templates.md)."""
    parser.add_argument("--templates", help="ask every probe under several prompt wordings "
                        "and report how far each result holds across them: builtin (the "
                        "project's set), N (its first N) or a template file; default one "
                        "wording, as before")


def backend_args(parser: argparse.ArgumentParser) -> None:
    """How to reach and pace a ``generate`` backend, and where its answers are cached
    (`biasscope.backends.config.BackendConfig`)."""
    parser.add_argument("--base-url", help="server URL for openai / openai-compatible")
    parser.add_argument("--api-key-env", help="environment variable that holds the API key "
                        "(default OPENAI_API_KEY); keys are never written anywhere")
    parser.add_argument("--concurrency", type=positive_int, default=8,
                        help="requests in flight at once")
    parser.add_argument("--timeout", type=positive_float, default=60.0,
                        help="seconds per attempt")
    parser.add_argument("--retries", type=non_negative_int, default=5,
                        help="retries on 429/5xx/timeouts")
    parser.add_argument("--cache", help="response cache file (default "
                        "~/.cache/biasscope/responses.sqlite or $BIASSCOPE_RESPONSE_CACHE)")
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the cache")
    parser.add_argument("--device", default="auto", help="hf: auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--allow-pickle", action="store_true",
                        help="hf: load pickle weights (.bin/.pt), which can run code")


def from_args(config: Any, args: argparse.Namespace, **given: Any) -> Any:
    """``config`` (a dataclass) from the options of the same names, and ``given``."""
    known = {f.name: getattr(args, f.name) for f in fields(config) if hasattr(args, f.name)}
    return config(**{**known, **given})


def backend_config(args: argparse.Namespace) -> Any:
    from biasscope.backends.config import BackendConfig

    return from_args(BackendConfig, args)


def probe_data_args(parser: argparse.ArgumentParser) -> None:
    """Which items a probe asks: the Adult file and the --limit sample."""
    parser.add_argument("--base-rate", choices=["0.0", "0.5", "1.0"], default="0.5",
                        help="adult-counterfactual: DecodingTrust's test file whose share of "
                        "'yes' labels differs by this much between men and women")
    parser.add_argument("--limit", type=positive_int,
                        help="at most N items per probe: bbq samples whole "
                        "examples stratified by category (seed 0), winobias-gender whole "
                        "pro/anti pairs stratified by subset and answer (seed 0), adult keeps "
                        "whole pairs, others take the first N")
    parser.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"),
                        help="local copy of the datasets (<data-dir>/<source>/...)")


def failed(count: int, total: int, what: str, first_error: str) -> int:
    """Say that ``count`` of ``total`` requests failed and how to retry them; the exit code."""
    print(f"biasscope: {count} of {total} {what} failed (e.g. {first_error}); the results leave "
          "them out; rerun the same command to retry them", file=sys.stderr)
    return 1
