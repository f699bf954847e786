"""``biasscope judge`` and ``biasscope judge-audit`` as one library call each: a judge of one
or more models over a JSONL task, into a run directory with its report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.backends.cache import Cached
from biasscope.backends.labels import parse_models
from biasscope.backends.redact import redact_urls
from biasscope.core.bootstrap import resampling
from biasscope.core.config import comma_entries
from biasscope.core.digest import file_sha256
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import given_file
from biasscope.core.levels import Levels
from biasscope.data.sources import refuse_other_data
from biasscope.judge.batch import (
    VERDICTS,
    Failures,
    Task,
    check,
    failed,
    finish,
    judge_task,
    labels_of,
    read_task,
    start,
    write_judged,
)
from biasscope.judge.biases import classifier_biases, pairwise_biases
from biasscope.judge.core import Judge, JudgeError, JudgingConfig, Verdict, check_keys
from biasscope.judge.label_sets import labels_sha256, refuse_other_label_set
from biasscope.judge.panel import judges_before_loading, make_judges
from biasscope.judge.settings import JudgeConfig as JudgeConfig
from biasscope.judge.tasks import question_sha256
from biasscope.store.directory import RunStore
from biasscope.store.run_json import (
    readable_settings,
    refuse_other_kind,
    rewritten,
    run_levels,
    unsettled,
)


@dataclass(frozen=True)
class JudgeResult:
    result: dict[str, Any]
    report: Path | None
    failed: Failures | None = None  # requests that failed: a rerun asks them again


def judge(config: JudgeConfig) -> JudgeResult:
    """Judge every item of the task, then write ``verdicts.jsonl`` and what the batch says
    (all of it after the judging: a run stopped midway keeps what it held). Items whose
    requests failed are left out (or keep the verdict an earlier call stored); a call whose
    every item failed leaves an existing run.json as it was (no ``versions`` gained: its
    verdicts are an earlier call's), and a first such call writes nothing (`_nothing_stored`):
    the call with the judge's server put right is not refused for a run of nothing."""
    levels = _levels(config)  # a bad --confidence is refused before a judge loads
    made, task, labels, judges = _setup(config, "judge")
    settings = run_settings(config, made.config, _identities(made), task, labels)
    store = check(config.out, "judge", list(judges), settings, {"judges": judges})
    verdicts = judge_task(made, task, labels)
    answered = not all(map(failed, verdicts))
    if not answered and not store.run_json.is_file():
        raise _nothing_stored(store, verdicts)
    # Stopped before its verdicts are written, a call leaves run.json as it found it.
    with unsettled(store, rewritten(store.root / VERDICTS), rerun=True):
        store = (start if answered else check)(store, "judge", list(judges), settings,
                                               {"judges": judges})
        result, report, missing = write_judged(store, made, task, verdicts, config.ranking,
                                               levels)
    return JudgeResult(result, report, missing)


def _levels(config: JudgeConfig) -> Levels:
    """The levels given over those the run's summary.json stored (`run_levels`); a rerun at
    another level takes its verdicts from the response cache."""
    return run_levels(RunStore(Path(config.out)), config.analysis)


def _nothing_stored(store: RunStore, verdicts: Sequence[Verdict]) -> BiasscopeError:
    """The one line of a first call in which no item got all its requests answered: it
    writes nothing, as a server that cannot be reached writes nothing."""
    calls = [c for v in verdicts for c in v.calls]
    errors = [c.error for c in calls if c.error]
    return BiasscopeError(f"{len(errors)} of {len(calls)} judge requests failed (first: "
                          f"{errors[0]}), and no item got all its answers: nothing was "
                          f"stored in {store.root}; run again with the --model or its server "
                          "put right")


def biases(config: JudgeConfig) -> JudgeResult:
    """How much the judge's verdicts depend on order, names and length. When requests
    failed nothing is written (``report`` None; an existing run's run.json is as it was, its
    ``versions`` too): the measures would count them as the judge's answers; a rerun asks
    them again."""
    levels = _levels(config)  # a bad --confidence is refused before a judge loads
    made, task, labels, judges = _setup(config, "judge-audit")
    settings = run_settings(config, made.config, _identities(made), task, labels, audit=True)
    check(config.out, "judge-audit", list(judges), settings, {"judges": judges})
    with resampling() as resampled:  # a classifier's measures draw none
        if task.pairwise:
            result = pairwise_biases(made, task.pairs, task.authors, ranking=config.ranking,
                                     confidence=levels.confidence,
                                     n_resamples=levels.n_resamples, ids=task.ids)
        else:
            if labels is None:
                raise BiasscopeError("classification needs a label set (--labels FILE.json)")
            result = classifier_biases(made, task.texts, labels, ids=task.ids,
                                       confidence=levels.confidence)
    usage = [u for m in made.models if (u := getattr(m, "usage", None)) is not None]
    if (count := sum(u.failed for u in usage)):
        first = next((u.first_error for u in usage if u.first_error), "no error text")
        return JudgeResult(result, None, Failures(0, count, sum(u.requests for u in usage),
                                                  first))
    store = RunStore(Path(config.out))
    with unsettled(store, rewritten(store.summary_json), rerun=True):
        store = start(store, "judge-audit", list(judges), settings, {"judges": judges})
        return JudgeResult(result, finish(store, "judge-audit", result, levels,
                                          resampled.drawn))


def run_settings(config: JudgeConfig, how: JudgingConfig, judges: Mapping[str, Any],
                 task: Task, labels: Mapping[str, str] | None, audit: bool = False
                 ) -> dict[str, Any]:
    """What run.json records, and a rerun must repeat, for these results: the input and
    label set by content, the keys the questions use and their wording (`question_sha256`),
    each judge's identity by label (``judges``: its backend, endpoint or weights: a GGUF
    file's SHA-256; before a local one loads, what is known of it then), and every option
    that changes an answer.
    ``audit``: judge-audit, which asks in the fixed order and its reverse whatever
    ``position`` and ``samples`` say. ``judges`` first: a rerun with a judge dropped is
    refused naming them, not the ``aggregate`` that follows from their number."""
    needed = 3 if task.pairwise else len(labels or ())
    several = len(judges) > 1
    return {
        "judges": dict(judges),
        "input_sha256": file_sha256(config.input),
        "labels_sha256": None if labels is None else labels_sha256(labels),
        "labels": None if labels is None else dict(labels),  # a rerun's refusal names them
        **({} if audit else {"position": how.position,
                             "samples": how.samples if how.position == "permute" else None}),
        "reasoning": how.reasoning, "keys": list(how.keys[:needed]),
        "logit_bias": how.logit_bias, "seed": how.seed,
        "aggregate": how.aggregate if several else None,
        "top_logprobs": how.top_logprobs, "max_reasoning_tokens": how.max_reasoning_tokens,
        "ranking": config.ranking,
        "question_sha256": question_sha256(how, None if task.pairwise else labels)}


def check_task(pairwise: bool, labels: Mapping[str, str] | None, keys: Sequence[str]) -> None:
    """What a task needs of the label set and the keys, checked before any judge model
    loads: a label set for texts (two labels at least) and none for pairs, and a key for
    every choice (pairs: a, b and tie)."""
    if pairwise and labels is not None:
        raise BiasscopeError("--labels is for classifying texts; this input holds pairs "
                             "(prompt, a, b), judged as a, b or tie: drop --labels")
    if not pairwise:
        if labels is None:
            raise BiasscopeError("classification needs a label set (--labels FILE.json)")
        if len(labels) < 2:
            raise JudgeError(f"a judge needs at least two labels; got {len(labels)}")
    needed = 3 if pairwise else len(labels or ())
    if len(keys) < needed:  # "3 choices" alone left a pair's third one (tie) to be guessed
        choices = "a, b and tie" if pairwise else ", ".join(labels or ())
        raise BiasscopeError(f"--keys: {len(keys)} given ({', '.join(keys)}); the {needed} "
                             f"choices ({choices}) need one key each")
    try:
        check_keys(keys, needed)
    except JudgeError as exc:
        raise BiasscopeError(f"--keys: {exc}") from None


def _refuse_other_input(config: JudgeConfig, where: Path, settings: Mapping[str, Any] | None,
                        labels: Mapping[str, str] | None) -> None:
    """An ``--input`` other than the run judged (edited since, or another file), or a
    ``--labels`` file of another label set, refused as an audit refuses its data file,
    naming the file (and the labels that changed, where run.json records them: a run made
    before has their SHA-256 only), before a judge is made (a local one loads then, minutes)
    and before the other settings are checked, which would say only "a different
    'input_sha256'". ``settings``: the run's (`readable_settings`); None (no run.json, one
    that cannot be read or of another kind) is left to `check`. A label set given or dropped
    is refused by `check_task` first: the input decides (texts need one, pairs take none)."""
    if settings is None:
        return
    refuse_other_data(where, {"--input": settings.get("input_sha256")},
                      {"--input": Path(config.input)}, {"--input": file_sha256(config.input)})
    if isinstance(then := settings.get("labels"), Mapping):
        refuse_other_label_set(where, then, config.labels, labels)
    elif config.labels and labels is not None:  # its label set is hashed, not the file
        refuse_other_data(where, {"--labels": settings.get("labels_sha256")},
                          {"--labels": Path(config.labels)},
                          {"--labels": labels_sha256(labels)}, of="its label set")


def _setup(config: JudgeConfig, kind: str
           ) -> tuple[Judge, Task, Mapping[str, str] | None, dict[str, str]]:
    """The judge, the task, the label set and each judge's label -> spec (for run.json);
    ``kind``: the run's (judge, judge-audit), whose recorded ``--input`` is checked first."""
    given_file("--input", config.input, "a JSONL file of {id, text} (with --labels) or "
               "{id, prompt, a, b} lines")
    task = read_task(config.input)
    # An empty value (an unset "$VARIABLE") is refused, as counterfactual's is: it was taken
    # as no label set, and a file of texts was refused for needing one.
    labels = labels_of("--labels", config.labels, "a JSON file of label name: description, "
                       "or leave it out for an --input of pairs ({id, prompt, a, b})"
                       ) if config.labels is not None else None
    try:  # ``1,2,,3`` or ``1,2,1``: refused, as every comma-separated flag refuses them
        keys = tuple(comma_entries(config.keys)) if "," in config.keys else tuple(config.keys)
    except ValueError as exc:
        raise BiasscopeError(f"--keys: {exc}") from None
    check_task(task.pairwise, labels, keys)
    store = RunStore(Path(config.out))
    refuse_other_kind(store, kind)  # before --input or a GGUF judge is hashed
    recorded = readable_settings(store, kind)
    _refuse_other_input(config, store.root, recorded, labels)
    named = parse_models(list(config.models), "--model")
    how = JudgingConfig(
        position=config.position, samples=config.samples, reasoning=config.reasoning,
        seed=config.seed, keys=keys, aggregate=config.aggregate, logit_bias=config.logit_bias)
    # Every setting is checked on what is known before a local judge loads (minutes), in
    # the words of the check once it has (`check`): another --position, judge or name.
    known = judges_before_loading(config.backend, named, "--model",
                                  recorded=_mapping((recorded or {}).get("judges")))
    check(config.out, kind, known.labels, run_settings(
        config, how, known.identities, task, labels, audit=kind == "judge-audit"),
        known=True)
    cache = config.backend.response_cache()
    models = [Cached(g, cache) for g in make_judges(config.backend, named, known, "--model")]
    made = Judge(models, how)
    # The spec as recorded: a URL's credentials stay out of run.json (backends.redact).
    return made, task, labels, {m.label: redact_urls(spec)
                                for m, (_, spec) in zip(models, named)}


def _identities(made: Judge) -> dict[str, Any]:
    """Each judge's identity, by label, as run.json records it once they are made."""
    return {m.label: m.identity() for m in made.models}


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None
