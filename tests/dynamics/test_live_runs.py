"""A live run's folder across trainings: resumed, started afresh, evaluated twice."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from biasscope.core.errors import BiasscopeError  # noqa: E402
from biasscope.dynamics.live.callback import BiasCallback  # noqa: E402
from biasscope.dynamics.live.evaluate import LiveConfig, evaluate_now  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402
from biasscope.store.directory import RunStore  # noqa: E402
from live_trainer import train, written  # noqa: E402


@pytest.fixture
def data(tmp_path, winobias_dir):
    (tmp_path / "data").symlink_to(winobias_dir)
    return tmp_path


def test_a_resumed_training_adds_its_later_steps_and_rewrites_none(data, tiny_tokenizer,
                                                                   one_thread, capsys):
    out = data / "live"
    train(tiny_tokenizer, data, out, 4)
    before = written(out)
    capsys.readouterr()
    trainer = train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"),
                    restoring=True)
    assert "resumed with is not the one" not in capsys.readouterr().err
    after = written(out)
    assert {k: after[k] for k in before} == before and len(after) == 4
    summary = json.loads(RunStore(out).summary_json.read_text())
    assert [c["step"] for c in summary["checkpoints"]] == [0, 2, 4, 6]
    logged = [h["step"] for h in trainer.state.log_history
              if "bias/winobias-gender/jsdp_gap" in h]
    assert logged == [0, 2, 4, 6]  # step 4 not logged again on resuming


def test_a_fresh_training_into_a_live_run_is_refused_before_it_trains(data, tiny_tokenizer,
                                                                      one_thread):
    out = data / "live"
    train(tiny_tokenizer, data, out, 2)
    before = written(out)
    with pytest.raises(BiasscopeError, match=r"already holds steps 0, 2 of model_name 'live', "
                                             r"another training's"):
        train(tiny_tokenizer, data, out, 2, seed=5)
    assert written(out) == before


def test_resuming_before_the_run_s_last_step_is_refused(data, tiny_tokenizer, one_thread):
    out = data / "live"
    train(tiny_tokenizer, data, out, 4)
    before = written(out)
    with pytest.raises(BiasscopeError, match=r"holds steps 4 of .* went on past step 2"):
        train(tiny_tokenizer, data, out, 4, resume=str(data / "trainer/checkpoint-2"))
    assert written(out) == before


def test_evaluate_now_never_scores_a_step_twice(data, tiny_tokenizer, one_thread):
    from biasscope.demo.tiny import tiny_gpt_neox

    probe = load_probe("winobias-gender", data_dir=data / "data")
    out = data / "live"
    evaluate_now(tiny_gpt_neox(len(tiny_tokenizer)), tiny_tokenizer, [probe], out, 3)
    before = written(out)
    other = tiny_gpt_neox(len(tiny_tokenizer), seed=1)
    with pytest.raises(BiasscopeError, match=r"^step: .* already holds winobias-gender at "
                                             r"step 3 of live \(seed 0\); a step is scored once"):
        evaluate_now(other, tiny_tokenizer, [probe], out, 3)
    assert written(out) == before


def test_an_evaluation_that_fails_mid_training_costs_that_step_only(data, tiny_tokenizer,
                                                                    one_thread, monkeypatch,
                                                                    capsys):
    from biasscope.dynamics.live import evaluate as live
    from biasscope.dynamics.summary import unfinished

    real = live.evaluate_now

    def failing_at_4(model, tokenizer, probes, out, step, config):
        if step == 4:  # listed in run.json, as a failure after init_run leaves it
            live.init_run(RunStore(out), probes, live.SweepConfig(
                [live.Checkpoint("live", live.IN_MEMORY, "step4", 4)], Path(out), [0],
                comparable=live.hf_comparable(live.HFConfig(batch_size=32))))
            raise RuntimeError("CUDA out of memory\nTried to allocate 2 GiB")
        return real(model, tokenizer, probes, out, step, config)

    monkeypatch.setattr(live, "evaluate_now", failing_at_4)
    out = data / "live"
    trainer = train(tiny_tokenizer, data, out, 6, save_total_limit=1)
    assert trainer.state.global_step == 6 and trainer.model.training
    assert "warning: biasscope: step 4 not scored, training goes on (RuntimeError: CUDA out " \
           "of memory)" in capsys.readouterr().err
    store = RunStore(out)
    assert sorted(set(store.records()["step"])) == [0, 2, 6]
    section = unfinished.unscored(store, store.read_json("run.json"))
    said = unfinished.sentence(section, out)
    assert "3 of 4 checkpoints in run.json fully scored; no records yet for step 4" in said
    assert "scored live, from weights in memory, as the training reaches them" in said
    assert "biasscope dynamics" not in said


def test_the_trained_model_is_scored_when_max_steps_is_no_multiple_of_every(
        data, tiny_tokenizer, one_thread):
    """Gradient accumulation: steps are optimiser steps; the last (7) is scored at the end."""
    trainer = train(tiny_tokenizer, data, data / "live", 7, every=3,
                    gradient_accumulation_steps=2)
    assert trainer.state.global_step == 7
    logged = [h["step"] for h in trainer.state.log_history
              if "bias/winobias-gender/jsdp_gap" in h]
    assert logged == [0, 3, 6, 7]
    assert sorted(set(RunStore(data / "live").records()["step"])) == [0, 3, 6, 7]


@pytest.mark.parametrize(("make", "says"), [
    (lambda p, out: BiasCallback(p, out, LiveConfig(model_name=" ")),
     "model_name: give the run's name for the model being trained, e.g. 'live', not ' '"),
    (lambda p, out: BiasCallback(p, out, {"model_name": ""}),
     "config.model_name: give the run's name"),
    (lambda p, out: BiasCallback(p, out, tokenizer="gpt2"),
     "tokenizer: give the tokenizer itself (e.g. AutoTokenizer.from_pretrained(...)), not str "
     "'gpt2'"),
])
def test_a_bad_argument_is_one_line_naming_it_before_training(tmp_path, winobias_dir, make,
                                                               says):
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    with pytest.raises(BiasscopeError) as caught:
        make(probe, tmp_path / "live")
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)
    assert not (tmp_path / "live").exists()


def test_the_trainer_s_evaluation_is_the_live_run_s_performance_for_a_stop(data,
                                                                           tiny_tokenizer,
                                                                           one_thread):
    """Without an eval_dataset the report says why it recommends no stop; with one, the
    Trainer's eval loss (as 1 / perplexity) is the series a stop is weighed against."""
    from biasscope.dynamics.summary.build import full_summary

    out = data / "plain"
    train(tiny_tokenizer, data, out, 4)
    said = full_summary(RunStore(out))["analysis"]["models"]["live"]
    assert said["recommendation"] is None
    assert said["recommendation_refused"].startswith("no stop recommended: the run has no "
                                                     "performance series")
    assert any("give the Trainer an eval_dataset" in s for s in said["sentences"])

    ids = tiny_tokenizer(["The doctor said he would help. Answer: male"] * 4)["input_ids"]
    held = [{"input_ids": torch.tensor(x), "labels": torch.tensor(x)} for x in ids]
    trainer = train(tiny_tokenizer, data, data / "live", 4, eval_dataset=held,
                    eval_strategy="steps", eval_steps=2, eval_on_start=True)
    losses = {h["step"]: h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h}
    stored = json.loads((data / "live" / "performance.json").read_text())["series"]["live"]
    assert stored["source"] == "1 / eval perplexity"
    assert stored["values"] == {str(s): pytest.approx(math.exp(-v)) for s, v in losses.items()}
    assert sorted(losses) == [0, 2, 4]
    said = full_summary(RunStore(data / "live"))["analysis"]["models"]["live"]
    assert said["performance"]["source"] == "1 / eval perplexity"
    assert said["recommendation"] is not None and "recommendation_refused" not in said


