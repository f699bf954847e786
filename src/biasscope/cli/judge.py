"""``biasscope judge`` (a debiased LLM judge) and ``biasscope judge-audit`` (its own biases)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from biasscope.cli import args as A


def judge(args: argparse.Namespace) -> int:
    from biasscope.judge import job

    done = job.judge(A.from_args(job.JudgeConfig, args, analysis=A.levels_given(args)))
    said = done.result["sentences"][0 if done.failed is None else 1:]  # failures: below
    # The first two, and every one that says what was left out or not measured: those in
    # summary.json alone went unseen. The rest is in the report.
    notes = done.result.get("notes", [])
    for k, sentence in enumerate(said):
        if k < 2 or sentence in notes:
            print(sentence)
    print(f"verdicts: {Path(args.out) / 'verdicts.jsonl'}  report: {done.report}")
    if done.report is not None:  # a summary written by this call
        _warn_thin(args)
    if done.failed is not None:  # its items left out, or kept as an earlier call stored them
        total = done.result["items"] + done.failed.items
        print(f"biasscope: {done.failed.sentence(total, 'judge requests')}", file=sys.stderr)
        return 1
    return 0


def audit(args: argparse.Namespace) -> int:
    from biasscope.judge import job

    done = job.biases(A.from_args(job.JudgeConfig, args, analysis=A.levels_given(args)))
    if done.failed is not None:
        print(f"biasscope: {done.failed.requests} of {done.failed.of} judge requests failed "
              f"(e.g. {done.failed.first_error}); the measures would count them as the "
              "judge's answers, so none were written; rerun the same command to retry them",
              file=sys.stderr)
        return 1
    print("\n".join(done.result["sentences"]) + f"\nreport: {done.report}")
    _warn_thin(args)
    return 0


def _warn_thin(args: argparse.Namespace) -> None:
    """`A.warn_thin` of the summary.json the call wrote (the levels given over the run's)."""
    from biasscope.store.directory import RunStore

    store = RunStore(Path(args.out))
    if store.summary_json.is_file():
        A.warn_thin(store.read_json("summary.json"))


def register(sub: Any) -> None:
    from biasscope.judge.settings import JudgeConfig

    for name, func, about in (("judge", judge, "LLM-as-judge without name, position or model "
                               "bias"), ("judge-audit", audit, "measure a judge's own biases")):
        parser = sub.add_parser(name, help=about)
        # judge-audit asks in the fixed order and its reverse: no --position, --samples
        A.settings(parser, JudgeConfig,
                   skip=() if name == "judge" else ("aggregate", "position", "samples"))
        A.backend_args(parser)
        A.levels_args(parser)
        parser.set_defaults(func=func)
