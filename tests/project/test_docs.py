"""The docs cannot drift from the code: every block marked ``<!-- runnable -->`` in the tutorial
and the how-to guides runs, in order, page by page, on the tiny checkpoints and fixture data of
``conftest.py``; the generated references name every command, flag and probe.

Stand-ins, so the pages can show real names: a hub id below becomes a tiny random-init GPT-NeoX
checkpoint; ``out/checkpoint-*`` are three such checkpoints; ``demo-run/run`` is a sweep of them
(``make demo`` is tested by ``tests/demo/test_demo.py``); the llama.cpp server at ``127.0.0.1:8080``
is the tests' llama-cpp-python server with its tiny GGUF model; the WinoBias files are the
fixture's (``$BIASSCOPE_DATA_DIR`` and ``--data-dir /data`` for commands, ``data_dir=`` for
``load_probe``). A ``biasscope`` line runs
in-process through ``biasscope.cli.main.main`` and must exit 0; a runnable shell block may hold
nothing else.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType

import pytest

from biasscope.cli.main import build_parser, main
from biasscope.probes import FACETS, PROBES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [DOCS / "tutorial.md", *sorted((DOCS / "how-to").glob("*.md"))]
MARKED = re.compile(r"<!-- runnable -->\n```(bash|python)\n(.*?)```", re.DOTALL)
HUB_IDS = ("EleutherAI/pythia-70m", "EleutherAI/pythia-160m")
SERVER = "http://127.0.0.1:8080/v1#model"  # the guides' llama.cpp server: the tests' tiny one
#: The command as the pages spell it: the tutorial never activates the venv `make` made.
BIASSCOPE = ("biasscope", ".venv/bin/biasscope")


def runnable(page: Path) -> list[tuple[str, str]]:
    """The (language, code) of each block marked runnable on ``page``, in page order."""
    return MARKED.findall(page.read_text(encoding="utf-8"))


def split(line: str) -> list[str]:
    """A shell line's words. As in the shell, a comment starts only where a word starts with an
    unquoted ``#`` (``http://host/v1#model`` is one word; ``# it's`` is a comment)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return shlex.split(line[:i])
    return shlex.split(line)


def commands(script: str) -> list[list[str]]:
    """Each command line of a shell block (continuations joined, comments dropped)."""
    joined = script.replace("\\\n", " ")
    return [argv for line in joined.splitlines() if (argv := split(line))]


def substitute(code: str, root: Path, data: Path, server: str) -> str:
    code = code.replace(SERVER, server)
    for hub_id in HUB_IDS:
        code = code.replace(hub_id, str(root / "out" / "checkpoint-10"))
    code = code.replace("--data-dir /data", f"--data-dir {shlex.quote(str(data))}")
    return code.replace('load_probe("winobias-gender")',
                        f'load_probe("winobias-gender", data_dir={str(data)!r})')


