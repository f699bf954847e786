"""Every user error is one line, no traceback (issue 13, item 8): one test per cause a careless
user hit. Each asserts a non-zero exit, one line on stderr naming the file, line, field or
option and what to do, and that nothing already written was lost."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import adult_fixture
from bbq_fixture import write_bbq
from biasscope.backends.base import GenerateParams, GenerateRequest
from biasscope.backends.checkpoints import parse_seeds
from biasscope.backends.hf_model import resolve_device
from biasscope.backends.openai_http import HTTPConfig, OpenAIGenerator, retry_after
from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError, DataError, ModelError
from biasscope.probes import adult, bbq, lambada, load_probe
from scripted_server import Reply, chat, completion, serve
from sensitivity_fixture import write_hh_rlhf
from user_error import one_line, own_caches
from winobias_fixture import write_winobias

NOWHERE = "openai-compatible:http://127.0.0.1:9/v1#m"  # nothing listens: never reached
SURROGATE_LINE = '{"id": 1, "prompt": "hi\\ud800"}\n'  # a lone surrogate, as JSON spells it


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own_caches(tmp_path, monkeypatch)


# ------------------------------------------------------------------ files the user names


def test_a_missing_prompt_template(tmp_path, capsys):
    line = one_line(capsys, ["dynamics", "--model", "org/never-loaded", "--out",
                             str(tmp_path / "run"), "--prompt-template", str(tmp_path / "no")])
    assert f"--prompt-template {tmp_path / 'no'} does not exist: give a text file" in line


@pytest.mark.parametrize(("content", "message"), [
    ('[{"model": 3, "revisions": "x"}]', "entry 1: 'model' must be a string, not 3"),
    ('[{"model": "a"}, {"model": "b", "revisions": "step1"}]',
     "entry 2: 'revisions' must be a list of strings"),
    ('[{"model": "a", "revisions": [1000]}]', "'revisions' must be a list of strings"),
    ('[{"checkpoint_glob": 5}]', "'checkpoint_glob' must be a string"),
    ('[{"checkpoint_glob": "x/*", "name": ["a"]}]', "'name' must be a string"),
    ('[{"model": "a", "revision": "step1"}]', "unknown field 'revision'"),
    ('[["a"]]', "entry 1 needs 'model' or 'checkpoint_glob'"),
    ('{"model": "a"}', "expected a JSON list"),
    ('[{"model": ', "not valid JSON"),
])
def test_a_models_file_with_wrong_types(content, message, tmp_path, capsys):
    models = tmp_path / "models.json"
    models.write_text(content)
    line = one_line(capsys, ["dynamics", "--models-file", str(models), "--out",
                             str(tmp_path / "run")])
    assert f"--models-file {models}" in line and message in line


@pytest.mark.parametrize("source", [["--checkpoint-glob", "ck/checkpoint-0"],
                                    ["--models-file", "models.json"]])
def test_revisions_without_a_hub_model_are_refused(source, tmp_path, capsys, monkeypatch):
    """They were dropped: the run scored the folders (or entries) without a word."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.json").write_text('[{"checkpoint_glob": "ck/checkpoint-0"}]')
    line = one_line(capsys, ["dynamics", *source, "--revisions", "a,b", "--out", "run"])
    assert line == ("biasscope: error: --revisions needs --model with a hub id (e.g. --model "
                    "EleutherAI/pythia-70m --revisions step1000,step143000); a --models-file "
                    "entry takes its own 'revisions'")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("source", "message"), [
    (["--model", ""], "--model is empty: give a hub id, a local model folder or a .gguf file"),
    (["--checkpoint-glob", " "], "--checkpoint-glob is empty: give a glob of checkpoint folders"),
    (["--checkpoint-glob", "=ck/checkpoint-*"], "--checkpoint-glob =ck/checkpoint-*: the name "
                                               "before '=' is empty; write NAME=GLOB"),
    (["--checkpoint-glob", "A="], "--checkpoint-glob A=: the glob after '=' is empty"),
])
def test_an_empty_model_or_glob_is_refused(source, message, tmp_path, capsys, monkeypatch):
    """``--model ""`` (an unset $VARIABLE) read the folder ``.``, and ``=GLOB`` took the
    folder's name as if no name were given."""
    monkeypatch.chdir(tmp_path)
    line = one_line(capsys, ["dynamics", *source, "--out", "run"])
    assert line.startswith(f"biasscope: error: {message}"), line
    assert not (tmp_path / "run").exists()


def test_a_models_file_that_is_not_utf8(tmp_path, capsys):
    models = tmp_path / "models.json"
    models.write_bytes(b'[{"model": "a"},\n\xff\xfe bad]')
    line = one_line(capsys, ["dynamics", "--models-file", str(models), "--out",
                             str(tmp_path / "run")])
    assert f"{models}:2: not UTF-8" in line


def test_a_non_utf8_input_names_its_line(tmp_path, capsys):
    prompts = tmp_path / "in.jsonl"
    prompts.write_bytes(b'{"id": 1, "prompt": "a"}\n{"id": 2, "prompt": "\xff"}\n')
    line = one_line(capsys, ["generate", "--model", NOWHERE, "--input", str(prompts),
                             "--out", str(tmp_path / "out.jsonl")])
    assert f"{prompts}:2: not UTF-8 text (byte 0xff)" in line


# ------------------------------------------------------------------ numbers out of range


@pytest.mark.parametrize("value", ["0", "-3"])
@pytest.mark.parametrize("command", ["dynamics", "probe", "items"])
def test_limit_zero_or_negative_is_refused(command, value, tmp_path, capsys):
    # It once meant "no limit" in some commands: now it is refused everywhere.
    argv = {"dynamics": ["dynamics", "--model", "org/x", "--out", str(tmp_path / "r")],
            "probe": ["audit", "--responses", str(tmp_path / "r.jsonl"), "--out",
                      str(tmp_path / "r")],
            "items": ["items", "--probe", "professional-bias", "--out",
                      str(tmp_path / "i.jsonl")]}[command]
    line = one_line(capsys, [*argv, f"--limit={value}"])
    assert f"argument --limit: {value} is not 1 or more" in line
    assert not (tmp_path / "r").exists() and not (tmp_path / "i.jsonl").exists()


@pytest.mark.parametrize("value", ["0", "1"])
def test_a_held_out_share_that_leaves_a_side_empty_is_refused_as_the_flag(value, tmp_path,
                                                                          capsys):
    line = one_line(capsys, ["intervene", "--model", "org/x", "--out", str(tmp_path / "r"),
                             "--held-out", value])
    assert f"argument --held-out: {value} is not above 0 and below 1" in line
    assert not (tmp_path / "r").exists()


def test_a_sequence_too_short_to_train_on_is_refused_as_the_flag(tmp_path, capsys):
    line = one_line(capsys, ["intervene", "--model", "org/x", "--out", str(tmp_path / "r"),
                             "--seq-len", "1"])
    assert "argument --seq-len: 1 is below 2: a document needs 2 tokens to train on" in line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("flag", ["--top-logprobs", "--out", "--concurrency"])
def test_a_flag_given_only_the_end_of_options_is_refused(flag, tmp_path, capsys):
    """``--flag=--``: argparse takes the ``--`` as the end of options and stored an empty
    list, which a number's check never saw (a traceback in `generate`)."""
    out = [] if flag == "--out" else ["--out", str(tmp_path / "out.jsonl")]  # alone: beside
    # a value it is an option given twice (tests/cli/test_given_twice.py)
    argv = ["generate", "--input", str(tmp_path / "in.jsonl"), *out, "--model", "canned:x",
            f"{flag}=--"]
    line = one_line(capsys, argv)
    assert f"argument {flag}: expected one value, not '--'" in line
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(("seeds", "message"), [
    ("0-99999999999", "more than 10000 seeds"),  # was a MemoryError (or the OOM killer)
    ("0-4,5-99999", "more than 10000 seeds"),
    ("a-b", "use a range like 0-4"),
    ("1-2-3", "use a range like 0-4"),
    ("-3", "use a range like 0-4"),
    ("5-2", "5-2 is an empty range; write 2-5"),
    (",", "is empty: give a range"),
])
def test_seed_ranges_huge_or_malformed(seeds, message, tmp_path, capsys):
    line = one_line(capsys, ["dynamics", "--model", "org/x", "--out", str(tmp_path / "r"),
                             f"--seeds={seeds}"])
    assert "argument --seeds" in line and message in line
    with pytest.raises(BiasscopeError, match=message):
        parse_seeds(seeds)


