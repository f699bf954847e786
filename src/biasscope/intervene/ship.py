"""The recommended checkpoint's weights, kept as training goes: a trainer deciding what to ship
needs the weights of the step the analysis recommends, not only its number.

While the intervention arm trains (the control arm has finished, so every step's difference in
differences and perplexity cost can be computed), each evaluation step is analysed as far as
the run goes; when that step becomes the recommendation, the arm's weights as they are in
memory (LoRA: the adapters only) and the tokenizer are saved to ``RUN/recommended/`` with
``recommended.json`` saying which step and why. The directory is replaced whole (written
beside it, then renamed), so a kill leaves the previous recommendation or the new one. A later
step cannot demote a saved one to an unsaved earlier one: earlier steps' gains and costs do not
change as steps are added, so the final recommendation's weights are the ones saved (on a kill
between an evaluation and its save, the step is analysed again when the resumed run reaches
it).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from biasscope.intervene import analysis
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json

WHERE = "recommended"
INFO = "recommended.json"


def saved(root: Path) -> dict[str, Any]:
    """What ``RUN/recommended/recommended.json`` says, or {} when nothing is saved."""
    path = root / WHERE / INFO
    return dict(json.loads(path.read_text())) if path.is_file() else {}


def save(model: Any, tokenizer: Any, root: Path, info: dict[str, Any]) -> Path:
    """``model`` and ``tokenizer`` to ``root/recommended/`` (replaced whole), with ``info``."""
    where = root / WHERE
    partial, old = root / f"{WHERE}.partial", root / f"{WHERE}.old"
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(str(partial))
    if tokenizer is not None:
        tokenizer.save_pretrained(str(partial))
    write_json(partial / INFO, info)
    shutil.rmtree(old, ignore_errors=True)
    if where.exists():
        os.replace(where, old)
    os.replace(partial, where)
    shutil.rmtree(old, ignore_errors=True)
    return where


def _info(summary: dict[str, Any], step: int, lora: bool) -> dict[str, Any]:
    arm = summary["arm"]
    return {"arm": arm, "step": step, "weights": "LoRA adapters" if lora else "full model",
            "steps_analysed": summary["steps"], "sentence": summary["sentence"],
            "beat_control": summary.get("beat_control", False),
            "gain": (summary.get("gain") or {}).get(str(step)),
            "cost": summary["cost"].get(str(step)),
            "perplexity": summary["arms"][arm][str(step)].get("perplexity"),
            "male_lean": summary["arms"][arm][str(step)].get("male_lean")}


def consider(model: Any, tokenizer: Any, store: RunStore, arm: str, control: str,
             step: int, options: analysis.Options, lora: bool) -> bool:
    """Analyse the run up to ``step`` and save the weights when ``step`` is recommended."""
    if step == 0 or saved(store.root).get("step") == step:
        return False
    summary = analysis.analyse(store, arm, control, options)
    if summary.get("recommended") != step:
        return False
    save(model, tokenizer, store.root, _info(summary, step, lora))
    return True


def finalise(root: Path, summary: dict[str, Any], lora: bool) -> str | None:
    """After the analysis of the whole run: bring ``recommended.json`` up to date with the
    final sentence, or say why the saved weights are not the recommendation's."""
    info, best = saved(root), summary.get("recommended")
    if best is None:
        return (f"no step was recommended, but {root / WHERE} holds step {info['step']}"
                if info else None)
    if info.get("step") != best:
        return (f"step {best} is recommended but its weights were not saved "
                f"({root / WHERE}: {'step ' + str(info['step']) if info else 'nothing'})")
    write_json(root / WHERE / INFO, {**_info(summary, best, lora), "final": True})
    return None


def saver(store: RunStore, arm: str, reference: str, options: analysis.Options, tokenizer: Any,
          every: int, lora: bool) -> Any:
    """A `transformers.TrainerCallback` that calls `consider` at every evaluation step (put
    after `BiasCallback`, so the step's records are in the run)."""
    from transformers import TrainerCallback

    class SaveRecommended(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            step = int(state.global_step)
            if step % every == 0:
                consider(kwargs["model"], tokenizer, store, arm, reference, step, options, lora)
            return control

    return SaveRecommended()
