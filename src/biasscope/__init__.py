"""biasscope: bias and fairness in language models, with token-level precision and statistics.

Every command is one call a notebook can make too: build the job's config and pass it to
the job's entry point, which does everything the command does.

- ``biasscope.dynamics.job.run(DynamicsConfig(...))``: fairness across training checkpoints
  (also ``audit.job``, ``judge.job``, ``sensitivity.job``, ``counterfactual.job``,
  ``intervene.job``, ``compare.job``, ``generate.batch``: one ``run``-like entry each).
- ``BiasCallback`` (a ``transformers.Trainer`` callback), ``evaluate_now`` (one call in a
  plain PyTorch loop) and ``LiveConfig``: fairness measured live, during training.
- ``load_probe(name, data_dir=...)``: a probe's items; ``PROBES`` lists them.
- ``biasscope.jobs.render(run)``: a run's report again, from its records, without a model.

``import biasscope`` stays light: each name is imported when it is first used (pandas and SciPy
with the sweep and the statistics, torch and transformers only when a model is scored), so the
command line starts without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biasscope.core.imports import front

if TYPE_CHECKING:
    from biasscope.backends import GenerateParams, GenerateRequest, Generation, Generator
    from biasscope.backends.cache import ResponseCache
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.generators import load_generator
    from biasscope.core.errors import BiasscopeError, DataError, ModelError
    from biasscope.core.items import Item
    from biasscope.dynamics.live import BiasCallback, LiveConfig, evaluate_now
    from biasscope.dynamics.scoring import run_dynamics
    from biasscope.dynamics.scoring.metrics import dynamics_metrics, jsd_by_parts, jsd_parts
    from biasscope.dynamics.scoring.sweep import sweep
    from biasscope.probes import PROBES, load_probe
    from biasscope.store.directory import RunStore
    from biasscope.store.units import Unit

__version__ = "0.1.0"

#: Where each public name lives.
_HOMES = {
    "GenerateParams": "biasscope.backends", "GenerateRequest": "biasscope.backends",
    "Generation": "biasscope.backends", "Generator": "biasscope.backends",
    "ResponseCache": "biasscope.backends.cache", "Checkpoint": "biasscope.backends.checkpoints",
    "load_generator": "biasscope.backends.generators", "BiasscopeError": "biasscope.core.errors",
    "DataError": "biasscope.core.errors", "ModelError": "biasscope.core.errors",
    "Item": "biasscope.core.items", "BiasCallback": "biasscope.dynamics.live",
    "LiveConfig": "biasscope.dynamics.live", "evaluate_now": "biasscope.dynamics.live",
    "dynamics_metrics": "biasscope.dynamics.scoring.metrics",
    "jsd_by_parts": "biasscope.dynamics.scoring.metrics",
    "jsd_parts": "biasscope.dynamics.scoring.metrics", "run_dynamics": "biasscope.dynamics.scoring",
    "sweep": "biasscope.dynamics.scoring.sweep", "PROBES": "biasscope.probes",
    "load_probe": "biasscope.probes", "RunStore": "biasscope.store.directory",
    "Unit": "biasscope.store.units",
}


#: Old names that still work, for one release, with a warning.
_RENAMED = {"LiveOptions": "LiveConfig"}


if not TYPE_CHECKING:  # each name imported when first named (`biasscope.core.imports.front`)
    __getattr__, __dir__ = front(__name__, _HOMES, _RENAMED)


__all__ = [
    "PROBES",
    "BiasCallback",
    "BiasscopeError",
    "Checkpoint",
    "DataError",
    "GenerateParams",
    "GenerateRequest",
    "Generation",
    "Generator",
    "Item",
    "LiveConfig",
    "ModelError",
    "ResponseCache",
    "RunStore",
    "Unit",
    "__version__",
    "dynamics_metrics",
    "evaluate_now",
    "jsd_by_parts",
    "jsd_parts",
    "load_generator",
    "load_probe",
    "run_dynamics",
    "sweep",
]
