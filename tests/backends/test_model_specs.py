"""The one model-spec grammar (``parse_model_spec``) and the backend registry it reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from biasscope.backends.generators import BACKENDS, load_generator, parse_model_spec
from biasscope.backends.specs import GeneratorConfig, ModelSpec
from biasscope.core.errors import BiasscopeError, ModelError


@pytest.mark.parametrize(("text", "kind", "target", "revision", "base_url"), [
    ("EleutherAI/pythia-160m", "hf", "EleutherAI/pythia-160m", None, None),
    ("EleutherAI/pythia-160m@step1000", "hf", "EleutherAI/pythia-160m", "step1000", None),
    ("./runs/out/checkpoint-10", "hf", "./runs/out/checkpoint-10", None, None),
    ("hf:EleutherAI/pythia-160m@step143000", "hf", "EleutherAI/pythia-160m", "step143000",
     None),
    ("hf:./model.gguf", "gguf", "./model.gguf", None, None),
    ("/models/tiny-Q8_0.GGUF", "gguf", "/models/tiny-Q8_0.GGUF", None, None),
    ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None, None),
    ("openai-compatible:http://127.0.0.1:8000/v1#my-model", "openai-compatible", "my-model",
     None, "http://127.0.0.1:8000/v1"),
    ("openai-compatible:my-model", "openai-compatible", "my-model", None, None),
    ("litellm:vertex_ai/claude-3-5-sonnet@20240620", "litellm",
     "vertex_ai/claude-3-5-sonnet@20240620", None, None),  # @ is no revision on a server
])
def test_every_form_parses(text: str, kind: str, target: str, revision: str | None,
                           base_url: str | None) -> None:
    spec = parse_model_spec(text)
    assert (spec.kind, spec.target, spec.revision, spec.base_url) == (
        kind, target, revision, base_url)
    assert spec.text == text and spec.backend in BACKENDS
    assert spec.backend == ("hf" if kind == "gguf" else kind)


def test_a_local_path_with_a_colon_is_still_a_path(tmp_path: Path) -> None:
    folder = tmp_path / "run:1"
    folder.mkdir()
    assert parse_model_spec(str(folder)) == ModelSpec(
        "hf", str(folder), backend="hf", text=str(folder), rest=str(folder))


@pytest.mark.parametrize("text", ["ollama:llama3", "gpt:4", "hf:", "", "@main"])
def test_unknown_prefixes_name_the_known_ones(text: str) -> None:
    with pytest.raises(ModelError) as caught:
        parse_model_spec(text)
    message = str(caught.value)
    assert "\n" not in message
    if text not in ("@main",):
        assert all(prefix in message for prefix in BACKENDS), message


def test_load_generator_still_wants_a_prefix() -> None:
    """A bare name is no generate backend: gpt-4o would be taken for a hub id."""
    with pytest.raises(ModelError, match="write BACKEND:MODEL with BACKEND one of openai, "
                       r"openai-compatible, hf, litellm, canned \(e.g. openai:gpt-4o-mini\)$"):
        load_generator("gpt-4o")
    assert parse_model_spec("gpt-4o").kind == "hf"  # bare: for the scoring commands


@pytest.mark.parametrize(("spec", "said"), [
    ("hf:org/never-loaded", "load_generator: hf:org/never-loaded is a local model"),
    (parse_model_spec("./never-there.gguf"), "load_generator: ./never-there.gguf is a local"),
    ("canned:A", "load_generator: canned:A answers from a fixed list"),
])
@pytest.mark.parametrize(("given", "named"), [
    ({"base_url": "http://127.0.0.1:9/v1"}, "base_url would be ignored: drop it"),
    ({"api_key_env": "MY_KEY"}, "api_key_env would be ignored: drop it"),
    ({"base_url": "http://127.0.0.1:9/v1", "api_key_env": "MY_KEY"},
     "base_url and api_key_env would be ignored: drop them"),
])
def test_load_generator_refuses_a_server_url_or_key_for_a_model_that_asks_none(
        spec: str | ModelSpec, said: str, given: dict[str, str], named: str) -> None:
    """Before: only the commands refused them; a notebook's hf: model ignored the URL."""
    with pytest.raises(ModelError) as caught:
        load_generator(spec, GeneratorConfig(**given))  # type: ignore[arg-type]
    assert said in str(caught.value) and named in str(caught.value)
    assert "\n" not in str(caught.value) and "cannot load" not in str(caught.value)


def test_a_registered_prefix_is_known_to_the_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "toy", lambda spec, config: None)  # type: ignore[arg-type,return-value]
    spec = parse_model_spec("toy:any/name@v1")
    assert (spec.kind, spec.target, spec.revision) == ("toy", "any/name@v1", None)
    with pytest.raises(ModelError, match="toy"):
        parse_model_spec("nope:x")


def test_every_text_command_takes_a_bare_local_path_or_hub_id(checkpoint_dirs, tmp_path):
    """One grammar: ``audit``/``judge``/``generate`` --model ./dir is hf:./dir (a bare
    ``gpt-4o`` keeps its one-line "write BACKEND:MODEL" error)."""
    pytest.importorskip("torch")
    from biasscope.backends.config import BackendConfig

    config = BackendConfig(device="cpu", no_cache=True)
    folder = str(checkpoint_dirs[0])
    assert config.generator(folder).identity() == config.generator(f"hf:{folder}").identity()
    with pytest.raises(BiasscopeError, match="BACKEND:MODEL"):
        config.generator("gpt-4o")


@pytest.mark.parametrize("missing", ["nonexist.gguf", "/nowhere/m.gguf", "./nowhere-dir"])
def test_a_missing_local_model_is_said_to_be_missing(missing: str) -> None:
    """Before: a missing .gguf path got the "write BACKEND:MODEL" error, and a bare
    ``name.gguf`` went looking on the hub."""
    from biasscope.backends.config import BackendConfig

    with pytest.raises(BiasscopeError, match=r"checkpoint (file|directory) .* does not exist"):
        BackendConfig(device="cpu", no_cache=True).generator(missing)


def test_an_api_key_is_read_without_the_whitespace_around_it(monkeypatch) -> None:
    """A key from a CRLF .env file ends in \\r: the HTTP client refused the header and the
    error said the server could not be reached."""
    from biasscope.backends.specs import GeneratorConfig, api_key

    monkeypatch.setenv("MY_KEY", "sk-abc123\r\n")
    assert api_key(GeneratorConfig(api_key_env="MY_KEY"), "OPENAI_API_KEY") == "sk-abc123"
    monkeypatch.setenv("MY_KEY", "sk-abc\x07123")
    with pytest.raises(ModelError, match=r"\$MY_KEY holds a space or control") as caught:
        api_key(GeneratorConfig(api_key_env="MY_KEY"), "OPENAI_API_KEY")
    assert "abc" not in str(caught.value)
