"""``--device`` beside a model that loads no weights here (a server's, canned answers) is
refused by every command that takes it, as ``--dtype`` and ``--batch-size`` are: the server
picks its own device, so the run would say its answers came from the one asked. Before, it was
taken and ignored. Beside a local model (a counterfactual check's reward models) it is theirs.
``sensitivity`` always scores local reward models, so its ``--device`` is always used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasscope.backends.generators import (
    GeneratorConfig,
    parse_model_spec,
    refuse_local_settings,
)
from biasscope.cli.main import main
from biasscope.core.errors import ModelError
from no_loads import refused

SERVER = "openai-compatible:http://127.0.0.1:9/v1#m"


def _argv(command: str, model: str, tmp_path: Path) -> list[str]:
    prompts, pairs, swapped = (tmp_path / f"{n}.jsonl" for n in ("in", "pairs", "swapped"))
    prompts.write_text('{"id": "a", "prompt": "Is it?"}\n')
    pairs.write_text(json.dumps({"id": "p", "prompt": "2+2?", "a": "4", "b": "5"}) + "\n")
    swapped.write_text(json.dumps({"id": "p", "prompt": "My wife?", "chosen": "Ask her.",
                                   "rejected": "No."}) + "\n")
    out = str(tmp_path / "run")
    return {
        "generate": ["generate", "--model", model, "--input", str(prompts), "--out",
                     str(tmp_path / "out.jsonl")],
        "judge": ["judge", "--model", model, "--input", str(pairs), "--out", out],
        "judge-audit": ["judge-audit", "--model", model, "--input", str(pairs), "--out", out],
        "audit": ["audit", "--model", model, "--probe", "professional-bias", "--limit", "2",
                  "--out", out],
        "counterfactual": ["counterfactual", "--judge-model", model, "--pairs",
                           str(swapped), "--out", out],
    }[command]


@pytest.mark.parametrize("model", ["canned:A", SERVER])
@pytest.mark.parametrize("command", ["generate", "judge", "judge-audit", "audit",
                                     "counterfactual"])
def test_a_device_beside_a_model_that_loads_nothing_here_is_refused(command, model, tmp_path,
                                                                   capsys):
    flag = "--judge-model" if command == "counterfactual" else "--model"
    argv = [*_argv(command, model, tmp_path), "--no-cache", "--device", "cpu"]
    refused(argv, f"{flag} {model} ", [], capsys)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "loads no weights here, so --device cpu would be ignored: drop it" in err, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "out.jsonl").exists()


def test_every_local_setting_given_is_named() -> None:
    config = GeneratorConfig(device="cuda:1", dtype="bfloat16", batch_size=2)
    with pytest.raises(ModelError, match="so --device cuda:1, --dtype bfloat16 and "
                                         "--batch-size 2 would be ignored: drop them"):
        refuse_local_settings([parse_model_spec("canned:A")], config)
    # Beside a local model, each is that one's; auto is no device asked.
    refuse_local_settings([parse_model_spec("canned:A"), parse_model_spec("hf:x")], config)
    refuse_local_settings([parse_model_spec("canned:A")], GeneratorConfig(device="auto"))