@pytest.fixture
def workdir(tmp_path: Path, checkpoint_dirs: list[Path], winobias_dir: Path,
            monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh folder holding the stand-ins, as the current directory."""
    (tmp_path / "out").mkdir()
    for ckpt in checkpoint_dirs:
        (tmp_path / "out" / ckpt.name).symlink_to(ckpt, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIASSCOPE_DATA_DIR", str(winobias_dir))
    # Answers of a server go to this run's cache, never to the user's shared one.
    monkeypatch.setenv("BIASSCOPE_RESPONSE_CACHE", str(tmp_path / "responses.sqlite"))
    return tmp_path


PAGES_RUN = [p for p in PAGES if runnable(p)]


@pytest.mark.parametrize("page", PAGES_RUN, ids=[p.stem for p in PAGES_RUN])
def test_runnable_blocks_run(page: Path, workdir: Path, winobias_dir: Path,
                             one_thread: None, request: pytest.FixtureRequest) -> None:
    pytest.importorskip("torch")
    blocks = runnable(page)
    server = (f"{request.getfixturevalue('llama_server').base_url}#tiny"
              if any(SERVER in code for _, code in blocks) else SERVER)
    if "demo-run/run" in page.read_text(encoding="utf-8"):
        assert main(["dynamics", "--checkpoint-glob", "out/checkpoint-*", "--seeds", "0",
                     "--quiet", "--out", "demo-run/run"]) == 0
    for number, (language, code) in enumerate(blocks, 1):
        code = substitute(code, workdir, winobias_dir, server)
        where = f"{page.relative_to(ROOT)}, runnable block {number}"
        if language == "python":
            exec(compile(code, where, "exec"), {"__name__": "__docs__"})
            continue
        for argv in commands(code):
            assert argv[0] in BIASSCOPE, f"{where}: only biasscope commands run here: {argv}"
            assert main(argv[1:]) == 0, f"{where}: {shlex.join(argv)}"


def test_every_guide_and_the_tutorial_has_a_runnable_block() -> None:
    """A page the test never runs can rot: every how-to that shows a local command runs one."""
    without = {p.name for p in PAGES} - {p.name for p in PAGES_RUN}
    # Pages whose commands all need a network, an API key, a cluster or a real model.
    assert without <= {"generate.md", "judge.md", "sensitivity.md", "ray.md", "gguf.md",
                       "extend.md"}, without


def test_the_tutorial_runs_the_command_from_the_venv_make_made() -> None:
    """The tutorial starts from ``make demo``, which activates nothing: a bare ``biasscope``
    there is "command not found" (a guide may assume an installed command)."""
    page = DOCS / "tutorial.md"
    shown = [argv for block in re.findall(r"```bash\n(.*?)```", page.read_text("utf-8"),
                                          re.DOTALL)
             for argv in commands(block) if argv[0].endswith("biasscope")]
    assert len(shown) >= 3
    assert all(argv[0] == ".venv/bin/biasscope" for argv in shown), shown


def test_a_failing_command_fails_the_test(workdir: Path) -> None:
    """The runner's check can fail: a command the CLI refuses exits non-zero."""
    (argv,) = commands("biasscope dynamics --checkpoint-glob 'nowhere/checkpoint-*' \\\n"
                       "    --out runs/x  # a comment")
    assert argv[-2:] == ["--out", "runs/x"]
    assert split("a http://h/v1#m b # c") == ["a", "http://h/v1#m", "b"]
    assert split("a '#b' # it's") == ["a", "#b"]
    assert main(argv[1:]) != 0


def fenced(text: str) -> list[tuple[str, str]]:
    """The (language, code) of each fenced block, fences paired in order (a regex would take
    one block's closing fence for the next one's opening)."""
    blocks, language, code = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if language is None:
                language, code = line[3:].strip(), []
            else:
                blocks.append((language, "\n".join(code) + "\n"))
                language = None
        elif language is not None:
            code.append(line)
    return blocks


def shown_commands() -> list[tuple[str, list[str]]]:
    """Every ``biasscope`` command in a shell block of the docs and the README, runnable or
    not (a placeholder ``...`` and ``--help`` left out), and every line that starts with one in
    a block of no language or ``text`` (wordings.md's and claims.md's commands are there; a
    usage line with ``[optional]`` parts is no command)."""
    pages = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
    found = []
    for page in pages:
        for language, block in fenced(page.read_text(encoding="utf-8")):
            if language not in ("bash", "text", ""):
                continue
            lines = block if language == "bash" else "\n".join(
                line for line in block.replace("\\\n", " ").splitlines()
                if re.match(r"\s*(\S*/)?biasscope ", line) and "[" not in line)
            found += [(page.name, argv) for argv in commands(lines)
                      if argv[0].endswith("biasscope") and "..." not in argv
                      and "--help" not in argv]
    return found


def test_every_command_shown_parses(capsys: pytest.CaptureFixture[str]) -> None:
    """A renamed or removed flag in any page, runnable or not, fails here."""
    shown = shown_commands()
    assert len(shown) > 30  # 39 when written: the check must not pass on an empty list
    for page, argv in shown:
        try:
            build_parser().parse_args(argv[1:])
        except SystemExit as exc:
            pytest.fail(f"{page}: {shlex.join(argv)}: {capsys.readouterr().err.strip()}"
                        f" (exit {exc.code})")


def test_every_python_block_compiles_and_its_biasscope_imports_exist() -> None:
    """Non-runnable Python blocks too: the names they import from biasscope exist (a moved
    function once left ``from biasscope.runs import from_model`` in the README)."""
    pages = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
    checked = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```python\n(?!# src/)(.*?)```", text, re.DOTALL):
            tree = ast.parse(block, filename=page.name)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                        "biasscope"):
                    module = importlib.import_module(node.module or "")
                    for alias in node.names:
                        assert hasattr(module, alias.name), (page.name, node.module, alias.name)
                        checked += 1
    assert checked > 10


