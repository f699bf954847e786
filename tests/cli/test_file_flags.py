"""A file flag given a path that is no file names the flag and what it takes (`given_file`):
``judge --input nofile.jsonl`` said only "nofile.jsonl: cannot read (No such file or
directory)", as did ``judge --labels``, ``audit --responses`` and ``dynamics
--performance-csv``; ``intervene --text`` said "text file nofile.txt does not exist", naming
no flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from user_error import one_line, own_caches

NOWHERE = "openai-compatible:http://127.0.0.1:9/v1#m"  # nothing listens: never reached


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own_caches(tmp_path, monkeypatch)


@pytest.mark.parametrize(("argv", "said"), [
    (["judge", "--model", NOWHERE, "--input", "{tmp}/nofile.jsonl"],
     "--input {tmp}/nofile.jsonl does not exist: give a JSONL file of {id, text} (with "
     "--labels) or {id, prompt, a, b} lines"),
    (["judge-audit", "--model", NOWHERE, "--input", "{tmp}/nofile.jsonl"],
     "--input {tmp}/nofile.jsonl does not exist: give a JSONL file"),
    (["judge", "--model", NOWHERE, "--input", "{tmp}"], "--input {tmp} is a directory: give"),
    (["judge", "--model", NOWHERE, "--input", ""], "--input is empty: give a JSONL file"),
    (["judge", "--model", NOWHERE, "--input", "{tmp}/texts.jsonl", "--labels",
      "{tmp}/nofile.json"], "--labels {tmp}/nofile.json does not exist: give a JSON file of "
     "label name: description"),
    (["judge", "--model", NOWHERE, "--input", "{tmp}/texts.jsonl", "--labels",
      "{tmp}/list.json"], "--labels {tmp}/list.json: write the labels as a JSON object"),
    (["audit", "--probe", "professional-bias", "--responses", "{tmp}/nofile.jsonl"],
     "--responses {tmp}/nofile.jsonl does not exist: give a JSONL file of {item_id, response} "
     "lines"),
    (["intervene", "--model", "org/never-loaded", "--text", "{tmp}/nofile.txt"],
     "--text {tmp}/nofile.txt does not exist: give a file of documents (one per line, or JSONL "
     "with 'text'), or ethics-commonsense"),
    (["intervene", "--model", "org/never-loaded", "--text", ""], "--text is empty: give"),
])
def test_a_file_flag_s_missing_file_names_the_flag(argv, said, tmp_path, capsys):
    (tmp_path / "texts.jsonl").write_text('{"id": "t1", "text": "Fine."}\n')
    (tmp_path / "list.json").write_text('["POS", "NEG"]\n')
    line = one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv]
                    + ["--out", str(tmp_path / "r")])
    assert said.replace("{tmp}", str(tmp_path)) in line, line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", ["judge", "judge-audit", "counterfactual"])
def test_an_empty_labels_is_refused_by_every_command_that_takes_it(command, tmp_path, capsys):
    """``judge --labels ""`` (an unset "$LABELS") was taken as no label set, so a file of
    texts was refused for needing one ("classification needs a label set") and a file of
    pairs was judged pairwise, where ``counterfactual --labels ""`` said the flag is empty.
    Every command refuses it in one line now (`biasscope.judge.labels_of`)."""
    texts, pairs = tmp_path / "texts.jsonl", tmp_path / "pairs.jsonl"
    texts.write_text('{"id": "t1", "text": "Fine."}\n')
    pairs.write_text('{"id": "a", "prompt": "My wife?", "chosen": "Her.", "rejected": "No."}\n')
    given = {"judge": ["--model", "canned:A", "--input", str(texts)],
             "judge-audit": ["--model", "canned:A", "--input", str(texts)],
             "counterfactual": ["--judge-model", "canned:A", "--pairs", str(pairs)]}[command]
    line = one_line(capsys, [command, *given, "--labels", "", "--no-cache", "--out",
                             str(tmp_path / "r")])
    assert "--labels is empty: give a JSON file of label name: description" in line, line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("argv", "said"), [
    (["dynamics", "--model", "org/never-loaded", "--prompt-template", "{tmp}/nofile.txt"],
     "--prompt-template {tmp}/nofile.txt does not exist: give a text file of winobias-gender's "
     "prompt template, or leave it out for the default one"),
    (["dynamics", "--model", "org/never-loaded", "--prompt-template", ""],
     "--prompt-template is empty: give a text file"),
    (["dynamics", "--models-file", "{tmp}/nofile.json"], "--models-file {tmp}/nofile.json does "
     "not exist: give a JSON list of {model[, revisions]} or {checkpoint_glob[, name]} entries"),
    (["dynamics", "--models-file", "{tmp}"], "--models-file {tmp} is a directory: give a JSON"),
    (["dynamics", "--models-file", ""], "--models-file is empty: give a JSON list"),
    (["sensitivity", "--reward-model", "org/never-loaded", "--perturber", "canned:x",
      "--critique-template", "{tmp}/nofile.txt"], "--critique-template {tmp}/nofile.txt does not "
     "exist: give a text file of the critique request, or leave it out for the default one"),
    (["sensitivity", "--reward-model", "org/never-loaded", "--perturber", "canned:x",
      "--direction", "away", "--away-template", ""],
     "--away-template is empty: give a text file of the revision request for --direction away"),
])
def test_a_template_or_models_file_that_is_no_file_reads_as_every_file_flag(
        argv, said, tmp_path, capsys):
    """``--prompt-template``, ``--models-file`` and the sensitivity ``--<name>-template`` flags
    named the flag but said "cannot read (No such file or directory)" of a missing file, and
    took an empty value (an unset "$VARIABLE") as no file given: they read as every other file
    flag now (`given_file`)."""
    (tmp_path / "principles.txt").write_text("Be kind.\n")
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "Hi", "response": "Hello."}\n')
    data = ["--principles", "{tmp}/principles.txt", "--prompts", "{tmp}/prompts.jsonl"]
    line = one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv
                             + (data if argv[0] == "sensitivity" else [])]
                    + ["--out", str(tmp_path / "r")])
    assert said.replace("{tmp}", str(tmp_path)) in line, line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("flag", "said"), [
    (["--performance-csv", "{tmp}/nofile.csv"], "--performance-csv {tmp}/nofile.csv does not "
     "exist: give a CSV file of step,value rows"),
    (["--performance-csv", "small={tmp}/nofile.csv"], "--performance-csv {tmp}/nofile.csv does "
     "not exist"),
])
def test_a_dynamics_performance_file_that_is_missing_names_the_flag(
        flag, said, tmp_path, capsys, checkpoint_dirs, winobias_dir):
    pytest.importorskip("torch")
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    line = one_line(capsys, ["dynamics", "--checkpoint-glob", f"small={glob}", "--data-dir",
                             str(winobias_dir), "--out", str(tmp_path / "r"), "--seeds", "0",
                             "--limit", "2", "--device", "cpu", "--quiet",
                             *(a.replace("{tmp}", str(tmp_path)) for a in flag)])
    assert said.replace("{tmp}", str(tmp_path)) in line, line
    assert not (tmp_path / "r" / "run.json").exists()


@pytest.mark.parametrize("kind", ["device", "pipe"])
def test_a_file_flag_given_a_device_or_pipe_says_what_it_is(kind, tmp_path, capsys):
    """``generate --input /dev/null`` said "--input /dev/null does not exist", of a path that
    is there: a device, pipe or socket is no file a command reads its lines from."""
    import os

    given = "/dev/null"
    if kind == "pipe":
        given = str(tmp_path / "fifo")
        os.mkfifo(given)
    line = one_line(capsys, ["generate", "--model", "canned:yes", "--no-cache", "--input", given,
                             "--out", str(tmp_path / "out.jsonl")])
    assert (f"--input {given} is not a regular file (a {kind}): give a JSONL file of {{id, "
            "prompt}") in line, line
    assert not (tmp_path / "out.jsonl").exists()


def test_given_file_says_a_path_under_a_file_does_not_exist(tmp_path):
    """A path through a file (``in.jsonl/x``) is missing, as one through no folder is."""
    from biasscope.core.errors import BiasscopeError
    from biasscope.core.jsonl import given_file

    (tmp_path / "in.jsonl").write_text("{}\n")
    with pytest.raises(BiasscopeError, match=r"--input .*/in\.jsonl/x does not exist: give it"):
        given_file("--input", str(tmp_path / "in.jsonl" / "x"), "it")
