"""``biasscope audit`` as one library call: `run(AuditConfig(...))` loads the probes, picks how
the model is asked (option scores or generation) or reads responses written elsewhere, answers
every item into the run directory, writes ``summary.json`` and renders the report."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, cast

from biasscope.audit import scored as scoring
from biasscope.audit.harness import (
    GenerationResponder,
    OptionScorer,
    Responder,
    StoredResponses,
    export_items,
    items_digest,
    probe_items,
    run_audit,
)
from biasscope.audit.settings import DEFAULT_PROBES as DEFAULT_PROBES
from biasscope.audit.settings import AuditConfig as AuditConfig
from biasscope.audit.settings import ItemsConfig as ItemsConfig
from biasscope.audit.settings import Prompting as Prompting
from biasscope.backends.base import GenerateParams
from biasscope.backends.config import BackendConfig
from biasscope.backends.specs import check_top_logprobs
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import given_file
from biasscope.core.levels import Levels, same_levels
from biasscope.data.sources import (
    cache_dir,
    hashed,
    old_cache_dir,
    recording,
    refuse_other_data,
    resolve_data_dir,
)
from biasscope.probes import Probe
from biasscope.probes.base import AskedProbe
from biasscope.probes.specs import load_probes, parse_probe_specs
from biasscope.report.audit import REPORT
from biasscope.store.directory import RunStore
from biasscope.store.run_json import check_run, refuse_other_kind, run_levels
from biasscope.store.settings import gain_identity, known_part, merge_settings
from biasscope.store.units import Unit


@dataclass(frozen=True)
class AuditResult:
    store: RunStore
    report: Path
    summary: dict[str, Any]


def run(config: AuditConfig) -> AuditResult:
    store = RunStore(Path(config.out))
    levels = run_levels(store, config.analysis)
    refuse_other_kind(store, "audit")  # before a model or data file is hashed
    for name, _ in parse_probe_specs(",".join(config.probes), "--probe"):
        scoring.require_statistics(name)  # before any data is read
    with recording() as read:  # the whole files' SHA-256 go into run.json, checked on rerun
        probes = load_probes(",".join(config.probes), data_dir=config.data_dir,
                             base_rate=config.base_rate,
                             kinds=("options", "generate", *scoring.SCORED),
                             what="biasscope audit", wordings=config.wordings)
    asked = cast(list[AskedProbe], probes)  # load_probes checked each takes these requests
    scored = [p for p in probes if scoring.is_scored(p)]
    if config.prompting.first_token and not any(
            scoring.scored_kind(p) == "next_token" for p in probes):
        raise BiasscopeError("--first-token is for next-token probes (winogender); none of "
                             "these probes is one: drop it")
    # before a model loads: a data file edited since the run, and a run's probe that cannot
    # be summarised again, are refused first (run_audit checks the data again as it starts)
    if store.run_json.is_file():
        refuse_other_data(store.root, store.read_json("run.json").get("data"), read,
                          hashed(read))
    others = unsummarised_probes(config, store, [p.name for p in probes], levels)
    answers, scorer = responder(config, scored)
    store = run_audit(asked, answers, config.out, limit=config.limit, scorer=scorer,
                      others=others, data=read, levels=levels)
    return AuditResult(store, store.root / REPORT, store.read_json("summary.json"))


def unsummarised_probes(config: AuditConfig, store: RunStore, asked: Sequence[str],
                        levels: Levels | None = None) -> list[AskedProbe]:
    """The run's probes that this call does not ask, holds stored results of, and whose
    entries its summary.json cannot give (unreadable, missing, written before a killed call
    stored them, or at other ``levels``): read again as run.json recorded them, so
    summary.json is rebuilt from every probe the run holds, not this call's alone. One line,
    before any request, when one cannot be read as recorded (its data or wordings changed)."""
    if not store.run_json.is_file():
        return []
    run = store.read_json("run.json")
    recorded: dict[str, Any] = run["probes"] if isinstance(run.get("probes"), dict) else {}
    held = [name for name in recorded if name not in asked and store.unit_path(
        Unit(model=str(run.get("model")), revision=None, probe=name, seed=0)).is_file()]
    if not held:
        return []
    state = "is missing"
    entries: Any = {}
    if store.summary_json.is_file():
        try:
            summary = store.read_json("summary.json")
            entries, state = summary.get("probes"), "has no entry for {}"
            if not same_levels(summary, levels or Levels()):
                entries, state = {}, "is at another --confidence or --resamples"
        except (BiasscopeError, AttributeError):
            state = "cannot be read"
    if not isinstance(entries, dict):
        entries, state = {}, "cannot be read"
    out = []
    for name in (n for n in held if n not in entries):
        why = None
        try:
            probe = cast(AskedProbe, _recorded_probe(config, name, recorded[name]))
            limit = run.get("limit") if isinstance(run.get("limit"), int) else None
            now = {**probe.config(), "items_sha256": items_digest(
                probe, probe_items(probe, limit))}
            if now != recorded[name]:
                why = "its data or wordings are not those the run recorded"
        except BiasscopeError as exc:
            why = str(exc)
        if why is not None:
            raise BiasscopeError(
                f"{store.summary_json} {state.format(name)}, and {name}, whose results the run "
                f"holds, cannot be read again to summarise them ({why}): give the run's "
                f"--data-dir and --wordings, or ask it too (--probe {name} as the run did), "
                "which rebuilds its entry from the stored results")
        out.append(probe)
    return out


def _recorded_probe(config: AuditConfig, name: str, recorded: Any) -> Probe:
    """Probe ``name`` as a run recorded it (``recorded``: its config in run.json): its
    selection (BBQ's categories, CrowS-Pairs' version) and Adult's base rate from there, the
    data directory and wordings from this call."""
    from biasscope.probes import PROBES

    recorded = recorded if isinstance(recorded, dict) else {}
    spec = name
    keyword = PROBES[name].selection if name in PROBES else None
    chosen = recorded.get(keyword) if keyword else None
    if isinstance(chosen, list) and chosen:
        spec = f"{name}:{','.join(map(str, chosen))}"
    elif isinstance(chosen, str):  # "revised (description)"
        spec = f"{name}:{chosen.partition(' (')[0]}"
    worded = config.wordings if "wordings" in recorded else None
    [probe] = load_probes(spec, data_dir=config.data_dir,
                          base_rate=str(recorded.get("base_rate", config.base_rate)),
                          wordings=worded)
    return probe


def responder(config: AuditConfig, scored: Sequence[Probe] = ()
              ) -> tuple[Responder, scoring.LogprobScorer | None]:
    """What answers the items (stored responses, a model's option scores, or generations),
    and what scores the probes ``scored`` from log-probs (None when there are none)."""
    if config.responses:
        if scored:
            raise scoring.why_not(f"--responses {config.responses}", scored[0],
                                  "a file of answers does not hold")
        if config.model:
            raise BiasscopeError("give --model or --responses, not both")
        if given := _changed(config.prompting, Prompting()) + _changed(config.backend,
                                                                        BackendConfig()):
            raise BiasscopeError(f"{', '.join(given)}: only for --model; --responses holds text "
                                 "already written, so nothing is generated or scored (option "
                                 "scoring needs a model): drop "
                                 f"{'it' if len(given) == 1 else 'them'}")
        given_file("--responses", config.responses, "a JSONL file of {item_id, response} "
                   "lines")
        return StoredResponses(config.responses, label=config.name), None
    if not config.model:
        raise BiasscopeError("give --model SPEC (e.g. hf:./my-model, openai:gpt-4o-mini) or "
                             "--responses FILE")
    if config.name is not None:
        raise BiasscopeError("--name is for --responses; a --model run is named after its "
                             "model spec")
    return _model_responder(config.model, config.prompting, config.backend, scored,
                            lambda: _refuse_other_model(config))


def _refuse_other_model(config: AuditConfig) -> None:
    """Refuse, writing nothing, a local model or hub id other than the one ``--out``'s run
    was made with, on what is known of it before it loads (`identity_before_loading`: a GGUF
    file hashed, not converted or loaded); the rest is checked once it has loaded."""
    from biasscope.backends.checkpoints import from_model
    from biasscope.backends.hf_generate import identity_before_loading

    store = RunStore(Path(config.out))
    [parsed] = config.backend.check([str(config.model)])
    if parsed.backend != "hf" or not (store.run_json.is_file() or store.remote is not None):
        return
    ckpt = from_model(parsed.rest, convert=False)[0]
    known = identity_before_loading(ckpt)
    now = {"model": ckpt.label, "responder": {"backend": known}}

    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        if previous is not None:
            before = gain_identity(previous, now)
            answered = before.get("responder")
            backend = answered.get("backend") if isinstance(answered, dict) else None
            merge_settings(store.run_json, {"model": before.get("model"), "responder": {
                "backend": known_part(backend, known)}}, now)
        return {}

    check_run(store, "audit", build)


def _nothing() -> None:
    return None


_TOP_LOGPROBS = ("--top-logprobs is for --scoring generate; option scoring reads every "
                 "option's full log-probability")


def _model_responder(spec: str, asked: Prompting, backend: BackendConfig,
                     scored: Sequence[Probe] = (), before_loading: Callable[[], None] = _nothing
                     ) -> tuple[Responder, scoring.LogprobScorer | None]:
    if asked.scoring == "options" and asked.top_logprobs:  # before the model loads
        raise BiasscopeError(_TOP_LOGPROBS)
    [parsed] = backend.check([spec])
    check_top_logprobs(parsed, asked.top_logprobs, completions=asked.plain_prompt)
    if scored and asked.scoring == "generate":
        raise scoring.why_not("--scoring generate", scored[0], "generated text does not "
                              "give; leave --scoring out (or auto)")
    if scored and spec.startswith("openai:"):  # before the key is looked for
        raise scoring.why_not(spec, scored[0], "OpenAI's API no longer returns (it does not "
                              "echo prompt log-probs)")
    before_loading()
    generator = backend.generator(spec, deferred=True)  # no load where every unit is stored
    return (_answers(spec, asked, backend, generator),
            _logprob_scorer(spec, generator, scored, asked.first_token))


def _logprob_scorer(spec: str, generator: Any, scored: Sequence[Probe], first_token: bool
                    ) -> scoring.LogprobScorer | None:
    """How the probes scored from log-probs are scored: the local model, or a server's
    echo."""
    from biasscope.backends.openai_http import OpenAIGenerator

    if not scored:
        return None
    if hasattr(generator, "option_logprobs") and hasattr(generator, "tokenizer"):
        return scoring.local(generator, first_token)
    if not isinstance(generator, OpenAIGenerator) or generator.kind == "openai":
        raise scoring.why_not(spec, scored[0], "this backend does not give")
    return scoring.echo(generator, first_token)


def _answers(spec: str, asked: Prompting, backend: BackendConfig, generator: Any
             ) -> Responder:
    from biasscope.backends.cache import Cached
    from biasscope.backends.echo import EchoScorer
    from biasscope.backends.openai_http import OpenAIGenerator

    scoring = asked.scoring
    if scoring == "auto":
        scoring = "options" if hasattr(generator, "option_logprobs") else "generate"
    if scoring == "options":
        if asked.top_logprobs:
            raise BiasscopeError(_TOP_LOGPROBS)
        if hasattr(generator, "option_logprobs"):
            return OptionScorer(generator, plain=asked.plain_prompt)
        if not isinstance(generator, OpenAIGenerator):
            raise BiasscopeError(f"{spec}: option scoring needs a local hf: model or a "
                                 "completions server (openai-compatible:); use --scoring "
                                 "generate")
        return OptionScorer(EchoScorer(generator), plain=True)  # a server echoes no chat
    params = GenerateParams(max_tokens=asked.max_tokens, temperature=asked.temperature,
                            seed=asked.seed, top_logprobs=asked.top_logprobs)
    return GenerationResponder(Cached(generator, backend.response_cache()), params,
                               plain=asked.plain_prompt)


def _changed(settings: Any, default: Any) -> list[str]:
    """The settings that differ from their defaults, written as options (``--scoring
    options``, ``--plain-prompt``): refused rather than ignored where they cannot apply."""
    out = []
    defaults = asdict(default)
    for entry in fields(settings):
        value = getattr(settings, entry.name)
        if value != defaults[entry.name]:
            flag = "--" + entry.name.replace("_", "-")
            out.append(flag if isinstance(value, bool) else f"{flag} {value}")
    return out


def export(config: ItemsConfig) -> tuple[int, str]:
    """Write the items of the one probe ``config`` names; how many, and the probe's name."""
    if not config.out.strip():  # Path("") is the working directory: "cannot write ."
        raise BiasscopeError("--out is empty: give the JSONL file to write the items to")
    if Path(config.out).is_dir():  # else "cannot write DIR: Is a directory"
        raise BiasscopeError(f"--out {config.out} is a directory: give the JSONL file to "
                             f"write the items to (e.g. {Path(config.out) / 'items.jsonl'})")
    spec = ",".join(config.probe)
    probes = load_probes(spec, data_dir=config.data_dir, base_rate=config.base_rate,
                         flag="--probe", wordings=config.wordings)
    if len(probes) != 1:
        raise BiasscopeError(f"items --probe {spec}: name one probe (e.g. bbq:Age,Religion)")
    target = Path(config.out).resolve()
    for root in (resolve_data_dir(config.data_dir), cache_dir(),  # <root>/<source>/<file>
                 old_cache_dir()):
        if root is not None and target.is_file() and target.is_relative_to(root.resolve()) \
                and len(target.relative_to(root.resolve()).parts) > 1:
            raise BiasscopeError(f"items --out {config.out} is a file of the data directory "
                                 f"{root}, which the items would replace: write them elsewhere")
    if Path(config.out).is_file() and not _holds_items(Path(config.out)):
        raise BiasscopeError(f"items --out {config.out} is a file that holds no items (its first "
                             "line is no item of `biasscope items`), which the items would "
                             "replace: write them elsewhere, or delete it first")
    return export_items(probes[0], config.out, seed=config.seed, limit=config.limit), probes[0].name


def _holds_items(path: Path) -> bool:
    """Whether ``path`` is empty or an earlier ``biasscope items`` export (its first line an
    object with ``item_id`` and ``probe``): the only files ``items --out`` replaces, so a file
    of answers or prompts given by mistake is not lost."""
    try:
        with path.open("rb") as handle:
            first = handle.readline(1 << 20).strip()
        line = json.loads(first) if first else {}
    except (OSError, ValueError):  # not JSON, not UTF-8, unreadable
        return False
    return isinstance(line, dict) and (not first or {"item_id", "probe"} <= set(line))
