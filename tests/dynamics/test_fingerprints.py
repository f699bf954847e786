"""A checkpoint's fingerprint is hashed where it costs nothing, and is as strict as ever: the
same digest as hashlib over the files, a cache that never takes a changed file for the old one,
and a new checkpoint hashed while it loads (not before the sweep starts) yet recorded before
any of its units is written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from biasscope.backends import fingerprints  # the file digests and their cache
from biasscope.core import digest
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.scoring.fingerprints import FileDigests
from biasscope.store.settings import sha256_json

pytest.importorskip("torch")


def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten seconds from now, as far as the cache can tell: every file has settled."""
    now = time.time_ns() + 10**10
    monkeypatch.setattr(fingerprints.time, "time_ns", lambda: now)


def refuse_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: object, stop: object = None) -> str:
        raise AssertionError(f"{path} read again")

    monkeypatch.setattr(fingerprints, "file_sha256", refuse)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_digest_is_hashlib_over_the_whole_file(tmp_path, monkeypatch):
    monkeypatch.setattr(digest, "BLOCK", 1000)  # many blocks, a short last one
    monkeypatch.setattr(digest, "_SMALLEST", 1000)
    files = [tmp_path / f"w{i}.bin" for i in range(3)]
    for i, f in enumerate(files):
        f.write_bytes(os.urandom(12_345 + i))
    digests = FileDigests(tmp_path / "cache.json")
    running = [digests.start(f) for f in files]  # hashed side by side
    assert [r.result() for r in running] == [(f.stat().st_size, sha(f)) for f in files]
    digests.close()


def test_a_settled_file_is_read_once_across_processes(tmp_path, monkeypatch):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"weights" * 1000)
    later(monkeypatch)
    first = FileDigests(tmp_path / "cache.json")
    assert first.sha256(weights) == (7000, sha(weights))
    first.close()
    refuse_reads(monkeypatch)
    assert FileDigests(tmp_path / "cache.json").sha256(weights) == (7000, sha(weights))


def test_a_file_changed_a_moment_ago_is_not_cached(tmp_path, monkeypatch):
    """Within one timestamp tick a second write could keep size, mtime and ctime: a file that
    fresh is hashed but not cached, so the rewrite below is seen whatever the clock."""
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a" * 4096)
    digests = FileDigests(tmp_path / "cache.json")
    assert digests.sha256(weights)[1] == sha(weights)
    digests.close()
    stat = weights.stat()
    with weights.open("r+b") as handle:  # in place: same size, same inode
        handle.write(b"b" * 4096)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime
    assert FileDigests(tmp_path / "cache.json").sha256(weights)[1] == sha(weights)


def test_another_file_renamed_over_is_hashed_again(tmp_path, monkeypatch):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a" * 4096)
    later(monkeypatch)
    digests = FileDigests(tmp_path / "cache.json")
    old = digests.sha256(weights)[1]
    digests.close()
    stat = weights.stat()
    copy = tmp_path / "copy.tmp"
    copy.write_bytes(b"b" * 4096)  # same size
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime
    os.replace(copy, weights)  # another inode
    assert FileDigests(tmp_path / "cache.json").sha256(weights)[1] == sha(weights) != old


def test_an_entry_that_differs_only_in_inode_is_not_used(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"x" * 100)
    stat = weights.stat()
    stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino + 1, stat.st_dev]
    cache = tmp_path / "cache.json"
    cache.write_text(json.dumps({str(weights.resolve()): {"stat": stamp, "sha256": "0" * 64}}))
    assert FileDigests(cache).sha256(weights)[1] == sha(weights)
    stamp[3] = stat.st_ino  # the same file: the cache is trusted
    cache.write_text(json.dumps({str(weights.resolve()): {"stat": stamp, "sha256": "0" * 64}}))
    assert FileDigests(cache).sha256(weights)[1] == "0" * 64


def test_a_file_that_keeps_changing_while_read_is_refused(tmp_path, monkeypatch):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"x" * 100)
    real = fingerprints.file_sha256

    def growing(path: Path, stop: object = None) -> str:
        digest = real(path)
        with path.open("ab") as handle:  # a trainer still writing it
            handle.write(b"y")
        return digest

    monkeypatch.setattr(fingerprints, "file_sha256", growing)
    with pytest.raises(BiasscopeError, match="kept changing while it was read"):
        FileDigests(tmp_path / "cache.json").sha256(weights)


