"""Probes asked by chat (BBQ, professional bias) in checkpoint sweeps: one unit per (checkpoint,
probe, seed) beside WinoBias, the option scores `biasscope audit --scoring options` gives,
records the probes' own metrics read, resume, the report, the training callback, and Ray."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")

from adult_fixture import ROWS
from adult_fixture import write as write_adult
from bbq_fixture import write_bbq
from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.scoring.units import sweep_request
from biasscope.probes import PROBES, load_probe
from biasscope.store.directory import RunStore
from winobias_fixture import write_winobias

AUDIT = ("label", "hit", "option_probs", "refused", "response", "source", "answer_label")
UNIT = ("model", "revision", "step", "seed", "checkpoint", "probe")


@pytest.fixture(scope="module")
def mixed(checkpoint_dirs: list[Path],
          tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A sweep of the three tiny checkpoints through WinoBias (2 seeds), BBQ and professional
    bias, through the CLI; returns (run directory, data directory)."""
    data = write_bbq(write_winobias(tmp_path_factory.mktemp("data")))
    write_adult(data, ROWS)
    out = tmp_path_factory.mktemp("mixed") / "run"
    assert main(sweep_args(checkpoint_dirs, out, data)) == 0
    return out, data


def sweep_args(checkpoint_dirs: list[Path], out: Path, data: Path) -> list[str]:
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    return ["dynamics", "--checkpoint-glob", glob, "--probe", "winobias-gender", "--probe", "bbq",
            "--probe", "professional-bias", "--probe", "adult-counterfactual", "--seeds", "0-1",
            "--limit", "8", "--out", str(out), "--data-dir", str(data), "--device", "cpu",
            "--quiet"]


def test_every_probe_is_a_unit_per_checkpoint_and_seed(mixed):
    out, data = mixed
    records = RunStore(out).records()
    units = records.groupby(["probe", "step", "seed"]).size()
    assert sorted(units.index) == sorted(
        [("winobias-gender", s, seed) for s in (10, 20, 30) for seed in (0, 1)]
        + [(p, s, 0) for p in ("bbq", "professional-bias", "adult-counterfactual")
           for s in (10, 20, 30)])
    bbq = records[records["probe"] == "bbq"].dropna(axis=1, how="all")
    assert set(AUDIT + UNIT) | {"category", "polarity", "option_logprobs"} <= set(bbq.columns)
    assert set(bbq["source"]) == {"option_scores"} and bbq["label"].notna().all()
    for probs in bbq["option_probs"]:
        assert abs(sum(json.loads(probs).values()) - 1) < 1e-9
    # Per-step statistics can run the probe's own metrics on one checkpoint's records.
    probe = load_probe("bbq", data_dir=data)
    at_10 = records[(records["probe"] == "bbq") & (records["step"] == 10)]
    assert {"bias_disambiguated", "accuracy_ambiguous"} <= set(probe.metrics(at_10)["headline"])
    adult = records[(records["probe"] == "adult-counterfactual") & (records["step"] == 30)]
    flips = load_probe("adult-counterfactual", data_dir=data).metrics(adult)["headline"]
    assert flips["pair_flip_rate"]["n"] == len(adult) // 2
    summary = json.loads((out / "summary.json").read_text())
    entry = next(c for c in summary["checkpoints"] if c["probe"] == "professional-bias")
    assert {"accuracy", "hit_rate", "answer_probability"} <= set(entry["mean"])


def test_option_scores_are_those_of_biasscope_probe(mixed, checkpoint_dirs, tmp_path):
    out, data = mixed
    assert main(["audit", "--model", f"hf:{checkpoint_dirs[1]}", "--probe", "bbq", "--scoring",
                 "options", "--limit", "8", "--out", str(tmp_path / "audit"), "--data-dir",
                 str(data), "--device", "cpu"]) == 0
    audit = RunStore(tmp_path / "audit").records().set_index("item_id")
    swept = RunStore(out).records()
    swept = swept[(swept["probe"] == "bbq") & (swept["step"] == 20)].set_index("item_id")
    assert sorted(swept.index) == sorted(audit.index)
    for item_id, row in swept.iterrows():
        ours, theirs = json.loads(row["option_probs"]), json.loads(audit.at[item_id,
                                                                            "option_probs"])
        assert ours.keys() == theirs.keys()
        assert all(abs(ours[k] - theirs[k]) < 1e-6 for k in ours)
        assert row["label"] == audit.at[item_id, "label"]
        assert row["hit"] == audit.at[item_id, "hit"]


