"""A live run's last step and its seeds: scored on the step's own weights, resumed with the
run's seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from biasscope.core.errors import BiasscopeError  # noqa: E402
from biasscope.dynamics.live import weights  # noqa: E402
from biasscope.dynamics.live.evaluate import evaluate_now  # noqa: E402
from biasscope.dynamics.scoring.units import unit_summary  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402
from biasscope.store.directory import RunStore  # noqa: E402
from live_trainer import train, written  # noqa: E402


@pytest.fixture
def data(tmp_path, winobias_dir):
    (tmp_path / "data").symlink_to(winobias_dir)
    return tmp_path


def held_out(tokenizer) -> list[dict]:
    ids = tokenizer(["The nurse said she would help. Answer: female"] * 4)["input_ids"]
    return [{"input_ids": torch.tensor(x), "labels": torch.tensor(x)} for x in ids]


def gap(model, tokenizer, data: Path, out: Path, step: int) -> float:
    probe = load_probe("winobias-gender", data_dir=data / "data")
    return evaluate_now(model, tokenizer, [probe], out, step)["winobias-gender/jsdp_gap"]


def test_the_last_step_is_scored_on_its_own_weights_not_the_best_checkpoint_s(
        data, tiny_tokenizer, one_thread):
    """Before: with ``max_steps`` no multiple of ``every`` the last step was scored when
    training ended, after ``load_best_model_at_end`` had put the best checkpoint's weights in
    the model, and recorded as step 5. It is now scored at its own step's end (before the
    Trainer saves checkpoint-5 and loads the best): its records are checkpoint-5's."""
    from transformers import AutoModelForCausalLM

    out = data / "live"
    trainer = train(tiny_tokenizer, data, out, 5, eval_dataset=held_out(tiny_tokenizer),
                    eval_strategy="steps", eval_steps=2, load_best_model_at_end=True,
                    metric_for_best_model="loss", greater_is_better=True)
    assert trainer.state.best_model_checkpoint.endswith("checkpoint-2")  # the worst loss
    records = RunStore(out).records()
    assert sorted(set(records["step"])) == [0, 2, 4, 5]
    stored = unit_summary(records[records["step"] == 5])[2]["jsdp_gap"]
    own = AutoModelForCausalLM.from_pretrained(data / "trainer/checkpoint-5")
    assert stored == pytest.approx(gap(own, tiny_tokenizer, data, data / "own", 5), abs=1e-6)
    best = gap(trainer.model, tiny_tokenizer, data, data / "best", 5)  # the model at the end
    assert stored != pytest.approx(best, abs=1e-6)
    assert weights.recorded(out, "live", 5) == weights.digest(own)


def test_a_step_a_stop_comes_at_is_not_scored_on_the_best_checkpoint_s_weights(
        data, tiny_tokenizer, one_thread, capsys):
    """Another callback stops training after the evaluation at step 4 (every 3): the
    Trainer then loads the best checkpoint before training ends, so step 4's weights are not
    in hand. Before, they were scored as step 4; now the step is left out, said in one
    warning, and the curve ends at step 3."""
    from transformers import TrainerCallback

    class StopAt4(TrainerCallback):
        def on_evaluate(self, args, state, control, **kwargs):
            if state.global_step == 4:
                control.should_training_stop = True

    out = data / "live"
    trainer = train(tiny_tokenizer, data, out, 8, every=3, callbacks=[StopAt4()],
                    eval_dataset=held_out(tiny_tokenizer), eval_strategy="steps",
                    eval_steps=2, load_best_model_at_end=True)
    assert trainer.state.global_step == 4
    store = RunStore(out)
    assert sorted(set(store.records()["step"])) == [0, 3]
    assert [c["step"] for c in store.read_json("run.json")["checkpoints"]] == [0, 3]
    err = [line for line in capsys.readouterr().err.splitlines() if "biasscope" in line]
    best = trainer.state.best_model_checkpoint
    assert err == [f"warning: biasscope: step 4, where training stopped, not scored: "
                   f"load_best_model_at_end has put the weights of {best} in the model, not "
                   "step 4's own, so the run's curve ends at step 3; to have the step a stop "
                   "comes at scored, make every (3) divide eval_steps (a stop follows an "
                   "evaluation)"]


def test_without_load_best_model_at_end_a_stop_s_step_is_scored_when_training_ends(
        data, tiny_tokenizer, one_thread):
    """The model at the end is the step's own there: scored, as before."""
    from transformers import TrainerCallback

    class StopAt4(TrainerCallback):
        def on_evaluate(self, args, state, control, **kwargs):
            if state.global_step == 4:
                control.should_training_stop = True

    out = data / "live"
    train(tiny_tokenizer, data, out, 8, every=3, callbacks=[StopAt4()],
          eval_dataset=held_out(tiny_tokenizer), eval_strategy="steps", eval_steps=2)
    assert sorted(set(RunStore(out).records()["step"])) == [0, 3, 4]