@pytest.mark.parametrize(("argv", "message"), [
    (["dynamics", "--revisions", "step1000,,step2000"],
     "argument --revisions: 'step1000,,step2000' has an empty entry between commas; remove "
     "the extra comma"),
    (["dynamics", "--revisions", "step1000,"], "'step1000,' has an empty entry between commas"),
    (["dynamics", "--revisions", "step1000, step1000"],
     "argument --revisions: 'step1000, step1000' names step1000 more than once; name each once"),
    (["dynamics", "--seeds", "0,,2"], "'0,,2': an empty entry between commas; remove the extra"),
    (["dynamics", "--seeds", "0-4,"], "'0-4,': an empty entry between commas"),
    (["dynamics", "--seeds", "0,0"], "'0,0': seed 0 is named more than once; name each seed"),
    (["dynamics", "--seeds", "0-4,3"], "'0-4,3': seed 3 is named more than once"),
    (["intervene", "--lora-rank", "4", "--lora-targets", "q_proj,,v_proj"],
     "--lora-targets: 'q_proj,,v_proj' has an empty entry between commas"),
    (["intervene", "--lora-rank", "4", "--lora-targets", "q_proj,q_proj"],
     "--lora-targets: 'q_proj,q_proj' names q_proj more than once"),
    (["intervene", "--lora-rank", "4", "--lora-targets", " "], "--lora-targets is empty"),
])
def test_comma_lists_refuse_an_empty_or_repeated_entry(argv, message, tmp_path, capsys):
    """Before: ``step1000,,step2000``, a trailing comma and a repeat were skipped or merged
    unsaid (as ``--probe bbq:Age,,Religion`` was)."""
    out = tmp_path / "r"
    line = one_line(capsys, [*argv, "--model", "org/never-loaded", "--out", str(out)])
    assert message in line
    assert not out.exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["dynamics", "--batch-size", "0"], "--batch-size: 0 is not 1 or more"),
    (["dynamics", "--batch-size", "-1"], "--batch-size: -1 is not 1 or more"),
    (["dynamics", "--gpus-per-checkpoint", "-1"], "--gpus-per-checkpoint: -1 is negative"),
    (["dynamics", "--cpus-per-checkpoint", "0"], "--cpus-per-checkpoint: 0 is not above 0"),
    (["sensitivity", "--batch-size", "0"], "--batch-size: 0 is not 1 or more"),
    (["generate", "--concurrency", "0"], "--concurrency: 0 is not 1 or more"),
    (["audit", "--concurrency", "-5"], "--concurrency: -5 is not 1 or more"),
    (["generate", "--retries", "-1"], "--retries: -1 is negative: give 0 or more"),
    (["judge", "--retries", "x"], "--retries: 'x' is not a whole number"),
    (["generate", "--max-tokens", "0"], "--max-tokens: 0 is not 1 or more"),
    (["audit", "--max-tokens", "-4"], "--max-tokens: -4 is not 1 or more"),
    (["sensitivity", "--max-tokens", "0"], "--max-tokens: 0 is not 1 or more"),
    (["generate", "--timeout", "0"], "--timeout: 0 is not above 0"),
    (["judge-audit", "--timeout", "nan"], "--timeout: 'nan' is not a finite number"),
    (["generate", "--timeout", "inf"], "--timeout: 'inf' is not a finite number"),
    (["generate", "--top-logprobs", "-1"], "--top-logprobs: -1 is negative"),
    (["audit", "--top-logprobs", "-3"], "--top-logprobs: -3 is negative"),
    (["generate", "--temperature", "-0.5"], "--temperature: -0.5 is negative"),
    (["generate", "--seed", "-1"], "--seed: -1 is not a seed"),
    (["judge", "--samples", "-1"], "--samples: -1 is not 1 or more"),  # was a ValueError
    (["judge", "--samples", "0"], "--samples: 0 is not 1 or more"),  # was "all orders"
    (["demo", "--bias", "7"], "--bias: 7 is not between 0 and 1"),
    # Before: refused only when a local model loaded, and a server's run took it unsaid.
    (["audit", "--device", "gpu"], "--device: 'gpu' is not a device: give auto, cpu, cuda"),
    (["dynamics", "--device", "cuda:01"], "--device: 'cuda:01' is not a device"),
    (["sensitivity", "--device", "cuda:"], "--device: 'cuda:' is not a device"),
])
def test_options_out_of_range(argv, message, tmp_path, capsys):
    required = {
        "dynamics": ["--model", "org/x", "--out", str(tmp_path / "r")],
        "sensitivity": ["--reward-model", "org/x", "--perturber", NOWHERE, "--out",
                        str(tmp_path / "r")],
        "generate": ["--model", NOWHERE, "--input", "in.jsonl", "--out", "o.jsonl"],
        "audit": ["--responses", "r.jsonl", "--out", str(tmp_path / "r")],
        "judge": ["--model", NOWHERE, "--input", "in.jsonl", "--out", str(tmp_path / "r")],
        "judge-audit": ["--model", NOWHERE, "--input", "in.jsonl", "--out",
                        str(tmp_path / "r")],
        "demo": ["--out", str(tmp_path / "r")]}[argv[0]]
    line = one_line(capsys, [argv[0], *required, *argv[1:]])
    assert f"biasscope {argv[0]}: error: argument {message}" in line
    assert line.endswith(f"(see biasscope {argv[0]} --help)")
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------ models and devices


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_device_cuda_without_cuda(checkpoint_dirs, winobias_dir, tmp_path, capsys):
    with pytest.raises(ModelError, match="no CUDA device here"):
        resolve_device("cuda:1")
    line = one_line(capsys, ["dynamics", "--model", str(checkpoint_dirs[0]), "--data-dir",
                             str(winobias_dir), "--out", str(tmp_path / "r"), "--seeds", "0",
                             "--limit", "2", "--quiet", "--device", "cuda"])
    assert "--device cuda: no CUDA device here" in line and "use --device cpu" in line


def test_a_gpu_number_beyond_the_machines_is_refused(monkeypatch) -> None:
    """Before: torch wraps a large index round (``cuda:255`` is the current GPU), so the
    model loaded on GPU 0 unsaid."""
    torch = __import__("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ModelError, match=re.escape("--device cuda:255: this machine has 1 CUDA")):
        resolve_device("cuda:255")
    with pytest.raises(ModelError, match=re.escape("--device 'gpu' is not a device")):
        resolve_device("gpu")


def _damage(path: Path, how: str) -> None:
    weights = path / "model.safetensors"
    if how == "truncated header":
        weights.write_bytes(weights.read_bytes()[:1000])
    elif how == "truncated data":
        weights.write_bytes(weights.read_bytes()[:-4096])
    elif how == "garbage":
        weights.write_bytes(b"\x00garbage" * 100)
    else:  # a config of another model size beside the weights
        config = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**config, "hidden_size": 128}))


@pytest.mark.parametrize(("how", "message"), [
    ("truncated header", "a .safetensors file is damaged"),
    ("truncated data", "a .safetensors file is damaged"),
    ("garbage", "a .safetensors file is damaged"),
    ("shape mismatch", "the weights' shapes do not fit its config.json"),
])
def test_damaged_weights_and_shape_mismatches(how, message, checkpoint_dirs, winobias_dir,
                                              tmp_path, capsys):
    ckpt = shutil.copytree(checkpoint_dirs[0], tmp_path / "train" / "checkpoint-10")
    _damage(ckpt, how)
    line = one_line(capsys, ["dynamics", "--checkpoint-glob", str(tmp_path / "train" / "*"),
                             "--data-dir", str(winobias_dir), "--out", str(tmp_path / "r"),
                             "--seeds", "0", "--limit", "2", "--quiet", "--device", "cpu"])
    assert "cannot load checkpoint train@checkpoint-10" in line and message in line


@pytest.mark.parametrize(("text", "said"), [("garbage{", "Expecting value: line 1 column 1"),
                                           ("{}", "no 'added_tokens' entry")])
def test_a_damaged_tokenizer_is_one_line(text, said, checkpoint_dirs, winobias_dir, tmp_path,
                                         capsys):
    ckpt = shutil.copytree(checkpoint_dirs[0], tmp_path / "train" / "checkpoint-10")
    (ckpt / "tokenizer.json").write_text(text)
    line = one_line(capsys, ["dynamics", "--checkpoint-glob", str(tmp_path / "train" / "*"),
                             "--data-dir", str(winobias_dir), "--out", str(tmp_path / "r"),
                             "--seeds", "0", "--limit", "2", "--quiet", "--device", "cpu"])
    assert "cannot load the tokenizer of train@checkpoint-10" in line and said in line
    assert "tokenizer files (tokenizer.json, tokenizer_config.json) look damaged" in line
    assert not list((tmp_path / "r" / "records").glob("*.parquet"))


