"""``biasscope intervene`` as one library call: `run(InterveneConfig(...))` fine-tunes a model
twice from the same start and seed (control, intervention), watches both live, and writes the
run's analysis (``intervention.json``), its dynamics report and its intervention report. With
``training.runs`` N above 1 it does so N times, run k seeded ``seed + k − 1`` and its arms named
`analysis.run_name` (``control-run2``, ``cda-run2``, …; the first run keeps the plain names).
The runs train last to first, so that the first run's intervention arm, whose recommended
weights are saved, is analysed with every other run in. A rerun with a larger N adds the
missing runs (the weights of a step first recommended then were not kept: `ship.finalise`
says so); every run in the directory is analysed.

Everything that changes results (model, text and its split, intervention, training, probes,
limits) is recorded in run.json under ``settings.intervention`` and checked on a rerun, which
resumes: finished arms are kept, a killed arm continues from its last Trainer checkpoint, and
evaluations already stored are not redone. The base model is recorded by its path (``model``)
and by what it is (``base``: a local folder's fingerprints, a GGUF file's SHA-256 and
quantisation; a hub id's branch by the commit it loaded, recorded once the tokenizer has
loaded and checked after every load), so other weights under the same path are refused before
anything loads (a moved branch where the Hugging Face cache already says so, else once it has
loaded, before an arm trains). Each arm's ``train/<arm>/arm.json`` names the run that wrote it,
so Trainer checkpoints another run left are refused rather than resumed. A rerun whose every
arm finished loads no tokenizer or weights and converts no GGUF file; one with arms left loads
for those alone.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from biasscope.backends.checkpoints import IN_MEMORY, Checkpoint, convert_gguf
from biasscope.backends.fingerprints import fingerprint_while_loading, hub_commit
from biasscope.backends.gguf import is_gguf
from biasscope.backends.hf_generate import identity_before_loading
from biasscope.backends.hf_model import HFConfig, load_model, load_tokenizer, resolve_device
from biasscope.core.digest import file_sha256
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import given_file
from biasscope.data.sources import hashed, recording, refuse_other_data
from biasscope.dynamics.live import LiveConfig
from biasscope.dynamics.scoring import SweepConfig, hf_comparable, init_run, list_checkpoints
from biasscope.dynamics.summary import write_dynamics_report
from biasscope.intervene import analysis, methods, ship
from biasscope.intervene.settings import InterveneConfig as InterveneConfig
from biasscope.intervene.train import (
    Limited,
    check_documents,
    check_targets,
    checkpoint_at,
    finished,
    owner,
    recorded,
    refuse_foreign,
    require_peft,
    train_arm,
)
from biasscope.probes import Probe, perplexity
from biasscope.probes.specs import load_probes
from biasscope.report.intervention import write_intervention_report
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json
from biasscope.store.run_json import refuse_other_kind, unsettled
from biasscope.store.units import Unit

FILE = "intervention.json"
CONTROL = "control"


@dataclass(frozen=True)
class InterveneResult:
    store: RunStore
    summary: dict[str, Any]
    report: Path
    intervention_report: Path


def _probes(config: InterveneConfig, held: list[perplexity.Document], corpus: str
            ) -> list[Probe]:
    probes: list[Probe] = [Limited(p, config.limit) for p in load_probes(
        ",".join(config.probes), data_dir=config.data_dir, kinds=("next_token",),
        what="biasscope intervene", flag="--probe")]
    docs = sorted(held, key=lambda d: d.id)[:config.eval_docs]
    return [*probes, perplexity.Perplexity(docs, corpus, config.max_words)]


@contextlib.contextmanager
def _identified(base: Checkpoint) -> Iterator[Callable[[], dict[str, str]]]:
    """What the base model is, as the other commands record a model (``base`` in the
    settings): a local folder's weights' ``fingerprint`` and ``files_fingerprint``, hashed
    while the block runs (the data load; cached, `fingerprint_while_loading`); a GGUF file's
    path, SHA-256 and quantisation (`identity_before_loading`: nothing converted). A hub id is
    its id and revision: the commit a branch resolves to is known from the cache before it
    loads, which may still name the one it pointed at last time (or none, before its first
    load), so it is recorded once loaded (`_commit_known`, `_loaded_commit`)."""
    entry = {k: v for k, v in identity_before_loading(base).items() if k != "commit"}
    if is_gguf(base.identity) or not Path(base.source).expanduser().is_dir():
        yield lambda: entry
        return
    with fingerprint_while_loading(base.source, base.revision) as prints:
        yield lambda: {**entry, **prints()}


def _commit_known(store: RunStore, base: Checkpoint, identity: dict[str, str]
                  ) -> dict[str, str]:
    """The base's identity with the hub commit the run recorded, as far as it is known before
    loading: the one the Hugging Face cache resolves the branch to now (a moved branch is
    refused before anything loads), else the recorded one (checked once it has loaded). A run
    that recorded none gains it after the load (`_loaded_commit`)."""
    before = _recorded(store).get("intervention")
    then = before.get("base") if isinstance(before, dict) else None
    if not isinstance(then, dict) or not then.get("commit"):
        return identity
    return {**identity, "commit": hub_commit(base.source, base.revision) or then["commit"]}


def _settings(config: InterveneConfig, method: methods.Intervention, corpus: str,
              data: dict[str, str], split: tuple[int, int], base: Checkpoint,
              identity: dict[str, str]) -> dict[str, Any]:
    return {"model": base.identity, "base": identity, "text": corpus, "data": data,
            "split": {"held_out": config.held_out, "seed": config.split_seed,
                      "by": "sha256 of document id", "train_documents": split[0],
                      "held_out_documents": split[1]},
            "intervention": {"name": method.name, **method.config()},
            "training": recorded(config.training), "eval_docs": config.eval_docs,
            "max_words": config.max_words}


def _run_json(store: RunStore) -> dict[str, Any]:
    """The run's run.json ({} for a new run)."""
    store.pull("run.json")
    if not store.run_json.is_file():
        return {}
    return dict(store.read_json("run.json"))


