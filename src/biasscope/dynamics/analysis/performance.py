"""Performance series per checkpoint, to read fairness against: from the records of a probe
that gives one (``PROBES[name].performance``: LAMBADA, held-out perplexity), from
lm-evaluation-harness result files, or from a CSV of ``step,value``.

Imported series are copied into ``RUN/performance.json`` so reports rebuild without them,
once run.json records their files: a call stages them first (`staged`, in a file of its own,
``performance.pending.<token>.json``, with the records that vouch for them), and a call killed
before it wrote them leaves them there for the next one to keep or throw away (`settle`). A
staged series is read as the run's only where run.json vouches for it (`vouched`: a report of
a read-only run reads it so, in memory), and a staged file whose call still runs is left to it.
"""

from __future__ import annotations

import contextlib
import csv
import glob as globlib
import json
import math
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from biasscope.backends.checkpoints import parse_step
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import json_safe, read_text
from biasscope.probes import PROBES
from biasscope.probes.facets import Absent
from biasscope.store import files as store_files
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json
from biasscope.store.locks import run_lock

try:
    import fcntl
except ImportError:  # Windows: a staged file is not held, and `settle` cannot tell its call runs
    fcntl = None  # type: ignore[assignment]

FILE = "performance.json"
#: The series a call imports, with their files' run.json records, until performance.json holds
#: them: a call killed between the writes leaves it, for `settle`. Each call stages in a file of
#: its own (`pending_name`), so two calls into one run never write over each other's; the
#: plain name is a call's of an earlier version, settled as any.
PENDING = "performance.pending.json"
_STAGED = "performance.pending*.json"
Series = dict[int, float]
#: The source of a live run's series: its Trainer's eval loss, as 1 / perplexity, recorded by
#: ``BiasCallback`` at each evaluation (``… (NAME)`` for one of a dict of eval sets).
TRAINING_SOURCE = "1 / eval perplexity"


def from_training(source: object) -> bool:
    """Whether a series' ``source`` is a live run's training evaluation (`TRAINING_SOURCE`),
    not a file: no file reproduces it, so none may replace it."""
    return isinstance(source, str) and (source == TRAINING_SOURCE
                                        or source.startswith(f"{TRAINING_SOURCE} ("))


def from_csv(path: str | Path) -> Series:
    """``step,value`` rows (a header line is allowed)."""
    path = Path(path)
    series: Series = {}
    try:
        rows = list(csv.reader(read_text(path).splitlines()))
    except csv.Error as exc:
        raise BiasscopeError(f"{path}: not a CSV file ({exc})") from None
    for number, row in enumerate(rows, start=1):
        if not row or (number == 1 and not row[0].strip().lstrip("-").isdigit()):
            continue
        try:
            step, value = int(row[0]), float(row[1])
        except (ValueError, IndexError):
            raise BiasscopeError(f"{path}:{number}: expected 'step,value', got {row!r}") from None
        if not math.isfinite(value):  # else kept, then dropped by `load`: a step gone unsaid
            raise BiasscopeError(f"{path}:{number}: value {row[1].strip()!r} is not a finite "
                                 f"number; give step {step} the score measured there")
        if step in series:
            raise BiasscopeError(f"{path}:{number}: step {step} appears twice")
        series[step] = value
    if not series:
        raise BiasscopeError(f"{path}: no 'step,value' rows")
    return series


def _lm_eval_step(path: Path, data: dict[str, Any]) -> int | None:
    args = str(data.get("config", {}).get("model_args", ""))
    for part in args.split(","):
        key, _, value = part.partition("=")
        if key.strip() == "revision" and parse_step(value.strip()) is not None:
            return parse_step(value.strip())
    for name in (path.stem, path.parent.name):
        step = parse_step(name) or parse_step(name.split("_")[-1])
        if step is not None:
            return step
    return None


def from_lm_eval(pattern: str, metric: str) -> Series:
    """One lm-evaluation-harness results JSON per checkpoint; ``metric`` is ``task/metric``
    (``lambada_openai/acc``; ``acc,none`` keys of newer versions match ``acc``). The step
    comes from ``revision=stepN`` in the file's model_args, else from its name or folder."""
    return lm_eval_files(pattern, metric)[0]