def test_a_report_drawn_while_training_runs_says_which_steps_are_to_come(data, tiny_tokenizer,
                                                                        one_thread):
    """run.json lists the steps the training will evaluate from its start: a report drawn at
    step 2 says steps 4 and 5 are not scored yet; once training ends, nothing is left open,
    also when a stop ends it early."""
    from transformers import TrainerCallback

    from biasscope.dynamics.summary import unfinished
    from biasscope.dynamics.summary.build import full_summary

    out, seen = data / "live", {}

    class Reader(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 2:
                store = RunStore(out)
                seen["section"] = unfinished.unscored(store, store.read_json("run.json"))
                seen["summary"] = full_summary(store)

    train(tiny_tokenizer, data, out, 5, callbacks=[Reader()])
    section = seen["section"]
    assert [m["step"] for m in section["missing"]] == [4, 5] and section["scored"] == 2
    said = seen["summary"]["analysis"]["models"]["live"]["sentences"]
    assert "This rests on the scored checkpoints only: the run is unfinished (steps 4, 5 not " \
           "yet scored)." in said[0]
    store = RunStore(out)
    assert unfinished.unscored(store, store.read_json("run.json")) is None

    stopped = data / "stopped"
    trainer = train(tiny_tokenizer, data, stopped, 8, stop_above=0.0)
    assert trainer.state.global_step == 2
    run = RunStore(stopped).read_json("run.json")
    assert [c["step"] for c in run["checkpoints"]] == [0, 2]


def test_a_probe_added_on_resuming_is_refused_before_training(data, tiny_tokenizer,
                                                              one_thread):
    """Before: the steps held were skipped whole, so the added probe had no records of them
    and the report did not say so. The steps are written once: refused in one line saying
    what to do, before any update."""
    out = data / "live"
    train(tiny_tokenizer, data, out, 4)
    before = written(out)
    text = data / "held.txt"
    text.write_text("The nurse said she would help.\nThe doctor said he would help.\n")
    added = load_probe("perplexity", text=text)
    with pytest.raises(BiasscopeError) as caught:
        train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"),
              probes=[added])
    said = str(caught.value)
    assert said.startswith(f"probes: {out} holds steps 0, 2, 4 of model_name 'live' without "
                           "perplexity, which this training resumed at step 4 adds; those "
                           "steps are not scored again: give the added probes a BiasCallback "
                           "of their own with another out") and "\n" not in said
    assert said.endswith("or resume with the run's probes (winobias-gender)")
    assert written(out) == before


