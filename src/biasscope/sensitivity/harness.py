"""``biasscope sensitivity``: perturb, score, and summarise into a run directory.

Layout: ``run.json``; ``perturbations-<direction>.jsonl`` (every critique and revision, with the
validity flags); ``records/`` with one unit per (reward model, direction): one row per
(principle, prompt) with the original and perturbed rewards; ``summary.json`` (indices,
comparisons, validity); ``report.html``. Perturbations come through the response cache and
finished units are skipped, so a rerun sends no requests and scores nothing twice. A (reward
model, direction) whose perturbations had failed requests is summarised but not stored as a
unit (``summary.json`` says ``incomplete``): a rerun asks the failed requests again. A first
call whose every request failed stores nothing and is refused in one line, --out left as it was.
A rerun stopped before it stores anything new leaves run.json and the perturbation files as it
found them: a reward model or direction it added is not listed without records.

That reuse is only sound for the same run, so ``run.json`` records under ``settings`` what
determines the records: the prompts (source, file SHA-256, N, seed, and the SHA-256 of the
conversations themselves), the principles (ids and the SHA-256 of their texts and groups), the
perturber (backend, model, max tokens, seed), the templates (SHA-256), and per direction and
per reward model what they were run with (a reward model's identity holds its source, revision,
transform, format and dtype, and a local model's fingerprints of its weights and of its
tokenizer, template and config files). A rerun that differs is refused in one line naming the
setting (``runs.settings.merge_settings``, the check ``dynamics`` uses); a rerun may add reward
models and directions; a run from before fingerprints gains them (``gain_identity``).
``conventions`` only shape ``summary.json``, which every run recomputes from all the records,
so a rerun may change them: run.json and summary.json then both say which. So do the levels
(``--confidence``, ``--resamples``: `HarnessConfig.levels`), which summary.json's ``analysis``
keeps and run.json does not record: a rerun at another level summarises the stored rewards
again, scoring nothing and loading no reward model.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from biasscope.backends.base import GenerateParams, Generator, RewardScorer
from biasscope.backends.reward import whole_identity
from biasscope.core.errors import BiasscopeError
from biasscope.core.levels import Levels
from biasscope.core.renamed import renamed
from biasscope.data.sources import hashed, refuse_other_data
from biasscope.sensitivity.confounds import Confounds
from biasscope.sensitivity.intervals import convention
from biasscope.sensitivity.perturb import Perturbation, Templates, perturb
from biasscope.sensitivity.principles import Constitution
from biasscope.sensitivity.prompts import Conversation, Prompts
from biasscope.sensitivity.sanity import Pairs, run_sanity, summarise_sanity
from biasscope.sensitivity.summary import summarise
from biasscope.store import run_json
from biasscope.store.directory import RunStore
from biasscope.store.files import write_bytes, write_json
from biasscope.store.locks import run_lock
from biasscope.store.settings import (
    check_known,
    gain_identity,
    merge_settings,
    refuse_renamed,
    sha256_json,
)
from biasscope.store.units import Unit

# A data file not recorded before (a run from before they were) is added, as a sweep's is.
GROW = {"directions": "direction", "reward_models": "reward model", "data": "data file"}


@dataclass(frozen=True)
class HarnessConfig:
    directions: tuple[str, ...] = ("toward",)
    templates: Templates = field(default_factory=Templates)
    max_tokens: int = 512
    seed: int = 0
    conventions: str = "biasscope"  # of the indices; see biasscope.sensitivity.intervals
    sanity: Pairs | None = None  # chosen/rejected pairs for each model's accuracy
    confounds: Confounds = field(default_factory=Confounds)
    # The data files the principles, prompts and pairs were read from (``recording``): each
    # whole file's SHA-256 is recorded, since ``ccai:topK`` hashes only the comments it keeps.
    data: Mapping[str, Path] = field(default_factory=dict)
    # The summary's levels; None: those the run's summary.json stored (`run_json.run_levels`).
    levels: Levels | None = None


def _perturbations(store: RunStore, direction: str, perts: Sequence[Perturbation]) -> None:
    """Write ``perturbations-<direction>.jsonl`` under the run's lock, atomically. A
    perturbation stored without an error is kept over this run's failure of it: another run
    into this --out (or an earlier one) stored records of it, and a failed request is no
    answer to replace them with."""
    path = store.root / f"perturbations-{direction}.jsonl"
    with run_lock(store):
        stored = _stored_answers(path)
        rows = [stored.get((p.conversation_id, p.principle_id), asdict(p))
                if p.error is not None else asdict(p) for p in perts]
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        was = path.read_bytes() if path.is_file() else None
        write_bytes(path, lines.encode("utf-8"))
        store.wrote(path, was)  # this call's, for `run_json.unsettled` to give back


def _stored_answers(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The perturbations a run stored in ``path`` without an error, by (conversation,
    principle); none where the file is absent or does not read as this file (rewritten)."""
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        return {(r["conversation_id"], r["principle_id"]): r for r in rows
                if r.get("error") is None}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def records(model: RewardScorer, conversations: Sequence[Conversation],
            constitution: Constitution, perts: Sequence[Perturbation]) -> pd.DataFrame:
    """Original and perturbed rewards of one model, one row per (principle, prompt)."""
    by_id = {c.id: c for c in conversations}
    originals = dict(zip(by_id, model.score([(c.turns, c.response) for c in conversations])))
    done = [p for p in perts if p.revision is not None]
    perturbed = dict(zip([(p.conversation_id, p.principle_id) for p in done], model.score(
        [(by_id[p.conversation_id].turns, str(p.revision)) for p in done])))
    principles = {p.id: p for p in constitution.principles}
    rows = [{"model": model.label, "direction": p.direction, "principle": p.principle_id,
             "principle_text": principles[p.principle_id].text,
             "group": principles[p.principle_id].group, "prompt_id": p.conversation_id,
             "original": originals[p.conversation_id],
             "perturbed": perturbed.get((p.conversation_id, p.principle_id), math.nan),
             "response": by_id[p.conversation_id].response, "critique": p.critique,
             "revision": p.revision, "preamble": p.preamble, "echo": p.echo,
             "truncated": p.truncated,
             "length_change": p.length_change, "error": p.error} for p in perts]
    frame: pd.DataFrame = pd.DataFrame(rows)
    return frame


