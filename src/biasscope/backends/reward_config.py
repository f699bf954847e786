"""How a reward model is loaded and scored (`RewardConfig`), apart from the model code in
`backends.reward` (which gives it too): the commands that score reward models declare their
flags as its settings, and their ``--help`` must not import NumPy."""

from __future__ import annotations

from dataclasses import dataclass, field

from biasscope.backends.hf_model import HFConfig
from biasscope.core.config import POSITIVE_INT, check_settings, same_setting, setting

TRANSFORMS = ("logit", "probability", "logprob")


@dataclass(frozen=True)
class RewardConfig:
    """How a reward model is loaded and scored.

    ``transform``: ``logit`` is the raw reward; ``probability`` its sigmoid; ``logprob`` its
    log-sigmoid (the source read log-probabilities from a hosted API). ``max_length``: longer
    conversations keep their first special token and their end (None: the model's limit).
    Checked when made; how a checkpoint loads is checked as `HFConfig`'s settings are
    (``trust_remote_code="no"`` is refused, not taken as true), and the reward flags of
    ``sensitivity`` and ``counterfactual`` (`RewardScoring`) are these settings.
    """

    device: str = same_setting(HFConfig, "device")
    dtype: str = same_setting(HFConfig, "dtype", help="reward models' dtype")
    batch_size: int = same_setting(HFConfig, "batch_size", default=16,
                                   help="conversations per forward pass")
    transform: str = setting("logit", "reward read from the model's logit", choices=TRANSFORMS)
    chat_template: bool = setting(True, "score the plain hh-rlhf format instead of the chat "
                                  "template", flag="--no-chat-template")
    max_length: int | None = field(default=None, metadata={"check": POSITIVE_INT})
    trust_remote_code: bool = same_setting(HFConfig, "trust_remote_code")
    allow_pickle: bool = same_setting(HFConfig, "allow_pickle")

    def __post_init__(self) -> None:
        check_settings(self)