def test_a_small_file_is_not_queued_behind_weights(tmp_path, monkeypatch):
    """A tokenizer file asked for while every hashing thread reads weights is hashed at once:
    the loader's tokenizer key waits on it before the model loads."""
    monkeypatch.setattr(fingerprints, "_WORKERS", 1)
    monkeypatch.setattr(fingerprints.steps, "LARGE_FILE", 1000)
    weights, tokenizer = tmp_path / "model.safetensors", tmp_path / "tokenizer.json"
    weights.write_bytes(b"w" * 5000)
    tokenizer.write_text("{}")
    reading, real = threading.Event(), fingerprints.file_sha256

    def slow(path: Path, stop: object = None) -> str:
        if path.name == weights.name:
            assert reading.wait(10)
        return real(path, stop)  # type: ignore[arg-type]

    monkeypatch.setattr(fingerprints, "file_sha256", slow)
    digests = FileDigests(tmp_path / "cache.json")
    big = digests.start(weights)
    assert digests.start(tokenizer).result(timeout=5) == (2, sha(tokenizer))
    reading.set()
    assert big.result(timeout=10)[1] == sha(weights)
    digests.close()


def test_every_module_of_a_model_folder_is_hashed(tmp_path):
    """Remote code under any module name (config.json's auto_map names ``module.Class``, and
    it imports modules beside it) changes the folder's files fingerprint when edited."""
    (tmp_path / "config.json").write_text(json.dumps(
        {"auto_map": {"AutoModelForCausalLM": "my_net.MyModel"}}))
    (tmp_path / "my_net.py").write_text("from .layers import Block\n")
    (tmp_path / "layers.py").write_text("class Block: ...\n")
    (tmp_path / "model.safetensors").write_bytes(b"w")
    found = [p.name for p in fingerprints.answer_files(tmp_path)]
    assert found == ["config.json", "layers.py", "my_net.py"]
    before = fingerprints.start_fingerprint(tmp_path, FileDigests(tmp_path / "c.json"),
                                            fingerprints.answer_files)()
    (tmp_path / "layers.py").write_text("class Block: pass\n")
    assert fingerprints.start_fingerprint(tmp_path, FileDigests(tmp_path / "c.json"),
                                          fingerprints.answer_files)() != before


@pytest.mark.parametrize(("name", "auto_map"), [
    ("config.json", {"AutoConfig": "org/remote--my_net.MyConfig"}),
    ("tokenizer_config.json", {"AutoTokenizer": ["org/remote--my_net.MyTokenizer", None]})])
def test_code_from_another_repository_is_refused_until_pinned(tmp_path, name, auto_map):
    """``org/repo--module.Class`` in an auto_map is code transformers fetches from that hub
    repository's main when a trust_remote_code model loads: no file of the folder is it, so
    its identity did not change when that code did. Refused, saying how to pin it; copied
    into the folder and named there, it is hashed as the folder's own."""
    from biasscope.backends.loading import refuse_remote_code
    from biasscope.core.errors import ModelError

    (tmp_path / name).write_text(json.dumps({"auto_map": auto_map}))
    (tmp_path / "model.safetensors").write_bytes(b"w")
    with pytest.raises(ModelError, match=(
            rf"^{tmp_path / name}: auto_map names org/remote--my_net\.My\w+, code transformers "
            r"fetches from the hub repository org/remote when a model trusted to run its code "
            rf"loads, .*: pin it by copying org/remote's my_net\.py \(and the modules it "
            rf"imports\) into {tmp_path} and writing my_net\.My\w+ for it in auto_map$")):
        refuse_remote_code(tmp_path)
    assert fingerprints.answer_files(tmp_path)  # the files are still listed: no load refused
    pinned = {k: ([e.split("--")[1] if e else e for e in v] if isinstance(v, list)
                  else v.split("--")[1]) for k, v in auto_map.items()}
    (tmp_path / name).write_text(json.dumps({"auto_map": pinned}))
    (tmp_path / "my_net.py").write_text("class MyConfig: ...\n")
    refuse_remote_code(tmp_path)
    assert [p.name for p in fingerprints.answer_files(tmp_path)] == sorted([name, "my_net.py"])


