"""A server's address as a careless user gives it (seen against a real llama.cpp server): a
port nothing listens on. Each is one line that says what is wrong with the address, before
anything is written."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from biasscope.cli.main import main


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BIASSCOPE_RESPONSE_CACHE", str(tmp_path / "responses.sqlite"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI expecting a user error: its single stderr line."""
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code not in (0, None), err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


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
