"""A checkpoint is its content, not only its path: weights, tokenizer or config files changed
in place (safetensors or a GGUF file) are refused or, with --rescore-changed, redone, never mixed
with the old records; a renamed checkpoint is not a new step; killed GGUF conversions leave no
temporaries behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from biasscope.backends import fingerprints  # the file digests and their cache
from biasscope.cli.main import main
from biasscope.store.directory import RunStore

pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No report (they have their own tests); a fingerprint cache of this test's own."""
    import biasscope.dynamics.summary.write as reporting

    monkeypatch.setattr(reporting, "write_dynamics_report",
                        lambda run, *_, **__: Path(getattr(run, "root", run)) / "r.html")
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))


def run(out: Path, data: Path, seeds: str, *args: str) -> int:
    return main(["dynamics", "--data-dir", str(data), "--out", str(out), "--seeds", seeds,
                 "--limit", "6", "--quiet", "--device", "cpu", *args])


def glob_of(folder: Path) -> list[str]:
    return ["--checkpoint-glob", str(folder / "checkpoint-*")]


def scored(out: Path) -> pd.DataFrame:
    """The records, by item and seed, without columns that name the run's folder."""
    frame = RunStore(out).records().drop(columns=["checkpoint"])
    return frame.sort_values(["seed", "item_id"]).reset_index(drop=True)


def entries(out: Path) -> list[dict]:
    return json.loads((out / "run.json").read_text())["checkpoints"]


@pytest.fixture
def train(checkpoint_dirs, tmp_path) -> Path:
    """A training run's output folder holding one checkpoint-200 (a copy: tests change it)."""
    folder = tmp_path / "train"
    shutil.copytree(checkpoint_dirs[0], folder / "checkpoint-200")
    # A file changed a moment ago is hashed but not cached (a later write could keep its
    # stamp): wait until the copy is older than that, as a checkpoint on disk is.
    saved = folder / "checkpoint-200"
    for file in fingerprints.weight_files(saved) + fingerprints.answer_files(saved):
        while not fingerprints.settled(file.stat(), time.time_ns()):
            time.sleep(0.02)
    return folder


def test_weights_changed_in_place_are_refused_then_rescored_whole(
        train, checkpoint_dirs, winobias_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0
    (entry,) = entries(out)
    # Training continued and re-saved the checkpoint under the same name.
    shutil.copy(checkpoint_dirs[1] / "model.safetensors",
                train / "checkpoint-200" / "model.safetensors")
    capsys.readouterr()
    for seeds in ("0", "0,1"):  # neither the old records kept nor seed 1 on the new weights
        assert run(out, winobias_dir, seeds, *glob_of(train)) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert str((train / "checkpoint-200").resolve()) in err
        assert "--rescore-changed" in err and "--out" in err
    assert len(list((out / "records").glob("*.parquet"))) == 1
    assert entries(out) == [entry] and len(entry["fingerprint"]) == 64

    assert run(out, winobias_dir, "0,1", *glob_of(train), "--rescore-changed") == 0
    fresh = tmp_path / "fresh"
    assert run(fresh, winobias_dir, "0,1", *glob_of(train)) == 0
    pd.testing.assert_frame_equal(scored(out), scored(fresh))
    assert entries(out)[0]["fingerprint"] == entries(fresh)[0]["fingerprint"] != (
        entry["fingerprint"])
    assert len(list((out / "records").glob("*.parquet.stale-1"))) == 1  # kept, never read
    # The new weights are recorded: the same command now simply resumes.
    stamps = {p: p.stat().st_mtime_ns for p in (out / "records").glob("*.parquet")}
    assert run(out, winobias_dir, "0,1", *glob_of(train)) == 0
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())