def test_a_dict_of_eval_sets_gives_the_first_s_loss_and_says_so(data, tiny_tokenizer,
                                                               one_thread, capsys):
    """Before: the Trainer logs ``eval_<name>_loss`` for a dict of eval datasets, and the
    callback, reading ``eval_loss`` only, recorded no performance without a word."""
    def held(text):
        ids = tiny_tokenizer([text] * 4)["input_ids"]
        return [{"input_ids": torch.tensor(x), "labels": torch.tensor(x)} for x in ids]

    out = data / "live"
    trainer = train(tiny_tokenizer, data, out, 4, eval_strategy="steps", eval_steps=2,
                    eval_dataset={"news": held("The doctor said he would help."),
                                  "code": held("Answer: male female")})
    losses = {h["step"]: h["eval_news_loss"] for h in trainer.state.log_history
              if "eval_news_loss" in h}
    stored = json.loads((out / "performance.json").read_text())["series"]["live"]
    assert stored["source"] == "1 / eval perplexity (news)" and sorted(losses) == [2, 4]
    assert stored["values"] == {str(s): pytest.approx(math.exp(-v)) for s, v in losses.items()}
    err = [line for line in capsys.readouterr().err.splitlines() if "eval set" in line]
    assert err == ["warning: biasscope: the run's performance series is the eval set 'news' "
                   "(eval_news_loss), the first the Trainer evaluates; eval_code_loss is not "
                   "recorded: name the set a stop should weigh in TrainingArguments("
                   "metric_for_best_model='eval_code_loss')"]


