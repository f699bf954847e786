"""Start-up: ``import biasscope`` and ``biasscope --help`` import nothing heavy, a sweep imports
no SciPy, and the short parser that one command line gets says what the whole one says."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from biasscope.cli.main import COMMANDS, LISTED, build_parser, command_of

HEAVY = ("pandas", "scipy.stats", "pyarrow", "torch", "transformers")


def loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after running ``code``."""
    probe = f"import sys\n{code}\nprint('loaded:', *(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return out.stdout.splitlines()[-1].split()[1:]


def test_import_biasscope_and_the_cli_load_nothing_heavy() -> None:
    assert loaded_after("import biasscope, biasscope.cli.main") == []
    code = ("from biasscope.cli.main import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass")
    assert loaded_after(code) == []


def help_of(command: str) -> str:
    return (f"from biasscope.cli.main import main\ntry:\n    main([{command!r}, '--help'])\n"
            "except SystemExit:\n    pass")


@pytest.mark.parametrize("command", sorted(
    {name for table in LISTED.values() for name in table}))
def test_a_commands_help_imports_no_statistics(command: str) -> None:
    """SciPy's statistics (half a second) load where a test is computed, not with a parser;
    `biasscope report --help` (whose flags are the analysis settings) loads no pandas either."""
    loaded = loaded_after(help_of(command))
    assert "scipy.stats" not in loaded
    if command == "report":
        assert loaded == []


def test_a_sweep_imports_no_statistics() -> None:
    assert "scipy.stats" not in loaded_after("from biasscope.dynamics.scoring import run_dynamics")


@pytest.mark.parametrize(("command", "given", "expected"), [
    ("report", None, "1"), ("report", "4", "4"), ("dynamics", None, None)])
def test_a_report_process_runs_numpys_blas_on_one_thread(tmp_path: Path, command: str,
                                                        given: str | None,
                                                        expected: str | None) -> None:
    """`biasscope report` (its own process) asks OpenBLAS for one thread before NumPy loads,
    unless the user chose a number; a command that runs a model keeps every thread."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env.update({"OPENBLAS_NUM_THREADS": given} if given else {})
    code = (f"import os, sys; sys.argv = ['biasscope', {command!r}, {str(tmp_path / 'no')!r}]\n"
            "from biasscope.cli.main import main\ntry:\n    main()\nexcept SystemExit:\n"
            "    pass\nprint('threads:', os.environ.get('OPENBLAS_NUM_THREADS'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True)
    assert done.stdout.splitlines()[-1] == f"threads: {expected}"


def test_the_front_door_still_has_every_name() -> None:
    import biasscope

    for name in biasscope.__all__:
        assert getattr(biasscope, name) is not None, name
        assert name in dir(biasscope)
    from biasscope import RunStore, run_dynamics  # noqa: F401
    with pytest.raises(AttributeError):
        biasscope.no_such_name  # noqa: B018


def subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub


def test_the_listed_commands_are_what_register_adds() -> None:
    """The table behind the short parser is the whole parser's: names, aliases, help lines."""
    whole = subcommands(build_parser())
    helps = {a.dest: a.help for a in whole._choices_actions}
    listed = {name: about for table in LISTED.values() for name, (_, about) in table.items()}
    assert helps == listed
    aliases = {alias: name for table in LISTED.values() for name, (more, _) in table.items()
               for alias in more}
    for alias, name in aliases.items():
        assert whole.choices[alias] is whole.choices[name]
    assert list(LISTED) == list(COMMANDS)
    for module, table in LISTED.items():  # each command is registered by the module it is under
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        __import__(f"biasscope.cli.{module}", fromlist=["register"]).register(sub)
        assert set(sub.choices) == set(table) | set(aliases) & set(sub.choices)


def test_one_command_line_parses_as_with_the_whole_parser() -> None:
    assert build_parser("").format_help() == build_parser().format_help()
    argv = ["report", "some/run", "--alpha", "0.01"]
    assert command_of(argv) == "report" and command_of(["--help"]) == ""
    assert vars(build_parser("report").parse_args(argv)) == vars(build_parser().parse_args(argv))
    probe = ["probe", "--out", "x", "--model", "m"]  # an alias names its module too
    assert build_parser("probe").parse_args(probe).command == "probe"


def frozen_at_exit(call: str) -> bool:
    """Whether the collector had frozen everything when a fresh interpreter that ran ``call``
    (with ``main`` imported) exited: a hook registered first runs last."""
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen:', gc.get_freeze_count() > 0))\n"
            "from biasscope.cli.main import main\n"
            f"sys.argv = ['biasscope', '--help']\n{call}\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return out.stdout.splitlines()[-1] == "frozen: True"


def test_the_command_skips_the_last_collections_and_a_caller_keeps_them() -> None:
    """The command's own process freezes what is left as it exits (the shutdown's collections
    walk every object torch made, about a second); a caller of ``main(argv)`` lives on, and
    its collector is left alone."""
    assert frozen_at_exit("main()")
    assert not frozen_at_exit("main(['--help'])")
