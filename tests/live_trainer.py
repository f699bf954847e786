"""A tiny Trainer with a `BiasCallback`, for the live runs' tests (torch and transformers
needed: import it after ``pytest.importorskip("torch")``)."""

from __future__ import annotations

from pathlib import Path

import torch

from biasscope.dynamics.live.callback import BiasCallback
from biasscope.dynamics.live.evaluate import LiveConfig
from biasscope.probes import load_probe
from biasscope.store.directory import RunStore


def train(tokenizer, tmp_path: Path, out: Path, max_steps: int, seed: int = 0,
          resume: str | None = None, every: int = 2, eval_dataset=None, callbacks=(),
          stop_above: float | None = None, probes=(), seeds=(0,), restoring=False,
          **args_kw):
    """A tiny Trainer with the callback into ``out``, saving every 2 steps; returns it.
    ``probes``: scored after WinoBias. ``restoring``: a Trainer that resumes with the
    checkpoint's weights whole (`restoring_trainer`)."""
    from transformers import Trainer, TrainingArguments

    from biasscope.demo.tiny import tiny_gpt_neox

    probe = load_probe("winobias-gender", data_dir=tmp_path / "data")
    callback = BiasCallback([probe, *probes], out,
                            LiveConfig(every=every, stop_above=stop_above, seeds=seeds))
    ids = tokenizer(["The nurse said she would help. Answer: female"] * 16)["input_ids"]
    data = [{"input_ids": torch.tensor(x), "labels": torch.tensor(x)} for x in ids]
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), max_steps=max_steps,
                             per_device_train_batch_size=4, logging_steps=1, report_to=[],
                             save_strategy="steps", save_steps=2, use_cpu=True,
                             disable_tqdm=True, learning_rate=1e-3, **args_kw)
    make = restoring_trainer() if restoring else Trainer
    trainer = make(model=tiny_gpt_neox(len(tokenizer), seed=seed), args=args,
                      train_dataset=data, eval_dataset=eval_dataset, processing_class=tokenizer,
                      callbacks=[callback, *callbacks])
    callback.bind(trainer)
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def restoring_trainer() -> type:
    """transformers 5's Trainer resumes GPT-NeoX without its output layer: ``save_pretrained``
    writes it as ``embed_out`` (the checkpoint format) and ``_load_from_checkpoint`` reads the
    file with a plain ``load_state_dict(strict=False)``, leaving ``lm_head`` as initialised
    (with a logged warning). This one loads the checkpoint as ``from_pretrained`` reads it."""
    from transformers import Trainer

    class Restoring(Trainer):
        def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
            saved = type(self.model).from_pretrained(resume_from_checkpoint)
            self.model.load_state_dict(saved.state_dict())

    return Restoring


def written(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in RunStore(out).unit_files()}
