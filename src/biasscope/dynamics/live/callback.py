"""`BiasCallback`: `evaluate_now` on a `transformers.Trainer`'s model every few steps.

A module of its own because subclassing ``TrainerCallback`` imports transformers' Trainer
utilities (and torch) when the class is made, and every command's parser imports
`biasscope.dynamics.live.evaluate`. It calls ``live.evaluate_now`` through its module, so a test can
watch it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from biasscope.backends import lazy
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.live import evaluate as live
from biasscope.dynamics.live import resume, weights
from biasscope.dynamics.live.evaluate import LiveConfig, is_logged
from biasscope.probes import Probe
from biasscope.store.directory import RunStore
from biasscope.store.locks import run_lock

#: The performance series a live run's Trainer evaluation gives, as the report names it.
EVAL_SOURCE = performance.TRAINING_SOURCE


def _eval_loss(metrics: Any) -> tuple[Any, str | None]:
    """The loss of one Trainer evaluation and its eval set's name: ``eval_loss`` (one
    dataset: no name), or ``eval_<name>_loss`` (one of a dict of eval datasets)."""
    if "eval_loss" in metrics:
        return metrics["eval_loss"], None
    named = [k for k in metrics if k.startswith("eval_") and k.endswith("_loss")
             and len(k) > len("eval__loss")]
    if len(named) == 1:
        return metrics[named[0]], named[0][len("eval_"):-len("_loss")]
    return None, None


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
                 config: LiveConfig = LiveConfig(), tokenizer: Any = None,
                 trainer: Any = None) -> None:
        lazy.require_torch()  # without the 'hf' extra: one line naming it, not an ImportError
        self.probes, self.out, self.config = live.live_inputs(probes, out, config)
        if tokenizer is not None and not callable(tokenizer):  # a name: found only at training
            raise BiasscopeError(f"tokenizer: give the tokenizer itself (e.g. AutoTokenizer."
                                 f"from_pretrained(...)), not {type(tokenizer).__name__} "
                                 f"{tokenizer!r}")
        self.tokenizer = tokenizer
        self.trainer = trainer
        self.history: list[dict[str, float]] = []
        #: Steps the run already had records of when a resumed training began, and the
        #: seeds of each probe it had them of: those units are not scored again.
        self.held: dict[int, dict[str, set[int]]] = {}
        #: Steps whose evaluation raised during training, with the error in words.
        self.failed: dict[int, str] = {}
        #: The eval set whose loss is the performance series, of a dict of eval datasets
        #: (the one metric_for_best_model names, else the first the Trainer evaluates); None
        #: until one is seen or with a single one.
        self.eval_set: str | None = None
        #: How it was chosen: by "metric_for_best_model", or as "the first" evaluated.
        self.eval_set_by = ""
        self._told: set[str] = set()  # eval sets the warning named as not recorded
        #: Held steps whose missing units this model cannot give (other weights), said once.
        self.unmatched: set[int] = set()

    def bind(self, trainer: Any) -> BiasCallback:
        self.trainer = trainer
        return self

    def _evaluate(self, state: Any, control: Any, model: Any, tokenizer: Any,
                  may_stop: bool = True) -> Any:
        step = int(state.global_step)
        # A held step lacking some units (its evaluation raised, or the process was killed,
        # after others were stored) may be the step a training resumed at, or the last step
        # when training ends: those units are scored now, on the weights the step was scored
        # on only (`weights`). No other held step is: the model is this step's at most.
        held = (live.held_units(self.out, self.config.model_name).get(step, {})
                if step in self.failed else self.held.get(step, {}))
        lacking = live.lacking(self.probes, self.config, held)
        if not lacking or any(h.get("step") == step for h in self.history):
            return control
        if held or step in self.failed:  # the end of training, or a resumed training
            then = weights.recorded(self.out, self.config.model_name, step)
            now = weights.digest(model) if then is not None else None
            if then is None or then != now:
                self._left_missing(step, lacking, then, now)
                return control
            metrics = live.complete_step(model, tokenizer, self.probes, self.out, step,
                                         self.config)
        else:  # records the weights' digest (`weights`) before the step's first unit
            metrics = live.evaluate_now(model, tokenizer, self.probes, self.out, step,
                                        self.config)
        self.failed.pop(step, None)
        logged = {f"bias/{k}": v for k, v in metrics.items()
                  if is_logged(k) and math.isfinite(v)}
        self.history.append({"step": step, **metrics})
        if self.trainer is not None:
            # Trainer.log clears should_log: keep the Trainer's own loss log due at this step.
            due = control.should_log
            self.trainer.log(logged)
            control.should_log = due
        else:
            state.log_history.append({**logged, "step": step})
        gap = next((v for k, v in metrics.items() if k.endswith("/jsdp_gap")), math.nan)
        limit = self.config.stop_above
        if may_stop and limit is not None and math.isfinite(gap) and abs(gap) > limit:
            control.should_training_stop = True
        return control

    def _left_missing(self, step: int, lacking: dict[str, list[int]], then: str | None,
                      now: str | None) -> None:
        """Say (once per step) why a step's missing units are not scored on this model."""
        if step in self.unmatched:
            return
        self.unmatched.add(step)
        units = resume.units_text(lacking)
        why = ("no record of the weights it was scored on" if then is None else
               "these weights cannot be read here" if now is None else
               f"the model here is not the one it was scored on (weights {then[:12]} then, "
               f"{now[:12]} now: a Trainer that did not restore its checkpoint whole, or "
               "load_best_model_at_end)")
        print(f"warning: biasscope: step {step} lacks {units}, left missing: {why}; the "
              "report names them", file=sys.stderr)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None,
                    processing_class: Any = None, **kwargs: Any) -> Any:
        """Every ``every`` steps, and at ``max_steps`` (the last step when it is no multiple
        of ``every``): the Trainer calls this before it saves the step's checkpoint and, at
        the end, before ``load_best_model_at_end`` swaps the weights, so the model here is
        the step's own."""
        if (state.global_step % self.config.every == 0
                or state.global_step == (state.max_steps or -1)):
            return self._guarded(state, control, model,
                                 self.tokenizer or processing_class or kwargs.get("tokenizer"))
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None,
                     processing_class: Any = None, **kwargs: Any) -> Any:
        """The trained model too, when training stopped at a step no multiple of ``every``
        before ``max_steps`` (another callback's stop): a curve without its last step would put
        "the final checkpoint" (what a stop is weighed against) short of the model the
        training produced. Not where ``load_best_model_at_end`` has swapped in the best
        checkpoint's weights (the Trainer does so before this call): they are not that step's,
        and a step never holds another model's records (`_swapped`)."""
        if not self._swapped(args, state):
            control = self._guarded(state, control, model, self.tokenizer or processing_class
                                    or kwargs.get("tokenizer"), may_stop=False)
        live.unplan(self.out, self.config,
                    [s for s in self._planned(state) if s > int(state.global_step)])
        return control

    def _swapped(self, args: Any, state: Any) -> bool:
        """Whether the last step is left unscored at the end, said in one warning: never
        evaluated (training stopped there by another callback) and the model in hand is the
        one ``load_best_model_at_end`` loaded. A step whose evaluation raised is completed on
        its recorded weights only, which says so itself (`_left_missing`)."""
        step, best = int(state.global_step), getattr(state, "best_model_checkpoint", None)
        if not (getattr(args, "load_best_model_at_end", False) and best) or \
                step in self.failed or step in self.held or \
                any(h.get("step") == step for h in self.history):
            return False
        scored = [int(h["step"]) for h in self.history if "step" in h] + list(self.held)
        ends = f"step {max(scored)}" if scored else "no step"
        print(f"warning: biasscope: step {step}, where training stopped, not scored: "
              f"load_best_model_at_end has put the weights of {best} in the model, not step "
              f"{step}'s own, so the run's curve ends at {ends}; to have the step a stop "
              f"comes at scored, make every ({self.config.every}) divide eval_steps (a stop "
              "follows an evaluation)", file=sys.stderr)
        return True

    def _planned(self, state: Any) -> list[int]:
        """The steps this training will evaluate after the one it starts (or resumes) at."""
        last, at = int(state.max_steps or 0), int(state.global_step)
        steps = list(range(self.config.every, last + 1, self.config.every))
        return [s for s in dict.fromkeys([*steps, last]) if s > at and s not in self.held]

    def _guarded(self, state: Any, control: Any, model: Any, tokenizer: Any,
                 may_stop: bool = True) -> Any:
        try:
            return self._evaluate(state, control, model, tokenizer, may_stop)
        except Exception as exc:  # the training's progress outweighs one step
            # An evaluation that fails mid-training (out of memory, a full disk) must not end
            # the training it watches: the step stays listed in run.json without records, so
            # the report says it is missing.
            step = int(state.global_step)
            self.failed[step] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            print(f"warning: biasscope: step {step} not scored, training goes on "
                  f"({self.failed[step]})", file=sys.stderr)
        return control

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None,
                    **kwargs: Any) -> Any:
        """The Trainer's own evaluation (``eval_loss``) as the run's performance series,
        1 / perplexity (higher is better, as a stop's budget reads it): without one the report
        can say where the gap is smallest but not what stopping there costs. A dict of eval
        datasets is evaluated one by one (``eval_<name>_loss``): a run holds one series per
        model, so it is the set the Trainer's ``metric_for_best_model`` names (the set it
        picks its best checkpoint by), else the first it evaluates, with a warning naming each
        other set once, which is not recorded; the series' source names the set."""
        loss, name = _eval_loss(metrics or {})
        if name is not None:
            if self.eval_set is None:
                named = self._named_set(args, name)
                if named is False:
                    return control  # metric_for_best_model names a set still to come
                self.eval_set = name
                self.eval_set_by = "metric_for_best_model" if named else "the first"
            elif name != self.eval_set:
                if name not in self._told and self.eval_set_by == "the first":
                    self._told.add(name)
                    print(f"warning: biasscope: the run's performance series is the eval "
                          f"set {self.eval_set!r} (eval_{self.eval_set}_loss), the first the "
                          f"Trainer evaluates; eval_{name}_loss is not recorded: name the set "
                          "a stop should weigh in TrainingArguments(metric_for_best_model="
                          f"'eval_{name}_loss')", file=sys.stderr)
                return control
        if isinstance(loss, (int, float)) and math.isfinite(loss):
            source = EVAL_SOURCE if name is None else f"{EVAL_SOURCE} ({name})"
            store = RunStore(self.out)
            with run_lock(store):  # no other series saved between the check and the add
                then = performance.source_of(store, self.config.model_name)
                if then is None or then == source:  # one series per model, of one source
                    performance.add(store, self.config.model_name, int(state.global_step),
                                    math.exp(-loss), source)
            if then is not None and then != source:
                self._other_series(then, source)
        return control

    def _other_series(self, then: str, now: str) -> None:
        """Say once that the run's series is of another source than this evaluation (a file
        `biasscope dynamics` imported, or another eval set), which is not recorded beside it:
        one series of two sources would weigh a stop against values that do not compare."""
        if f"series: {now}" in self._told:
            return
        self._told.add(f"series: {now}")
        model = self.config.model_name
        if performance.from_training(then):
            print(f"warning: biasscope: the run's performance series for {model!r} is {then!r}, "
                  f"another eval set than this training's {now!r}, which is not recorded "
                  "beside it (one series per model): evaluate the run's set (with a dict, name "
                  "it in TrainingArguments(metric_for_best_model=...)), or give this training "
                  "another out", file=sys.stderr)
        else:
            print(f"warning: biasscope: the run's performance series for {model!r} comes from a "
                  f"file ({then!r}, given to biasscope dynamics), not from the training: this "
                  f"training's {now!r} is not recorded beside it (one series per model); give "
                  "this training another out to record it", file=sys.stderr)

    def _named_set(self, args: Any, name: str) -> bool | None:
        """Whether ``metric_for_best_model`` names eval set ``name`` (True), another set
        (False), or none (None: no such setting, or one naming none of the bound Trainer's
        sets, which the Trainer refuses itself). Unbound, the sets are not known: one it does
        not name is taken for another's (with a dict the Trainer's metrics are all a set's)."""
        metric = getattr(args, "metric_for_best_model", None)
        if not isinstance(metric, str) or not metric:
            return None
        metric = metric if metric.startswith("eval_") else f"eval_{metric}"
        sets = getattr(self.trainer, "eval_dataset", None)
        if not isinstance(sets, dict):
            return metric.startswith(f"eval_{name}_")
        matching = [n for n in sets if metric.startswith(f"eval_{n}_")]
        return max(matching, key=len) == name if matching else None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       processing_class: Any = None, **kwargs: Any) -> Any:
        tokenizer = self.tokenizer or processing_class or kwargs.get("tokenizer")
        if tokenizer is None:
            raise BiasscopeError("BiasCallback needs a tokenizer: pass tokenizer= or give the "
                             "Trainer a processing_class")
        self.held = self._resumable(int(state.global_step))
        self._check_restored(int(state.global_step), model)
        # The baseline before any update; the Trainer would not honour a stop here anyway.
        control = self._evaluate(state, control, model, tokenizer, may_stop=False)
        live.plan(self.probes, self.out, self.config, self._planned(state))
        return control

    def _check_restored(self, at: int, model: Any) -> None:
        """Say when the model a training resumed at a step it scored whole is not the one that
        step was scored on: the Trainer did not restore its checkpoint whole, and the steps
        after it are of other weights than those before. (A step lacking units says so when it
        is not completed, `_left_missing`.)"""
        held = self.held.get(at)
        if not held or live.lacking(self.probes, self.config, held):
            return
        then = weights.recorded(self.out, self.config.model_name, at)
        if then is not None and then != (now := weights.digest(model)):
            print(f"warning: biasscope: the model this training resumed with is not the one "
                  f"step {at} was scored on (weights {then[:12]} then, {str(now)[:12]} now): "
                  "the Trainer did not restore its checkpoint whole (transformers 5 resumes "
                  "GPT-NeoX with its output layer as initialised), so the steps after it are "
                  "of other weights than those before", file=sys.stderr)

    def _resumable(self, at: int) -> dict[int, dict[str, set[int]]]:
        """The steps of this model the run already holds (and the seeds of each probe held),
        refused (before any training) unless they are the past of a training resumed at step
        ``at``: a fresh training, or one resumed from an earlier checkpoint, would overwrite
        another training's records. Steps a caller put in ``history`` (an intervention arm's,
        resumed) are its own: kept."""
        resume.refuse_swept(self.out, self.config, at)
        held = live.held_units(self.out, self.config.model_name)
        if held and at > 0:
            resume.refuse_other_probes(self.probes, self.out, self.config, held, at)
            resume.refuse_other_seeds(self.probes, self.out, self.config, held, at)
        known = {h.get("step") for h in self.history}
        later = [s for s in sorted(held) if (s > at or at == 0) and s not in known]
        if at > 0 and len(later) == 1 and (lacks := live.lacking(self.probes, self.config,
                                                                 held[later[0]])):
            # Killed while scoring its last step, before the Trainer saved that step's
            # checkpoint (it saves after the step's callbacks): the weights are gone.
            raise BiasscopeError(
                f"out: {self.out} holds step {later[0]} of model_name "
                f"{self.config.model_name!r} in part only ({resume.units_text(lacks)} "
                f"missing: its evaluation was cut short), past step {at}, where this training "
                "resumes; it "
                f"would reach step {later[0]} on weights of its own, and one step's units "
                f"come from one model: resume from checkpoint-{later[0]} if the Trainer saved "
                "it (its missing units are then scored), else give another out or "
                "LiveConfig(model_name=...)")
        if later:
            shown = ", ".join(map(str, later[:10])) + (" …" if len(later) > 10 else "")
            whose = ("another training's" if at == 0 else
                     f"those of the training that went on past step {at}, where this one "
                     "resumes")
            raise BiasscopeError(
                f"out: {self.out} already holds steps {shown} of model_name "
                f"{self.config.model_name!r}, {whose}; this training would overwrite them: "
                "give another out or LiveConfig(model_name=...), or resume the training "
                "that wrote them (trainer.train(resume_from_checkpoint=...))")
        return held
