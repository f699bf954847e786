"""``biasscope probes`` (what each probe asks and measures), ``biasscope items`` (a probe's
items as JSONL, for answering elsewhere) and ``biasscope data fetch``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from biasscope.cli import args as A
from biasscope.core.errors import BiasscopeError
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
    from biasscope.audit.run import export_items
    from biasscope.probes.specs import load_probes

    spec = ",".join(args.probe or [])
    probes = load_probes(spec, data_dir=args.data_dir, base_rate=args.base_rate, flag="--probe")
    if len(probes) != 1:
        raise BiasscopeError(f"items --probe {spec}: name one probe (e.g. bbq:Age,Religion)")
    count = export_items(probes[0], args.out, seed=args.seed, limit=args.limit)
    print(f"{args.out}: {count} items of {probes[0].name}")
    return 0


def fetch(args: argparse.Namespace) -> int:
    from biasscope.data.sources import fetch

    for path in fetch(args.source):
        print(path)
    return 0


def register(sub: Any) -> None:
    from biasscope.audit.job import AuditConfig

    shown = sub.add_parser("probes", help="every probe: the requests it takes, the data it "
                           "needs, what it measures")
    shown.add_argument("--json", action="store_true", help="as a JSON list")
    shown.set_defaults(func=listing)

    export = sub.add_parser("items", help="export a probe's items (ids, prompts) as JSONL")
    export.add_argument("--probe", action="append", required=True,
                        help="one probe, e.g. winobias-gender, adult-counterfactual or "
                        "bbq:Age,Religion (`biasscope probes` lists them)")
    export.add_argument("--out", required=True)
    export.add_argument("--seed", type=A.seed, default=0,
                        help="the seed's items, for probes whose items vary with it (winobias-"
                        "gender: the order the options are shown in)")
    A.settings(export, AuditConfig, "limit", "base_rate", "data_dir")
    export.set_defaults(func=items)

    data = sub.add_parser("data", help="dataset downloads for air-gapped use")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    get = data_sub.add_parser("fetch", help="download and verify one source into the cache")
    get.add_argument("source", help=", ".join(sorted({source for source, _ in SOURCES})))
    get.set_defaults(func=fetch)
