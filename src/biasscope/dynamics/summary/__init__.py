"""Dynamics, step 3: a run's summary.json from its records, and its report rendered from it."""

from biasscope.dynamics.summary.write import write_dynamics_report

__all__ = ["write_dynamics_report"]
