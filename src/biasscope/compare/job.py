"""``biasscope compare``: two runs' headline measures, A − B, with TOST verdicts, written to
``comparison.json`` and ``comparison.html`` in ``out`` (never over a comparison of other
runs); the settings the runs were asked with that differ are noted
(`biasscope.compare.recorded`), never refused."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from biasscope.compare import design, recorded
from biasscope.compare.measures import MEASURES, comparable
from biasscope.compare.runs import compare_runs, margin_for
from biasscope.compare.settings import CompareConfig as CompareConfig
from biasscope.core.errors import BiasscopeError
from biasscope.report import claims
from biasscope.store.directory import RunStore
from biasscope.store.files import write_bytes, write_json
from biasscope.store.remote import is_remote
from biasscope.store.run_json import kind_of

# The kinds of run whose records are probes' (the measures compare and power read).
_WITH_PROBES = frozenset({"dynamics", "audit", "intervention"})


@dataclass(frozen=True)
class CompareResult:
    summary: dict[str, Any]
    json_path: Path
    html_path: Path


def parse_margins(specs: Sequence[str]) -> Mapping[str, float] | float | None:
    """``["0.03"]``: one margin for all; ``["jsdp_gap=0.02", ...]``: per measure."""
    if not specs:
        return None
    if len(specs) == 1 and "=" not in specs[0]:
        every = _number(specs[0], "--margin")
        if not every > 0:  # said before the runs are read; a measure's own top, once known
            raise BiasscopeError(f"--margin {specs[0]}: give a number above 0 (one margin for "
                                 "every measure), or MEASURE=NUMBER")
        return every
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep and _is_number(spec):
            raise BiasscopeError(f"--margin {spec} is one margin for every measure, given with "
                                 f"other margins ({', '.join(s for s in specs if s != spec)}); "
                                 "give one number alone, or MEASURE=NUMBER for each measure")
        if not sep or name not in MEASURES:
            raise BiasscopeError(f"--margin {spec!r}: give a number, or MEASURE=NUMBER with "
                                 f"MEASURE one of {', '.join(MEASURES)}")
        if name in out:
            raise BiasscopeError(f"--margin {name} is given twice ({out[name]:g}, then "
                                 f"{value}); give one margin per measure")
        out[name] = _number(value, f"--margin {name}")
        margin_for(name, out)  # checked here: a measure the runs lack would never check it
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _number(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise BiasscopeError(f"{where} {text!r} is not a number") from None


def records(run: str, flag: str = "") -> pd.DataFrame:
    """A run's records, with the run's model as ``model`` where units have none (an audit's
    asked probes; its next-token probes' units name it, so an audit of both holds rows with
    and without); ``flag``: the option that named the run, for errors (``--pilot``)."""
    path, named = Path(run.removeprefix("file://")), f"{flag} {run}" if flag else run
    if not is_remote(run) and not path.is_dir():
        state = "is a file" if path.exists() else "does not exist"
        raise BiasscopeError(f"{named} {state}: give the folder a biasscope command wrote "
                             "(it holds run.json)")
    store = RunStore(run)
    if not store.run_json.is_file():
        raise BiasscopeError(f"{named} has no run.json: it is not a run directory; give "
                             "the folder a biasscope command wrote")
    kind = kind_of(store.read_json("run.json"))
    if kind not in _WITH_PROBES:
        # A judge's verdicts or a reward model's scores are no probe's records: "has no
        # records yet" sent the user to rerun a run that had finished.
        raise BiasscopeError(f"{named} is a{'n' if kind[:1] in 'aeiou' else ''} {kind} run; "
                             f"{'a pilot' if flag else 'biasscope compare'} takes a run of "
                             "probes (`biasscope dynamics`, `audit` or `intervene`)")
    frame = store.records()
    if frame.empty:
        raise BiasscopeError(f"{named} has no records yet: give a run that has scored "
                             "something (or rerun the command that made it, if it stopped)")
    if "model" not in frame or frame["model"].isna().any():
        model = str(store.read_json("run.json").get("model", Path(run).name))
        frame["model"] = frame["model"].fillna(model) if "model" in frame else model
    return frame


def _same(a: str, b: str) -> bool:
    """Whether two names of runs are one folder (relative and absolute, a link, a trailing
    slash); URLs are compared as written."""
    if is_remote(a) or is_remote(b):
        return a.rstrip("/") == b.rstrip("/")
    try:
        return os.path.samefile(a.removeprefix("file://"), b.removeprefix("file://"))
    except OSError:
        return False


def wordings(run: str) -> dict[str, dict[str, str]]:
    """Per probe, its wordings as run.json records them (`design.signatures`): under
    ``settings.probes`` (dynamics) or ``probes`` (an audit keeps its settings at the top)."""
    recorded = RunStore(run).read_json("run.json")
    settings = recorded.get("settings")
    probes = (settings if isinstance(settings, dict) else recorded).get("probes")
    if not isinstance(probes, dict):
        return {}
    return {str(name): design.signatures(config) for name, config in probes.items()}


def refuse_other_comparison(out: Path, run_a: str, run_b: str) -> None:
    """One line where ``out`` holds a comparison of other runs (or a comparison.json that is
    none), rather than replacing it: ``--out`` defaults to ./comparison, so comparing C and D
    after A and B lost A and B's without a word. The same runs again (another margin, a newer
    biasscope) rewrite it. A run directory (one holding run.json: either run compared, or
    another) is refused too: its comparison.json would sit among the run's files, where
    `biasscope report` and a rerun take every file to be the run's."""
    path = out / "comparison.json"
    where = f"./{out}" if str(out) == "comparison" else str(out)  # the default, as typed
    if (out / "run.json").exists():
        raise BiasscopeError(f"{where} is a run directory (it holds run.json), which a "
                             "comparison would be written into: use --out DIR with a folder "
                             "of its own")
    if not path.exists():
        return
    try:
        held = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        held = None
    if not (isinstance(held, dict) and held.get("schema") == "biasscope.comparison/1"):
        raise BiasscopeError(f"{where} holds a comparison.json that is no comparison of "
                             "biasscope compare, which this one would replace: use --out DIR")
    then = (str(held.get("run_a")), str(held.get("run_b")))
    if not all(a == b or _same(a, b) for a, b in zip(then, (run_a, run_b))):
        raise BiasscopeError(f"{where} holds a comparison of {then[0]} and {then[1]}; use "
                             "--out DIR or delete it")


