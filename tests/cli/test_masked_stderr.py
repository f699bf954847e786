"""What the command prints on stderr besides its errors (notes, warnings, a failed request's
text) masks a URL's credentials as the errors do: a server may quote another URL, and a
warning may name a model spec."""

from __future__ import annotations

import sys
import warnings

import pytest

from biasscope.cli.main import main, notes
from biasscope.store.directory import CorruptUnitWarning
from scripted_server import Reply, serve

URL = "http://user:SECRET@host/v1"


def test_notes_and_warnings_print_masked(capsys):
    def shown(message: str, category: type[Warning]) -> None:
        """What Python's ``showwarning`` writes (pytest records warnings, not prints them)."""
        sys.stderr.write(warnings.formatwarning(message, category, __file__, 1))

    with notes():
        print(f"biasscope: note: {URL} is slow", file=sys.stderr)
        shown(f"{URL} answered oddly", CorruptUnitWarning)
        shown(f"{URL} said no", UserWarning)  # not one of ours: Python's format
    err = capsys.readouterr().err
    assert "SECRET" not in err and err.count("http://***@host/v1") == 3, err
    assert "biasscope: note: http://***@host/v1 answered oddly" in err


def test_a_failed_request_quoting_a_url_prints_masked(tmp_path, capsys):
    pytest.importorskip("openai")
    prompts = tmp_path / "in.jsonl"
    prompts.write_text('{"id": "a", "prompt": "Q?"}\n')
    reply = Reply(500, {"error": {"message": f"upstream {URL} is down"}})
    with serve(lambda p, b, n: reply) as server:
        code = main(["generate", "--model", f"openai-compatible:{server.base_url}#m",
                     "--input", str(prompts), "--out", str(tmp_path / "o.jsonl"),
                     "--retries", "0", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 1 and "requests failed" in err and "http://***@host/v1" in err, err
    assert "SECRET" not in err
