"""``biasscope sensitivity``: how strongly reward models respond to constitutional principles."""

from __future__ import annotations

import argparse
import os
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
    sens = sub.add_parser("sensitivity", help="constitutional sensitivity of reward models")
    sens.add_argument("--reward-model", action="append", required=True,
                      help="hub id[@revision] or local dir of a sequence-classification reward "
                      "model, or NAME=SPEC; repeat for several")
    sens.add_argument("--perturber", required=True, help="generate backend spec for critique "
                      "and revision, e.g. openai:gpt-4o-mini")
    sens.add_argument("--principles", default="ccai:top10",
                      help="ccai:topK, or a YAML / JSON / text file of principles")
    sens.add_argument("--prompts", default="hh-rlhf:harmless-base:200",
                      help="hh-rlhf:harmless-base:N, or a JSONL file of conversations")
    sens.add_argument("--out", required=True, type=A.run_dir,
                      help="run directory (reruns send no requests)")
    sens.add_argument("--direction", choices=["toward", "away", "both"], default="toward",
                      help="revise to conform more (toward), less (away), or both")
    sens.add_argument("--critique-template", help="file: critique request ({conversation}, "
                      "{query}, {response}, {principle})")
    sens.add_argument("--revision-template", help="file: revision request (also {critique})")
    sens.add_argument("--away-template", help="file: revision request for --direction away")
    sens.add_argument("--conventions", choices=["biasscope", "source"], default="biasscope",
                      help="index definitions: biasscope's (SD ddof=1, originals once in the "
                      "percentile pool, absolute-sum normalisation) or the source code's")
    sens.add_argument("--transform", choices=["logit", "probability", "logprob"],
                      default="logit", help="reward read from the model's logit")
    sens.add_argument("--no-chat-template", action="store_true",
                      help="score the plain hh-rlhf format instead of the chat template")
    sens.add_argument("--dtype", default="auto", choices=["auto", "float32", "float16",
                                                          "bfloat16"])
    sens.add_argument("--batch-size", type=A.positive_int, default=16)
    sens.add_argument("--max-tokens", type=A.positive_int, default=512, help="perturber's limit")
    sens.add_argument("--seed", type=A.seed, default=0, help="prompt shuffling and perturber seed")
    sens.add_argument("--sanity-pairs", type=A.non_negative_int, default=500, help="hh-rlhf "
                      "chosen/rejected pairs for each model's accuracy (0: none)")
    sens.add_argument("--unchanged-below", type=A.probability, default=0.05, help="normalised "
                      "edit distance under which a revision counts as unchanged")
    sens.add_argument("--exclude-unchanged", action="store_true", help="leave those out")
    sens.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"))
    A.backend_args(sens)
    sens.set_defaults(func=run)
