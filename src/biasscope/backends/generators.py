"""Model specs for ``generate``: one string names the backend, where it lives and the model.

=====================================================  ===========================================
``openai:gpt-4o-mini``                                 OpenAI (key: ``$OPENAI_API_KEY``; base URL:
                                                       ``--base-url``, ``$OPENAI_BASE_URL`` or
                                                       OpenAI's)
``openai-compatible:http://127.0.0.1:8000/v1#my-model``  any server speaking OpenAI's API (vLLM,
                                                       llama.cpp, Ollama, TGI); key optional
``openai-compatible:my-model``                         the same, base URL from ``--base-url`` or
                                                       ``$OPENAI_BASE_URL``
``hf:EleutherAI/pythia-160m@step143000``, ``hf:./dir``   local ``transformers`` generation
``hf:./model.gguf``                                    the same, a GGUF file dequantised
                                                       once into a cache (backends.gguf)
``litellm:anthropic/claude-3-5-haiku-20241022``        litellm's provider/model names and keys
=====================================================  ===========================================

Keys come from the environment (``--api-key-env NAME`` picks the variable) and stay in memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from biasscope.backends.base import Generator
from biasscope.backends.openai_http import OPENAI_URL, HTTPOptions, OpenAIGenerator
from biasscope.core.errors import ModelError


@dataclass(frozen=True)
class GeneratorOptions:
    """Settings every backend may use; each reads what applies to it."""

    http: HTTPOptions = field(default_factory=HTTPOptions)
    base_url: str | None = None
    api_key_env: str | None = None  # name of the environment variable holding the key
    device: str = "auto"  # local backends
    dtype: str = "auto"
    batch_size: int = 16
    allow_pickle: bool = False  # local: load pickle weights, which can run code


def _key(options: GeneratorOptions, default_env: str) -> str | None:
    name = options.api_key_env or default_env
    if options.api_key_env and not os.environ.get(name):
        raise ModelError(f"--api-key-env {name}: that environment variable is not set")
    return os.environ.get(name) or None


def _openai(rest: str, options: GeneratorOptions) -> Generator:
    key = _key(options, "OPENAI_API_KEY")
    if key is None:
        raise ModelError(f"openai:{rest} needs an API key: set OPENAI_API_KEY "
                         "(or name another variable with --api-key-env)")
    url = options.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL
    return OpenAIGenerator(rest, url, key, options.http, kind="openai")


def _compatible(rest: str, options: GeneratorOptions) -> Generator:
    if "://" in rest:
        url, hash_, model = rest.rpartition("#")
        if not hash_ or not model:
            raise ModelError(f"openai-compatible:{rest}: write openai-compatible:URL#MODEL, "
                             "e.g. openai-compatible:http://127.0.0.1:8000/v1#my-model")
    else:
        url = options.base_url or os.environ.get("OPENAI_BASE_URL") or ""
        model = rest
        if not url:
            raise ModelError(f"openai-compatible:{rest}: give the server's URL, as "
                             f"openai-compatible:URL#{rest} or with --base-url")
    return OpenAIGenerator(model, url, _key(options, "OPENAI_API_KEY"), options.http)


def _hf(rest: str, options: GeneratorOptions) -> Generator:
    from biasscope.backends.checkpoints import from_model
    from biasscope.backends.hf_generate import HFGenerator
    from biasscope.backends.hf_model import HFOptions

    return HFGenerator(from_model(rest)[0], HFOptions(
        device=options.device, dtype=options.dtype, batch_size=options.batch_size,
        allow_pickle=options.allow_pickle))


def _litellm(rest: str, options: GeneratorOptions) -> Generator:
    from biasscope.backends.litellm_http import LiteLLMGenerator

    return LiteLLMGenerator(rest, options.base_url, _key(options, "LITELLM_API_KEY"),
                            options.http)


GENERATORS: dict[str, Callable[[str, GeneratorOptions], Generator]] = {
    "openai": _openai,
    "openai-compatible": _compatible,
    "hf": _hf,
    "litellm": _litellm,
}


def load_generator(spec: str, options: GeneratorOptions | None = None) -> Generator:
    """The backend a spec names (see the module docstring for the syntax)."""
    kind, colon, rest = spec.partition(":")
    if not colon or kind not in GENERATORS or not rest:
        raise ModelError(f"model spec {spec!r}: write BACKEND:MODEL with BACKEND one of "
                         f"{', '.join(GENERATORS)} (e.g. openai:gpt-4o-mini)")
    return GENERATORS[kind](rest, options or GeneratorOptions())
