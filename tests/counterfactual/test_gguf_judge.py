"""A GGUF judge in ``counterfactual``: known by its file's path and SHA-256 before it loads
(hashed, not converted), so a call ``--out``'s run would refuse is refused before any judge
loads, and by the file, never by the cache folder it was converted into."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("gguf")

from biasscope.cli.main import main
from no_loads import no_loads, refused
from test_counterfactual import _wife_pairs


def test_a_gguf_judges_run_is_checked_before_any_judge_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """With a GGUF judge in the panel nothing was checked before loading: a canned judge
    renamed beside it, or another GGUF file under the run's name, was refused only once the
    file had been converted and loaded; and another $BIASSCOPE_GGUF_CACHE was refused as
    another judge (run.json named the cache folder)."""
    import biasscope.backends.gguf as gguf
    import biasscope.backends.hf_generate as hf_generate
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "here"))
    first = write_llama_gguf(tmp_path / "a.gguf")
    other = write_llama_gguf(tmp_path / "b.gguf", seed=1)
    pairs = tmp_path / "pairs.jsonl"
    _wife_pairs(pairs, 3)
    out = tmp_path / "run"
    argv = ["counterfactual", "--pairs", str(pairs), "--device", "cpu", "--no-cache",
            "--out", str(out)]

    def panel(canned: str, model: str) -> list[str]:
        return [*argv, "--judge-model", f"{canned}=canned:A", "--judge-model", model]

    assert main(panel("J", f"G={first}")) == 0, capsys.readouterr().err
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "there"))
    assert main(panel("J", f"G={first}")) == 0, capsys.readouterr().err
    entry = json.loads((out / "run.json").read_text())["settings"]["scorers"]["G"]
    assert entry["source"] == entry["gguf_file"] == str(first.resolve())
    capsys.readouterr()
    loads: list[str] = []
    no_loads(monkeypatch, hf_generate, loads, "HFGenerator")
    monkeypatch.setattr(gguf, "_convert", lambda *_: loads.append("converted"))
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "empty"))
    refused(panel("K", f"G={first}"), "holds this scorer as 'J', and this call names it 'K'",
            loads, capsys)
    refused(panel("J", f"H={first}"), "holds this scorer as 'G', and this call names it 'H'",
            loads, capsys)
    refused(panel("J", f"G={other}"), "different settings of scorer 'G' (", loads, capsys)


def test_a_gguf_reward_model_is_known_by_its_file_before_it_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GGUF reward model had no identity before loading (nothing checked), and once loaded
    its source was the cache folder: another cache was another reward model."""
    import biasscope.backends.gguf as gguf
    from biasscope.backends.reward import RewardConfig, identities_before_loading
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gguf, "_convert", lambda *_: pytest.fail("converted"))
    path = write_llama_gguf(tmp_path / "rm.gguf")
    (entry,) = identities_before_loading([(None, str(path))], RewardConfig(device="cpu"),
                                         "--reward-model").values()
    assert entry["source"] == entry["gguf_file"] == str(path.resolve())
    assert entry["gguf_sha256"] == gguf.file_sha256(path)
    assert entry["gguf_quantization"] == "Q8_0" and entry["dtype"] == "float32"


def test_the_dtype_given_is_a_local_judges_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--dtype`` was the reward models' alone: a local judge loaded in ``auto`` whatever was
    given. It is now every local model's, recorded in the judge's entry and checked before it
    loads; beside a reward model a server's judge takes it (the reward model's), alone it
    refuses it (nothing here would load in it)."""
    import biasscope.backends.hf_generate as hf_generate
    from gguf_fixture import write_llama_gguf
    from test_counterfactual import _tiny_reward_model

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "gguf"))
    path, pairs, out = write_llama_gguf(tmp_path / "a.gguf"), tmp_path / "pairs.jsonl", \
        tmp_path / "run"
    _wife_pairs(pairs, 3)
    argv = ["counterfactual", "--pairs", str(pairs), "--device", "cpu", "--no-cache"]
    judged = [*argv, "--out", str(out), "--judge-model", f"G={path}"]
    assert main([*judged, "--dtype", "bfloat16"]) == 0, capsys.readouterr().err
    entry = json.loads((out / "run.json").read_text())["settings"]["scorers"]["G"]
    assert entry["dtype"] == "bfloat16"
    capsys.readouterr()
    loads: list[str] = []
    no_loads(monkeypatch, hf_generate, loads, "HFGenerator")
    refused(judged, "scorer 'G' (dtype: \"bfloat16\" then, \"float32\" now)", loads, capsys)
    refused([*argv[:3], "--no-cache", "--out", str(tmp_path / "canned"), "--judge-model",
             "J=canned:A", "--dtype", "bfloat16"], "--judge-model canned:A answers from a "
            "fixed list and loads no weights here, so --dtype bfloat16 would be ignored", loads,
            capsys)
    rewarded = [*argv, "--out", str(tmp_path / "both"), "--judge-model", "J=canned:A",
                "--reward-model", f"R={_tiny_reward_model(tmp_path / 'rm')}",
                "--no-chat-template", "--dtype", "bfloat16"]
    assert main(rewarded) == 0, capsys.readouterr().err
    scorers = json.loads((tmp_path / "both" / "run.json").read_text())["settings"]["scorers"]
    assert scorers["R"]["dtype"] == "bfloat16" and "dtype" not in scorers["J"]
