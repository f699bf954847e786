"""Performance series imported from files (``--performance-csv``, ``--lm-eval-results``): read,
hashed and checked against the run before any checkpoint loads, then copied into
``performance.json``.

Each file's whole SHA-256 goes into run.json ``settings.data`` beside the probes' data files,
named by its flag and model (``--performance-csv for M``; ``--lm-eval-results for M at step
N``, one per checkpoint's results file): the early-stopping recommendation is computed from
these numbers, so a rerun from an edited or other file is refused as an edited data file is,
not recomputed from other numbers under the same run.json. A rerun that leaves the flag out
keeps the series and its record (as it keeps the run's probes and seeds); ``biasscope
report`` reads only ``performance.json``, which is written only here, once run.json records
the files (staged before: `performance.settle`), and by a live run. A live run's series (its
training's evaluation) has no file: a file for its model is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import Checkpoint
from biasscope.core.digest import file_sha256
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import given_file
from biasscope.data.sources import refuse_other_data
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.scoring.models import named
from biasscope.dynamics.settings import Performance
from biasscope.store.directory import RunStore
from biasscope.store.locks import run_lock

_FLAGS = ("--performance-csv", "--lm-eval-results")


@dataclass(frozen=True)
class Series:
    """One model's imported series, the files it was read from and their run.json names."""

    model: str
    values: performance.Series
    label: str
    flag: str
    read: dict[str, Path]  # run.json name -> the file
    sha: dict[str, str]  # run.json name -> its SHA-256


@dataclass(frozen=True)
class Imported:
    """Every series a call imports; ``records`` go into run.json ``settings.data``."""

    series: tuple[Series, ...]

    @property
    def records(self) -> dict[str, str]:
        return {name: sha for s in self.series for name, sha in s.sha.items()}

    def staged(self, store: RunStore, name: str) -> AbstractContextManager[None]:
        """Staged in the run's file ``name`` (`performance.staged`), before run.json records
        the files: a call killed after it did leaves the series for the next call to keep,
        one killed before, to throw away."""
        return performance.staged(
            store, {s.model: (s.values, s.label, s.sha) for s in self.series}, name)

    def save(self, store: RunStore, name: str) -> None:
        """Into performance.json, once run.json records the files: never a series it does not
        vouch for (the steps the run dropped left out), then the staged copy ``name`` goes."""
        if not self.series:
            return
        with run_lock(store):  # no drop between reading its steps and saving without them
            for s in self.series:
                performance.save(store, s.model, performance.kept(store, s.model, s.values),
                                 s.label)
            store.remove_file(store.root / name)


def read_performance(given: Performance, store: RunStore,
                     checkpoints: Sequence[Checkpoint]) -> Imported:
    """Each imported series, checked against the run's steps and against what the run was
    made from (`refuse_other`); nothing is written."""
    models = list(dict.fromkeys(c.model for c in checkpoints))
    imports = [(spec, "--performance-csv") for spec in given.csv]
    imports += [(spec, "--lm-eval-results") for spec in given.lm_eval_results]
    found: list[Series] = []
    for spec, flag in imports:
        name, source = named(spec)
        if name is None and len(models) > 1:
            raise BiasscopeError(f"{spec}: with several models, write MODEL={source}")
        model = name or models[0]
        if model not in models:
            raise BiasscopeError(f"{spec}: no model {model!r} in this run ({', '.join(models)})")
        if twice := next((s for s in found if s.model == model), None):  # one replaced the other
            raise BiasscopeError(f"{flag} {spec}: {twice.flag} gives {model}'s performance "
                                 "already; give one series per model")
        key = f"{flag} for {model}"
        if flag == "--performance-csv":
            given_file(flag, source, "a CSV file of step,value rows (higher is better)")
            values = performance.from_csv(source)
            label, read = f"performance ({Path(source).name})", {key: Path(source)}
        else:
            if not given.lm_eval_metric:
                raise BiasscopeError("--lm-eval-results needs --lm-eval-metric task/metric")
            values, files = performance.lm_eval_files(source, given.lm_eval_metric)
            label = given.lm_eval_metric
            read = {f"{key} at step {step}": path for step, path in sorted(files.items())}
        steps = [c.step for c in checkpoints if c.model == model and c.step is not None]
        performance.check_coverage(model, values, steps, source)
        found.append(Series(model, values, label, flag, read,
                            {k: file_sha256(p) for k, p in read.items()}))
    imported = Imported(tuple(found))
    refuse_other(store, imported)
    return imported