def settings(reward_models: Sequence[RewardScorer], perturber: Generator, prompts: Prompts,
             constitution: Constitution, config: HarnessConfig) -> dict[str, Any]:
    """What determines a sensitivity run's records (see the module doc)."""
    return _settings(prompts, constitution, config,
                     {**perturber.identity(), "max_tokens": config.max_tokens,
                      "seed": config.seed},
                     {m.label: reward_settings(m) for m in reward_models})


def _settings(prompts: Prompts, constitution: Constitution, config: HarnessConfig,
              perturber: dict[str, Any] | None, reward_models: dict[str, Any]
              ) -> dict[str, Any]:
    """`settings` from the perturber's and the reward models' entries (``perturber`` None:
    left out, for the check before it is made)."""
    revise = {"toward": config.templates.revision, "away": config.templates.away}
    return {
        "prompts": {**prompts.settings(), "conversations_sha256": sha256_json(
            [[c.id, c.turns, c.response] for c in prompts.conversations])},
        "principles": {"ids": [p.id for p in constitution.principles],
                       "sha256": sha256_json([[p.id, p.text, p.group]
                                              for p in constitution.principles])},
        **({"perturber": perturber} if perturber is not None else {}),
        "critique_template": sha256_json(config.templates.critique),
        "directions": {d: {"revision_template": sha256_json(revise[d])}
                       for d in config.directions},
        "reward_models": reward_models,
        **({"sanity": config.sanity.settings()} if config.sanity is not None else {}),
        **({"data": hashed(config.data)} if config.data else {})}


def check_before_loading(out: str | os.PathLike[str], prompts: Prompts,
                         constitution: Constitution, config: HarnessConfig,
                         reward_models: dict[str, dict[str, str]],
                         perturber: Generator | None = None) -> None:
    """Refuse, writing nothing, what `run_sensitivity` would refuse without the loaded models:
    a folder that is another kind of run or none, a damaged run.json, a setting other than the
    run recorded, the run's reward model under another name. ``reward_models``: each label's
    identity as known before it loads (`backends.reward.identities_before_loading`), compared
    on what it holds; the rest is checked again once the models are loaded. ``perturber``:
    checked too once made (a local model loads then: it is checked without it first)."""
    _check(config, prompts)
    store = RunStore(Path(out))
    now = _settings(prompts, constitution, config, None if perturber is None else {
        **perturber.identity(), "max_tokens": config.max_tokens, "seed": config.seed},
        reward_models)

    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        if previous is not None:
            refuse_other_data(store.root, previous.get("settings", {}).get("data"),
                              config.data, now.get("data", {}))
            check_known(store.run_json, previous.get("settings", {}), now, "reward_models",
                        "reward model", whole_identity, GROW, added=("sanity",))
        return {}

    if store.run_json.is_file() or store.remote is not None:
        run_json.check_run(store, "sensitivity", build)
    else:
        run_json.refuse_foreign_folder(store)


