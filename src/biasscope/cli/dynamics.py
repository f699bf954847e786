"""``biasscope dynamics``: fairness across training checkpoints."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.dynamics import job
    from biasscope.dynamics.summary import unfinished

    result = job.run(A.from_args(job.DynamicsConfig, args, analysis=A.analysis_given(args)))
    print(f"run: {result.store.root}  summary: {result.store.summary_json}  "
          f"report: {result.report}")
    # A checkpoint run.json lists that this call was not given (moved, deleted, another glob).
    if isinstance(left := result.store.read_json("summary.json").get("unfinished"), dict):
        print(f"warning: {unfinished.sentence(left, result.store.root)}", file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.settings import DynamicsConfig, Executing, Performance

    dyn = sub.add_parser("dynamics", help="fairness across training checkpoints")
    A.analysis_args(dyn)
    for config in (DynamicsConfig, Performance, HFConfig, Executing):
        A.settings(dyn, config)
    dyn.set_defaults(func=run)
