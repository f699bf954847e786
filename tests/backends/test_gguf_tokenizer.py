"""A GGUF file's tokenizer kept alone in the GGUF cache (``tokenizers/<sha256>/``): built from
the file's metadata once (45 s for Gemma 3's 262k tokens), read back from its saved files by
every later call whose converted copy is gone, trusted only whole and of the same file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("gguf")

from biasscope.backends import gguf
from biasscope.core.processes import HOST
from gguf_fixture import write_llama_gguf

TEXTS = ["The doctor said", " A", "B", "hello world"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_llama_gguf(tmp_path_factory.mktemp("ggufs") / "tiny.gguf", letters=True)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gguf, "_headers", {})  # as a new process has them
    return tmp_path / "cache"


def encoded(tokenizer: object) -> list[list[int]]:
    return [tokenizer(t)["input_ids"] for t in TEXTS]  # type: ignore[operator]


def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Readings of a tokenizer from a file's metadata, counted."""
    calls: list[str] = []
    real = gguf._tokenizer

    def reading(path: Path) -> object:
        calls.append(path.name)
        return real(path)

    monkeypatch.setattr(gguf, "_tokenizer", reading)
    return calls


def refuse_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_: object) -> None:
        raise AssertionError("read from the file's metadata")

    monkeypatch.setattr(gguf, "_tokenizer", refused)
    monkeypatch.setattr(gguf, "read_header", refused)
    monkeypatch.setattr(gguf, "_headers", {})


def test_a_tokenizer_read_once_is_read_back_from_the_cache(tiny, _cache, monkeypatch):
    first = gguf.read_tokenizer(tiny)
    sha = gguf.file_sha256(tiny)
    folder = _cache / gguf.TOKENIZERS / sha
    assert (folder / gguf.SAVED_TOKENIZER).is_file() and (folder / "tokenizer.json").is_file()
    assert not (_cache / sha).exists()  # nothing converted
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no scratch
    refuse_metadata(monkeypatch)
    again = gguf.read_tokenizer(tiny)
    assert encoded(again) == encoded(first)
    assert gguf.header(tiny, sha) == {"architecture": "llama", "quantization": "Q8_0",
                                      "name": "biasscope-q8-llama"}


def test_the_same_bytes_elsewhere_read_the_same_saved_tokenizer(tiny, tmp_path, monkeypatch):
    gguf.read_tokenizer(tiny)
    refuse_metadata(monkeypatch)
    copy = shutil.copy(tiny, tmp_path / "elsewhere.gguf")
    assert encoded(gguf.read_tokenizer(copy)) == encoded(gguf.read_tokenizer(tiny))


def test_a_conversion_copies_the_saved_tokenizer_and_keeps_it(tiny, _cache, monkeypatch):
    """The copy's tokenizer files are the saved ones, byte for byte: a judge's key ids read
    from either are the same; a conversion with none saved yet leaves one saved too."""
    from biasscope.backends.checkpoints import from_model

    calls = counted(monkeypatch)
    (ckpt,) = from_model(str(tiny))
    assert calls == ["tiny.gguf"]
    saved = _cache / gguf.TOKENIZERS / ckpt.fingerprint
    names = [p.name for p in sorted(saved.iterdir()) if p.name != gguf.SAVED_TOKENIZER]
    assert names and all((saved / n).read_bytes() == (Path(ckpt.source) / n).read_bytes()
                         for n in names)
    shutil.rmtree(ckpt.source)
    refuse_metadata(monkeypatch)  # the weights alone come from the file now
    monkeypatch.setattr(gguf, "_tokenizer", lambda path: pytest.fail("tokenizer read again"))
    from_model(str(tiny))
    assert (Path(ckpt.source) / gguf.PROVENANCE).is_file()


