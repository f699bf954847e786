"""The settings of ``biasscope dynamics`` (`DynamicsConfig` and its parts) and the checks of
their values, apart from the run code in `biasscope.dynamics.job` (which re-exports them): the
command's flags are built from these, so ``biasscope dynamics --help`` imports no pandas, no
probe and no sweep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import parse_seeds
from biasscope.backends.hf_model import HFConfig
from biasscope.core.config import (
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    SEED,
    check_settings,
    comma_entries,
    described,
    setting,
)
from biasscope.core.errors import BiasscopeError
from biasscope.core.probe_settings import LIMIT_HELP, PROBE_HELP, WINOBIAS, WORDINGS_HELP
from biasscope.data.sources import DATA_DIR_HELP
from biasscope.store.directory import run_dir


def comma_list(text: str) -> tuple[str, ...]:
    """``a, b`` as ``("a", "b")``; ValueError for an empty entry (``a,,b``, ``a,``) or an
    entry given twice (`comma_entries`)."""
    return tuple(comma_entries(text))


def performance_probe(text: str) -> str:
    """A probe that gives a performance series (``PROBES[name].performance``: ``lambada``,
    ``perplexity``) or ``perplexity:FILE`` (FILE checked now, not after the sweep)."""
    from biasscope.probes import PROBES  # loads pandas: when a value is parsed, not at --help
    from biasscope.probes.facets import Absent

    name, colon, file = text.partition(":")
    series = [n for n, info in PROBES.items() if not isinstance(info.performance, Absent)]
    if text in series or (name == "perplexity" and colon and Path(file).expanduser().is_file()):
        return text
    raise BiasscopeError(f"--performance {text!r}: give {', '.join(series)} or perplexity:FILE "
                         "(an existing file of held-out documents)")


@dataclass(frozen=True)
class Executing:
    """Where the units run: ``local`` (this process) or ``ray`` (one task per checkpoint)."""

    kind: str = setting("local", "local: this process (default); ray: one Ray task per "
                        "checkpoint, units written straight into --out (needs the 'ray' extra)",
                        choices=("local", "ray"), flag="--executor")
    ray_address: str | None = setting(None, "Ray cluster to join, e.g. auto or "
                                      "ray://head:10001 (default: a local Ray on this machine)")
    gpus_per_checkpoint: float = setting(0, "GPUs each Ray task (one checkpoint) requests; 0.5 "
                                         "lets two share a GPU (default 0)", check=NON_NEGATIVE,
                                         old="--gpus-per-unit")
    cpus_per_checkpoint: float = setting(1, "CPUs each Ray task requests (default 1)",
                                         check=POSITIVE, old="--cpus-per-unit")

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class Performance:
    """Performance read against the fairness curves: a probe scored at every checkpoint
    (``lambada``, ``perplexity`` or ``perplexity:FILE``), ``[MODEL=]FILE`` CSVs of step,value,
    or lm-evaluation-harness results."""

    probe: str | None = setting(None, "also evaluate a performance probe at every checkpoint: "
                                "lambada, perplexity (ETHICS held-out text) or perplexity:FILE "
                                "(your held-out text)", flag="--performance",
                                parse=performance_probe)
    csv: Sequence[str] = setting((), "[MODEL=]FILE of step,value rows (higher is better)",
                                 flag="--performance-csv", many=True)
    lm_eval_results: Sequence[str] = setting(
        (), "[MODEL=]GLOB of lm-evaluation-harness results JSON, one per checkpoint", many=True)
    lm_eval_metric: str | None = setting(None, "task/metric in those files, e.g. "
                                         "lambada_openai/acc")

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class DynamicsConfig:
    """Everything a dynamics run depends on; ``analysis`` holds only the settings given (the
    rest come from the run's last analysis, then the defaults), each as its flag takes it
    (``{"alpha": "0.05"}`` is 0.05, as ``--alpha 0.05``)."""

    out: str | Path = field(metadata=described(
        "run directory, or an fsspec URL such as s3://bucket/run (reused runs resume)",
        parse=run_dir))
    models: Sequence[str] = setting((), "hub id (optionally @revision), local model dir or "
                                    ".gguf file, bare or as hf:SPEC; repeatable", flag="--model",
                                    many=True)
    revisions: Sequence[str] = setting((), "comma-separated hub revisions, e.g. "
                                       "step1000,step143000", parse=comma_list)
    checkpoint_globs: Sequence[str] = setting(
        (), "local checkpoint dirs, e.g. 'out/checkpoint-*' or NAME='out/checkpoint-*' (model "
        "NAME); repeatable", flag="--checkpoint-glob", many=True)
    models_file: str | None = setting(None, "JSON list of {model, revisions} or "
                                      "{checkpoint_glob, name} entries, for many models in one run")
    probes: Sequence[str] = setting(
        (WINOBIAS,), "probe to score at every checkpoint (default winobias-gender); probes "
        "asked by chat (bbq, adult-counterfactual, professional-bias) are scored by each "
        "option's log-prob" + PROBE_HELP, flag="--probe", many=True, old="--probes")
    seeds: Sequence[int] = setting((0, 1, 2, 3, 4), "option-order seeds, e.g. 0-4 or 0,3",
                                   parse=parse_seeds, check=SEED)
    limit: int | None = setting(None, LIMIT_HELP, check=POSITIVE_INT)
    data_dir: str | None = setting(None, DATA_DIR_HELP)
    prompt_template: str | None = setting(None, "file with winobias-gender's prompt template "
                                          "({sentence}, {occupation}, {o1}, {o2}, {o3})")
    wordings: str | None = setting(None, WORDINGS_HELP, was="--templates")
    scoring: HFConfig = field(default_factory=HFConfig)
    performance: Performance = field(default_factory=Performance)
    executing: Executing = field(default_factory=Executing)
    analysis: Mapping[str, Any] = field(default_factory=dict)
    rescore_changed: bool = setting(False, "a checkpoint whose weights (or tokenizer, chat "
                                    "template or config files) changed since --out scored it: "
                                    "set its old units aside and score it again (else it is "
                                    "refused)")
    quiet: bool = setting(False, "no progress bars, and no line on stderr as each step starts")

    def __post_init__(self) -> None:
        check_settings(self)