def test_a_checkpoint_missing_weights_is_refused_not_filled_at_random(checkpoint_dirs,
                                                                        winobias_dir, tmp_path,
                                                                        capsys):
    """Before: transformers initialised the missing weights at random, logged a warning and the
    sweep scored a model that does not exist."""
    from safetensors.torch import load_file, save_file

    ckpt = shutil.copytree(checkpoint_dirs[0], tmp_path / "train" / "checkpoint-10")
    weights = load_file(ckpt / "model.safetensors")
    dropped = sorted(k for k in weights if ".layers.0.attention." in k)
    assert dropped
    save_file({k: v for k, v in weights.items() if k not in dropped},
              ckpt / "model.safetensors", metadata={"format": "pt"})
    line = one_line(capsys, ["dynamics", "--checkpoint-glob", str(tmp_path / "train" / "*"),
                             "--data-dir", str(winobias_dir), "--out", str(tmp_path / "r"),
                             "--seeds", "0", "--limit", "2", "--quiet", "--device", "cpu"])
    assert f"lacks {len(dropped)} weights" in line and "incomplete" in line
    assert not list((tmp_path / "r" / "records").glob("*.parquet"))


# ------------------------------------------------------------------ data files


def _not_utf8(path: Path, line: int) -> Path:
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = b"\xff" + lines[line - 1]
    path.write_bytes(b"\n".join(lines))
    return path


def test_a_non_utf8_winobias_file_through_the_cli(tmp_path, capsys):
    data = write_winobias(tmp_path / "data")
    bad = _not_utf8(data / "winobias" / "pro_stereotyped_type2.txt.dev", 3)
    line = one_line(capsys, ["dynamics", "--model", "org/never-loaded", "--data-dir", str(data),
                             "--out", str(tmp_path / "r")])
    assert f"{bad}:3: not UTF-8 text (byte 0xff); replace it with a fresh copy" in line


@pytest.mark.parametrize("source", ["winobias-occupations", "bbq", "adult", "lambada"])
def test_every_data_loader_names_a_non_utf8_file_and_line(source, tmp_path):
    load: dict[str, Callable[[], Any]] = {
        "winobias-occupations": lambda: load_probe("winobias-gender", data_dir=tmp_path),
        "bbq": lambda: bbq.load_items(tmp_path, "Age"),
        "adult": lambda: adult.from_data(tmp_path),
        "lambada": lambda: lambada.from_data(tmp_path)}
    if source == "winobias-occupations":
        bad = _not_utf8(write_winobias(tmp_path) / "winobias" / "male_occupations.txt", 2)
    elif source == "bbq":
        bad = _not_utf8(write_bbq(tmp_path) / "bbq" / "Age.jsonl", 2)
    elif source == "adult":
        bad = _not_utf8(adult_fixture.write(tmp_path, adult_fixture.ROWS), 2)
    else:
        bad = tmp_path / "lambada" / "lambada_test.jsonl"
        bad.parent.mkdir()
        bad.write_bytes(b'{"text": "a b c"}\n{"text": "d e \xff"}\n')
    with pytest.raises(DataError, match=rf"{bad}:2: not UTF-8 text"):
        load[source]()


# ------------------------------------------------------------------ run directories


def _run_dir(tmp_path: Path, run_json: bytes, summary: bytes | None = None) -> Path:
    run = tmp_path / "run"
    (run / "records").mkdir(parents=True)
    (run / "run.json").write_bytes(run_json)
    if summary is not None:
        (run / "summary.json").write_bytes(summary)
    return run


@pytest.mark.parametrize(("run_json", "message"), [
    (b"[1, 2]", "run.json holds a JSON list, not the object biasscope writes"),
    (b'"run"', "run.json holds a JSON str"),
    (b"\xff\xfe{}", "run.json is not UTF-8 JSON"),
    (b'{"kind": 5}', "run.json: field 'kind' has the wrong shape (5)"),
    (b'{"checkpoints": "x"}', "run.json: field 'checkpoints' has the wrong shape"),
    (b'{"checkpoints": [1]}', "run.json: field 'checkpoints' has the wrong shape"),
    (b'{"seeds": ["a"]}', "run.json: field 'seeds' has the wrong shape"),
    (b'{"settings": []}', "run.json: field 'settings' has the wrong shape"),
    (b'{"kind": "audit", ', "run.json is not valid JSON (line 1)"),
])
@pytest.mark.parametrize("command", ["report", "dynamics", "audit"])
def test_run_json_of_the_wrong_shape_or_not_utf8(command, run_json, message, tmp_path, capsys,
                                                 winobias_dir):
    run = _run_dir(tmp_path, run_json)
    argv = {"report": ["report", str(run)],
            "dynamics": ["dynamics", "--model", "org/never-loaded", "--data-dir",
                         str(winobias_dir), "--out", str(run), "--seeds", "0"],
            "audit": ["audit", "--model", "canned:A", "--probe", "professional-bias", "--out",
                      str(run)]}[command]
    line = one_line(capsys, argv)
    assert message in line and str(run) in line
    # ... and what to do: nothing can rebuild what run.json records.
    assert line.endswith(f"; restore it from a copy, or move {run} away and run the command "
                         "that made it again (or give that command another --out)")
    assert (run / "run.json").read_bytes() == run_json  # nothing rewritten


def test_summary_json_not_utf8(tmp_path, capsys):
    run = _run_dir(tmp_path, b'{"schema": "biasscope.run/1"}', b"\xff\xfe")
    line = one_line(capsys, ["report", str(run)])
    assert f"{run / 'summary.json'} is not UTF-8 JSON" in line
    assert line.endswith("; move it away, then run the command that made the run again (its "
                         "stored results are kept) to rewrite it")