#: An edit in place of each kind of file beside the weights: a tokenizer that lower-cases its
#: text (other ids), a tokenizer setting, the model's config.
EDITS = {"tokenizer.json": lambda t: {**t, "normalizer": {"type": "Lowercase"}},
         "tokenizer_config.json": lambda t: {**t, "model_max_length": 512},
         "config.json": lambda t: {**t, "layer_norm_eps": 1e-3}}


@pytest.mark.parametrize("name", list(EDITS))
def test_a_tokenizer_or_config_edited_in_place_is_refused_then_rescored(
        name, train, winobias_dir, tmp_path, capsys):
    """Before: units are keyed by the checkpoint's path and run.json held its weights'
    fingerprint alone, so a rerun adding seed 1 resumed, scoring it with the edited tokenizer
    beside seed 0's records made with the old one."""
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0
    (entry,) = entries(out)
    edited = train / "checkpoint-200" / name
    edited.write_text(json.dumps(EDITS[name](json.loads(edited.read_text()))))
    capsys.readouterr()
    assert run(out, winobias_dir, "0,1", *glob_of(train)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"(tokenizer, chat template and config files {entry['files_fingerprint'][:12]} then"\
        in err and "weights" not in err.split("(")[1] and "--rescore-changed" in err
    assert entries(out) == [entry] and len(list((out / "records").glob("*.parquet"))) == 1

    assert run(out, winobias_dir, "0,1", *glob_of(train), "--rescore-changed") == 0
    fresh = tmp_path / "fresh"
    assert run(fresh, winobias_dir, "0,1", *glob_of(train)) == 0
    pd.testing.assert_frame_equal(scored(out), scored(fresh))
    (now,) = entries(out)
    assert now == entries(fresh)[0] and now["fingerprint"] == entry["fingerprint"]
    assert now["files_fingerprint"] != entry["files_fingerprint"]
    assert len(list((out / "records").glob("*.parquet.stale-1"))) == 1


def test_an_unchanged_checkpoint_is_not_hashed_again(train, winobias_dir, tmp_path,
                                                     monkeypatch):
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0

    def refuse(path: object, stop: object = None) -> str:
        raise AssertionError(f"{path} hashed again")

    monkeypatch.setattr(fingerprints, "file_sha256", refuse)
    assert run(out, winobias_dir, "0,1", *glob_of(train)) == 0


@pytest.mark.parametrize("field", ["fingerprint", "files_fingerprint"])
def test_a_run_from_before_fingerprints_resumes_and_records_them(field, train, winobias_dir,
                                                                 tmp_path, capsys):
    """A run recorded without a fingerprint (the weights', or the tokenizer and config files')
    gains it on the next rerun (unknown: trusted, not refused), its units kept; from then on
    an edit is refused."""
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0
    listed = json.loads((out / "run.json").read_text())
    recorded = listed["checkpoints"][0].pop(field)
    (out / "run.json").write_text(json.dumps(listed))
    stamps = {p: p.stat().st_mtime_ns for p in (out / "records").glob("*.parquet")}
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    assert entries(out)[0][field] == recorded
    if field == "files_fingerprint":
        config = train / "checkpoint-200" / "config.json"
        config.write_text(config.read_text() + "\n")
        assert run(out, winobias_dir, "0", *glob_of(train)) == 2
        assert "then" in capsys.readouterr().err


def test_a_renamed_checkpoint_is_not_a_new_step(train, checkpoint_dirs, winobias_dir,
                                                tmp_path, capsys):
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0
    old = (train / "checkpoint-200").resolve()
    (train / "checkpoint-200").rename(train / "checkpoint-250")
    capsys.readouterr()
    assert run(out, winobias_dir, "0", *glob_of(train)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(old) in err and str((train / "checkpoint-250").resolve()) in err
    assert [e["step"] for e in entries(out)] == [200]
    # Copies of one checkpoint under two steps in one command: refused too.
    shutil.copytree(train / "checkpoint-250", train / "checkpoint-300")
    assert run(tmp_path / "other", winobias_dir, "0", *glob_of(train)) == 2
    assert "checkpoint-300" in capsys.readouterr().err
    # Other weights under the new name are a new step, as before.
    shutil.rmtree(train / "checkpoint-300")
    shutil.copy(checkpoint_dirs[2] / "model.safetensors",
                train / "checkpoint-250" / "model.safetensors")
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0
    assert sorted(e["step"] for e in entries(out)) == [200, 250]


def test_a_rerun_refused_once_a_checkpoint_loaded_removes_nothing(train, winobias_dir, tmp_path,
                                                                  capsys):
    """Before: a rerun removed a killed call's temporary unit file before its checkpoints were
    checked, so one refused once its weights were hashed while loading (here: a renamed step)
    had changed --out. The removal waits until the call has passed every check."""
    from biasscope.core.processes import HOST

    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0
    (train / "checkpoint-200").rename(train / "checkpoint-250")
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    left = out / "records" / f".x.parquet.{HOST}~{dead.pid}.ab12.tmp"
    left.write_bytes(b"half a unit")
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert run(out, winobias_dir, "0", *glob_of(train)) == 2
    assert "checkpoint-250" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
    (train / "checkpoint-250").rename(train / "checkpoint-200")
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0
    assert not left.exists()


def test_a_checkpoint_whose_code_is_another_repository_s_is_refused(train, winobias_dir,
                                                                    tmp_path, capsys):
    """Its auto_map's ``org/repo--module.Class`` is code fetched from the hub when a model
    trusted to run its code loads, which the checkpoint's files fingerprint cannot cover:
    with --trust-remote-code refused in one line before it loads (no request: the hub is
    offline here); without it the entry is ignored (transformers' own class loads), and once
    copied in the code is hashed with the folder."""
    config = train / "checkpoint-200" / "config.json"
    listed = json.loads(config.read_text())
    config.write_text(json.dumps({**listed, "auto_map": {
        "AutoModelForCausalLM": "org/remote--modeling.Model"}}))
    out = tmp_path / "run"
    capsys.readouterr()
    assert run(out, winobias_dir, "0", *glob_of(train), "--trust-remote-code") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "auto_map names org/remote--modeling.Model" in err
    assert "copying org/remote's modeling.py" in err
    assert run(tmp_path / "untrusted", winobias_dir, "0", *glob_of(train)) == 0, \
        capsys.readouterr().err
    # pinned: its module in the folder, named there (the model's class is transformers' own)
    config.write_text(json.dumps({**listed, "auto_map": {"AutoConfig": "modeling.Model"}}))
    (train / "checkpoint-200" / "modeling.py").write_text("Model = None\n")
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0, capsys.readouterr().err


def test_trust_remote_code_switched_on_a_checkpoint_with_code_is_refused(
        train, winobias_dir, tmp_path, capsys):
    """A checkpoint whose auto_map names code is two models, with --trust-remote-code (its own
    code) and without (transformers' classes): a switch between two runs into one --out mixed
    their units in one curve unrefused. run.json records ``remote_code``, as a generator's or
    reward model's identity does (the code's fingerprint, or "not run"); the code edited in
    place is a changed checkpoint; a run from before it gains it."""
    folder = train / "checkpoint-200"
    config = folder / "config.json"
    # Code the sweep never runs (no AutoModelForCausalLM entry), so a trusted run loads too.
    config.write_text(json.dumps({**json.loads(config.read_text()), "auto_map": {
        "AutoModelForSequenceClassification": "modeling.Model"}}))
    (folder / "modeling.py").write_text("Model = None\n")
    untrusted, trusted = tmp_path / "untrusted", tmp_path / "trusted"
    assert run(untrusted, winobias_dir, "0", *glob_of(train)) == 0, capsys.readouterr().err
    assert entries(untrusted)[0]["remote_code"] == "not run"
    before = {p: p.read_bytes() for p in untrusted.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert run(untrusted, winobias_dir, "0,1", *glob_of(train), "--trust-remote-code") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and (
        f"checkpoint {folder.resolve()} was scored without --trust-remote-code (transformers' "
        "own classes, not the code its auto_map names): drop --trust-remote-code, or use "
        "another --out") in err, err
    assert {p: p.read_bytes() for p in untrusted.rglob("*") if p.is_file()} == before

    assert run(trusted, winobias_dir, "0", *glob_of(train), "--trust-remote-code") == 0
    code = entries(trusted)[0]["remote_code"]
    assert len(code) == 64 and code != "not run"
    capsys.readouterr()
    assert run(trusted, winobias_dir, "0", *glob_of(train)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and (
        "was scored with --trust-remote-code (the code its auto_map names): give "
        "--trust-remote-code again, or use another --out") in err, err
    assert run(trusted, winobias_dir, "0", *glob_of(train), "--trust-remote-code") == 0

    (folder / "modeling.py").write_text("Model = 1\n")  # the code edited in place
    capsys.readouterr()
    assert run(trusted, winobias_dir, "0", *glob_of(train), "--trust-remote-code") == 2
    err = capsys.readouterr().err.strip()
    assert f"remote code {code[:12]} then" in err and "--rescore-changed" in err, err

    # A run from before remote_code was recorded takes it on, its units kept.
    (folder / "modeling.py").write_text("Model = None\n")
    listed = json.loads((untrusted / "run.json").read_text())
    for entry in listed["checkpoints"]:
        del entry["remote_code"]
    (untrusted / "run.json").write_text(json.dumps(listed))
    kept = scored(untrusted)
    assert run(untrusted, winobias_dir, "0", *glob_of(train)) == 0, capsys.readouterr().err
    assert entries(untrusted)[0]["remote_code"] == "not run"
    pd.testing.assert_frame_equal(scored(untrusted), kept)


def test_a_copy_scored_with_its_code_after_the_original_without_is_still_a_twin(
        train, winobias_dir, tmp_path, capsys):
    """``remote_code`` is no part of what tells twins apart (`runfile._refuse_twins`): the code
    files are among the files ``files_fingerprint`` covers, so the same weights and files run
    the same code under one --trust-remote-code; only a call switching the flag sees them
    differ, and a copy scored the other way is still one step twice in its curve."""
    folder = train / "checkpoint-200"
    config = folder / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "auto_map": {
        "AutoModelForSequenceClassification": "modeling.Model"}}))
    (folder / "modeling.py").write_text("Model = None\n")
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0, capsys.readouterr().err
    shutil.copytree(folder, train / "checkpoint-300")
    capsys.readouterr()
    assert run(out, winobias_dir, "0", "--checkpoint-glob", str(train / "checkpoint-300"),
               "--trust-remote-code") == 2
    err = capsys.readouterr().err
    assert "hold the same weights" in err and "checkpoint-300" in err, err
    assert [e["step"] for e in entries(out)] == [200]


def test_the_same_weights_beside_another_tokenizer_are_not_twins(train, winobias_dir,
                                                                  tmp_path, capsys):
    """Before: two steps were twins by their weights alone, so a step whose weights are an
    earlier one's but whose tokenizer (or template, or config) differs was refused as a copy."""
    shutil.copytree(train / "checkpoint-200", train / "checkpoint-300")
    edited = train / "checkpoint-300" / "tokenizer.json"
    edited.write_text(json.dumps(EDITS["tokenizer.json"](json.loads(edited.read_text()))))
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", *glob_of(train)) == 0, capsys.readouterr().err
    listed = entries(out)
    assert [e["step"] for e in listed] == [200, 300]
    assert listed[0]["fingerprint"] == listed[1]["fingerprint"]
    assert listed[0]["files_fingerprint"] != listed[1]["files_fingerprint"]
    # Byte-identical files too: a copy, refused as before.
    shutil.copytree(train / "checkpoint-200", train / "checkpoint-400")
    assert run(tmp_path / "other", winobias_dir, "0", *glob_of(train)) == 2
    err = capsys.readouterr().err
    assert "same weights" in err and "checkpoint-400" in err and "checkpoint-300" not in err


# --- hub ids ------------------------------------------------------------------------------

def test_a_moved_main_is_refused_then_rescored(checkpoint_dirs, winobias_dir, tmp_path,
                                               monkeypatch, capsys):
    """A hub id without a pinned revision records the commit ``main`` resolved to when it
    loaded; ``main`` moved since (other weights under the same id@main) is refused like weights
    changed in place. Before: a hub checkpoint had no fingerprint, and a rerun adding seed 1
    scored the new commit beside seed 0's records of the old one."""
    from hub_cache import publish, use_cache

    hub = use_cache(monkeypatch, tmp_path / "hub")
    first = publish(hub, "org/tiny", checkpoint_dirs[0])
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", "--model", "org/tiny") == 0
    (entry,) = entries(out)
    assert entry["commit"] == first and entry["identity"] == "org/tiny@main"
    assert run(out, winobias_dir, "0", "--model", "org/tiny") == 0  # unchanged: resumes
    moved = publish(hub, "org/tiny", checkpoint_dirs[1])
    capsys.readouterr()
    assert run(out, winobias_dir, "0,1", "--model", "org/tiny") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"hub commit {first[:12]} then, {moved[:12]} now" in err
    assert "--rescore-changed" in err and "new commit" in err
    assert entries(out) == [entry] and len(list((out / "records").glob("*.parquet"))) == 1

    assert run(out, winobias_dir, "0,1", "--model", "org/tiny", "--rescore-changed") == 0
    assert entries(out)[0]["commit"] == moved
    assert len(list((out / "records").glob("*.parquet.stale-1"))) == 1
    # Seed 0's unit, set aside once the moved commit had loaded, is redone in the same call
    # (it had been planned as done: the run held it until a rerun).
    fresh = tmp_path / "fresh"
    assert run(fresh, winobias_dir, "0,1", "--model", "org/tiny") == 0
    pd.testing.assert_frame_equal(scored(out), scored(fresh))
    # A revision that is a commit cannot move: nothing to record.
    pinned = tmp_path / "pinned"
    assert run(pinned, winobias_dir, "0", "--model", f"org/tiny@{first}") == 0
    assert "commit" not in entries(pinned)[0]


def test_a_hub_branch_and_its_commit_are_twins(checkpoint_dirs, winobias_dir, tmp_path,
                                               monkeypatch, capsys):
    """``org/tiny@main`` and ``org/tiny@<the commit main resolves to>`` were two checkpoints:
    the same weights scored twice under two names. They are twins, refused as a copied folder
    is, in one call or over two, in either order; another commit is another checkpoint."""
    from hub_cache import publish, use_cache

    hub = use_cache(monkeypatch, tmp_path / "hub")
    first = publish(hub, "org/tiny", checkpoint_dirs[0])
    said = f"are one hub commit ({first[:12]}, model org/tiny)"
    capsys.readouterr()
    assert run(tmp_path / "both", winobias_dir, "0", "--model", "org/tiny", "--revisions",
               f"main,{first}") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err and "org/tiny@main" in err, err
    for one, two in (("org/tiny", f"org/tiny@{first}"), (f"org/tiny@{first}", "org/tiny")):
        out = tmp_path / one.replace("/", "-")
        assert run(out, winobias_dir, "0", "--model", one) == 0
        capsys.readouterr()
        assert run(out, winobias_dir, "0", "--model", one, "--model", two) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err, err
        assert [e["identity"] for e in entries(out)] == [
            one if "@" in one else f"{one}@main"]  # the refused one is not listed
    publish(hub, "org/tiny", checkpoint_dirs[1])  # main moved: another commit than first
    assert run(tmp_path / "moved", winobias_dir, "0", "--model", "org/tiny", "--model",
               f"org/tiny@{first}") == 0


# --- GGUF files ---------------------------------------------------------------------------

@pytest.fixture
def gguf_cache(tmp_path, monkeypatch) -> Path:
    pytest.importorskip("gguf")
    cache = tmp_path / "gguf-cache"
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(cache))
    return cache