def _check(config: HarnessConfig, prompts: Prompts) -> None:
    """What is refused before the run directory is written: an unknown convention, a template
    without its fields, no conversations."""
    convention(config.conventions)  # an unknown name fails before any request
    config.templates.check()
    if not prompts.conversations:  # nothing to perturb
        raise BiasscopeError(f"{prompts.source or 'the prompts'}: no conversations to perturb; "
                             "give 1 or more")


def reward_settings(model: RewardScorer) -> dict[str, str]:
    """The model's identity with the dtype it runs in: an HF reward model's identity names
    the dtype its weights were loaded in; another scorer's, where its config has one, is the
    dtype asked for."""
    found = dict(model.identity())
    dtype = getattr(getattr(model, "config", None), "dtype", None)
    if dtype is not None and "dtype" not in found:
        found["dtype"] = str(dtype)
    return found


def _as_prompts(conversations: Prompts | Sequence[Conversation]) -> Prompts:
    if isinstance(conversations, Prompts):
        return conversations
    convs = tuple(conversations)
    return Prompts(convs, "conversations", "", in_file=len(convs))


def _start(store: RunStore, now: dict[str, Any], describe: dict[str, Any],
           read: Mapping[str, Path]) -> dict[str, Any]:
    """Write run.json with ``now`` merged over the recorded settings, or refuse in one line;
    its ``versions`` are kept from the run's first call. ``read``: the data files hashed in
    ``now["data"]``, named where one differs from the run's."""
    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        if previous is not None:
            refuse_other_data(store.root, previous.get("settings", {}).get("data"), read,
                              now.get("data", {}))
            refuse_renamed(store.run_json, previous.get("settings", {}).get("reward_models"),
                           now["reward_models"], "reward model")
        merged = now if previous is None else merge_settings(
            store.run_json, gain_identity(previous.get("settings", {}), now), now, GROW,
            added=("sanity",))  # older runs gain the sanity check
        models = merged["reward_models"]
        return {"model": ", ".join(models), "reward_models": list(models.values()),
                "directions": list(merged["directions"]), **describe, "settings": merged}

    used = run_json.model_versions([now["perturber"], *now["reward_models"].values()])
    # two runs started into one --out must not lose each other's models
    written = run_json.start_run(store, "sensitivity", build, now=used)
    return dict(written["settings"])


def _missing(store: RunStore, covered: set[tuple[str, str]]) -> list[dict[str, str]]:
    """The (reward model, direction) units run.json lists that this run did not score and no
    run stored (an earlier run's requests failed): the run is incomplete until one does."""
    recorded = store.read_json("run.json")["settings"]
    return [{"model": model, "direction": direction}
            for direction in recorded["directions"] for model in recorded["reward_models"]
            if (model, direction) not in covered and not store.has(Unit(
                model=model, revision=None, probe=f"sensitivity-{direction}", seed=0))]


def _held(store: RunStore) -> set[Any]:
    """What the run holds that a call stored: its units, each answered perturbation (a failed
    request is no answer) and sanity.json as it reads (written again only where it gains a
    model's scores). `unsettled`'s ``holds`` is whether a call added any."""
    held: set[Any] = {*store.unit_files(), *((p.name, *key) for p in store.root.glob(
        "perturbations-*.jsonl") for key in _stored_answers(p))}
    if (sanity := store.root / "sanity.json").is_file():
        held.add(sanity.read_bytes())
    return held


def _refuse_nothing_stored(store: RunStore, failures: dict[str, Any]) -> None:
    """One line where every perturbation request failed and the run holds nothing (a wrong
    --perturber model, a server answering errors): the files of its failures are taken away,
    and `run_json.unsettled` takes this first call's run.json, so that the call with the
    perturber put right is not refused for settings a run of nothing recorded."""
    with run_lock(store):
        if _held(store):  # another call into this --out stored meanwhile
            return
        for path in store.root.glob("perturbations-*.jsonl"):
            was = path.read_bytes()
            path.unlink(missing_ok=True)
            store.wrote(path, was)
    raise BiasscopeError(f"all {failures['requests']} perturbation requests failed (first: "
                         f"{failures['first_error']}): nothing was stored in {store.root}; put "
                         "the perturber right (--perturber, --base-url) and run again")


