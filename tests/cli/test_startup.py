"""Start-up: ``import biasscope`` and ``biasscope --help`` import nothing heavy, a sweep imports
no SciPy, and the short parser that one command line gets says what the whole one says."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from biasscope.cli.main import COMMANDS, LISTED, build_parser, command_of

HEAVY = ("pandas", "scipy.stats", "pyarrow", "torch", "transformers")


def loaded_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The ``heavy`` modules a fresh interpreter holds after running ``code``."""
    probe = f"import sys\n{code}\nprint('loaded:', *(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return out.stdout.splitlines()[-1].split()[1:]


def test_import_biasscope_and_the_cli_load_nothing_heavy() -> None:
    assert loaded_after("import biasscope, biasscope.cli.main") == []
    code = ("from biasscope.cli.main import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass")
    assert loaded_after(code) == []


def help_of(command: str, flag: str = "--help") -> str:
    return (f"from biasscope.cli.main import main\ntry:\n    main([{command!r}, {flag!r}])\n"
            "except SystemExit:\n    pass")


@pytest.mark.parametrize("flag", ["--help", "--no-such-flag"])
@pytest.mark.parametrize("command", sorted(
    {each for table in LISTED.values() for name, (aliases, _) in table.items()
     for each in (name, *aliases)}))
def test_a_commands_help_imports_nothing_heavy(command: str, flag: str) -> None:
    """A command's flags come from its job's settings alone (``<job>/settings.py``, the config
    dataclasses without the run code), so its ``--help`` and a bad flag's one-line error load
    no pandas, pyarrow, SciPy, torch or transformers, nor even NumPy: 0.05-0.1 s, where
    importing the jobs took 0.4-1 s."""
    assert loaded_after(help_of(command, flag), (*HEAVY, "numpy")) == []


def test_the_settings_name_the_probes_as_the_probes_do() -> None:
    """The settings name a default probe and the probes' help without importing the probes
    (`biasscope.core.probe_settings`); these are the probes' own names and words."""
    from biasscope.core import probe_settings as light
    from biasscope.dynamics.job import DynamicsConfig
    from biasscope.intervene import InterveneConfig
    from biasscope.probes import perplexity, specs, winobias

    assert light.WINOBIAS == winobias.NAME and light.ETHICS == perplexity.ETHICS
    assert DynamicsConfig(out="r").probes == (winobias.NAME,)
    made = InterveneConfig(out="r", model="m")
    assert made.probes == (winobias.NAME,) and made.text == perplexity.ETHICS
    for name in ("LIMIT_HELP", "PROBE_HELP", "WORDINGS_HELP", "BASE_RATE_HELP"):
        assert getattr(specs, name) is getattr(light, name)


#: Where settings were defined (and still import from) -> their names, in the job's settings.
MOVED = {
    "biasscope.dynamics.job": ("DynamicsConfig", "Executing", "Performance", "comma_list",
                               "performance_probe"),
    "biasscope.audit.job": ("AuditConfig", "Prompting", "ItemsConfig", "DEFAULT_PROBES"),
    "biasscope.judge.job": ("JudgeConfig",),
    "biasscope.sensitivity.job": ("SensitivityConfig", "RewardScoring", "directions"),
    "biasscope.sensitivity.sanity": ("line_range",),
    "biasscope.sensitivity": ("RewardScoring",),
    "biasscope.compare.job": ("CompareConfig",),
    "biasscope.compare.power": ("PowerConfig",),
    "biasscope.counterfactual.job": ("CounterfactualConfig",),
    "biasscope.intervene.job": ("InterveneConfig",),
    "biasscope.intervene.train": ("Training",),
    "biasscope.intervene": ("InterveneConfig", "Training"),
    "biasscope.intervene.analysis": ("InterventionAnalysisConfig",),
    "biasscope.generate.batch": ("GenerateConfig",),
}


@pytest.mark.parametrize(("old", "name"), [(m, n) for m, names in MOVED.items() for n in names])
def test_a_moved_setting_still_imports_from_where_it_was(old: str, name: str) -> None:
    settings = f"{'.'.join(old.split('.')[:2])}.settings"
    assert getattr(importlib.import_module(old), name) is getattr(
        importlib.import_module(settings), name)


@pytest.mark.parametrize("package", ["audit", "judge", "sensitivity", "intervene"])
def test_a_lazy_job_front_still_has_every_name(package: str) -> None:
    """A job's front imports its names when first named, so that its settings module loads
    alone; every name it gave is still there, and listed."""
    front = importlib.import_module(f"biasscope.{package}")
    for name in front.__all__:
        assert getattr(front, name) is not None, name
        assert name in dir(front)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        front.no_such_name  # noqa: B018
    # Its submodules are still attributes, as when the front imported them all.
    assert front.settings is importlib.import_module(f"biasscope.{package}.settings")
    assert front.job is importlib.import_module(f"biasscope.{package}.job")
    assert loaded_after(f"import biasscope.{package}.settings",
                        (f"biasscope.{package}.job", "pandas")) == []


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
