"""``biasscope sensitivity`` as one library call: `run(SensitivityConfig(...))` loads the
principles and conversations, the reward models and the perturber, perturbs, scores,
summarises into the run directory and renders the report. A rerun with every reward stored
loads no reward model and sends no request: one at another level (``--confidence``,
``--resamples``) summarises the stored rewards again."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from biasscope.backends.cache import Cached
from biasscope.backends.labels import label_models, parse_models
from biasscope.backends.reward import HFRewardModel, identities_before_loading
from biasscope.core.errors import DataError
from biasscope.core.jsonl import MAX_TEMPLATE, given_file, read_option_file
from biasscope.data.sources import recording
from biasscope.report.sensitivity import write_sensitivity_report
from biasscope.sensitivity.confounds import Confounds
from biasscope.sensitivity.harness import HarnessConfig, check_before_loading, run_sensitivity
from biasscope.sensitivity.perturb import Templates
from biasscope.sensitivity.principles import load_principles
from biasscope.sensitivity.prompts import (
    Prompts,
    hh_count,
    read_conversations,
    read_hh_rlhf,
)
from biasscope.sensitivity.sanity import Pairs, read_hh_pairs
from biasscope.sensitivity.settings import SANITY_PAIRS, line_range
from biasscope.sensitivity.settings import RewardScoring as RewardScoring
from biasscope.sensitivity.settings import SensitivityConfig as SensitivityConfig
from biasscope.sensitivity.settings import directions as directions
from biasscope.store.directory import RunStore
from biasscope.store.locks import run_lock
from biasscope.store.run_json import refuse_other_kind, run_levels

#: What each ``--<name>-template`` file holds, in the line refusing a path that is no file.
_ASKED = {"critique": "critique request", "revision": "revision request",
          "away": "revision request for --direction away"}


@dataclass(frozen=True)
class SensitivityResult:
    store: RunStore
    report: Path
    summary: dict[str, Any]
    prompts: Prompts
    perturber: Any  # the cached perturber: its usage says what was sent


def run(config: SensitivityConfig) -> SensitivityResult:
    # A bad --confidence is refused before any data is read (`run_levels`).
    levels = run_levels(RunStore(Path(config.out)), config.analysis)
    refuse_other_kind(RunStore(Path(config.out)), "sensitivity")  # before any is hashed
    if not config.principles.startswith("ccai:"):
        given_file("--principles", config.principles, "ccai:topK, or a YAML / JSON / JSONL / "
                   "text file of principles")
    with recording() as read:  # the whole files' SHA-256 go into run.json, checked on rerun
        constitution = load_principles(config.principles, data_dir=config.data_dir)
        prompts = _prompts(config)
        templates = Templates()
        for name, path in config.templates.items():
            what = f"a text file of the {_ASKED[name]}, or leave it out for the default one"
            templates = replace(templates, **{name: read_option_file(
                path, f"--{name}-template", MAX_TEMPLATE, what=what)})
        templates.check()
        pairs, fewer = _pairs(config)  # the data file is read before any reward model loads
    named = parse_models(list(config.reward_models), "--reward-model")  # no model twice
    reward = config.reward.reward_config(config.backend)
    harness = HarnessConfig(config.directions, templates, config.max_tokens, config.seed,
                            config.conventions, pairs,
                            Confounds(config.unchanged_below, config.exclude_unchanged), read,
                            levels)
    # A run in --out that this call cannot join is refused before a model loads (minutes).
    planned = identities_before_loading(named, reward, "--reward-model")
    check_before_loading(config.out, prompts, constitution, harness, planned)
    # The perturber first: its spec and flags are checked before a reward model loads.
    perturber = Cached(config.backend.generator(config.perturber, "--perturber"),
                       config.backend.response_cache())
    check_before_loading(config.out, prompts, constitution, harness, planned, perturber)
    if fewer:  # once the call is checked: a refused call's error stays its one line
        print(fewer, file=sys.stderr)
    # A local reward model loads when it first scores: a rerun whose every reward is stored
    # loads none (its identity comes from its files).
    models = [HFRewardModel(spec, reward, deferred=True) for _, spec in named]
    label_models(models, named, "--reward-model")
    store = run_sensitivity(models, perturber, prompts, constitution, config.out, harness)
    with run_lock(store):  # another run into this --out may rewrite summary.json meanwhile
        report = write_sensitivity_report(store.root)
    return SensitivityResult(store, report, store.read_json("summary.json"), prompts,
                             perturber)


def _pairs(config: SensitivityConfig) -> tuple[Pairs | None, str]:
    """The sanity pairs, and a note where fewer than a ``--sanity-pairs`` the user gave are
    used (the default asks at most its number: a smaller file says nothing)."""
    if not config.sanity_pairs:
        return None, ""
    lines = line_range(config.sanity_lines) if config.sanity_lines else None
    try:
        pairs = read_hh_pairs(config.data_dir, n=config.sanity_pairs, seed=config.seed,
                              lines=lines)
    except DataError as exc:
        if lines is None or "no usable" not in str(exc):
            raise
        raise DataError(f"--sanity-lines {config.sanity_lines}: {exc}: give lines that hold "
                        "pairs, or leave it out") from None
    if (used := len(pairs.ids)) >= config.sanity_pairs or config.sanity_pairs == SANITY_PAIRS:
        return pairs, ""
    # As for --prompts: fewer were used without a word; run.json keeps the N asked.
    where = f"lines {lines[0]}-{lines[1]} of the file have" if lines else "the file has"
    return pairs, (f"biasscope: note: --sanity-pairs {config.sanity_pairs}: {where} {used} "
                   f"usable chosen/rejected pairs, so {used} of the {config.sanity_pairs} "
                   "asked are used")


def _prompts(config: SensitivityConfig) -> Prompts:
    count = hh_count(config.prompts, "--prompts", "conversations")
    if count is None:
        given_file("--prompts", config.prompts, "hh-rlhf:harmless-base:N, or a JSONL file of "
                   "conversations")
        return read_conversations(config.prompts)
    prompts = read_hh_rlhf(config.data_dir, n=count, seed=config.seed)
    if (used := len(prompts.conversations)) < count:
        # Fewer were used without a word. run.json keeps the N asked (a run recorded before
        # this note resumes), and each conversation's units say which were scored.
        print(f"biasscope: note: --prompts {config.prompts}: the file has {used} usable "
              f"conversations, so {used} of the {count} asked are used", file=sys.stderr)
    return prompts
