"""The package's structure: no import cycles, and no import from a lower layer into a higher one.

Every ``import`` in every module counts, inside functions and ``TYPE_CHECKING`` blocks too: a
cycle hidden in a function still ties two modules together. docs/architecture.md explains
the layers.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "biasscope"

# From the bottom up; a module may import its own package and any package listed before it.
# The jobs (audit … demo) sit above the report, which only renders what they computed.
LAYERS = ("core", "data", "backends", "probes", "store", "report", "audit", "dynamics", "compare",
          "intervene", "judge", "sensitivity", "counterfactual", "generate", "demo", "jobs",
          "cli")
# The package's own front door re-exports from every layer; nothing inside imports it.
FRONT = ("biasscope", "biasscope.__main__")
# The jobs: one may build on another below it, through that package's front (its
# ``__init__``: ``biasscope.judge``, ``biasscope.dynamics.scoring``), never its inner modules.
JOBS = LAYERS[LAYERS.index("audit"):LAYERS.index("jobs")]
# dynamics/ in the order it runs; a stage imports only itself and the stages before it
# (``dynamics/job.py``, the command, sits on top of them all).
STAGES = ("scoring", "analysis", "summary", "live")


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[int, str]]:
    """(line, module) for every biasscope module ``name`` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("biasscope") and target != name:
                yield node.lineno, target


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {t for _, t in imports(name, path, known)} for name, path in known.items()}


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_package_has_a_layer() -> None:
    loose = [m for m in modules() if m not in FRONT and layer(m) is None]
    assert not loose, f"modules outside every layer (add a layer or move them): {loose}"


def test_imports_only_run_down() -> None:
    known = modules()
    upward = []
    for name, path in known.items():
        if name in FRONT:
            continue
        for line, target in imports(name, path, known):
            if target in FRONT:
                upward.append(f"{path.name}:{line} {name} -> {target} (the front door)")
            elif (layer(target) or 0) > (layer(name) or 0):
                upward.append(f"{path.relative_to(PACKAGE)}:{line} {name} -> {target}")
    assert not upward, "imports that run up the layers:\n" + "\n".join(upward)


def test_jobs_use_each_other_through_their_fronts() -> None:
    known = modules()
    inner = []
    for name, path in known.items():
        own = name.split(".")[1] if "." in name else ""
        if own not in JOBS:
            continue
        for line, target in imports(name, path, known):
            other = target.split(".")[1] if "." in target else ""
            if other in JOBS and other != own and known[target].name != "__init__.py":
                inner.append(f"{path.relative_to(PACKAGE)}:{line} {name} -> {target}")
    assert not inner, "jobs importing another job's inner modules (use its front):\n" + "\n".join(
        inner)


