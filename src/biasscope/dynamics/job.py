"""``biasscope dynamics`` as one library call: `run(DynamicsConfig(...))` does everything the
command does (checkpoints, probes with their data files' checksums, performance imports, the
sweep, the analysis, ``summary.json`` and the report), so a notebook gets what the CLI gets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import Checkpoint, parse_seeds
from biasscope.backends.hf_model import HFConfig
from biasscope.core import steps
from biasscope.core.config import (
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    check_settings,
    described,
    setting,
)
from biasscope.core.digest import file_sha256
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import MAX_TEMPLATE, read_option_file
from biasscope.data.sources import DATA_DIR_HELP, recording
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.analysis.config import stored_options
from biasscope.dynamics.scoring.executors import make_executor
from biasscope.dynamics.scoring.models import list_checkpoints, named
from biasscope.dynamics.scoring.sweep import run_dynamics
from biasscope.dynamics.scoring.units import SWEPT
from biasscope.dynamics.summary import write as reporting
from biasscope.dynamics.summary.write import reanalyse as reanalyse  # `biasscope report`
from biasscope.probes import PROBES, load_probe, winobias
from biasscope.probes.facets import Absent
from biasscope.probes.specs import LIMIT_HELP, PROBE_HELP, WORDINGS_HELP, load_probes
from biasscope.store.directory import RunStore, run_dir


def comma_list(text: str) -> tuple[str, ...]:
    """``a, b,,c`` as ``("a", "b", "c")``."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def performance_probe(text: str) -> str:
    """A probe that gives a performance series (``PROBES[name].performance``: ``lambada``,
    ``perplexity``) or ``perplexity:FILE`` (FILE checked now, not after the sweep)."""
    name, colon, file = text.partition(":")
    series = [n for n, info in PROBES.items() if not isinstance(info.performance, Absent)]
    if text in series or (name == "perplexity" and colon and Path(file).expanduser().is_file()):
        return text
    raise BiasscopeError(f"--performance {text!r}: give {', '.join(series)} or perplexity:FILE "
                         "(an existing file of held-out documents)")

@dataclass(frozen=True)
class Executing:
    """Where the units run: ``local`` (this process) or ``ray`` (one task per checkpoint)."""

    kind: str = setting("local", "local: this process (default); ray: one Ray task per "
                        "checkpoint, units written straight into --out (needs the 'ray' extra)",
                        choices=("local", "ray"), flag="--executor")
    ray_address: str | None = setting(None, "Ray cluster to join, e.g. auto or "
                                      "ray://head:10001 (default: a local Ray on this machine)")
    gpus_per_checkpoint: float = setting(0, "GPUs each Ray task (one checkpoint) requests; 0.5 "
                                         "lets two share a GPU (default 0)", check=NON_NEGATIVE,
                                         old="--gpus-per-unit")
    cpus_per_checkpoint: float = setting(1, "CPUs each Ray task requests (default 1)",
                                         check=POSITIVE, old="--cpus-per-unit")

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class Performance:
    """Performance read against the fairness curves: a probe scored at every checkpoint
    (``lambada``, ``perplexity`` or ``perplexity:FILE``), ``[MODEL=]FILE`` CSVs of step,value,
    or lm-evaluation-harness results."""

    probe: str | None = setting(None, "also evaluate a performance probe at every checkpoint: "
                                "lambada, perplexity (ETHICS held-out text) or perplexity:FILE "
                                "(your held-out text)", flag="--performance",
                                parse=performance_probe)
    csv: Sequence[str] = setting((), "[MODEL=]FILE of step,value rows (higher is better)",
                                 flag="--performance-csv", many=True)
    lm_eval_results: Sequence[str] = setting(
        (), "[MODEL=]GLOB of lm-evaluation-harness results JSON, one per checkpoint", many=True)
    lm_eval_metric: str | None = setting(None, "task/metric in those files, e.g. "
                                         "lambada_openai/acc")