def run(config: CompareConfig) -> CompareResult:
    """Compare, write the JSON and the page, return them."""
    if not 0 < config.alpha < 0.5:
        raise BiasscopeError(f"--alpha {config.alpha:g}: give a number between 0 and 0.5")
    margins = parse_margins(config.margin)
    ra, rb = records(config.run_a), records(config.run_b)  # each a run, with records
    if _same(config.run_a, config.run_b):  # every measure "equivalent", which says nothing
        raise BiasscopeError(f"{config.run_a} and {config.run_b} are the same run: give two "
                             "runs to compare (a copy of a run is compared as another)")
    found, notes = compare_runs(ra, rb, margins, config.alpha,
                                (wordings(config.run_a), wordings(config.run_b)))
    shared = set(ra.get("probe", ())) & set(rb.get("probe", ())) & set(comparable())
    differ = recorded.differences(RunStore(config.run_a).read_json("run.json"),
                                  RunStore(config.run_b).read_json("run.json"), shared)
    notes += [d.sentence for d in differ]
    if not found:
        raise BiasscopeError("the runs share no probe with a headline measure to compare "
                             f"({', '.join(comparable())})"
                             + (" under the same wording and seeds: " + " ".join(notes) if notes
                                else ""))
    used = {c.measure: margin_for(c.measure, margins) for c in found}
    summary = {"schema": "biasscope.comparison/1", "run_a": config.run_a,
               "run_b": config.run_b, "alpha": config.alpha, "margins": used,
               "comparisons": [c.as_dict() for c in found], "notes": notes,
               "settings_differ": [d.as_dict() for d in differ],
               "sentences": [c.sentence for c in found] + notes}
    out = Path(config.out)
    refuse_other_comparison(out, config.run_a, config.run_b)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "comparison.json", summary)
    write_bytes(out / "comparison.html", claims.html(summary).encode("utf-8"))
    return CompareResult(summary, out / "comparison.json", out / "comparison.html")