def test_a_gguf_changed_in_place_is_refused_then_rescored(gguf_cache, winobias_dir, tmp_path,
                                                          capsys):
    from biasscope.backends.gguf import file_sha256
    from gguf_fixture import write_llama_gguf

    (tmp_path / "ggufs").mkdir()
    path = write_llama_gguf(tmp_path / "ggufs" / "tiny-step100.gguf")
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", "--model", str(path), "--first-token") == 0
    first = entries(out)[0]["gguf"]["sha256"]
    write_llama_gguf(path, seed=1)  # the same name, other weights
    capsys.readouterr()
    assert run(out, winobias_dir, "0", "--model", str(path), "--first-token") == 2
    err = capsys.readouterr().err.strip().splitlines()  # after the new file's conversion
    (line,) = [e for e in err if "error" in e]
    assert str(path.resolve()) in line and "--rescore-changed" in line
    assert run(out, winobias_dir, "0", "--model", str(path), "--first-token",
               "--rescore-changed") == 0
    (entry,) = entries(out)
    assert entry["gguf"]["sha256"] == entry["fingerprint"] == file_sha256(path) != first
    fresh = tmp_path / "fresh"
    assert run(fresh, winobias_dir, "0", "--model", str(path), "--first-token") == 0
    pd.testing.assert_frame_equal(scored(out), scored(fresh))


