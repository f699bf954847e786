"""``biasscope counterfactual``: do reward models and judges score a text differently when
its gendered words and first names are swapped?"""

from __future__ import annotations

import argparse
import os
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.sensitivity import counterfactual_job as job
    from biasscope.sensitivity.job import RewardScoring

    done = job.run(A.from_args(
        job.CounterfactualConfig, args, reward_models=args.reward_model or (),
        judges=args.judge_model or (), backend=A.backend_config(args),
        reward=A.from_args(RewardScoring, args, chat_template=not args.no_chat_template)))
    for sentence in done.summary["sentences"]:
        print(sentence)
    print(f"report: {done.report}")
    return 0


def register(sub: Any) -> None:
    cf = sub.add_parser("counterfactual", help="demographic counterfactual audit of reward "
                        "models and judges")
    cf.add_argument("--reward-model", action="append", help="as in `sensitivity`; repeat")
    cf.add_argument("--judge-model", action="append", help="as in `judge --model`; repeat")
    cf.add_argument("--pairs", default="hh-rlhf:harmless-base:200",
                    help="hh-rlhf:harmless-base:N, or a JSONL file of pairs (docs/judging.md)")
    cf.add_argument("--labels", help="judge as a classifier: JSON of label name: description")
    cf.add_argument("--position", default="shuffle",
                    choices=["shuffle", "consensus", "permute", "fixed"])
    cf.add_argument("--out", required=True, type=A.run_dir, help="run directory")
    cf.add_argument("--transform", choices=["logit", "probability", "logprob"], default="logit")
    cf.add_argument("--no-chat-template", action="store_true")
    cf.add_argument("--seed", type=A.seed, default=0)
    cf.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"))
    A.backend_args(cf)
    cf.set_defaults(func=run)
