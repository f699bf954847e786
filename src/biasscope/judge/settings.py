"""The settings of ``biasscope judge`` and ``biasscope judge-audit`` (`JudgeConfig`), apart
from the run code in `biasscope.judge.job` (which re-exports it): the commands' flags are built
from it, so their ``--help`` imports no pandas and no judge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biasscope.backends.config import BackendConfig
from biasscope.core.config import POSITIVE_INT, SEED, check_settings, described, setting
from biasscope.store.directory import run_dir


@dataclass(frozen=True)
class JudgeConfig:
    """``models``: judge specs, or NAME=SPEC; ``keys``: the neutral answer keys, one
    character each (``ABCD``) or a comma list (``1,2,3``)."""

    out: str | Path = field(metadata=described("run directory", parse=run_dir))
    models: Sequence[str] = field(metadata=described(
        "judge model spec (see `biasscope generate`), or NAME=SPEC to label it NAME; repeat "
        "for several", flag="--model", many=True))
    input: str = field(metadata=described(
        "JSONL of {id, text} (with --labels) or {id, prompt, a, b[, model_a, model_b]}"))
    labels: str | None = setting(None, "JSON object of label name: description")
    position: str = setting("shuffle", "how the answers' order is controlled",
                            choices=("shuffle", "consensus", "permute", "fixed"))
    samples: int | None = setting(None, "permute: seeded orders (default: all)",
                                  check=POSITIVE_INT)
    reasoning: bool = setting(False, "chain of thought first")
    keys: str = setting("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "neutral answer keys, e.g. ABCD or 1,2,3")
    logit_bias: bool = setting(True, "no logit bias toward the answer keys",
                               flag="--no-logit-bias")
    aggregate: str = setting("mean", "several judges: mean probabilities or majority vote",
                             choices=("mean", "majority"))
    seed: int = setting(0, "the seed of the answers' orders", check=SEED)
    ranking: str = setting("win-rate", "score of the judged systems' leaderboards",
                           choices=("win-rate", "bradley-terry"))
    backend: BackendConfig = field(default_factory=BackendConfig)
    #: The summary's levels given (``confidence``, ``n_resamples``: `biasscope.core.levels`);
    #: those not given stay as the run's summary.json stored them, then the defaults.
    analysis: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_settings(self)
