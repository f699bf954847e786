"""biasscope: measure bias and fairness in language models.

The command is a thin layer over library calls a notebook can make too: dynamics, demo and
report here; the commands for models that write text (generate, probe, items, judge,
judge-audit, sensitivity) in ``biasscope.cli.models``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from biasscope.cli import args as A
from biasscope.cli import models
from biasscope.core.errors import BiasscopeError


def _named(value: str) -> tuple[str | None, str]:
    """``NAME=VALUE`` or ``VALUE``."""
    name, eq, rest = value.partition("=")
    return (name, rest) if eq and "/" not in name and "*" not in name else (None, value)


def _checkpoints(args: argparse.Namespace) -> list[Any]:
    from biasscope.backends.checkpoints import from_glob, from_model

    revisions = [r.strip() for r in (args.revisions or "").split(",") if r.strip()]
    specs: list[dict[str, Any]] = [{"model": m, "revisions": revisions} for m in args.model or []]
    specs += [{"checkpoint_glob": g, "name": n} for n, g in map(_named, args.checkpoint_glob or [])]
    if args.models_file:
        specs += A.models_file(args.models_file)  # each entry's fields checked, by number
    if not specs:
        raise BiasscopeError("give --model, --checkpoint-glob or --models-file")
    checkpoints = []
    for number, spec in enumerate(specs, start=1):
        if not isinstance(spec, dict) or not ({"model", "checkpoint_glob"} & set(spec)):
            raise BiasscopeError(f"model entry {number}: needs 'model' or 'checkpoint_glob'")
        if "checkpoint_glob" in spec:
            checkpoints += from_glob(spec["checkpoint_glob"], spec.get("name"))
        else:
            checkpoints += from_model(spec["model"], list(spec.get("revisions", [])))
    return checkpoints


def _import_performance(args: argparse.Namespace, store: Any, checkpoints: list[Any]) -> None:
    from biasscope.dynamics import performance
    models = list(dict.fromkeys(c.model for c in checkpoints))
    imports = [(spec, "csv") for spec in args.performance_csv or []]
    imports += [(spec, "lm-eval") for spec in args.lm_eval_results or []]
    for spec, kind in imports:
        name, source = _named(spec)
        if name is None and len(models) > 1:
            raise BiasscopeError(f"{spec}: with several models, write MODEL={source}")
        model = name or models[0]
        if model not in models:
            raise BiasscopeError(f"{spec}: no model {model!r} in this run ({', '.join(models)})")
        if kind == "csv":
            series, label = performance.from_csv(source), f"performance ({Path(source).name})"
        else:
            if not args.lm_eval_metric:
                raise BiasscopeError("--lm-eval-results needs --lm-eval-metric task/metric")
            series = performance.from_lm_eval(source, args.lm_eval_metric)
            label = args.lm_eval_metric
        steps = [c.step for c in checkpoints if c.model == model and c.step is not None]
        performance.check_coverage(model, series, steps, source)
        performance.save(store, model, series, label)


def _analysis_options(args: argparse.Namespace, store: Any) -> Any:
    from biasscope.dynamics.analysis import stored_options
    from biasscope.dynamics.analysis_options import FLAGS

    # Given options are checked first (one line naming the flag), then the stored ones.
    return stored_options(store, {k: getattr(args, k) for k in FLAGS
                                  if getattr(args, k, None) is not None})


def _dynamics(args: argparse.Namespace) -> int:
    from biasscope.backends.checkpoints import parse_seeds
    from biasscope.backends.hf_model import HFOptions
    from biasscope.data.sources import recording
    from biasscope.dynamics.executors import make_executor
    from biasscope.dynamics.scoring import SWEPT
    from biasscope.dynamics.sweep import run_dynamics
    from biasscope.probes import load_probe, winobias
    from biasscope.probes.specs import load_probes
    from biasscope.store.directory import RunStore
    from biasscope.store.settings import sha256_file

    executor = make_executor(args.executor, args.ray_address, args.gpus_per_unit,
                             args.cpus_per_unit)
    _analysis_options(args, RunStore(args.out))  # a bad --alpha fails before, not after, a sweep
    seeds = parse_seeds(args.seeds)
    checkpoints = _checkpoints(args)
    template = A.read_text(args.prompt_template, "--prompt-template") if (
        args.prompt_template) else None
    with recording() as read:  # the data files' SHA-256 go into run.json, checked on rerun
        probes = load_probes(",".join(args.probe or [winobias.NAME]), data_dir=args.data_dir,
                             kinds=SWEPT, what="biasscope dynamics", template=template,
                             flag="--probe")
        if args.performance:
            probes.append(load_probe(args.performance, data_dir=args.data_dir))
    data = {name: sha256_file(path) for name, path in sorted(read.items())}
    _import_performance(args, RunStore(args.out), checkpoints)
    options = HFOptions(device=args.device, dtype=args.dtype, batch_size=args.batch_size,
                        first_token=args.first_token, trust_remote_code=args.trust_remote_code,
                        allow_pickle=args.allow_pickle)
    store = run_dynamics(probes, checkpoints, args.out, seeds=seeds, options=options,
                         limit=args.limit, quiet=args.quiet, executor=executor, data=data,
                         rescore_changed=args.rescore_changed)
    from biasscope.dynamics.reporting import write_dynamics_report

    report = write_dynamics_report(store.root, options=_analysis_options(args, store),
                                   data_dir=args.data_dir)
    store.publish(report)
    print(f"run: {store.root}  summary: {store.summary_json}  report: {report}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from biasscope.demo import run_demo

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)  # an unwritable --out fails now, not after training
    result = run_demo(out=out, bias=args.bias, seed=args.seed, quiet=args.quiet)
    print(f"run: {result.run_dir}  report: {result.report}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from biasscope.dynamics.reporting import write_dynamics_report
    from biasscope.store.directory import RunStore

    store = RunStore(args.run)
    output = Path(args.output) if args.output else None
    kind = store.read_json("run.json").get("kind") if store.run_json.is_file() else None
    if kind in ("audit", "judge", "judge-audit"):
        from biasscope.report.audit import write_audit_report

        report = write_audit_report(store.root, output)
    elif kind == "sensitivity":
        from biasscope.report.sensitivity import write_sensitivity_report

        report = write_sensitivity_report(store.root, output)
    else:
        from biasscope.report.html import missing_sentence

        report = write_dynamics_report(store.root, output, _analysis_options(args, store),
                                       args.data_dir)
        if missing := store.missing_units():
            print(f"warning: {missing_sentence(missing, store.root)}", file=sys.stderr)
    if output is None and store.remote:  # the run's own report belongs beside its records
        store.publish(report)
        print(f"{report}  (published to {store.remote}/{report.name})")
        return 0
    print(report)
    return 0


def _probes(args: argparse.Namespace) -> int:
    import json

    from biasscope.probes import PROBES, REQUESTS

    if args.json:
        print(json.dumps([info.as_dict() for info in PROBES.values()], indent=2))
        return 0
    for info in PROBES.values():
        data = (f"{info.data} (`biasscope data fetch {info.data}`, or --data-dir)"
                if info.data else "none (ships with biasscope)")
        print(f"{info.name}: {info.about}\n  requests: {', '.join(info.requests)}\n"
              f"  data:     {data}\n  metrics:  {', '.join(info.metrics)}")
    print("\nrequest kinds:\n" + "\n".join(f"  {k}: {v}" for k, v in REQUESTS.items()))
    return 0


def _data_fetch(args: argparse.Namespace) -> int:
    from biasscope.data.sources import fetch

    for path in fetch(args.source):
        print(path)
    return 0


def _analysis_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--correction", choices=["holm", "bh"],
                        help="multiple-comparison control across checkpoints (default holm)")
    parser.add_argument("--alpha", type=float, help="significance level (default 0.01)")
    parser.add_argument("--min-gap", type=float,
                        help="smallest JSD-P gap of interest: emergence needs a significant gap "
                        "at least this large (default 0: significance alone)")
    parser.add_argument("--budget", type=float,
                        help="performance loss allowed when recommending where to stop "
                        "(fraction of the final checkpoint's; default 0.02)")


def build_parser() -> argparse.ArgumentParser:
    parser = A.OneLineParser(
        prog="biasscope", description="Measure bias and fairness in language models, with "
        "token-level precision and real statistics.")
    sub = parser.add_subparsers(dest="command", required=True)

    dyn = sub.add_parser("dynamics", help="fairness across training checkpoints")
    dyn.add_argument("--model", action="append",
                     help="hub id (optionally @revision) or local model dir; repeatable")
    dyn.add_argument("--revisions", help="comma-separated hub revisions, e.g. step1000,step143000")
    dyn.add_argument("--checkpoint-glob", action="append", help="local checkpoint dirs, e.g. "
                     "'out/checkpoint-*' or NAME='out/checkpoint-*' (model NAME); repeatable")
    dyn.add_argument("--models-file", help="JSON list of {model, revisions} or "
                     "{checkpoint_glob, name} entries, for many models in one run")
    dyn.add_argument("--performance", choices=["lambada"],
                     help="also evaluate a performance probe at every checkpoint")
    dyn.add_argument("--performance-csv", action="append",
                     help="[MODEL=]FILE of step,value rows (higher is better)")
    dyn.add_argument("--lm-eval-results", action="append",
                     help="[MODEL=]GLOB of lm-evaluation-harness results JSON, one per checkpoint")
    dyn.add_argument("--lm-eval-metric", help="task/metric in those files, e.g. lambada_openai/acc")
    _analysis_args(dyn)
    dyn.add_argument("--probe", action="append",
                     help="probe to score at every checkpoint (default winobias-gender); "
                     "repeatable, e.g. --probe winobias-gender --probe bbq:Age,Religion. Probes "
                     "asked by chat (bbq, adult-counterfactual, professional-bias) are scored "
                     "by each option's log-prob (`biasscope probes` lists them)")
    dyn.add_argument("--seeds", default="0-4", type=A.seed_spec,
                     help="option-order seeds, e.g. 0-4 or 0,3")
    dyn.add_argument("--out", required=True, type=A.run_dir,
                     help="run directory, or an fsspec URL such as s3://bucket/run "
                     "(reused runs resume)")
    dyn.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"),
                     help="local copy of the datasets (<data-dir>/winobias/...)")
    dyn.add_argument("--prompt-template", help="file with winobias-gender's prompt template "
                     "({sentence}, {occupation}, {o1}, {o2}, {o3})")
    dyn.add_argument("--batch-size", type=A.positive_int, default=32)
    dyn.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    dyn.add_argument("--dtype", default="auto", choices=["auto", "float32", "float16",
                                                         "bfloat16"])
    dyn.add_argument("--first-token", action="store_true",
                     help="score multi-token answer words by their first token")
    dyn.add_argument("--trust-remote-code", action="store_true",
                     help="run the model repo's own code (off by default)")
    dyn.add_argument("--allow-pickle", action="store_true",
                     help="load pickle weights (.bin/.pt), which can run code; off by default")
    dyn.add_argument("--rescore-changed", action="store_true",
                     help="a checkpoint whose weights changed since --out scored it: set its "
                          "old units aside and score it again (else it is refused)")
    dyn.add_argument("--limit", type=A.positive_int,
                     help="at most N items per probe and seed (smoke tests), the same "
                     "ones for every seed, recorded in run.json: winobias-gender a seeded "
                     "sample of whole pro/anti pairs stratified by subset and answer, bbq of "
                     "whole examples stratified by category; adult the first N/2 pairs, "
                     "others the first N")
    dyn.add_argument("--executor", choices=["local", "ray"], default="local",
                     help="local: this process (default); ray: one Ray task per checkpoint, "
                     "units written straight into --out (needs the 'ray' extra)")
    dyn.add_argument("--ray-address", help="Ray cluster to join, e.g. auto or "
                     "ray://head:10001 (default: a local Ray on this machine)")
    dyn.add_argument("--gpus-per-unit", type=A.non_negative_float, default=0,
                     help="GPUs each Ray task requests; 0.5 lets two share a GPU (default 0)")
    dyn.add_argument("--cpus-per-unit", type=A.positive_float, default=1,
                     help="CPUs each Ray task requests (default 1)")
    dyn.add_argument("--quiet", action="store_true", help="no progress bars")
    dyn.set_defaults(func=_dynamics)

    demo = sub.add_parser("demo", help="train a tiny model with injected bias and sweep it")
    demo.add_argument("--out", default="demo-run", type=A.run_dir)
    demo.add_argument("--bias", type=A.probability, default=0.95,
                      help="share of stereotypical pronouns in the corpus, 0.5 (none) to 1.0")
    demo.add_argument("--seed", type=A.seed, default=0)
    demo.add_argument("--quiet", action="store_true")
    demo.set_defaults(func=_demo)

    rep = sub.add_parser("report", help="rebuild the HTML report of a run from its records")
    rep.add_argument("run", help="run directory or URL")
    rep.add_argument("--output", help="HTML path (default: RUN/report.html)")
    rep.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"),
                     help="local copy of the datasets, for the occupation statistics "
                          "(<data-dir>/winogender/occupations-stats.tsv)")
    _analysis_args(rep)
    rep.set_defaults(func=_report)

    listing = sub.add_parser("probes", help="every probe: the requests it takes, the data it "
                             "needs, what it measures")
    listing.add_argument("--json", action="store_true", help="as a JSON list")
    listing.set_defaults(func=_probes)

    models.register(sub)


    data = sub.add_parser("data", help="dataset downloads for air-gapped use")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    fetch = data_sub.add_parser("fetch", help="download and verify one source into the cache")
    fetch.add_argument("source", help="winobias, bbq, decodingtrust, ccai, hh-rlhf, lambada")
    fetch.set_defaults(func=_data_fetch)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except BiasscopeError as exc:
        print(A.one_line(f"biasscope: error: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("biasscope: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except OSError as exc:  # the file system said no (a directory in the way, no permission)
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        what = f"{where}: {exc.strerror or exc}" if where else str(exc)
        print(A.one_line(f"biasscope: error: {what}"), file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
