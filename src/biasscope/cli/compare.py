"""``biasscope compare`` (two runs: equivalent, different or inconclusive within a margin)
and ``biasscope power`` (items needed; the smallest gap a run could detect)."""

from __future__ import annotations

import argparse
from typing import Any

from biasscope.cli import args as A


def compare(args: argparse.Namespace) -> int:
    from biasscope.compare import job
    from biasscope.report.claims import text

    result = job.run(A.from_args(job.CompareConfig, args, margin=tuple(args.margin or ())))
    print(text(result.summary) + f"\n\ncomparison: {result.json_path}  page: {result.html_path}")
    return 0


def power(args: argparse.Namespace) -> int:
    from biasscope.compare.power import PowerConfig, plan

    print("\n".join(plan(A.from_args(PowerConfig, args))["sentences"]))
    return 0


def register(sub: Any) -> None:
    cmp = sub.add_parser("compare", help="is run B as fair as run A? TOST per headline measure")
    cmp.add_argument("run_a", type=A.run_dir)
    cmp.add_argument("run_b", type=A.run_dir)
    cmp.add_argument("--margin", action="append", help="equivalence margin: a number for every "
                     "measure or MEASURE=NUMBER (repeatable); defaults in docs/claims.md")
    cmp.add_argument("--alpha", type=A.probability, default=0.05)
    cmp.add_argument("--out", type=A.run_dir, default="comparison")
    cmp.set_defaults(func=compare)
    pw = sub.add_parser("power", help="items needed for an effect; a run's detectable effect")
    pw.add_argument("--effect", type=A.positive_float,
                    help="size of the difference to detect, in the measure's units")
    pw.add_argument("--sd", type=A.positive_float, help="per-item standard deviation")
    pw.add_argument("--pilot", type=A.run_dir, help="a finished run to plan from")
    pw.add_argument("--alpha", type=A.probability, default=0.05)
    pw.add_argument("--power", type=A.probability, default=0.8)
    pw.add_argument("--design", choices=["two-groups", "paired"], default="two-groups")
    pw.add_argument("--margin", type=A.positive_float, help="plan for equivalence within ±this")
    pw.set_defaults(func=power)