def _close(ours: object, theirs: object) -> bool:
    """A summary number (None for NaN) against the audit's (NaN allowed)."""
    if ours is None:
        return theirs is None or theirs != theirs
    return abs(float(ours) - float(theirs)) < 1e-9  # type: ignore[arg-type]


def test_the_summary_has_each_audit_probe_over_steps(mixed, checkpoint_dirs, tmp_path):
    """analysis.probes: per checkpoint the numbers the probe's own metrics give on that
    checkpoint's records, and those `biasscope audit --scoring options` gives for it."""
    out, data = mixed
    probes = json.loads((out / "summary.json").read_text())["analysis"]["probes"]
    assert set(probes) == {"bbq", "professional-bias", "adult-counterfactual"}
    records = RunStore(out).records()
    read = {"bbq": [("bias_disambiguated", "s_dis"), ("bias_ambiguous", "s_amb"),
                    ("accuracy_ambiguous", "accuracy_ambiguous")],
            "adult-counterfactual": [("pair_flip_rate", "flip_rate"),
                                     ("demographic_parity_difference",
                                      "demographic_parity_difference")],
            "professional-bias": [("pronoun_effect", "pronoun_effect"),
                                  ("p_pronoun_effect", "preference")]}
    for probe, pairs in read.items():
        (result,) = probes[probe]["models"].values()
        assert result["steps"] == [10, 20, 30]
        assert set(result["emergence"]) >= {v for _, v in pairs if v != "accuracy_ambiguous"
                                            and not v.startswith("demographic")}
        at = {c["step"]: c["values"] for c in result["checkpoints"]}
        for step in (10, 20, 30):
            rows = records[(records["probe"] == probe) & (records["step"] == step)]
            head = load_probe(probe, data_dir=data).metrics(rows)["headline"]
            for key, name in pairs:
                for field in ("estimate", "low", "high", "p_value", "effect_size"):
                    if field in head[key]:
                        assert _close(at[step][name].get(field), head[key][field]), \
                            (probe, step, name, field)
    categories = {k.split(":")[1] for k in at_bbq(probes) if k.startswith("s_dis:")}
    assert categories == set(records.loc[records["probe"] == "bbq", "category"].dropna())
    # The same numbers as `biasscope audit` on checkpoint 20 (checkpoint_dirs[1]).
    for probe, pairs in read.items():
        assert main(["audit", "--model", f"hf:{checkpoint_dirs[1]}", "--probe", probe,
                     "--scoring", "options", "--limit", "8", "--out", str(tmp_path / probe),
                     "--data-dir", str(data), "--device", "cpu"]) == 0
        audit = json.loads((tmp_path / probe / "summary.json").read_text())
        head = audit["probes"][probe]["headline"]
        (result,) = probes[probe]["models"].values()
        at20 = next(c["values"] for c in result["checkpoints"] if c["step"] == 20)
        for key, name in pairs:
            for field in ("estimate", "low", "high", "p_value"):
                if field in head[key]:
                    ours, theirs = at20[name].get(field), head[key][field]
                    close = 1e-4 if field == "p_value" else 1e-6  # a t's p moves with the 7th digit
                    assert (ours is None and theirs is None) or abs(ours - theirs) < close, \
                        (probe, name, field)


def at_bbq(probes: dict[str, object]) -> dict[str, object]:
    """The last BBQ checkpoint's values in analysis.probes."""
    (result,) = probes["bbq"]["models"].values()  # type: ignore[index]
    values: dict[str, object] = result["checkpoints"][-1]["values"]
    return values


