"""``biasscope compare`` (two runs: equivalent within a margin, different, too few items or
inconclusive)
and ``biasscope power`` (items needed; the smallest gap a run could detect)."""

from __future__ import annotations

import argparse
from typing import Any

from biasscope.cli import args as A


def compare(args: argparse.Namespace) -> int:
    from biasscope.compare import job
    from biasscope.report.claims import text

    result = job.run(A.from_args(job.CompareConfig, args))
    print(text(result.summary) + f"\n\ncomparison: {result.json_path}  page: {result.html_path}")
    return 0


def power(args: argparse.Namespace) -> int:
    from biasscope.compare.power import PowerConfig, plan

    print("\n".join(plan(A.from_args(PowerConfig, args))["sentences"]))
    return 0


def register(sub: Any) -> None:
    from biasscope.compare.settings import CompareConfig, PowerConfig

    cmp = sub.add_parser("compare", help="is run B as fair as run A? TOST per headline measure")
    cmp.add_argument("run_a", type=A.run_dir)
    cmp.add_argument("run_b", type=A.run_dir)
    A.settings(cmp, CompareConfig)
    cmp.set_defaults(func=compare)
    A.settings(sub.add_parser("power", help="items needed for an effect; a run's detectable "
                              "effect"), PowerConfig)
    sub.choices["power"].set_defaults(func=power)
