from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from biasscope.dynamics.live.callback import BiasCallback  # noqa: E402
from biasscope.dynamics.live.evaluate import LiveConfig, evaluate_now  # noqa: E402
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
    callback = BiasCallback(probe, tmp_path / "live", LiveConfig(every=2, seeds=(0, 1)))
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
    callback = BiasCallback(probe, tmp_path / "live", LiveConfig(every=2, stop_above=0.0))
    trainer = trainer_for(tiny_tokenizer, tmp_path, 8, callback)
    trainer.train()
    assert trainer.state.global_step == 2
    assert any("bias/winobias-gender/jsdp_gap" in h for h in trainer.state.log_history)


def test_plain_loop_function_matches_a_sweep_of_the_same_weights(
        tmp_path, winobias_dir, checkpoint_dirs):
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFConfig, load_model, load_tokenizer
    from biasscope.dynamics.scoring.sweep import run_dynamics

    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    ckpt = from_dirs(checkpoint_dirs[:1])[0]
    model = load_model(ckpt, HFConfig())
    model.train()
    metrics = evaluate_now(model, load_tokenizer(ckpt, HFConfig()), [probe], tmp_path / "a",
                           step=10)
    swept = run_dynamics(probe, [ckpt], tmp_path / "b", seeds=[0], quiet=True)
    expected = json.loads(swept.summary_json.read_text())["checkpoints"][0]["mean"]
    assert metrics["winobias-gender/jsdp_gap"] == pytest.approx(expected["jsdp_gap"], abs=1e-6)
    assert model.training



@pytest.fixture(scope="module")
def new_probes(tmp_path_factory):
    """CrowS-Pairs and Winogender on fixtures, a tokenizer whose words are each one token
    (Winogender's options are scored at the next token) and a tiny checkpoint saved with it."""
    from biasscope.demo.tiny import save, tiny_gpt_neox, train_tokenizer
    from crows_fixture import write_crows
    from winogender_fixture import write_winogender

    root = tmp_path_factory.mktemp("new-probes")
    data = write_winogender(write_crows(root / "data"))
    probes = [load_probe("crows-pairs", data_dir=data), load_probe("winogender", data_dir=data)]
    texts = [i.prompt + " " + " ".join(i.continuations) for p in probes for i in p.items(0)]
    tokenizer = train_tokenizer(texts * 5 + ["The nurse said she would help. Answer: female"],
                                vocab_size=600)
    saved = save(tiny_gpt_neox(len(tokenizer), seed=3), tokenizer, root / "checkpoint-10")
    return probes, tokenizer, saved


def test_the_callback_takes_crows_pairs_and_winogender(tmp_path, new_probes):
    """The new probes live: their headline numbers reach the Trainer's log at each evaluation
    and their records are stored as checkpoint steps."""
    from crows_fixture import PAIRS

    probes, tokenizer, _ = new_probes
    callback = BiasCallback(probes, tmp_path / "live", LiveConfig(every=2))
    trainer = trainer_for(tokenizer, tmp_path, 2, callback)
    callback.bind(trainer)
    trainer.train()
    for name in ("bias/crows-pairs/pct_stereotype", "bias/crows-pairs/likelihood_diff",
                 "bias/winogender/accuracy", "bias/winogender/gap_male_female"):
        assert [h["step"] for h in trainer.state.log_history if name in h] == [0, 2], name
    records = RunStore(tmp_path / "live").records()
    crows = records[records["probe"] == "crows-pairs"]
    assert len(crows) == 2 * 2 * len(PAIRS) and set(crows["revision"]) == {"step0", "step2"}
    assert len(records[records["probe"] == "winogender"]) == 2 * len(probes[1].items(0))


def test_live_crows_pairs_and_winogender_match_a_sweep(tmp_path, new_probes):
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFConfig, load_model
    from biasscope.dynamics.scoring.sweep import run_dynamics

    probes, tokenizer, saved = new_probes
    ckpt = from_dirs([saved])[0]
    live = evaluate_now(load_model(ckpt, HFConfig()), tokenizer, probes, tmp_path / "a",
                        step=10)
    for probe in probes:
        swept = run_dynamics(probe, [ckpt], tmp_path / probe.name, seeds=[0], quiet=True)
        mean = json.loads(swept.summary_json.read_text())["checkpoints"][0]["mean"]
        assert mean and {f"{probe.name}/{k}" for k in mean} <= set(live)
        for key, value in mean.items():
            assert live[f"{probe.name}/{key}"] == pytest.approx(value, abs=1e-5, nan_ok=True)
    assert 0 <= live["crows-pairs/pct_stereotype"] <= 1
    assert live["crows-pairs/likelihood_diff"] > 0


def test_the_weights_digest_tells_two_steps_apart_and_not_one_model_from_itself(
        tiny_tokenizer):
    """A live step's missing units are scored only on the weights it was scored on: the
    digest of a copy is the same, of one changed tensor (an output layer left as initialised)
    is not, and weights that are not here (the meta device) have none."""
    from biasscope.demo.tiny import tiny_gpt_neox
    from biasscope.dynamics.live.weights import digest

    model = tiny_gpt_neox(len(tiny_tokenizer))
    copy = tiny_gpt_neox(len(tiny_tokenizer))
    assert digest(model) == digest(copy) is not None
    with torch.no_grad():
        copy.get_output_embeddings().weight.mul_(1.0001)
    assert digest(copy) != digest(model)
    with torch.device("meta"):
        assert digest(tiny_gpt_neox(len(tiny_tokenizer))) is None
