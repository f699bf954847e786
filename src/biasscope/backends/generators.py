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
``canned:female``, ``canned:A|B``                        fixed answers, in turn (dry runs, tests;
                                                       backends.canned)
=====================================================  ===========================================

``parse_model_spec`` also reads what the scoring commands take: a bare local path or hub id
(``EleutherAI/pythia-160m@step1000``, ``./dir``: kind ``hf``) and a ``.gguf`` file (kind
``gguf``). Keys come from the environment (``--api-key-env NAME`` picks the variable) and stay
in memory.

Adding a backend is one file (a class answering ``backends.base.Generator`` and a
``from_spec(spec: ModelSpec, config: GeneratorConfig)`` factory) and one line in ``BACKENDS``
(docs/architecture.md, "Add a backend").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from biasscope.backends import canned
from biasscope.backends.base import Generator
from biasscope.backends.gguf import is_gguf
from biasscope.backends.openai_http import OPENAI_URL, OpenAIGenerator
from biasscope.backends.redact import redact_urls
from biasscope.backends.specs import GeneratorConfig, ModelSpec, api_key
from biasscope.core.errors import ModelError
from biasscope.core.renamed import renamed

Factory = Callable[[ModelSpec, GeneratorConfig], Generator]


def server_url(spec: ModelSpec, config: GeneratorConfig, default: str = "") -> str:
    """The server's URL: the spec's own (``URL#MODEL``), ``--base-url`` or
    ``$OPENAI_BASE_URL``, else ``default``; without the whitespace around it (a pasted
    newline or space: the client then asked ``/v1 /models`` and a judge's tokenizer raised)
    and refused in one line, naming where it came from, where it is no http(s) URL: its
    requests would fail as an unreachable server or a missing tokenizer."""
    env = (os.environ.get("OPENAI_BASE_URL") or "").strip()
    for url, where in ((spec.base_url, f"the URL of {spec.text}"),
                       (config.base_url, "--base-url"), (env, "$OPENAI_BASE_URL")):
        if url and url.strip():
            return _http_url(url.strip(), where)
    return default


