"""The intervention lab on a tiny GPT-NeoX: both arms train and are scored live into one run;
a planted intervention (female words made male) shows as a positive difference in differences
of the male lean, a no-op does not; a killed run resumes without redoing evaluations."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from biasscope.core.gender_swap import PAIRS
from biasscope.core.processes import HOST

pytestmark = pytest.mark.slow
FEMALE = {f: m for m, f in PAIRS} | {"her": "his", "hers": "his"}


@dataclass(frozen=True)
class Masculinise:
    """Planted bias: every female word of the text becomes its male counterpart."""

    name: str = "planted"

    def config(self) -> dict[str, object]:
        return {"method": "masculinise"}

    def apply(self, texts: Sequence[str]) -> list[str]:
        return [re.sub(r"[A-Za-z]+", lambda m: FEMALE.get(m.group(0), m.group(0)), t)
                for t in texts]


@dataclass(frozen=True)
class NoOp:
    name: str = "noop"

    def config(self) -> dict[str, object]:
        return {"method": "noop"}

    def apply(self, texts: Sequence[str]) -> list[str]:
        return list(texts)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, winobias_dir: Path) -> tuple[Path, Path]:
    pytest.importorskip("torch")
    from biasscope.demo.corpus import documents
    from biasscope.demo.tiny import save, tiny_gpt_neox, train_tokenizer
    from biasscope.probes import load_probe

    root = tmp_path_factory.mktemp("intervene")
    docs = list(documents(600, bias=0.5, seed=0))
    (root / "text.txt").write_text("\n".join(d.replace("\n", " ") for d in docs) + "\n")
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    prompts = [it.prompt for it in probe.items(0)]
    tokenizer = train_tokenizer([*docs, *prompts, " male female not specified"], 512)
    save(tiny_gpt_neox(len(tokenizer), seed=0, max_positions=512), tokenizer, root / "base")
    return root / "base", root / "text.txt"


def _config(out: Path, world: tuple[Path, Path], winobias_dir: Path, steps: int = 40,
            **how):
    from biasscope.intervene import InterveneConfig, Training

    save = how.pop("save_recommended", True)
    how.setdefault("every", 20)
    return InterveneConfig(out=out, model=str(world[0]), text=str(world[1]),
                           data_dir=str(winobias_dir), limit=60, eval_docs=12, quiet=True,
                           device="cpu", save_recommended=save, training=Training(
                               steps=steps, batch_size=16, seq_len=96, lr=3e-3,
                               **how))


def test_planted_bias_is_a_positive_did(tmp_path, world, winobias_dir, one_thread) -> None:
    from biasscope.intervene import run

    result = run(_config(tmp_path / "run", world, winobias_dir), Masculinise())
    summary = result.summary
    assert summary["steps"] == [0, 20, 40]
    last = summary["did"]["male_lean"]["40"]
    assert last["estimate"] > 0 and last["low"] > 0
    assert last["test"]["p_adjusted"] < 0.05
    records = result.store.records()
    assert set(records["model"]) == {"control", "planted"}
    assert set(records["probe"]) == {"winobias-gender", "perplexity"}
    assert all(summary["arms"][a]["40"]["perplexity"]["estimate"] > 1 for a in summary["arms"])
    run_json = json.loads(result.store.run_json.read_text())
    assert run_json["kind"] == "intervention"  # the arms' evaluations keep the run's kind
    split = run_json["settings"]["intervention"]["split"]
    assert split["train_documents"] + split["held_out_documents"] == 600
    assert result.intervention_report.is_file() and result.report.is_file()
    assert "planted" in summary["sentence"]
    occupations = summary["arms"]["control"]["0"]["occupations"]
    start = records[(records["model"] == "control") & (records["step"] == 0)
                    & (records["probe"] == "winobias-gender")]
    assert sum(o["n"] for o in occupations.values()) == len(start) > 20  # one seed
    # `biasscope report RUN --output X`: the intervention report elsewhere, the run untouched.
    from biasscope.jobs import render

    files = {p: p.stat().st_mtime_ns for p in result.store.root.rglob("*") if p.is_file()}
    page, _ = render(result.store.root, output=tmp_path / "elsewhere.html")
    assert page == tmp_path / "elsewhere.html"
    assert "Per occupation, each arm" in page.read_text()
    assert files == {p: p.stat().st_mtime_ns for p in result.store.root.rglob("*")
                     if p.is_file()}


def test_noop_is_no_effect(tmp_path, world, winobias_dir, one_thread, monkeypatch) -> None:
    from biasscope.core.errors import BiasscopeError
    from biasscope.intervene import run

    text = tmp_path / "text.txt"  # its own copy: edited below
    text.write_text(world[1].read_text())
    world = (world[0], text)
    summary = run(_config(tmp_path / "run", world, winobias_dir, steps=20), NoOp()).summary
    did = summary["did"]["male_lean"]["20"]
    assert did["estimate"] == pytest.approx(0, abs=1e-6)  # same start, seed and text
    assert summary["beat_control"] is False
    assert "cannot tell" in summary["sentence"]
    # Zero cost, so step 20 is the best within budget: its weights are saved to ship.
    assert summary["recommended"] == 20
    saved = tmp_path / "run" / "recommended"
    info = json.loads((saved / "recommended.json").read_text())
    assert info["step"] == 20 and info["arm"] == "noop" and info["final"] is True
    assert info["weights"] == "full model" and "cannot tell" in info["sentence"]
    assert (saved / "model.safetensors").is_file() and (saved / "tokenizer.json").is_file()
    assert not (tmp_path / "run" / "recommended.partial").exists()
    # BiasCallback's own log at step 20 does not swallow the Trainer's loss log due there.
    done = json.loads((tmp_path / "run" / "train" / "noop" / "done.json").read_text())
    assert len(done["losses"]) == 1
    # A rerun adding a run, saving no weights: the weights saved are still step 20's, and
    # recommended.json says the verdict over both runs, not the first call's.
    weights = (saved / "model.safetensors").stat().st_mtime_ns
    config = _config(tmp_path / "run", world, winobias_dir, steps=20, runs=2,
                     save_recommended=False)
    more = run(config, NoOp()).summary
    info = json.loads((saved / "recommended.json").read_text())
    assert more["runs"] == [1, 2] and more["recommended"] == 20
    assert info["sentence"] == more["sentence"] and "2 training runs" in info["sentence"]
    assert (saved / "model.safetensors").stat().st_mtime_ns == weights
    # The same text under a relative name resumes; the text edited since is refused.
    monkeypatch.chdir(tmp_path)
    assert run(replace(config, text="text.txt"), NoOp()).summary["runs"] == [1, 2]
    text.write_text(text.read_text().replace(" he ", " she "))
    with pytest.raises(BiasscopeError, match=r"was made from another --text \(.*text\.txt: "
                       r"SHA-256 \w+… then, \w+… now\): put back the file"):
        run(config, NoOp())


def test_no_save_recommended(tmp_path, world, winobias_dir, one_thread) -> None:
    import shutil

    from biasscope.core.errors import BiasscopeError
    from biasscope.intervene import run
    from winogender_fixture import write_winogender

    config = _config(tmp_path / "run", world, winobias_dir, steps=20, save_recommended=False)
    assert run(config, NoOp()).summary["recommended"] == 20
    root = tmp_path / "run"
    assert not (root / "recommended").exists()
    # An earlier saving call killed between its renames: recommended.old/ and a whole
    # recommended.partial/, no recommended/. A rerun that saves nothing finishes the swap.
    for name, step in (("recommended.old", 0), ("recommended.partial", 20)):
        (root / name).mkdir()
        (root / name / "recommended.json").write_text(json.dumps({"step": step}))
    run(config, NoOp())
    assert sorted(p.name for p in root.glob("recommended*")) == ["recommended"]
    info = json.loads((root / "recommended" / "recommended.json").read_text())
    assert info["step"] == 20 and info["final"] is True
    # A probe the first call did not score is refused as the flag, saying what to do.
    data = shutil.copytree(winobias_dir, tmp_path / "data")
    write_winogender(data)
    added = replace(config, probes=("winobias-gender", "winogender"), data_dir=str(data))
    with pytest.raises(BiasscopeError, match=r"^--probe winogender was not in .*'s first "
                       r"call: .*; use another --out, or drop it$"):
        run(added, NoOp())


def test_a_level_too_fine_for_the_resamples_is_said(tmp_path, world, winobias_dir, one_thread,
                                                     capsys) -> None:
    """Before: an intervention analysed at 99.9% from 2000 resamples (one draw beyond each
    bound) said nothing, where every other summarising command says so. Now intervention.json
    holds the sentence (``thin_tails``) and the resamples its intervals drew (``options``), the
    page shows it, and the command and `biasscope report` say it on stderr; a run analysed
    before (no ``n_resamples`` stored) is reported with the default 2000."""
    from html import escape

    from biasscope.cli.main import main
    from biasscope.intervene import InterventionAnalysisConfig, run

    config = replace(_config(tmp_path / "run", world, winobias_dir, steps=20,
                             save_recommended=False),
                     analysis=InterventionAnalysisConfig(confidence=0.999))
    capsys.readouterr()
    run(config, NoOp())
    said = ("At the 99.9% confidence level, the intervention's bootstrap intervals of 2000 "
            "resamples leave 1 beyond each bound")
    assert f"warning: {said}" in capsys.readouterr().err
    path = tmp_path / "run" / "intervention.json"
    stored = json.loads(path.read_text())
    assert stored["thin_tails"].startswith(said) and stored["options"]["n_resamples"] == 2000
    # the flags of `intervene` that set them
    assert stored["thin_tails"].endswith(
        "give --resamples 20000 or more, or choose a lower --confidence.")
    assert escape(said) in (tmp_path / "run" / "intervention.html").read_text()
    assert main(["report", str(tmp_path / "run")]) == 0
    assert f"warning: {said}" in capsys.readouterr().err
    # the resamples stored are the report's: 40,000 leave 20 beyond each bound at 99.9%
    stored["options"]["n_resamples"] = 40000
    path.write_text(json.dumps(stored))
    assert main(["report", str(tmp_path / "run")]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "thin_tails" not in json.loads(path.read_text())
    # an older run's intervention.json: no n_resamples, no sentence; reported as before
    del stored["options"]["n_resamples"], stored["thin_tails"]
    path.write_text(json.dumps(stored))
    assert main(["report", str(tmp_path / "run"), "--output", str(tmp_path / "x.html")]) == 0
    assert f"warning: {said}" in capsys.readouterr().err
    assert escape(said) in (tmp_path / "x.html").read_text()


def test_a_data_file_edited_past_the_limit_is_refused_before_the_model_loads(
        tmp_path, world, winobias_dir, one_thread, monkeypatch) -> None:
    """Before: "… was made with a different 'intervention' (intervention.data…)" once the
    sweep's settings were merged. Now the file is named as an audit names it, before the base
    model loads and before anything in the run changes, past --limit's items too."""
    import shutil

    from biasscope.core.errors import BiasscopeError
    from biasscope.intervene import job, run

    data = shutil.copytree(winobias_dir, tmp_path / "data")
    config = replace(_config(tmp_path / "run", world, winobias_dir, steps=20,
                             save_recommended=False), data_dir=str(data), limit=2)
    assert run(config, NoOp()).summary["steps"] == [0, 20]
    before = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    target = data / "winobias" / "anti_stereotyped_type2.txt.test"
    text = target.read_text()  # the last sentence, past --limit 2's items
    target.write_text(text.replace("the best course", "the right course"))
    assert target.read_text() != text
    loads: list[object] = []
    monkeypatch.setattr(job, "load_model", lambda *a, **k: loads.append(a))
    monkeypatch.setattr(job, "init_run", lambda *a, **k: loads.append(a))
    with pytest.raises(BiasscopeError, match=(
            rf"^{re.escape(str(tmp_path / 'run'))} was made from another winobias/"
            rf"{target.name} \({re.escape(str(target))}: SHA-256 \w+… then, \w+… now\): "
            "put back the file it was made from, or use another --out for this one$")):
        run(config, NoOp())
    assert loads == []
    assert {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()} == before


