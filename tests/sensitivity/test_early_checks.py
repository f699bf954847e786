"""A sensitivity call into a run that it cannot join is refused before any reward model
loads: a real model takes minutes to load, and a mistake about --out's run (a damaged
run.json, the run's model under another name, another setting) was said only after it had.
A tiny local reward model and a canned perturber; the loader then counts its calls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from biasscope.cli.main import main
from no_loads import no_loads, refused
from sensitivity_fixture import write_reward_model


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_reward_model(tmp_path_factory.mktemp("models") / "rm")


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The reward models a call went on to load (none: each is refused with a one-line error
    instead); patched in once the run exists."""
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    return []


def test_sensitivity_refuses_before_a_reward_model_loads(
        model: Path, loads: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from biasscope.sensitivity import job

    prompts, principles = tmp_path / "prompts.jsonl", tmp_path / "principles.txt"
    prompts.write_text("".join(json.dumps({"prompt": f"Ask my wife {i}?", "response": "No."})
                               + "\n" for i in range(2)))
    principles.write_text("Be kind.\nBe brief.\n")
    out = tmp_path / "run"
    given = ["--principles", str(principles), "--prompts", str(prompts), "--sanity-pairs",
             "0", "--no-chat-template", "--device", "cpu", "--no-cache"]
    argv = ["sensitivity", "--perturber", "canned:It is rude.|Be kind.", *given,
            "--out", str(out)]
    assert main([*argv, "--reward-model", str(model)]) == 0
    capsys.readouterr()
    no_loads(monkeypatch, job, loads)
    rm = ["--reward-model", str(model)]
    refused([*argv, "--reward-model", f"R={model}"], "holds this reward model as 'rm', and "
             "this call names it 'R'", loads, capsys)
    refused([*argv, *rm, "--transform", "probability"], "settings of reward model 'rm' "
             "(transform", loads, capsys)
    refused([*argv, *rm, "--dtype", "bfloat16"], "(dtype", loads, capsys)
    refused([*argv, *rm, "--seed", "3"], "different 'perturber'", loads, capsys)
    principles.write_text("Be kind.\n")
    refused([*argv, *rm], "different 'principles'", loads, capsys)
    principles.write_text("Be kind.\nBe brief.\n")
    refused(["sensitivity", "--perturber", "canned:other", *given, "--out", str(out), *rm],
             "different 'perturber'", loads, capsys)
    shutil.copytree(out, tmp_path / "damaged")
    (tmp_path / "damaged" / "run.json").write_text("{")
    refused([*argv[:-1], str(tmp_path / "damaged"), *rm], "run.json is not valid JSON",
             loads, capsys)
    # A copy of the model in another folder is another model: its fingerprint, hashed before
    # it loads, is the same, and its source is not; it loads.
    shutil.copytree(model, tmp_path / "copy")
    assert main([*argv, "--reward-model", f"R={tmp_path / 'copy'}"]) == 2
    assert loads == [str(tmp_path / "copy")]


def test_a_hub_reward_model_on_a_branch_under_another_name_is_refused_before_it_loads(
        model: Path, loads: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--reward-model R=org/rm@dev`` into a run of ``org/rm@dev`` was refused only once it had
    loaded: the identity made whole before loading took the commit of ``main``, not of the
    branch asked for, so it never matched the recorded one."""
    from biasscope.sensitivity import job
    from hub_cache import publish, use_cache

    publish(use_cache(monkeypatch, tmp_path / "hub"), "org/rm", model, ref="dev")
    prompts, principles = tmp_path / "prompts.jsonl", tmp_path / "principles.txt"
    prompts.write_text(json.dumps({"prompt": "Ask my wife?", "response": "No."}) + "\n")
    principles.write_text("Be kind.\n")
    argv = ["sensitivity", "--perturber", "canned:It is rude.|Be kind.", "--principles",
            str(principles), "--prompts", str(prompts), "--sanity-pairs", "0",
            "--no-chat-template", "--device", "cpu", "--no-cache", "--out", str(tmp_path / "run")]
    assert main([*argv, "--reward-model", "org/rm@dev"]) == 0
    capsys.readouterr()
    no_loads(monkeypatch, job, loads)
    refused([*argv, "--reward-model", "R=org/rm@dev"], "holds this reward model as "
             "'org/rm@dev', and this call names it 'R'", loads, capsys)


def test_a_ccai_file_edited_past_the_top_k_is_refused_before_a_reward_model_loads(
        model: Path, loads: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: run.json recorded the SHA-256 of the principles ``ccai:top1`` kept, so an edit
    to the own clean_comments.csv (BIASSCOPE_OWN_DATA, set for the tests) past them resumed the
    run as made from it. The whole file's SHA-256 is recorded and checked, as an audit's."""
    from biasscope.sensitivity import job
    from sensitivity_fixture import write_ccai

    data = write_ccai(tmp_path / "data")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": "Ask my wife?", "response": "No."}) + "\n")
    out = tmp_path / "run"
    argv = ["sensitivity", "--perturber", "canned:It is rude.|Be kind.", "--principles",
            "ccai:top1", "--data-dir", str(data), "--prompts", str(prompts), "--sanity-pairs",
            "0", "--no-chat-template", "--device", "cpu", "--no-cache", "--out", str(out),
            "--reward-model", str(model)]
    assert main(argv) == 0
    recorded = json.loads((out / "run.json").read_text())["settings"]["data"]
    assert list(recorded) == ["ccai/clean_comments.csv"]
    capsys.readouterr()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    csv = data / "ccai" / "clean_comments.csv"
    text = csv.read_text(encoding="utf-8")  # comment 11, no group's top principle
    csv.write_text(text.replace("Al should have emotion", "AI should have emotions"),
                   encoding="utf-8")
    assert csv.read_text(encoding="utf-8") != text
    with monkeypatch.context() as patched:
        no_loads(patched, job, loads)
        refused(argv, f"{out} was made from another ccai/clean_comments.csv ({csv}: SHA-256 ",
                loads, capsys)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    csv.write_text(text, encoding="utf-8")  # the file it was made from: resumed
    assert main(argv) == 0
    # a run from before data files were recorded resumes, and gains the record
    meta = json.loads((out / "run.json").read_text())
    del meta["settings"]["data"]
    (out / "run.json").write_text(json.dumps(meta))
    assert main(argv) == 0
    assert json.loads((out / "run.json").read_text())["settings"]["data"] == recorded


def test_a_rerun_with_every_reward_stored_loads_no_reward_model(
        model: Path, loads: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: every call loaded its reward models, with every reward stored. A local one
    loads when it first scores: its identity (files hashed, the dtype its config names on a
    GPU under --dtype auto, float32 on a CPU) is checked unloaded. A unit missing loads it."""
    import torch

    import biasscope.backends.reward as reward

    prompts, principles = tmp_path / "prompts.jsonl", tmp_path / "principles.txt"
    prompts.write_text("".join(json.dumps({"prompt": f"Ask my wife {i}?", "response": "No."})
                               + "\n" for i in range(2)))
    principles.write_text("Be kind.\nBe brief.\n")
    out = tmp_path / "run"
    argv = ["sensitivity", "--perturber", "canned:It is rude.|Be kind.", "--principles",
            str(principles), "--prompts", str(prompts), "--sanity-pairs", "0",
            "--no-chat-template", "--no-cache", "--out", str(out), "--reward-model", str(model)]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    real = reward._load_classifier

    def counted(ckpt, config, fail: bool = True):
        loads.append(str(ckpt.source))
        if fail:
            raise AssertionError(f"{ckpt.source} was loaded")
        return real(ckpt, config)

    monkeypatch.setattr(reward, "_load_classifier", counted)
    assert main(argv) == 0, capsys.readouterr().err
    assert loads == [] and json.loads((out / "summary.json").read_text()) == summary
    with monkeypatch.context() as gpu:  # its config names float32, as the CPU loaded it in
        gpu.setattr(reward, "resolve_device", lambda name: torch.device("cuda"))
        assert main(argv) == 0, capsys.readouterr().err
    assert loads == []
    next(iter((out / "records").glob("*.parquet"))).unlink()
    monkeypatch.setattr(reward, "_load_classifier", lambda c, o: counted(c, o, fail=False))
    assert main(argv) == 0, capsys.readouterr().err
    assert loads == [str(model)] and json.loads((out / "summary.json").read_text()) == summary