def stage(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["biasscope", "dynamics"] or len(parts) < 4:
        return None
    return STAGES.index(parts[2]) if parts[2] in STAGES else None


def test_dynamics_stages_run_in_order() -> None:
    folders = sorted(p.name for p in (PACKAGE / "dynamics").iterdir()
                     if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(STAGES), f"dynamics/ holds {folders}; STAGES says {STAGES}"
    known = modules()
    backwards = []
    for name, path in known.items():
        here = stage(name)
        if here is None:
            continue
        for line, target in imports(name, path, known):
            there = stage(target)
            if target == "biasscope.dynamics.job" or (there is not None and there > here):
                backwards.append(f"{path.relative_to(PACKAGE)}:{line} {name} -> {target}")
    assert not backwards, "dynamics stages importing a later stage:\n" + "\n".join(backwards)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles() -> None:
    assert not cycles(graph()), f"import cycles: {cycles(graph())}"


@pytest.mark.parametrize(("edges", "expected"), [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
])
def test_the_cycle_finder_finds_cycles(edges: dict[str, set[str]],
                                       expected: list[list[str]]) -> None:
    assert cycles(edges) == expected


def test_the_layer_check_sees_function_level_imports(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from biasscope.cli.main import main\n")
    known = {"biasscope.core.mod": source, "biasscope.cli.main": source}
    assert list(imports("biasscope.core.mod", source, known)) == [(2, "biasscope.cli.main")]


# --- docs/architecture.md and the API reference say what the code is ---------------------------

DOCS = PACKAGE.parents[1] / "docs"
ARCHITECTURE = DOCS / "architecture.md"


def section(title: str) -> str:
    """One ``## title`` section of docs/architecture.md."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def glossary() -> dict[str, str]:
    """Each glossary entry's text, by its first bold word."""
    entries = re.split(r"^- ", section("Glossary"), flags=re.MULTILINE)[1:]
    return {e.split("**")[1]: e for e in entries if e.startswith("**")}


def test_the_layer_table_is_the_subpackages() -> None:
    """The page's numbered layers are the enforced order, and every subpackage is one."""
    listed = re.findall(r"^\d+\. \*\*(\w+)/\*\*", section("Layers"), re.MULTILINE)
    assert tuple(listed) == LAYERS
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set(LAYERS), packages ^ set(LAYERS)


def test_the_diagram_names_every_job_and_stage() -> None:
    diagram = ARCHITECTURE.read_text(encoding="utf-8").split("```\n", 2)[1]
    words = set(re.findall(r"[a-z]+", diagram))
    assert {*JOBS, *STAGES, "jobs", "cli"} <= words, {*JOBS, *STAGES} - words


def test_every_registered_probe_facet_is_in_the_glossary() -> None:
    """A facet added to the registry's entries is named where the page lists facets."""
    from biasscope.probes import FACETS, PROBES
    from biasscope.probes.facets import Absent, ProbeInfo

    facets = {f.name for f in fields(ProbeInfo) if "Absent" in str(f.type)}
    assert facets == set(FACETS)
    listed = set(re.findall(r"`(\w+)`", glossary()["facet"]))
    for name, info in PROBES.items():
        given = {f for f in facets if not isinstance(getattr(info, f), Absent)}
        assert given <= listed, (name, given - listed)
    assert facets <= listed, facets - listed


def defined_names() -> set[str]:
    """Every class, function, module and assigned name in the package (methods and fields too)."""
    names = {p.stem for p in PACKAGE.rglob("*.py")} | {p.name for p in PACKAGE.rglob("*/")}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def resolves(dotted: str) -> bool:
    """Whether ``biasscope.<dotted>`` (or ``dotted`` itself) is a module or an attribute of one."""
    path = dotted if dotted.startswith("biasscope") else f"biasscope.{dotted}"
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


CODE_NAME = re.compile(r"^(?:[A-Z]\w*|\w*_\w*)(?:\(\))?$")  # CamelCase, CONSTANT, snake_case


def test_the_glossary_names_things_the_code_defines() -> None:
    """Every module path, dotted name and code name the glossary uses exists: a rename that
    leaves the glossary behind fails here."""
    names, wrong = defined_names(), []
    for word, entry in glossary().items():
        for token in re.findall(r"`([^`\n]+)`", entry):
            if "/" in token and token.split("/")[0] in LAYERS:
                ok = (PACKAGE / token).exists()
            elif re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", token) and not token.endswith(
                    (".py", ".json")):
                ok = resolves(token)
            elif CODE_NAME.match(token) and token.lower() not in ("next_token",):
                ok = token.removesuffix("()") in names
            else:
                continue
            if not ok:
                wrong.append(f"{word}: {token}")
    assert not wrong, wrong


def test_options_are_only_answer_options() -> None:
    """"options" is a probe's answer options and nothing else: a settings object is a
    ``*Config``, so no class is named ``*Options`` and the glossary's entry names none."""
    classes = {node.name for path in PACKAGE.rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.ClassDef)}
    assert not {name for name in classes if name.endswith("Options")}
    assert "answer options" in glossary()["options"]
    assert not re.findall(r"`\w*Options`", glossary()["options"])


def test_the_glossary_checks_can_fail() -> None:
    assert not resolves("store.run_json.no_such_writer") and not resolves("nowhere.thing")
    assert resolves("jobs.JOBS") and resolves("biasscope.dynamics.scoring.sweep.sweep")
    assert "biasscope.compare.power.plan" in command_calls()
    assert "start_run" in defined_names() and "NoSuchName" not in defined_names()


def command_calls() -> set[str]:
    """What each CLI command calls with the config it built (``f(A.from_args(Config, args))``),
    read from cli/'s source: the command's one library call, by where that object lives."""
    found = set()
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.asname or a.name: f"{n.module}.{a.name}" for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("biasscope")
                 for a in n.names}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Call)
                    and isinstance(node.args[0].func, ast.Attribute)
                    and node.args[0].func.attr == "from_args"):
                called = ast.unparse(node.func)
                head, _, rest = called.partition(".")
                found.add(".".join(filter(None, [names.get(head, head), rest])))
    return found


def where(dotted: str) -> str:
    """The module and name that define what ``dotted`` names (a front's re-export too)."""
    module, _, name = dotted.rpartition(".")
    value = getattr(importlib.import_module(module), name)
    return f"{value.__module__}.{value.__qualname__}"


def entry_points() -> set[str]:
    """Every entry point, from the code: each command's one call, the run function of each kind
    in ``jobs.JOBS``, and the demo, ``jobs.render``, ``load_probe`` and the live ones."""
    from biasscope.jobs import JOBS as KINDS

    found = {where(c) for c in command_calls()}
    found |= {f"{j.run.__module__}.{j.run.__qualname__}" for j in KINDS.values()}
    return found | {where(n) for n in ("biasscope.demo.run_demo", "biasscope.jobs.render",
                                       "biasscope.probes.load_probe", "biasscope.BiasCallback",
                                       "biasscope.evaluate_now")}


def test_the_api_reference_lists_every_entry_point() -> None:
    api = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    table = api.split("## Entry points", 1)[1].split("\n### ", 1)[0]
    linked = set(re.findall(r"\]\(#([\w.]+)\)", table))
    documented = set(re.findall(r"^::: ([\w.]+)$", api, re.MULTILINE))
    points = entry_points()
    assert len(points) >= 15 and points <= linked and points <= documented, (
        points - linked, points - documented)
    from biasscope.cli.main import COMMANDS

    assert all(f"`biasscope {c}`" in table for c in COMMANDS)


def test_every_run_writing_job_has_its_entry_in_job_py() -> None:
    """The glossary's "job entry module": each kind's entry point lives in its package's job.py."""
    from biasscope.jobs import JOBS as KINDS

    assert {k: j.run.__module__ for k, j in KINDS.items()
            if not j.run.__module__.endswith(".job")} == {}
