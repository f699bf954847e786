from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from biasscope.dynamics.live.callback import BiasCallback  # noqa: E402
from biasscope.dynamics.live.evaluate import LiveOptions, evaluate_now  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402
from biasscope.store.directory import RunStore  # noqa: E402


def trainer_for(tokenizer, tmp_path: Path, max_steps: int, callback: BiasCallback):
    from transformers import Trainer, TrainingArguments

    from biasscope.demo.tiny import tiny_gpt_neox

    texts = ["The nurse said she would help. Answer: female"] * 16
    ids = tokenizer(texts)["input_ids"]
    data = [{"input_ids": torch.tensor(x), "labels": torch.tensor(x)} for x in ids]
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), max_steps=max_steps,
                             per_device_train_batch_size=4, logging_steps=1, report_to=[],
                             save_strategy="no", use_cpu=True, disable_tqdm=True,
                             learning_rate=1e-3)
    trainer = Trainer(model=tiny_gpt_neox(len(tokenizer)), args=args, train_dataset=data,
                      processing_class=tokenizer, callbacks=[callback])
    return trainer


def test_callback_logs_through_the_trainer_and_stores_records(tmp_path, winobias_dir,
                                                              tiny_tokenizer):
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    callback = BiasCallback(probe, tmp_path / "live", LiveOptions(every=2, seeds=(0, 1)))
    trainer = trainer_for(tiny_tokenizer, tmp_path, 4, callback)
    callback.bind(trainer)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "bias/winobias-gender/jsdp_gap" in h]
    assert [h["step"] for h in logged] == [0, 2, 4]
    store = RunStore(tmp_path / "live")
    summary = json.loads(store.summary_json.read_text())
    assert [c["step"] for c in summary["checkpoints"]] == [0, 2, 4]
    assert summary["checkpoints"][0]["seeds"] == [0, 1]
    records = store.records()
    assert set(records["revision"]) == {"step0", "step2", "step4"}
    assert len(records) == 3 * 2 * len(probe.items(0))
    assert trainer.model.training  # put back in train mode after each evaluation


def test_callback_stops_training_when_the_gap_crosses_the_threshold(tmp_path, winobias_dir,
                                                                    tiny_tokenizer):
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    callback = BiasCallback(probe, tmp_path / "live", LiveOptions(every=2, stop_above=0.0))
    trainer = trainer_for(tiny_tokenizer, tmp_path, 8, callback)
    trainer.train()
    assert trainer.state.global_step == 2
    assert any("bias/winobias-gender/jsdp_gap" in h for h in trainer.state.log_history)


def test_plain_loop_function_matches_a_sweep_of_the_same_weights(
        tmp_path, winobias_dir, checkpoint_dirs):
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFOptions, load_model, load_tokenizer
    from biasscope.dynamics.scoring.sweep import run_dynamics

    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    ckpt = from_dirs(checkpoint_dirs[:1])[0]
    model = load_model(ckpt, HFOptions())
    model.train()
    metrics = evaluate_now(model, load_tokenizer(ckpt, HFOptions()), [probe], tmp_path / "a",
                           step=10)
    swept = run_dynamics(probe, [ckpt], tmp_path / "b", seeds=[0], quiet=True)
    expected = json.loads(swept.summary_json.read_text())["checkpoints"][0]["mean"]
    assert metrics["winobias-gender/jsdp_gap"] == pytest.approx(expected["jsdp_gap"], abs=1e-6)
    assert model.training