def lm_eval_files(pattern: str, metric: str) -> tuple[Series, dict[int, Path]]:
    """`from_lm_eval`'s series and the file each step was read from (whose SHA-256 the run
    records); two files of one step are refused, not the later one taken unsaid."""
    task, _, name = metric.partition("/")
    if not name:
        raise BiasscopeError(f"--lm-eval-metric {metric!r}: use task/metric, e.g. "
                             "lambada_openai/acc")
    files = sorted(Path(p) for p in globlib.glob(pattern))
    if not files:
        raise BiasscopeError(f"--lm-eval-results {pattern!r} matches no file")
    series: Series = {}
    origin: dict[int, Path] = {}
    for path in files:
        try:
            data = json.loads(read_text(path))
        except (json.JSONDecodeError, RecursionError):
            data = None
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, dict):
            raise BiasscopeError(f"{path}: not a readable lm-evaluation-harness JSON") from None
        scores = results.get(task)
        if not isinstance(scores, dict):
            raise BiasscopeError(f"{path}: no results for task {task!r}")
        key = name if name in scores else next((k for k in scores if k.split(",")[0] == name),
                                               name)
        if key not in scores:
            raise BiasscopeError(f"{path}: task {task!r} has no metric {name!r} "
                                 f"(has {', '.join(sorted(scores))})")
        value = scores[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):  # JSON true: no score
            raise BiasscopeError(f"{path}: field results.{task}.{key}: value "
                                 f"{json.dumps(value)[:40]} is not a number; name a metric that "
                                 "holds a score in --lm-eval-metric")
        if not math.isfinite(value):  # JSON's NaN and Infinity parse as floats
            raise BiasscopeError(f"{path}: field results.{task}.{key}: value {value} is not a "
                                 "finite number; rerun lm-evaluation-harness at that checkpoint")
        step = _lm_eval_step(path, data)
        if step is None:
            raise BiasscopeError(f"{path}: cannot tell its step (no revision=stepN in "
                                 "model_args, no stepN/checkpoint-N in its name)")
        if step in origin:
            raise BiasscopeError(f"{origin[step]} and {path} both hold step {step}: give "
                                 "--lm-eval-results a glob that matches one file per checkpoint")
        series[step], origin[step] = float(value), path
    return series, origin


def save(store: RunStore, model: str, series: Series, source: str) -> None:
    """Add one model's imported series to ``performance.json``, under the run's lock: two
    calls into one run, each saving its own model's, keep both."""
    path = store.root / FILE
    with run_lock(store):
        store.pull(FILE)
        was = path.read_bytes() if path.is_file() else None
        data = store.read_json(FILE) if was is not None else {"series": {}}
        data["series"][model] = {"source": source, "values": {str(k): v for k, v in
                                                              sorted(series.items())}}
        write_json(path, data)
        store.wrote(path, was)
        store.publish(path)


def pending_name() -> str:
    """A new call's staging file (`PENDING` with a token): no other call writes it."""
    return f"performance.pending.{secrets.token_hex(6)}.json"


@contextlib.contextmanager
def staged(store: RunStore, series: Mapping[str, tuple[Series, str, Mapping[str, str]]],
           name: str) -> Iterator[None]:
    """``series`` (model: values, source and the run.json records of its files) in the run's
    file ``name`` (`pending_name`), before run.json records those files: kept by `settle`
    only where it does. The file is held (an ``flock``) while the block runs, so that another
    call's `settle` leaves it to this one; written whole, already held, as it appears."""
    if not series:
        yield
        return
    text = json.dumps(json_safe({"series": {
        model: {"source": source, "values": {str(k): v for k, v in sorted(values.items())},
                "records": dict(records)}
        for model, (values, source, records) in series.items()}}), indent=2, allow_nan=False)
    held: list[int] = []

    def write(handle: BinaryIO) -> None:
        if fcntl is not None:  # a dup shares the lock and outlives the temp file's handle
            held.append(os.dup(handle.fileno()))
            fcntl.flock(held[0], fcntl.LOCK_EX)
        handle.write((text + "\n").encode())

    try:
        store_files.atomic_write(store.root / name, write)
        store.wrote(store.root / name, None)
        store.publish(store.root / name)
        yield
    finally:
        for fd in held:
            os.close(fd)


def staged_files(store: RunStore) -> list[Path]:
    """The run's staged series files (of calls that run, or were killed)."""
    return sorted(store.root.glob(_STAGED))


def _running(path: Path) -> bool:
    """Whether the call that staged ``path`` still holds it (`staged`)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def vouched(store: RunStore, path: Path) -> dict[str, tuple[str, Series]]:
    """Per model, the series staged in ``path`` that run.json vouches for (its files recorded
    with the SHA-256 they were staged with), less the steps the run dropped: what `settle`
    keeps, and what a report of a run it cannot write to reads in memory."""
    try:
        entries = store.read_json(path.name).get("series")
    except BiasscopeError:  # unreadable (hand-edited): vouched for by nothing
        return {}
    recorded = _recorded(store)
    out: dict[str, tuple[str, Series]] = {}
    for model, entry in (entries.items() if isinstance(entries, dict) else ()):
        records = entry.get("records") if isinstance(entry, dict) else None
        if isinstance(records, dict) and records and all(
                recorded.get(name) == sha for name, sha in records.items()):
            try:
                values = {int(k): float(v) for k, v in entry["values"].items()}
            except (AttributeError, KeyError, TypeError, ValueError):
                continue
            out[str(model)] = (str(entry.get("source", "performance")),
                               kept(store, str(model), values))
    return out


def settle(store: RunStore) -> None:
    """The series killed calls left staged go into performance.json where run.json records
    their files as they were staged (the call was killed after run.json, before
    performance.json), or go where it does not (killed before run.json, which never vouched
    for them); then their files go. A call that was not killed leaves none, and a file whose
    call still runs (`_running`) is left to it. Under the run's lock, taken only where a
    file is staged (a report of a read-only run takes none)."""
    if not staged_files(store):
        return
    with run_lock(store):
        for path in staged_files(store):
            if _running(path):
                continue
            for model, (source, values) in vouched(store, path).items():
                save(store, model, values, source)
            store.remove_file(path)


def _recorded(store: RunStore) -> Mapping[str, Any]:
    """run.json ``settings.data``: each file's SHA-256 by its name (none: {})."""
    run = _run_json(store)
    settings = run.get("settings")
    data = settings.get("data") if isinstance(settings, dict) else None
    return data if isinstance(data, Mapping) else {}


