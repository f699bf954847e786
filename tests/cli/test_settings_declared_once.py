"""A setting is declared once, in the library: a notebook and the CLI refuse the same values
in the same words, and the flag's help is the field's."""

from __future__ import annotations

import argparse
import re

import pytest

from biasscope.audit.job import AuditConfig, Prompting
from biasscope.backends.base import GenerateParams
from biasscope.backends.config import BackendConfig
from biasscope.backends.hf_model import HFConfig
from biasscope.cli.main import build_parser, main
from biasscope.core.config import POSITIVE_INT, documented
from biasscope.core.errors import BiasscopeError
from biasscope.dynamics.job import DynamicsConfig, Executing
from biasscope.dynamics.live import LiveConfig


@pytest.mark.parametrize(("make", "says"), [
    (lambda: AuditConfig(out="r", limit=0), "--limit (limit): 0 is not 1 or more"),
    (lambda: BackendConfig(concurrency=0), "--concurrency (concurrency): 0 is not 1 or more"),
    (lambda: HFConfig(dtype="float8"), "--dtype (dtype): 'float8' is not one of"),
    (lambda: Executing(kind="slurm"), "--executor (kind): 'slurm' is not one of local, ray"),
    (lambda: Prompting(temperature=float("nan")), "nan is not a finite number"),
    (lambda: DynamicsConfig(out="r", limit=True), "True is not a whole number"),
])
def test_library_refuses_what_the_cli_refuses(make, says) -> None:
    with pytest.raises(BiasscopeError) as caught:
        make()
    assert says in str(caught.value)


def test_cli_refuses_in_the_same_words(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["audit", "--model", "m", "--out", "r", "--limit", "0"])
    assert exited.value.code == 2
    assert "--limit: 0 is not 1 or more" in capsys.readouterr().err


def test_every_documented_setting_is_a_flag_with_its_help() -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for command, configs in (("dynamics", (DynamicsConfig, HFConfig, Executing)),
                             ("audit", (AuditConfig, Prompting, BackendConfig))):
        flags = {a.dest: a for a in commands[command]._actions  # not an old flag's alias
                 if a.help != argparse.SUPPRESS}
        for config in configs:
            for f in documented(config):
                assert flags[f.name].help == f.metadata["help"], (command, f.name)


def test_check_parse_and_problem_agree() -> None:
    assert POSITIVE_INT.parse("3") == 3 and POSITIVE_INT.problem(3) is None
    for text in ("0", "-2", "x", "1.5"):
        with pytest.raises(ValueError):
            POSITIVE_INT.parse(text)
    assert POSITIVE_INT.problem(0) == "0 is not 1 or more"


@pytest.mark.parametrize(("given", "means"), [
    ({"models": "EleutherAI/pythia-160m"}, {"models": ["EleutherAI/pythia-160m"]}),
    ({"revisions": "step1000,step2000"}, {"revisions": ("step1000", "step2000")}),
    ({"seeds": "0-2"}, {"seeds": [0, 1, 2]}),
    ({"seeds": range(2)}, {"seeds": [0, 1]}),
])
def test_a_list_setting_given_as_text_means_its_flag_given_once(given, means) -> None:
    config = DynamicsConfig(out="r", **given)
    assert {name: getattr(config, name) for name in means} == means


@pytest.mark.parametrize(("given", "says"), [
    ({"seeds": [0.5]}, "--seeds (seeds): 0.5 is not a whole number"),
    ({"seeds": [2**40]}, "is not a seed from 0 to 4294967295"),
    ({"seeds": 5}, "--seeds (seeds): give a list, not int 5"),
    ({"models": ["a", 3]}, "--model (models): 3 is not text"),
    ({"models": {"a": 1}}, "give a list, not dict"),
])
def test_a_list_settings_entries_are_checked_one_by_one(given, says) -> None:
    with pytest.raises(BiasscopeError) as caught:
        DynamicsConfig(out="r", **given)
    assert says in str(caught.value)


