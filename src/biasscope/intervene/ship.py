"""The recommended checkpoint's weights, kept as training goes: a trainer deciding what to ship
needs the weights of the step the analysis recommends, not only its number.

While the intervention arm trains (the control arm has finished, so every step's difference in
differences and perplexity cost can be computed), each evaluation step is analysed as far as
the run goes; when that step becomes the recommendation, the arm's weights as they are in
memory (LoRA: the adapters only) and the tokenizer are saved to ``RUN/recommended/`` with
``recommended.json`` saying which step and why, and which base model they were trained from
(``base``: its identity as run.json records it, beside PEFT's path-only
``base_model_name_or_path``). The directory is replaced whole (written
beside it, then renamed), so a kill leaves the previous recommendation or the new one. A later
step cannot demote a saved one to an unsaved earlier one: earlier steps' gains and costs do not
change as steps are added, so the final recommendation's weights are the ones saved (on a kill
between an evaluation and its save, the step is analysed again when the resumed run reaches
it). A rerun whose analysis recommends another step (another ``--budget``) leaves no
``recommended/`` that says otherwise: `finalise` renames it after its step. A kill between
the two renames leaves ``recommended.old/`` and ``recommended.partial/`` with no
``recommended/``: every rerun, saving or not, finishes that swap (`recover`) once it has
passed its checks, before it saves (a refused one leaves them as they are).
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


def recover(root: Path) -> None:
    """Finish a `save` a kill interrupted, on every rerun that passed its checks (under
    ``--no-save-recommended`` too, which saves nothing to clear them): with no
    ``recommended/``, the new weights where they were written whole (``recommended.json`` is
    written last), else the old ones, become it; then ``recommended.partial/`` and
    ``recommended.old/`` are removed."""
    where = root / WHERE
    partial, old = root / f"{WHERE}.partial", root / f"{WHERE}.old"
    if not where.exists():
        whole = next((d for d in (partial, old) if (d / INFO).is_file()), None)
        if whole is not None:
            os.replace(whole, where)
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def _base(root: Path) -> Any:
    """The base model's identity as run.json records it (``settings.intervention.base``): the
    weights the saved ones are a delta of, which ``adapter_config.json`` names by path only."""
    path = root / "run.json"
    recorded = json.loads(path.read_text()) if path.is_file() else {}
    return ((recorded.get("settings") or {}).get("intervention") or {}).get("base")


def _info(root: Path, summary: dict[str, Any], step: int, lora: bool) -> dict[str, Any]:
    arm = summary["arm"]
    scores = summary["arms"][arm].get(str(step), {})
    return {"arm": arm, "step": step, "weights": "LoRA adapters" if lora else "full model",
            "steps_analysed": summary["steps"], "sentence": summary["sentence"],
            "beat_control": summary.get("beat_control", False),
            "gain": (summary.get("gain") or {}).get(str(step)),
            "cost": summary["cost"].get(str(step)),
            "perplexity": scores.get("perplexity"), "male_lean": scores.get("male_lean"),
            "base": _base(root)}


def consider(model: Any, tokenizer: Any, store: RunStore, arm: str, control: str,
             step: int, config: analysis.InterventionAnalysisConfig, lora: bool) -> bool:
    """Analyse the run up to ``step`` and save the weights when ``step`` is recommended."""
    if step == 0 or saved(store.root).get("step") == step:
        return False
    summary = analysis.analyse(store, arm, control, config)
    if summary.get("recommended") != step:
        return False
    save(model, tokenizer, store.root, _info(store.root, summary, step, lora))
    return True


def finalise(root: Path, summary: dict[str, Any], lora: bool) -> str | None:
    """After the analysis of the whole run: bring ``recommended.json`` up to date with the
    final sentence. Where a rerun's analysis (another ``--budget``) recommends another step
    than the saved one, the saved weights move to ``recommended-step<N>/`` (their
    ``recommended.json`` rewritten with the new conclusion), and a step set aside so earlier
    comes back when it is the recommendation again. None, or the line to print."""
    info, best = saved(root), summary.get("recommended")
    moved = _set_aside(root, summary, info, lora) if info.get("step") != best else ""
    if best is None:
        return f"no step is recommended now: {moved}" if moved else None
    back = _bring_back(root, best) if moved or not info else False
    if not back and moved:
        return f"step {best} is recommended but its weights were not saved: {moved}"
    if not back and not info:
        return (f"step {best} is recommended but its weights were not saved ({root / WHERE}: "
                "nothing)")
    write_json(root / WHERE / INFO, {**_info(root, summary, best, lora), "final": True})
    if back:
        return f"step {best} is recommended again: its weights are back in {root / WHERE}" + (
            f"; {moved}" if moved else "")
    return None


def _set_aside(root: Path, summary: dict[str, Any], info: dict[str, Any], lora: bool) -> str:
    """``recommended/``, no longer the recommendation, renamed after its step (nothing is
    deleted: a rerun with the old budget brings it back); what was done, or ""."""
    if not info:
        return ""
    step = int(info["step"])
    aside = root / f"{WHERE}-step{step}"
    write_json(root / WHERE / INFO, {**_info(root, summary, step, lora), "final": False,
                                     "recommended": summary.get("recommended")})
    shutil.rmtree(aside, ignore_errors=True)  # the same step's weights, set aside before
    os.replace(root / WHERE, aside)
    return f"step {step}'s weights moved from {root / WHERE} to {aside}"


def _bring_back(root: Path, step: int) -> bool:
    """``recommended-step<step>/`` (set aside by an earlier rerun) made ``recommended/``."""
    aside = root / f"{WHERE}-step{step}"
    if not (aside / INFO).is_file() or (root / WHERE).exists():
        return False
    os.replace(aside, root / WHERE)
    return True


def saver(store: RunStore, arm: str, reference: str,
          config: analysis.InterventionAnalysisConfig, tokenizer: Any, every: int, lora: bool
          ) -> Any:
    """A `transformers.TrainerCallback` that calls `consider` at every evaluation step (put
    after `BiasCallback`, so the step's records are in the run)."""
    from transformers import TrainerCallback

    class SaveRecommended(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            step = int(state.global_step)
            if step % every == 0:
                consider(kwargs["model"], tokenizer, store, arm, reference, step, config, lora)
            return control

    return SaveRecommended()
