"""The settings of ``biasscope sensitivity`` (`SensitivityConfig`, `RewardScoring`) and the
checks of their values, apart from the run code in `biasscope.sensitivity.job` (which
re-exports them): the command's flags are built from these, so its ``--help`` imports no
pandas, no reward model and no data reader."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field, replace
from pathlib import Path
from typing import Any

from biasscope.backends.config import BackendConfig
from biasscope.backends.reward_config import RewardConfig
from biasscope.core.config import (
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    PROBABILITY,
    SEED,
    check_settings,
    described,
    same_setting,
    setting,
)
from biasscope.core.errors import BiasscopeError
from biasscope.data.sources import DATA_DIR_HELP
from biasscope.store.directory import run_dir


def directions(text: str) -> tuple[str, ...]:
    """``toward``, ``away`` or ``both``."""
    if text not in ("toward", "away", "both"):
        raise BiasscopeError(f"--direction {text!r}: give toward, away or both")
    return ("toward", "away") if text == "both" else (text,)


def line_range(text: str) -> tuple[int, int]:
    """``FIRST-LAST`` (line numbers from 1, both included), or a one-line error."""
    first, sep, last = text.partition("-")
    if not (sep and first.strip().isdigit() and last.strip().isdigit()
            and 1 <= int(first) <= int(last)):
        raise BiasscopeError(f"--sanity-lines {text}: write FIRST-LAST, e.g. 1-1000 (line "
                             "numbers of the hh-rlhf test file, from 1, first <= last)")
    return int(first), int(last)


#: The help of ``--dtype`` and ``--batch-size`` of ``sensitivity`` and ``counterfactual``:
#: `BackendConfig`'s settings, one for every local model of the command.
LOCAL_HELP = {"dtype": "local models' dtype: the reward models', and a local (hf:) judge's or "
                       "perturber's",
              "batch_size": "conversations (or a local judge's or perturber's prompts) per "
                            "forward pass"}


@dataclass(frozen=True)
class RewardScoring:
    """How the reward models read a conversation: the flags of the `RewardConfig` settings
    the command sets, declared there once. Device, dtype, batch size and pickles are
    `BackendConfig`'s, one setting for every local model of the command (reward models,
    judges, perturber): ``dtype`` and ``batch_size`` here were a second one, which a notebook
    could set apart from the other, making a run the command line cannot; they still work
    for one release, with a warning, and are moved to the command's `BackendConfig`."""

    transform: str = same_setting(RewardConfig, "transform")
    chat_template: bool = same_setting(RewardConfig, "chat_template")
    dtype: InitVar[str | None] = None
    batch_size: InitVar[int | None] = None

    def __post_init__(self, dtype: str | None, batch_size: int | None) -> None:
        check_settings(self)
        moved: dict[str, Any] = {k: v for k, v in (("dtype", dtype),
                                                   ("batch_size", batch_size)) if v is not None}
        if moved:
            warnings.warn(f"RewardScoring({', '.join(f'{k}=…' for k in moved)}) is now "
                          f"backend=BackendConfig({', '.join(f'{k}=…' for k in moved)}), one "
                          "setting for every local model of the command; the old keywords go "
                          "in the next release", DeprecationWarning, stacklevel=3)
            checked = BackendConfig(**moved)  # refused now, in the flags' words
            moved = {name: getattr(checked, name) for name in moved}
        object.__setattr__(self, "_moved", moved)

    def merged(self, backend: BackendConfig) -> BackendConfig:
        """``backend`` with the dtype and batch size given here the old way (`RewardScoring`),
        where it leaves them at their defaults; given both ways apart, refused in one line."""
        moved: dict[str, Any] = getattr(self, "_moved", {})
        default = BackendConfig()
        for name, value in moved.items():
            if getattr(backend, name) not in (value, getattr(default, name)):
                raise BiasscopeError(
                    f"reward {name} {value!r} and backend {name} {getattr(backend, name)!r}: "
                    f"one --{name.replace('_', '-')} sets every local model of the command; "
                    f"give it once, as BackendConfig({name}=…)")
        return replace(backend, **moved) if moved else backend

    def reward_config(self, backend: BackendConfig) -> RewardConfig:
        """The `RewardConfig` the reward models load with: these settings, and the device,
        dtype, batch size and pickle flags the command shares with its other models (one
        place for both commands)."""
        backend = self.merged(backend)
        return RewardConfig(device=backend.device, dtype=backend.dtype,
                            batch_size=backend.batch_size, transform=self.transform,
                            chat_template=self.chat_template, allow_pickle=backend.allow_pickle)


