"""Dynamics, step 2: the statistics over stored records, and the settings that choose them."""

from biasscope.dynamics.analysis.options import AnalysisOptions

__all__ = ["AnalysisOptions"]
