"""An option of one value given twice with two values is refused, in one line naming it and
both values: argparse kept the last, so ``--model canned:b`` appended to a pasted command line
ran another model than the line seemed to say. The options come from walking the real parsers,
so a new one is covered without a line here; repeatable options still collect every value, and
a switch or a value given twice the same is harmless."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from biasscope.cli.main import build_parser, main
from biasscope.core.errors import BiasscopeError

#: Texts tried in turn for an option's two values; those its type takes are used.
CANDIDATES = ("1", "2", "0.25", "0.5", "16", "32", "a", "b", "cpu", "auto", "toward", "away",
              "lambada", "perplexity")


def _options(kind: type[argparse.Action]) -> list[tuple[tuple[str, ...], str]]:
    """(command path, flag) of every option of ``kind`` in every command (``data fetch`` too),
    where it can be given two values (not an option of one choice)."""
    found: list[tuple[tuple[str, ...], str]] = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if name == sub.prog.split()[-1]:  # not again under its alias
                        walk(sub, (*path, name))
            elif (isinstance(action, kind) and action.option_strings
                  and len(action.choices or "ab") > 1):
                found.append((path, max(action.option_strings, key=len)))

    walk(build_parser(), ())
    return found


def _parser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser(path[0])
    for name in path:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[name]
    return parser


def _action(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    (action,) = [a for a in parser._actions if flag in a.option_strings]
    return action


def _two(action: argparse.Action) -> list[tuple[str, Any]]:
    """Two texts the option takes, with the two different values they are."""
    found: list[tuple[str, Any]] = []
    for text in action.choices or CANDIDATES:
        try:
            value = action.type(text) if callable(action.type) else text
        except (argparse.ArgumentTypeError, BiasscopeError, TypeError, ValueError):
            continue
        if all(value != v for _, v in found):
            found.append((str(text), value))
    assert len(found) >= 2, f"{action.option_strings}: add two texts it takes to CANDIDATES"
    return found[:2]


def _parse(parser: argparse.ArgumentParser, argv: list[str],
           capsys: pytest.CaptureFixture[str]) -> tuple[argparse.Namespace, str]:
    """What parsing ``argv`` stores, and its error (a missing required option, most often:
    the namespace holds what was parsed before it); the command never runs."""
    namespace = argparse.Namespace()
    capsys.readouterr()
    try:
        parser.parse_args(argv, namespace)
    except SystemExit as exc:
        assert exc.code == 2
    return namespace, capsys.readouterr().err


SINGLE = _options(argparse._StoreAction)
REPEATABLE = _options(argparse._AppendAction)
SWITCHES = [*_options(argparse._StoreTrueAction), *_options(argparse._StoreFalseAction)]


def test_the_walk_finds_every_kind():
    assert len(SINGLE) > 100 and (("generate",), "--model") in SINGLE
    assert (("data", "fetch"), "--data-dir") in SINGLE
    assert {(("judge",), "--model"), (("dynamics",), "--probe")} <= set(REPEATABLE)
    assert (("generate",), "--no-cache") in SWITCHES


@pytest.mark.parametrize(("path", "flag"), SINGLE, ids=[" ".join((*p, f)) for p, f in SINGLE])
def test_a_single_value_given_twice_is_refused(path, flag, capsys):
    parser = _parser(path)
    (first, _), (then, _) = _two(_action(parser, flag))
    _, err = _parse(parser, [flag, first, flag, then], capsys)
    assert err == (f"biasscope {' '.join(path)}: error: {flag} given twice ({first}, then "
                   f"{then}): give it once (see biasscope {' '.join(path)} --help)\n")


@pytest.mark.parametrize("spelled", ["=a =b", "a =b", "=a b", "=-- a", "a =--"])
@pytest.mark.parametrize(("path", "flag"), SINGLE, ids=[" ".join((*p, f)) for p, f in SINGLE])
def test_a_value_given_with_equals_counts_as_given(path, flag, spelled, capsys):
    """``--out=a --out=b`` and ``--out a --out=b`` as ``--out a --out b``; and ``--out=--
    --out X``, whose ``--`` argparse drops as the end of options: X was taken, unchecked
    against the first."""
    parser = _parser(path)
    (first, _), (then, _) = _two(_action(parser, flag))
    texts = {"a": first, "b": then, "--": "--"}
    argv: list[str] = []
    for word in spelled.split():
        text = texts[word.removeprefix("=")]
        argv += [f"{flag}={text}"] if word.startswith("=") else [flag, text]
    _, err = _parse(parser, argv, capsys)
    said = [texts[word.removeprefix("=")] for word in spelled.split()]
    assert err == (f"biasscope {' '.join(path)}: error: {flag} given twice ({said[0]}, then "
                   f"{said[1]}): give it once (see biasscope {' '.join(path)} --help)\n")


@pytest.mark.parametrize(("path", "flag"), SINGLE, ids=[" ".join((*p, f)) for p, f in SINGLE])
def test_the_same_value_twice_is_taken(path, flag, capsys):
    parser = _parser(path)
    action = _action(parser, flag)
    ((text, value), _) = _two(action)
    parsed, err = _parse(parser, [flag, text, flag, text], capsys)
    assert "given twice" not in err
    assert getattr(parsed, action.dest) == value


@pytest.mark.parametrize(("path", "flag"), REPEATABLE,
                         ids=[" ".join((*p, f)) for p, f in REPEATABLE])
def test_a_repeatable_option_still_collects_each_value(path, flag, capsys):
    parser = _parser(path)
    action = _action(parser, flag)
    (first, one), (then, other) = _two(action)
    parsed, err = _parse(parser, [flag, first, flag, then], capsys)
    assert "given twice" not in err
    assert getattr(parsed, action.dest) == [one, other]


@pytest.mark.parametrize(("path", "flag"), SWITCHES, ids=[" ".join((*p, f)) for p, f in SWITCHES])
def test_a_switch_given_twice_is_harmless(path, flag, capsys):
    parser = _parser(path)
    action = _action(parser, flag)
    parsed, err = _parse(parser, [flag, flag], capsys)
    assert "given twice" not in err
    assert getattr(parsed, action.dest) is action.const


def test_the_pasted_command_line_of_the_issue(tmp_path: Path, capsys):
    """The model named last is not silently the one answering, and no file is written."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": 1, "prompt": "hi"}\n')
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["generate", "--model", "canned:a", "--input", str(prompts), "--out",
              str(tmp_path / "a.jsonl"), "--model", "canned:b"])
    assert capsys.readouterr().err == (
        "biasscope generate: error: --model given twice (canned:a, then canned:b): give it once "
        "(see biasscope generate --help)\n")
    assert not (tmp_path / "a.jsonl").exists()


def test_an_old_spelling_counts_as_the_flag(capsys):
    _, err = _parse(_parser(("items",)), ["--wordings", "a.txt", "--templates", "b.txt"], capsys)
    assert "--wordings given twice (--wordings a.txt, then --templates b.txt): give it once" in err
    assert "note:" not in err


def test_credentials_in_a_value_stay_masked(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--model", "openai-compatible:http://me:SECRET@host/v1#m",
              "--model", "canned:b"])
    err = capsys.readouterr().err
    assert "given twice" in err and "SECRET" not in err


def test_a_value_of_one_call_is_not_held_against_the_next(capsys):
    """The parser of one call parsing again (a notebook's ``main``) starts with none given."""
    parser = _parser(("generate",))
    for seed in ("1", "2"):
        _, err = _parse(parser, ["--seed", seed], capsys)
        assert "given twice" not in err and "--model" in err
