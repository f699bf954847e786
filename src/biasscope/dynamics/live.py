"""Fairness measured live, during training: a `transformers` callback and a plain function.

Every ``every`` steps the probes (any registered probe: WinoBias by next-token scores, BBQ,
Adult and professional bias by option scores) are scored on the model being trained (in eval
mode, under ``inference_mode``, then put back), records are appended to a run directory
exactly as a checkpoint sweep would write them (revision ``step<N>``), the headline metrics go
through the Trainer's own logging (so TensorBoard, W&B, MLflow… receive them), and training
can stop when the male-female gap crosses a threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import IN_MEMORY, Checkpoint
from biasscope.dynamics.runfile import init_run
from biasscope.dynamics.scoring import SweepConfig, ask, unit_frame, unit_summary
from biasscope.dynamics.sweep import hf_comparable, write_summary
from biasscope.probes import Probe
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit

LOGGED = ("jsdp_gap", "jsdp_correct/male", "jsdp_correct/female", "average_rank/male",
          "average_rank/female", "average_rank/not specified", "accuracy/all",
          "stereotype_accuracy", "accuracy", "perplexity", "hit_rate", "answer_probability")


@dataclass(frozen=True)
class LiveOptions:
    """How often and how much to evaluate, and when to stop (``|gap| > stop_above``)."""

    every: int = 500
    seeds: tuple[int, ...] = (0,)
    batch_size: int = 32
    stop_above: float | None = None
    model_name: str = "live"


def evaluate_now(model: Any, tokenizer: Any, probes: Sequence[Probe], out: str | Path,
                 step: int, options: LiveOptions = LiveOptions(),
                 saved_as: Checkpoint | None = None) -> dict[str, float]:
    """Score ``probes`` on ``model`` as it is now, store the records as checkpoint ``step``,
    and return the seed-mean metrics (``<probe>/<metric>``). For plain PyTorch loops.

    ``saved_as``: the checkpoint these weights were just saved as, so that a later sweep of the
    saved directories finds these units done instead of scoring them again.
    """
    from biasscope.backends.hf import HFScorer
    from biasscope.backends.hf_model import HFOptions

    scoring = HFOptions(batch_size=options.batch_size)
    store = RunStore(out)
    ckpt = saved_as or Checkpoint(options.model_name, IN_MEMORY, f"step{step}", step)
    (ckpt,) = init_run(store, probes, SweepConfig([ckpt], Path(out), list(options.seeds),
                                                  comparable=hf_comparable(scoring)))
    was_training = model.training
    model.eval()
    try:
        scorer = HFScorer(ckpt, model, tokenizer, scoring)
        metrics: dict[str, list[float]] = {}
        jobs = []
        for probe in probes:
            for seed in options.seeds if getattr(probe, "seeded", True) else (0,):
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


def _callback_base() -> type:
    """``transformers.TrainerCallback``; without the 'hf' extra a plain base, so that the
    module (and every command's parser) imports, and making a callback says what to install."""
    try:
        from transformers import TrainerCallback
    except ImportError:
        return object
    return TrainerCallback


class BiasCallback(_callback_base()):  # type: ignore[misc]
    """``Trainer(..., callbacks=[BiasCallback(probe, "runs/live")])``.

    Pass ``trainer=`` (or call `bind`) so metrics go through ``trainer.log`` and reach every
    reporting integration; unbound, they are appended to ``state.log_history`` only.
    """

    def __init__(self, probes: Probe | Sequence[Probe], out: str | Path,
                 options: LiveOptions = LiveOptions(), tokenizer: Any = None,
                 trainer: Any = None) -> None:
        from biasscope.backends.lazy import require_torch

        require_torch()  # without the 'hf' extra: one line naming it, not an ImportError
        self.probes = [probes] if not isinstance(probes, Sequence) else list(probes)
        self.out = Path(out)
        self.options = options
        self.tokenizer = tokenizer
        self.trainer = trainer
        self.history: list[dict[str, float]] = []

    def bind(self, trainer: Any) -> BiasCallback:
        self.trainer = trainer
        return self

    def _evaluate(self, state: Any, control: Any, model: Any, tokenizer: Any,
                  may_stop: bool = True) -> Any:
        step = int(state.global_step)
        if any(h.get("step") == step for h in self.history):
            return control
        metrics = evaluate_now(model, tokenizer, self.probes, self.out, step, self.options)
        logged = {f"bias/{k}": v for k, v in metrics.items()
                  if k.split("/", 1)[1] in LOGGED and math.isfinite(v)}
        self.history.append({"step": step, **metrics})
        if self.trainer is not None:
            # Trainer.log clears should_log: keep the Trainer's own loss log due at this step.
            due = control.should_log
            self.trainer.log(logged)
            control.should_log = due
        else:
            state.log_history.append({**logged, "step": step})
        gap = next((v for k, v in metrics.items() if k.endswith("/jsdp_gap")), math.nan)
        limit = self.options.stop_above
        if may_stop and limit is not None and math.isfinite(gap) and abs(gap) > limit:
            control.should_training_stop = True
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None,
                    processing_class: Any = None, **kwargs: Any) -> Any:
        if state.global_step % max(1, self.options.every) == 0:
            tokenizer = self.tokenizer or processing_class or kwargs.get("tokenizer")
            return self._evaluate(state, control, model, tokenizer)
        return control

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       processing_class: Any = None, **kwargs: Any) -> Any:
        tokenizer = self.tokenizer or processing_class or kwargs.get("tokenizer")
        if tokenizer is None:
            raise ValueError("BiasCallback needs a tokenizer: pass tokenizer= or give the "
                             "Trainer a processing_class")
        # The baseline before any update; the Trainer would not honour a stop here anyway.
        return self._evaluate(state, control, model, tokenizer, may_stop=False)
