"""The dtype a local checkpoint loads in under ``--dtype auto``, read from its files before it
loads (`dtype_before_loading`), is the one transformers gives the loaded model: the config's
``dtype`` (or older ``torch_dtype``), else the weights' own as saved; float32 on a CPU, as
`load_model` loads it. The device is a parameter: a GPU's answer is checked here without one
(``resolve_dtype`` passes "auto" through for any device that is not a CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from biasscope.backends.checkpoints import Checkpoint  # noqa: E402
from biasscope.backends.hf_model import (  # noqa: E402
    HFConfig,
    dtype_before_loading,
    load_model,
    resolve_dtype,
)

#: (saved in, config.json's dtype entries) -> the dtype transformers loads under "auto".
CASES = {
    "config bfloat16": ("float32", {"torch_dtype": "bfloat16"}, "bfloat16"),
    "config float16": ("float32", {"torch_dtype": "float16"}, "float16"),
    "config float32": ("bfloat16", {"torch_dtype": "float32"}, "float32"),
    "dtype over torch_dtype": ("float32", {"dtype": "bfloat16", "torch_dtype": "float32"},
                               "bfloat16"),
    "absent, saved bfloat16": ("bfloat16", {}, "bfloat16"),
    "absent, saved float16": ("float16", {}, "float16"),
    "absent, saved float32": ("float32", {}, "float32"),
}


def _folder(where: Path, tokenizer, saved: str, said: dict[str, str]) -> Path:
    from biasscope.demo.tiny import save, tiny_gpt_neox

    save(tiny_gpt_neox(len(tokenizer), seed=0).to(getattr(torch, saved)), tokenizer, where)
    config = json.loads((where / "config.json").read_text())
    config = {k: v for k, v in config.items() if k not in ("dtype", "torch_dtype")}
    (where / "config.json").write_text(json.dumps({**config, **said}))
    return where


def _loaded(folder: Path, device: str) -> str:
    """The dtype of the loaded model's weights, loaded as `load_model` loads them there."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=resolve_dtype("auto", torch.device(device)))
    return str(next(model.parameters()).dtype).removeprefix("torch.")


@pytest.mark.parametrize("case", sorted(CASES))
def test_auto_on_a_gpu_is_the_dtype_the_loaded_model_gets(case, tiny_tokenizer, tmp_path):
    saved, said, expected = CASES[case]
    folder = _folder(tmp_path / "m", tiny_tokenizer, saved, said)
    for device in ("cuda", "mps"):
        assert dtype_before_loading(folder, "auto", device) == _loaded(folder, device) == expected


def test_auto_on_a_cpu_is_float32_as_it_loads(tiny_tokenizer, tmp_path):
    folder = _folder(tmp_path / "m", tiny_tokenizer, "bfloat16", {"torch_dtype": "bfloat16"})
    model = load_model(Checkpoint("m", str(folder)), HFConfig(device="cpu"))
    assert dtype_before_loading(folder, "auto", "cpu") == "float32"
    assert next(model.parameters()).dtype == torch.float32
    model = load_model(Checkpoint("m", str(folder)), HFConfig(device="cpu", dtype="float16"))
    assert dtype_before_loading(folder, "float16", "cpu") == "float16"
    assert next(model.parameters()).dtype == torch.float16


def test_none_where_only_a_load_tells(tiny_tokenizer, tmp_path):
    """A hub id, a quantised checkpoint, weights of mixed dtypes with no config entry, a
    config entry that is no torch dtype: the weights load to tell."""
    from safetensors.torch import load_file, save_file

    assert dtype_before_loading("org/model", "auto", "cuda") is None
    assert dtype_before_loading("org/model", "bfloat16", "cuda") == "bfloat16"
    folder = _folder(tmp_path / "q", tiny_tokenizer, "float32", {
        "torch_dtype": "float16", "quantization_config": {"quant_method": "bitsandbytes"}})
    assert dtype_before_loading(folder, "auto", "cuda") is None
    folder = _folder(tmp_path / "mixed", tiny_tokenizer, "float32", {})
    weights = load_file(folder / "model.safetensors")
    first = sorted(weights)[0]
    weights[first] = weights[first].to(torch.bfloat16)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    assert dtype_before_loading(folder, "auto", "cuda") is None
    folder = _folder(tmp_path / "odd", tiny_tokenizer, "float32", {"torch_dtype": "auto"})
    assert dtype_before_loading(folder, "auto", "cuda") is None
