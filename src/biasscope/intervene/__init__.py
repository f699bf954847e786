"""The intervention lab: fine-tune a model with and without a debiasing intervention, watch
bias move live in both arms, and say whether this run of the intervention beat the control's
(with ``--runs N``, whether the intervention did), at what perplexity cost, and which
checkpoint to ship (``biasscope intervene``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from biasscope.core.imports import front

if TYPE_CHECKING:
    from biasscope.intervene.job import InterveneResult, render, report, run
    from biasscope.intervene.methods import CDA, METHODS, DropGendered, Intervention
    from biasscope.intervene.settings import (
        InterveneConfig,
        InterventionAnalysisConfig,
        Training,
    )

#: Each public name -> the module it comes from: imported when first named, so that
#: ``biasscope intervene --help`` reads the settings (`biasscope.intervene.settings`) alone.
_HOMES = {**dict.fromkeys(("InterveneResult", "render", "report", "run"),
                          "biasscope.intervene.job"),
          **dict.fromkeys(("CDA", "METHODS", "DropGendered", "Intervention"),
                          "biasscope.intervene.methods"),
          **dict.fromkeys(("InterveneConfig", "InterventionAnalysisConfig", "Training"),
                          "biasscope.intervene.settings")}

if not TYPE_CHECKING:
    __getattr__, __dir__ = front(__name__, _HOMES)

__all__ = ["CDA", "METHODS", "DropGendered", "InterveneConfig", "InterveneResult",
           "Intervention", "InterventionAnalysisConfig", "Training", "render", "report", "run"]
