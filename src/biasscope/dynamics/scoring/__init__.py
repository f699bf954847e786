"""Dynamics, step 1: checkpoints x probes x seeds scored into a run directory's records.

The names here are the step's public entry, what another job (``intervene``, the demo) builds
on; the modules beside it are its parts.
"""

from biasscope.dynamics.scoring.models import list_checkpoints
from biasscope.dynamics.scoring.runfile import init_run
from biasscope.dynamics.scoring.sweep import hf_comparable, hf_scorers, run_dynamics
from biasscope.dynamics.scoring.units import SweepConfig, unit_items, unit_of

# (`sweep.sweep`, the loop itself, is not named here: it would hide its module, ``sweep``.)
__all__ = ["SweepConfig", "hf_comparable", "hf_scorers", "init_run", "list_checkpoints",
           "run_dynamics", "unit_items", "unit_of"]
