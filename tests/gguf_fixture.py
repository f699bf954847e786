"""Small GGUF files for the GGUF-checkpoint tests, written with the ``gguf`` package.

``write_llama_gguf``: a 2-layer Llama with random weights, its matrices quantised to Q8_0 (so
loading dequantises them, as for a real file), and a SentencePiece vocabulary with byte fallback
(``llama_server``'s: every text tokenizes). ``write_unsupported_gguf``: a file whose
architecture transformers cannot read.
"""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np

from llama_server import BOS, EOS, UNK, _vocabulary

N_EMBD, N_FF, N_HEAD, N_LAYER = 64, 128, 4, 2


def write_llama_gguf(path: Path, seed: int = 0, letters: bool = False) -> Path:
    """``letters``: single characters as tokens too, so that transformers' converted tokenizer
    (BPE merges built from the vocabulary, each needing both halves) splits text as
    llama.cpp's SentencePiece does; without them it falls back to bytes where llama.cpp merges."""
    import gguf

    tokens, types, _, _ = _vocabulary()
    if letters:
        extra = [c for c in string.ascii_letters + string.digits if c not in tokens]
        tokens, types = tokens + extra, types + [int(gguf.TokenType.NORMAL)] * len(extra)
    rng = np.random.default_rng(seed)
    q8 = gguf.GGMLQuantizationType.Q8_0
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("biasscope-q8-llama")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_context_length(1024)  # the longest WinoBias prompt, in byte pieces, fits
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    # Longer pieces score higher, so words are single pieces rather than bytes.
    writer.add_token_scores([float(len(t)) if k == 1 else 0.0 for t, k in zip(tokens, types)])
    writer.add_token_types(types)
    writer.add_bos_token_id(BOS)
    writer.add_eos_token_id(EOS)
    writer.add_unk_token_id(UNK)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)

    def matrix(name: str, rows: int, cols: int, scale: float = 0.3) -> None:
        data = rng.normal(0.0, scale, size=(rows, cols)).astype(np.float32)
        writer.add_tensor(name, gguf.quants.quantize(data, q8), raw_dtype=q8)

    def norm(name: str, size: int) -> None:
        writer.add_tensor(name, rng.uniform(0.8, 1.2, size=size).astype(np.float32))

    matrix("token_embd.weight", len(tokens), N_EMBD, 1.0)
    for layer in range(N_LAYER):
        blk = f"blk.{layer}"
        norm(f"{blk}.attn_norm.weight", N_EMBD)
        for part in ("q", "k", "v", "output"):
            matrix(f"{blk}.attn_{part}.weight", N_EMBD, N_EMBD)
        norm(f"{blk}.ffn_norm.weight", N_EMBD)
        matrix(f"{blk}.ffn_gate.weight", N_FF, N_EMBD)
        matrix(f"{blk}.ffn_up.weight", N_FF, N_EMBD)
        matrix(f"{blk}.ffn_down.weight", N_EMBD, N_FF)
    norm("output_norm.weight", N_EMBD)
    matrix("output.weight", len(tokens), N_EMBD)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_unsupported_gguf(path: Path, architecture: str = "rwkv6") -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
