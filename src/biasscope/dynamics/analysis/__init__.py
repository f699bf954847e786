"""Dynamics, step 2: the statistics over stored records, and the settings that choose them."""

from typing import TYPE_CHECKING

from biasscope.core.renamed import renamed
from biasscope.dynamics.analysis.config import AnalysisConfig

__all__ = ["AnalysisConfig"]


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"AnalysisOptions": "AnalysisConfig"}, globals().__getitem__)