def test_a_rerun_scores_nothing_and_the_report_shows_winobias_as_before(mixed, checkpoint_dirs):
    out, data = mixed
    files = {p: p.stat().st_mtime_ns for p in (out / "records").glob("*.parquet")}
    assert main(sweep_args(checkpoint_dirs, out, data)) == 0
    assert {p: p.stat().st_mtime_ns for p in (out / "records").glob("*.parquet")} == files
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "on probe <b>winobias-gender</b>" in html and "This run compares" not in html
    # Then a section per audit probe over steps, after the WinoBias figures.
    heads = ["<h2>BBQ over training steps</h2>", "<h2>Adult counterfactual pairs over training "
             "steps</h2>", "<h2>Professional bias over training steps</h2>"]
    assert all(h in html for h in heads)
    assert html.index("<h2>JSD-P per correct answer") < min(html.index(h) for h in heads)
    assert "<h3>s_DIS per category</h3>" in html and "Tests over steps" in html


def test_a_probe_no_checkpoint_can_answer_is_refused_in_one_line(winobias_dir, tmp_path,
                                                                 capsys):
    class Written:
        name, requests = "written", ("generate",)

    with pytest.raises(BiasscopeError, match="a checkpoint sweep asks next_token"):
        sweep_request(Written())
    code = main(["dynamics", "--model", "org/never-loaded", "--probe", "nope", "--out",
                 str(tmp_path / "run"), "--data-dir", str(winobias_dir)])
    err = capsys.readouterr().err
    assert code == 2 and "unknown probe 'nope'" in err and err.count("\n") == 1
    code = main(["dynamics", "--model", "org/never-loaded", "--probe", "bbq", "--probe",
                 "bbq:Age", "--out", str(tmp_path / "run"), "--data-dir", str(winobias_dir)])
    assert code == 2 and "--probe names bbq more than once" in capsys.readouterr().err


def test_live_scoring_takes_any_probe(winobias_dir, checkpoint_dirs, tmp_path):
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFConfig, load_model, load_tokenizer
    from biasscope.dynamics.live.evaluate import LiveConfig, evaluate_now

    ckpt = from_dirs(checkpoint_dirs[:1])[0]
    model, tokenizer = load_model(ckpt, HFConfig()), load_tokenizer(ckpt, HFConfig())
    probes = [load_probe("winobias-gender", data_dir=winobias_dir),
              load_probe("professional-bias")]
    metrics = evaluate_now(model, tokenizer, probes, tmp_path / "live", step=7,
                           config=LiveConfig(seeds=(0,)))
    assert {"winobias-gender/jsdp_gap", "professional-bias/accuracy"} <= set(metrics)
    records = RunStore(tmp_path / "live").records()
    professional = records[records["probe"] == "professional-bias"]
    assert len(professional) == len(probes[1].items(0)) and set(professional["step"]) == {7}
    assert professional["hit"].notna().all()


def test_the_ray_executor_scores_audit_probes_as_the_local_one(mixed, checkpoint_dirs,
                                                               tmp_path):
    ray = pytest.importorskip("ray")
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.scoring.executors import RayExecutor
    from biasscope.dynamics.scoring.sweep import run_dynamics

    out, data = mixed
    probes = [load_probe("professional-bias"), load_probe("bbq", data_dir=data)]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=100 * 1024**2)
    try:
        run_dynamics(probes, from_dirs(checkpoint_dirs[:2]), tmp_path / "ray", seeds=[0],
                     scoring=HFConfig(device="cpu"), limit=8, quiet=True,
                     executor=RayExecutor())
    finally:
        ray.shutdown()
    columns = ["probe", "step", "item_id", "label", "hit", "option_probs"]
    remote = RunStore(tmp_path / "ray").records()[columns]
    local = RunStore(out).records()
    local = local[local["probe"].isin(["bbq", "professional-bias"]) & local["step"].isin(
        [10, 20])][columns]
    key = ["probe", "step", "item_id"]
    pd.testing.assert_frame_equal(remote.sort_values(key).reset_index(drop=True),
                                  local.sort_values(key).reset_index(drop=True),
                                  check_dtype=False)


