"""biasscope: bias and fairness in language models, with token-level precision and statistics.

Every command is one call a notebook can make too: build the job's config and pass it to
the job's entry point, which does everything the command does.

- ``biasscope.dynamics.job.run(DynamicsConfig(...))``: fairness across training checkpoints
  (also ``audit.job``, ``judge.job``, ``sensitivity.job``, ``counterfactual.job``,
  ``intervene.job``, ``compare.job``, ``generate.batch``: one ``run``-like entry each).
- ``BiasCallback`` (a ``transformers.Trainer`` callback), ``evaluate_now`` (one call in a
  plain PyTorch loop) and ``LiveOptions``: fairness measured live, during training.
- ``load_probe(name, data_dir=...)``: a probe's items; ``PROBES`` lists them.
- ``biasscope.jobs.render(run)``: a run's report again, from its records, without a model.

``import biasscope`` stays light: torch and transformers load only when a model is scored
(``BiasCallback``, ``LiveOptions`` and ``evaluate_now`` are imported when first used).
"""

from biasscope.backends import GenerateParams, GenerateRequest, Generation, Generator
from biasscope.backends.cache import ResponseCache
from biasscope.backends.checkpoints import Checkpoint
from biasscope.backends.generators import load_generator
from biasscope.core.errors import BiasscopeError, DataError, ModelError
from biasscope.core.items import Item
from biasscope.dynamics.metrics import dynamics_metrics, jsd_by_parts, jsd_parts
from biasscope.dynamics.sweep import run_dynamics, sweep
from biasscope.probes import PROBES, load_probe
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit

__version__ = "0.1.0"


_LAZY = ("BiasCallback", "LiveOptions", "evaluate_now")


def __dir__() -> list[str]:
    # The lazy names too, so that help(biasscope) and tab completion list them.
    return sorted({*globals(), *_LAZY})


def __getattr__(name: str) -> object:
    # The live-training pieces need transformers; load them only when asked for.
    if name == "BiasCallback":
        from biasscope.dynamics.callback import BiasCallback
        return BiasCallback
    if name in ("LiveOptions", "evaluate_now"):
        from biasscope.dynamics import live
        return getattr(live, name)
    raise AttributeError(f"module 'biasscope' has no attribute {name!r}")


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
    "LiveOptions",
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