def test_a_dropped_probe_is_refused_by_name(tmp_path, world, winobias_dir, one_thread) -> None:
    """A rerun leaving out a --probe the first call scored is refused as the flag, not as its
    data files ("recorded then, not recorded now"): an arm that finished without it could never
    score it again, and resumed or added arms would lack it at their steps."""
    import shutil

    from biasscope.core.errors import BiasscopeError
    from biasscope.demo.corpus import documents
    from biasscope.demo.tiny import save, tiny_gpt_neox, train_tokenizer
    from biasscope.intervene import run
    from biasscope.probes import load_probe
    from winogender_fixture import write_winogender

    data = shutil.copytree(winobias_dir, tmp_path / "data")
    write_winogender(data)
    # A tokenizer that has Winogender's options as one token each, as WinoBias's
    items = [it for name in ("winobias-gender", "winogender")
             for it in load_probe(name, data_dir=data).items(0)]
    options = sorted({c for it in items for c in it.continuations})
    tokenizer = train_tokenizer([*documents(600, bias=0.5, seed=0), *(it.prompt for it in items),
                                 " male female not specified", *options * 50], 512)
    save(tiny_gpt_neox(len(tokenizer), seed=0, max_positions=512), tokenizer, tmp_path / "base")
    both = replace(_config(tmp_path / "run", world, winobias_dir, steps=20,
                           save_recommended=False), model=str(tmp_path / "base"),
                   probes=("winobias-gender", "winogender"), data_dir=str(data))
    assert run(both, NoOp()).summary["steps"] == [0, 20]
    with pytest.raises(BiasscopeError, match=r"^--probe winogender was in .*'s first call, "
                       r"not in this one: .*; give it again, or use another --out$"):
        run(replace(both, probes=("winobias-gender",)), NoOp())
    assert run(both, NoOp()).summary["steps"] == [0, 20]  # given again, it resumes