def _http_url(url: str, where: str) -> str:
    shown = redact_urls(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises on a port that is no number or out of range
    except ValueError as exc:
        raise ModelError(f"{where} {shown!r} is not a server URL ({exc}): write it as "
                         "http://HOST:PORT/v1") from None
    if "://" not in url:
        raise ModelError(f"{where} {shown!r} has no scheme: write http://{shown}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelError(f"{where} {shown!r} is not an http(s) URL: write it as "
                         "http://HOST:PORT/v1")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ModelError(f"{where} {shown!r} holds a space or control character: give the "
                         "URL alone")
    return url


def _openai(spec: ModelSpec, config: GeneratorConfig) -> Generator:
    key = api_key(config, "OPENAI_API_KEY")
    if key is None:
        raise ModelError(f"openai:{spec.rest} needs an API key: set OPENAI_API_KEY "
                         "(or name another variable with --api-key-env)")
    url = server_url(spec, config, OPENAI_URL)
    return OpenAIGenerator(spec.target, url, key, config.http, kind="openai")


def _compatible(spec: ModelSpec, config: GeneratorConfig) -> Generator:
    url = server_url(spec, config)
    if not url:
        raise ModelError(f"openai-compatible:{spec.rest}: give the server's URL, as "
                         f"openai-compatible:URL#{spec.rest} or with --base-url")
    return OpenAIGenerator(spec.target, url, api_key(config, "OPENAI_API_KEY"), config.http)


def _hf(spec: ModelSpec, config: GeneratorConfig, deferred: bool = False) -> Generator:
    from biasscope.backends.checkpoints import from_model
    from biasscope.backends.hf_generate import HFGenerator
    from biasscope.backends.hf_model import HFConfig

    # A GGUF file is converted when the generator loads it, not when it is listed.
    return HFGenerator(from_model(spec.rest, convert=False)[0], HFConfig(
        device=config.device, dtype=config.dtype, batch_size=config.batch_size,
        allow_pickle=config.allow_pickle), deferred=deferred)


def _litellm(spec: ModelSpec, config: GeneratorConfig) -> Generator:
    from biasscope.backends.litellm_http import LiteLLMGenerator

    given = (config.base_url or "").strip()  # optional: litellm knows its providers' URLs
    return LiteLLMGenerator(spec.target, _http_url(given, "--base-url") if given else None,
                            api_key(config, "LITELLM_API_KEY"), config.http)


#: Every generate backend, by the prefix of its spec: one line each.
BACKENDS: dict[str, Factory] = {
    "openai": _openai,
    "openai-compatible": _compatible,
    "hf": _hf,
    "litellm": _litellm,
    "canned": canned.from_spec,
}
GENERATORS = BACKENDS  # the registry's earlier name
#: The backends that ask no server, and what they are instead: `load_generator` refuses a
#: server's URL or key for them (the run would look as if it had asked that server).
NO_SERVER: dict[str, str] = {"hf": "is a local model", "canned": "answers from a fixed list"}


def _refused(text: str, bare: bool) -> ModelError:
    known, text = ", ".join(BACKENDS), redact_urls(text)
    if not bare:
        return ModelError(f"model spec {text!r}: write BACKEND:MODEL with BACKEND one of "
                          f"{known} (e.g. openai:gpt-4o-mini)")
    return ModelError(f"model spec {text!r}: write BACKEND:MODEL with BACKEND one of {known} "
                      "(e.g. openai:gpt-4o-mini), or a local path, hub id[@revision] or "
                      ".gguf file")


def _local(rest: str, text: str) -> ModelSpec:
    """A hub id (``@revision`` allowed), a local folder or a ``.gguf`` file, loaded by ``hf``."""
    source, _, revision = rest.partition("@")
    if not source:
        raise ModelError(f"model spec {text!r}: give a hub id or a local path before the @")
    return ModelSpec("gguf" if is_gguf(source) else "hf", source, revision or None,
                     backend="hf", text=text, rest=rest)


def _server(rest: str, text: str) -> ModelSpec:
    """``URL#MODEL``, or a model name whose server comes from --base-url or the environment."""
    if "://" not in rest:
        return ModelSpec("openai-compatible", rest, text=text, rest=rest)
    url, hash_, model = rest.rpartition("#")
    if not hash_ or not model:
        raise ModelError(f"openai-compatible:{redact_urls(rest)}: write "
                         "openai-compatible:URL#MODEL, "
                         "e.g. openai-compatible:http://127.0.0.1:8000/v1#my-model")
    return ModelSpec("openai-compatible", model, base_url=url, text=text, rest=rest)


def parse_model_spec(text: str, *, bare: bool = True) -> ModelSpec:
    """The one model-spec grammar: ``PREFIX:REST`` for a registered prefix (``hf:``,
    ``openai:``, ``openai-compatible:URL#MODEL``, ``litellm:``, ...), or, with ``bare``, a
    local path or hub id (``@revision`` allowed) or a ``.gguf`` file. Anything else is one
    line naming the known prefixes. Syntax only: nothing is loaded or looked up."""
    prefix, colon, rest = text.partition(":")
    if colon and prefix in BACKENDS:
        if not rest:
            raise _refused(text, bare)
        if prefix == "hf":
            return _local(rest, text)
        if prefix == "openai-compatible":
            return _server(rest, text)
        return ModelSpec(prefix, rest, text=text, rest=rest)
    if bare and text.strip() and (not colon or Path(text).expanduser().exists()):
        return _local(text, text)
    raise _refused(text, bare)


def refuse_server_settings(specs: Sequence[ModelSpec], config: GeneratorConfig,
                           flag: str | None = None) -> None:
    """Refuse ``config``'s ``base_url`` or ``api_key_env`` where none of ``specs`` asks a
    server (`NO_SERVER`): ignored, they would make the run look as if it had asked that
    server. Beside a server's model they are that one's. ``flag``: the option the specs came
    from, so a command's message names its flags."""
    names = (("--base-url", "base_url"), ("--api-key-env", "api_key_env"))
    given = [cli if flag else name for cli, name in names if getattr(config, name)]
    if not given or not specs or any(s.backend not in NO_SERVER for s in specs):
        return
    spec = specs[0]
    raise ModelError(f"{flag or 'load_generator:'} {spec.text} {NO_SERVER[spec.backend]} and "
                     f"asks no server, so {' and '.join(given)} would be ignored: drop "
                     f"{'it' if len(given) == 1 else 'them'}, or give a server's model "
                     "(e.g. openai-compatible:MODEL)")


def refuse_local_settings(specs: Sequence[ModelSpec], config: GeneratorConfig,
                          flag: str = "--model") -> None:
    """Refuse ``config``'s ``device``, ``dtype`` or ``batch_size`` other than their defaults
    where none of ``specs`` loads weights here (an ``hf:`` model or GGUF file): a server picks
    its own device, dtype and batches, and canned answers have none, so the flag would be
    ignored while the command line said the answers came from that device in that dtype.
    Beside a local model they are that one's."""
    default = GeneratorConfig()
    given = [f"{cli} {value}" for cli, value, unset in (
        ("--device", config.device, default.device),
        ("--dtype", config.dtype, default.dtype),
        ("--batch-size", config.batch_size, default.batch_size)) if value != unset]
    if not given or not specs or any(s.backend == "hf" for s in specs):
        return
    spec = specs[0]
    what = NO_SERVER.get(spec.backend, "is a server's model")
    raise ModelError(f"{flag} {spec.text} {what} and loads no weights here, so "
                     f"{_listed(given)} would be ignored: drop "
                     f"{'it' if len(given) == 1 else 'them'}, or give a local model (hf:PATH, "
                     "a hub id or a .gguf file)")


def _listed(given: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(given) if len(given) < 3 else f"{', '.join(given[:-1])} and {given[-1]}"


def load_generator(spec: str | ModelSpec, config: GeneratorConfig | None = None, *,
                   deferred: bool = False) -> Generator:
    """The backend a spec names (see the module docstring for the syntax). A string needs its
    ``BACKEND:`` prefix; a parsed ``ModelSpec`` may be a bare path or hub id. A server's URL
    or key for a model that asks none is refused (`refuse_server_settings`). ``deferred``: a
    local model loads on first use (`HFGenerator`), so a call with nothing left to ask loads
    none."""
    parsed = spec if isinstance(spec, ModelSpec) else parse_model_spec(spec, bare=False)
    config = config or GeneratorConfig()
    refuse_server_settings([parsed], config)
    if deferred and parsed.backend == "hf":
        return _hf(parsed, config, deferred=True)
    return BACKENDS[parsed.backend](parsed, config)


__all__ = ["BACKENDS", "NO_SERVER", "GeneratorConfig", "ModelSpec", "load_generator",
           "parse_model_spec", "refuse_local_settings", "refuse_server_settings"]


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"GeneratorOptions": "GeneratorConfig"}, globals().__getitem__)
