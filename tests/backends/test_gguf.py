"""GGUF checkpoints: converted once into the SHA-256-keyed cache, scored like any checkpoint."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")

from biasscope.backends import gguf as gguf_cache  # noqa: E402
from biasscope.backends.base import GenerateRequest  # noqa: E402
from biasscope.backends.checkpoints import from_glob, from_model  # noqa: E402
from biasscope.backends.generators import load_generator  # noqa: E402
from biasscope.backends.hf import iter_scorers  # noqa: E402
from biasscope.backends.hf_model import HFConfig  # noqa: E402
from biasscope.core.errors import ModelError  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402
from gguf_fixture import write_llama_gguf, write_unsupported_gguf  # noqa: E402


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gguf-cache")


@pytest.fixture(autouse=True)
def _cache_env(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(cache))


@pytest.fixture(scope="module")
def q8_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_llama_gguf(tmp_path_factory.mktemp("ggufs") / "tiny-step100.gguf")


def test_converted_scores_match_the_gguf_loaded_directly(q8_file, cache, winobias_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    (ckpt,) = from_model(str(q8_file))
    digest = hashlib.sha256(q8_file.read_bytes()).hexdigest()
    assert Path(ckpt.source) == cache / digest and ckpt.identity == str(q8_file.resolve())
    assert (ckpt.model, ckpt.step) == ("tiny-step100", 100)
    made = ckpt.as_dict()["gguf"]
    assert made["sha256"] == digest and made["path"] == str(q8_file.resolve())
    assert (made["quantization"], made["architecture"]) == ("Q8_0", "llama")
    config = (Path(ckpt.source) / "config.json").read_text()
    assert "quantization_config" not in config

    items = load_probe("winobias-gender", data_dir=winobias_dir).items(0)[:24]
    (scorer,) = list(iter_scorers([ckpt], HFConfig(batch_size=5, first_token=True)))
    scores = scorer.score_next_token(items)
    folder, name = str(q8_file.parent), q8_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    for item, score in zip(items, scores):
        ids = torch.tensor([tokenizer(item.prompt)["input_ids"]])
        with torch.inference_mode():
            logprobs = torch.log_softmax(model(ids).logits[0, -1].double(), -1)
        options = [tokenizer(c, add_special_tokens=False)["input_ids"][0]
                   for c in item.continuations]
        assert score.option_logprobs == pytest.approx(logprobs[options].tolist(), abs=1e-4)


def test_a_second_load_reads_the_cache(q8_file, tmp_path, monkeypatch):
    (first,) = from_model(str(q8_file))

    def refuse(*args: object) -> None:
        raise AssertionError("converted again")

    monkeypatch.setattr(gguf_cache, "_convert", refuse)
    copy = tmp_path / "elsewhere.gguf"
    shutil.copy(q8_file, copy)
    (again,) = from_model(str(copy))  # same bytes at another path: the same cache entry
    assert again.source == first.source and again.identity != first.identity
    generator = load_generator(f"hf:{copy}")
    identity = generator.identity()
    assert identity["gguf_quantization"] == "Q8_0" and identity["gguf_file"] == str(copy)
    # The file's SHA-256 covers the tokenizer and chat template it holds: nothing else hashed.
    assert "fingerprint" not in identity and "files_fingerprint" not in identity


def test_checkpoint_glob_takes_gguf_files_in_step_order(q8_file, tmp_path):
    run = tmp_path / "ckpts"
    run.mkdir()
    for step in (200, 50):
        shutil.copy(q8_file, run / f"step{step}.gguf")
    found = from_glob(str(run / "*.gguf"))
    assert [(c.model, c.revision, c.step) for c in found] == [("ckpts", "step50", 50),
                                                              ("ckpts", "step200", 200)]
    assert all(c.as_dict()["gguf"]["quantization"] == "Q8_0" for c in found)


def test_unsupported_architecture_is_one_line_naming_it(tmp_path):
    path = write_unsupported_gguf(tmp_path / "rwkv.gguf")
    with pytest.raises(ModelError) as err:
        from_model(str(path))
    message = str(err.value)
    assert "'rwkv6'" in message and "llama" in message and "gemma3" in message
    assert "\n" not in message
    assert not any(gguf_cache.cache_root().glob(".*"))  # no scratch left behind


def test_corrupt_file_is_one_line_on_the_command_line(tmp_path, winobias_dir, cache):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all" * 100)
    done = subprocess.run(
        [sys.executable, "-m", "biasscope", "dynamics", "--model", str(bad),
         "--probe", "winobias-gender", "--data-dir", str(winobias_dir),
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "BIASSCOPE_GGUF_CACHE": str(cache)})
    assert done.returncode != 0
    assert "broken.gguf is not a readable GGUF file" in done.stderr
    assert "copy or download it again" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_an_interrupted_conversion_leaves_no_cache(tmp_path, monkeypatch):
    path = write_llama_gguf(tmp_path / "other.gguf", seed=1)

    def interrupted(source: Path, header: object, out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(gguf_cache, "_convert", interrupted)
    with pytest.raises(KeyboardInterrupt):
        from_model(str(path))
    digest = gguf_cache.file_sha256(path)
    root = gguf_cache.cache_root()
    assert not (root / digest).exists() and not any(root.glob(".*"))


def test_single_token_options_take_one_forward_with_the_same_scores(q8_file):
    generator = load_generator(f"hf:{q8_file}")
    request = GenerateRequest(messages=(("user", "The doctor said"),), id="r")
    single = ["A", "B"]
    assert all(len(generator.tokenizer(o, add_special_tokens=False)["input_ids"]) == 1
               for o in single)
    fast, _ = generator.option_logprobs(request, single)
    general, _ = generator.option_logprobs(request, [*single, " doctor nurse"])
    assert [fast[o] for o in single] == pytest.approx([general[o] for o in single], abs=1e-5)


def test_a_file_replaced_in_place_with_its_size_and_mtime_is_hashed_again(tmp_path,
                                                                          monkeypatch):
    """`file_sha256` kept a hash against path, size and mtime: another file of the same size
    renamed over it with the old mtime, or bytes written into it and the mtime put back, kept
    the old file's SHA-256 (and so its cache copy and saved tokenizer)."""
    from biasscope.backends.fingerprints import FileDigests

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    path = write_llama_gguf(tmp_path / "model.gguf", seed=0)
    other = write_llama_gguf(tmp_path / "other.gguf", seed=1)
    renamed = write_llama_gguf(tmp_path / "renamed.gguf", seed=2)
    assert path.stat().st_size == other.stat().st_size == renamed.stat().st_size
    mtime = path.stat().st_mtime_ns
    time.sleep(0.25)  # settled: a later write must change its ctime
    first = gguf_cache.file_sha256(path)
    assert FileDigests().cached(path) == (path.stat().st_size, first)  # kept

    path.write_bytes(other.read_bytes())  # the same inode, other bytes
    os.utime(path, ns=(mtime, mtime))
    assert gguf_cache.file_sha256(path) == gguf_cache.file_sha256(other) != first

    os.utime(renamed, ns=(mtime, mtime))
    os.replace(renamed, path)  # another inode
    assert gguf_cache.file_sha256(path) not in (first, gguf_cache.file_sha256(other))