def test_batched_option_scores_are_those_of_one_item_at_a_time(checkpoint_dirs):
    from biasscope.backends.base import GenerateRequest
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf import HFScorer
    from biasscope.backends.hf_generate import HFGenerator
    from biasscope.backends.hf_model import HFConfig, load_model, load_tokenizer

    ckpt, options = from_dirs(checkpoint_dirs[:1])[0], HFConfig(device="cpu", batch_size=5)
    model, tokenizer = load_model(ckpt, options), load_tokenizer(ckpt, options)
    probe = load_probe("professional-bias")
    items = probe.items(0)[:12]
    batched = HFScorer(ckpt, model, tokenizer, options).score_options(
        items, [probe.messages(i) for i in items])
    one = HFGenerator(ckpt, options, model=model, tokenizer=tokenizer)
    for item, score in zip(items, batched):
        alone, _ = one.option_logprobs(GenerateRequest(messages=probe.messages(item)),
                                       item.continuations)
        assert score.option_logprobs == pytest.approx(
            [alone[c] for c in item.continuations], abs=1e-5)


def test_a_stepless_checkpoint_of_an_audit_probe_is_said(mixed, checkpoint_dirs, tmp_path):
    """`--model ./final` with bbq: no training step, so no statistics over steps; the summary
    says so instead of leaving the probe out silently, and gives the model's values as one
    checkpoint's (the probe's own step statistics on its records)."""
    _, data = mixed
    final = tmp_path / "final"
    shutil.copytree(checkpoint_dirs[-1], final)
    out = tmp_path / "run"
    assert main(["dynamics", "--model", str(final), "--probe", "bbq", "--limit", "8", "--out",
                 str(out), "--data-dir", str(data), "--device", "cpu", "--quiet"]) == 0
    section = json.loads((out / "summary.json").read_text())["analysis"]["probes"]["bbq"]
    assert section["stepless"] == ["final"] and section["models"] == {}
    said = next(s for s in section["sentences"] if "final has no training step" in s)
    records = RunStore(out).records()
    expected = PROBES["bbq"].step_statistics.values(records.reset_index(drop=True))
    found = section["stepless_values"]["final"]
    for key in PROBES["bbq"].step_statistics.headline:
        assert found[key]["estimate"] == pytest.approx(expected[key]["estimate"])
        assert found[key]["low"] == pytest.approx(expected[key]["low"])
    assert "95% CI" in said and "biasscope probe" not in said


def _rerun_at(mixed: tuple[Path, Path], checkpoint_dirs: list[Path], out: Path,
              confidence: float) -> dict[str, object]:
    """The mixed run copied to ``out`` and run again (nothing to score) at ``confidence``, as
    a notebook gives it (`job.run`'s ``analysis``); its summary.json."""
    from biasscope.dynamics import job

    run, data = mixed
    shutil.copytree(run, out)
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    job.run(job.DynamicsConfig(
        out=out, checkpoint_globs=(glob,), probes=("winobias-gender", "bbq",
                                                   "professional-bias", "adult-counterfactual"),
        seeds=(0, 1), limit=8, data_dir=str(data), quiet=True,
        analysis={"confidence": confidence}))
    summary: dict[str, object] = json.loads((out / "summary.json").read_text())
    return summary


