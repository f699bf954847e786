"""A server's address as a careless user gives it (seen against a real llama.cpp server): a
port nothing listens on, a URL without its scheme or with a pasted space. Each is one line
that says what is wrong with the address, before anything is written."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from biasscope.backends.generators import GeneratorConfig, load_generator
from biasscope.cli.main import main
from scripted_server import Reply, chat, serve
from user_error import one_line


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BIASSCOPE_RESPONSE_CACHE", str(tmp_path / "responses.sqlite"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"id": "j0", "prompt": "2+2?", "a": "4", "b": "5"}) + "\n")
    return path


@pytest.mark.parametrize("command", ["judge", "judge-audit"])
def test_a_judge_on_a_port_nothing_listens_on_says_the_server_cannot_be_reached(
        command, tmp_path, capsys):
    """Before: a judge tokenizes its keys first, and said "the server's tokenizer did not
    answer in 6 attempts (... Connection refused); raise --timeout or --retries, or run when
    the server is less busy", after half a minute of retries."""
    out = tmp_path / "run"
    started = time.monotonic()
    line = one_line(capsys, [command, "--model", "openai-compatible:m", "--base-url",
                             f"http://127.0.0.1:{_closed_port()}/v1", "--input",
                             str(_pairs(tmp_path)), "--out", str(out)])
    assert "cannot reach http://127.0.0.1:" in line and "start the server or fix the base " \
           "URL" in line and "tokenizer" not in line
    assert time.monotonic() - started < 10 and not out.exists()


@pytest.mark.parametrize(("url", "said"), [
    ("127.0.0.1:8080/v1", "--base-url '127.0.0.1:8080/v1' has no scheme: write "
                          "http://127.0.0.1:8080/v1"),
    ("localhost:8080/v1", "has no scheme: write http://localhost:8080/v1"),
    ("htp://127.0.0.1:8080/v1", "is not an http(s) URL: write it as http://HOST:PORT/v1"),
    ("http://127.0.0.1:99999/v1", "is not a server URL (Port out of range"),
    ("http://127.0.0.1:8080/v 1", "holds a space or control character: give the URL alone"),
])
def test_a_base_url_that_is_no_http_url_is_refused_naming_the_flag(url, said, tmp_path,
                                                                    capsys):
    """Before: "unknown url type: 127.0.0.1" in a line that said to raise --timeout, or an
    ``InvalidURL`` traceback for a space."""
    out = tmp_path / "run"
    line = one_line(capsys, ["judge", "--model", "openai-compatible:m", "--base-url", url,
                             "--input", str(_pairs(tmp_path)), "--out", str(out)])
    assert said in line and not out.exists()


def test_a_spec_or_environment_url_is_named_as_where_it_came_from(monkeypatch):
    from biasscope.core.errors import ModelError

    with pytest.raises(ModelError, match=r"the URL of openai-compatible:htp://x/v1#m 'htp://x"):
        load_generator("openai-compatible:htp://x/v1#m")
    monkeypatch.setenv("OPENAI_BASE_URL", "127.0.0.1:8080/v1")
    with pytest.raises(ModelError, match=r"\$OPENAI_BASE_URL '127.0.0.1:8080/v1' has no "):
        load_generator("openai-compatible:m")


def test_whitespace_around_a_base_url_is_dropped(tmp_path, capsys, monkeypatch):
    """A URL pasted with its newline, or quoted with a space, asks the server it names (before:
    an ``InvalidURL`` traceback from the tokenizer's request for ``/v1 /extras/tokenize``), and
    is recorded without it."""
    with serve(lambda path, body, n: Reply(body=chat("A"))) as server:
        gen = load_generator("openai-compatible:m",
                             GeneratorConfig(base_url=f" {server.base_url}\n"))
        assert gen.identity()["base_url"] == server.base_url  # type: ignore[attr-defined]
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url + "\r\n")
        out = tmp_path / "run"
        assert main(["judge", "--model", "openai-compatible:m", "--input",
                     str(_pairs(tmp_path)), "--out", str(out)]) == 0, capsys.readouterr().err
    recorded = json.loads((out / "run.json").read_text())["settings"]["judges"]
    assert recorded["openai-compatible:m"]["base_url"] == server.base_url
