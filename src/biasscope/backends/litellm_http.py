"""litellm: providers without an OpenAI-compatible endpoint (Anthropic, Bedrock, Vertex, ...).

litellm answers in OpenAI's response shape and raises subclasses of OpenAI's errors, so the
concurrency, retries, failure records and logprob detection are those of ``OpenAIGenerator``;
only the call differs. Keys are litellm's own provider variables (``ANTHROPIC_API_KEY``, ...)
unless one is passed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from biasscope.backends.base import GenerateRequest
from biasscope.backends.openai_http import OpenAIGenerator
from biasscope.backends.redact import url_secrets
from biasscope.backends.specs import HTTPConfig
from biasscope.core.errors import ModelError, install_hint


class LiteLLMGenerator(OpenAIGenerator):
    """One litellm model name (``provider/model``)."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 config: HTTPConfig | None = None) -> None:
        super().__init__(model, base_url or "", api_key, config, kind="litellm")
        self._api_key = api_key or ""
        self._checked = True  # litellm has no portable model list to check against
        # Without a key given, litellm reads the provider's own variable: redact those too.
        self._secrets = tuple(v for v in (api_key, *_provider_keys(), *url_secrets(self._url))
                              if v)

    def identity(self) -> dict[str, str]:
        return {"backend": "litellm", "base_url": self.base_url, "model": self.model}

    def _client(self) -> Any:
        # Without this, importing litellm fetches a price list from the internet.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        try:
            import litellm
        except ImportError:
            raise ModelError("the litellm backend needs the 'litellm' extra: "
                             + install_hint("litellm")) from None
        litellm.suppress_debug_info = True  # its "Give Feedback" banner on every error
        # httpx, not its aiohttp sessions, which outlive the batch's event loop and leak.
        litellm.disable_aiohttp_transport = True
        return _closing(litellm)

    async def _send(self, client: Any, request: GenerateRequest, logprobs: bool) -> Any:
        body = self._body(request, logprobs)
        body.update(num_retries=0, timeout=self.config.timeout)
        if self._url:
            body["api_base"] = self._url  # credentials and all: ``base_url`` is the shown one
        if self._api_key:
            body["api_key"] = self._api_key
        if request.messages is not None:
            return await client.acompletion(**body)
        return await client.atext_completion(**body)


@contextlib.asynccontextmanager
async def _closing(litellm: Any) -> AsyncIterator[Any]:
    """litellm caches its HTTP clients, bound to this batch's event loop (each batch runs its
    own): close them with the batch."""
    try:
        yield litellm
    finally:
        with contextlib.suppress(Exception):
            await litellm.close_litellm_async_clients()


def _provider_keys() -> list[str]:
    """Values of the environment's credential variables (``ANTHROPIC_API_KEY``, ...)."""
    return [value for name, value in os.environ.items()
            if name.endswith(("_API_KEY", "_TOKEN", "_SECRET_ACCESS_KEY", "_SECRET"))]
