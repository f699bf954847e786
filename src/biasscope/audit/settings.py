"""The settings of ``biasscope audit`` (`AuditConfig`, `Prompting`) and ``biasscope items``
(`ItemsConfig`), apart from the run code in `biasscope.audit.job` (which re-exports them): the
commands' flags are built from these, so their ``--help`` imports no pandas and no probe."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biasscope.backends.config import BackendConfig
from biasscope.core.config import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    SEED,
    check_settings,
    described,
    setting,
)
from biasscope.core.probe_settings import (
    BASE_RATE_HELP,
    LIMIT_HELP,
    WORDINGS_HELP,
    probe_help,
)
from biasscope.data.sources import DATA_DIR_HELP
from biasscope.store.directory import run_dir

DEFAULT_PROBES = ("adult-counterfactual", "professional-bias", "bbq")


@dataclass(frozen=True)
class Prompting:
    """How a ``model`` is asked: ``scoring`` auto (option scores where the backend gives them,
    else generation), options or generate; the rest decode a generation."""

    scoring: str = setting(
        "auto", "auto: option scoring for local hf: models, generation otherwise; options on "
        "an openai-compatible: server scores each option from the echo of the plain prompt + "
        "option (llama.cpp: --logits_all true)", choices=("auto", "options", "generate"))
    max_tokens: int = setting(64, "generation's token limit", check=POSITIVE_INT)
    temperature: float = setting(0.0, "sampling temperature", check=NON_NEGATIVE)
    seed: int | None = setting(None, "the generation seed", check=SEED)
    top_logprobs: int = setting(
        0, "generate: ask for the N likeliest first tokens and read the options' probabilities "
        "from them (where their first tokens differ)", check=NON_NEGATIVE_INT)
    plain_prompt: bool = setting(
        False, "ask as one plain prompt ('user: ...' lines, then 'assistant:'; a server gets "
        "it on /completions) instead of a chat: how a base model without a chat template "
        "reads it")
    first_token: bool = setting(
        False, "next-token probes (winogender): score an option of several tokens by its "
        "first token, as `biasscope dynamics --first-token` does (without it such an option "
        "is refused)")

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class AuditConfig:
    """A model spec (``hf:…``, ``openai:…``, a local path, …) or ``responses``, a JSONL of
    answers produced elsewhere (named ``name``). ``analysis`` holds the summary's levels given
    (``confidence``, ``n_resamples``: `biasscope.core.levels`); those not given stay as the
    run's summary.json stored them, then the defaults."""

    out: str | Path = field(metadata=described("run directory (reused runs resume)", parse=run_dir))
    probes: Sequence[str] = setting(
        DEFAULT_PROBES, "audit probe to ask (default adult-counterfactual, professional-bias "
        "and bbq); bbq:Age,Religion selects BBQ categories" + probe_help("winogender"),
        flag="--probe",
        many=True, old="--probes")
    model: str | None = setting(None, "model spec: a local dir, .gguf file or hub id (hf: "
                                "optional), openai:MODEL, openai-compatible:URL#MODEL, "
                                "litellm:PROVIDER/MODEL or canned:TEXT (fixed answers)")
    responses: str | None = setting(None, "JSONL of {item_id, response} produced elsewhere "
                                    "(instead of --model; see `biasscope items`)")
    name: str | None = setting(None, "model name for --responses (default: the file's name)")
    prompting: Prompting = field(default_factory=Prompting)
    backend: BackendConfig = field(default_factory=BackendConfig)
    limit: int | None = setting(None, LIMIT_HELP, check=POSITIVE_INT)
    base_rate: str = setting("0.5", BASE_RATE_HELP, choices=("0.0", "0.5", "1.0"))
    data_dir: str | None = setting(None, DATA_DIR_HELP)
    wordings: str | None = setting(None, WORDINGS_HELP, was="--templates")
    analysis: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class ItemsConfig:
    """``biasscope items``: one probe's items as JSONL, for answering elsewhere (then
    ``audit --responses``)."""

    probe: Sequence[str] = field(metadata=described(
        "one probe, e.g. winobias-gender, adult-counterfactual or bbq:Age,Religion "
        "(`biasscope probes` lists them)", many=True))
    out: str = field(metadata=described("JSONL file of the items"))
    seed: int = setting(0, "the seed's items, for probes whose items vary with it "
                        "(winobias-gender: the order the options are shown in)", check=SEED)
    limit: int | None = setting(None, LIMIT_HELP, check=POSITIVE_INT)
    base_rate: str = setting("0.5", BASE_RATE_HELP, choices=("0.0", "0.5", "1.0"))
    data_dir: str | None = setting(None, DATA_DIR_HELP)
    wordings: str | None = setting(None, WORDINGS_HELP + "; each item then says its wording "
                                   "and `audit --responses` needs the same --wordings",
                                   was="--templates")

    def __post_init__(self) -> None:
        check_settings(self)
