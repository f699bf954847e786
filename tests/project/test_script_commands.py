"""The command lines the scripts run name commands and flags the parser has: `make
real-model`'s probe step called `biasscope probe --probes` long after both were renamed, and
failed at that step. Read from the scripts' source (``….cli("audit", "--model", …)`` and
``["…", "biasscope", "audit", …]`` lists), not run: the runs need models and data."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from biasscope.cli.main import LISTED, build_parser

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def command_lines(path: Path) -> list[tuple[int, list[str]]]:
    """(line, the literal strings from the command on) of each biasscope call in a script."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "cli":
            parts = node.args
        elif isinstance(node, ast.List):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if "biasscope" not in words:
                continue
            parts = node.elts[words.index("biasscope") + 1:]
        else:
            continue
        texts = [p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)]
        if texts:
            found.append((node.lineno, texts))
    return found


CALLS = [(f"{path.name}:{line}", words) for path in sorted(SCRIPTS.glob("*.py"))
         for line, words in command_lines(path)]


def test_the_scripts_call_biasscope() -> None:
    assert any(where.startswith("real_model.py") for where, _ in CALLS)
    assert any(where.startswith("validate_bbq.py") for where, _ in CALLS)


@pytest.mark.parametrize(("where", "words"), CALLS, ids=[where for where, _ in CALLS])
def test_each_command_and_flag_exists(where: str, words: list[str]) -> None:
    command, flags = words[0], [w for w in words[1:] if w.startswith("--")]
    current = {name for listed in LISTED.values() for name in listed}
    assert command in current, f"{where}: {command!r} is no command's current name"
    sub = build_parser(command)._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    known = {s for action in sub._actions for s in action.option_strings}
    assert not (unknown := [f for f in flags if f not in known]), f"{where}: {unknown}"
