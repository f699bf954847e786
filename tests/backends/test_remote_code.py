"""A model trusted to run its own code (``trust_remote_code``) is another model than the same
files loaded without it, and its identity says which code ran: the modules its ``auto_map``
names, from its folder or a hub id's cache, hashed (``remote_code``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasscope.backends.fingerprints import FileDigests, fingerprint_while_loading, remote_code
from biasscope.backends.loading import refuse_remote_code
from biasscope.core.errors import BiasscopeError, ModelError
from biasscope.store.settings import merge_settings
from hub_cache import publish, use_cache

AUTO_MAP = {"AutoConfig": "my_net.MyConfig", "AutoModelForCausalLM": "my_net.MyModel"}


def code_folder(folder: Path, auto_map: dict[str, str] | None = None) -> Path:
    """A model folder whose config names code beside it, which imports a module of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "llama", "auto_map": auto_map or AUTO_MAP}))
    (folder / "my_net.py").write_text("from .layers import Block\n\nclass MyModel: ...\n")
    (folder / "layers.py").write_text("class Block: ...\n")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def identity(folder: Path, trusted: bool) -> dict[str, str]:
    pytest.importorskip("torch")
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf_generate import HFGenerator
    from biasscope.backends.hf_model import HFConfig

    config = HFConfig(device="cpu", trust_remote_code=trusted)
    return HFGenerator(Checkpoint("m", str(folder)), config, deferred=True).identity()


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))


def test_trusting_a_folders_code_and_editing_it_make_another_model(tmp_path):
    """Before, ``trust_remote_code`` was no part of a local model's identity: a run of the
    folder's own classes and one of transformers' (or of its code edited under another run's
    files fingerprint) were one model, mixed in one run."""
    folder = code_folder(tmp_path / "m")
    trusted, untrusted = identity(folder, True), identity(folder, False)
    assert untrusted["remote_code"] == "not run" and len(trusted["remote_code"]) == 64
    assert {k: v for k, v in trusted.items() if k != "remote_code"} == {
        k: v for k, v in untrusted.items() if k != "remote_code"}
    (folder / "layers.py").write_text("class Block:\n    scale = 2\n")  # imported, not named
    edited = identity(folder, True)
    assert edited["remote_code"] != trusted["remote_code"]
    with pytest.raises(BiasscopeError, match=r"models\.m\.remote_code: \"?not run\"? then, "):
        merge_settings(tmp_path / "run.json", {"models": {"m": untrusted}},
                       {"models": {"m": trusted}})
    with pytest.raises(BiasscopeError, match=r"made with a different 'models'.*; and 1 more"):
        merge_settings(tmp_path / "run.json", {"models": {"m": trusted}},
                       {"models": {"m": edited}})


def test_a_model_without_code_has_no_remote_code(tmp_path):
    folder = code_folder(tmp_path / "m")
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert "remote_code" not in identity(folder, True)
    assert "remote_code" not in identity(folder, False)


def test_a_hub_ids_code_is_hashed_from_its_cache(tmp_path, monkeypatch):
    """A hub id's identity held only the commit its branch resolved to; its code is now hashed
    from huggingface_hub's cache, and a module the cache does not hold is refused, not fetched
    unseen."""
    root = use_cache(monkeypatch, tmp_path / "hub")
    commit = publish(root, "org/net", code_folder(tmp_path / "m"))
    with fingerprint_while_loading("org/net", None, True) as prints:
        first = prints()
    assert first["commit"] == commit and len(first["remote_code"]) == 64
    layers = root / "models--org--net" / "snapshots" / commit / "layers.py"
    layers.write_text("class Block:\n    scale = 2\n")
    digests = FileDigests(tmp_path / "c.json")
    assert remote_code("org/net", None, True, digests)["remote_code"] != first["remote_code"]
    assert remote_code("org/net", None, False, digests) == {"remote_code": "not run"}
    layers.unlink()
    with pytest.raises(ModelError, match=r"^org/net: auto_map names code in layers\.py, and "
                       r"layers\.py of org/net@main is not in the Hugging Face cache: load the "
                       r"model once online with trust_remote_code"):
        remote_code("org/net", None, True, digests)


def test_a_hub_ids_code_from_another_repository_is_refused(tmp_path, monkeypatch):
    """`refuse_remote_code` read a local folder's auto_map only: a hub id whose cached config
    named ``other/repo--module.Class`` (code fetched from that repository's main) loaded. Its
    own repository, loaded at its own revision, is no other code."""
    root = use_cache(monkeypatch, tmp_path / "hub")
    publish(root, "org/net", code_folder(tmp_path / "m", {
        "AutoConfig": "org/net--my_net.MyConfig",
        "AutoModelForCausalLM": "other/repo--their_net.TheirModel"}))
    with pytest.raises(ModelError, match=(
            r"^org/net's config\.json: auto_map names other/repo--their_net\.TheirModel, code "
            r"transformers fetches from the hub repository other/repo .*: pin it by copying "
            r"other/repo's their_net\.py .*into a folder of org/net's files")):
        refuse_remote_code("org/net")
    publish(root, "org/net", code_folder(tmp_path / "m2", {
        "AutoConfig": "org/net--my_net.MyConfig"}))
    refuse_remote_code("org/net")
    assert len(remote_code("org/net", None, True, FileDigests(tmp_path / "c.json"))
               ["remote_code"]) == 64


def test_a_run_from_before_remote_code_gains_it(tmp_path):
    """A run recorded before identities held ``remote_code`` cannot show which code ran: it
    is trusted, as with the other identity keys it gained, and records it from then on."""
    from biasscope.store.settings import gain_identity

    now = identity(code_folder(tmp_path / "m"), True)
    old = {"models": {"m": {k: v for k, v in now.items() if k != "remote_code"}}}
    merged = merge_settings(tmp_path / "run.json", gain_identity(old, {"models": {"m": now}}),
                            {"models": {"m": now}})
    assert merged["models"]["m"] == now
