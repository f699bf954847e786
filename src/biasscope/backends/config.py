"""How a command reaches a ``generate`` backend and caches its answers: the settings every
text-model command shares (``--base-url``, ``--concurrency``, ``--cache``, ``--device`` …)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from biasscope.backends.base import Generator
from biasscope.backends.specs import GeneratorConfig, HTTPConfig
from biasscope.core.config import check_settings, same_setting, setting


@dataclass(frozen=True)
class BackendConfig:
    """The flags every text-model command shares. Those handed on to the backend are the
    library configs' settings (`GeneratorConfig`, `HTTPConfig`), declared there once, so a
    notebook's config refuses what the flag refuses, in its words."""

    base_url: str | None = same_setting(GeneratorConfig, "base_url")
    api_key_env: str | None = same_setting(GeneratorConfig, "api_key_env")
    concurrency: int = same_setting(HTTPConfig, "concurrency")
    timeout: float = same_setting(HTTPConfig, "timeout")
    retries: int = same_setting(HTTPConfig, "max_retries")
    cache: str | None = setting(None, "response cache file (default "
                                "~/.cache/biasscope/responses.sqlite or $BIASSCOPE_RESPONSE_CACHE)")
    no_cache: bool = setting(False, "neither read nor write the cache")
    device: str = same_setting(GeneratorConfig, "device")
    dtype: str = same_setting(GeneratorConfig, "dtype")
    batch_size: int = same_setting(GeneratorConfig, "batch_size")
    allow_pickle: bool = same_setting(GeneratorConfig, "allow_pickle")

    def __post_init__(self) -> None:
        check_settings(self)

    def generator(self, spec: str, flag: str = "--model", *, deferred: bool = False
                  ) -> Generator:
        """The backend ``spec`` names; a bare local path or ``org/name`` hub id is ``hf:``.
        ``flag``: the option ``spec`` came from, for messages (`generators`). ``deferred``: a
        local model loads on first use (`generators.load_generator`)."""
        return self.generators([spec], flag, deferred=deferred)[0]

    def generators(self, specs: Sequence[str], flag: str = "--model", *,
                   deferred: bool = False) -> list[Generator]:
        """The backend each of ``specs`` (one command's, given with ``flag``) names. Where
        ``--base-url`` or ``--api-key-env`` is given and every spec is a local model (or
        canned answers), which asks no server, it is refused before any model loads, not
        ignored: the run would look as if it had asked that server. Beside a server's model
        it applies to that one (`generators.refuse_server_settings`)."""
        from biasscope.backends.generators import NO_SERVER, load_generator

        parsed, config = self._checked(specs, flag)
        local = replace(config, base_url=None, api_key_env=None)
        return [load_generator(p, local if p.backend in NO_SERVER else config, deferred=deferred)
                for p in parsed]

    def check(self, specs: Sequence[str], flag: str = "--model", *,
              local_beside: bool = False) -> list[Any]:
        """What `generators` refuses before loading (a spec it cannot read, a server's flag
        beside local models), refused without loading: a command checks its flags first.
        So is a local model's flag (``--dtype``, ``--batch-size``) where no spec loads one
        (`generators.refuse_local_settings`), unless ``local_beside``: the command's other
        models are local and take it (a counterfactual check's reward models). Each spec
        parsed (a `ModelSpec`): what a check before loading knows of it."""
        from biasscope.backends.generators import refuse_local_settings

        parsed, config = self._checked(specs, flag)
        if not local_beside:
            refuse_local_settings(parsed, config, flag)
        return parsed

    def _checked(self, specs: Sequence[str], flag: str) -> tuple[list[Any], GeneratorConfig]:
        from biasscope.backends.generators import parse_model_spec, refuse_server_settings

        parsed = [parse_model_spec(s, bare=_local_or_hub(s)) for s in specs]
        http = HTTPConfig(concurrency=self.concurrency, timeout=self.timeout,
                          max_retries=self.retries)
        config = GeneratorConfig(http=http, base_url=self.base_url,
                                 api_key_env=self.api_key_env, device=self.device,
                                 dtype=self.dtype, batch_size=self.batch_size,
                                 allow_pickle=self.allow_pickle)
        refuse_server_settings(parsed, config, flag)
        return parsed, config

    def response_cache(self) -> Any:
        from biasscope.backends.cache import ResponseCache

        return None if self.no_cache else ResponseCache(self.cache)


def _local_or_hub(spec: str) -> bool:
    """A spec without a backend prefix that names a local path (one that is missing too, where
    it is written as a path: its loader then says so) or an ``org/name`` hub id (a bare
    ``gpt-4o`` still gets the one-line "write BACKEND:MODEL" error)."""
    path = spec.partition("@")[0]
    written_as_path = path.startswith(("/", "./", "../", "~")) or path.endswith(".gguf")
    return ":" not in path and bool(path) and (
        written_as_path or Path(path).expanduser().exists()
        or re.fullmatch(r"[\w.-]+/[\w.-]+", path) is not None)