def refuse_other(store: RunStore, imported: Imported) -> None:
    """One line where a series would replace the one the run was made from: a file whose
    SHA-256 the run recorded differently (`refuse_other_data`'s line), the other flag for the
    same model, a results file of a step the run recorded that the glob no longer matches, or
    another ``--lm-eval-metric``. A run from before the files were recorded is compared by its
    stored values, and gains the record where they are the same."""
    store.pull("run.json")
    store.pull(performance.FILE)
    run = store.read_json("run.json") if store.run_json.is_file() else {}
    settings = run.get("settings")
    recorded = settings.get("data") if isinstance(settings, dict) else None
    recorded = recorded if isinstance(recorded, Mapping) else {}
    stored = (store.read_json(performance.FILE).get("series", {})
              if (store.root / performance.FILE).is_file() else {})
    for s in imported.series:
        refuse_other_data(store.root, recorded, s.read, s.sha)
        mine = [k for k in recorded if k.startswith(_FLAGS) and _model_of(k) == s.model]
        other = next((k.split(" ")[0] for k in mine if not k.startswith(s.flag + " ")), None)
        if other:
            raise BiasscopeError(f"{store.root} was made from {other} for {s.model}, and this "
                                 f"call gives {s.flag}: give {other} again, or use another "
                                 "--out for this one")
        lost = sorted(set(mine) - set(s.read), key=_step)
        if lost:
            raise BiasscopeError(f"{store.root} was made from {lost[0]}, a file "
                                 "--lm-eval-results no longer matches: give a glob that "
                                 "matches it, or use another --out for this one")
        entry = stored.get(s.model) if isinstance(stored, Mapping) else None
        if not isinstance(entry, Mapping):
            continue
        if mine and s.flag == "--lm-eval-results" and entry.get("source") != s.label:
            raise BiasscopeError(f"{store.root} was made with --lm-eval-metric "
                                 f"{entry.get('source')}, and this call gives {s.label}: give "
                                 "it again, or use another --out for this one")
        if not mine and performance.from_training(entry.get("source")):
            raise BiasscopeError(f"{store.root} holds {s.model}'s performance series from its "
                                 f"training's own evaluation ({entry.get('source')}, recorded "
                                 f"by BiasCallback), not from a file, and {s.flag} would "
                                 f"replace it: drop {s.flag} (the run keeps its series), or "
                                 "use another --out for this one")
        if not mine:  # a run from before the files were recorded: its values are the record
            _refuse_other_values(store, s, entry)


def _refuse_other_values(store: RunStore, s: Series, entry: Mapping[str, Any]) -> None:
    values = entry.get("values")
    then = {int(k): float(v) for k, v in values.items()} if isinstance(values, Mapping) else {}
    now = performance.kept(store, s.model, s.values)  # a dropped step's value went with it
    differ = sorted(k for k in then.keys() | now.keys() if then.get(k) != now.get(k))
    if differ:
        shown = ", ".join(map(str, differ[:5])) + (" …" if len(differ) > 5 else "")
        where = ", ".join(sorted({str(p) for p in s.read.values()}))
        raise BiasscopeError(f"{store.root} was made from another {s.flag} for {s.model} "
                             f"({where}: values at steps {shown} differ from its "
                             "performance.json): put back the file it was made from, or use "
                             "another --out for this one")


def _model_of(name: str) -> str:
    """The model of a run.json name ``FLAG for MODEL[ at step N]``."""
    model = name.split(" for ", 1)[1]
    return model.rsplit(" at step ", 1)[0] if name.startswith("--lm-eval-results") else model


def _step(name: str) -> int:
    tail = name.rsplit(" at step ", 1)[-1]
    return int(tail) if tail.isdigit() else -1