def test_a_kill_while_saving_leaves_nothing_trusted(tiny, _cache, monkeypatch):
    """A kill mid-write leaves no folder under the file's SHA-256; a dead process's temporary
    folder is removed by the next save of the same file."""
    from transformers import PreTrainedTokenizerBase

    sha = gguf.file_sha256(tiny)

    def killed(self: object, folder: str, **_: object) -> None:
        (Path(folder) / "tokenizer.json").write_text('{"half')
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(PreTrainedTokenizerBase, "save_pretrained", killed)
        with pytest.raises(KeyboardInterrupt):
            gguf.read_tokenizer(tiny)
    parent = _cache / gguf.TOKENIZERS
    assert list(parent.iterdir()) == []
    dead = parent / f".{sha[:16]}-{HOST}~{2**22 + 12345}-abc"  # no such process
    dead.mkdir()
    (dead / "tokenizer.json").write_text('{"half')
    calls = counted(monkeypatch)
    gguf.read_tokenizer(tiny)
    assert calls == ["tiny.gguf"] and [p.name for p in parent.iterdir()] == [sha]


@pytest.mark.parametrize("damage", ["edited", "truncated", "no record", "another file's"])
def test_a_damaged_saved_tokenizer_is_read_again_from_the_file(damage, tiny, _cache,
                                                                tmp_path, monkeypatch):
    first = encoded(gguf.read_tokenizer(tiny))
    sha = gguf.file_sha256(tiny)
    folder = _cache / gguf.TOKENIZERS / sha
    if damage == "edited":  # same size, other bytes
        text = (folder / "tokenizer.json").read_text()
        assert '"<s>"' in text
        (folder / "tokenizer.json").write_text(text.replace('"<s>"', '"<S>"', 1))
    elif damage == "truncated":
        with open(folder / "tokenizer.json", "r+b") as handle:
            handle.truncate(100)
    elif damage == "no record":
        (folder / gguf.SAVED_TOKENIZER).unlink()
    else:  # another GGUF file's folder put under this one's SHA-256
        other = write_llama_gguf(tmp_path / "other.gguf", seed=1, letters=False)
        gguf.read_tokenizer(other)
        shutil.rmtree(folder)
        shutil.copytree(_cache / gguf.TOKENIZERS / gguf.file_sha256(other), folder)
    calls = counted(monkeypatch)
    assert encoded(gguf.read_tokenizer(tiny)) == first and calls == ["tiny.gguf"]
    assert encoded(gguf.read_tokenizer(tiny)) == first and calls == ["tiny.gguf"]  # saved anew


def test_a_cache_that_cannot_be_written_reads_the_metadata_as_before(tiny, tmp_path,
                                                                     monkeypatch):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(blocked))
    calls = counted(monkeypatch)
    first = gguf.read_tokenizer(tiny)
    assert encoded(gguf.read_tokenizer(tiny)) == encoded(first)
    assert calls == ["tiny.gguf", "tiny.gguf"] and blocked.is_file()


def test_a_tokenizer_saved_by_other_converter_versions_is_read_again(tiny, _cache,
                                                                      monkeypatch):
    """transformers or tokenizers upgraded since the tokenizer was saved may read the file's
    metadata otherwise: before, the saved one, keyed by the file's SHA-256 alone, was read
    back under any version."""
    gguf.read_tokenizer(tiny)
    record = _cache / gguf.TOKENIZERS / gguf.file_sha256(tiny) / gguf.SAVED_TOKENIZER
    saved = json.loads(record.read_text())["converters"]
    assert {"transformers", "tokenizers", "gguf"} <= set(saved)
    upgraded = {**saved, "tokenizers": "99.0.0"}
    monkeypatch.setattr(gguf, "_converters", lambda: upgraded)
    calls = counted(monkeypatch)
    gguf.read_tokenizer(tiny)
    assert calls == ["tiny.gguf"] and json.loads(record.read_text())["converters"] == upgraded
    gguf.read_tokenizer(tiny)
    assert calls == ["tiny.gguf"]  # saved anew under the new versions: read back