def test_cli_refuses_a_seed_numpy_cannot_take(capsys) -> None:
    assert main(["dynamics", "--model", "m", "--out", "r", "--seeds", "4294967296"]) == 2
    assert "4294967296 is not a seed" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "says"), [
    ({"every": 0}, "every: 0 is not 1 or more"),  # a Python argument: no --every
    ({"batch_size": 0}, "0 is not 1 or more"),
    ({"stop_above": -0.1}, "-0.1 is negative"),
    ({"seeds": [1.5]}, "1.5 is not a whole number"),
])
def test_live_settings_are_checked(given, says) -> None:
    """LiveConfig is no command's: its refusals name the Python argument, not a flag."""
    with pytest.raises(BiasscopeError, match=re.escape(says)) as caught:
        LiveConfig(**given)
    assert str(caught.value).startswith(f"{next(iter(given))}: ")
    assert LiveConfig(seeds="0-2").seeds == (0, 1, 2)


def test_a_requests_params_are_checked_and_stay_hashable() -> None:
    with pytest.raises(BiasscopeError, match=re.escape("--max-tokens (max_tokens): 0 is not")):
        GenerateParams(max_tokens=0)
    with pytest.raises(BiasscopeError, match="-1 is negative"):
        GenerateParams(temperature=-1)
    one = GenerateParams(stop="\nQ:")  # one stop string, not three one-character ones
    assert one.stop == ("\nQ:",) and hash(one) == hash(GenerateParams(stop=["\nQ:"]))


@pytest.mark.parametrize(("bias", "says"), [
    ("abc", "logit_bias: 'abc' is not token ids and biases; give a dict of token ids"),
    (5, "logit_bias: 5 is not token ids and biases"),
    ({"x": 100}, "logit_bias: token id 'x' is not a whole number from 0"),
    ({-1: 100}, "token id -1 is not a whole number from 0"),
    ({True: 100}, "token id True is not"),
    ({5: 101}, "logit_bias: token 5's bias 101 is not a number from -100 to 100"),
    ({5: "100"}, "token 5's bias '100' is not a number"),
    ({5: float("nan")}, "token 5's bias nan is not"),
    ([(5, 1, 2)], "logit_bias: (5, 1, 2) is no (token id, bias) pair"),
    (["ab"], "'ab' is no (token id, bias) pair"),
])
def test_a_requests_logit_bias_is_checked(bias, says) -> None:
    """Before: any value went into the request (and its cache key) unchecked."""
    with pytest.raises(BiasscopeError, match=re.escape(says)):
        GenerateParams(logit_bias=bias)


def test_a_logit_bias_mapping_is_taken_as_its_pairs() -> None:
    """OpenAI's JSON form (digit-string keys) and a dict mean the pairs the request holds."""
    pairs = ((1234, 100.0), (7, -5.5))
    assert GenerateParams(logit_bias={"1234": 100, "7": -5.5}).logit_bias == pairs
    assert GenerateParams(logit_bias={1234: 100, 7: -5.5}) == GenerateParams(logit_bias=pairs)
    assert all(type(t) is int and type(b) is float
               for t, b in GenerateParams(logit_bias=[[1234, 100]]).logit_bias)


def test_an_empty_stop_string_is_refused(capsys, tmp_path) -> None:
    """Before: "" is in every text, so a local model's answers were all cut to nothing."""
    with pytest.raises(BiasscopeError, match=re.escape("--stop (stop): an empty stop string")):
        GenerateParams(stop=("\n", ""))
    (tmp_path / "in.jsonl").write_text('{"id": 1, "prompt": "hi"}\n')
    assert main(["generate", "--model", "canned:A", "--input", str(tmp_path / "in.jsonl"),
                 "--out", str(tmp_path / "out.jsonl"), "--stop", ""]) == 2
    err = capsys.readouterr().err
    assert "--stop (stop): an empty stop string" in err and len(err.strip().splitlines()) == 1
