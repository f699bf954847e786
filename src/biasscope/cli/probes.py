"""``biasscope probes`` (what each probe asks and measures), ``biasscope items`` (a probe's
items as JSONL, for answering elsewhere) and ``biasscope data fetch``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from biasscope.cli import args as A
from biasscope.data.sources import SOURCES


def listing(args: argparse.Namespace) -> int:
    from biasscope.probes import PROBES, REQUEST_KINDS

    if args.json:
        print(json.dumps([info.as_dict() for info in PROBES.values()], indent=2))
        return 0
    print("\n".join(info.describe() for info in PROBES.values()))
    print("\nrequest kinds:\n" + "\n".join(f"  {k}: {v}" for k, v in REQUEST_KINDS.items()))
    return 0


def items(args: argparse.Namespace) -> int:
    from biasscope.audit.job import ItemsConfig, export

    count, name = export(A.from_args(ItemsConfig, args))
    print(f"{args.out}: {count} items of {name}")
    return 0


def fetch(args: argparse.Namespace) -> int:
    from biasscope.data.sources import fetch

    for path in fetch(args.source, args.data_dir):
        print(path)
    return 0


def register(sub: Any) -> None:
    from biasscope.audit.settings import ItemsConfig

    shown = sub.add_parser("probes", help="every probe: the requests it takes, the data it "
                           "needs, what it measures")
    shown.add_argument("--json", action="store_true", help="as a JSON list")
    shown.set_defaults(func=listing)

    export = sub.add_parser("items", help="export a probe's items (ids, prompts) as JSONL")
    A.settings(export, ItemsConfig)
    export.set_defaults(func=items)

    data = sub.add_parser("data", help="dataset downloads for air-gapped use")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    get = data_sub.add_parser("fetch", help="download and verify one source into the cache")
    get.add_argument("source", help=", ".join(sorted({source for source, _ in SOURCES})))
    # its errors offer "or pass --data-dir" (a copy saved by hand), so it takes one
    get.add_argument("--data-dir", help="check a local copy (<data-dir>/<source>/...) "
                     "against the pinned checksums instead of downloading")
    get.set_defaults(func=fetch)