#: The level of the summary's tests that are not read off its intervals (the common change
#: of two principles, a reward model below chance): their own setting, as the counterfactual
#: check's and the audit's are, whatever ``--confidence`` is.
ALPHA = 0.05

#: Sanity pairs drawn when ``--sanity-pairs`` is not given: at most this many.
SANITY_PAIRS = 500


@dataclass(frozen=True)
class SensitivityConfig:
    """``reward_models``: specs, or NAME=SPEC; ``templates``: critique / revision / away
    template files, by name; ``prompts``: hh-rlhf:harmless-base:N or a JSONL file;
    ``sanity_pairs``: how many hh-rlhf chosen/rejected pairs each model's accuracy is
    measured on (0: none); ``unchanged_below``/``exclude_unchanged``: see
    ``sensitivity.confounds``. ``analysis`` holds the summary's levels given
    (``confidence``, ``n_resamples``: `biasscope.core.levels`); those not given stay as the
    run's summary.json stored them, then the defaults."""

    out: str | Path = field(metadata=described("run directory (reruns send no requests)",
                                               parse=run_dir))
    reward_models: Sequence[str] = field(metadata=described(
        "hub id[@revision] or local dir of a sequence-classification reward model, or "
        "NAME=SPEC; repeat for several", flag="--reward-model", many=True))
    perturber: str = field(metadata=described(
        "generate backend spec for critique and revision, e.g. openai:gpt-4o-mini"))
    principles: str = setting("ccai:top10", "ccai:topK, or a YAML / JSON / JSONL / text file of "
                              "principles")
    prompts: str = setting("hh-rlhf:harmless-base:200", "hh-rlhf:harmless-base:N, or a JSONL "
                           "file of conversations")
    directions: tuple[str, ...] = setting(
        ("toward",), "revise to conform more (toward), less (away), or both", flag="--direction",
        parse=directions)
    templates: dict[str, str] = field(default_factory=dict)
    conventions: str = setting(
        "biasscope", "index definitions: biasscope's (SD ddof=1, originals once in the "
        "percentile pool, absolute-sum normalisation) or the source code's",
        choices=("biasscope", "source"))
    reward: RewardScoring = field(default_factory=RewardScoring)
    max_tokens: int = setting(512, "perturber's limit", check=POSITIVE_INT)
    seed: int = setting(0, "prompt shuffling and perturber seed", check=SEED)
    sanity_pairs: int = setting(SANITY_PAIRS, "hh-rlhf chosen/rejected pairs for each model's "
                                "accuracy (0: none)", check=NON_NEGATIVE_INT)
    sanity_lines: str | None = setting(None, "FIRST-LAST: draw the sanity pairs from these "
                                       "lines of the test file only (leave out what the "
                                       "reward model trained on)")
    unchanged_below: float = setting(0.05, "normalised edit distance under which a revision "
                                     "counts as unchanged", check=PROBABILITY)
    exclude_unchanged: bool = setting(False, "leave the unchanged revisions out")
    data_dir: str | None = setting(None, DATA_DIR_HELP)
    backend: BackendConfig = field(default_factory=BackendConfig)
    analysis: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_settings(self)
        object.__setattr__(self, "backend", self.reward.merged(self.backend))
        if odd := [d for d in self.directions if d not in ("toward", "away")]:
            raise BiasscopeError(f"--direction (directions): {odd[0]!r} is not toward or away; "
                                 "give toward, away, both, or a list of toward and away")
        for flag, value, what in (("--principles", self.principles, "ccai:topK"),
                                  ("--prompts", self.prompts, "hh-rlhf:harmless-base:N")):
            if not value.strip():  # an unset "$VARIABLE": read as the folder "."
                raise BiasscopeError(f"{flag} is empty: give {what} or a file")
        for name, alone in (("away", "toward"), ("revision", "away")):
            if name in self.templates and self.directions == (alone,):
                raise BiasscopeError(f"--{name}-template is not used with --direction {alone} "
                                     "(it revises the other way): drop it, or give --direction "
                                     "both")
        if self.sanity_lines is not None and not self.sanity_pairs:
            raise BiasscopeError(f"--sanity-lines {self.sanity_lines} draws the sanity pairs, "
                                 "but --sanity-pairs 0 asks for none: drop one of them")
        if self.sanity_lines is not None:
            line_range(self.sanity_lines)  # refused now, not after the models load