def _reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference",
                                                  ROOT / "scripts" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions if a.help != argparse.SUPPRESS for o in a.option_strings
            if o not in ("-h", "--help")}


def test_cli_reference_names_every_command_and_flag() -> None:
    page = _reference().cli_markdown()
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name, parser in sub.choices.items():
        if f"`biasscope {name}`" not in page:
            assert f"`{name}`" in page, name  # an alias, named beside its command
        for option in _options(parser):
            assert f"`{option}`" in page, (name, option)
    # --alpha, from the check, and its default from AnalysisConfig
    assert "number strictly between 0 and 1 | `0.01` (or the run's stored value) |" in page
    assert "whole number: 1 or more" in page  # --limit, from its setting's check
    assert "number: between 0 and 1" in page  # demo --bias


def _rows(page: str, command: str) -> dict[str, list[str]]:
    """The cells of each option row of ``command``'s table, by the row's first option."""
    section = page.split(f"## `biasscope {command}`\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines()
            if line.startswith("| `")]
    return {row[0].split("`")[1]: [cell.strip() for cell in row] for row in rows}


def test_cli_reference_gives_every_option_a_default() -> None:
    """An empty cell reads as "no idea": each row says the default the command uses, that a
    switch is off, that the option is required, or ``—`` (not set unless given)."""
    page = _reference().cli_markdown()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows) > 200
    empty = [row for row in rows if not row.rstrip().removesuffix("|").rsplit("|", 1)[1].strip()]
    assert not empty, f"{len(empty)} rows without a default, e.g. {empty[:3]}"
    dynamics, demo = _rows(page, "dynamics"), _rows(page, "demo")
    # the library's defaults where argparse has none (repeatable flags, settings)
    assert dynamics["--probe"][-1] == "`winobias-gender`"
    assert dynamics["--seeds"][-1] == "`0,1,2,3,4`"
    assert dynamics["--quiet"][-1] == "off" and dynamics["--limit"][-1] == "—"
    assert dynamics["--out"][-1] == "required"
    assert demo["--seed"][-1] == "`0`" and demo["--out"][-1] == "`demo-run`"  # 0 is a value
    # a run's stored analysis value stands in for the default of dynamics' and report's flags
    # only: compare's --alpha is its own setting, named alike
    assert dynamics["--alpha"][-1] == "`0.01` (or the run's stored value)"
    assert "stored" not in _rows(page, "compare")["--alpha"][-1]


def cli_entry_points() -> set[str]:
    """Where each library call the commands make is defined: every ``f(A.from_args(Config,
    args))`` in ``biasscope/cli`` (the one call a command makes), as ``module.name``."""
    found = set()
    for path in sorted((ROOT / "src" / "biasscope" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.asname or alias.name: f"{node.module}.{alias.name}"
                    for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("biasscope") for alias in node.names}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Call)
                    and isinstance(node.args[0].func, ast.Attribute)
                    and node.args[0].func.attr == "from_args"):
                continue
            func = node.func
            named = (f"{imported[func.value.id]}.{func.attr}" if isinstance(func, ast.Attribute)
                     and isinstance(func.value, ast.Name) else
                     imported[func.id] if isinstance(func, ast.Name) else None)
            assert named is not None, f"{path.name}:{node.lineno}: an entry point not by name"
            module, _, name = named.rpartition(".")
            entry = getattr(importlib.import_module(module), name)
            found.add(f"{entry.__module__}.{entry.__qualname__}")
    return found


def test_the_api_page_opens_with_every_entry_point() -> None:
    """A notebook user looks for the call that does what a command does: every job's entry
    point, `load_probe` and the live-training calls come before the storage internals."""
    page = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^::: (\S+)", page, re.MULTILINE)
    entries = cli_entry_points()
    assert {"biasscope.dynamics.job.run", "biasscope.audit.job.run",
            "biasscope.judge.job.judge", "biasscope.intervene.job.run"} <= entries
    wanted = [*sorted(entries), "biasscope.jobs.render", "biasscope.demo.run_demo",
              "biasscope.probes.load_probe", "biasscope.dynamics.live.callback.BiasCallback",
              "biasscope.dynamics.live.evaluate.LiveConfig",
              "biasscope.dynamics.live.evaluate.evaluate_now"]
    missing = [name for name in wanted if name not in blocks]
    assert not missing, f"docs/reference/api.md documents no {missing}"
    store = blocks.index("biasscope.store.directory.RunStore")
    assert all(blocks.index(name) < store for name in wanted)
    for name in blocks:  # each block names something that exists
        module, _, attr = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ImportError:
            assert hasattr(importlib.import_module(module), attr), name


