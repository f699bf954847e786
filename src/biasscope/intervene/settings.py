"""The settings of ``biasscope intervene`` (`InterveneConfig` and its parts, `Training` and
`InterventionAnalysisConfig`), apart from the run code in `biasscope.intervene.job`, ``.train``
and ``.analysis`` (which re-export them): the command's flags are built from these, so its
``--help`` imports no pandas, no probe and no trainer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from biasscope.backends.hf_model import HFConfig
from biasscope.core.config import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    SEED,
    Check,
    check_settings,
    comma_entries,
    described,
    same_setting,
    setting,
)
from biasscope.core.corrections import Correction
from biasscope.core.errors import BiasscopeError
from biasscope.core.probe_settings import ETHICS, PROBE_HELP, WINOBIAS
from biasscope.data.sources import DATA_DIR_HELP
from biasscope.intervene.methods import METHODS
from biasscope.store.directory import run_dir

#: A share that leaves documents on both sides of the split (`perplexity.split`).
SHARE = Check(False, lambda v: 0 < v < 1, "is not above 0 and below 1")
#: Tokens a document keeps: a causal LM learns nothing from fewer than 2.
TWO_OR_MORE = Check(True, lambda v: v >= 2, "is below 2: a document needs 2 tokens to train on")


@dataclass(frozen=True)
class Training:
    """The fine-tune both arms share (every field is recorded in run.json)."""

    steps: int = setting(200, "optimizer steps per arm", check=POSITIVE_INT)
    every: int = setting(25, "evaluate every N steps (and at step 0)", check=POSITIVE_INT)
    batch_size: int = setting(8, "documents per step", check=POSITIVE_INT)
    seq_len: int = setting(128, "tokens per training document", check=TWO_OR_MORE)
    lr: float = setting(5e-5, "learning rate", check=POSITIVE)
    seed: int = setting(0, "training, data order and option-order seed", check=SEED)
    runs: int = setting(1, "training runs per arm, seeded seed, seed+1, …: with 2 or more the "
                        "verdict is about the intervention, not about one run of each arm (3 "
                        "to 5 give usable intervals)", check=POSITIVE_INT)
    train_embeddings: bool = setting(True, "freeze the embeddings (and a tied output layer)",
                                     flag="--freeze-embeddings")
    warmup_steps: int = setting(0, "learning-rate warm-up steps", check=NON_NEGATIVE_INT)
    keep_checkpoints: bool = setting(False, "keep RUN/train/<arm>/checkpoint-* after the arm "
                                     "ends")
    lora_rank: int = setting(0, "LoRA rank (needs the 'lora' extra); 0: full fine-tune",
                             check=NON_NEGATIVE_INT)
    lora_alpha: int = setting(16, "LoRA alpha: adapter updates are scaled by alpha / rank",
                              check=POSITIVE_INT)
    lora_targets: str = setting("auto", "modules LoRA adapts: auto (the attention and MLP "
                                "projections of known architectures, else all-linear), "
                                "all-linear, or comma-separated module names")

    def __post_init__(self) -> None:
        check_settings(self)
        if self.seed + self.runs - 1 >= 2**32:
            raise BiasscopeError(f"--seed {self.seed} with --runs {self.runs}: run {self.runs} "
                                 f"would be seeded {self.seed + self.runs - 1}, above "
                                 f"{2**32 - 1}; give a smaller --seed")
        given = ["--" + f.name.replace("_", "-") for f in fields(self)
                 if f.name in ("lora_alpha", "lora_targets") and getattr(self, f.name) != f.default]
        if given and not self.lora_rank:
            one = len(given) == 1
            raise BiasscopeError(f"{' and '.join(given)} only appl{'ies' if one else 'y'} with "
                                 "--lora-rank N (a LoRA fine-tune); give a rank, or drop "
                                 f"{'it' if one else 'them'} for a full fine-tune")
        if self.lora_targets not in ("auto", "all-linear"):
            try:
                named = comma_entries(self.lora_targets)
            except ValueError as exc:
                raise BiasscopeError(f"--lora-targets: {exc}") from None
            if not named:
                raise BiasscopeError("--lora-targets is empty: give auto, all-linear or "
                                     "comma-separated module names (e.g. q_proj,v_proj)")


@dataclass(frozen=True)
class InterventionAnalysisConfig:
    budget: float = setting(0.02, "perplexity increase allowed when recommending a checkpoint "
                            "(fraction of the control's)", check=NON_NEGATIVE)
    alpha: float = 0.05
    confidence: float = 0.95
    correction: Correction = "holm"
    n_resamples: int = 2000

    def __post_init__(self) -> None:
        """Checked as a dynamics analysis' settings are (a notebook's ``analysis={...}``): text
        or a NumPy number for a number taken, a value out of range refused in one line."""
        from biasscope.dynamics.analysis import AnalysisConfig

        check_settings(self)
        shared = ("alpha", "confidence", "correction", "n_resamples")
        checked = AnalysisConfig(**{name: getattr(self, name) for name in shared})
        for name in shared:
            object.__setattr__(self, name, getattr(checked, name))


@dataclass(frozen=True)
class InterveneConfig:
    """One intervention run. ``text``: ``ethics-commonsense`` or a file of documents;
    ``held_out``: the share of documents (by id) kept out of training for perplexity, of which
    at most ``eval_docs`` are scored; ``limit``: WinoBias items per seed at each evaluation."""

    out: str | Path = field(metadata=described("run directory (resumes)", parse=run_dir))
    model: str = field(metadata=described("hub id, local model dir or .gguf file"))
    text: str = setting(ETHICS, "ethics-commonsense, or a file: one document per "
                        "line, or JSONL with 'text'")
    method: str = setting("cda", "the intervention", choices=tuple(METHODS))
    probes: Sequence[str] = setting((WINOBIAS,), "probe scored at every evaluation "
                                    "(default winobias-gender)" + PROBE_HELP, flag="--probe",
                                    many=True, old="--probes")
    training: Training = field(default_factory=Training)
    seeds: Sequence[int] = (0,)
    limit: int | None = setting(200, "WinoBias items per evaluation", check=POSITIVE_INT)
    held_out: float = setting(0.1, "share of documents kept out of training", check=SHARE)
    split_seed: int = 0
    eval_docs: int | None = setting(100, "held-out documents scored", check=POSITIVE_INT)
    max_words: int = 64
    eval_batch_size: int = 16
    device: str = same_setting(HFConfig, "device")
    data_dir: str | None = setting(None, DATA_DIR_HELP)
    analysis: InterventionAnalysisConfig = field(default_factory=InterventionAnalysisConfig)
    quiet: bool = setting(False, "no progress bars")
    save_recommended: bool = setting(True, "do not save the recommended checkpoint's weights "
                                     "to RUN/recommended/", flag="--no-save-recommended")

    def __post_init__(self) -> None:
        check_settings(self)
