"""``biasscope audit`` (formerly ``biasscope probe``): ask a model every item of the audit
probes and read its answers with their detectors."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.audit import job

    if args.command == "probe":
        print("biasscope: `biasscope probe` is now `biasscope audit` (a probe is what the audit "
              "asks); the old name goes in a later release", file=sys.stderr)
    result = job.run(A.from_args(
        job.AuditConfig, args, probes=A.probe_list(args, list(job.DEFAULT_PROBES)),
        backend=A.backend_config(args), prompting=A.from_args(job.Prompting, args)))
    summary = result.summary
    if unknown := summary.get("unknown_response_ids") or []:
        print(f"biasscope: {len(unknown)} response ids match no item of these probes, e.g. "
              f"{', '.join(unknown[:5])} (listed in summary.json)", file=sys.stderr)
    print(f"run: {result.store.root}  summary: {result.store.summary_json}  "
          f"report: {result.report}")
    if summary.get("failed_requests"):
        return A.failed(summary["failed_requests"], summary["requests"], "requests",
                        summary["first_error"])
    return 0


def register(sub: Any) -> None:
    audit = sub.add_parser("audit", aliases=["probe"], help="fairness audit: "
                           "adult-counterfactual, professional-bias, bbq")
    audit.add_argument("--model", help="model spec: a local dir or hub id (hf: optional), "
                       "openai:MODEL, openai-compatible:URL#MODEL or litellm:PROVIDER/MODEL")
    audit.add_argument("--responses", help="JSONL of {item_id, response} produced elsewhere "
                       "(instead of --model; see `biasscope items`)")
    audit.add_argument("--name", help="model name for --responses (default: the file's name)")
    A.probe_arg(audit, "audit probe to ask; bbq:Age,Religion selects BBQ categories",
                "adult-counterfactual, professional-bias and bbq")
    A.probe_data_args(audit)
    A.templates_arg(audit)
    audit.add_argument("--out", required=True, type=A.run_dir,
                       help="run directory (reused runs resume)")
    audit.add_argument("--scoring", choices=["auto", "options", "generate"], default="auto",
                       help="auto: option scoring for local hf: models, generation otherwise; "
                       "options on an openai-compatible: server scores each option from the "
                       "echo of the plain prompt + option (llama.cpp: --logits_all true)")
    audit.add_argument("--max-tokens", type=A.positive_int, default=64)
    audit.add_argument("--temperature", type=A.non_negative_float, default=0.0)
    audit.add_argument("--seed", type=A.seed)
    audit.add_argument("--top-logprobs", type=A.non_negative_int, default=0,
                       help="generate: ask for the N likeliest first tokens and read the "
                       "options' probabilities from them (where their first tokens differ)")
    audit.add_argument("--plain-prompt", action="store_true",
                       help="ask as one plain prompt ('user: ...' lines, then 'assistant:'; "
                       "a server gets it on /completions) instead of a chat: how a base model "
                       "without a chat template reads it")
    A.backend_args(audit)
    audit.set_defaults(func=run)
