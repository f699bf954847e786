"""``biasscope judge`` (a debiased LLM judge) and ``biasscope judge-audit`` (its own biases)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from biasscope.cli import args as A


def _config(args: argparse.Namespace) -> Any:
    from biasscope.judge.job import JudgeConfig

    return A.from_args(JudgeConfig, args)


def judge(args: argparse.Namespace) -> int:
    from biasscope.judge import job

    done = job.judge(_config(args))
    for sentence in done.result["sentences"][:2]:
        print(sentence)
    print(f"verdicts: {Path(args.out) / 'verdicts.jsonl'}  report: {done.report}")
    return 0


def audit(args: argparse.Namespace) -> int:
    from biasscope.judge import job

    done = job.audit(_config(args))
    for sentence in done.result["sentences"]:
        print(sentence)
    print(f"report: {done.report}")
    return 0


def register(sub: Any) -> None:
    from biasscope.judge.job import JudgeConfig

    for name, func, about in (("judge", judge, "LLM-as-judge without name, position or model "
                               "bias"), ("judge-audit", audit, "measure a judge's own biases")):
        parser = sub.add_parser(name, help=about)
        A.settings(parser, JudgeConfig, skip=() if name == "judge" else ("aggregate",))
        A.backend_args(parser)
        parser.set_defaults(func=func)