def _recorded(store: RunStore) -> dict[str, Any]:
    """The settings the run's run.json records ({} for a new run)."""
    return dict(_run_json(store).get("settings") or {})


def _a_sweeps(store: RunStore, run_json: dict[str, Any], probe: str) -> bool:
    """Whether ``probe``'s units in the run are all a sweep's (checkpoints scored into the run
    from files) and none an arm's (scored in memory): a probe the run's intervene calls never
    scored, which their reruns need not give."""
    seeds = sorted({0, *(run_json.get("seeds") or [])})
    held = {entry.get("source") == IN_MEMORY for entry in run_json.get("checkpoints") or []
            for seed in seeds if store.unit_path(Unit(
                str(entry.get("model")), entry.get("revision"), probe, seed, entry.get("step"),
                entry.get("identity"))).exists()}
    return held == {False}


def _same_probes(store: RunStore, probes: list[Probe]) -> None:
    """Refuse, by name, a ``--probe`` the run's first call did not score and one it scored
    that this call leaves out (the refusal was of their data files, "not recorded then" or
    "recorded then, not recorded now", which did not say a probe was added or dropped). Both
    arms' earlier evaluations lack an added one; a dropped one would be missing from the
    evaluations a resumed or added arm makes, and an arm that finished without it is never
    trained again to score it."""
    run_json = _run_json(store)
    before = dict(run_json.get("settings") or {})
    known = before.get("probes")
    if not isinstance(before.get("intervention"), dict) or not isinstance(known, dict):
        return  # a new run (or not an intervention run: `init_run` says so)
    if added := [p.name for p in probes if p.name not in known]:
        one = len(added) == 1
        raise BiasscopeError(f"--probe {', '.join(added)} {'was' if one else 'were'} not in "
                             f"{store.root}'s first call: an intervention run scores the "
                             "probes it began with; use another --out, or drop "
                             f"{'it' if one else 'them'}")
    given = {p.name for p in probes}
    if dropped := [name for name in known
                   if name not in given and not _a_sweeps(store, run_json, name)]:
        one = len(dropped) == 1
        raise BiasscopeError(f"--probe {', '.join(dropped)} {'was' if one else 'were'} in "
                             f"{store.root}'s first call, not in this one: an intervention run "
                             "scores the probes it began with at every evaluation; give "
                             f"{'it' if one else 'them'} again, or use another --out")


