"""``biasscope judge`` (a debiased LLM judge) and ``biasscope judge-audit`` (its own biases)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from biasscope.cli import args as A


def judge(args: argparse.Namespace) -> int:
    from biasscope.judge import job

    done = job.judge(A.from_args(job.JudgeConfig, args))
    for sentence in done.result["sentences"][:2]:
        print(sentence)
    print(f"verdicts: {Path(args.out) / 'verdicts.jsonl'}  report: {done.report}")
    return 0


def audit(args: argparse.Namespace) -> int:
    from biasscope.judge import job

    done = job.biases(A.from_args(job.JudgeConfig, args))
    print("\n".join(done.result["sentences"]) + f"\nreport: {done.report}")
    return 0


def register(sub: Any) -> None:
    from biasscope.judge.job import JudgeConfig

    for name, func, about in (("judge", judge, "LLM-as-judge without name, position or model "
                               "bias"), ("judge-audit", audit, "measure a judge's own biases")):
        parser = sub.add_parser(name, help=about)
        A.settings(parser, JudgeConfig, skip=() if name == "judge" else ("aggregate",))
        A.backend_args(parser)
        parser.set_defaults(func=func)
