"""A Hugging Face hub cache on disk in huggingface_hub's layout (``models--ORG--NAME/refs/main``
naming a ``snapshots/<commit>/`` folder), so tests load a hub id offline (conftest sets
``HF_HUB_OFFLINE``)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest


def use_cache(monkeypatch: pytest.MonkeyPatch, root: Path) -> Path:
    """``root`` as the hub cache of this test (huggingface_hub reads it at each call)."""
    import huggingface_hub.constants as constants

    root.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    return root


def publish(root: Path, repo: str, folder: Path, ref: str = "main") -> str:
    """``folder``'s files as a new commit of ``repo`` that ``ref`` points at (the branch moved
    there, as a download of it would leave the cache); returns the commit."""
    place = root / f"models--{repo.replace('/', '--')}"
    commit = hashlib.sha1(f"{repo}{len(list(place.glob('snapshots/*')))}".encode()).hexdigest()
    shutil.copytree(folder, place / "snapshots" / commit)
    (place / "refs").mkdir(parents=True, exist_ok=True)
    (place / "refs" / ref).write_text(commit)
    return commit
