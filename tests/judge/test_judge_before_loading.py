"""A ``judge`` or ``judge-audit`` rerun into ``--out`` with another setting, judge or judge
name is refused before a local judge loads (or a GGUF file is converted), in the words the
check once it has loaded says: only ``--input`` and ``--labels`` were checked first, the rest
once the judges were made (a local one loaded, minutes)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from biasscope.cli.main import main
from no_loads import no_loads, refused
from test_judge_runs import PAIRS, _files, _jsonl

pytest.importorskip("torch")

_AGAIN = "; use another --out or the same settings"


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    return _jsonl(tmp_path / "pairs.jsonl", PAIRS[:2])


@pytest.fixture(autouse=True)
def _own_fingerprints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))


def _argv(kind: str, out: Path, data: Path, *models: str) -> list[str]:
    return [kind, *[a for m in models for a in ("--model", m)], "--input", str(data),
            "--out", str(out), "--no-cache", "--device", "cpu"]


def _no_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import biasscope.backends.hf_generate as hf_generate

    loads: list[str] = []
    no_loads(monkeypatch, hf_generate, loads, "HFGenerator")
    return loads


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_another_option_is_refused_before_a_local_judge_loads(
        kind, pairs, tmp_path, checkpoint_dirs, monkeypatch, capsys):
    """Each option that changes a verdict, said as the check after loading said it."""
    out = tmp_path / "run"
    argv = _argv(kind, out, pairs, f"J=hf:{checkpoint_dirs[0]}")
    assert main(argv) == 0, capsys.readouterr().err
    before, loads = _files(out), _no_loads(monkeypatch)
    capsys.readouterr()
    changed = [(["--seed", "7"], "'seed' (0 then, 7 now)"),
               (["--keys", "1,2,3"], "'keys' ("),
               (["--no-logit-bias"], "'logit_bias' (true then, false now)"),
               (["--reasoning"], "'reasoning' (false then, true now)"),
               (["--ranking", "bradley-terry"], "'ranking' (\"win-rate\" then, ")]
    if kind == "judge":  # judge-audit asks both orders whatever --position says
        changed.append((["--position", "permute"],
                        "'position' (\"shuffle\" then, \"permute\" now)"))
    for extra, said in changed:
        refused([*argv, *extra], f"{out}/run.json was made with a different {said}", loads,
                capsys)
        assert _files(out) == before


def test_another_judge_or_name_is_refused_before_a_local_judge_loads(
        pairs, tmp_path, checkpoint_dirs, monkeypatch, capsys):
    """Another folder under the run's name, the judge under another name, one added (a
    served judge beside it, made without a request: the local one never loads), and the
    run's judges in another order."""
    out = tmp_path / "run"
    first, second = (f"hf:{d}" for d in checkpoint_dirs[:2])
    argv = _argv("judge", out, pairs, f"J={first}", "K=canned:A|B")
    assert main(argv) == 0, capsys.readouterr().err
    before, loads = _files(out), _no_loads(monkeypatch)
    capsys.readouterr()
    for models, said in [
            ((f"J={second}", "K=canned:A|B"),
             "a different 'judges' (judges.J.source: …\"ckpoint-10\" then, …\"ckpoint-20\" "),
            ((f"I={first}", "K=canned:A|B"),
             "a different 'judges' (judges.I: not recorded then"),
            ((f"J={first}", "K=canned:A|B", "L=canned:B"),
             "a different 'judges' (judges.L: not recorded then"),
            ((f"J={first}", "K=canned:B"), "a different 'judges' (judges.K.model: \"A|B\" "),
            ((f"J={first}",), "a different 'judges' (judges.K: {")]:
        refused(_argv("judge", out, pairs, *models), f"{out}/run.json was made with {said}",
                loads, capsys)
        assert _files(out) == before
    refused(_argv("judge", out, pairs, "K=canned:A|B", f"J={first}"),
            f"{out}/run.json has its judges in the order J, K, and this call gives K, J", loads,
            capsys)
    assert _files(out) == before


def test_a_local_judges_weights_replaced_in_place_are_refused_before_they_load(
        pairs, tmp_path, checkpoint_dirs, monkeypatch, capsys):
    """The folder is hashed before it loads (cached: the load hashes nothing again) where
    the run recorded its weights' fingerprint; the path alone said it was the same judge."""
    folder, out = tmp_path / "gemma", tmp_path / "run"
    shutil.copytree(checkpoint_dirs[0], folder)
    argv = _argv("judge", out, pairs, f"J=hf:{folder}")
    assert main(argv) == 0, capsys.readouterr().err
    recorded = json.loads((out / "run.json").read_text())["settings"]["judges"]["J"]
    for weights in checkpoint_dirs[1].glob("*.safetensors"):
        shutil.copy(weights, folder / weights.name)
    before, loads = _files(out), _no_loads(monkeypatch)
    capsys.readouterr()
    refused(argv, f"a different 'judges' (judges.J.fingerprint: "
                  f"{recorded['fingerprint'][:12]}… then, ", loads, capsys)
    assert _files(out) == before


def test_another_gguf_file_under_the_runs_path_is_refused_before_it_is_converted(
        pairs, tmp_path, monkeypatch, capsys):
    """Known by its SHA-256 before it is converted or loaded."""
    pytest.importorskip("gguf")
    import biasscope.backends.gguf as gguf
    from gguf_fixture import write_llama_gguf

    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "cache"))
    path, out = write_llama_gguf(tmp_path / "judge.gguf"), tmp_path / "run"
    argv = _argv("judge", out, pairs, f"G=hf:{path}")
    assert main(argv) == 0, capsys.readouterr().err
    then = json.loads((out / "run.json").read_text())["settings"]["judges"]["G"]["gguf_sha256"]
    write_llama_gguf(path, seed=1)
    before, loads = _files(out), _no_loads(monkeypatch)
    monkeypatch.setattr(gguf, "_convert", lambda *_: loads.append("converted"))
    capsys.readouterr()
    refused(argv, f"a different 'judges' (judges.G.gguf_sha256: {then[:12]}… then, ", loads,
            capsys)
    assert _files(out) == before


def test_a_local_judges_dtype_on_a_gpu_is_checked_before_it_loads(
        pairs, tmp_path, checkpoint_dirs, monkeypatch, capsys):
    """On a GPU, ``--dtype auto`` loads the dtype the judge's config names: it is read from
    its files by the rule its load checks (`checkpoint_dtype`), as for an audit's model. The
    judge's own rule knew a CPU's float32 alone, so on a GPU it loaded to tell."""
    import torch

    import biasscope.backends.hf_generate as hf_generate
    from biasscope.judge import panel

    folder, out = tmp_path / "gemma", tmp_path / "run"
    shutil.copytree(checkpoint_dirs[0], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    argv = _argv("judge", out, pairs, f"J=hf:{folder}")
    assert main(argv) == 0, capsys.readouterr().err  # on the CPU: float32
    assert json.loads((out / "run.json").read_text())["settings"]["judges"]["J"]["dtype"] \
        == "float32"
    before, loads = _files(out), _no_loads(monkeypatch)
    for module in (panel, hf_generate):
        monkeypatch.setattr(module, "resolve_device", lambda name: torch.device("cuda"))
    capsys.readouterr()
    refused([a for a in argv if a not in ("--device", "cpu")],
            "a different 'judges' (judges.J.dtype: \"float32\" then, \"bfloat16\" now)", loads,
            capsys)
    assert _files(out) == before
