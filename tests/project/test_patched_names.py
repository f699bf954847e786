"""A name that a test replaces (``monkeypatch.setattr(module, "name", ...)``) is not bound by
name in another module: ``from module import name`` in a module that is first imported while
the stand-in is in place keeps the stand-in for the rest of the process, so a later test (or
a later call in a notebook) gets it: a test that passed alone failed after another directory.

Such a module imports the module and reads ``module.name`` as it is called. A package's own
``__init__`` may re-export its modules' names: it is imported before them, with the real ones.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from test_architecture import modules

ROOT = Path(__file__).resolve().parents[2]
KNOWN = modules()


def top_names(path: Path) -> set[str]:
    """The names a module defines or binds at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def module_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> biasscope module, from every import in a test file (in functions too)."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names
                            if a.asname and a.name in KNOWN})
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                            if f"{node.module}.{a.name}" in KNOWN})
    return aliases


def resolved(expression: str, aliases: dict[str, str]) -> str:
    """The biasscope module an expression names (``fingerprints.steps``: the module that
    ``fingerprints`` imports as ``steps``), or ""."""
    head, *rest = expression.split(".")
    module = aliases.get(head, head)
    for part in rest:
        if module not in KNOWN:
            return ""
        inner = module_aliases(ast.parse(KNOWN[module].read_text(encoding="utf-8")))
        module = f"{module}.{part}" if f"{module}.{part}" in KNOWN else inner.get(part, "")
    return module if module in KNOWN else ""


def patched() -> Iterator[tuple[str, str, str]]:
    """(module, name, where) for each module attribute a test replaces: a ``setattr`` on a
    module or a dotted ``setattr`` string, and a helper given the monkeypatch, a module and one
    of its names (``marked(lazy, "require_torch", monkeypatch, ...)``)."""
    names = {name: top_names(path) for name, path in KNOWN.items()}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = module_aliases(tree)
        patches = {"monkeypatch", *(item.optional_vars.id for node in ast.walk(tree)
                                    if isinstance(node, ast.With) for item in node.items
                                    if isinstance(item.optional_vars, ast.Name))}
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            args = [*call.args, *(k.value for k in call.keywords)]
            setattr_ = isinstance(call.func, ast.Attribute) and call.func.attr == "setattr"
            if not setattr_ and not any(isinstance(a, ast.Name) and a.id in patches
                                        for a in args):
                continue
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            texts = [a.value for a in args if isinstance(a, ast.Constant)
                     and isinstance(a.value, str)]
            for text in texts if setattr_ else ():
                home, _, name = text.rpartition(".")
                if home in KNOWN and name in names[home]:
                    yield home, name, where
            for arg in args:
                home = resolved(ast.unparse(arg), aliases)
                for name in texts if home else ():
                    if name in names[home]:
                        yield home, name, where


def bound_by_name(module: str, path: Path) -> Iterator[tuple[str, str, int]]:
    """(module, name, line) for each ``from module import name`` at a module's top level."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:
                yield base, alias.name, node.lineno


def test_no_module_binds_a_name_that_a_test_replaces() -> None:
    replaced: dict[tuple[str, str], str] = {}
    for home, name, where in patched():
        replaced.setdefault((home, name), where)
    assert ("biasscope.backends.lazy", "require_torch") in replaced  # the scan finds them
    found = []
    for module, path in sorted(KNOWN.items()):
        for home, name, line in bound_by_name(module, path):
            where = replaced.get((home, name))
            if where and not home.startswith(f"{module}."):  # a package's own re-export
                found.append(f"{path.relative_to(ROOT)}:{line} binds {home}.{name}, which "
                             f"{where} replaces: import the module and read it when called")
    assert found == [], "\n".join(found)
