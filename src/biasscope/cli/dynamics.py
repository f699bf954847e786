"""``biasscope dynamics``: fairness across training checkpoints; ``biasscope drop``: take
checkpoints out of such a run again.

``drop`` is a command of its own, not a flag of ``dynamics``: it scores nothing, so none
of the sweep's flags would mean anything beside it, and a sweep that lists a checkpoint while
dropping it would say two things at once. It takes the run as ``biasscope report`` does."""

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
    summary = result.store.read_json("summary.json")
    A.warn_thin(summary)
    # A checkpoint run.json lists that this call was not given (moved, deleted, another glob).
    if isinstance(left := summary.get("unfinished"), dict):
        print(f"warning: {unfinished.sentence(left, result.store.root)}", file=sys.stderr)
    return 0


def drop(args: argparse.Namespace) -> int:
    from biasscope.core.steps import quiet
    from biasscope.dynamics.drop import drop as dropped

    with quiet(args.quiet):
        result = dropped(args.run, args.checkpoints, args.data_dir)
    print(f"dropped {', '.join(result.dropped)}: their units are in {result.folder}  "
          f"summary: {result.store.summary_json}  report: {result.report}")
    return 0


def register(sub: Any) -> None:
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.settings import DynamicsConfig, Executing, Performance

    dyn = sub.add_parser("dynamics", help="fairness across training checkpoints")
    A.analysis_args(dyn)
    for config in (DynamicsConfig, Performance, HFConfig, Executing):
        A.settings(dyn, config)
    dyn.set_defaults(func=run)

    out = sub.add_parser("drop", help="take checkpoints out of a dynamics run")
    out.add_argument("run", type=A.run_dir, help="run directory or URL")
    out.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT",
                     help="model@revision as the run's run.json names it (several: one "
                          "after another); its units move to RUN/dropped/<time>/, and the "
                          "summary and report are written again without it")
    out.add_argument("--data-dir", help="local copy of the datasets, for the occupation "
                     "statistics (<data-dir>/winogender/occupations-stats.tsv)")
    out.add_argument("--quiet", action="store_true",
                     help="no line on stderr as the analysis and the report start")
    out.set_defaults(func=drop)
