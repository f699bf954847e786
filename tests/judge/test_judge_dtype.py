"""``--dtype`` and ``--batch-size`` of a local judge (``judge``, ``judge-audit``): the dtype is
part of the judge's identity, so run.json records it, a rerun in another is refused before the
judge loads, and the response cache keeps each dtype's verdicts apart; ``auto`` is the dtype it
resolves to (float32 on a CPU). A judge that loads nothing here refuses them. Before, neither
command took them: a local judge ran in ``auto`` at 16 prompts per forward pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasscope.cli.main import main
from no_loads import loads_counted, refused
from test_judge_runs import PAIRS, _files, _jsonl

pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _own_fingerprints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))


def _argv(kind: str, out: Path, tmp_path: Path, model: str, *extra: str) -> list[str]:
    pairs = _jsonl(tmp_path / "pairs.jsonl", PAIRS[:2])
    local = () if model.startswith(("canned:", "openai")) else ("--device", "cpu")  # refused
    return [kind, "--model", model, "--input", str(pairs), "--out", str(out), "--cache",
            str(tmp_path / "cache.sqlite"), *local, *extra]


def _dtype(out: Path) -> str:
    return str(json.loads((out / "run.json").read_text())["settings"]["judges"]["J"]["dtype"])


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_local_judges_dtype_is_recorded_checked_and_keyed(kind, tmp_path, checkpoint_dirs,
                                                            monkeypatch, capsys):
    import biasscope.backends.hf_generate as hf_generate

    model = f"J=hf:{checkpoint_dirs[0]}"
    half, full = tmp_path / "half", tmp_path / "full"
    loads = loads_counted(monkeypatch, hf_generate)
    assert main(_argv(kind, half, tmp_path, model, "--dtype", "bfloat16")) == 0, \
        capsys.readouterr().err
    assert _dtype(half) == "bfloat16" and len(loads) == 1
    # Another dtype into the same run: refused in one line, before the judge loads.
    before, loads[:] = _files(half), []
    capsys.readouterr()
    with monkeypatch.context() as patched:
        refused(_argv(kind, half, tmp_path, model, "--dtype", "float32"),
                "judges.J.dtype: \"bfloat16\" then, \"float32\" now",
                loads_counted(patched, hf_generate, fail=True), capsys)
    assert _files(half) == before
    # The same cache: float32's verdicts are asked anew, not served from bfloat16's.
    assert main(_argv(kind, full, tmp_path, model, "--dtype", "float32")) == 0, \
        capsys.readouterr().err
    assert _dtype(full) == "float32" and loads == [str(checkpoint_dirs[0])]
    # `auto` on a CPU is float32: the same run, every verdict cached, nothing loaded.
    loads[:] = []
    assert main(_argv(kind, full, tmp_path, model, "--dtype", "auto")) == 0, \
        capsys.readouterr().err
    assert loads == [] and _dtype(full) == "float32"


def test_a_local_judge_takes_the_batch_size_given(tmp_path, checkpoint_dirs, monkeypatch,
                                                  capsys):
    """Prompts per forward pass: speed and memory, not the verdict's cache key."""
    import biasscope.backends.hf_generate as hf_generate

    sizes: list[int] = []
    generate = hf_generate.HFGenerator.generate

    def counted(self, requests):
        sizes.append(self.config.batch_size)
        return generate(self, requests)

    monkeypatch.setattr(hf_generate.HFGenerator, "generate", counted)
    argv = _argv("judge", tmp_path / "run", tmp_path, f"J=hf:{checkpoint_dirs[0]}")
    assert main([*argv, "--batch-size", "3", "--no-cache"]) == 0, capsys.readouterr().err
    assert sizes and set(sizes) == {3}


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
@pytest.mark.parametrize(("extra", "said"), [
    (["--dtype", "bfloat16"], "--dtype bfloat16 would be ignored"),
    (["--batch-size", "4"], "--batch-size 4 would be ignored"),
    (["--dtype", "float16", "--batch-size", "4"],
     "--dtype float16 and --batch-size 4 would be ignored: drop them")])
def test_a_judge_that_loads_nothing_here_refuses_them(kind, extra, said, tmp_path, capsys):
    """A server picks its own dtype (and canned answers have none): the run would say the
    verdicts came in the dtype asked."""
    out = tmp_path / "run"
    refused(_argv(kind, out, tmp_path, "openai-compatible:http://127.0.0.1:9/v1#m", *extra),
            f"--model openai-compatible:http://127.0.0.1:9/v1#m is a server's model and loads "
            f"no weights here, so {said}", [], capsys)
    refused(_argv(kind, out, tmp_path, "canned:A|B", *extra),
            "answers from a fixed list and loads no weights here", [], capsys)
    assert not out.exists()


def test_beside_a_local_judge_a_servers_judge_takes_the_panels_dtype(tmp_path, checkpoint_dirs,
                                                                     capsys):
    """In a panel, the local judge loads in the dtype given; the canned one is as it was."""
    argv = _argv("judge", tmp_path / "run", tmp_path, f"J=hf:{checkpoint_dirs[0]}",
                 "--model", "C=canned:A|B", "--dtype", "bfloat16", "--batch-size", "2")
    assert main(argv) == 0, capsys.readouterr().err
    judges = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]["judges"]
    assert judges["J"]["dtype"] == "bfloat16" and "dtype" not in judges["C"]