def test_help_lists_the_entry_points_a_notebook_needs() -> None:
    """``help(biasscope)`` lists the lazily imported live-training names with the others, and
    its text names each job's entry point."""
    import pydoc

    import biasscope

    text = pydoc.render_doc(biasscope, renderer=pydoc.plaintext)
    for shown in ("class BiasCallback", "class LiveConfig", "evaluate_now(", "load_probe(",
                  "dynamics.job.run(DynamicsConfig", "biasscope.jobs.render"):
        assert shown in text, shown
    assert {"BiasCallback", "LiveConfig", "evaluate_now"} <= set(dir(biasscope))


def test_probes_reference_lists_the_registry() -> None:
    page = _reference().probes_markdown()
    for name, info in PROBES.items():
        assert f"| `{name}` |" in page
        assert all(m in page for m in info.metrics)
        facets = [line for line in page.splitlines() if line.startswith(f"| `{name}` |")][1]
        cells = [c.strip() for c in facets.split("|")[2:-1]]
        assert cells == ["yes" if info.absent(f) is None else f"none: {getattr(info, f).reason}"
                         for f in FACETS]  # a row per probe: each facet, or why it has none


def test_hook_fills_the_markers_only() -> None:
    hook = _reference().on_page_markdown
    assert hook("no marker") == "no marker"
    filled = hook("a\n<!-- cli-reference -->\nb")
    assert "<!-- cli-reference -->" not in filled and "`biasscope dynamics`" in filled


def layout_patterns() -> list[re.Pattern[str]]:
    """What the run directory layout of schema.md names, as patterns of paths under ``RUN/``
    (``<unit>`` any name; a folder, ``dropped/<time>/``, everything under it)."""
    block = re.search(r"```\nRUN/\n(.*?)```", (DOCS / "schema.md").read_text("utf-8"), re.DOTALL)
    assert block, "schema.md shows the run directory as a RUN/ block"
    shown = [line.split()[0] for line in block.group(1).splitlines()
             if line.strip() and not line.strip().startswith("#")]
    return [re.compile(re.sub(r"<[^>]+>", "[^/]+", re.escape(path))
                       + (".*" if path.endswith("/") else "")) for path in shown]


def test_the_layout_names_every_file_a_run_writes(workdir: Path, one_thread: None) -> None:
    """A reader of a run directory finds each file it holds in schema.md's layout (a
    ``checksums/`` folder was once in every run and in no layout)."""
    pytest.importorskip("torch")
    assert main(["dynamics", "--checkpoint-glob", "out/checkpoint-*", "--seeds", "0",
                 "--limit", "4", "--quiet", "--out", "run"]) == 0
    patterns = layout_patterns()
    written = [p.relative_to(workdir / "run").as_posix() for p in (workdir / "run").rglob("*")
               if p.is_file() and not p.name.startswith(".")]
    assert {"run.json", "summary.json", "report.html"} <= set(written)
    unnamed = [path for path in written if not any(p.fullmatch(path) for p in patterns)]
    assert not unnamed, f"schema.md's run directory layout does not name {unnamed}"


def test_every_environment_variable_is_documented_and_real() -> None:
    """A variable the package reads and no page names can only be found in the source (the
    fingerprint cache's was); one a page names and nothing reads is a setting that does
    nothing."""
    name = re.compile(r"\bBIASSCOPE_[A-Z_]*[A-Z]\b")
    read = {v for path in (ROOT / "src").rglob("*.py")
            for v in name.findall(path.read_text("utf-8"))}
    tools = [*(ROOT / "scripts").iterdir(), ROOT / "Makefile"]
    read_by_tools = {v for path in tools if path.is_file()
                     for v in name.findall(path.read_text("utf-8", errors="replace"))}
    named = {v for page in [*DOCS.rglob("*.md"), ROOT / "README.md"]
             for v in name.findall(page.read_text("utf-8"))}
    assert len(read) >= 7
    assert read <= named, f"no page names {sorted(read - named)}"
    assert named <= read | read_by_tools, f"nothing reads {sorted(named - read - read_by_tools)}"
