"""How a command reaches a ``generate`` backend and caches its answers: the settings every
text-model command shares (``--base-url``, ``--concurrency``, ``--cache``, ``--device`` …)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.backends.base import Generator


@dataclass(frozen=True)
class BackendConfig:
    base_url: str | None = None
    api_key_env: str | None = None  # name of the variable that holds the key, never the key
    concurrency: int = 8
    timeout: float = 60.0
    retries: int = 5
    cache: str | None = None  # the response cache file (default: the user cache)
    no_cache: bool = False
    device: str = "auto"
    allow_pickle: bool = False

    def generator(self, spec: str) -> Generator:
        """The backend ``spec`` names; a bare local path or ``org/name`` hub id is ``hf:``."""
        from biasscope.backends.generators import (
            GeneratorOptions,
            load_generator,
            parse_model_spec,
        )
        from biasscope.backends.openai_http import HTTPOptions

        http = HTTPOptions(concurrency=self.concurrency, timeout=self.timeout,
                           max_retries=self.retries)
        named = parse_model_spec(spec) if _local_or_hub(spec) else spec
        return load_generator(named, GeneratorOptions(
            http=http, base_url=self.base_url, api_key_env=self.api_key_env,
            device=self.device, allow_pickle=self.allow_pickle))

    def response_cache(self) -> Any:
        from biasscope.backends.cache import ResponseCache

        return None if self.no_cache else ResponseCache(self.cache)


def _local_or_hub(spec: str) -> bool:
    """A spec without a backend prefix that names a local path or an ``org/name`` hub id (a
    bare ``gpt-4o`` still gets the one-line "write BACKEND:MODEL" error)."""
    path = spec.partition("@")[0]
    return ":" not in path and bool(path) and (
        Path(path).expanduser().exists() or re.fullmatch(r"[\w.-]+/[\w.-]+", path) is not None)
