"""The CLI run as a user who made a mistake: one line on stderr, no traceback, non-zero exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from biasscope.cli.main import main


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int | None = None) -> str:
    """Run the CLI expecting a user error (exit ``code`` where given, else any but 0): its
    single stderr line. argparse's own errors exit through SystemExit, caught here."""
    capsys.readouterr()
    try:
        got = main(argv)
    except SystemExit as exc:
        got = exc.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert (got == code) if code is not None else got not in (0, None), err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def own_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's own caches and no data folder of the user's: a user error is said the same
    whatever the machine holds."""
    monkeypatch.delenv("BIASSCOPE_DATA_DIR", raising=False)
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BIASSCOPE_RESPONSE_CACHE", str(tmp_path / "responses.sqlite"))
