"""An intervention run records its base model as it is, not only where it is: other weights
(or another GGUF file) under the run's path are refused before anything loads, and a run
recorded by path only gains the record on its next call. Training and the analysis are
stubbed: what is checked is the record and the refusal, both made before any model loads."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from no_loads import no_loads, refused

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from biasscope.demo.corpus import documents

    path = tmp_path_factory.mktemp("text") / "text.txt"
    path.write_text("\n".join(d.replace("\n", " ") for d in documents(60, bias=0.5, seed=0)) + "\n")
    return path


def _folder(where: Path, tokenizer: Any, seed: int) -> Path:
    from biasscope.demo.tiny import save, tiny_gpt_neox

    save(tiny_gpt_neox(len(tokenizer), seed=seed, max_positions=128), tokenizer, where)
    return where


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run's loads, training and analysis stubbed (each load listed): a call records
    run.json and nothing else."""
    from biasscope.intervene import job

    loads: list[str] = []
    monkeypatch.setattr(job, "convert_gguf", lambda c: loads.append(f"convert {c}"))
    monkeypatch.setattr(job, "load_tokenizer",
                        lambda *a: loads.append("tokenizer") or SimpleNamespace(pad_token="x"))
    monkeypatch.setattr(job, "train_arm", lambda name, *a, **k: loads.append(f"train {name}"))
    monkeypatch.setattr(job, "check_documents", lambda *a: None)
    monkeypatch.setattr(job, "report", lambda store, *a, **k: SimpleNamespace(
        summary={"sentence": "stubbed"}, store=store, report="-", intervention_report="-"))
    return loads


def _argv(out: Path, model: Path, text: Path, data: Path) -> list[str]:
    return ["intervene", "--out", str(out), "--model", str(model), "--text", str(text),
            "--data-dir", str(data), "--device", "cpu", "--quiet", "--steps", "20", "--every",
            "20", "--limit", "10", "--no-save-recommended"]


def _base(out: Path) -> Any:
    return json.loads((out / "run.json").read_text())["settings"]["intervention"].get("base")


def test_other_weights_under_the_run_s_path_are_refused_before_loading(
        tmp_path, text, winobias_dir, tiny_tokenizer, stubbed, monkeypatch, capsys) -> None:
    """Before: run.json recorded the folder's path only, and a model saved over it resumed
    and added arms into the run: two models' results in one comparison."""
    from biasscope.cli.main import main
    from biasscope.intervene import job

    model = _folder(tmp_path / "base", tiny_tokenizer, seed=0)
    out = tmp_path / "run"
    argv = _argv(out, model, text, winobias_dir)
    assert main(argv) == 0, capsys.readouterr().err
    base = _base(out)
    assert base["source"] == str(model.resolve())
    assert re.fullmatch(r"[0-9a-f]{64}", base["fingerprint"])
    assert re.fullmatch(r"[0-9a-f]{64}", base["files_fingerprint"])
    assert main(argv) == 0  # the same model again: resumes
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    _folder(model, tiny_tokenizer, seed=1)  # other weights, the same path
    capsys.readouterr()
    stubbed.clear()
    no_loads(monkeypatch, job, stubbed, "load_model")
    refused(argv, "run.json was made with a different 'intervention' (intervention.base."
            f"fingerprint: {base['fingerprint'][:12]}… then, ", stubbed, capsys)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files


def test_a_run_recorded_by_path_gains_the_record(tmp_path, text, winobias_dir,
                                                  tiny_tokenizer, stubbed, capsys) -> None:
    """A run from before the base was recorded resumes (nothing shows which weights it used)
    and records them, as other commands' runs gain a model's fingerprints."""
    from biasscope.cli.main import main

    model = _folder(tmp_path / "base", tiny_tokenizer, seed=0)
    out = tmp_path / "run"
    argv = _argv(out, model, text, winobias_dir)
    assert main(argv) == 0, capsys.readouterr().err
    recorded = json.loads((out / "run.json").read_text())
    base = recorded["settings"]["intervention"].pop("base")
    (out / "run.json").write_text(json.dumps(recorded))
    assert main(argv) == 0, capsys.readouterr().err
    assert _base(out) == base
    _folder(model, tiny_tokenizer, seed=1)
    assert main(argv) == 2
    assert "intervention.base.fingerprint" in capsys.readouterr().err


