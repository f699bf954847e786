"""MkDocs hook: the reference pages that must not drift from the code are generated at build
time. A page holding ``<!-- cli-reference -->`` gets every command and flag of
``biasscope.cli.main.build_parser()`` (choices, accepted range, and the default: the library's
where the flag is one of a config's settings); one holding
``<!-- probes-reference -->`` gets the probes registry ``biasscope.probes.PROBES``.

Run directly (``python scripts/docs_reference.py cli|probes``) it prints the Markdown.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

CLI_MARKER = "<!-- cli-reference -->"
PROBES_MARKER = "<!-- probes-reference -->"


def _ranges() -> dict[Any, str]:
    """A setting's ``parse`` (`biasscope.core.config.described`) and the other argument types,
    by identity, as what a reader can give."""
    from biasscope.backends.checkpoints import parse_seeds
    from biasscope.cli import args as A
    from biasscope.dynamics.settings import comma_list, performance_probe
    from biasscope.sensitivity.settings import directions
    from biasscope.store.directory import run_dir

    return {parse_seeds: "seeds such as 0-4 or 0,2,7 (at most 10,000)",
            run_dir: "directory or fsspec URL", A.run_dir: "directory or fsspec URL",
            comma_list: "comma-separated list", directions: "toward, away or both",
            performance_probe: "lambada, perplexity or perplexity:FILE",
            int: "whole number", float: "number"}


def _parsed_range(kind: Any, ranges: dict[Any, str]) -> str | None:
    """What an argparse type accepts: the type itself, or the setting's ``parse`` it wraps
    (``cli.args`` keeps it in the closure)."""
    if kind in ranges:
        return ranges[kind]
    for cell in getattr(kind, "__closure__", None) or ():
        if callable(cell.cell_contents) and cell.cell_contents in ranges:
            return ranges[cell.cell_contents]
    return None


def _check_range(kind: Any) -> str | None:
    """The range a setting's check accepts (`biasscope.core.config.Check`), in its own words:
    the argparse type made from it (``cli.args.typed``) holds the check in its closure."""
    from biasscope.core.config import Check

    for cell in getattr(kind, "__closure__", None) or ():
        check = cell.cell_contents
        if isinstance(check, Check):
            allowed = check.why.removeprefix("is not ").split(": give ")[-1]
            return f"{'whole number' if check.whole else 'number'}: {allowed}"
    return None


def _analysis_flags() -> dict[str, str]:
    """The analysis settings' ranges, checked after parsing (a stored value can be given too):
    read from ``AnalysisConfig`` so the page says what the check says."""
    from biasscope.dynamics.analysis.config import FLAGS, option_problem

    return {name: ("" if name == "n_resamples" else "number ")
            + (option_problem(name, 1e9) or "").removeprefix("must be ").removeprefix("a ")
            for name in FLAGS if name != "correction"}


def _analysis_defaults() -> dict[str, Any]:
    """The analysis settings' defaults: a run's report keeps its stored value instead."""
    from biasscope.dynamics.analysis.config import FLAGS, AnalysisConfig

    return {name: getattr(AnalysisConfig(), name) for name in FLAGS}


def _default(action: argparse.Action) -> str:
    """What the command uses when the option is not given; never an empty cell: a switch is
    off (or on, for a ``--no-…`` one), and ``—`` marks an option that is simply not set."""
    if action.required:
        return "required"
    if isinstance(action, argparse._StoreTrueAction):
        return "off"
    if isinstance(action, argparse._StoreFalseAction):
        return "on"
    if action.nargs == 0:  # --version and the like
        return "—"
    if getattr(action, "stored", False):  # an analysis flag; compare's --alpha is its own
        return f"`{_analysis_defaults()[action.dest]}` (or the run's stored value)"
    value = getattr(action, "library_default", action.default)
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    if value is None or value == "" or value is argparse.SUPPRESS:
        return "—"
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flag_row(action: argparse.Action, ranges: dict[Any, str]) -> str:
    names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
    if action.option_strings and action.nargs != 0 and action.metavar != argparse.SUPPRESS:
        names += f" *{action.metavar or action.dest.upper()}*"
    accepts = ""
    if action.choices is not None:
        accepts = "one of " + ", ".join(f"`{c}`" for c in action.choices)
    elif action.nargs == 0:
        accepts = "flag"
    elif getattr(action, "stored", False):
        accepts = _analysis_flags()[action.dest]
    elif (said := _parsed_range(action.type, ranges)) or (said := _check_range(action.type)):
        accepts = said
    if isinstance(action, argparse._AppendAction):
        accepts = (accepts + "; " if accepts else "") + "repeatable"
    return f"| {names} | {_cell(action.help or '')} | {accepts} | {_cell(_default(action))} |"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _command(name: str, parser: argparse.ArgumentParser, help_text: str,
             ranges: dict[Any, str], level: int = 2) -> list[str]:
    lines = [f"{'#' * level} `{name}`", ""]
    if help_text:
        lines += [help_text[0].upper() + help_text[1:] + ".", ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    rows = [_flag_row(a, ranges) for a in parser._actions
            if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction,
                                                                     argparse._SubParsersAction))]
    if rows:
        lines += ["| option | what | accepts | default |", "| --- | --- | --- | --- |", *rows, ""]
    for sub, subparser in _subcommands(parser).items():
        lines += _command(f"{name} {sub}", subparser, "", ranges, level + 1)
    return lines


def cli_markdown() -> str:
    """Every command of ``biasscope`` with every flag, from the parser the CLI runs."""
    from biasscope.cli.main import build_parser

    parser = build_parser()
    ranges = _ranges()
    helps: dict[str, str] = {}
    aliases: dict[str, list[str]] = {}
    commands = _subcommands(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                helps[choice.dest.split(" ")[0]] = choice.help or ""
    seen: dict[int, str] = {}
    lines: list[str] = []
    for name, sub in commands.items():
        if id(sub) in seen:
            aliases.setdefault(seen[id(sub)], []).append(name)
            continue
        seen[id(sub)] = name
    for name, sub in commands.items():
        if seen[id(sub)] != name:
            continue
        also = aliases.get(name)
        text = helps.get(name, "") + (f" (also `{'`, `'.join(also)}`)" if also else "")
        lines += _command(f"biasscope {name}", sub, text, ranges)
    return "\n".join(lines)


def probes_markdown() -> str:
    """The probes registry, each probe's facets and the request kinds, from ``PROBES`` and
    ``REQUEST_KINDS``."""
    from biasscope.probes import FACETS, PROBES, REQUEST_KINDS

    lines = ["| probe | what it is | requests | data | measures |",
             "| --- | --- | --- | --- | --- |"]
    for name, info in PROBES.items():
        data = f"`{info.data}`" if info.data else "none (ships with biasscope)"
        lines.append(f"| `{name}` | {_cell(info.about)} | "
                     f"{', '.join(f'`{r}`' for r in info.requests)} | {data} | "
                     f"{_cell(', '.join(info.metrics))} |")
    lines += ["", "What each probe gives the jobs and the report (its facets, "
              "`biasscope.probes.facets`), or why it has none:", "",
              "| probe | " + " | ".join(FACETS.values()) + " |",
              "| --- |" + " --- |" * len(FACETS)]
    for name, info in PROBES.items():
        cells = [_cell(f"none: {getattr(info, f).reason}") if info.absent(f) else "yes"
                 for f in FACETS]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    lines += ["", "| request kind | what the backend is asked for |", "| --- | --- |"]
    lines += [f"| `{kind}` | {_cell(what)} |" for kind, what in REQUEST_KINDS.items()]
    return "\n".join(lines)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs calls this for every page: fill in the generated references."""
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_markdown())
    if PROBES_MARKER in markdown:
        markdown = markdown.replace(PROBES_MARKER, probes_markdown())
    return markdown


if __name__ == "__main__":
    print(cli_markdown() if sys.argv[1:] == ["cli"] else probes_markdown())
