"""``biasscope sensitivity`` as one library call: `run(SensitivityConfig(...))` loads the
principles and conversations, the reward models and the perturber, perturbs, scores,
summarises into the run directory and renders the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from biasscope.backends.cache import Cached
from biasscope.backends.config import BackendConfig
from biasscope.backends.hf_model import DTYPES
from biasscope.backends.reward import HFRewardModel, RewardConfig
from biasscope.core.config import (
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    PROBABILITY,
    SEED,
    check_settings,
    described,
    setting,
)
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import MAX_TEMPLATE, read_option_file
from biasscope.core.labels import label_models, parse_models
from biasscope.data.sources import DATA_DIR_HELP
from biasscope.report.sensitivity import write_sensitivity_report
from biasscope.sensitivity.confounds import Confounds
from biasscope.sensitivity.harness import HarnessConfig, run_sensitivity
from biasscope.sensitivity.perturb import Templates
from biasscope.sensitivity.principles import load_principles
from biasscope.sensitivity.prompts import (
    Prompts,
    hh_count,
    read_conversations,
    read_hh_rlhf,
)
from biasscope.sensitivity.sanity import Pairs, line_range, read_hh_pairs
from biasscope.store.directory import RunStore, run_dir


def directions(text: str) -> tuple[str, ...]:
    """``toward``, ``away`` or ``both``."""
    if text not in ("toward", "away", "both"):
        raise BiasscopeError(f"--direction {text!r}: give toward, away or both")
    return ("toward", "away") if text == "both" else (text,)

@dataclass(frozen=True)
class RewardScoring:
    """How the reward models read a conversation (`biasscope.backends.reward.RewardConfig`)."""

    transform: str = setting("logit", "reward read from the model's logit",
                             choices=("logit", "probability", "logprob"))
    chat_template: bool = setting(True, "score the plain hh-rlhf format instead of the chat "
                                  "template", flag="--no-chat-template")
    dtype: str = setting("auto", "reward models' dtype", choices=DTYPES)
    batch_size: int = setting(16, "conversations per forward pass", check=POSITIVE_INT)

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class SensitivityConfig:
    """``reward_models``: specs, or NAME=SPEC; ``templates``: critique / revision / away
    template files, by name; ``prompts``: hh-rlhf:harmless-base:N or a JSONL file;
    ``sanity_pairs``: how many hh-rlhf chosen/rejected pairs each model's accuracy is
    measured on (0: none); ``unchanged_below``/``exclude_unchanged``: see
    ``sensitivity.confounds``."""

    out: str | Path = field(metadata=described("run directory (reruns send no requests)",
                                               parse=run_dir))
    reward_models: Sequence[str] = field(metadata=described(
        "hub id[@revision] or local dir of a sequence-classification reward model, or "
        "NAME=SPEC; repeat for several", flag="--reward-model", many=True))
    perturber: str = field(metadata=described(
        "generate backend spec for critique and revision, e.g. openai:gpt-4o-mini"))
    principles: str = setting("ccai:top10", "ccai:topK, or a YAML / JSON / text file of "
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
    sanity_pairs: int = setting(500, "hh-rlhf chosen/rejected pairs for each model's accuracy "
                                "(0: none)", check=NON_NEGATIVE_INT)
    sanity_lines: str | None = setting(None, "FIRST-LAST: draw the sanity pairs from these "
                                       "lines of the test file only (leave out what the "
                                       "reward model trained on)")
    unchanged_below: float = setting(0.05, "normalised edit distance under which a revision "
                                     "counts as unchanged", check=PROBABILITY)
    exclude_unchanged: bool = setting(False, "leave the unchanged revisions out")
    data_dir: str | None = setting(None, DATA_DIR_HELP)
    backend: BackendConfig = field(default_factory=BackendConfig)

    def __post_init__(self) -> None:
        check_settings(self)
        if self.sanity_lines is not None and not self.sanity_pairs:
            raise BiasscopeError(f"--sanity-lines {self.sanity_lines} draws the sanity pairs, "
                                 "but --sanity-pairs 0 asks for none: drop one of them")
        if self.sanity_lines is not None:
            line_range(self.sanity_lines)  # refused now, not after the models load


@dataclass(frozen=True)
class SensitivityResult:
    store: RunStore
    report: Path
    summary: dict[str, Any]
    prompts: Prompts
    perturber: Any  # the cached perturber: its usage says what was sent


def run(config: SensitivityConfig) -> SensitivityResult:
    constitution = load_principles(config.principles, data_dir=config.data_dir)
    prompts = _prompts(config)
    templates = Templates()
    for name, path in config.templates.items():
        templates = replace(templates, **{name: read_option_file(path, f"--{name}-template",
                                                                    MAX_TEMPLATE)})
    templates.check()
    pairs = _pairs(config)  # the data file is read before any reward model loads
    named = parse_models(list(config.reward_models), "--reward-model")  # no model twice
    reward = RewardConfig(device=config.backend.device, dtype=config.reward.dtype,
                          batch_size=config.reward.batch_size,
                          transform=config.reward.transform,
                          chat_template=config.reward.chat_template,
                          allow_pickle=config.backend.allow_pickle)
    models = [HFRewardModel(spec, reward) for _, spec in named]
    label_models(models, named, "--reward-model")
    perturber = Cached(config.backend.generator(config.perturber),
                       config.backend.response_cache())
    store = run_sensitivity(models, perturber, prompts, constitution, config.out,
                            HarnessConfig(config.directions, templates, config.max_tokens,
                                          config.seed, config.conventions, pairs,
                                          Confounds(config.unchanged_below,
                                                    config.exclude_unchanged)))
    report = write_sensitivity_report(store.root)
    return SensitivityResult(store, report, store.read_json("summary.json"), prompts,
                             perturber)


def _pairs(config: SensitivityConfig) -> Pairs | None:
    if not config.sanity_pairs:
        return None
    lines = line_range(config.sanity_lines) if config.sanity_lines else None
    return read_hh_pairs(config.data_dir, n=config.sanity_pairs, seed=config.seed, lines=lines)


def _prompts(config: SensitivityConfig) -> Prompts:
    count = hh_count(config.prompts, "--prompts", "conversations")
    if count is not None:
        return read_hh_rlhf(config.data_dir, n=count, seed=config.seed)
    return read_conversations(config.prompts)