def test_another_gguf_file_under_the_run_s_path_is_refused_unconverted(
        tmp_path, text, winobias_dir, stubbed, monkeypatch, capsys) -> None:
    """A GGUF base was recorded by its path alone: a file written over it was converted and
    trained into the run. Its SHA-256 and quantisation are recorded (`gguf_identity`), and
    another file is refused before it is converted or loaded."""
    pytest.importorskip("gguf")
    from biasscope.cli.main import main
    from biasscope.intervene import job
    from gguf_fixture import write_llama_gguf

    model = write_llama_gguf(tmp_path / "base.gguf")
    out = tmp_path / "run"
    argv = _argv(out, model, text, winobias_dir)
    assert main(argv) == 0, capsys.readouterr().err
    base = _base(out)
    assert base["gguf_file"] == base["source"] == str(model.resolve())
    assert base["gguf_quantization"] == "Q8_0" and "fingerprint" not in base
    assert re.fullmatch(r"[0-9a-f]{64}", base["gguf_sha256"])
    write_llama_gguf(model, seed=1)
    stubbed.clear()
    no_loads(monkeypatch, job, stubbed, "load_model")
    refused(argv, "run.json was made with a different 'intervention' (intervention.base."
            f"gguf_sha256: {base['gguf_sha256'][:12]}… then, ", stubbed, capsys)


def test_a_setting_added_inside_another_is_gained_not_compared() -> None:
    """``added=("intervention.base",)``: a run that recorded no ``base`` under its
    ``intervention`` gains it; one that recorded another is refused, as is any other key the
    run lacks."""
    from biasscope.core.errors import BiasscopeError
    from biasscope.store.settings import merge_settings

    now = {"intervention": {"model": "/m", "base": {"fingerprint": "b" * 64}}}
    old = {"intervention": {"model": "/m"}}
    assert merge_settings("run.json", old, now, added=("intervention.base",)) == now
    with pytest.raises(BiasscopeError, match=r"\(intervention.base.fingerprint: aaaaaaaaaaaa… "
                       r"then, bbbbbbbbbbbb… now\)"):
        merge_settings("run.json", {"intervention": {"model": "/m", "base": {
            "fingerprint": "a" * 64}}}, now, added=("intervention.base",))
    with pytest.raises(BiasscopeError, match=r"intervention.base: not recorded then"):
        merge_settings("run.json", old, now, added=("intervention.text",))
    # deeper: a base recorded before its hub commit was gains it, another commit is refused
    added = ("intervention.base", "intervention.base.commit")
    deep = {"intervention": {"model": "/m", "base": {"fingerprint": "b" * 64, "commit": "c" * 40}}}
    assert merge_settings("run.json", now, deep, added=added) == deep
    assert merge_settings("run.json", old, deep, added=added) == deep
    with pytest.raises(BiasscopeError, match=r"\(intervention.base.commit: dddddddddddd… then, "
                       r"cccccccccccc… now\)"):
        merge_settings("run.json", {"intervention": {"model": "/m", "base": {
            "fingerprint": "b" * 64, "commit": "d" * 40}}}, deep, added=added)
    with pytest.raises(BiasscopeError, match=r"intervention.base.commit: not recorded then"):
        merge_settings("run.json", now, deep, added=("intervention.base",))


def test_a_hub_branch_records_the_commit_it_loaded_and_a_moved_one_is_refused(
        tmp_path, text, winobias_dir, tiny_tokenizer, stubbed, monkeypatch, capsys) -> None:
    """A hub id on a branch was recorded by id and revision only: a ``main`` moved between two
    calls trained the added arms (or resumed the killed one) on other weights. The commit it
    resolved to is recorded once the tokenizer has loaded, and a moved one is refused: before
    anything loads where the Hugging Face cache already says so, else once loaded, before an
    arm trains. (`hub_commit` is stubbed: ``cache`` before this call's load, ``loads`` after.)"""
    from biasscope.cli.main import main
    from biasscope.intervene import job

    a, b = "a" * 40, "b" * 40
    state: dict[str, str | None] = {"cache": None, "loads": a}
    monkeypatch.setattr(job, "hub_commit", lambda source, revision: state[
        "loads" if "tokenizer" in stubbed else "cache"])
    model = _folder(tmp_path / "base", tiny_tokenizer, seed=0)
    out = tmp_path / "run"
    argv = _argv(out, model, text, winobias_dir)
    assert main(argv) == 0, capsys.readouterr().err
    assert _base(out)["commit"] == a
    state["cache"] = a
    stubbed.clear()
    assert main(argv) == 0, capsys.readouterr().err
    assert "train control" in stubbed
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    state["cache"] = state["loads"] = b  # the cache already resolves main to b
    stubbed.clear()
    capsys.readouterr()
    refused(argv, f"(intervention.base.commit: {a[:12]}… then, {b[:12]}… now)", stubbed, capsys)
    state["cache"] = None  # a cleared cache: known only once loaded
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"intervention.base.commit: {a[:12]}… then, {b[:12]}… now" in err[0]
    assert stubbed == [f"convert {[job.list_checkpoints([str(model)], [], [], None)[0]]}",
                       "tokenizer"]  # no arm trained
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files


