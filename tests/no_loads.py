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


def loads_counted(monkeypatch: pytest.MonkeyPatch, module: Any, fail: bool = False,
                  loader: str = "load_model") -> list[str]:
    """``module``'s ``loader`` (``load_model``, or a reward model's ``_load_classifier``)
    records each checkpoint it loads, by source, and loads it (``fail``: fails instead): a
    rerun with every unit stored must leave the list empty. Counted again, it loads with the
    loader itself, not the count before."""
    load = getattr(module, loader)
    load = getattr(load, "counts", load)
    loads: list[str] = []

    def counted(ckpt: Any, config: Any) -> Any:
        loads.append(str(ckpt.source))
        if fail:
            raise BiasscopeError(f"{ckpt.source} was loaded")
        return load(ckpt, config)

    counted.counts = load  # type: ignore[attr-defined]
    monkeypatch.setattr(module, loader, counted)
    return loads


def refused(argv: list[str], said: str, loads: list[str],
            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("biasscope: error: ") and said in err[0], err
    assert loads == []