def test_stray_files_in_records_are_not_units(checkpoint_dirs, winobias_dir, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["dynamics", "--model", str(checkpoint_dirs[0]), "--data-dir", str(winobias_dir),
            "--out", str(run), "--seeds", "0", "--quiet", "--device", "cpu"]
    assert main(argv) == 0
    before = json.loads((run / "summary.json").read_text())["checkpoints"]
    import pandas as pd

    pd.DataFrame({"a": [1, 2]}).to_parquet(run / "records" / "notes.parquet")  # was KeyError
    (run / "records" / "README.txt").write_text("my notes")
    assert main(["report", str(run)]) == 0, capsys.readouterr().err
    assert main(argv) == 0  # a rerun neither reads nor redoes them
    assert json.loads((run / "summary.json").read_text())["checkpoints"] == before
    assert (run / "records" / "notes.parquet").exists()


# ------------------------------------------------------------------ outputs in the way


@pytest.mark.parametrize("command", ["audit", "judge", "judge-audit", "dynamics",
                                     "sensitivity", "demo"])
@pytest.mark.parametrize("where", ["a file", "inside a file"])
def test_a_run_directory_where_a_file_is(command, where, tmp_path, capsys):
    blocker = tmp_path / "taken.jsonl"
    blocker.write_text("precious\n")
    out = blocker if where == "a file" else blocker / "run"
    required = {
        "audit": ["--responses", "r.jsonl"], "dynamics": ["--model", "org/x"],
        "judge": ["--model", NOWHERE, "--input", "in.jsonl"],
        "judge-audit": ["--model", NOWHERE, "--input", "in.jsonl"],
        "sensitivity": ["--reward-model", "org/x", "--perturber", NOWHERE], "demo": []}
    line = one_line(capsys, [command, *required[command], "--out", str(out)])
    assert f"argument --out: {out}" in line and "give a directory" in line
    assert blocker.read_text() == "precious\n"


def test_demo_in_an_unwritable_place_fails_before_training(tmp_path, capsys):
    line = one_line(capsys, ["demo", "--out", "/proc/biasscope-demo"])
    assert line.startswith("biasscope: error: /proc/biasscope-demo:")


def test_items_and_generate_inside_a_file(tmp_path, capsys):
    blocker = tmp_path / "taken"
    blocker.write_text("precious\n")
    line = one_line(capsys, ["items", "--probe", "professional-bias", "--out",
                             str(blocker / "i.jsonl")])
    assert f"cannot write {blocker / 'i.jsonl'}" in line
    assert blocker.read_text() == "precious\n"


def test_generate_and_items_never_write_over_their_own_inputs(tmp_path, capsys):
    """Before: --out naming the --input replaced the requests with answers, and items
    written into the data directory replaced a dataset file."""
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": 1, "prompt": "a"}\n')
    line = one_line(capsys, ["generate", "--model", NOWHERE, "--input", str(prompts),
                             "--out", str(tmp_path / "." / "in.jsonl")])
    assert "is the --input file" in line
    assert prompts.read_text() == '{"id": 1, "prompt": "a"}\n'
    data = write_winobias(tmp_path / "data")
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    target = next(iter(before))
    line = one_line(capsys, ["items", "--probe", "winobias-gender", "--data-dir", str(data),
                             "--out", str(target)])
    assert "is a file of the data directory" in line
    assert {p: p.read_bytes() for p in before} == before


def test_items_replace_only_items(tmp_path, capsys):
    """`items --out answers.jsonl` (a file of answers or prompts, given by mistake) replaced it
    with items without a word; an earlier export of items, or an empty file, is replaced."""
    data = write_winobias(tmp_path / "data")
    args = ["items", "--probe", "winobias-gender", "--data-dir", str(data), "--limit", "1"]
    kept = {"answers.jsonl": '{"id": 1, "prompt": "a", "answer": "b"}\n',
            "notes.txt": "precious\n", "binary.jsonl": "\udcff"}
    for name, text in kept.items():
        (tmp_path / name).write_text(text, errors="surrogateescape")
        line = one_line(capsys, [*args, "--out", str(tmp_path / name)])
        assert line == (f"biasscope: error: items --out {tmp_path / name} is a file that holds "
                        "no items (its first line is no item of `biasscope items`), which the "
                        "items would replace: write them elsewhere, or delete it first")
        assert (tmp_path / name).read_text(errors="surrogateescape") == text
    (tmp_path / "empty.jsonl").write_text("")
    for name in ("items.jsonl", "items.jsonl", "empty.jsonl"):  # the second: over the first
        assert main([*args, "--out", str(tmp_path / name)]) == 0
        assert json.loads((tmp_path / name).read_text().splitlines()[0])["probe"] == \
            "winobias-gender"


def test_generate_names_the_line_and_id_that_repeat(tmp_path, capsys):
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": "2", "prompt": "a"}\n{"prompt": "b"}\n')  # line 2: id "2"
    line = one_line(capsys, ["generate", "--model", NOWHERE, "--input", str(prompts),
                             "--out", str(tmp_path / "out.jsonl")])
    assert f"{prompts}:2: id '2' already used on line 1" in line


# ------------------------------------------------------------------ lone surrogates


@pytest.mark.parametrize("command", ["generate", "judge", "probe", "sensitivity"])
def test_a_lone_surrogate_in_an_input_names_file_and_line(command, tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    rows = {"generate": ['{"id": 1, "prompt": "ok"}', '{"id": 2, "prompt": "hi\\ud800"}'],
            "judge": ['{"id": 1, "prompt": "q", "a": "x", "b": "y"}',
                      '{"id": 2, "prompt": "q", "a": "x\\udc80", "b": "y"}'],
            "probe": ['{"item_id": "a", "response": "A"}',
                      '{"item_id": "b", "response": "\\udfffA"}'],
            "sensitivity": ['{"prompt": "hi", "response": "yo"}',
                            '{"prompt": "hi", "response": "\\ud83d"}']}[command]
    path.write_text("\n".join(rows) + "\n")
    argv = {"generate": ["generate", "--model", NOWHERE, "--input", str(path), "--out",
                         str(tmp_path / "o.jsonl")],
            "judge": ["judge", "--model", NOWHERE, "--input", str(path), "--out",
                      str(tmp_path / "r")],
            "probe": ["audit", "--probe", "professional-bias", "--responses", str(path),
                      "--out", str(tmp_path / "r")],
            "sensitivity": ["sensitivity", "--reward-model", "org/x", "--perturber", NOWHERE,
                            "--principles", str(tmp_path / "p.txt"), "--prompts", str(path),
                            "--out", str(tmp_path / "r")]}[command]
    (tmp_path / "p.txt").write_text("Be kind.\n")
    line = one_line(capsys, argv)
    assert f"{path}:2: a lone UTF-16 surrogate escape" in line and "remove it" in line
    assert not (tmp_path / "o.jsonl").exists()


def test_a_pair_of_surrogates_is_one_character(tmp_path):
    from biasscope.core.jsonl import read_jsonl

    path = tmp_path / "in.jsonl"
    path.write_text('{"a": "\\ud83d\\ude00", "b": "\\\\ud800"}\n')
    assert list(read_jsonl(path)) == [(1, {"a": "\U0001f600", "b": "\\ud800"})]


def test_a_lone_surrogate_in_a_reply_is_replaced_and_cached_replaced(tmp_path, capsys):
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": 1, "prompt": "hi"}\n')
    out, cache = tmp_path / "o.jsonl", tmp_path / "c.sqlite"

    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        return Reply(body=completion("half \ud83d of a smile"))

    with serve(script) as server:
        argv = ["generate", "--model", f"openai-compatible:{server.base_url}#m", "--input",
                str(prompts), "--out", str(out), "--cache", str(cache)]
        assert main(argv) == 0
        first = json.loads(out.read_text(encoding="utf-8"))
        assert first["text"] == "half \ufffd of a smile" and first["error"] is None
        assert main(argv) == 0  # from the cache: the same replaced answer
        assert len(server.generation_calls()) == 1
    assert json.loads(out.read_text(encoding="utf-8"))["text"] == "half \ufffd of a smile"
    with sqlite3.connect(cache) as db:
        for row in db.execute("SELECT * FROM sqlite_master WHERE type = 'table'"):
            for values in db.execute(f"SELECT * FROM {row[1]}"):
                assert not any(isinstance(v, str) and "\\ud83d" in v.lower() for v in values)


# ------------------------------------------------------------------ servers that say odd things


@pytest.mark.parametrize(("value", "seconds"), [
    ("soon", None), ("", None), ("nan", None), ("inf", None), ("-3", 0.0), ("2", 2.0),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), ("Wed, 21 Oct 2015 07:28:00 -0000", None),
])
def test_retry_after_values(value, seconds):
    class Answer(Exception):
        response = type("R", (), {"headers": {"retry-after": value}})()

    assert retry_after(Answer()) == seconds


def test_retry_after_soon_is_no_hint_and_the_backoff_retries():
    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if n == 1:
            return Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "soon"})
        return Reply(body=completion("fine"))

    with serve(script) as server:
        gen = OpenAIGenerator("m", server.base_url, config=HTTPConfig(backoff=0.01))
        [answer] = gen.generate([GenerateRequest(prompt="hi", params=GenerateParams())])
    assert (answer.text, answer.error, answer.attempts) == ("fine", None, 2)


@pytest.mark.parametrize("tokens", [["a", "b"], [1.5], [{"id": "x"}], [{"no": 1}], [True],
                                    "12", None, [[1]]])
def test_a_tokenize_answer_with_non_integers_means_no_tokenizer(tokens):
    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        return Reply(body={"tokens": tokens})

    with serve(script) as server:
        gen = OpenAIGenerator("m", server.base_url)
        assert gen.tokenize("A") is None and gen.capabilities["tokenize"] is False


# ------------------------------------------------------------------ responses and names


def test_an_empty_responses_file(tmp_path, capsys):
    empty = tmp_path / "responses.jsonl"
    empty.write_text("\n\n")
    line = one_line(capsys, ["audit", "--probe", "professional-bias", "--responses",
                             str(empty), "--out", str(tmp_path / "r")])
    assert f"{empty}: no responses in the file" in line
    assert not (tmp_path / "r" / "run.json").exists()


@pytest.mark.parametrize("name", ["m" * 300, ".hidden", "..", ".", "a/../b", "con"])
def test_model_names_too_long_or_starting_with_a_dot(name, tmp_path, capsys):
    items = tmp_path / "items.jsonl"
    assert main(["items", "--probe", "professional-bias", "--out", str(items), "--limit", "4"]) == 0
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"item_id": json.loads(row)["item_id"],
                                             "response": "the doctor"}) + "\n"
                                 for row in items.read_text().splitlines()))
    run = tmp_path / "r"
    argv = ["audit", "--probe", "professional-bias", "--responses", str(responses), "--name",
            name, "--out", str(run), "--limit", "4"]
    assert main(argv) == 0, capsys.readouterr().err
    units = list((run / "records").iterdir())
    assert len(units) == 1 and not units[0].name.startswith(".")
    assert len(units[0].name.encode()) < 255
    assert json.loads((run / "run.json").read_text())["model"] == name
    assert main(argv) == 0  # the rerun finds its unit
    assert list((run / "records").iterdir()) == units