def test_a_seed_added_on_resuming_is_refused_before_training(data, tiny_tokenizer, one_thread):
    """Before: the added seed was scored from the resumed step on, so the seed means before it
    were over one option order and after it over two, and the report called every earlier
    step unfinished for good. Refused as an added probe is, before any update."""
    out = data / "live"
    train(tiny_tokenizer, data, out, 4)
    before = written(out)
    with pytest.raises(BiasscopeError) as caught:
        train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"),
              seeds=(0, 1, 2))
    assert str(caught.value) == (
        f"seeds: {out} holds steps 0, 2, 4 of model_name 'live' without seeds 1, 2, which "
        "this training resumed at step 4 adds; the steps before it are not scored again "
        "(their weights are gone), so their seed means would be over other option orders than "
        "later steps': resume with the run's seeds (LiveConfig(seeds=(0,))), or give the "
        "added seeds a BiasCallback of their own with another out (its curve starts at step 4)")
    assert written(out) == before


def test_a_seed_dropped_on_resuming_is_refused_before_training(data, tiny_tokenizer,
                                                               one_thread):
    """Before: the later steps had no records of the dropped seed, which run.json still
    lists, so the report called each of them unscored "as the training reaches them"."""
    out = data / "live"
    train(tiny_tokenizer, data, out, 4, seeds=(0, 1))
    before = written(out)
    with pytest.raises(BiasscopeError) as caught:
        train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"))
    assert str(caught.value) == (
        f"seeds: {out} holds steps 0, 2, 4 of model_name 'live' with seed 1, which this "
        "training resumed at step 4 leaves out; its records would stop at step 4 and the "
        "report would call every later step unscored: resume with the run's seeds "
        "(LiveConfig(seeds=(0, 1))), or give this training another out")
    assert written(out) == before


def test_an_unseeded_probe_s_steps_are_held_with_seeds_without_0(data, tiny_tokenizer,
                                                                  one_thread):
    """Perplexity does not vary with the seed: its units are seed 0's whatever the seeds.
    Before, a run of seeds (1,) was read as holding none of its steps, so resuming it was
    refused as adding perplexity."""
    text = data / "held.txt"
    text.write_text("The nurse said she would help.\nThe doctor said he would help.\n")
    added = [load_probe("perplexity", text=text)]
    out = data / "live"
    train(tiny_tokenizer, data, out, 4, probes=added, seeds=(1,))
    before = written(out)
    train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"),
          probes=added, seeds=(1,), restoring=True)
    after = written(out)
    assert {k: after[k] for k in before} == before and len(after) == len(before) + 2


def test_a_file_s_series_is_not_mixed_with_a_resumed_training_s_eval_loss(
        data, tiny_tokenizer, winobias_dir, one_thread, capsys):
    """A series `biasscope dynamics --performance-csv` gave the Trainer's saved checkpoints
    under the live model's name, then a training resumed at the sweep's last step with an
    eval_dataset: before, its eval perplexity was added to the file's values and the series
    renamed "1 / eval perplexity", a stop weighed across both. It is left as it is, said
    once."""
    from biasscope.cli.main import main

    out = data / "live"
    train(tiny_tokenizer, data, data / "first", 4)  # its checkpoints, swept into out
    csv = data / "perf.csv"
    csv.write_text("2,0.1\n4,0.2\n")
    glob = str(data / "trainer" / "checkpoint-*")
    assert main(["dynamics", "--checkpoint-glob", f"live={glob}", "--data-dir",
                 str(winobias_dir), "--out", str(out), "--seeds", "0", "--device", "cpu",
                 "--quiet", "--performance-csv", str(csv)]) == 0
    before = (out / "performance.json").read_bytes()
    capsys.readouterr()
    train(tiny_tokenizer, data, out, 8, resume=str(data / "trainer/checkpoint-4"),
          restoring=True, eval_dataset=held_out(tiny_tokenizer), eval_strategy="steps",
          eval_steps=2)
    assert (out / "performance.json").read_bytes() == before
    err = [line for line in capsys.readouterr().err.splitlines() if "series" in line]
    assert err == ["warning: biasscope: the run's performance series for 'live' comes from a "
                   "file ('performance (perf.csv)', given to biasscope dynamics), not from the "
                   "training: this training's '1 / eval perplexity' is not recorded beside it "
                   "(one series per model); give this training another out to record it"]


def test_a_resumed_training_s_other_eval_set_is_not_mixed_into_the_run_s_series(
        data, tiny_tokenizer, one_thread, capsys):
    """Before: resumed with metric_for_best_model naming another eval set, its values joined
    the first set's and the series was renamed for the second."""
    import json

    sets = {"news": held_out(tiny_tokenizer),
            "code": held_out(tiny_tokenizer)[:2]}
    out = data / "live"
    train(tiny_tokenizer, data, out, 4, eval_strategy="steps", eval_steps=2,
          eval_dataset=sets, metric_for_best_model="news_loss")
    before = (out / "performance.json").read_bytes()
    capsys.readouterr()
    train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"),
          restoring=True, eval_strategy="steps", eval_steps=2, eval_dataset=sets,
          metric_for_best_model="code_loss")
    assert (out / "performance.json").read_bytes() == before
    assert json.loads(before)["series"]["live"]["source"] == "1 / eval perplexity (news)"
    err = [line for line in capsys.readouterr().err.splitlines() if "series" in line]
    assert err == ["warning: biasscope: the run's performance series for 'live' is '1 / eval "
                   "perplexity (news)', another eval set than this training's '1 / eval "
                   "perplexity (code)', which is not recorded beside it (one series per model): "
                   "evaluate the run's set (with a dict, name it in TrainingArguments("
                   "metric_for_best_model=...)), or give this training another out"]