@dataclass(frozen=True)
class DynamicsConfig:
    """Everything a dynamics run depends on; ``analysis`` holds only the settings given (the
    rest come from the run's last analysis, then the defaults)."""

    out: str | Path = field(metadata=described(
        "run directory, or an fsspec URL such as s3://bucket/run (reused runs resume)",
        parse=run_dir))
    models: Sequence[str] = setting((), "hub id (optionally @revision), local model dir or "
                                    ".gguf file, bare or as hf:SPEC; repeatable", flag="--model",
                                    many=True)
    revisions: Sequence[str] = setting((), "comma-separated hub revisions, e.g. "
                                       "step1000,step143000", parse=comma_list)
    checkpoint_globs: Sequence[str] = setting(
        (), "local checkpoint dirs, e.g. 'out/checkpoint-*' or NAME='out/checkpoint-*' (model "
        "NAME); repeatable", flag="--checkpoint-glob", many=True)
    models_file: str | None = setting(None, "JSON list of {model, revisions} or "
                                      "{checkpoint_glob, name} entries, for many models in one run")
    probes: Sequence[str] = setting(
        (winobias.NAME,), "probe to score at every checkpoint (default winobias-gender); probes "
        "asked by chat (bbq, adult-counterfactual, professional-bias) are scored by each "
        "option's log-prob" + PROBE_HELP, flag="--probe", many=True, old="--probes")
    seeds: Sequence[int] = setting((0, 1, 2, 3, 4), "option-order seeds, e.g. 0-4 or 0,3",
                                   parse=parse_seeds)
    limit: int | None = setting(None, LIMIT_HELP, check=POSITIVE_INT)
    data_dir: str | None = setting(None, DATA_DIR_HELP)
    prompt_template: str | None = setting(None, "file with winobias-gender's prompt template "
                                          "({sentence}, {occupation}, {o1}, {o2}, {o3})")
    wordings: str | None = setting(None, WORDINGS_HELP, was="--templates")
    scoring: HFConfig = field(default_factory=HFConfig)
    performance: Performance = field(default_factory=Performance)
    executing: Executing = field(default_factory=Executing)
    analysis: Mapping[str, Any] = field(default_factory=dict)
    rescore_changed: bool = setting(False, "a checkpoint whose weights changed since --out "
                                    "scored it: set its old units aside and score it again "
                                    "(else it is refused)")
    quiet: bool = setting(False, "no progress bars, and no line on stderr as each step starts")

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class DynamicsResult:
    store: RunStore
    report: Path


def run(config: DynamicsConfig) -> DynamicsResult:
    """Score every pending unit into ``config.out``, analyse the run and render its report;
    each step says on stderr when it starts, unless ``config.quiet``."""
    with steps.quiet(config.quiet):
        return _run(config)


def _run(config: DynamicsConfig) -> DynamicsResult:
    executor = make_executor(config.executing.kind, config.executing.ray_address,
                             config.executing.gpus_per_checkpoint,
                             config.executing.cpus_per_checkpoint)
    store = RunStore(config.out)
    analysis = stored_options(store, config.analysis)  # a bad --alpha fails before a sweep
    checkpoints = list_checkpoints(config.models, config.revisions, config.checkpoint_globs,
                                   config.models_file)
    template = (read_option_file(config.prompt_template, "--prompt-template", MAX_TEMPLATE)
                if config.prompt_template else None)
    with recording() as read:  # the data files' SHA-256 go into run.json, checked on rerun
        probes = load_probes(",".join(config.probes), data_dir=config.data_dir, kinds=SWEPT,
                             what="biasscope dynamics", template=template, flag="--probe",
                             wordings=config.wordings)
        if config.performance.probe:
            name, _, text = config.performance.probe.partition(":")  # perplexity:FILE
            probes.append(load_probe(name, data_dir=config.data_dir, text=text or None))
    data = {name: file_sha256(path) for name, path in sorted(read.items())}
    import_performance(config.performance, store, checkpoints)
    run_dynamics(probes, checkpoints, store, seeds=config.seeds, scoring=config.scoring,
                 limit=config.limit, quiet=config.quiet, executor=executor, data=data,
                 rescore_changed=config.rescore_changed)
    report = reporting.write_dynamics_report(store, options=analysis, data_dir=config.data_dir)
    store.publish(report)
    return DynamicsResult(store, report)


def import_performance(given: Performance, store: RunStore,
                       checkpoints: Sequence[Checkpoint]) -> None:
    """Save each imported performance series into the run, checked against its steps."""
    models = list(dict.fromkeys(c.model for c in checkpoints))
    imports = [(spec, "csv") for spec in given.csv]
    imports += [(spec, "lm-eval") for spec in given.lm_eval_results]
    for spec, kind in imports:
        name, source = named(spec)
        if name is None and len(models) > 1:
            raise BiasscopeError(f"{spec}: with several models, write MODEL={source}")
        model = name or models[0]
        if model not in models:
            raise BiasscopeError(f"{spec}: no model {model!r} in this run ({', '.join(models)})")
        if kind == "csv":
            series, label = performance.from_csv(source), f"performance ({Path(source).name})"
        else:
            if not given.lm_eval_metric:
                raise BiasscopeError("--lm-eval-results needs --lm-eval-metric task/metric")
            series = performance.from_lm_eval(source, given.lm_eval_metric)
            label = given.lm_eval_metric
        steps = [c.step for c in checkpoints if c.model == model and c.step is not None]
        performance.check_coverage(model, series, steps, source)
        performance.save(store, model, series, label)
