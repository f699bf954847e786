"""biasscope: measure bias and fairness in language models.

The command is a thin layer over the library: each command's module maps its arguments to
one config object and makes one library call that a notebook can make too.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from biasscope.cli import args as A
from biasscope.core.errors import BiasscopeError
from biasscope.core.spelling import on_command_line

#: The command modules, in the order ``--help`` lists them; each has ``register(sub)``.
COMMANDS = ("dynamics", "report", "probes", "generate", "audit", "judge", "sensitivity",
            "compare", "intervene", "counterfactual")


def build_parser() -> argparse.ArgumentParser:
    parser = A.OneLineParser(
        prog="biasscope", description="Measure bias and fairness in language models, with "
        "token-level precision and real statistics.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"biasscope.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with on_command_line():  # messages name settings by their flags (--data-dir)
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
