"""Fairness measured live, during training: a `transformers` callback and a plain function.

Every ``every`` steps the probes (any registered probe: WinoBias by next-token scores, BBQ,
Adult and professional bias by option scores) are scored on the model being trained (in eval
mode, under ``inference_mode``, then put back), records are appended to a run directory
exactly as a checkpoint sweep would write them (revision ``step<N>``), the headline metrics go
through the Trainer's own logging (so TensorBoard, W&B, MLflow… receive them), and training
can stop when the male-female gap crosses a threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biasscope.backends.checkpoints import IN_MEMORY, Checkpoint, parse_seeds
from biasscope.backends.hf import HFScorer
from biasscope.backends.hf_model import HFConfig
from biasscope.core.config import NON_NEGATIVE, POSITIVE_INT, SEED, check_settings, setting
from biasscope.core.renamed import renamed
from biasscope.dynamics.scoring.runfile import init_run
from biasscope.dynamics.scoring.sweep import hf_comparable, write_summary
from biasscope.dynamics.scoring.units import SweepConfig, ask, unit_frame, unit_summary
from biasscope.probes import PROBES, Probe
from biasscope.store.directory import RunStore
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

    every: int = setting(500, "evaluate every N training steps", check=POSITIVE_INT)
    seeds: tuple[int, ...] = setting((0,), "option-order seeds, e.g. 0-4 or 0,3",
                                     parse=parse_seeds, check=SEED)
    batch_size: int = setting(32, "prompts per forward pass", check=POSITIVE_INT)
    stop_above: float | None = setting(None, "stop training once |JSD-P gap| exceeds this",
                                       check=NON_NEGATIVE)
    model_name: str = setting("live", "the run's name for the model being trained")

    def __post_init__(self) -> None:
        check_settings(self)


def evaluate_now(model: Any, tokenizer: Any, probes: Sequence[Probe], out: str | Path,
                 step: int, config: LiveConfig = LiveConfig(),
                 saved_as: Checkpoint | None = None) -> dict[str, float]:
    """Score ``probes`` on ``model`` as it is now, store the records as checkpoint ``step``,
    and return the seed-mean metrics (``<probe>/<metric>``). For plain PyTorch loops.

    ``saved_as``: the checkpoint these weights were just saved as, so that a later sweep of the
    saved directories finds these units done instead of scoring them again.
    """
    scoring = HFConfig(batch_size=config.batch_size)
    store = RunStore(out)
    ckpt = saved_as or Checkpoint(config.model_name, IN_MEMORY, f"step{step}", step)
    (ckpt,) = init_run(store, probes, SweepConfig([ckpt], Path(out), list(config.seeds),
                                                  comparable=hf_comparable(scoring)))
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