def _own_text(store: RunStore, corpus: str) -> tuple[str, dict[str, str]]:
    """The name to record for a ``--text`` file, and its SHA-256 (``text_sha256``): a file
    edited since the run recorded it is refused on a rerun like any other setting, and the
    same content named otherwise (relative then, absolute now) keeps the run's name. A run
    that recorded no digest (an older one) gains none: there is nothing to check it with."""
    if corpus == perplexity.ETHICS:  # the pinned file: its digest is in ``data``
        return corpus, {}
    digest = {"text_sha256": file_sha256(Path(corpus))}
    before = _recorded(store).get("intervention")
    if not isinstance(before, dict):
        return corpus, digest
    if "text_sha256" not in before:
        return corpus, {}
    same = before["text_sha256"] == digest["text_sha256"] and isinstance(before.get("text"), str)
    return (before["text"] if same else corpus), digest


def _refuse_other_files(store: RunStore, read: dict[str, Path], data: dict[str, str],
                        corpus: str, text: dict[str, str]) -> None:
    """A data file or ``--text`` edited since the run recorded it, refused as an audit refuses
    its data files (which file, both SHA-256, what to do), not as "a different 'intervention'"
    with the sweep's settings."""
    before = _recorded(store).get("intervention")
    if not isinstance(before, dict):
        return
    refuse_other_data(store.root, before.get("data"), read, data)
    if text:
        refuse_other_data(store.root, {"--text": before.get("text_sha256")},
                          {"--text": Path(corpus)}, {"--text": text["text_sha256"]})


def _loaded_commit(store: RunStore, base: Checkpoint, sweep: Callable[[dict[str, Any]], None],
                   settings: dict[str, Any]) -> dict[str, Any]:
    """Once the base's tokenizer or weights have loaded: the hub commit its branch resolved to
    (`hub_commit`, from the cache the load read), recorded in run.json (``base.commit``) where
    the run has none, refused where it recorded another ("intervention.base.commit: … then, …
    now", as any other setting), before an arm trains. The settings as recorded."""
    commit = hub_commit(base.source, base.revision)
    if not commit or commit == settings["base"].get("commit"):
        return settings
    settings = {**settings, "base": {**settings["base"], "commit": commit}}
    sweep(settings)
    return settings


def _held(store: RunStore) -> set[Path]:
    """The run's evaluations and Trainer checkpoints: `unsettled`'s ``holds`` is whether a
    call added any."""
    return {*store.unit_files(), *(store.root / "train").glob("*/checkpoint-*")}


def _repair(store: RunStore) -> None:
    """What a killed call left half-done: its temporary files
    (`RunStore.remove_stale_temp_files`: this host's dead writers' only) and a half-swapped
    ``RUN/recommended/`` (`ship.recover`).
    Called once the call has passed every check (the last: the hub commit its weights loaded)
    and before it stores an evaluation or saves weights, so that a refused rerun (another model
    or setting) leaves --out as it found it."""
    store.remove_stale_temp_files()
    ship.recover(store.root)


