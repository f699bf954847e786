"""Fairness measured live, during training: a `transformers` callback and a plain function.

Every ``every`` steps the probes (any registered probe: WinoBias by next-token scores, BBQ,
Adult and professional bias by option scores) are scored on the model being trained (in eval
mode, under ``inference_mode``, then put back), records are appended to a run directory
exactly as a checkpoint sweep would write them (revision ``step<N>``), the headline metrics go
through the Trainer's own logging (so TensorBoard, W&B, MLflow… receive them), and training
can stop when the male-female gap crosses a threshold.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from biasscope.backends.checkpoints import IN_MEMORY, Checkpoint, parse_seeds
from biasscope.backends.hf import HFScorer
from biasscope.backends.hf_model import HFConfig
from biasscope.core.config import (
    NON_NEGATIVE,
    POSITIVE_INT,
    SEED,
    check_settings,
    made,
    setting,
)
from biasscope.core.errors import BiasscopeError
from biasscope.core.renamed import renamed
from biasscope.dynamics.live import weights
from biasscope.dynamics.scoring.runfile import init_run, unlist
from biasscope.dynamics.scoring.sweep import hf_comparable, write_summary
from biasscope.dynamics.scoring.units import SweepConfig, ask, unit_frame, unit_summary
from biasscope.probes import PROBES, Probe
from biasscope.store.directory import RunStore, run_dir
from biasscope.store.units import Unit

LOGGED = ("jsdp_gap", "jsdp_correct/male", "jsdp_correct/female", "average_rank/male",
          "average_rank/female", "average_rank/not specified", "accuracy/all",
          "stereotype_accuracy", "accuracy", "perplexity", "hit_rate", "answer_probability")


def is_logged(key: str) -> bool:
    """Whether ``<probe>/<metric>`` goes to the Trainer's log: the shared headline numbers
    above, or one its probe names as its own (CrowS-Pairs' ``pct_stereotype``, StereoSet's
    ``icat``...)."""
    probe, _, metric = key.partition("/")
    info = PROBES.get(probe)
    return metric in LOGGED or (info is not None and metric in info.metrics)


@dataclass(frozen=True)
class LiveConfig:
    """How often and how much to evaluate, and when to stop (``|gap| > stop_above``)."""

    #: No command takes these settings: a refusal names the Python argument (`check_settings`).
    has_flags: ClassVar[bool] = False

    every: int = setting(500, "evaluate every N training steps", check=POSITIVE_INT)
    seeds: tuple[int, ...] = setting((0,), "option-order seeds, e.g. 0-4 or 0,3",
                                     parse=parse_seeds, check=SEED)
    batch_size: int = setting(32, "prompts per forward pass", check=POSITIVE_INT)
    stop_above: float | None = setting(None, "stop training once |JSD-P gap| exceeds this",
                                       check=NON_NEGATIVE)
    model_name: str = setting("live", "the run's name for the model being trained")

    def __post_init__(self) -> None:
        check_settings(self)
        if not self.model_name.strip():  # the run's records and report name the model by it
            raise BiasscopeError(f"model_name: give the run's name for the model being "
                                 f"trained, e.g. 'live', not {self.model_name!r}")


def live_inputs(probes: Any, out: Any, config: Any) -> tuple[list[Probe], Path, LiveConfig]:
    """What `evaluate_now` and `BiasCallback` are given, checked: one probe or several (made by
    `load_probe`, not named), a run directory (where no file stands), and a `LiveConfig` (or a
    dict of its settings); a mistake is one line naming the argument."""
    one = isinstance(probes, str) or not isinstance(probes, (Sequence, set, frozenset))
    listed = [probes] if one else list(probes)
    odd = next((p for p in listed if not (hasattr(p, "name") and hasattr(p, "items"))), None)
    if odd is not None or not listed:
        named = f" (for a name: load_probe({odd!r}, data_dir=...))" if isinstance(odd, str) else ""
        raise BiasscopeError("probes: give a probe made by biasscope.load_probe, or a list of "
                             f"them, not {type(odd).__name__} {odd!r}{named}")
    if not isinstance(out, (str, os.PathLike)):
        raise BiasscopeError(f"out: give the run directory (text or a Path), not "
                             f"{type(out).__name__} {out!r}")
    try:
        run_dir(os.fspath(out))
    except BiasscopeError as exc:
        raise BiasscopeError(f"out: {exc}") from None
    return listed, Path(out), made(LiveConfig, config, "config")


def held_units(out: str | Path, model_name: str) -> dict[int, dict[str, set[int]]]:
    """Each step of ``model_name`` that the run in ``out`` has records of, and the seeds of
    each probe it has them of (a step whose evaluation raised, or was killed, between two
    units holds some seeds or probes only)."""
    store = RunStore(out)
    if not store.run_json.is_file():
        return {}
    run = store.read_json("run.json")
    have = {p.name for p in store.unit_files()}
    probes = list(run.get("settings", {}).get("probes", {}))
    seeds = sorted({int(s) for s in run.get("seeds", [])} | {0})  # unseeded probes': seed 0
    held: dict[int, dict[str, set[int]]] = {}
    for e in run.get("checkpoints", []):
        if isinstance(e, dict) and e.get("model") == model_name and e.get("step") is not None:
            for probe in probes:
                found = {s for s in seeds if f"{_unit(e, probe, s).key}.parquet" in have}
                if found:
                    held.setdefault(int(e["step"]), {}).setdefault(probe, set()).update(found)
    return held


def listed_steps(store: RunStore, model_name: str, in_memory: bool) -> dict[int, str]:
    """The steps of ``model_name`` that run.json lists (scored, or planned by a training still
    to reach them), each with its revision: those scored in memory during training
    (``in_memory``), or those a sweep scored from checkpoint folders or the hub. A step of a
    model comes from one of the two only: the sweep keys its units by the folder, the training
    by the step, so a step listed by both would hold two sets of records of one model."""
    if not store.run_json.is_file():
        return {}
    return {int(e["step"]): str(e.get("revision")) for e in
            store.read_json("run.json").get("checkpoints", [])
            if isinstance(e, dict) and e.get("model") == model_name
            and e.get("step") is not None and (e.get("source") == IN_MEMORY) == in_memory}


def lacking(probes: Sequence[Probe], config: LiveConfig, held: dict[str, set[int]]
            ) -> dict[str, list[int]]:
    """The seeds of each probe that a step holding ``held`` (`held_units`' of that step) has
    no records of: all of a probe's seeds where it has none, none where it is complete."""
    wanted = {p.name: config.seeds if getattr(p, "seeded", True) else (0,) for p in probes}
    return {name: missing for name, seeds in wanted.items()
            if (missing := [s for s in seeds if s not in held.get(name, set())])}


def _unit(entry: dict[str, Any], probe: str, seed: int) -> Unit:
    return Unit(str(entry["model"]), entry.get("revision"), probe, seed, entry.get("step"),
                entry.get("identity"))


def plan(probes: Sequence[Probe], out: Path, config: LiveConfig, steps: Sequence[int]) -> None:
    """List the steps a training will evaluate in run.json before it reaches them, so that a
    report drawn while it runs (or after it was killed) says which are not scored yet and that
    its findings rest on the others."""
    if steps:
        init_run(RunStore(out), probes, SweepConfig(
            [_live(config, s) for s in steps], out, list(config.seeds),
            comparable=hf_comparable(HFConfig(batch_size=config.batch_size))))


def unplan(out: Path, config: LiveConfig, steps: Sequence[int]) -> None:
    """Take planned steps the training ended before (a stop) out of run.json again."""
    for step in steps:
        unlist(RunStore(out), _live(config, step))


def _live(config: LiveConfig, step: int) -> Checkpoint:
    return Checkpoint(config.model_name, IN_MEMORY, f"step{step}", step)


def evaluate_now(model: Any, tokenizer: Any, probes: Sequence[Probe], out: str | Path,
                 step: int, config: LiveConfig = LiveConfig(),
                 saved_as: Checkpoint | None = None) -> dict[str, float]:
    """Score ``probes`` on ``model`` as it is now, store the records as checkpoint ``step``,
    and return the seed-mean metrics (``<probe>/<metric>``). For plain PyTorch loops.

    ``saved_as``: the checkpoint these weights were just saved as, so that a later sweep of the
    saved directories finds these units done instead of scoring them again.
    """
    probes, out, config = live_inputs(probes, out, config)
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise BiasscopeError(f"step: give the training step, a whole number 0 or more, not "
                             f"{step!r}")
    return _score(model, tokenizer, probes, out, step, config, saved_as)


def complete_step(model: Any, tokenizer: Any, probes: Sequence[Probe], out: Path, step: int,
                  config: LiveConfig) -> dict[str, float]:
    """Score on ``model`` the units that step ``step`` lacks (seeds or probes after the one
    that raised, or was killed, are missing) and return the seed-mean metrics over all the
    step's units, stored and new: none of them reached the Trainer's log.

    ``model`` must hold that step's weights, or one step would mix two models' records: the
    callback calls this only at the step a training resumes at (the checkpoint it restored)
    and the step it ends at. An earlier step's weights are gone; its units stay missing.
    """
    return _score(model, tokenizer, probes, out, step, config, None, complete=True)


def _score(model: Any, tokenizer: Any, probes: Sequence[Probe], out: Path, step: int,
           config: LiveConfig, saved_as: Checkpoint | None, complete: bool = False
           ) -> dict[str, float]:
    """`evaluate_now`; ``complete``: `complete_step`, whose stored units are read, not
    refused."""
    scoring = HFConfig(batch_size=config.batch_size)
    store = RunStore(out)
    ckpt = saved_as or _live(config, step)
    (ckpt,) = init_run(store, probes, SweepConfig([ckpt], Path(out), list(config.seeds),
                                                  comparable=hf_comparable(scoring)))
    if not complete:  # before any unit: a kill after one leaves what scored it
        weights.record(out, ckpt.model, step, weights.digest(model))
    was_training = model.training
    model.eval()
    try:
        scorer = HFScorer(ckpt, model, tokenizer, scoring)
        metrics: dict[str, list[float]] = {}
        jobs = []
        for probe in probes:
            for seed in config.seeds if getattr(probe, "seeded", True) else (0,):
                # Keyed by identity: a later sweep of the saved dir finds this unit done.
                unit = Unit(ckpt.model, ckpt.revision, probe.name, seed, step, ckpt.identity)
                if complete and store.has(unit):  # a damaged one is set aside and redone
                    stored = store.read_unit(store.unit_path(unit))
                    if stored is not None and not stored.empty:
                        for key, value in unit_summary(stored)[2].items():
                            metrics.setdefault(f"{probe.name}/{key}", []).append(value)
                        continue
                if not complete and store.unit_path(unit).exists():  # written once, never redone
                    raise BiasscopeError(
                        f"step: {out} already holds {probe.name} at step {step} of "
                        f"{ckpt.model} (seed {seed}); a step is scored once: give a step not "
                        "scored yet, another out, or another model_name")
                items = probe.items(seed)
                kind, asking = ask(probe, items)  # options: BBQ, Adult, professional bias
                # Too long for the model: refused before any unit is scored or written.
                scorer.check_context(kind, items, asking.messages if asking else None)
                jobs.append((probe.name, unit, kind, items, asking))
        for name, unit, kind, items, asking in jobs:
            frame = unit_frame(scorer, unit, kind, items, asking)
            store.write_unit(unit, frame)
            for key, value in unit_summary(frame)[2].items():
                metrics.setdefault(f"{name}/{key}", []).append(value)
    finally:
        model.train(was_training)
    write_summary(store)
    return {k: sum(v) / len(v) for k, v in metrics.items()}


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"LiveOptions": "LiveConfig"}, globals().__getitem__)
