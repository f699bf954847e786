from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from llama_server import Server, TinyLlama, serve, write_tiny_gguf
from require import missing_modules, require
from s3_server import S3, moto_s3
from winobias_fixture import write_winobias

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ["BIASSCOPE_OFFLINE"] = "1"  # tests never download; a missing fixture fails fast
os.environ["BIASSCOPE_OWN_DATA"] = "1"  # fixture data dirs are not the pinned upstream files


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Tiny models on a shared 2-core machine: extra OpenMP threads only spin (10-20x slower)."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="session")
def winobias_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_winobias(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="session")
def tiny_tokenizer(winobias_dir: Path):
    from biasscope.demo.tiny import train_tokenizer
    from biasscope.probes import load_probe

    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    texts = [it.prompt + " male female not specified" for s in range(3) for it in probe.items(s)]
    return train_tokenizer(texts * 3, vocab_size=320)


@pytest.fixture(scope="session")
def checkpoint_dirs(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer) -> list[Path]:
    """Three random-init tiny GPT-NeoX checkpoints, as a Trainer would name them. Their
    context (rotary: no weights depend on it) holds the longest BBQ and Adult chats."""
    from biasscope.demo.tiny import save, tiny_gpt_neox

    root = tmp_path_factory.mktemp("train")
    return [save(tiny_gpt_neox(len(tiny_tokenizer), seed=step, max_positions=1024),
                 tiny_tokenizer,
                 root / f"checkpoint-{step}") for step in (10, 20, 30)]


# --- a real OpenAI-compatible server (llama-cpp-python) serving a tiny exact GGUF model --------

SERVER_INSTALL = "run scripts/llama-wheel.sh <venv>/bin/python (and pip install gguf openai)"


def _require_modules(*modules: str) -> None:
    require(missing_modules(*modules), "BIASSCOPE_REQUIRE_SERVER", SERVER_INSTALL)


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> TinyLlama:
    """A tiny Llama GGUF (tests/llama_server.py) with exactly computable next-token log-probs."""
    _require_modules("gguf")
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture(scope="session")
def llama_server(tiny_gguf: TinyLlama, tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[Server]:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1 serving `tiny_gguf` as "tiny"."""
    _require_modules("llama_cpp", "fastapi", "uvicorn")
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with serve(tiny_gguf.path, log_path=log) as server:
        yield server


@pytest.fixture(scope="session")
def s3() -> Iterator[S3]:
    """A local S3 server (tests/s3_server.py) for runs at s3:// URLs."""
    with moto_s3() as server:
        yield server