def _run_json(store: RunStore) -> dict[str, Any]:
    store.pull("run.json")
    return store.read_json("run.json") if store.run_json.is_file() else {}


#: run.json's record of each `biasscope drop`: ``dropped[].performance`` names, per model, the
#: steps whose values went with the dropped checkpoints.
DROPPED = "dropped"


def dropped_steps(run: Mapping[str, Any]) -> dict[str, set[int]]:
    """Per model, the steps whose values `biasscope drop` took out of performance.json (as
    run.json records them, ``run``) and whose checkpoint the run does not list again."""
    entries = run.get("checkpoints")
    listed = {(e.get("model"), e.get("step")) for e in
              (entries if isinstance(entries, list) else []) if isinstance(e, dict)}
    out: dict[str, set[int]] = {}
    events = run.get(DROPPED)
    for event in events if isinstance(events, list) else ():
        steps = event.get("performance") if isinstance(event, dict) else None
        for model, gone in (steps.items() if isinstance(steps, dict) else ()):
            out.setdefault(model, set()).update(
                int(s) for s in gone if isinstance(s, int) and (model, s) not in listed)
    return out


def kept(store: RunStore, model: str, series: Series) -> Series:
    """``series`` without the steps the run dropped (`dropped_steps`): a file's series is
    copied whole, but a step dropped from the run has its value in the dropped folder."""
    gone = dropped_steps(_run_json(store)).get(model, set())
    return {step: value for step, value in series.items() if step not in gone}


def add(store: RunStore, model: str, step: int, value: float, source: str) -> None:
    """One step's value into ``model``'s series in ``performance.json`` (a live run's, as its
    training evaluates), the values it holds kept: read and written under the run's lock, so
    that a value another call adds meanwhile is not lost."""
    path = store.root / FILE
    with run_lock(store):
        store.pull(FILE)
        entry = (store.read_json(FILE) if path.is_file() else {}).get("series", {}).get(
            model, {})
        values = {int(k): float(v) for k, v in entry.get("values", {}).items()}
        save(store, model, {**values, step: value}, source)


def source_of(store: RunStore, model: str) -> str | None:
    """The source of ``model``'s series in ``performance.json``; None where it has none."""
    if not (store.root / FILE).is_file():
        return None
    entry = store.read_json(FILE).get("series", {}).get(model)
    return str(entry.get("source", "performance")) if isinstance(entry, dict) else None


def load(store: RunStore, summary: dict[str, Any]) -> dict[str, tuple[str, Series]]:
    """Per model: (name, series). Imported series win (performance.json's, and a staged one
    run.json vouches for: `vouched`, what `settle` would save, for a report that cannot write
    to the run or writes elsewhere); else the performance a probe of the run gives
    (``PROBES[name].performance``: LAMBADA accuracy, 1 / held-out perplexity)."""
    out: dict[str, tuple[str, Series]] = {}
    for ckpt in summary["checkpoints"]:
        info = PROBES.get(ckpt["probe"])
        if info is None or isinstance(info.performance, Absent) or ckpt["step"] is None:
            continue
        perf, value = info.performance, ckpt["mean"].get(info.performance.metric)
        if value is None or (perf.invert and not value):
            continue
        out.setdefault(ckpt["model"], (perf.name, {}))[1][ckpt["step"]] = (
            1 / value if perf.invert else value)
    if (store.root / FILE).is_file():
        gone = dropped_steps(_run_json(store))  # a drop killed before it rewrote the file
        for model, entry in store.read_json(FILE).get("series", {}).items():
            values = {int(k): float(v) for k, v in entry["values"].items()
                      if v is not None and math.isfinite(float(v))}
            out[model] = (str(entry.get("source", "performance")),
                          {k: v for k, v in values.items() if k not in gone.get(model, ())})
    for path in staged_files(store):  # a killed call's, where `settle` could not write
        out.update(vouched(store, path))
    return out


def check_coverage(model: str, series: Series, steps: list[int], source: str) -> None:
    missing = [s for s in steps if s not in series]
    if missing:
        shown = ", ".join(map(str, missing[:20])) + (" …" if len(missing) > 20 else "")
        raise BiasscopeError(f"{source} does not cover every checkpoint of {model}: missing "
                             f"steps {shown}")
