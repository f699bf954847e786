"""What a backend file needs to plug in: the parsed model spec and the settings every backend reads.

These live apart from the registry (``backends.generators``) so that a backend's own file can
name them without importing the registry that imports it (no cycle).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from biasscope.backends.hf_model import HFConfig, device_name
from biasscope.core.config import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    check_settings,
    same_setting,
    setting,
)
from biasscope.core.errors import BiasscopeError, ModelError
from biasscope.core.renamed import renamed


@dataclass(frozen=True)
class ModelSpec:
    """One parsed ``--model`` string (see ``backends.generators.parse_model_spec``).

    ``kind``: what the model is (``hf``, ``gguf``, ``openai``, ``openai-compatible``,
    ``litellm`` or any registered prefix); ``backend``: the registry entry that loads it (a
    GGUF file is loaded by ``hf``); ``target``: hub id, local path or the server's model name;
    ``revision``: a hub revision (``@rev``, local kinds only); ``base_url``: the server of
    ``openai-compatible:URL#MODEL``; ``text``: the spec as written, for messages; ``rest``:
    the text after the prefix (all of it for a bare path or hub id).
    """

    kind: str
    target: str
    revision: str | None = None
    base_url: str | None = None
    backend: str = ""
    text: str = ""
    rest: str = ""

    def __post_init__(self) -> None:
        if not self.backend:
            object.__setattr__(self, "backend", self.kind)
        if not self.rest:
            object.__setattr__(self, "rest", self.target + (f"@{self.revision}"
                                                            if self.revision else ""))
        if not self.text:
            object.__setattr__(self, "text", f"{self.backend}:{self.rest}")


@dataclass(frozen=True)
class HTTPConfig:
    """How hard to push a server and how long to wait for it (``backends.openai_http``).

    Checked when made, as the command's flags that set it are (`BackendConfig` declares them
    as these): ``concurrency=0`` would leave every request waiting, and a ``backoff``
    above ``max_backoff`` would be ignored unsaid (every wait drawn up to ``max_backoff``)."""

    concurrency: int = setting(8, "requests in flight at once", check=POSITIVE_INT)
    timeout: float = setting(60.0, "seconds per attempt", check=POSITIVE)
    max_retries: int = setting(5, "retries on 429/5xx/timeouts", check=NON_NEGATIVE_INT,
                               flag="--retries")
    # Seconds before the first retry, doubling each time (full jitter), up to max_backoff.
    backoff: float = field(default=1.0, metadata={"check": NON_NEGATIVE})
    max_backoff: float = field(default=60.0, metadata={"check": NON_NEGATIVE})

    def __post_init__(self) -> None:
        check_settings(self)
        if self.backoff > self.max_backoff:
            raise BiasscopeError(f"backoff: {self.backoff:g} is above max_backoff "
                                 f"{self.max_backoff:g}, the longest wait before a retry: "
                                 "lower backoff or raise max_backoff")


@dataclass(frozen=True)
class GeneratorConfig:
    """Settings every backend may use; each reads what applies to it.

    Checked when made, so a notebook's mistake is refused before any model loads, in the
    words of the flag that sets it (`BackendConfig`) or of the local model's (`HFConfig`).
    """

    http: HTTPConfig = field(default_factory=HTTPConfig)
    base_url: str | None = setting(None, "server URL for openai / openai-compatible")
    api_key_env: str | None = setting(None, "environment variable that holds the API key "
                                      "(default OPENAI_API_KEY); keys are never written anywhere")
    device: str = setting("auto", "hf: auto, cpu, cuda, cuda:N or mps", parse=device_name)
    dtype: str = same_setting(HFConfig, "dtype", help="hf: weights' dtype (auto: float32 on a "
                              "CPU, the checkpoint's own on a GPU)")
    batch_size: int = same_setting(HFConfig, "batch_size", default=16,
                                   help="hf: prompts per forward pass")
    allow_pickle: bool = setting(False, "hf: load pickle weights (.bin/.pt), which can run code")

    def __post_init__(self) -> None:
        check_settings(self)


#: The most alternatives per token an API returns for ``--top-logprobs``, where it has a fixed
#: limit: OpenAI's chat API 20, its legacy completions (a plain prompt) 5; a request above it
#: is refused by the API, so every request of a run would fail. A server (openai-compatible:)
#: sets its own (llama.cpp's returns any count; vLLM's 20 unless started to allow more) and
#: says so on the first request; a local hf: model gives up to its vocabulary.
TOP_LOGPROBS = {"openai": (20, 5)}


def check_top_logprobs(spec: ModelSpec, top: int, completions: bool = False,
                       flag: str = "--top-logprobs") -> None:
    """Refuse ``top`` alternatives per token above what ``spec``'s API returns
    (`TOP_LOGPROBS`), before any model loads or request is sent; ``completions``: some
    request is a plain prompt, sent to the legacy completions endpoint."""
    if spec.kind not in TOP_LOGPROBS:
        return
    chat, legacy = TOP_LOGPROBS[spec.kind]
    most = legacy if completions else chat
    if top > most:
        where = " for a plain prompt (its legacy completions)" if completions else ""
        raise BiasscopeError(f"{flag} {top}: {spec.kind}: (OpenAI's API) returns 0 to {most} "
                             f"alternatives per token{where}: give {most} or fewer")


def api_key(config: GeneratorConfig, default_env: str) -> str | None:
    """The key from ``--api-key-env`` (which must be set) or ``default_env``, without the
    whitespace around it (an HTTP header cannot carry it, and the client then reported an
    unreachable server); None if unset. Keys stay in memory: never in a spec, a cache key or
    run.json."""
    if config.api_key_env is not None and not config.api_key_env.strip():
        # "--api-key-env $VAR" with VAR unset: the key would silently come from default_env
        raise ModelError(f"--api-key-env is empty: name the environment variable that holds "
                         f"the key, or drop the flag to read ${default_env}")
    name = config.api_key_env or default_env
    if config.api_key_env and not os.environ.get(name):
        raise ModelError(f"--api-key-env {name}: that environment variable is not set")
    key = (os.environ.get(name) or "").strip()  # a CRLF .env file leaves a \r at the end
    if any(c.isspace() or not c.isprintable() for c in key):
        raise ModelError(f"the API key in ${name} holds a space or control character; "
                         "set it to the key alone")
    return key or None


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"GeneratorOptions": "GeneratorConfig"}, globals().__getitem__)
