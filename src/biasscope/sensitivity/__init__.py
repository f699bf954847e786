"""Constitutional sensitivity of reward models: perturb by critique and revision, score,
and compare principles, groups and models.

The names below are what another job (the counterfactual check) builds on. They are imported
when first named (`biasscope.core.imports.front`), so that a command's ``--help`` reads
`RewardScoring` (`biasscope.sensitivity.settings`) without the harness and its readers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biasscope.core.imports import front

if TYPE_CHECKING:
    from biasscope.sensitivity.harness import reward_settings
    from biasscope.sensitivity.perturb import query
    from biasscope.sensitivity.prompts import PathLike, Turns, hh_count
    from biasscope.sensitivity.sanity import read_hh_pairs
    from biasscope.sensitivity.settings import RewardScoring

#: Each public name -> the module it comes from.
_HOMES = {"reward_settings": "biasscope.sensitivity.harness",
          "RewardScoring": "biasscope.sensitivity.settings",
          "query": "biasscope.sensitivity.perturb",
          **dict.fromkeys(("PathLike", "Turns", "hh_count"), "biasscope.sensitivity.prompts"),
          "read_hh_pairs": "biasscope.sensitivity.sanity"}

if not TYPE_CHECKING:
    __getattr__, __dir__ = front(__name__, _HOMES)

__all__ = ["PathLike", "RewardScoring", "Turns", "hh_count", "query",
           "read_hh_pairs", "reward_settings"]