def test_checkpoint_names_too_long_or_starting_with_a_dot(checkpoint_dirs, winobias_dir,
                                                          tmp_path):
    name = "." + "m" * 300
    run = tmp_path / "r"
    assert main(["dynamics", "--checkpoint-glob", f"{name}={checkpoint_dirs[0].parent}/*-10",
                 "--data-dir", str(winobias_dir), "--out", str(run), "--seeds", "0",
                 "--quiet", "--device", "cpu"]) == 0
    [unit] = (run / "records").iterdir()
    assert not unit.name.startswith(".") and len(unit.name.encode()) < 255
    assert json.loads((run / "summary.json").read_text())["checkpoints"][0]["model"] == name


# ------------------------------------------------------------------ texts too long to take


TEMPLATE_LINE = "{sentence} {occupation} {o1} {o2} {o3} " + "x" * 20_001 + " Answer:"
JSONL_LINE = json.dumps({"id": 1, "prompt": "p" * 1_000_001, "item_id": "a", "response": "y",
                         "a": "a", "b": "b", "text": "t"})


@pytest.mark.parametrize("command", ["items", "prompt-template", "template-block", "generate",
                                     "audit", "judge", "counterfactual", "principles",
                                     "labels"])
def test_a_text_too_long_is_refused_before_it_is_expanded(command, winobias_dir, tmp_path,
                                                          capsys):
    """A 20 MB template line once grew memory to 22 GB until the kernel killed the process;
    a 20 MB counterfactual line took 90 s. Every text a user hands over is bounded first."""
    path = tmp_path / "input"
    text, line = {
        "items": ("### a\n# note\n" + TEMPLATE_LINE + "\n", 3),
        "prompt-template": ("Intro\n" + TEMPLATE_LINE, 2),
        "template-block": ("### a\n{sentence} {occupation}\n" + "\n".join(
            ["{o1} {o2} {o3} " + "y" * 900] * 30) + "\nAnswer:\n", 24),
        "generate": ('{"id": 0, "prompt": "ok"}\n' + JSONL_LINE + "\n", 2),
        "audit": (JSONL_LINE + "\n", 1),
        "judge": ('{"id": 0, "text": "t"}\n\n' + JSONL_LINE + "\n", 3),
        "counterfactual": (JSONL_LINE + "\n", 1),
        "principles": ("Be kind.\n" + "Be fair. " * 2500 + "\n", 2),
        "labels": (json.dumps({"a": "x", "b": "y" * 20_001}), 1)}[command]
    path.write_text(text)
    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"id": 0, "text": "t"}\n')
    out = tmp_path / "out"
    argv = {
        "items": ["items", "--probe", "winobias-gender", "--wordings", str(path),
                  "--data-dir", str(winobias_dir), "--out", str(out)],
        "template-block": ["items", "--probe", "winobias-gender", "--wordings", str(path),
                           "--data-dir", str(winobias_dir), "--out", str(out)],
        "prompt-template": ["dynamics", "--model", "org/never-loaded", "--prompt-template",
                            str(path), "--data-dir", str(winobias_dir), "--out", str(out)],
        "generate": ["generate", "--model", NOWHERE, "--input", str(path), "--out", str(out)],
        "audit": ["audit", "--probe", "professional-bias", "--responses", str(path), "--out",
                  str(out)],
        "judge": ["judge", "--model", NOWHERE, "--input", str(path), "--out", str(out)],
        "counterfactual": ["counterfactual", "--pairs", str(path), "--judge-model", NOWHERE,
                           "--out", str(out)],
        "principles": ["sensitivity", "--reward-model", "org/never-loaded", "--perturber",
                       NOWHERE, "--principles", str(path), "--prompts", str(path), "--out",
                       str(out)],
        "labels": ["judge", "--model", NOWHERE, "--input", str(texts), "--labels", str(path),
                   "--out", str(out)]}[command]
    said = one_line(capsys, argv)
    assert f"{path}:{line}: " in said or f"{path}: line {line}: " in said, said
    assert "characters, more than the" in said and "shorten it" in said
    assert not out.exists()


# ------------------------------------------------------------------ advice names real things


def test_every_option_the_code_names_is_one_the_command_line_has():
    """Advice must name real things: a warning once said "raise --max-length", an option no
    command has."""
    import argparse
    import re

    from biasscope.cli.main import build_parser

    flags: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            flags.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    source = Path(__file__).parents[2] / "src" / "biasscope"
    named = {(m.group(), path.name) for path in source.rglob("*.py")
             for m in re.finditer(r"--[a-z][a-z0-9-]*[a-z0-9]\b", path.read_text())}
    generic = {"--name-with-dashes", "--no"}  # how core/config.py describes flags
    assert sorted((flag, file) for flag, file in named if flag not in flags | generic) == []


@pytest.mark.parametrize(("argv", "said"), [
    (["compare", "{tmp}/nowhere", "{tmp}"], "{tmp}/nowhere does not exist: give the folder a "
     "biasscope command wrote"),
    (["compare", "{tmp}", "{tmp}"], "{tmp} has no run.json: it is not a run directory"),
    (["compare", "{tmp}", "{tmp}", "--out", "{tmp}/file.txt"], "argument --out: "
     "{tmp}/file.txt is a file: give a directory"),
    (["compare", "{tmp}", "{tmp}", "--out", ""], "argument --out: give a directory"),
    (["power", "--pilot", "{tmp}/file.txt", "--effect", "0.1"], "--pilot {tmp}/file.txt is a "
     "file: give the folder a biasscope command wrote"),
    (["power", "--pilot", "{tmp}/nowhere", "--effect", "0.1"], "--pilot {tmp}/nowhere does not "
     "exist"),
    (["report", "{tmp}/file.txt"], "{tmp}/file.txt is a file, not a run directory: give the "
     "run's folder"),
    (["intervene", "--model", "org/never-loaded", "--text", "{tmp}", "--out", "{tmp}/run"],
     "--text {tmp} is a directory: give a file of documents"),
])
def test_advice_names_what_is_wrong_with_a_path(argv, said, tmp_path, capsys):
    (tmp_path / "file.txt").write_text("x\n")
    line = one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert said.replace("{tmp}", str(tmp_path)) in line


# ------------------------------------------------------------------ accepted silently before


@pytest.mark.parametrize(("argv", "said"), [
    (["power", "--pilot", "{tmp}/run", "--sd", "0.3", "--effect", "0.1"],
     "--sd is for a plan without a run: --pilot measures"),
    (["power", "--sd", "1", "--margin", "0.1", "--effect", "0.1"],
     "--effect 0.1 with --margin 0.1: the true difference equivalence is planned under must "
     "be smaller than the margin"),
    (["power", "--sd", "1", "--margin", "0.1", "--alpha", "0.6", "--power", "0.9"],
     "--alpha 0.6 with --margin: give a number between 0 and 0.5"),
    (["power", "--pilot", "{tmp}/run", "--margin", "0.1", "--measure", "flip_rate"],
     "--measure flip_rate is for a plan from --sd: a --pilot plans each of its measures"),
    (["power", "--sd", "1", "--effect", "0.1", "--measure", "flip_rate"],
     "--measure flip_rate is for an equivalence plan: give --margin, or drop --measure"),
    (["power", "--sd", "1", "--margin", "0.1", "--measure", "flips"],
     "--measure 'flips': give one of jsdp_gap, accuracy_gap"),
    (["intervene", "--model", "org/never-loaded", "--lora-alpha", "8", "--out", "{tmp}/r"],
     "--lora-alpha only applies with --lora-rank N (a LoRA fine-tune); give a rank, or drop it"),
    (["intervene", "--model", "org/never-loaded", "--lora-alpha", "8", "--lora-targets",
      "q_proj", "--out", "{tmp}/r"], "--lora-alpha and --lora-targets only apply with"),
    (["intervene", "--model", "org/never-loaded", "--seed", "4294967294", "--runs", "3",
      "--out", "{tmp}/r"], "--seed 4294967294 with --runs 3: run 3 would be seeded 4294967296"),
    (["sensitivity", "--reward-model", "org/never-loaded", "--perturber", NOWHERE,
      "--sanity-lines", "1-10", "--sanity-pairs", "0", "--out", "{tmp}/r"],
     "--sanity-lines 1-10 draws the sanity pairs, but --sanity-pairs 0 asks for none"),
    (["items", "--probe", "professional-bias", "--wordings", "", "--out", "{tmp}/i.jsonl"],
     "--wordings is empty: give builtin"),
    (["items", "--probe", "professional-bias", "--out", ""],
     "--out is empty: give the JSONL file to write the items to"),
    (["audit", "--probe", "professional-bias", "--wordings", " ", "--responses",
      "{tmp}/responses.jsonl", "--out", "{tmp}/r"], "--wordings is empty"),
    (["counterfactual", "--pairs", "{tmp}/pairs.jsonl", "--judge-model", NOWHERE, "--out",
      "{tmp}/r"], "pairs.jsonl:2: 'group' \"robot\": give female or male"),
    (["compare", "{tmp}/a", "{tmp}/b", "--margin", "flip_rate=0.1", "--margin",
      "flip_rate=0.2"], "--margin flip_rate is given twice (0.1, then 0.2)"),
    (["compare", "{tmp}/a", "{tmp}/b", "--margin", "0.02", "--margin", "jsdp_gap=0.01"],
     "--margin 0.02 is one margin for every measure, given with other margins (jsdp_gap=0.01)"),
    (["audit", "--probe", "professional-bias", "--responses", "{tmp}/responses.jsonl",
      "--out", "{tmp}/r"], "responses.jsonl: none of its 1 item ids is an item this run asks "
     "(e.g. 'professional-bias:s01:male-first:he@p1')"),
])
def test_settings_that_cannot_apply_are_refused(argv, said, tmp_path, capsys):
    (tmp_path / "responses.jsonl").write_text(json.dumps({
        "item_id": "professional-bias:s01:male-first:he@p1", "response": "the doctor"}) + "\n")
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps({
        "prompt": "Rate this.", "response": f"{name} is fit.", "group": group}) + "\n"
        for name, group in (("She", "female"), ("He", "robot"))))
    line = one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert said in line
    assert not (tmp_path / "r").exists() and not (tmp_path / "i.jsonl").exists()


