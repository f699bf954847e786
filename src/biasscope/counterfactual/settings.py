"""The settings of ``biasscope counterfactual`` (`CounterfactualConfig`), apart from the run
code in `biasscope.counterfactual.job` (which re-exports it): the command's flags are built
from it, so its ``--help`` imports no pandas, no reward model and no judge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biasscope.backends.config import BackendConfig
from biasscope.core.config import SEED, check_settings, described, setting
from biasscope.data.sources import DATA_DIR_HELP
from biasscope.sensitivity import RewardScoring
from biasscope.store.directory import run_dir


@dataclass(frozen=True)
class CounterfactualConfig:
    """``pairs``: hh-rlhf:harmless-base:N or a JSONL file (``counterfactual.scorers``);
    ``reward_models``: specs or NAME=SPEC; ``judges``: generate specs, asked pairwise, or
    with ``labels`` (a JSON file of name: description) as a classifier. ``analysis`` holds
    the summary's levels given (``confidence``, ``n_resamples``: `biasscope.core.levels`);
    those not given stay as the run's summary.json stored them, then the defaults."""

    out: str | Path = field(metadata=described("run directory", parse=run_dir))
    reward_models: Sequence[str] = setting((), "as in `sensitivity`; repeat",
                                           flag="--reward-model", many=True)
    judges: Sequence[str] = setting((), "as in `judge --model`; repeat", flag="--judge-model",
                                    many=True)
    pairs: str = setting("hh-rlhf:harmless-base:200", "hh-rlhf:harmless-base:N, or a JSONL "
                         "file of pairs (docs/judging.md)")
    labels: str | None = setting(None, "judge as a classifier: JSON of label name: description")
    position: str = setting("shuffle", "how the judge's answer order is controlled",
                            choices=("shuffle", "consensus", "permute", "fixed"))
    seed: int = setting(0, "the seed of the answers' orders", check=SEED)
    data_dir: str | None = setting(None, DATA_DIR_HELP)
    reward: RewardScoring = field(default_factory=RewardScoring)
    backend: BackendConfig = field(default_factory=BackendConfig)
    analysis: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_settings(self)
        # a dtype or batch size given to `RewardScoring` the old way: one setting, the backend's
        object.__setattr__(self, "backend", self.reward.merged(self.backend))
