"""``biasscope counterfactual`` as one library call: reward models and LLM judges scored on
the same demographic counterfactual pairs, into a run directory (``run.json``,
``summary.json``, ``scores.jsonl``, ``report.html``).

``scores.jsonl`` holds every score, one line per scorer, pair, version (original or
swapped) and response: a reward model's reward; a judge's verdict or the reason there is
none, with each answer as the judge wrote it. A rerun replaces the lines of the scorers it
scores and keeps the others' (``summary.json`` covers the scorers of the last run and names
the ones kept). A judge whose requests failed is summarised (``summary.json`` says
``incomplete``) but its lines are not written: a failure is no answer, and a rerun asks the
failed requests again.

``run.json`` records what decides the results (the pairs by content hash, each scorer's
identity (a local model's with its weights' and its tokenizer's, template's and config's
fingerprints), a reward model's dtype, the judge labels, position strategy and question
wording, the seed); a rerun into the same directory with other settings is refused in one
line. Judge requests go through the response cache, and a reward model's rewards stored in
``scores.jsonl`` are read back, so a rerun asks nothing again: one at another level
(``--confidence``, ``--resamples``, which summary.json's ``analysis`` keeps and run.json does
not record) summarises the same answers again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.backends.cache import Cached
from biasscope.backends.labels import Named, label_models, parse_models
from biasscope.backends.reward import HFRewardModel, RewardConfig, identities_before_loading
from biasscope.core.bootstrap import resampling
from biasscope.core.digest import file_sha256
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import given_file, read_jsonl
from biasscope.counterfactual import scorers as cf
from biasscope.counterfactual.judged import refuse_other_judging
from biasscope.counterfactual.rerun import (
    SCORES,
    check_before_loading,
    held_rewards,
    refuse_reordered_panel,
    start,
)
from biasscope.counterfactual.settings import CounterfactualConfig as CounterfactualConfig
from biasscope.data.sources import recording
from biasscope.judge import (
    Judge,
    JudgingConfig,
    KnownJudges,
    check_task,
    judges_before_loading,
    labels_of,
    make_judges,
    question_sha256,
)
from biasscope.report.counterfactual import write_counterfactual_report
from biasscope.sensitivity import hh_count, reward_settings
from biasscope.store.directory import RunStore
from biasscope.store.files import json_line, write_bytes, write_json
from biasscope.store.locks import run_lock
from biasscope.store.run_json import (
    readable_settings,
    refuse_other_kind,
    rewritten,
    run_levels,
    unsettled,
)


@dataclass(frozen=True)
class CounterfactualResult:
    summary: dict[str, Any]
    report: Path


def run(config: CounterfactualConfig, reward_models: Sequence[Any] = (),
        judge: Any = None) -> CounterfactualResult:
    """Score the pairs with every scorer; ``reward_models``/``judge`` already loaded are
    used as given (tests, notebooks), else they are loaded from ``config``."""
    # An empty value (an unset "$VARIABLE") is a mistake: --labels "" judged pairwise.
    if not config.pairs.strip():
        raise BiasscopeError("--pairs is empty: give hh-rlhf:harmless-base:N or a JSONL file "
                             "of pairs")
    if config.labels is not None and not config.labels.strip():
        raise BiasscopeError("--labels is empty: give a JSON file of label name: description, "
                             "or leave it out to judge pairwise")
    # A bad --confidence is refused before the pairs are read (`run_levels`).
    levels = run_levels(RunStore(Path(config.out)), config.analysis)
    refuse_other_kind(RunStore(Path(config.out)), "counterfactual")  # before any is hashed
    with recording() as read:  # the hh-rlhf split: its whole SHA-256 is the pairs' file_sha256
        items, source_sha = _items(config)
    own = not read  # a file of the user's pairs, recorded by its whole SHA-256 too
    # Everything that can be checked is checked before any model loads.
    labels = _labels(config.labels) if config.labels is not None else None
    judged = judge is not None or bool(config.judges)
    if not (reward_models or config.reward_models or judged):
        raise BiasscopeError("give a --reward-model or a --judge-model to check")
    if labels is not None and not judged:
        raise BiasscopeError("--labels is for a --judge-model (reward models score the "
                             "responses as they are): drop it or add a judge")
    if judged:
        check_task(labels is None, labels, JudgingConfig().keys)
        cf.check_judged(items, labels)
    reward = config.reward.reward_config(config.backend)
    named = parse_models(list(config.reward_models), "--reward-model") if not reward_models \
        else []
    judges = parse_models(list(config.judges), "--judge-model", joiner="+") \
        if judge is None else []  # the panel is named a+b
    if judged:  # a rerun of its reward models alone keeps the judges' scores as they are
        refuse_other_judging(config.out, [name for name, _ in judges], config.labels, labels,
                             config.position)
    pairs = {"source": "jsonl" if own else config.pairs, "file_sha256": source_sha,
             "sha256": cf.items_sha256(items)}
    # A run in --out that this call cannot join is refused before a model loads (minutes).
    order, known, before = _judges_before_loading(config, judges, labels,
                                                  bool(named or reward_models))
    # A reward model's entry over a judge's of the same name: the name shared is refused.
    check_before_loading(config, {"pairs": pairs, "seed": config.seed, "scorers": {
        **known, **identities_before_loading(named, reward, "--reward-model")}},
        order, ordered=True, read=read)
    # The judges first: a server's spec and flags are checked before a reward model loads.
    judge = judge if judge is not None else _judge(config, judges, before)
    if not order and judge is not None:  # its labels known once its backends are made
        refuse_reordered_panel(config, [m.label for m in judge.models])
    models = list(reward_models) or _reward_models(named, reward)
    _check_distinct(models, judge)
    store = RunStore(Path(config.out))
    scorers: dict[str, Any] = {m.label: reward_settings(m) for m in models}  # + dtype
    if judge is not None:
        asked = question_sha256(judge.config, labels)
        scorers.update({m.label: {**m.identity(), "position": config.position,
                                  "labels": labels, "question_sha256": asked}
                        for m in judge.models})
    settings = {"pairs": pairs, "seed": config.seed, "scorers": scorers}
    judged_by = [m.label for m in judge.models] if judge is not None else []
    # Stopped before its scores are stored (a judge's server not reached, Ctrl-C), a call
    # leaves run.json as it found it: a first call's taken away (and the folder it made), a
    # rerun's given back.
    with unsettled(store, rewritten(store.root / SCORES), rerun=True):
        store.root.mkdir(parents=True, exist_ok=True)
        start(store, settings, waiting=judged_by)
        # Their settings are the run's (`start` refused others): their stored rewards hold.
        held = held_rewards(store.root / SCORES, [m.label for m in models])
        with resampling() as resampled:  # fewer than 20 pairs: t intervals, no bootstrap
            rows = [cf.score_reward_model(m, items, config.seed, levels, held.get(m.label))
                    for m in models]
            if judge is not None:
                rows.append(cf.score_judge(judge, items, labels, config.seed, levels))
        # A scorer with failed requests is summarised but not stored: a failure is no answer,
        # and a rerun asks those requests again (the answered ones come from the cache).
        failed = [row for row in rows if (row.get("answers") or {}).get("failed_calls")]
        incomplete = {row["scorer"] for row in failed}
        if len(incomplete) == len(rows) and not (store.root / SCORES).exists():
            missing = _incomplete(failed)  # a first call that stores nothing: no run.json
            raise BiasscopeError(
                f"{missing['failed_requests']} of {missing['requests']} judge requests failed "
                f"(first: {missing['first_error']}): nothing was stored in {store.root} (a "
                "judge's answers are stored once all its requests are answered); run again, "
                "with the --judge-model or its server put right")
        if judged_by and not incomplete:  # its scores are stored: so are its settings
            start(store, settings)
    records = [r for row in rows for r in row.pop("records") if row["scorer"] not in incomplete]
    # Under the run's lock: another run into this --out (another scorer) reads and rewrites
    # scores.jsonl too, and would write its kept lines over this run's.
    with run_lock(store):
        kept, others = _kept(store.root / SCORES, {row["scorer"] for row in rows} - incomplete)
        others = [o for o in others if o not in incomplete]  # summarised here, if not stored
        store.check_same_folder()
        store.remove_stale_temp_files()  # a killed call's: this one has passed every check
        write_bytes(store.root / SCORES, "".join(
            json_line(r) for r in [*kept, *records]).encode("utf-8"))
        summary = {"pairs": len(items), "source": config.pairs,
                   **cf.summarise(rows, levels.confidence),
                   "analysis": levels.stored("the paired differences'", resampled.drawn)}
        if thin := summary["analysis"].get("thin_tails"):
            summary["sentences"].insert(0, thin)
        if others:
            summary["kept"] = others
            summary["sentences"].append(
                f"This run scored {', '.join(r['scorer'] for r in rows)}; the scores of "
                f"{', '.join(others)} from an earlier run are kept in {SCORES} but not summarised "
                "here: rerun with every scorer to summarise them together.")
        if failed:
            summary["incomplete"] = missing = _incomplete(failed)
            summary["sentences"].append(
                f"{', '.join(r['scorer'] for r in failed)}: {missing['failed_requests']} of "
                f"{missing['requests']} requests failed, so this run's answers of "
                f"{'this scorer' if len(failed) == 1 else 'these scorers'} are summarised here "
                f"but not written to {SCORES}: rerun the same command to ask the failed "
                "requests again.")
        write_json(store.summary_json, summary)
        return CounterfactualResult(summary, write_counterfactual_report(store.root))


def _check_distinct(models: Sequence[Any], judge: Any) -> None:
    """One line where a reward model and a judge share a label: run.json and scores.jsonl
    key the scorers by it, so one's settings would replace the other's and their scores mix."""
    if judge is None:
        return
    judged = {m.label for m in judge.models} | {"+".join(m.label for m in judge.models)}
    if shared := [m.label for m in models if m.label in judged]:
        raise BiasscopeError(f"{shared[0]!r} names both a --reward-model and a --judge-model "
                             "(scores and settings are kept by name): name them apart with "
                             "NAME=SPEC")


def _incomplete(failed: list[dict[str, Any]]) -> dict[str, Any]:
    """The scorers whose requests failed, how many of how many, and the first error."""
    found = [row["answers"] for row in failed]
    return {"scorers": [row["scorer"] for row in failed],
            "failed_requests": sum(a["failed_calls"] for a in found),
            "requests": sum(a["calls"] for a in found),
            "first_error": next((a["first_error"] for a in found if a.get("first_error")), None)}


def _kept(path: Path, scored: set[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of an earlier ``scores.jsonl`` whose scorer this run did not score (a
    rerun with fewer scorers removes nothing), and those scorers."""
    if not path.is_file():
        return [], []
    kept = [r for _, r in read_jsonl(path) if r.get("scorer") not in scored]
    return kept, list(dict.fromkeys(str(r.get("scorer")) for r in kept))