def test_a_killed_conversions_temporaries_are_removed_by_the_next(gguf_cache, tmp_path,
                                                                   monkeypatch):
    from biasscope.backends import gguf
    from biasscope.backends.checkpoints import from_model
    from biasscope.core.processes import HOST
    from gguf_fixture import write_llama_gguf

    path = write_llama_gguf(tmp_path / "m.gguf", seed=2)
    sha = gguf.file_sha256(path)[:16]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    scratch = {name: gguf_cache / name for name in (
        f".{sha}-{HOST}~{dead}-abc", f".{sha}-{HOST}~{os.getpid()}-def",  # dead, running
        f".{sha}-otherhost~{dead}-ghi",  # another host's: cannot tell, kept
        f".{sha}-old12345", f".{sha}-new12345")}  # an older biasscope's: by age
    for folder in scratch.values():
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"half")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(scratch[f".{sha}-old12345"], (day_ago, day_ago))

    def convert(source: Path, header: object, out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"whole")

    monkeypatch.setattr(gguf, "_convert", convert)
    from_model(str(path))
    left = sorted(p.name for p in gguf_cache.glob(".*"))
    assert left == sorted([f".{sha}-{HOST}~{os.getpid()}-def", f".{sha}-otherhost~{dead}-ghi",
                           f".{sha}-new12345"])


def test_a_gguf_cache_moved_resumes_and_its_entry_names_the_file(gguf_cache, winobias_dir,
                                                                tmp_path, monkeypatch):
    """A GGUF checkpoint's entry names the file, not the cache folder it was converted into:
    another $BIASSCOPE_GGUF_CACHE (or a cleared one) scores the same checkpoint, not a new
    one."""
    from gguf_fixture import write_llama_gguf

    path = write_llama_gguf(tmp_path / "tiny.gguf")
    out = tmp_path / "run"
    assert run(out, winobias_dir, "0", "--model", str(path), "--first-token") == 0
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "moved"))
    assert run(out, winobias_dir, "0", "--model", str(path), "--first-token") == 0
    (entry,) = entries(out)
    assert entry["source"] == entry["identity"] == str(path.resolve())
    assert entry["gguf"]["sha256"] == entry["fingerprint"]
