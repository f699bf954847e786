"""One arm of an intervention run: a `transformers.Trainer` fine-tune watched by `BiasCallback`.

Both arms start from the same weights and seed; each is scored at step 0 and every ``every``
steps, in memory, into the one run directory as model ``control`` or the intervention's name.
Trainer checkpoints (model, optimiser, scheduler, RNG) are saved at every evaluation under
``RUN/train/<arm>/``, so a killed run resumes from the last one, and evaluations already in the
run are not redone (their steps are handed to the callback as done); the weights are read back
strictly (`biasscope.intervene.resume`). ``train/<arm>/done.json``
marks a finished arm; ``train/<arm>/arm.json`` says which run wrote the folder (`owner`), so
that one left from another run is refused rather than resumed (`refuse_foreign`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import IN_MEMORY, Checkpoint
from biasscope.backends.weights import tensor_names
from biasscope.core.config import comma_entries
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.live import LiveConfig
from biasscope.dynamics.scoring import unit_items, unit_of
from biasscope.intervene.resume import trainer_class
from biasscope.intervene.settings import Training as Training
from biasscope.probes import Probe, requests_of
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json

DONE = "done.json"
OWNER = "arm.json"
_LLAMA_LIKE = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: LoRA's target modules by ``config.model_type``: attention and MLP projections.
TARGETS: dict[str, tuple[str, ...]] = {
    "gpt_neox": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
    "gpt2": ("c_attn", "c_proj", "c_fc"),
    **{kind: _LLAMA_LIKE for kind in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2",
                                      "gemma3", "gemma3_text", "olmo", "olmo2")}}


class Limited:
    """A probe restricted to ``limit`` items per seed (its own stratified selection), so that
    every evaluation during training scores the same items; the limit is in its config."""

    def __init__(self, probe: Probe, limit: int | None) -> None:
        self.probe, self.limit = probe, limit
        self.name = probe.name
        self.requests = requests_of(probe)
        self.seeded = getattr(probe, "seeded", True)

    def config(self) -> dict[str, object]:
        return {**self.probe.config(), "items_limit": self.limit}

    def items(self, seed: int) -> list[Any]:
        return unit_items(self.probe, seed, self.limit)

    def __getattr__(self, name: str) -> Any:  # messages, metrics … of chat probes
        return getattr(self.probe, name)


def recorded(training: Training) -> dict[str, Any]:
    """The training settings as run.json records them, and checks on a rerun: LoRA's only when
    it is on, so a full fine-tune's record is what it was before LoRA existed; not the number
    of runs, which changes no run's results (run k is seeded ``seed + k − 1`` and named for
    its number), so a rerun with more runs adds them, and run.json's checkpoints list the runs
    trained."""
    out = asdict(training)
    del out["runs"]
    if not training.lora_rank:
        out = {k: v for k, v in out.items() if not k.startswith("lora_")}
    return out


def require_peft(training: Training) -> None:
    """With LoRA asked for and ``peft`` missing: one line saying what to install. Found, not
    imported: importing it imports torch and transformers, 10-20 s before any other check."""
    if training.lora_rank and importlib.util.find_spec("peft") is None:
        raise BiasscopeError(f"--lora-rank {training.lora_rank} needs peft: pip install "
                             "'biasscope[lora]' (or --lora-rank 0 for a full fine-tune)")


def check_targets(ckpt: Checkpoint, training: Training) -> None:
    """Named ``--lora-targets`` against the module names of ``ckpt``'s weights (read from the
    safetensors headers, so before any model loads): a one-line error naming those it lacks.
    A module matches as peft matches it: by its full name or its last parts."""
    asked = lora_targets(None, training.lora_targets)
    if not training.lora_rank or isinstance(asked, str):
        return
    names = tensor_names(ckpt)
    if names is None:  # a hub model not downloaded yet, a .gguf file: peft checks it later
        return
    modules = {n.rsplit(".", k)[0] for n in names for k in range(1, n.count(".") + 1)}
    missing = [t for t in asked if not any(m == t or m.endswith(f".{t}") for m in modules)]
    if missing:
        parts = sorted({n.rsplit(".", 2)[-2] for n in names if "." in n})
        raise BiasscopeError(f"--lora-targets {training.lora_targets}: {ckpt.label} has no "
                             f"module {', '.join(missing)} (its modules end in: "
                             f"{', '.join(parts[:12])}{', …' if len(parts) > 12 else ''}); "
                             "name some of them, or use auto")


def lora_targets(model: Any, asked: str) -> str | list[str]:
    """The modules LoRA adapts in ``model``: ``auto`` looks its architecture up in `TARGETS`
    (peft's ``all-linear``, every linear layer but the output one, where unknown)."""
    if asked != "auto":
        return asked if asked == "all-linear" else comma_entries(asked)  # checked: Training
    kind = getattr(getattr(model, "config", None), "model_type", "")
    return list(TARGETS[kind]) if kind in TARGETS else "all-linear"


def with_lora(model: Any, training: Training) -> Any:
    """``model`` wrapped in fresh LoRA adapters (only they train), or as it is at rank 0."""
    if not training.lora_rank:
        return model
    require_peft(training)
    from peft import LoraConfig, get_peft_model

    targets = lora_targets(model, training.lora_targets)
    try:
        return get_peft_model(model, LoraConfig(
            r=training.lora_rank, lora_alpha=training.lora_alpha, lora_dropout=0.0,
            target_modules=targets, task_type="CAUSAL_LM"))
    except ValueError as exc:  # a target module the model does not have
        raise BiasscopeError(f"--lora-targets {training.lora_targets}: {exc}") from None


def checkpoint_at(arm: str, step: int) -> Checkpoint:
    """The in-memory checkpoint an arm's evaluation at ``step`` is recorded as."""
    return Checkpoint(arm, IN_MEMORY, f"step{step}", step)


def evaluated_steps(store: RunStore, arm: str, probes: Sequence[Probe],
                    seeds: Sequence[int], steps: Sequence[int]) -> list[int]:
    """The steps of ``arm`` whose every unit is already in the run, whole: a unit holding
    fewer records than its probe's items (cut short by a copy or a sync) is set aside by
    `RunStore.has`, so its step is evaluated again rather than skipped."""
    done = []
    for step in steps:
        ckpt = checkpoint_at(arm, step)
        if all(store.has(unit_of(ckpt, p.name, s), rows=len(p.items(s))) for p in probes
               for s in (seeds if getattr(p, "seeded", True) else (0,))):
            done.append(step)
    return done


def _dataset(tokenizer: Any, texts: Sequence[str], seq_len: int, method: str | None = None
             ) -> list[dict[str, list[int]]]:
    """The documents an arm trains on, each cut at ``seq_len`` tokens; one under two tokens
    has nothing to predict. ``method``: the intervention that made ``texts`` from --text."""
    encoded = tokenizer(list(texts), truncation=True, max_length=seq_len)["input_ids"]
    rows = [{"input_ids": list(ids)} for ids in encoded if len(ids) >= 2]
    if not rows:
        what = (f"{method} leaves no training document of --text" if method else
                "no training document of --text is")
        raise BiasscopeError(f"{what} two tokens long: give longer documents")
    return rows


def check_documents(tokenizer: Any, texts: Sequence[str], changed: Sequence[str], method: str,
                    seq_len: int) -> None:
    """Refuse, before the first arm trains, an arm with nothing to train on (`_dataset`):
    drop-gendered keeping only one-token documents was refused once the control arm had
    trained, minutes later. The arms tokenize their documents again as they train."""
    _dataset(tokenizer, texts, seq_len)
    _dataset(tokenizer, changed, seq_len, method)


def _arguments(where: Path, training: Training, device: Any, quiet: bool) -> Any:
    import torch
    from transformers import TrainingArguments

    bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    return TrainingArguments(
        output_dir=str(where), max_steps=training.steps,
        per_device_train_batch_size=training.batch_size, learning_rate=training.lr,
        warmup_steps=training.warmup_steps, seed=training.seed, data_seed=training.seed,
        save_strategy="steps", save_steps=training.every, save_total_limit=1,
        logging_steps=training.every, report_to=[], use_cpu=device.type == "cpu", bf16=bf16,
        disable_tqdm=quiet, dataloader_num_workers=0, remove_unused_columns=False)


def owner(created: Any, arm: str, training: Training, base: Any) -> dict[str, Any]:
    """What ``train/<arm>/arm.json`` records of the run that wrote the folder: its run.json's
    ``created``, the arm and its seed (checked), and the base model (for the reader)."""
    return {"run_created": created, "arm": arm, "seed": training.seed, "base": base}


def finished(root: Path, arm: str) -> bool:
    """Whether ``arm`` of the run in ``root`` finished training (`train_arm` skips it)."""
    return (root / "train" / arm / DONE).is_file()


def _holds_training(where: Path) -> bool:
    """Whether an arm's folder holds something a call would resume or skip."""
    return (where / DONE).is_file() or any(where.glob("checkpoint-*"))


def refuse_foreign(root: Path, owners: dict[str, dict[str, Any]], fresh: bool) -> None:
    """Refuse, before anything loads, an arm folder under ``root/train/`` that holds Trainer
    checkpoints or a finished arm of another run: one kept after run.json was deleted
    (``fresh``: this call made run.json), one copied in by hand, or another arm's. A folder
    from before ``arm.json`` was written is the run's when run.json was there (its settings
    were just checked); ``owners``: the arms this call trains, `owner` of each."""
    for arm, own in owners.items():
        where = root / "train" / arm
        if not _holds_training(where):
            continue
        path = where / OWNER
        try:
            mark = dict(json.loads(path.read_text())) if path.is_file() else None
        except (ValueError, TypeError, OSError):  # damaged: no run it names is this one
            mark = {}
        if mark is None and not fresh:
            continue
        if mark is not None and all(mark.get(k) == own[k] for k in ("run_created", "arm",
                                                                     "seed")):
            continue
        if fresh:
            why = "was there before this run's run.json"
        elif not mark:
            why = f"another run wrote ({path} is damaged)"
        else:
            why = (f"another run wrote ({path}: arm {mark.get('arm')!r}, seed "
                   f"{mark.get('seed')}, run.json created {mark.get('run_created')})")
        raise BiasscopeError(f"{where} holds Trainer checkpoints or a finished arm that {why}: "
                             "it would be resumed as this run's; delete "
                             f"{root / 'train'} to train the arms from the start, or use "
                             "another --out")


def train_arm(arm: str, texts: Sequence[str], load: Any, tokenizer: Any,
              probes: Sequence[Probe], store: RunStore, training: Training,
              live: LiveConfig, device: Any, quiet: bool = False,
              after: Sequence[Any] = (), own: dict[str, Any] | None = None) -> list[int]:
    """Fine-tune one arm (``load()``: a fresh copy of the starting model; LoRA adapters are
    added when ``training.lora_rank``) with evaluations at step 0 and every ``training.every``
    steps; return the steps evaluated. A finished arm is skipped; a killed one resumes from its
    last Trainer checkpoint. ``after``: Trainer callbacks run after each evaluation; ``own``:
    `owner`, written to ``arm.json`` (taken away again where training stops before its first
    checkpoint, so a failed first call leaves no file behind: `_arm_folder`)."""
    from transformers import DataCollatorForLanguageModeling, set_seed
    from transformers.trainer_utils import get_last_checkpoint

    from biasscope.dynamics.live import BiasCallback  # transformers: imported when used

    where = store.root / "train" / arm
    steps = list(range(0, training.steps + 1, training.every))
    if finished(store.root, arm):
        return steps
    with _arm_folder(where, own is not None):
        set_seed(training.seed)
        model = load()
        if not training.train_embeddings:
            model.get_input_embeddings().weight.requires_grad_(False)
        model = with_lora(model, training)
        callback = BiasCallback(probes, store.root, LiveConfig(
            every=training.every, seeds=live.seeds, batch_size=live.batch_size,
            model_name=arm), tokenizer=tokenizer)
        callback.history = [{"step": s} for s in evaluated_steps(store, arm, probes,
                                                                 live.seeds, steps)]
        trainer = trainer_class()(
            model=model, args=_arguments(where, training, device, quiet),
            train_dataset=_dataset(tokenizer, texts, training.seq_len),
            data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
            callbacks=[callback, *after])
        callback.bind(trainer)
        last = get_last_checkpoint(str(where))  # type: ignore[no-untyped-call]
        if own is not None:
            write_json(where / OWNER, own)
        trainer.train(resume_from_checkpoint=last)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    write_json(where / DONE, {"steps": steps, "documents": len(texts), "losses": losses})
    if not training.keep_checkpoints:
        for old in where.glob("checkpoint-*"):
            shutil.rmtree(old, ignore_errors=True)
    return steps


@contextlib.contextmanager
def _arm_folder(where: Path, owned: bool) -> Iterator[None]:
    """An arm's folder, made for its training; a call that stops before the arm holds a
    Trainer checkpoint (a model that does not load, a commit refused once loaded) takes away
    what it put there: arm.json (``owned``: written by `train_arm`) where it was not there
    before, and the folder where this call made it, so that a refused call leaves no empty
    ``train/<arm>/``."""
    made, marked = not where.exists(), owned and not (where / OWNER).exists()
    where.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        if not _holds_training(where):
            if marked:
                (where / OWNER).unlink(missing_ok=True)
            if made:
                with contextlib.suppress(OSError):  # not empty: it keeps what it holds
                    where.rmdir()
        raise


def arm_log(store: RunStore, arm: str) -> dict[str, Any]:
    """What a finished arm recorded (``done.json``), or {}."""
    path = store.root / "train" / arm / DONE
    return dict(json.loads(path.read_text())) if path.is_file() else {}