def run_sensitivity(reward_models: Sequence[RewardScorer], perturber: Generator,
                    conversations: Prompts | Sequence[Conversation], constitution: Constitution,
                    out: str | os.PathLike[str], config: HarnessConfig | None = None
                    ) -> RunStore:
    """Perturb, score and summarise into ``out``; ``conversations`` as loaded (``Prompts``
    carries the source and its hash into run.json) or a plain sequence."""
    config = config or HarnessConfig()
    prompts = _as_prompts(conversations)
    _check(config, prompts)
    conversations = prompts.conversations
    store = RunStore(Path(out))
    # A call stopped before it stores anything new (a reward model that fails as it scores,
    # Ctrl-C) leaves run.json as it found it (none, for a first call: nor the folder it made),
    # and its directions' perturbation files (only failures, then): a reward model or
    # direction it added is not listed without records. Answers are stored: run.json records
    # their template.
    had = _held(store)
    with run_json.unsettled(store, lambda: bool(_held(store) - had), rerun=True,
                            files=[f"perturbations-{d}.jsonl" for d in config.directions]):
        store.root.mkdir(parents=True, exist_ok=True)
        _start(store, settings(reward_models, perturber, prompts, constitution, config), {
            "perturber": perturber.identity(),
            "principles": {"source": constitution.source, "top": constitution.top,
                           "ids": [p.id for p in constitution.principles]},
            "prompts": prompts.notes(), "templates": asdict(config.templates),
            "conventions": config.conventions, "confounds": asdict(config.confounds)},
            config.data)
        params = GenerateParams(max_tokens=config.max_tokens, seed=config.seed)
        # units with failed perturbations: summarised, not stored
        pending: list[tuple[Unit, int, pd.DataFrame]] = []
        failures: dict[str, Any] = {"failed_requests": 0, "requests": 0, "first_error": None}
        covered: set[tuple[str, str]] = set()  # (model, direction) units this run scored
        for direction in config.directions:
            perts = perturb(perturber, [(c.id, c.turns, c.response) for c in conversations],
                            [(p.id, p.text) for p in constitution.principles], direction,
                            config.templates, params)
            _perturbations(store, direction, perts)
            failed = [p for p in perts if p.error is not None]
            failures["requests"] += len(perts)
            failures["failed_requests"] += len(failed)
            failures["first_error"] = (failures["first_error"]
                                       or (failed[0].error if failed else None))
            for model in reward_models:
                covered.add((model.label, direction))
                unit = Unit(model=model.label, revision=None, probe=f"sensitivity-{direction}",
                            seed=0)
                if store.has(unit, rows=len(perts)):  # one row per perturbation
                    continue
                frame = records(model, conversations, constitution, perts)
                if failed:  # a failure is no answer: a rerun asks again (the rest is cached)
                    pending.append((unit, len(perts), frame))
                else:
                    store.write_unit(unit, frame)
        if failures["failed_requests"] == failures["requests"]:
            _refuse_nothing_stored(store, failures)
        if config.sanity is not None:
            run_sanity(store, reward_models, config.sanity)
        # Under the run's lock: another run into this --out that stored its units after this one
        # read the records would otherwise have its summary written over by this one's.
        with run_lock(store):
            # a unit another run into this --out stored meanwhile is read from its file, whole
            left = [frame for unit, rows, frame in pending if not store.has(unit, rows=rows)]
            recs = pd.concat([store.records(), *left], ignore_index=True)
            levels = config.levels or run_json.run_levels(store, None)
            summary = summarise(recs, constitution, config.conventions, prompts,
                                config.confounds, levels)
            if (store.root / "sanity.json").is_file():
                summary["sanity"] = summarise_sanity(store.read_json("sanity.json"),
                                                     levels.confidence)
            if left:
                summary["incomplete"] = failures
            if missing := _missing(store, covered):
                summary["incomplete"] = {**failures, "missing": missing}
            store.check_same_folder()
            store.remove_stale_temp_files()  # a killed call's: this one passed every check
            write_json(store.summary_json, summary)
    return store


__all__ = ["HarnessConfig", "check_before_loading", "records", "reward_settings",
           "run_sensitivity", "settings"]


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"SensitivityOptions": "HarnessConfig"}, globals().__getitem__)
