"""A response cache that cannot be opened, read or written (garbage bytes, pages corrupt past
a sound header, a directory in its place, a full disk) is one line naming the file and what to
do, never a traceback; and the answers it already holds stay in it."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from biasscope.backends.base import GenerateParams
from biasscope.backends.cache import ResponseCache
from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.generate.batch import generate_file
from fakes import PromptEcho


def prompts(tmp_path: Path, n: int = 3, size: int = 10) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": i, "prompt": f"p{i}" + "x" * size}) + "\n"
                            for i in range(n)))
    return path


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def directory(path: Path) -> None:
    path.mkdir()


def corrupt_pages(path: Path) -> None:
    """A sound header and schema over pages of garbage: it opens, and fails when read."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, generation TEXT NOT NULL)")
    db.executemany("INSERT INTO responses VALUES (?, ?)",
                   [(f"k{i:05d}", "x" * 300) for i in range(2000)])
    db.commit()
    db.close()
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(4096 * 3)
        f.write(os.urandom(size - 4096 * 3))


@pytest.mark.parametrize(("make", "advice"), [
    (garbage, "delete it"), (corrupt_pages, "delete it"),
    (directory, "is a directory: pass a file with --cache")])
def test_a_broken_cache_file_is_one_line(make, advice, tmp_path, capsys):
    cache = tmp_path / "cache.sqlite"
    make(cache)
    code = main(["generate", "--model", "canned:A", "--input", str(prompts(tmp_path)),
                 "--out", str(tmp_path / "out.jsonl"), "--cache", str(cache)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("biasscope: error: response cache ") and str(cache) in err, err
    assert advice in err and "--no-cache" in err, err
    assert not (tmp_path / "out.jsonl").exists()


def test_a_cache_that_cannot_be_written_is_one_line_and_keeps_what_it_holds(tmp_path):
    """A full disk mid-run: the answers cached before stay cached, and the line says so."""
    path = tmp_path / "cache.sqlite"
    source = prompts(tmp_path, n=2)
    cache = ResponseCache(path)
    generate_file(PromptEcho(), source, tmp_path / "a.jsonl", GenerateParams(), cache)
    assert len(cache) == 2
    # No page more: the file's size stands for a disk with no space left.
    pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
    cache._db.execute(f"PRAGMA max_page_count={pages}")
    bigger = prompts(tmp_path, n=40, size=20_000)
    with pytest.raises(BiasscopeError) as caught:
        generate_file(PromptEcho(), bigger, tmp_path / "b.jsonl", GenerateParams(), cache)
    message = str(caught.value)
    assert str(path) in message and "full" in message and "--cache" in message, message
    assert "kept" in message and "\n" not in message, message
    cache.close()
    assert len(ResponseCache(path)) == 2  # what was cached is still there


@pytest.mark.parametrize("row", [
    '{"text": "half an ans', "[1, 2]", "null", '{"text": 5, "tokens": null}',
    '{"text": "a", "tokens": [{"token": "a"}]}',
    '{"text": "a", "tokens": [{"token": "a", "logprob": "high", "top": []}]}',
    '{"text": "a", "tokens": null, "surprise": 1}',
    '{"text": "", "tokens": null, "error": "boom"}',  # a failure is never an answer
])
def test_a_broken_row_is_a_miss_asked_again_and_overwritten(row, tmp_path):
    """One row a crash or another tool broke holds no answer; the others still do."""
    path = tmp_path / "cache.sqlite"
    source = prompts(tmp_path, n=2)
    generate_file(PromptEcho(), source, tmp_path / "a.jsonl", GenerateParams(),
                  ResponseCache(path))
    db = sqlite3.connect(path)
    [(key, kept)] = db.execute("SELECT key, generation FROM responses LIMIT 1").fetchall()
    db.execute("UPDATE responses SET generation = ? WHERE key = ?", (row, key))
    db.commit()
    db.close()
    cache = ResponseCache(path)
    assert key not in cache.get_many([key])
    usage, _ = generate_file(PromptEcho(), source, tmp_path / "b.jsonl", GenerateParams(),
                             cache)
    assert (usage.sent, usage.cached) == (1, 1)
    def texts(name: str) -> list[str]:
        return [json.loads(line)["text"] for line in (tmp_path / name).read_text().splitlines()]
    assert texts("a.jsonl") == texts("b.jsonl") == ["p0xxxxxxxxxx", "p1xxxxxxxxxx"]
    assert json.loads(cache._db.execute("SELECT generation FROM responses WHERE key = ?",
                                        (key,)).fetchone()[0]) == json.loads(kept)
