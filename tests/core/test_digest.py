"""core.digest: one SHA-256 of a file for every caller (fingerprints, data checksums, GGUF)."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

from biasscope.core import digest
from biasscope.core.errors import BiasscopeError
from traced import traced_peak


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 4096 + 5])
def test_the_digest_is_hashlib_over_the_whole_file(tmp_path, monkeypatch, size):
    monkeypatch.setattr(digest, "BLOCK", 4096)  # whole blocks, a short last one, none
    monkeypatch.setattr(digest, "_SMALLEST", 16)
    path = tmp_path / "w.bin"
    path.write_bytes(os.urandom(size))
    assert digest.file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_small_file_is_read_into_a_buffer_of_its_own_size(tmp_path):
    path = tmp_path / "small.bin"
    path.write_bytes(os.urandom(200_000))
    _, peak = traced_peak(lambda: digest.file_sha256(path))
    assert peak < 1 << 20  # not the 64 MiB block a checkpoint's weights get


def test_an_unreadable_file_is_a_one_line_error_naming_it(tmp_path):
    with pytest.raises(BiasscopeError, match="cannot read") as caught:
        digest.file_sha256(tmp_path / "missing.safetensors")
    assert str(tmp_path / "missing.safetensors") in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_stopped_hash_is_abandoned(tmp_path, monkeypatch):
    monkeypatch.setattr(digest, "BLOCK", 4096)
    monkeypatch.setattr(digest, "_SMALLEST", 16)
    path = tmp_path / "w.bin"
    path.write_bytes(os.urandom(10_000))
    stop = threading.Event()
    stop.set()
    with pytest.raises(BiasscopeError, match="abandoned"):
        digest.file_sha256(path, stop)