@pytest.mark.parametrize("metric", ["eval_code_loss", "code_loss"])
def test_a_dict_of_eval_sets_gives_the_loss_of_the_one_metric_for_best_model_names(
        data, tiny_tokenizer, one_thread, capsys, metric):
    """Before: the first set's loss was the series whatever the Trainer picked its best
    checkpoint by. The set ``metric_for_best_model`` names (as the Trainer reads it, with or
    without ``eval_``) is the one a stop is weighed against, without a warning."""
    def held(text):
        ids = tiny_tokenizer([text] * 4)["input_ids"]
        return [{"input_ids": torch.tensor(x), "labels": torch.tensor(x)} for x in ids]

    out = data / "live"
    trainer = train(tiny_tokenizer, data, out, 4, eval_strategy="steps", eval_steps=2,
                    metric_for_best_model=metric,
                    eval_dataset={"news": held("The doctor said he would help."),
                                  "code": held("Answer: male female")})
    losses = {h["step"]: h["eval_code_loss"] for h in trainer.state.log_history
              if "eval_code_loss" in h}
    stored = json.loads((out / "performance.json").read_text())["series"]["live"]
    assert stored["source"] == "1 / eval perplexity (code)" and sorted(losses) == [2, 4]
    assert stored["values"] == {str(s): pytest.approx(math.exp(-v)) for s, v in losses.items()}
    assert "eval set" not in capsys.readouterr().err


def _failing_unit(monkeypatch, fails, error: type[BaseException] = RuntimeError):
    """The live unit for which ``fails(unit)`` raises ``error``, after the units before it
    were stored."""
    from biasscope.dynamics.live import evaluate as live

    real = live.unit_frame

    def unit_frame(scorer, unit, *args):
        if fails(unit):
            raise error("CUDA out of memory")
        return real(scorer, unit, *args)

    monkeypatch.setattr(live, "unit_frame", unit_frame)


def _failing_probe(monkeypatch, probe: str, steps: set[int]):
    """``probe``'s unit raises at ``steps``, after the probes before it were stored."""
    _failing_unit(monkeypatch, lambda unit: unit.probe == probe and unit.step in steps)


def test_a_resumed_training_scores_the_probe_its_step_lacks_and_the_report_names_the_rest(
        data, tiny_tokenizer, one_thread, monkeypatch, capsys):
    """Before: a step where one probe's records were stored and the next probe raised was held
    whole on resuming, so the resumed step (whose model it is) never got the missing probe.
    Now that step is scored for it; an earlier step, whose model is gone, is named missing."""
    from biasscope.cli.main import main

    out = data / "live"
    text = data / "held.txt"
    text.write_text("The nurse said she would help.\nThe doctor said he would help.\n")
    added = load_probe("perplexity", text=text)
    _failing_probe(monkeypatch, "perplexity", {2, 4})
    train(tiny_tokenizer, data, out, 4, probes=[added])
    assert capsys.readouterr().err.count("not scored, training goes on") >= 2
    before = written(out)
    monkeypatch.undo()
    trainer = train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"),
                    probes=[added], restoring=True)
    after = written(out)
    assert {k: after[k] for k in before} == before
    records = RunStore(out).records()
    steps = {p: sorted(set(records[records["probe"] == p]["step"])) for p in
             ("winobias-gender", "perplexity")}
    assert steps == {"winobias-gender": [0, 2, 4, 6], "perplexity": [0, 4, 6]}
    logged = [h["step"] for h in trainer.state.log_history if "bias/perplexity/perplexity" in h]
    assert logged == [0, 4, 6]  # 0 from the checkpoint's log history
    assert main(["report", str(out)]) == 0
    summary = json.loads(RunStore(out).summary_json.read_text())
    said = summary["unfinished"]["sentence"]
    assert "no records yet for perplexity at step 2." in said, said
    assert "perplexity at step 2" in (out / "report.html").read_text()


