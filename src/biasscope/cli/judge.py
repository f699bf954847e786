"""``biasscope judge`` (a debiased LLM judge) and ``biasscope judge-audit`` (its own biases)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from biasscope.cli import args as A


def _config(args: argparse.Namespace) -> Any:
    from biasscope.judge.job import JudgeConfig

    return A.from_args(JudgeConfig, args, models=args.model, backend=A.backend_config(args),
                       logit_bias=not args.no_logit_bias)


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


def _judge_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", required=True,
                        help="judge model spec (see `biasscope generate`), or NAME=SPEC to "
                        "label it NAME; repeat for several")
    parser.add_argument("--input", required=True, help="JSONL of {id, text} (with --labels) or "
                        "{id, prompt, a, b[, model_a, model_b]}")
    parser.add_argument("--labels", help="JSON object of label name: description")
    parser.add_argument("--out", required=True, type=A.run_dir, help="run directory")
    parser.add_argument("--position", default="shuffle",
                        choices=["shuffle", "consensus", "permute", "fixed"])
    parser.add_argument("--samples", type=A.positive_int,
                        help="permute: seeded orders (default: all)")
    parser.add_argument("--reasoning", action="store_true", help="chain of thought first")
    parser.add_argument("--keys", default="ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                        help="neutral answer keys, e.g. ABCD or 1,2,3")
    parser.add_argument("--no-logit-bias", action="store_true")
    parser.add_argument("--seed", type=A.seed, default=0)
    A.backend_args(parser)


def register(sub: Any) -> None:
    jud = sub.add_parser("judge", help="LLM-as-judge without name, position or model bias")
    _judge_args(jud)
    jud.add_argument("--aggregate", default="mean", choices=["mean", "majority"],
                     help="several judges: mean probabilities or majority vote")
    jud.set_defaults(func=judge)
    checked = sub.add_parser("judge-audit", help="measure a judge's own biases")
    _judge_args(checked)
    checked.set_defaults(func=audit)