def test_lora_trains_only_adapters_and_resumes(tmp_path, world, winobias_dir, one_thread,
                                               monkeypatch) -> None:
    """LoRA on the tiny GPT-NeoX: the live evaluations see the adapters (scores move), the
    shipped weights are adapters over an untouched base, run.json records the rank (a rerun
    with another is refused), and a killed run resumes from the adapter checkpoint."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from biasscope.core.errors import BiasscopeError
    from biasscope.dynamics.live import evaluate as live
    from biasscope.intervene import run

    real, calls = live.evaluate_now, []

    def watched(model, tokenizer, probes, out, step, config, *a, **k):
        if config.model_name == "noop" and step == 20 and calls[-1:] != ["kill"]:
            calls.append("kill")
            raise Killed
        calls.append((config.model_name, step))
        return real(model, tokenizer, probes, out, step, config, *a, **k)

    monkeypatch.setattr(live, "evaluate_now", watched)
    config = _config(tmp_path / "run", world, winobias_dir, steps=20, every=10, lora_rank=4)
    with pytest.raises(Killed):
        run(config, NoOp())
    assert (tmp_path / "run" / "train" / "noop" / "checkpoint-10" /
            "adapter_model.safetensors").is_file()
    result = run(config, NoOp())
    assert calls == [("control", 0), ("control", 10), ("control", 20), ("noop", 0),
                     ("noop", 10), "kill", ("noop", 20)]
    training = json.loads(result.store.run_json.read_text())["settings"]["intervention"][
        "training"]
    assert training["lora_rank"] == 4 and training["lora_targets"] == "auto"
    control = result.summary["arms"]["control"]
    assert (control["20"]["male_lean"]["estimate"]  # the adapters were active when scored
            != control["0"]["male_lean"]["estimate"])
    saved = tmp_path / "run" / "recommended"
    adapters = load_file(str(saved / "adapter_model.safetensors"))
    assert adapters and all("lora_" in name for name in adapters)
    assert any(float(t.abs().sum()) > 0 for n, t in adapters.items() if "lora_B" in n)
    assert not (saved / "model.safetensors").exists()
    base = AutoModelForCausalLM.from_pretrained(world[0]).state_dict()
    from peft import PeftModel

    shipped = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(world[0]), saved)
    for name, weight in shipped.get_base_model().state_dict().items():
        plain = name.replace(".base_layer", "")
        if "lora_" not in name:
            assert weight.equal(base[plain]), name
    with pytest.raises(BiasscopeError, match="lora_rank"):
        run(_config(tmp_path / "run", world, winobias_dir, steps=20, every=10, lora_rank=8),
            NoOp())


class Killed(BaseException):
    """The process killed mid-evaluation: as KeyboardInterrupt, no Exception (`BiasCallback`
    trains on past an evaluation's Exception)."""


def test_resume_after_kill_redoes_no_evaluation(tmp_path, world, winobias_dir, one_thread,
                                                monkeypatch) -> None:
    from biasscope.dynamics.live import evaluate as live
    from biasscope.intervene import run

    real, calls = live.evaluate_now, []

    def watched(model, tokenizer, probes, out, step, config, *a, **k):
        if config.model_name == "control" and step == 40 and calls[-1:] != ["kill"]:
            calls.append("kill")
            raise Killed  # between the evaluations at steps 20 and 40
        calls.append((config.model_name, step))
        return real(model, tokenizer, probes, out, step, config, *a, **k)

    monkeypatch.setattr(live, "evaluate_now", watched)
    config = _config(tmp_path / "run", world, winobias_dir)
    with pytest.raises(Killed):
        run(config, NoOp())
    assert calls == [("control", 0), ("control", 20), "kill"]
    assert (tmp_path / "run" / "train" / "control" / "checkpoint-20").is_dir()
    owner = json.loads((tmp_path / "run" / "train" / "control" / "arm.json").read_text())
    created = json.loads((tmp_path / "run" / "run.json").read_text())["created"]
    assert {k: owner[k] for k in ("run_created", "arm", "seed")} == {
        "run_created": created, "arm": "control", "seed": 0}
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    left = tmp_path / "run" / "records" / f".x.parquet.{HOST}~{dead.pid}.ab12.tmp"
    left.write_bytes(b"half a unit")  # as a SIGKILL between a unit's write and its rename
    calls.clear()
    calls.append("kill")  # no second kill
    summary = run(config, NoOp()).summary
    assert calls[1:] == [("control", 40), ("noop", 0), ("noop", 20), ("noop", 40)]
    assert not left.exists()
    assert summary["steps"] == [0, 20, 40]
    calls.clear()
    calls.append("kill")
    run(config, NoOp())  # finished: nothing trained or scored again
    assert calls == ["kill"]


def test_a_model_that_does_not_load_leaves_no_settings_behind(tmp_path, world, winobias_dir,
                                                              one_thread, monkeypatch) -> None:
    """A first call whose --model has no weights, or whose training fails, stops before
    anything is stored: the run.json it wrote is taken away, so the call put right is not
    refused, and so are the empty ``train/`` and the folder it made (with its lock and id
    files, which were left behind). A rerun that fails keeps everything."""
    import shutil

    from biasscope.core.errors import BiasscopeError
    from biasscope.dynamics.live import evaluate as live
    from biasscope.intervene import run
    from biasscope.intervene import train as training

    broken = tmp_path / "no weights"
    shutil.copytree(world[0], broken)
    (broken / "model.safetensors").unlink()
    out = tmp_path / "run"
    config = _config(out, world, winobias_dir, steps=20)
    with pytest.raises(BiasscopeError, match="cannot load checkpoint"):
        run(replace(config, model=str(broken)), NoOp())
    assert not out.exists()  # nor the folder it made, with its .run.lock and .run.id

    def oom(model, how):
        raise RuntimeError("CUDA out of memory")

    with monkeypatch.context() as patch:
        patch.setattr(training, "with_lora", oom)
        with pytest.raises(RuntimeError, match="out of memory"):
            run(config, NoOp())
    assert not out.exists()

    def killed(*args, **kwargs):
        raise Killed  # in training, before its first checkpoint: arm.json goes too

    with monkeypatch.context() as patch:
        patch.setattr(live, "evaluate_now", killed)
        with pytest.raises(Killed):
            run(config, NoOp())
    assert not out.exists()
    assert run(config, NoOp()).summary["steps"] == [0, 20]
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    monkeypatch.setattr(training, "with_lora", oom)
    with pytest.raises(RuntimeError, match="out of memory"):
        run(replace(config, training=replace(config.training, runs=2)), NoOp())
    del files[out / "run.json"]  # which the rerun gives run 2's checkpoints
    kept = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert (out / "run.json").is_file() and files.items() <= kept.items()
    # the empty folder of an arm that stopped before its first checkpoint goes (it held
    # nothing: nothing earlier calls wrote is lost)
    assert not (out / "train" / "control-run2").exists() and (out / "train" / "control").is_dir()


def test_runs_per_arm(tmp_path, world, winobias_dir, one_thread, monkeypatch) -> None:
    """``--runs 2``: each arm trains twice (run 2 seeded one more, trained first, named
    ``<arm>-run2``), and the verdict is about the intervention over both runs. A run killed
    before its first run reports the runs it has; the rerun trains only what is missing, and
    a rerun with fewer runs analyses every run there."""
    from biasscope.dynamics.live import evaluate as live
    from biasscope.intervene import InterventionAnalysisConfig, report, run
    from biasscope.store.directory import RunStore

    real, calls = live.evaluate_now, []

    def watched(model, tokenizer, probes, out, step, config, *a, **k):
        if config.model_name == "control" and not calls.count("kill"):
            calls.append("kill")
            raise Killed  # run 2 is done, run 1 not begun
        calls.append((config.model_name, step))
        return real(model, tokenizer, probes, out, step, config, *a, **k)

    monkeypatch.setattr(live, "evaluate_now", watched)
    config = replace(_config(tmp_path / "run", world, winobias_dir, steps=20, runs=2),
                     analysis=InterventionAnalysisConfig(budget=10.0))  # a stop is chosen
    with pytest.raises(Killed):
        run(config, Masculinise())
    partial = report(RunStore(tmp_path / "run"), config=config.analysis).summary
    assert partial["runs"] == [2] and partial["run_arms"] == [["planted-run2", "control-run2"]]
    assert "this run of planted" in partial["sentence"].lower()  # one run: about that run
    result = run(config, Masculinise())
    assert calls == [("control-run2", 0), ("control-run2", 20), ("planted-run2", 0),
                     ("planted-run2", 20), "kill", ("control", 0), ("control", 20),
                     ("planted", 0), ("planted", 20)]
    summary = result.summary
    assert summary["runs"] == [1, 2]
    assert summary["run_arms"] == [["planted", "control"], ["planted-run2", "control-run2"]]
    did = summary["did"]["male_lean"]["20"]
    assert did["test"]["runs"] == 2 and did["test"]["df"] == 1
    assert did["low"] < did["estimate"] < did["high"]
    assert did["estimate"] == pytest.approx(sum(did["by_run"]) / 2)  # each run's own DiD
    arms = summary["arms"]
    assert arms["control"]["0"]["male_lean"] == arms["control-run2"]["0"]["male_lean"]
    assert arms["control"]["20"]["male_lean"] != arms["control-run2"]["20"]["male_lean"]
    assert "2 training runs per arm" in summary["sentence"]
    assert "this run of" not in summary["sentence"].lower()
    listed = json.loads(result.store.run_json.read_text())
    assert listed["settings"]["intervention"]["training"]["seed"] == 0
    assert "runs" not in listed["settings"]["intervention"]["training"]  # changes no result
    assert {c["model"] for c in listed["checkpoints"]} == {
        "control", "planted", "control-run2", "planted-run2"}
    assert "control-run2" in result.intervention_report.read_text()
    assert json.loads((tmp_path / "run" / "recommended" / "recommended.json").read_text())[
        "step"] == summary["recommended"] == 20
    calls.clear()
    run(config, Masculinise())
    assert calls == []
    fewer = run(replace(config, training=replace(config.training, runs=1)), Masculinise())
    assert calls == [] and fewer.summary["runs"] == [1, 2]
    more = run(replace(config, training=replace(config.training, runs=3)), Masculinise())
    assert calls == [("control-run3", 0), ("control-run3", 20), ("planted-run3", 0),
                     ("planted-run3", 20)]
    assert more.summary["runs"] == [1, 2, 3]
    assert more.summary["did"]["male_lean"]["20"]["test"]["df"] == 2


@pytest.mark.parametrize("name", ["control", "control-run2"])
def test_an_intervention_named_as_a_control_run_is_refused(tmp_path, name) -> None:
    from biasscope.core.errors import BiasscopeError
    from biasscope.intervene import InterveneConfig, run

    with pytest.raises(BiasscopeError, match=f"cannot be named '{name}'"):
        run(InterveneConfig(out=tmp_path / "run", model="unused"), NoOp(name=name))
    assert not (tmp_path / "run").exists()