def test_a_run_recorded_without_a_commit_gains_it(tmp_path, text, winobias_dir, tiny_tokenizer,
                                                  stubbed, monkeypatch, capsys) -> None:
    """A run whose base was recorded before its commit was (the last release) resumes and
    records the one it loads."""
    from biasscope.cli.main import main
    from biasscope.intervene import job

    model = _folder(tmp_path / "base", tiny_tokenizer, seed=0)
    out = tmp_path / "run"
    argv = _argv(out, model, text, winobias_dir)
    assert main(argv) == 0, capsys.readouterr().err
    assert "commit" not in _base(out)  # a local folder: none
    monkeypatch.setattr(job, "hub_commit", lambda source, revision: "c" * 40)
    assert main(argv) == 0, capsys.readouterr().err
    assert _base(out)["commit"] == "c" * 40


def _checkpoint(out: Path, arm: str, owner: dict[str, Any] | None = None) -> Path:
    where = out / "train" / arm
    (where / "checkpoint-20").mkdir(parents=True)
    (where / "checkpoint-20" / "trainer_state.json").write_text("{}")
    if owner is not None:
        (where / "arm.json").write_text(json.dumps(owner))
    return where


def test_trainer_checkpoints_another_run_left_are_refused(tmp_path, text, winobias_dir,
                                                          tiny_tokenizer, stubbed, capsys
                                                          ) -> None:
    """``train/`` kept after run.json was deleted, or copied in by hand, was resumed as the
    run's own (`resume.load_weights` checks names and shapes only): another run's weights in
    this run's curves. Each arm's ``arm.json`` names the run that wrote it; one that is not
    this run's is refused before anything loads, with what to do."""
    from biasscope.cli.main import main

    model = _folder(tmp_path / "base", tiny_tokenizer, seed=0)
    out = tmp_path / "run"
    argv = _argv(out, model, text, winobias_dir)
    capsys.readouterr()  # the model's save
    _checkpoint(out, "control", {"run_created": "2026-01-01T00:00:00+00:00", "arm": "control",
                                 "seed": 0})
    refused(argv, f"{out / 'train' / 'control'} holds Trainer checkpoints or a finished arm "
            f"that was there before this run's run.json: it would be resumed as this run's; "
            f"delete {out / 'train'} to train the arms from the start, or use another --out",
            stubbed, capsys)
    assert not (out / "run.json").exists()  # as it was
    shutil.rmtree(out / "train")
    assert main(argv) == 0, capsys.readouterr().err
    created = json.loads((out / "run.json").read_text())["created"]
    _checkpoint(out, "cda", {"run_created": created, "arm": "control", "seed": 0})  # moved
    stubbed.clear()
    capsys.readouterr()
    refused(argv, "another run wrote (", stubbed, capsys)
    shutil.rmtree(out / "train" / "cda")
    _checkpoint(out, "cda", {"run_created": "2025-01-01T00:00:00+00:00", "arm": "cda",
                             "seed": 0})
    refused(argv, "run.json created 2025-01-01", stubbed, capsys)
    (out / "train" / "cda" / "arm.json").write_text("{half")  # damaged: no run's
    refused(argv, f"another run wrote ({out / 'train' / 'cda' / 'arm.json'} is damaged)",
            stubbed, capsys)
    shutil.rmtree(out / "train" / "cda")
    _checkpoint(out, "cda", {"run_created": created, "arm": "cda", "seed": 0})
    assert main(argv) == 0, capsys.readouterr().err  # this run's own: resumed
    assert "train cda" in stubbed


def test_an_older_run_s_checkpoints_without_arm_json(tmp_path, text, winobias_dir, tiny_tokenizer,
                                                    stubbed, capsys) -> None:
    """Written before ``arm.json`` was: the run's own where its run.json is there (its settings
    were just checked), refused where it is not."""
    from biasscope.cli.main import main

    model = _folder(tmp_path / "base", tiny_tokenizer, seed=0)
    out = tmp_path / "run"
    argv = _argv(out, model, text, winobias_dir)
    assert main(argv) == 0, capsys.readouterr().err
    _checkpoint(out, "control")
    stubbed.clear()
    assert main(argv) == 0, capsys.readouterr().err
    assert "train control" in stubbed
    (out / "run.json").unlink()
    stubbed.clear()
    capsys.readouterr()
    refused(argv, "that was there before this run's run.json", stubbed, capsys)