def test_a_probe_dropped_on_resuming_is_refused_before_training(data, tiny_tokenizer,
                                                                one_thread):
    """Before: resuming with fewer probes trained on; run.json still listed the dropped one
    for every later step, so the report called them unscored "as the training reaches them"."""
    out = data / "live"
    text = data / "held.txt"
    text.write_text("The nurse said she would help.\nThe doctor said he would help.\n")
    train(tiny_tokenizer, data, out, 4, probes=[load_probe("perplexity", text=text)])
    before = written(out)
    with pytest.raises(BiasscopeError) as caught:
        train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"))
    said = str(caught.value)
    assert said == (f"probes: {out} holds steps 0, 2, 4 of model_name 'live' with perplexity, "
                    "which this training resumed at step 4 leaves out; its curve would stop at "
                    "step 4 and the report would call every later step unscored: resume with "
                    "the run's probes (perplexity, winobias-gender), or give this training "
                    "another out")
    assert written(out) == before


def test_the_last_step_failed_after_one_probe_is_completed_when_training_ends(
        data, tiny_tokenizer, one_thread, monkeypatch, capsys):
    """Before: the end's evaluation of the last step scored every probe again, refused for the
    one already stored ("already holds winobias-gender at step 4"), which replaced the error
    in ``callback.failed`` and left the missing probe unscored."""
    from biasscope.dynamics.live import evaluate as live

    real, calls = live.unit_frame, []

    def once_at_4(scorer, unit, *args):
        if unit.probe == "perplexity" and unit.step == 4 and not calls:
            calls.append(unit.step)
            raise RuntimeError("CUDA out of memory")
        return real(scorer, unit, *args)

    monkeypatch.setattr(live, "unit_frame", once_at_4)
    out = data / "live"
    text = data / "held.txt"
    text.write_text("The nurse said she would help.\nThe doctor said he would help.\n")
    trainer = train(tiny_tokenizer, data, out, 4, probes=[load_probe("perplexity", text=text)])
    err = capsys.readouterr().err
    assert err.count("not scored, training goes on") == 1 and "already holds" not in err
    callback = next(c for c in trainer.callback_handler.callbacks if isinstance(c, BiasCallback))
    assert callback.failed == {}
    records = RunStore(out).records()
    assert sorted(set(records[records["probe"] == "perplexity"]["step"])) == [0, 2, 4]


def _failing_seed(monkeypatch, seed: int, steps: set[int], error: type[BaseException]):
    """WinoBias's unit of ``seed`` raises ``error`` at ``steps``, after the seeds before it
    were stored."""
    _failing_unit(monkeypatch, lambda unit: unit.seed == seed and unit.step in steps, error)


def test_a_resumed_training_scores_the_seeds_its_step_lacks_and_no_earlier_step_s(
        data, tiny_tokenizer, one_thread, monkeypatch, capsys):
    """Before: a probe counted as held at a step with any of its seeds, so a step whose
    evaluation raised after seed 0 of 2 stayed without seed 1 for good. The step resumed at
    gets it, scored on its checkpoint's weights (the same records as scoring that checkpoint
    afresh); an earlier step's weights are gone, so its seed stays missing and reported."""
    from transformers import AutoModelForCausalLM

    from biasscope.cli.main import main
    from biasscope.dynamics.scoring.units import unit_summary

    out = data / "live"
    _failing_seed(monkeypatch, 1, {2, 4}, RuntimeError)
    train(tiny_tokenizer, data, out, 4, seeds=(0, 1))
    assert capsys.readouterr().err.count("not scored, training goes on") == 3  # 4: twice
    before = written(out)
    monkeypatch.undo()
    trainer = train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"),
                    seeds=(0, 1), restoring=True)
    after = written(out)
    assert {k: after[k] for k in before} == before and len(after) == len(before) + 3
    records = RunStore(out).records()
    seeds = {int(s): sorted(set(records[records["step"] == s]["seed"]))
             for s in set(records["step"])}
    assert seeds == {0: [0, 1], 2: [0], 4: [0, 1], 6: [0, 1]}

    # Seed 1 of step 4 is what checkpoint-4's weights give, scored afresh.
    model = AutoModelForCausalLM.from_pretrained(data / "trainer/checkpoint-4")
    probe = load_probe("winobias-gender", data_dir=data / "data")
    again = evaluate_now(model, tiny_tokenizer, [probe], data / "again", 4,
                         LiveConfig(seeds=(1,)))
    unit = records[(records["step"] == 4) & (records["seed"] == 1)]
    assert unit_summary(unit)[2]["jsdp_gap"] == pytest.approx(
        again["winobias-gender/jsdp_gap"], abs=1e-6)

    # Step 4 reaches the Trainer's log once, as the mean of both seeds.
    logged = {h["step"]: h["bias/winobias-gender/jsdp_gap"] for h in trainer.state.log_history
              if "bias/winobias-gender/jsdp_gap" in h}
    summary = json.loads(RunStore(out).summary_json.read_text())
    means = {c["step"]: c["mean"]["jsdp_gap"] for c in summary["checkpoints"]}
    assert sorted(logged) == [0, 4, 6] and logged[4] == pytest.approx(means[4], abs=1e-6)

    assert main(["report", str(out)]) == 0
    said = json.loads(RunStore(out).summary_json.read_text())["unfinished"]["sentence"]
    assert "3 of 4 checkpoints in run.json fully scored; no records yet for step 2 (seed 1)." \
        in said, said


