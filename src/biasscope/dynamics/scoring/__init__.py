"""Dynamics, step 1: checkpoints x probes x seeds scored into a run directory's records.

The names here are the step's public entry, what another job (``intervene``, the demo) builds
on; the modules beside it are its parts. They are imported when first named, so that the
analysis, which reads ``units`` beside them, does not import the sweep (its backends and
progress display) to write a report.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from biasscope.dynamics.scoring.models import list_checkpoints
    from biasscope.dynamics.scoring.runfile import init_run
    from biasscope.dynamics.scoring.sweep import hf_comparable, hf_scorers, run_dynamics
    from biasscope.dynamics.scoring.units import SweepConfig, unit_items, unit_of

#: Each public name -> its module.
_HOMES = {"list_checkpoints": "models", "init_run": "runfile", "hf_comparable": "sweep",
          "hf_scorers": "sweep", "run_dynamics": "sweep", "SweepConfig": "units",
          "unit_items": "units", "unit_of": "units"}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value  # imported once
    return value


# (`sweep.sweep`, the loop itself, is not named here: it would hide its module, ``sweep``.)
__all__ = ["SweepConfig", "hf_comparable", "hf_scorers", "init_run", "list_checkpoints",
           "run_dynamics", "unit_items", "unit_of"]
