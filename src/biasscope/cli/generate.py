"""``biasscope generate``: a JSONL file of requests answered by any backend."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from biasscope.cli import args as A


def run(args: argparse.Namespace) -> int:
    from biasscope.backends.base import GenerateParams
    from biasscope.generate import batch

    params = A.from_args(GenerateParams, args, logprobs=args.top_logprobs > 0)
    usage, seconds = batch.run(A.from_args(batch.GenerateConfig, args, params=params))
    rate = usage.sent / seconds if seconds > 0 else 0.0
    print(f"{args.out}: {usage.line()}; {seconds:.1f}s ({rate:.1f} requests/s sent)")
    if usage.failed:
        print(f"biasscope: {usage.failed} of {usage.requests} requests failed (their 'error' "
              f"field says why, e.g. {usage.first_error}); run the same command again to "
              "retry only those", file=sys.stderr)
    return 1 if usage.failed else 0


def register(sub: Any) -> None:
    from biasscope.backends.base import GenerateParams
    from biasscope.generate.settings import GenerateConfig

    gen = sub.add_parser("generate", help="answer a JSONL file of prompts with any backend")
    for config in (GenerateConfig, GenerateParams):
        A.settings(gen, config)
    A.backend_args(gen)
    gen.set_defaults(func=run)