def test_a_files_sha256_is_kept_across_processes_until_it_changes(tmp_path, monkeypatch):
    """Every process hashed a GGUF file again (0.2 s for Gemma 3 270M, seconds for a 7B): its
    SHA-256 is kept in the fingerprints' cache, as a weight file's is, and read back while the
    file's size, mtime and inode are unchanged; a file written anew with its size kept but a
    new mtime is hashed again."""
    from biasscope.backends import fingerprints

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    path = write_llama_gguf(tmp_path / "model.gguf", seed=0)
    other = write_llama_gguf(tmp_path / "other.gguf", seed=1)
    time.sleep(0.25)  # settled: cached
    first = gguf_cache.file_sha256(path)
    hashed: list[Path] = []
    real = fingerprints.file_sha256

    def counted(file: Path, *args: object) -> str:
        hashed.append(Path(file))
        return real(file, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(fingerprints, "file_sha256", counted)
    assert gguf_cache.file_sha256(path) == first and hashed == []  # another process's call
    path.write_bytes(other.read_bytes())  # the same size, a new mtime
    assert gguf_cache.file_sha256(path) == hashlib.sha256(other.read_bytes()).hexdigest()
    assert hashed == [path.resolve()]


def test_a_gguf_file_hashed_alone_is_named_as_hashed_not_as_loading(tmp_path, monkeypatch,
                                                                   capsys):
    """A GGUF file is hashed before anything loads (its converted copy is named by it): the
    line said "while it loads"; and a path given as text is hashed as a Path is."""
    from biasscope.core import steps

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    monkeypatch.setattr(steps, "LARGE_FILE", 1)
    path = write_llama_gguf(tmp_path / "model.gguf", seed=0)
    assert gguf_cache.file_sha256(str(path)) == hashlib.sha256(path.read_bytes()).hexdigest()
    said = capsys.readouterr().err
    assert f"hashing {path.resolve()} (" in said and "while it loads" not in said