def run(config: InterveneConfig, intervention: methods.Intervention | None = None
        ) -> InterveneResult:
    """Train and watch both arms, then analyse and report (``intervention``: any object of the
    `methods.Intervention` shape, else ``config.method``)."""
    if config.training.steps % config.training.every:
        raise BiasscopeError(f"--steps {config.training.steps} is not a multiple of --every "
                             f"{config.training.every}: the last step would not be evaluated")
    method = intervention or methods.make(config.method)
    require_peft(config.training)
    if method.name == CONTROL or method.name.startswith(f"{CONTROL}-run"):
        raise BiasscopeError(f"an intervention cannot be named {method.name!r}: the control "
                             f"arm's runs are named {CONTROL!r}, {CONTROL}-run2, …")
    store = RunStore(config.out)
    refuse_other_kind(store, "intervention")  # before the base's GGUF file is hashed
    if config.text != perplexity.ETHICS:  # before the base's files are read
        given_file("--text", config.text, "a file of documents (one per line, or JSONL with "
                   f"'text'), or {perplexity.ETHICS}")
    (base,) = list_checkpoints([config.model], [], [], None)
    check_targets(base, config.training)  # before the data and the model load
    with _identified(base) as identify, recording() as read:
        docs, corpus = perplexity.load_documents(config.text, config.data_dir)
        corpus, text = _own_text(store, corpus)
        train, held = perplexity.split(docs, config.held_out, config.split_seed)
        probes = _probes(config, held, corpus)
        identity = identify()
    _same_probes(store, probes)
    data = hashed(read)
    _refuse_other_files(store, read, data, corpus, text)
    settings = {**_settings(config, method, corpus, data, (len(train), len(held)), base,
                            _commit_known(store, base, identity)), **text}
    scoring = HFConfig(batch_size=config.eval_batch_size)
    runs = range(config.training.runs, 0, -1)
    arms = {analysis.run_name(arm, r): replace(config.training, seed=config.training.seed + r - 1)
            for r in runs for arm in (CONTROL, method.name)}

    def sweep(now: dict[str, Any]) -> None:
        init_run(store, probes, SweepConfig(
            [checkpoint_at(name, 0) for name in arms], store, list(config.seeds),
            comparable={**hf_comparable(scoring), "intervention": now}), kind="intervention")

    def owners() -> dict[str, dict[str, Any]]:
        created = _run_json(store).get("created")
        return {name: owner(created, name, training, settings["base"])
                for name, training in arms.items()}

    refuse_foreign(store.root, owners(), fresh=not _run_json(store))  # before run.json is made
    # A call stopped before it adds an evaluation or a Trainer checkpoint (a commit refused
    # once loaded, a model that does not load) leaves run.json as it found it: its rewrite
    # (``updated``, a base or commit gained) records nothing the run holds.
    had = _held(store)
    with unsettled(store, lambda: bool(_held(store) - had), folders=("train",), rerun=True):
        sweep(settings)
        own = owners()  # a new run's, made now
        # A rerun whose every arm finished loads nothing and converts no GGUF file: the base
        # was checked by what it is (`_identified`: its files hashed), and the analysis reads
        # the stored evaluations. One with an arm left loads the tokenizer, and the weights
        # once per arm it trains.
        lora = bool(config.training.lora_rank)
        if all(finished(store.root, name) for name in arms):
            _repair(store)
        else:
            convert_gguf([base])
            device = resolve_device(config.device)
            loading = HFConfig(device=str(device), dtype="float32")
            tokenizer = load_tokenizer(base, loading)
            settings = _loaded_commit(store, base, sweep, settings)

            def load() -> Any:
                nonlocal settings
                model = load_model(base, loading)
                settings = _loaded_commit(store, base, sweep, settings)
                _repair(store)  # past the call's last check, before it stores or saves
                return model

            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            texts = [d.text for d in train]
            live = LiveConfig(seeds=tuple(config.seeds), batch_size=config.eval_batch_size)
            keep = [ship.saver(store, method.name, CONTROL, config.analysis, tokenizer,
                               config.training.every, lora)] if config.save_recommended else []
            changed = method.apply(texts)
            check_documents(tokenizer, texts, changed, method.name, config.training.seq_len)
            for r in runs:
                for arm, arm_texts, after in ((CONTROL, texts, []),
                                              (method.name, changed, keep if r == 1 else [])):
                    name = analysis.run_name(arm, r)
                    train_arm(name, arm_texts, load, tokenizer, probes, store, arms[name], live,
                              device, config.quiet, after, own[name])
    result = report(store, method.name, config.analysis, config.data_dir)
    _warn_thin(result.summary)
    if len(found := result.summary.get("runs") or []) > config.training.runs:
        print(f"note: {store.root} holds {len(found)} runs per arm (--runs "
              f"{config.training.runs} asked): all are analysed", file=sys.stderr)
    # weights saved by an earlier call are brought up to date under --no-save-recommended
    # too: their recommended.json would say that call's verdict (before runs were added, say)
    if (config.save_recommended or ship.saved(store.root)) and (
            why := ship.finalise(store.root, result.summary, lora)):
        print(f"warning: {why}", file=sys.stderr)
    return result