def test_a_resumed_model_that_is_not_the_checkpoint_s_leaves_the_step_s_seeds_missing(
        data, tiny_tokenizer, one_thread, monkeypatch, capsys):
    """Before: the resumed step's missing units were scored on whatever model the Trainer
    resumed with; transformers 5's own Trainer resumes the tiny GPT-NeoX with its output layer
    as initialised, so they held another model's records under step 4. They are left missing,
    said in one warning, and the report names them."""
    out = data / "live"
    _failing_seed(monkeypatch, 1, {4}, RuntimeError)
    train(tiny_tokenizer, data, out, 4, seeds=(0, 1))
    before = written(out)
    monkeypatch.undo()
    capsys.readouterr()
    train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"), seeds=(0, 1))
    after = written(out)
    assert {k: after[k] for k in before} == before and len(after) == len(before) + 2
    records = RunStore(out).records()
    assert sorted(set(records[records["step"] == 4]["seed"])) == [0]
    err = [line for line in capsys.readouterr().err.splitlines() if "left missing" in line]
    assert len(err) == 1 and err[0].startswith(
        "warning: biasscope: step 4 lacks winobias-gender seed 1, left missing: the model here "
        "is not the one it was scored on (weights "), err
    store = RunStore(out)
    from biasscope.dynamics.summary import unfinished

    said = unfinished.sentence(unfinished.unscored(store, store.read_json("run.json")), out)
    assert "no records yet for step 4 (seed 1)." in said, said


def test_a_kill_between_seeds_is_completed_by_the_training_resumed_at_that_step(
        data, tiny_tokenizer, one_thread, monkeypatch):
    """Killed (not an exception the callback catches) while scoring seed 1 of the last
    step, after its checkpoint was saved: resumed from it, the step gets seed 1."""
    out = data / "live"
    _failing_seed(monkeypatch, 1, {4}, RuntimeError)  # at step 4's own evaluation

    from biasscope.dynamics.live import evaluate as live

    failing = live.unit_frame

    def killed_at_the_end(scorer, unit, *args):  # the end's retry: killed
        if unit.seed == 1 and unit.step == 4 and killed_at_the_end.retry:
            raise KeyboardInterrupt
        killed_at_the_end.retry = unit.seed == 1 and unit.step == 4
        return failing(scorer, unit, *args)

    killed_at_the_end.retry = False
    monkeypatch.setattr(live, "unit_frame", killed_at_the_end)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_tokenizer, data, out, 4, seeds=(0, 1))
    assert (data / "trainer/checkpoint-4").is_dir()
    monkeypatch.undo()
    train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"),
          seeds=(0, 1), restoring=True)
    records = RunStore(out).records()
    assert sorted(set(records[records["step"] == 4]["seed"])) == [0, 1]
    store = RunStore(out)
    from biasscope.dynamics.summary import unfinished

    assert unfinished.unscored(store, store.read_json("run.json")) is None