# ------------------------------------------------------------------ the library's checks, as flags


@pytest.mark.parametrize(("argv", "said"), [
    (["power", "--sd", "1", "--effect", "0.1", "--power", "1"],
     "--power 1 with --alpha 0.05: give a --power above --alpha and below 1"),
    (["power", "--sd", "1", "--effect", "0.1", "--alpha", "0.9", "--power", "0.5"],
     "--power 0.5 with --alpha 0.9: give a --power above --alpha and below 1"),
    (["power", "--sd", "1", "--effect", "0.1", "--alpha", "0"],
     "--alpha 0: give a number above 0 and below 1"),
    (["compare", "{tmp}/a", "{tmp}/b", "--margin", "jsdp_gap=-0.03"],
     "--margin -0.03 for jsdp_gap: give a number above 0 and at most 0.347"),
    (["compare", "{tmp}/a", "{tmp}/b", "--margin", "-0.03"],
     "--margin -0.03: give a number above 0"),
    (["items", "--probe", "professional-bias", "--out", "{tmp}"],
     "--out {tmp} is a directory: give the JSONL file to write the items to"),
])
def test_a_library_check_names_the_flag_and_what_to_do(argv, said, tmp_path, capsys):
    """Core's checks ("power 1.0 must lie between alpha and 1", "margin -0.03 for jsdp_gap",
    "cannot write DIR: Is a directory") come out naming the flag the user gave."""
    line = one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert said.replace("{tmp}", str(tmp_path)) in line


@pytest.mark.parametrize(("argv", "said"), [
    (["dynamics", "--model", "org/never-loaded", "--out", "{tmp}/r", "--alpha", "5"],
     "--alpha 5: must be strictly between 0 and 1: write 0.05 for 5%"),
    (["dynamics", "--model", "org/never-loaded", "--out", "{tmp}/r", "--confidence", "9"],
     "--confidence 9: must be strictly between 0 and 1: write 0.09 for 9%"),
    (["dynamics", "--model", "org/never-loaded", "--out", "{tmp}/r", "--budget", "2"],
     "--budget 2: must be from 0 to 1 (a fraction of the final performance): write 0.02 "
     "for 2%"),
    (["compare", "{tmp}/a", "{tmp}/b", "--alpha", "5"],
     "argument --alpha: 5 is not between 0 and 1: write 0.05 for 5%"),
    (["power", "--sd", "1", "--effect", "0.1", "--alpha", "2.5"],
     "argument --alpha: 2.5 is not between 0 and 1: write 0.025 for 2.5%"),
    (["power", "--sd", "1", "--effect", "0.1", "--power", "80"],
     "argument --power: 80 is not between 0 and 1: write 0.8 for 80%"),
])
def test_a_percentage_given_for_a_fraction_says_the_fraction(argv, said, tmp_path, capsys):
    """``--alpha 5`` said only "must be strictly between 0 and 1" (``--confidence 95`` said to
    write 0.95): a probability written as a percentage now says the fraction to write."""
    line = one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert said in line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("value", "hint"), [("1.5", True), ("100", False), ("250", False)])
def test_only_a_value_that_reads_as_a_percentage_gets_the_fraction(value, hint, capsys):
    line = one_line(capsys, ["power", "--sd", "1", "--effect", "0.1", "--alpha", value])
    assert f"--alpha: {value} is not between 0 and 1" in line
    assert ("write 0.015 for 1.5%" in line) == hint and ("write" in line) == hint


# ------------------------------------------------------------------ a changed setting, in words


def test_a_rerun_with_other_wordings_says_which_in_words(tmp_path, capsys):
    """Other --wordings printed the same truncated JSON twice; no --wordings printed
    "continuations: (not recorded) then"."""
    items = tmp_path / "items.jsonl"
    rows = []
    for spec in ("builtin", None):
        assert main(["items", "--probe", "professional-bias", "--out", str(items),
                     *(["--wordings", spec] if spec else [])]) == 0
        rows += [json.loads(line) for line in items.read_text().splitlines()]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"item_id": r["item_id"], "response": "the doctor"})
                                 + "\n" for r in rows))
    mine = tmp_path / "mine.md"
    mine.write_text("### p0\n{sentence}. Who {action}?\n### p1\n{sentence}: who {action}?\n"
                    "### p2\n{sentence}. Who {action}, then?\n### p3\nWho {action}? {sentence}\n")
    run = ["audit", "--probe", "professional-bias", "--responses", str(responses), "--out",
           str(tmp_path / "r")]
    assert main([*run, "--wordings", "builtin"]) == 0
    said = {spec: one_line(capsys, [*run, *(["--wordings", spec] if spec else [])])
            for spec in ("2", str(mine), None)}
    assert ("different settings of probe 'professional-bias' (wordings: 4 wordings (p0, p1, "
            "p2, p3) then, 2 wordings (p0, p1) now); use another --out") in said["2"]
    assert "(wordings: 4 wordings (p0, p1, p2, p3) then, none now)" in said[None]
    assert "(wordings.p0.prompts_sha256: " in said[str(mine)]  # the same ids, other texts


def test_a_rerun_with_another_seed_or_pairs_names_them_not_their_hashes(tmp_path):
    from biasscope.counterfactual import job
    from fakes import Reward
    from sensitivity_fixture import hh_text, write_hh_rlhf

    texts = [hh_text([("Human", f"How is my brother {i}?"), ("Assistant", "He is well.")])
             for i in range(12)]
    data = str(write_hh_rlhf(tmp_path / "data", texts))
    out = tmp_path / "run"
    job.run(job.CounterfactualConfig(out=out, data_dir=data, pairs="hh-rlhf:harmless-base:8"),
            [Reward("rm")])
    for change, said in ((dict(seed=1), "a different 'seed' (0 then, 1 now)"),
                         (dict(pairs="hh-rlhf:harmless-base:6"), 'a different \'pairs\' '
                          '(pairs.source: "hh-rlhf:harmless-base:8" then, '
                          '"hh-rlhf:harmless-base:6" now)')):
        config = job.CounterfactualConfig(out=out, data_dir=data,
                                          **{"pairs": "hh-rlhf:harmless-base:8", **change})
        with pytest.raises(BiasscopeError) as refused:
            job.run(config, [Reward("rm")])
        assert said in str(refused.value) and "sha256" not in str(refused.value)


@pytest.mark.parametrize(("then", "now"), [(0, 4), (4, 8)])
def test_a_rerun_with_another_lora_rank_names_lora_rank(then, now):
    from biasscope.intervene.train import Training, recorded
    from biasscope.store.settings import merge_settings

    with pytest.raises(BiasscopeError) as refused:
        merge_settings("run.json", *({"intervention": {"training": recorded(Training(
            lora_rank=rank))}} for rank in (then, now)))
    shown = "not recorded" if then == 0 else str(then)
    assert f"intervention.training.lora_rank: {shown} then, {now} now" in str(refused.value)