def stored_analysis(store: RunStore) -> analysis.InterventionAnalysisConfig:
    """The analysis settings of the run's last analysis (a custom ``--budget`` stays on a
    re-render), else the defaults (``n_resamples``, stored since it is said with the level:
    2000 for a run analysed before)."""
    path = store.root / FILE
    if not path.is_file():
        return analysis.InterventionAnalysisConfig()
    saved = store.read_json(FILE).get("options") or {}
    names = analysis.InterventionAnalysisConfig.__dataclass_fields__
    known = {k: v for k, v in saved.items() if k in names}
    return analysis.InterventionAnalysisConfig(**known)


#: What a rerun keeps from the run's last analysis where its flag is not given, besides the
#: levels: a setting that changes the verdict is never reset to its default by leaving it out.
KEPT = ("budget",)


def kept_analysis(out: str | Path, given: Mapping[str, Any]) -> dict[str, Any]:
    """The analysis settings a command line gives (``--budget``, ``--confidence``,
    ``--resamples``): each ``given``, else as ``out``'s last analysis stored it
    (`stored_analysis`), else the default. A rerun without ``--budget`` went back to 2% while
    it kept the levels, recommending another step under the same run. A bad level given is
    refused in its flag's words, before any data is read or model loaded."""
    from biasscope.core.levels import NAMES, Levels

    Levels(**{name: given[name] for name in NAMES if name in given})
    stored = stored_analysis(RunStore(out))
    return {name: given[name] if name in given else getattr(stored, name)
            for name in (*NAMES, *KEPT)}


def _arm(store: RunStore) -> str:
    name: str = store.read_json("run.json")["settings"]["intervention"]["intervention"]["name"]
    return name


def render(store: RunStore, output: str | Path | None = None, data_dir: str | None = None
           ) -> Path:
    """The intervention report again from the stored records, with the stored analysis
    settings; ``output``: written there, the run left untouched."""
    if output is None:
        done = report(store, data_dir=data_dir)
        _warn_thin(done.summary)
        return done.intervention_report
    summary = analysis.analyse(store, _arm(store), CONTROL, stored_analysis(store))
    _warn_thin(summary)
    return write_intervention_report(store, summary, Path(output))


def _warn_thin(summary: dict[str, Any]) -> None:
    """The analysis' sentence that its level is too fine for its resamples
    (`analysis.analyse`'s ``thin_tails``), on stderr as the other commands say theirs: the
    page says it at its top, where a user who reads only the terminal does not look."""
    if thin := summary.get("thin_tails"):
        print(f"warning: {thin}", file=sys.stderr)


def report(store: RunStore, arm: str | None = None,
           config: analysis.InterventionAnalysisConfig | None = None, data_dir: str | None = None
           ) -> InterveneResult:
    """Analyse an intervention run (again) and write both reports."""
    config = config or stored_analysis(store)
    summary = analysis.analyse(store, arm or _arm(store), CONTROL, config)
    write_json(store.root / FILE, summary)
    store.publish(store.root / FILE)
    page = write_dynamics_report(store, data_dir=data_dir)
    store.publish(page)
    extra = write_intervention_report(store, summary)
    store.publish(extra)
    return InterveneResult(store, summary, page, extra)
