"""The settings of ``biasscope generate`` (`GenerateConfig`), apart from the run code in
`biasscope.generate.batch` (which re-exports it): the command's flags are built from it, so
its ``--help`` imports no pandas and no backend."""

from __future__ import annotations

from dataclasses import dataclass, field

from biasscope.backends.base import GenerateParams
from biasscope.backends.config import BackendConfig
from biasscope.core.config import check_settings, described


@dataclass(frozen=True)
class GenerateConfig:
    """``biasscope generate``: answer ``input`` (JSONL requests) with ``model`` into ``out``."""

    model: str = field(metadata=described(
        "a local dir, .gguf file or hub id (hf: optional), openai:MODEL, "
        "openai-compatible:URL#MODEL, litellm:PROVIDER/MODEL, canned:TEXT (fixed answers)"))
    input: str = field(metadata=described("JSONL: {id, prompt} or {id, messages}, optionally "
                                          "options"))
    out: str = field(metadata=described("JSONL of generations; only the same model and "
                                        "settings may rewrite it"))
    params: GenerateParams = field(default_factory=GenerateParams)
    backend: BackendConfig = field(default_factory=BackendConfig)

    def __post_init__(self) -> None:
        check_settings(self)
