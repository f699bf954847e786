"""A GGUF file is converted by the step that loads it, not by the one that lists it: making an
``hf:`` generator listed the file converted (`from_model`'s default), so a conversion path ran
wherever a generator was made, apart from the one the scoring commands use (`convert_gguf`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("gguf")

import biasscope.backends.gguf as gguf_cache
import biasscope.backends.hf_generate as hf_generate
from biasscope.backends.checkpoints import from_model, unconverted
from biasscope.backends.generators import load_generator
from biasscope.backends.specs import GeneratorConfig
from gguf_fixture import write_llama_gguf


def test_an_hf_generator_is_given_its_gguf_file_unconverted_and_converts_it_as_it_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "before"))
    file = write_llama_gguf(tmp_path / "tiny.gguf")
    eager = hf_generate.HFGenerator(from_model(str(file))[0])  # listed converted, as before
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "now"))
    conversions: list[str] = []
    convert = gguf_cache._convert

    def counted(path: Path, *args: Any) -> None:
        conversions.append(path.name)
        convert(path, *args)

    monkeypatch.setattr(gguf_cache, "_convert", counted)
    given: list[bool] = []
    make = hf_generate.HFGenerator

    def made(ckpt: Any, *args: Any, **kwargs: Any) -> Any:
        given.append(unconverted(ckpt))
        return make(ckpt, *args, **kwargs)

    monkeypatch.setattr(hf_generate, "HFGenerator", made)
    config = GeneratorConfig(device="cpu")
    lazy = load_generator(f"hf:{file}", config)
    assert given == [True] and conversions == ["tiny.gguf"]  # converted by the loader, once
    assert lazy.identity() == eager.identity()  # the same model, recorded as before
    assert lazy.ckpt.source == str(tmp_path / "now" / eager.ckpt.source.rsplit("/", 1)[1])
    load_generator(f"hf:{file}", config)  # the cache copy is there: not converted again
    assert conversions == ["tiny.gguf"]
