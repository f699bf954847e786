"""``biasscope generate``: a JSONL file of requests answered by any backend."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.backends.base import GenerateParams
    from biasscope.generate import batch

    params = GenerateParams(
        temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed,
        stop=tuple(args.stop or ()), top_logprobs=args.top_logprobs,
        logprobs=args.top_logprobs > 0)
    usage, seconds = batch.run(batch.GenerateConfig(args.model, args.input, args.out, params,
                                                    A.backend_config(args)))
    rate = usage.sent / seconds if seconds > 0 else 0.0
    print(f"{args.out}: {usage.line()}; {seconds:.1f}s ({rate:.1f} requests/s sent)")
    if usage.failed:
        print(f"biasscope: {usage.failed} of {usage.requests} requests failed (their 'error' "
              f"field says why, e.g. {usage.first_error}); run the same command again to "
              "retry only those", file=sys.stderr)
    return 1 if usage.failed else 0


def register(sub: Any) -> None:
    gen = sub.add_parser("generate", help="answer a JSONL file of prompts with any backend")
    gen.add_argument("--model", required=True, help="a local dir or hub id (hf: optional), "
                     "openai:MODEL, openai-compatible:URL#MODEL, litellm:PROVIDER/MODEL")
    gen.add_argument("--input", required=True, help="JSONL: {id, prompt} or {id, messages}, "
                     "optionally options")
    gen.add_argument("--out", required=True, help="JSONL of generations")
    gen.add_argument("--temperature", type=A.non_negative_float, default=0.0)
    gen.add_argument("--max-tokens", type=A.positive_int, default=256)
    gen.add_argument("--seed", type=A.seed)
    gen.add_argument("--stop", action="append", help="stop string; repeatable")
    gen.add_argument("--top-logprobs", type=A.non_negative_int, default=0,
                     help="ask for per-token logprobs with this many alternatives")
    A.backend_args(gen)
    gen.set_defaults(func=run)
