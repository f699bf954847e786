"""``biasscope sensitivity``: how strongly reward models respond to constitutional principles."""

from __future__ import annotations

import argparse
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.sensitivity import job

    templates = {name: getattr(args, f"{name}_template") for name in
                 ("critique", "revision", "away") if getattr(args, f"{name}_template")}
    done = job.run(A.from_args(
        job.SensitivityConfig, args, reward_models=args.reward_model, templates=templates,
        directions=("toward", "away") if args.direction == "both" else (args.direction,),
        backend=A.backend_config(args), reward=A.from_args(
            job.RewardScoring, args, chat_template=not args.no_chat_template)))
    if done.prompts.sentence():
        print(done.prompts.sentence())
    print(done.perturber.usage.line())
    for sentence in (done.summary.get("sanity") or {}).get("sentences", []):
        print(sentence)
    print(f"run: {done.store.root}  summary: {done.store.summary_json}  report: {done.report}")
    if failed := done.summary.get("incomplete"):
        return A.failed(failed["failed_requests"], failed["requests"], "perturbations",
                        failed["first_error"])
    return 0


def register(sub: Any) -> None:
    from biasscope.sensitivity.job import RewardScoring, SensitivityConfig

    sens = sub.add_parser("sensitivity", help="constitutional sensitivity of reward models")
    sens.add_argument("--reward-model", action="append", required=True,
                      help="hub id[@revision] or local dir of a sequence-classification reward "
                      "model, or NAME=SPEC; repeat for several")
    sens.add_argument("--direction", choices=["toward", "away", "both"], default="toward",
                      help="revise to conform more (toward), less (away), or both")
    for name, about in (("critique", "critique request ({conversation}, {query}, {response}, "
                         "{principle})"), ("revision", "revision request (also {critique})"),
                        ("away", "revision request for --direction away")):
        sens.add_argument(f"--{name}-template", help=f"file: {about}")
    sens.add_argument("--no-chat-template", action="store_true",
                      help="score the plain hh-rlhf format instead of the chat template")
    for config in (SensitivityConfig, RewardScoring):
        A.settings(sens, config)
    A.backend_args(sens)
    sens.set_defaults(func=run)