def test_a_changed_wording_is_shown_where_its_text_differs(winobias_dir, tmp_path):
    from biasscope.probes.specs import load_probes
    from biasscope.store.settings import merge_settings

    mine = tmp_path / "mine.md"
    mine.write_text("### w0\n{sentence}\nQ: is the {occupation} {o1}, {o2} or {o3}?\nA:\n"
                    "### w1\n{o1} {o2} {o3}\n{sentence}\nThe {occupation} is\n")
    then, now = (load_probes("winobias-gender", data_dir=winobias_dir, wordings=spec)[0]
                 for spec in ("2", str(mine)))
    with pytest.raises(BiasscopeError) as refused:
        merge_settings("run.json", {"probes": {"winobias-gender": then.config()}},
                       {"probes": {"winobias-gender": now.config()}}, {"probes": "probe"})
    assert ('(wordings.w0.template: …"tence}\\nQuestion: What is the g"… then, '
            '…"tence}\\nQ: is the {occupation} "… now; wordings.w1.template:'
            ) in str(refused.value)


# ------------------------------------------------------------------ checked before loading


#: Small input files a command reads before its model loads (`_write_inputs`).
INPUTS = {
    "texts.jsonl": '{"id": 1, "text": "fine"}\n',
    "pairs.jsonl": '{"id": 1, "prompt": "q", "a": "x", "b": "y"}\n',
    "one.json": '{"ok": "fine"}', "three.json": '{"a": "x", "b": "y", "c": "z"}',
    "principles.txt": "Be kind.\n",
    "chats.jsonl": '{"messages": [{"role": "user", "content": "hi"}, '
                   '{"role": "assistant", "content": "yo"}]}\n',
    "cf.jsonl": '{"prompt": "Rate him.", "response": "He is fit."}\n'}


def _write_inputs(root, changed: dict[str, str] | None = None) -> None:
    """`INPUTS` (with ``changed`` files' texts) written into ``root``."""
    for name, text in {**INPUTS, **(changed or {})}.items():
        (root / name).write_text(text)

@pytest.mark.parametrize(("argv", "said"), [
    (["judge", "--model", "hf:org/never-loaded", "--input", "{tmp}/texts.jsonl", "--labels",
      "{tmp}/one.json"], "a judge needs at least two labels; got 1"),
    (["judge", "--model", "hf:org/never-loaded", "--input", "{tmp}/texts.jsonl"],
     "classification needs a label set (--labels FILE.json)"),
    (["judge-audit", "--model", "hf:org/never-loaded", "--input", "{tmp}/pairs.jsonl",
      "--labels", "{tmp}/three.json"], "--labels is for classifying texts; this input holds "
     "pairs"),
    (["judge", "--model", "hf:org/never-loaded", "--input", "{tmp}/texts.jsonl", "--labels",
      "{tmp}/three.json", "--keys", "AB"], "--keys: 2 given (A, B); the 3 choices (a, b, c) "
     "need one key each"),
    (["judge-audit", "--model", "hf:org/never-loaded", "--input", "{tmp}/pairs.jsonl",
      "--keys", "AB"], "--keys: 2 given (A, B); the 3 choices (a, b and tie) need one key each"),
    (["judge", "--model", "hf:org/never-loaded", "--input", "{tmp}/texts.jsonl", "--labels",
      "{tmp}/three.json", "--keys", "1,2,3,,4"], "--keys: '1,2,3,,4' has an empty entry"),
    (["judge", "--model", "hf:org/never-loaded", "--input", "{tmp}/texts.jsonl", "--labels",
      "{tmp}/three.json", "--keys", "1,2,3,1"], "--keys: '1,2,3,1' names 1 more than once"),
    (["sensitivity", "--reward-model", "org/never-loaded", "--perturber", NOWHERE,
      "--sanity-lines", "abc", "--out", "{tmp}/r"], "--sanity-lines abc: write FIRST-LAST"),
    (["sensitivity", "--reward-model", "org/never-loaded", "--perturber", NOWHERE,
      "--principles", "{tmp}/principles.txt", "--prompts", "{tmp}/chats.jsonl", "--data-dir",
      "{tmp}", "--out", "{tmp}/r"], "missing data file"),
    (["counterfactual", "--pairs", "{tmp}/cf.jsonl", "--judge-model", "hf:org/never-loaded",
      "--out", "{tmp}/r"], "a pairwise judge compares 'chosen' with 'rejected'"),
    (["counterfactual", "--pairs", "{tmp}/cf.jsonl", "--reward-model", "org/never-loaded",
      "--labels", "{tmp}/three.json", "--out", "{tmp}/r"], "--labels is for a --judge-model"),
])
def test_flags_and_files_are_checked_before_a_model_loads(argv, said, tmp_path, capsys):
    """These were checked only after the model loaded (10-30 s, or a download); here no model
    can load (offline), so the one line must be about the flag or file."""
    _write_inputs(tmp_path)
    out = ["--out", str(tmp_path / "r")] if argv[0].startswith("judge") else []
    line = one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv] + out)
    assert said in line and "never-loaded" not in line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("argv", "said"), [
    (["--pairs", "{tmp}/nofile.jsonl"], "--pairs {tmp}/nofile.jsonl does not exist: give a "
     "JSONL file of pairs, or hh-rlhf:harmless-base:N"),
    (["--pairs", "{tmp}"], "--pairs {tmp} is a directory: give a JSONL file of pairs"),
    (["--pairs", "{tmp}/cf.jsonl", "--labels", "{tmp}/nofile.json"], "--labels "
     "{tmp}/nofile.json does not exist: give a JSON file of label name: description, or leave "
     "it out to judge pairwise"),
    (["--pairs", "{tmp}/cf.jsonl", "--labels", "{tmp}"], "--labels {tmp} is a directory"),
    (["--pairs", "{tmp}/cf.jsonl", "--labels", "{tmp}/cf.jsonl"], "--labels {tmp}/cf.jsonl: "
     "cannot read a label set (Extra data: line 2 column 1 (char 50)); write a JSON object of "
     "name: description"),
])
def test_counterfactual_file_flags_name_the_flag(argv, said, tmp_path, capsys):
    """A missing or unreadable file said only "nofile.json: cannot read (No such file or
    directory)", naming neither --pairs nor --labels nor what they take."""
    _write_inputs(tmp_path)
    (tmp_path / "cf.jsonl").write_text('{"prompt": "Rate him.", "response": "He is fit."}\n'
                                       '{"prompt": "Rate her.", "response": "She is fit."}\n')
    line = one_line(capsys, ["counterfactual", *[a.replace("{tmp}", str(tmp_path)) for a in argv],
                             "--judge-model", "hf:org/never-loaded", "--out",
                             str(tmp_path / "r")])
    assert said.replace("{tmp}", str(tmp_path)) in line
    assert not (tmp_path / "r").exists()


def test_lora_targets_are_checked_against_the_weight_names_before_loading(checkpoint_dirs,
                                                                           tmp_path, capsys):
    """A target the model lacks was found by peft after the model loaded; the names are in
    the safetensors header, so the check needs no weight (here the weights are damaged)."""
    ckpt = shutil.copytree(checkpoint_dirs[0], tmp_path / "checkpoint-10")
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4096])  # the header intact, the data cut
    line = one_line(capsys, ["intervene", "--model", str(ckpt), "--lora-rank", "4",
                             "--lora-targets", "query_key_value,nosuch", "--out",
                             str(tmp_path / "r")])
    assert "--lora-targets query_key_value,nosuch: checkpoint-10 has no module nosuch" in line
    assert "query_key_value" in line.split("end in:")[1]
    assert not (tmp_path / "r").exists()


def test_top_logprobs_with_option_scoring_is_refused_before_the_model_loads(tmp_path, capsys):
    line = one_line(capsys, ["audit", "--model", "hf:org/never-loaded", "--probe",
                             "professional-bias", "--scoring", "options", "--top-logprobs", "5",
                             "--out", str(tmp_path / "r")])
    assert "--top-logprobs is for --scoring generate" in line


