"""A call refused before any model loads: the loader patched to count (and fail) its calls,
and the one-line refusal checked with no load made."""

from __future__ import annotations

from typing import Any

import pytest

from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError


def no_loads(monkeypatch: pytest.MonkeyPatch, module: Any, loads: list[str],
             loader: str = "HFRewardModel") -> None:
    """``module``'s model loader (``loader``: a reward model's by default) records each spec
    asked for in ``loads`` and fails."""
    def load(spec: Any, *args: Any, **kwargs: Any) -> Any:
        loads.append(str(spec))
        raise BiasscopeError(f"a model ({spec}) was loaded")

    monkeypatch.setattr(module, loader, load)


def refused(argv: list[str], said: str, loads: list[str],
            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("biasscope: error: ") and said in err[0], err
    assert loads == []