def test_the_tokenizer_key_reads_no_file_twice(checkpoint_dirs, tmp_path, monkeypatch):
    """One tokenizer per byte-identical set of tokenizer files, from the hashes the sweep's
    fingerprints take: each file is read once for both (before, the key read them again)."""
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf_model import tokenizer_key

    folders = [tmp_path / n for n in ("a", "b", "c")]
    for folder in folders:
        shutil.copytree(checkpoint_dirs[0], folder)
    edited = folders[2] / "tokenizer_config.json"
    edited.write_text(edited.read_text() + " ")  # one byte: another tokenizer
    reads: list[str] = []
    real_hash, real_open = fingerprints.file_sha256, Path.open

    def hashing(path: Path, stop: object = None) -> str:
        reads.append(f"{path.parent.name}/{path.name}")
        return real_hash(path, stop)  # type: ignore[arg-type]

    def opening(path: Path, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "b" in mode and path.parent in folders:
            reads.append(f"{path.parent.name}/{path.name}")
        return real_open(path, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(fingerprints, "file_sha256", hashing)
    monkeypatch.setattr(Path, "open", opening)
    digests = FileDigests(tmp_path / "cache.json")
    with fingerprints.shared(digests):
        keys = [tokenizer_key(Checkpoint(f.name, str(f))) for f in folders]
        for folder in folders:  # the identity's fingerprints: already hashed
            fingerprints.start_fingerprint(folder, digests, fingerprints.answer_files)()
    digests.close()
    assert keys[0] == keys[1] != keys[2]
    assert sorted(reads) == sorted(f"{f.name}/{p.name}" for f in folders
                                   for p in fingerprints.answer_files(f))


# --- in a sweep -------------------------------------------------------------------------------

def listing(folder: Path, pattern: str = "*.safetensors") -> str:
    """A checkpoint's fingerprint computed here by hand: the same digest as ever (``*.json``:
    its tokenizer and config files', as a local model's identity holds them)."""
    return sha256_json({f.name: [f.stat().st_size, sha(f)]
                        for f in sorted(folder.glob(pattern))})


def test_new_checkpoints_are_hashed_after_the_run_is_set_up(checkpoint_dirs, winobias_dir,
                                                            tmp_path, monkeypatch):
    """The sweep starts (run.json written, the first checkpoint loading) before any weight file
    (or tokenizer and config file) is read for its fingerprint; each fingerprint still lands in
    run.json, the same digest, the weights read once."""
    import biasscope.dynamics.scoring.sweep as sweep
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFConfig
    from biasscope.probes import load_probe

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "cache.json"))
    hashed: list[str] = []
    real_hash, real_init = fingerprints.file_sha256, sweep.init_run

    def hash_file(path: Path, stop: object = None) -> str:
        hashed.append(f"{path.parent.name}/{path.name}")
        return real_hash(path, stop)  # type: ignore[arg-type]

    seen_at_init: list[list[str]] = []

    def init_run(*args: object, **kwargs: object) -> object:
        out = real_init(*args, **kwargs)  # type: ignore[arg-type]
        seen_at_init.append(list(hashed))
        return out

    monkeypatch.setattr(fingerprints, "file_sha256", hash_file)
    monkeypatch.setattr(sweep, "init_run", init_run)
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    out = tmp_path / "run"
    sweep.run_dynamics(probe, from_dirs(checkpoint_dirs), out, seeds=[0], limit=4,
                       scoring=HFConfig(device="cpu"), quiet=True)
    assert seen_at_init == [[]]
    assert sorted(hashed) == sorted(  # each once
        f"{d.name}/{f.name}" for d in checkpoint_dirs for f in d.iterdir())
    entries = json.loads((out / "run.json").read_text())["checkpoints"]
    assert {Path(e["source"]).name: e["fingerprint"] for e in entries} == {
        d.name: listing(d) for d in checkpoint_dirs}
    assert {Path(e["source"]).name: e["files_fingerprint"] for e in entries} == {
        d.name: listing(d, "*.json") for d in checkpoint_dirs}


def test_a_copy_found_while_sweeping_is_refused_and_not_listed(checkpoint_dirs, winobias_dir,
                                                               tmp_path, monkeypatch, capsys):
    """Two steps of one model holding the same weights: the second is refused when its hash is
    known, before any unit of it is written, and run.json keeps no entry for it."""
    from biasscope.cli.main import main

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "cache.json"))
    train = tmp_path / "train"
    shutil.copytree(checkpoint_dirs[0], train / "checkpoint-100")
    shutil.copytree(checkpoint_dirs[0], train / "checkpoint-200")
    out = tmp_path / "run"
    code = main(["dynamics", "--data-dir", str(winobias_dir), "--out", str(out), "--seeds", "0",
                 "--limit", "4", "--quiet", "--device", "cpu", "--checkpoint-glob",
                 str(train / "checkpoint-*")])
    assert code == 2
    err = capsys.readouterr().err
    assert "same weights" in err and "checkpoint-200" in err
    entries = json.loads((out / "run.json").read_text())["checkpoints"]
    assert [e["step"] for e in entries] == [100]
    assert entries[0]["fingerprint"] == listing(train / "checkpoint-100")
    units = [p.name for p in (out / "records").glob("*.parquet")]
    assert len(units) == 1 and "checkpoint-100" in units[0]
