"""``biasscope dynamics`` as one library call: `run(DynamicsConfig(...))` does everything the
command does (checkpoints, probes with their data files' checksums, performance imports, the
sweep, the analysis, ``summary.json`` and the report), so a notebook gets what the CLI gets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from biasscope.backends.checkpoints import Checkpoint
from biasscope.core import steps
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import MAX_TEMPLATE, read_option_file
from biasscope.data.sources import hashed, recording, refuse_other_data
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.analysis.config import stored_options
from biasscope.dynamics.drop import restore_values
from biasscope.dynamics.imported import read_performance as read_performance
from biasscope.dynamics.live.evaluate import listed_steps
from biasscope.dynamics.scoring.executors import make_executor
from biasscope.dynamics.scoring.models import list_checkpoints
from biasscope.dynamics.scoring.sweep import run_dynamics
from biasscope.dynamics.scoring.units import SWEPT
from biasscope.dynamics.settings import DynamicsConfig as DynamicsConfig
from biasscope.dynamics.settings import Executing as Executing
from biasscope.dynamics.settings import Performance as Performance
from biasscope.dynamics.settings import comma_list as comma_list
from biasscope.dynamics.settings import performance_probe as performance_probe
from biasscope.dynamics.summary import write as reporting
from biasscope.dynamics.summary.write import reanalyse as reanalyse  # `biasscope report`
from biasscope.probes import load_probe
from biasscope.probes.specs import load_probes
from biasscope.store.directory import RunStore
from biasscope.store.run_json import refuse_other_kind, unsettled


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
    refuse_other_kind(store, "dynamics", joins=("intervention",))  # before a GGUF is hashed
    checkpoints = list_checkpoints(config.models, config.revisions, config.checkpoint_globs,
                                   config.models_file)
    _refuse_live_steps(store, checkpoints)  # before any checkpoint loads
    template = (read_option_file(config.prompt_template, "--prompt-template", MAX_TEMPLATE,
                                 what="a text file of winobias-gender's prompt template, or "
                                 "leave it out for the default one")
                if config.prompt_template is not None else None)
    with recording() as read:  # the data files' SHA-256 go into run.json, checked on rerun
        probes = load_probes(",".join(config.probes), data_dir=config.data_dir, kinds=SWEPT,
                             what="biasscope dynamics", template=template, flag="--probe",
                             wordings=config.wordings)
        if config.performance.probe:
            name, _, text = config.performance.probe.partition(":")  # perplexity:FILE
            probes.append(load_probe(name, data_dir=config.data_dir,
                                     **({"text": text} if text else {})))
    data = hashed(read)
    _refuse_other_data(store, read, data)  # before any checkpoint loads
    performance.settle(store)  # a series a killed call staged: kept where run.json records it
    imported = read_performance(config.performance, store, checkpoints)  # and the series' files
    # A call stopped before its first unit (an option of many tokens, a checkpoint that does
    # not load) leaves run.json as it found it (none, for a first call): the rerun its error
    # asks for (with --first-token) is not refused for settings a run of nothing recorded,
    # and a probe or checkpoint it added is not listed without results.
    before = set(store.unit_files())
    # The series is staged before run.json records its files and saved after, so that no call,
    # stopped or killed at any point, leaves a performance.json that run.json does not vouch for.
    # Staged in a file of this call's own, held while it runs: another call's `settle` leaves
    # it be, and two calls into one --out never write over each other's series.
    pending = performance.pending_name()
    with unsettled(store, lambda: bool(set(store.unit_files()) - before), rerun=True,
                   files=(performance.FILE, pending)), imported.staged(store, pending):
        run_dynamics(probes, checkpoints, store, seeds=config.seeds, scoring=config.scoring,
                     limit=config.limit, quiet=config.quiet, executor=executor,
                     data=data | imported.records, rescore_changed=config.rescore_changed)
        imported.save(store, pending)
        restore_values(store)  # a step dropped, listed again without its series
    report = reporting.write_dynamics_report(store, options=analysis, data_dir=config.data_dir)
    store.publish(report)
    return DynamicsResult(store, report)


def _refuse_other_data(store: RunStore, read: dict[str, Path], data: dict[str, str]) -> None:
    """A data file edited since the run recorded it, refused as an audit refuses it: the file,
    both SHA-256 and what to do (the sweep's `merge_settings` said only "different settings of
    data file"). Read without the lock: the sweep checks run.json again under it."""
    store.pull("run.json")
    if store.run_json.is_file():
        settings = store.read_json("run.json").get("settings")
        refuse_other_data(store.root, settings.get("data") if isinstance(settings, dict)
                          else None, read, data)


def _refuse_live_steps(store: RunStore, checkpoints: list[Checkpoint]) -> None:
    """A checkpoint of a step the run scored in memory during training (`BiasCallback`,
    under the same model name), refused: the sweep would key its units by the folder beside
    the training's, and one step would hold two sets of records: the summary two checkpoints
    at one step, and a resumed training refused for the sweep's seeds as its own."""
    store.pull("run.json")
    for model in dict.fromkeys(c.model for c in checkpoints):
        live = listed_steps(store, model, in_memory=True)
        if clash := [c for c in checkpoints if c.model == model and c.step in live]:
            shown = ", ".join(str(c.step) for c in clash[:10]) + (" …" if len(clash) > 10 else "")
            folders = ", ".join(str(c.revision) for c in clash[:3]) + (
                " …" if len(clash) > 3 else "")
            raise BiasscopeError(
                f"{store.root} holds steps {shown} of {model!r} scored during training "
                f"(BiasCallback), which this sweep's {folders} would score again under that "
                "name from checkpoint folders; one step's records come from one source: give "
                "the sweep another model name (--checkpoint-glob NAME='GLOB'), or use another "
                "--out")
