"""The intervention lab: fine-tune a model with and without a debiasing intervention, watch
bias move live in both arms, and say whether this run of the intervention beat the control's,
at what perplexity cost, and which checkpoint to ship (``biasscope intervene``)."""

from biasscope.intervene.job import InterveneConfig, InterveneResult, render, report, run
from biasscope.intervene.methods import CDA, METHODS, DropGendered, Intervention
from biasscope.intervene.train import Training

__all__ = ["CDA", "METHODS", "DropGendered", "InterveneConfig", "InterveneResult",
           "Intervention", "Training", "render", "report", "run"]