def test_every_interval_of_the_audit_probes_follows_the_runs_confidence(
        mixed, checkpoint_dirs, tmp_path, monkeypatch):
    """A run at 90% and at 99%: the audit probes' per-step intervals (a bootstrap's, Wilson's,
    BBQ's jackknife t) are at that level, say it, and are narrower at 90%; their sentences,
    captions and tests table name it, as WinoBias's do. They were at 95% whatever the run
    chose."""
    low, high = (_rerun_at(mixed, checkpoint_dirs, tmp_path / str(c), c) for c in (0.9, 0.99))
    for summary, level in ((low, 0.9), (high, 0.99)):
        assert summary["analysis"]["confidence"] == level  # type: ignore[index]
    wider = 0
    for probe, key in (("professional-bias", "preference"), ("adult-counterfactual",
                                                             "flip_rate"), ("bbq", "s_dis")):
        (narrow,) = low["analysis"]["probes"][probe]["models"].values()  # type: ignore[index]
        (wide,) = high["analysis"]["probes"][probe]["models"].values()  # type: ignore[index]
        for a, b in zip(narrow["checkpoints"], wide["checkpoints"], strict=True):
            at90, at99 = a["values"][key], b["values"][key]
            assert (at90["confidence"], at99["confidence"]) == (0.9, 0.99)
            assert at90["estimate"] == pytest.approx(at99["estimate"])
            if at90["low"] is not None and at90["low"] < at90["high"]:
                assert at99["low"] <= at90["low"] and at99["high"] >= at90["high"], (probe, key)
                wider += at99["high"] - at99["low"] > at90["high"] - at90["low"]
    assert wider >= 3
    said = " ".join(high["analysis"]["probes"]["professional-bias"]["sentences"])  # type: ignore[index]
    assert "(99% CI" in said and "95%" not in said
    html = (tmp_path / "0.99" / "report.html").read_text(encoding="utf-8")
    probes = html[html.index("<h2>BBQ over training steps</h2>"):]
    assert "95%" not in probes and "<th>99% CI</th>" in probes
    assert "99% bootstrap CI over sentences" in probes  # the professional panel's caption
    # Re-rendered at 99.9% (`biasscope.jobs.render`, as `biasscope report` does): its 2000
    # resamples leave one draw beyond each bound, which the summary says, naming the level
    # and the flag that sets the resamples of WinoBias's intervals and the probes' alike.
    from biasscope.jobs import render

    render(tmp_path / "0.99", tmp_path / "finer.html", analysis={"confidence": 0.999})
    finer = json.loads((tmp_path / "finer.summary.json").read_text())["analysis"]
    coarse = [s for s in finer["sentences"] if "leave 1 beyond each bound" in s]
    assert len(coarse) == 1 and "99.9% confidence level" in coarse[0]
    assert "the WinoBias and the audit probes' bootstrap intervals of 2000" in coarse[0]
    assert "give --resamples 20000 (the analysis' n_resamples) or more" in coarse[0]
    (final,) = finer["probes"]["adult-counterfactual"]["models"].values()
    assert final["checkpoints"][-1]["values"]["flip_rate"]["confidence"] == 0.999
    # Re-rendered with 300 resamples: the probes' bootstraps draw them (they drew 2000
    # whatever the run said); Adult's, spied on, stand for them (the contract test checks
    # each probe's values), and their estimates stay.
    from adult_fixture import counted_draws

    drawn = counted_draws(monkeypatch)
    render(tmp_path / "0.99", tmp_path / "fewer.html", analysis={"n_resamples": 300})
    fewer = json.loads((tmp_path / "fewer.summary.json").read_text())["analysis"]
    assert fewer["n_resamples"] == 300 and drawn and set(drawn) == {300}
    for probe, section in fewer["probes"].items():
        (at300,) = section["models"].values()
        (at2000,) = high["analysis"]["probes"][probe]["models"].values()  # type: ignore[index]
        for a, b in zip(at2000["checkpoints"], at300["checkpoints"], strict=True):
            assert {k: v.get("estimate") for k, v in a["values"].items()} \
                == {k: v.get("estimate") for k, v in b["values"].items()}


def test_a_level_too_fine_for_the_resamples_is_said():
    """99.9% from 2000 resamples leaves one draw beyond each bound: said, not hidden."""
    from biasscope.core.levels import thin_tails

    assert thin_tails(0.99, 2000, "the WinoBias") is None
    said = thin_tails(0.999, 2000, "the WinoBias", "the analysis' n_resamples")
    assert said is not None and "99.9% confidence level" in said
    assert "give --resamples 20000 (the analysis' n_resamples) or more" in said
    # another command's warning names its flag alone: the field is dynamics'
    assert "give --resamples 20000 or more" in str(thin_tails(0.999, 2000, "the judge's"))
    # more than --resamples takes: only a lower level is offered
    said = thin_tails(0.99999, 2000, "the WinoBias")
    assert said is not None and "--resamples" not in said and "lower --confidence" in said
