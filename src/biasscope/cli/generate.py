"""``biasscope generate``: a JSONL file of requests answered by any backend."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.backends.base import GenerateParams
    from biasscope.generate import batch

    params = A.from_args(GenerateParams, args, stop=tuple(args.stop or ()),
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
    from biasscope.backends.base import GenerateParams

    gen = sub.add_parser("generate", help="answer a JSONL file of prompts with any backend")
    gen.add_argument("--model", required=True, help="a local dir, .gguf file or hub id (hf: "
                     "optional), openai:MODEL, openai-compatible:URL#MODEL, litellm:PROVIDER/MODEL")
    gen.add_argument("--input", required=True, help="JSONL: {id, prompt} or {id, messages}, "
                     "optionally options")
    gen.add_argument("--out", required=True, help="JSONL of generations")
    gen.add_argument("--stop", action="append", help="stop string; repeatable")
    A.settings(gen, GenerateParams)
    A.backend_args(gen)
    gen.set_defaults(func=run)