def _items(config: CounterfactualConfig) -> tuple[list[Any], str]:
    count = hh_count(config.pairs, "--pairs", "pairs")
    if count is not None:
        return cf.builtin_items(config.data_dir, count, config.seed)
    given_file("--pairs", config.pairs, "a JSONL file of pairs, or hh-rlhf:harmless-base:N")
    return cf.read_items(config.pairs), file_sha256(config.pairs)


def _labels(path: str) -> dict[str, str]:
    """The ``--labels`` file's label set; its errors name the flag."""
    return labels_of("--labels", path, "a JSON file of label name: description, or leave it "
                     "out to judge pairwise")


def _judges_before_loading(config: CounterfactualConfig, judges: list[Named],
                           labels: dict[str, str] | None, rewarded: bool = False
                           ) -> tuple[list[str], dict[str, Any], KnownJudges]:
    """The judges' labels, each judge's scorer entry as known before any loads, as a reward
    model's is (`identities_before_loading`), and what `judges_before_loading` knows of them
    (the judges made already: a server's, canned answers). A local one's entry is what its
    spec settles (a GGUF file's path, SHA-256 and quantisation: hashed, not converted; a
    folder the run recorded by its weights' fingerprint, hashed), the dtype it loads in where
    its files say it (`panel.local_judge`), and what run.json records beside it.
    ``rewarded``: reward models are checked too, which take ``--dtype`` beside server judges."""
    recorded = readable_settings(RunStore(Path(config.out)), "counterfactual") or {}
    scorers = recorded.get("scorers")
    known = judges_before_loading(config.backend, judges, "--judge-model", "+",
                                  scorers if isinstance(scorers, Mapping) else None,
                                  local_beside=rewarded)
    asked = question_sha256(JudgingConfig(position=config.position, seed=config.seed), labels)
    beside = {"position": config.position, "labels": labels, "question_sha256": asked}
    return known.labels, {name: {**entry, **beside}
                          for name, entry in known.identities.items()}, known


def _reward_models(named: list[Named], reward: RewardConfig) -> list[Any]:
    """The reward models, a local one deferred (`HFRewardModel`): it loads when it first
    scores, so a rerun whose every reward is stored (`held_rewards`) loads none; its identity
    comes from its files."""
    models = [HFRewardModel(spec, reward, deferred=True) for _, spec in named]
    label_models(models, named, "--reward-model")
    return models


def _judge(config: CounterfactualConfig, named: list[Named], known: KnownJudges) -> Any:
    """The panel of judges: those made already (`_judges_before_loading`), the others
    loaded now."""
    if not named:
        return None
    cache = config.backend.response_cache()
    models = [Cached(g, cache)
              for g in make_judges(config.backend, named, known, "--judge-model", "+")]
    return Judge(models, JudgingConfig(position=config.position, seed=config.seed))
