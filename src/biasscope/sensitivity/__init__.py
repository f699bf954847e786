"""Constitutional sensitivity of reward models: perturb by critique and revision, score,
and compare principles, groups and models.

The names below are what another job (the counterfactual check) builds on.
"""

from biasscope.sensitivity.harness import reward_settings
from biasscope.sensitivity.job import RewardScoring
from biasscope.sensitivity.perturb import query
from biasscope.sensitivity.prompts import PathLike, Turns, hh_count
from biasscope.sensitivity.sanity import read_hh_pairs

__all__ = ["PathLike", "RewardScoring", "Turns", "hh_count", "query",
           "read_hh_pairs", "reward_settings"]