def test_a_rerun_refused_once_loaded_leaves_run_json_as_it_was(
        tmp_path, text, winobias_dir, tiny_tokenizer, stubbed, monkeypatch, capsys) -> None:
    """A rerun into a run that holds Trainer checkpoints, refused once its base loaded (a
    moved branch), had rewritten run.json before the check: ``updated`` said the refused
    call's time (the test above failed whenever a second passed between its calls). run.json
    is put back as it was where a call adds no evaluation or Trainer checkpoint; one that adds
    one keeps it. (The clock ticks a second a call here.)"""
    from itertools import count

    from biasscope.cli.main import main
    from biasscope.dynamics.scoring import runfile
    from biasscope.intervene import job

    tick = count()
    monkeypatch.setattr(runfile, "_now", lambda: f"2026-01-01T00:00:{next(tick):02d}+00:00")
    state = {"loads": "a" * 40, "kill": False}
    monkeypatch.setattr(job, "hub_commit", lambda source, revision: state["loads"]
                        if "tokenizer" in stubbed else None)

    def train(name: str, *args: Any) -> None:
        stubbed.append(f"train {name}")
        if not (out / "train" / name).exists():
            _checkpoint(out, name, args[-1])  # with its arm.json: the run's own
        elif state["kill"]:
            (out / "train" / name / "checkpoint-40").mkdir()
            raise KeyboardInterrupt  # killed once it saved a checkpoint

    monkeypatch.setattr(job, "train_arm", train)
    out = tmp_path / "run"
    argv = _argv(out, _folder(tmp_path / "base", tiny_tokenizer, seed=0), text, winobias_dir)
    assert main(argv) == 0, capsys.readouterr().err
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    state["loads"] = "b" * 40
    stubbed.clear()
    capsys.readouterr()
    assert main(argv) == 2
    assert "intervention.base.commit: aaaaaaaaaaaa… then" in capsys.readouterr().err
    assert stubbed == [stubbed[0], "tokenizer"]  # refused once loaded, no arm trained
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
    state["loads"], state["kill"] = "a" * 40, True
    assert main(argv) == 130
    assert (out / "run.json").read_bytes() != files[out / "run.json"]  # it holds more now


def _killed_call_s_leftovers(out: Path) -> None:
    """What a call killed mid-write leaves: a temporary unit file of a dead process on this
    host, and a save of ``recommended/`` stopped between its two renames."""
    import subprocess
    import sys

    from biasscope.core.processes import HOST

    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    (out / "records").mkdir(exist_ok=True)
    (out / "records" / f".x.parquet.{HOST}~{dead.pid}.ab12.tmp").write_bytes(b"half a unit")
    (out / f".summary.json.{HOST}~{dead.pid}.cd34.tmp").write_bytes(b"half a summary")
    for name, step in (("recommended.old", 0), ("recommended.partial", 20)):
        (out / name).mkdir()
        (out / name / "recommended.json").write_text(json.dumps({"step": step}))


def test_a_refused_rerun_repairs_nothing(tmp_path, text, winobias_dir, tiny_tokenizer, stubbed,
                                         monkeypatch, capsys) -> None:
    """Before: a rerun removed a killed call's temporary unit files and finished its swap of
    ``recommended/`` first, then was refused (here: a branch found moved once loaded), so a
    refused call had changed --out. The repair waits until the call has passed every check."""
    from biasscope.cli.main import main
    from biasscope.intervene import job

    state = {"loads": "a" * 40}
    monkeypatch.setattr(job, "hub_commit", lambda source, revision: state["loads"]
                        if "tokenizer" in stubbed else None)
    out = tmp_path / "run"
    argv = _argv(out, _folder(tmp_path / "base", tiny_tokenizer, seed=0), text, winobias_dir)
    assert main(argv) == 0, capsys.readouterr().err
    _killed_call_s_leftovers(out)
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    state["loads"] = "b" * 40
    stubbed.clear()
    capsys.readouterr()
    assert main(argv) == 2
    assert "intervention.base.commit: aaaaaaaaaaaa… then" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
    stubbed.clear()
    refused([*argv, "--lr", "0.5"], "intervention.training.lr", stubbed, capsys)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