@pytest.mark.parametrize(("line", "top", "most"), [
    ({"messages": [{"role": "user", "content": "hi"}]}, "50", "20"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "21", "20"),
    ({"prompt": "hi"}, "6", "5"),  # a plain prompt goes to the legacy completions
])
def test_top_logprobs_above_openais_limit_is_refused_before_any_request(
        line, top, most, tmp_path, capsys, monkeypatch):
    """Before: taken, and every request of the file came back refused by the API."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # refused before the key is looked for
    prompts = tmp_path / "in.jsonl"
    prompts.write_text(json.dumps({"id": 1, **line}) + "\n")
    said = one_line(capsys, ["generate", "--model", "openai:gpt-4o-mini", "--input",
                             str(prompts), "--out", str(tmp_path / "out.jsonl"),
                             "--top-logprobs", top])
    assert f"--top-logprobs {top}: openai: (OpenAI's API) returns 0 to {most} alternatives" in said
    assert said.endswith(f"give {most} or fewer")
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(("extra", "most"), [([], "20"), (["--plain-prompt"], "5")])
def test_audit_top_logprobs_above_openais_limit_is_refused(extra, most, tmp_path, capsys,
                                                          monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    said = one_line(capsys, ["audit", "--model", "openai:gpt-4o-mini", "--probe",
                             "professional-bias", "--top-logprobs", "21", *extra, "--out",
                             str(tmp_path / "r")])
    assert f"--top-logprobs 21: openai: (OpenAI's API) returns 0 to {most}" in said
    assert not (tmp_path / "r").exists()


def test_top_logprobs_within_a_backends_range_is_taken():
    """OpenAI's 20 (5 for a plain prompt); a server's own limit (llama.cpp's server returns
    any count) and a local model's vocabulary are theirs to apply."""
    from biasscope.backends.generators import parse_model_spec
    from biasscope.backends.specs import check_top_logprobs

    check_top_logprobs(parse_model_spec("openai:gpt-4o-mini"), 20)
    check_top_logprobs(parse_model_spec("openai:gpt-4o-mini"), 5, completions=True)
    check_top_logprobs(parse_model_spec("openai-compatible:http://127.0.0.1:9/v1#m"), 50)
    check_top_logprobs(parse_model_spec("hf:org/name"), 1000)


@pytest.mark.parametrize(("extra", "named"), [
    (["--base-url", "http://127.0.0.1:9/v1"], "--base-url"),
    (["--api-key-env", "MY_KEY"], "--api-key-env"),
    (["--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "MY_KEY"],
     "--base-url and --api-key-env"),
])
def test_canned_answers_refuse_a_server_url_or_key(tmp_path, capsys, extra, named):
    """Before: canned:TEXT ignored them, and the run looked as if it had asked that server."""
    out = tmp_path / "run"
    line = one_line(capsys, ["audit", "--model", "canned:A", "--probe", "professional-bias",
                             "--out", str(out), *extra])
    assert f"--model canned:A answers from a fixed list and asks no server, so {named} " \
           "would be ignored: drop" in line
    assert not out.exists()


_LOCAL = "hf:org/never-loaded"


@pytest.mark.parametrize(("argv", "flag"), [
    (["audit", "--model", _LOCAL, "--probe", "professional-bias"], "--model"),
    (["generate", "--model", "org/never-loaded", "--input", "{tmp}/texts.jsonl"], "--model"),
    (["judge", "--model", _LOCAL, "--model", "./never-there", "--input", "{tmp}/texts.jsonl",
      "--labels", "{tmp}/three.json"], "--model"),
    (["sensitivity", "--reward-model", "org/never-loaded", "--perturber", _LOCAL,
      "--principles", "{tmp}/principles.txt", "--prompts", "{tmp}/chats.jsonl", "--data-dir",
      "{tmp}"], "--perturber"),
    (["counterfactual", "--pairs", "{tmp}/cf.jsonl", "--judge-model", _LOCAL, "--labels",
      "{tmp}/three.json"], "--judge-model"),
])
@pytest.mark.parametrize(("extra", "named"), [
    (["--base-url", "http://127.0.0.1:9/v1"], "--base-url would be ignored: drop it"),
    (["--api-key-env", "MY_KEY"], "--api-key-env would be ignored: drop it"),
])
def test_a_local_model_refuses_a_server_url_or_key(tmp_path, capsys, argv, flag, extra, named):
    """Before: hf: (or a bare path or hub id) ignored them, and the run looked as if it had
    asked that server; refused before the model loads (here none can: offline)."""
    _write_inputs(tmp_path, {"three.json": '{"a": "x", "b": "y"}'})
    write_hh_rlhf(tmp_path)
    out = tmp_path / "r"
    line = one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv]
                    + ["--out", str(out), *extra])
    assert f"{flag} " in line and "is a local model and asks no server, so " in line
    assert named in line and "cannot load" not in line
    assert not out.exists()


def test_a_server_model_beside_a_local_one_keeps_the_server_url(tmp_path, capsys):
    """--base-url applies to the openai-compatible judge, so it is not refused: the local one
    is loaded (and, offline, cannot be)."""
    (tmp_path / "texts.jsonl").write_text('{"id": 1, "text": "fine"}\n')
    (tmp_path / "three.json").write_text('{"a": "x", "b": "y", "c": "z"}')
    capsys.readouterr()
    assert main(["judge", "--model", _LOCAL, "--model", "openai-compatible:m", "--input",
                 str(tmp_path / "texts.jsonl"), "--labels", str(tmp_path / "three.json"),
                 "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "asks no server" not in err and "cannot load checkpoint org/never-loaded" in err


def test_canned_answers_beside_a_server_model_leave_it_the_server_url(tmp_path, capsys):
    """Before: canned:b refused --base-url although it was the openai-compatible judge's, as a
    local model beside a server model does not; both judges answer."""
    (tmp_path / "texts.jsonl").write_text('{"id": 1, "text": "fine"}\n')
    (tmp_path / "three.json").write_text('{"a": "x", "b": "y", "c": "z"}')

    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        return Reply(body=chat("a") if path.endswith("/chat/completions") else completion("a"))

    capsys.readouterr()
    with serve(script) as server:
        code = main(["judge", "--model", "canned:b", "--model", "openai-compatible:m",
                     "--input", str(tmp_path / "texts.jsonl"), "--labels",
                     str(tmp_path / "three.json"), "--base-url", server.base_url, "--no-cache",
                     "--out", str(tmp_path / "r")])
        asked = server.generation_calls()
    assert "asks no server" not in capsys.readouterr().err
    assert code == 0 and asked


@pytest.mark.parametrize(("probe", "said"), [
    ("bbq:Age,,Religion", "--probe bbq:Age,,Religion: an empty entry between commas; remove "
                          "the extra comma"),
    ("bbq:Age,Age", "--probe bbq:Age,Age selects Age more than once: name each once")])
def test_an_audit_refuses_an_empty_or_repeated_bbq_category(tmp_path, capsys, probe, said):
    """Before: the empty entry was skipped and the repeated category merged, unsaid."""
    data, out = tmp_path / "data", tmp_path / "run"
    write_bbq(data)
    line = one_line(capsys, ["audit", "--model", "canned:A", "--probe", probe, "--data-dir",
                             str(data), "--out", str(out)])
    assert said in line
    assert not out.exists()


def test_an_unknown_probe_is_named_before_any_data_is_read(tmp_path, capsys):
    """`--probe winobias-gender,nosuch` said the WinoBias data was missing; put there, the
    next call said the probe was unknown."""
    line = one_line(capsys, ["dynamics", "--model", "x", "--probe", "winobias-gender,nosuch",
                             "--data-dir", str(tmp_path), "--out", str(tmp_path / "run")])
    assert line.startswith("biasscope: error: unknown probe 'nosuch'; available: ")
    assert not (tmp_path / "run").exists()


def test_an_empty_report_output_is_refused_naming_the_flag(tmp_path, capsys):
    """`report RUN --output ""` (an unset $VARIABLE) wrote RUN/report.html instead."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"kind": "dynamics"}')
    line = one_line(capsys, ["report", str(run), "--output", ""])
    assert line == ("biasscope report: error: argument --output: is empty: give the HTML file to "
                    "write, or leave --output out to write RUN/report.html (see biasscope "
                    "report --help)")
    assert not (run / "report.html").exists()


def test_an_unquoted_checkpoint_glob_says_to_quote_it(tmp_path, capsys, monkeypatch):
    """`--checkpoint-glob out/checkpoint-*` unquoted: the shell gives the first folder as its
    value and the rest as arguments, which argparse called unrecognized and no more."""
    for step in (10, 20, 30):
        (tmp_path / "out" / f"checkpoint-{step}").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    line = one_line(capsys, ["dynamics", "--out", "run", "--checkpoint-glob",
                             "out/checkpoint-10", "out/checkpoint-20", "out/checkpoint-30"])
    assert line == ("biasscope: error: unrecognized arguments: out/checkpoint-20 "
                    "out/checkpoint-30; the shell expanded the --checkpoint-glob pattern into "
                    "these paths: quote it so that biasscope reads every checkpoint, e.g. "
                    "--checkpoint-glob 'out/checkpoint-*' (see biasscope --help)")
    line = one_line(capsys, ["dynamics", "--out", "run", "--checkpoint-glob",
                             "out/checkpoint-10", "stray"])
    assert line == "biasscope: error: unrecognized arguments: stray (see biasscope --help)"