def test_the_stop_s_budget_weighs_the_trainer_s_eval_perplexity_as_point_values(
        data, tiny_tokenizer, one_thread):
    """The performance side of a live run's stop: the Trainer's eval losses (1 / perplexity,
    one value per step, no interval) decide which earlier steps are within the budget. An
    earlier step is a candidate exactly when its value is at most ``budget`` (relative) below
    the last step's: just over its shortfall it is in, just under it is out."""
    from biasscope.dynamics.analysis.config import AnalysisConfig
    from biasscope.dynamics.summary.build import full_summary

    ids = tiny_tokenizer(["The doctor said he would help. Answer: male"] * 4)["input_ids"]
    held = [{"input_ids": torch.tensor(x), "labels": torch.tensor(x)} for x in ids]
    out = data / "live"
    train(tiny_tokenizer, data, out, 6, eval_dataset=held, eval_strategy="steps",
          eval_steps=2, eval_on_start=True)
    values = {int(k): v for k, v in json.loads((out / "performance.json").read_text())
              ["series"]["live"]["values"].items()}
    assert sorted(values) == [0, 2, 4, 6]
    final = values[6]
    short = {s: (final - v) / abs(final) for s, v in values.items() if s < 6}
    below = sorted(s for s, f in short.items() if f > 0)  # worse than the last step
    assert below, values
    edge = below[0]
    for budget, within in ((short[edge] * 1.001, True), (short[edge] * 0.999, False)):
        said = full_summary(RunStore(out), AnalysisConfig(budget=budget))
        rec = said["analysis"]["models"]["live"]["recommendation"]
        expected = sorted(s for s, f in short.items() if f <= budget)
        assert (edge in expected) is within
        assert rec["candidates"] == len(expected), (budget, short, rec)
        assert rec["final_performance"] == pytest.approx(final)
        if rec["step"] != 6:  # a stop is only ever a step within the budget
            assert rec["step"] in expected and rec["performance"] >= final * (1 - budget)


def test_a_resume_that_does_not_restore_the_checkpoint_whole_is_said(data, tiny_tokenizer,
                                                                      one_thread, capsys):
    """Before: transformers 5's Trainer resumed the tiny GPT-NeoX with its output layer as
    initialised and the run's later steps followed from other weights without a word."""
    out = data / "live"
    train(tiny_tokenizer, data, out, 4)
    capsys.readouterr()
    train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-4"))
    err = [line for line in capsys.readouterr().err.splitlines() if "resumed with" in line]
    assert len(err) == 1 and err[0].startswith(
        "warning: biasscope: the model this training resumed with is not the one step 4 was "
        "scored on (weights "), err
    assert err[0].endswith("so the steps after it are of other weights than those before")


def test_a_training_killed_before_its_step_s_checkpoint_is_refused_from_an_earlier_one(
        data, tiny_tokenizer, one_thread, monkeypatch):
    """Killed while scoring seed 1 of step 4, before the Trainer saved checkpoint-4: resumed
    from checkpoint-2 it would score step 4's other seed on weights of its own. Refused before
    any update, saying so; before, the refusal told to resume the training that wrote step 4,
    from a checkpoint that does not exist."""
    out = data / "live"
    _failing_seed(monkeypatch, 1, {4}, KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_tokenizer, data, out, 6, seeds=(0, 1))
    assert not (data / "trainer/checkpoint-4").exists()
    monkeypatch.undo()
    before = written(out)
    with pytest.raises(BiasscopeError) as caught:
        train(tiny_tokenizer, data, out, 6, resume=str(data / "trainer/checkpoint-2"),
              seeds=(0, 1))
    said = str(caught.value)
    assert said == (f"out: {out} holds step 4 of model_name 'live' in part only "
                    "(winobias-gender seed 1 missing: its evaluation was cut short), past step "
                    "2, where this training resumes; it would reach step 4 on weights of its "
                    "own, and one step's units come from one model: resume from checkpoint-4 "
                    "if the Trainer saved it (its missing units are then scored), else give "
                    "another out or LiveConfig(model_name=...)")
    assert written(out) == before
