"""``biasscope sensitivity`` as one library call: `run(SensitivityConfig(...))` loads the
principles and conversations, the reward models and the perturber, perturbs, scores,
summarises into the run directory and renders the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from biasscope.backends.config import BackendConfig
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import read_option_file
from biasscope.report.sensitivity import write_sensitivity_report
from biasscope.sensitivity.confounds import Confounds
from biasscope.sensitivity.perturb import Templates
from biasscope.sensitivity.principles import load_principles
from biasscope.sensitivity.prompts import Prompts, read_conversations, read_hh_rlhf
from biasscope.sensitivity.run import SensitivityOptions, run_sensitivity
from biasscope.sensitivity.sanity import Pairs, read_hh_pairs
from biasscope.store.directory import RunStore


@dataclass(frozen=True)
class RewardScoring:
    """How the reward models read a conversation (`biasscope.backends.reward.RewardOptions`)."""

    transform: str = "logit"
    chat_template: bool = True
    dtype: str = "auto"
    batch_size: int = 16


@dataclass(frozen=True)
class SensitivityConfig:
    """``reward_models``: specs, or NAME=SPEC; ``templates``: critique / revision / away
    template files, by name; ``prompts``: hh-rlhf:harmless-base:N or a JSONL file;
    ``sanity_pairs``: how many hh-rlhf chosen/rejected pairs each model's accuracy is
    measured on (0: none); ``unchanged_below``/``exclude_unchanged``: see
    ``sensitivity.confounds``."""

    out: str | Path
    reward_models: Sequence[str]
    perturber: str
    principles: str = "ccai:top10"
    prompts: str = "hh-rlhf:harmless-base:200"
    directions: tuple[str, ...] = ("toward",)
    templates: dict[str, str] = field(default_factory=dict)
    conventions: str = "biasscope"
    reward: RewardScoring = field(default_factory=RewardScoring)
    max_tokens: int = 512
    seed: int = 0
    sanity_pairs: int = 500
    unchanged_below: float = 0.05
    exclude_unchanged: bool = False
    data_dir: str | None = None
    backend: BackendConfig = field(default_factory=BackendConfig)


@dataclass(frozen=True)
class SensitivityResult:
    store: RunStore
    report: Path
    summary: dict[str, Any]
    prompts: Prompts
    perturber: Any  # the cached perturber: its usage says what was sent


def run(config: SensitivityConfig) -> SensitivityResult:
    from biasscope.backends.cache import Cached
    from biasscope.backends.reward import HFRewardModel, RewardOptions
    from biasscope.core.labels import label_models, parse_models

    constitution = load_principles(config.principles, data_dir=config.data_dir)
    prompts = _prompts(config)
    templates = Templates()
    for name, path in config.templates.items():
        templates = replace(templates, **{name: read_option_file(path, f"--{name}-template")})
    templates.check()
    options = RewardOptions(device=config.backend.device, dtype=config.reward.dtype,
                            batch_size=config.reward.batch_size,
                            transform=config.reward.transform,
                            chat_template=config.reward.chat_template,
                            allow_pickle=config.backend.allow_pickle)
    named = parse_models(list(config.reward_models), "--reward-model")  # no model twice
    models = [HFRewardModel(spec, options) for _, spec in named]
    label_models(models, named, "--reward-model")
    perturber = Cached(config.backend.generator(config.perturber),
                       config.backend.response_cache())
    store = run_sensitivity(models, perturber, prompts, constitution, config.out,
                            SensitivityOptions(config.directions, templates, config.max_tokens,
                                               config.seed, config.conventions, _pairs(config),
                                               Confounds(config.unchanged_below,
                                                         config.exclude_unchanged)))
    report = write_sensitivity_report(store.root)
    return SensitivityResult(store, report, store.read_json("summary.json"), prompts,
                             perturber)


def _pairs(config: SensitivityConfig) -> Pairs | None:
    if not config.sanity_pairs:
        return None
    return read_hh_pairs(config.data_dir, n=config.sanity_pairs, seed=config.seed)


def _prompts(config: SensitivityConfig) -> Prompts:
    source, _, count = config.prompts.rpartition(":")
    if config.prompts.startswith("hh-rlhf:"):
        if source != "hh-rlhf:harmless-base" or not count.isdigit():
            raise BiasscopeError(f"--prompts {config.prompts}: write hh-rlhf:harmless-base:N "
                                 "or a JSONL file of conversations")
        return read_hh_rlhf(config.data_dir, n=int(count), seed=config.seed)
    return read_conversations(config.prompts)
