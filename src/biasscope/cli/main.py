"""biasscope: measure bias and fairness in language models.

The command is a thin layer over the library: each command's module maps its arguments to
one config object and makes one library call that a notebook can make too.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from biasscope.backends.redact import redact_urls
from biasscope.cli import args as A
from biasscope.core.errors import BiasscopeError
from biasscope.core.spelling import on_command_line

#: The command modules, in the order ``--help`` lists them; each has ``register(sub)``.
COMMANDS = ("dynamics", "report", "probes", "generate", "audit", "judge", "sensitivity",
            "compare", "intervene", "counterfactual")
#: What each module's ``register`` adds: command -> (aliases, its line in ``--help``). A command
#: line needs one command's arguments in full and only these of the others, so that
#: ``biasscope --help`` imports nothing that arguments need (pandas, SciPy, the job modules);
#: tests/cli/test_startup.py keeps this table equal to what ``register`` adds.
LISTED: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "dynamics": {"dynamics": ((), "fairness across training checkpoints"),
                 "drop": ((), "take checkpoints out of a dynamics run")},
    "report": {"report": ((), "rebuild the HTML report of a run from its records"),
               "demo": ((), "train a tiny model with injected bias and sweep it")},
    "probes": {"probes": ((), "every probe: the requests it takes, the data it needs, what it "
                              "measures"),
               "items": ((), "export a probe's items (ids, prompts) as JSONL"),
               "data": ((), "dataset downloads for air-gapped use")},
    "generate": {"generate": ((), "answer a JSONL file of prompts with any backend")},
    "audit": {"audit": (("probe",), "fairness audit: adult-counterfactual, professional-bias, "
                                    "bbq")},
    "judge": {"judge": ((), "LLM-as-judge without name, position or model bias"),
              "judge-audit": ((), "measure a judge's own biases")},
    "sensitivity": {"sensitivity": ((), "constitutional sensitivity of reward models")},
    "compare": {"compare": ((), "is run B as fair as run A? TOST per headline measure"),
                "power": ((), "items needed for an effect; a run's detectable effect")},
    "intervene": {"intervene": ((), "fine-tune twice (control, intervention) and compare")},
    "counterfactual": {"counterfactual": ((), "demographic counterfactual check of reward "
                                              "models and judges")},
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``command`` ("" for none), that command's arguments in full and
    every other command by its name and help only: what parsing one command line needs."""
    parser = A.OneLineParser(
        prog="biasscope", description="Measure bias and fairness in language models, with "
        "token-level precision and real statistics.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        listed = LISTED[name]
        if command is None or any(command == c or command in listed[c][0] for c in listed):
            importlib.import_module(f"biasscope.cli.{name}").register(sub)
            continue
        for each, (aliases, about) in listed.items():
            sub.add_parser(each, aliases=list(aliases), help=about)
    return parser


def command_of(argv: Sequence[str]) -> str:
    """The command a command line names ("" when it names none: ``biasscope --help``)."""
    return argv[0] if argv and not argv[0].startswith("-") else ""


def skip_exit_collection() -> None:
    """Once the command is done, freeze what is left so the interpreter's shutdown skips its
    last garbage collections: they walk every object torch and transformers made, about a
    second after a sweep's results are written (more than a small sweep's scoring). What the
    command writes is closed and flushed by then (atomic writes); only the command's own
    process does this, never a caller of ``main`` that lives on (``argv`` given)."""
    atexit.register(gc.freeze)


#: Commands that run no model, only NumPy on small matrices (`one_blas_thread`).
NO_MODEL = ("report",)


def one_blas_thread(command: str) -> None:
    """NumPy's OpenBLAS on one thread for a command in `NO_MODEL`, unless the user set
    ``OPENBLAS_NUM_THREADS``: its matrices are small, and OpenBLAS' other threads spin
    while they wait, about a tenth of a second of CPU per report that buys no speed. Set
    before NumPy loads (the library reads it then), only in the command's own process; a
    sweep keeps every thread (on some platforms torch's BLAS is OpenBLAS too)."""
    if command in NO_MODEL and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def is_own(category: type[Warning]) -> bool:
    """Whether a warning category is one of biasscope's (``CorruptUnitWarning``...)."""
    return category.__module__.split(".")[0] == "biasscope"


class _Masked:
    """A text stream that writes what it is given with every URL's credentials masked."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_urls(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding...
        return getattr(self._stream, name)


@contextmanager
def notes() -> Iterator[None]:
    """Within this block, biasscope's own warnings print as the command's other notes, one
    ``biasscope: note: ...`` line: Python's format adds the library's file, line and source
    line, which tell a user of the command nothing. Others keep Python's format, and the
    library outside the command its normal warnings (only the text is changed, so filters
    and callers that record warnings see them as before).

    Everything written to stderr in the block (notes, warnings, a failed request's text, which
    may quote a server's URL) has each URL's credentials masked here, as errors have
    (``args.one_line``): one place, not each of the prints."""
    default, stderr = warnings.formatwarning, sys.stderr

    def formatted(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  line: str | None = None) -> str:
        if is_own(category):
            return A.one_line(f"biasscope: note: {message}") + "\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = formatted
    sys.stderr = _Masked(stderr)
    try:
        yield
    finally:
        warnings.formatwarning = default
        sys.stderr = stderr


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if argv is None:  # the process is the command: `biasscope ...`, `python -m biasscope`
        skip_exit_collection()
        one_blas_thread(command_of(given))
    args = build_parser(command_of(given)).parse_args(given)
    try:
        with on_command_line(), notes():  # messages name settings by their flags (--data-dir)
            code: int = args.func(args)
    except BiasscopeError as exc:
        print(A.one_line(f"biasscope: error: {exc}"), file=sys.stderr)
        return 2
    except BrokenPipeError:  # `biasscope probes | head`: the reader left, nothing went wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print("biasscope: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except OSError as exc:  # the file system said no (a directory in the way, no permission)
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        what = f"{where}: {exc.strerror or exc}" if where else str(exc)
        print(A.one_line(f"biasscope: error: {what}"), file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
