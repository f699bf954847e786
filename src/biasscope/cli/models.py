"""``biasscope`` commands for models that write text: generate, probe, items, judge,
judge-audit and sensitivity. Each handler is a few library calls."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from biasscope.cli import args as A
from biasscope.core.errors import BiasscopeError


def _generate(args: argparse.Namespace) -> int:
    from biasscope.backends.base import GenerateParams
    from biasscope.generate.batch import generate_file

    generator = _load_generator(args, args.model)
    params = GenerateParams(
        temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed,
        stop=tuple(args.stop or ()), top_logprobs=args.top_logprobs,
        logprobs=args.top_logprobs > 0)
    usage, seconds = generate_file(generator, args.input, args.out, params,
                                   _response_cache(args))
    rate = usage.sent / seconds if seconds > 0 else 0.0
    print(f"{args.out}: {usage.line()}; {seconds:.1f}s ({rate:.1f} requests/s sent)")
    if usage.failed:
        print(f"biasscope: {usage.failed} of {usage.requests} requests failed (their 'error' "
              "field says why, e.g. "
              f"{usage.first_error}); run the same command again to retry only those",
              file=sys.stderr)
    return 1 if usage.failed else 0


def _audit_probes(args: argparse.Namespace) -> list[Any]:
    from biasscope.probes.specs import load_probes

    return load_probes(args.probes, data_dir=args.data_dir, base_rate=args.base_rate,
                       kinds=("options", "generate"), what="biasscope probe")


def _responder(args: argparse.Namespace) -> Any:
    from biasscope.audit.run import GenerationResponder, OptionScorer, StoredResponses
    from biasscope.backends.base import GenerateParams
    from biasscope.backends.cache import Cached
    from biasscope.backends.echo import EchoScorer
    from biasscope.backends.openai_http import OpenAIGenerator

    if args.responses:
        if args.model:
            raise BiasscopeError("give --model or --responses, not both")
        if given := A.given(args, args.model_defaults):
            raise BiasscopeError(f"{', '.join(given)}: only for --model; --responses holds text "
                                 "already written, so nothing is generated or scored (option "
                                 "scoring needs a model): drop "
                                 f"{'it' if len(given) == 1 else 'them'}")
        return StoredResponses(args.responses, label=args.name)
    if not args.model:
        raise BiasscopeError("give --model SPEC (e.g. hf:./my-model, openai:gpt-4o-mini) or "
                         "--responses FILE")
    if args.name is not None:
        raise BiasscopeError("--name is for --responses; a --model run is named after its "
                             "model spec")
    generator = _load_generator(args, args.model)
    scoring = args.scoring
    if scoring == "auto":
        scoring = "options" if hasattr(generator, "option_logprobs") else "generate"
    if scoring == "options":
        if args.top_logprobs:
            raise BiasscopeError("--top-logprobs is for --scoring generate; option scoring "
                                 "reads every option's full log-probability")
        if hasattr(generator, "option_logprobs"):
            return OptionScorer(generator, plain=args.plain_prompt)
        if not isinstance(generator, OpenAIGenerator):
            raise BiasscopeError(f"{args.model}: option scoring needs a local hf: model or a "
                                 "completions server (openai-compatible:); use --scoring "
                                 "generate")
        return OptionScorer(EchoScorer(generator), plain=True)  # a server echoes no chat
    params = GenerateParams(max_tokens=args.max_tokens, temperature=args.temperature,
                            seed=args.seed, top_logprobs=args.top_logprobs)
    return GenerationResponder(Cached(generator, _response_cache(args)), params,
                               plain=args.plain_prompt)


#: ``probe`` options that only say how a --model is asked: --responses (text already
#: written) would silently ignore them, so they are refused.
MODEL_ONLY = ("scoring", "max_tokens", "temperature", "seed", "top_logprobs", "plain_prompt",
              "base_url", "api_key_env", "concurrency", "timeout", "retries", "cache",
              "no_cache", "device", "allow_pickle")


def _probe(args: argparse.Namespace) -> int:
    from biasscope.audit.run import run_audit
    from biasscope.report.audit import write_audit_report

    probes = _audit_probes(args)
    responder = _responder(args)
    store = run_audit(probes, responder, args.out, limit=args.limit)
    report = write_audit_report(store.root)
    summary = store.read_json("summary.json")
    unknown = summary.get("unknown_response_ids") or []
    if unknown:
        print(f"biasscope: {len(unknown)} response ids match no item of these probes, e.g. "
              f"{', '.join(unknown[:5])} (listed in summary.json)", file=sys.stderr)
    print(f"run: {store.root}  summary: {store.summary_json}  report: {report}")
    if summary.get("failed_requests"):
        print(f"biasscope: {summary['failed_requests']} of {summary['requests']} requests "
              f"failed (e.g. {summary['first_error']}); the results leave them out; rerun the "
              "same command to retry them", file=sys.stderr)
        return 1
    return 0


def _items(args: argparse.Namespace) -> int:
    from biasscope.audit.run import export_items
    from biasscope.probes.specs import load_probes

    probes = load_probes(args.probe, data_dir=args.data_dir, base_rate=args.base_rate)
    if len(probes) != 1:
        raise BiasscopeError(f"items {args.probe}: name one probe (e.g. bbq:Age,Religion)")
    count = export_items(probes[0], args.out, seed=args.seed, limit=args.limit)
    print(f"{args.out}: {count} items of {probes[0].name}")
    return 0


def _judge_setup(args: argparse.Namespace) -> tuple[Any, Any, Any, dict[str, str]]:
    """The judge, the task, the label set and each judge's label -> spec (for run.json)."""
    from biasscope.backends.cache import Cached
    from biasscope.core.labels import label_models, parse_models
    from biasscope.judge import Judge, JudgeOptions
    from biasscope.judge.run import read_labels, read_task

    task = read_task(args.input)
    labels = read_labels(args.labels) if args.labels else None
    named = parse_models(args.model, "--model")
    cache = _response_cache(args)
    models = [Cached(_load_generator(args, spec), cache) for _, spec in named]
    label_models(models, named, "--model")
    keys = tuple(k.strip() for k in args.keys.split(",")) if "," in args.keys else tuple(
        args.keys)
    judge = Judge(models, JudgeOptions(
        position=args.position, samples=args.samples, reasoning=args.reasoning, seed=args.seed,
        keys=keys, aggregate=getattr(args, "aggregate", "mean"),
        logit_bias=not args.no_logit_bias))
    return judge, task, labels, {m.label: spec for m, (_, spec) in zip(models, named)}


def _judge(args: argparse.Namespace) -> int:
    from biasscope.judge.run import batch_result, judge_file, write_run

    judge, task, labels, judges = _judge_setup(args)
    verdicts = judge_file(judge, task, args.out, labels)
    result = batch_result(judge, task, verdicts)
    report = write_run(args.out, "judge", list(judges), {
        "position": args.position, "reasoning": args.reasoning, "judges": judges}, result)
    for sentence in result["sentences"][:2]:
        print(sentence)
    print(f"verdicts: {Path(args.out) / 'verdicts.jsonl'}  report: {report}")
    return 0


def _judge_audit(args: argparse.Namespace) -> int:
    from biasscope.judge.audit import audit_classifier, audit_pairwise
    from biasscope.judge.run import write_run

    judge, task, labels, judges = _judge_setup(args)
    if task.pairwise:
        result = audit_pairwise(judge, task.pairs, task.authors)
    else:
        if labels is None:
            raise BiasscopeError("classification needs a label set (--labels FILE.json)")
        result = audit_classifier(judge, task.texts, labels)
    report = write_run(args.out, "judge-audit", list(judges), {"judges": judges}, result)
    for sentence in result["sentences"]:
        print(sentence)
    print(f"report: {report}")
    return 0


def _backend_args(parser: argparse.ArgumentParser) -> None:
    """How to reach and pace a ``generate`` backend, and where its answers are cached."""
    parser.add_argument("--base-url", help="server URL for openai / openai-compatible")
    parser.add_argument("--api-key-env", help="environment variable that holds the API key "
                        "(default OPENAI_API_KEY); keys are never written anywhere")
    parser.add_argument("--concurrency", type=A.positive_int, default=8,
                        help="requests in flight at once")
    parser.add_argument("--timeout", type=A.positive_float, default=60.0,
                        help="seconds per attempt")
    parser.add_argument("--retries", type=A.non_negative_int, default=5,
                        help="retries on 429/5xx/timeouts")
    parser.add_argument("--cache", help="response cache file (default "
                        "~/.cache/biasscope/responses.sqlite or $BIASSCOPE_RESPONSE_CACHE)")
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the cache")
    parser.add_argument("--device", default="auto", help="hf: auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--allow-pickle", action="store_true",
                        help="hf: load pickle weights (.bin/.pt), which can run code")


def _probe_data_args(parser: argparse.ArgumentParser) -> None:
    """Which items a probe asks: the Adult file and the --limit sample."""
    parser.add_argument("--base-rate", choices=["0.0", "0.5", "1.0"], default="0.5",
                        help="adult-counterfactual: DecodingTrust's test file whose share of "
                        "'yes' labels differs by this much between men and women")
    parser.add_argument("--limit", type=A.positive_int,
                        help="at most N items per probe: bbq samples whole "
                        "examples stratified by category (seed 0), winobias-gender whole "
                        "pro/anti pairs stratified by subset and answer (seed 0), adult keeps "
                        "whole pairs, others take the first N")


def _load_generator(args: argparse.Namespace, spec: str) -> Any:
    from biasscope.backends.generators import GeneratorOptions, load_generator
    from biasscope.backends.openai_http import HTTPOptions

    http = HTTPOptions(concurrency=args.concurrency, timeout=args.timeout,
                       max_retries=args.retries)
    return load_generator(spec, GeneratorOptions(
        http=http, base_url=args.base_url, api_key_env=args.api_key_env, device=args.device,
        allow_pickle=args.allow_pickle))


def _response_cache(args: argparse.Namespace) -> Any:
    from biasscope.backends.cache import ResponseCache

    return None if args.no_cache else ResponseCache(args.cache)


def _judge_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", required=True,
                        help="judge model spec (see `biasscope generate`), or NAME=SPEC to "
                        "label it NAME; repeat for several")
    parser.add_argument("--input", required=True, help="JSONL of {id, text} (with --labels) or "
                        "{id, prompt, a, b[, model_a, model_b]}")
    parser.add_argument("--labels", help="JSON object of label name: description")
    parser.add_argument("--out", required=True, type=A.run_dir, help="run directory")
    parser.add_argument("--position", default="shuffle",
                        choices=["shuffle", "consensus", "permute", "fixed"])
    parser.add_argument("--samples", type=A.positive_int,
                        help="permute: seeded orders (default: all)")
    parser.add_argument("--reasoning", action="store_true", help="chain of thought first")
    parser.add_argument("--keys", default="ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                        help="neutral answer keys, e.g. ABCD or 1,2,3")
    parser.add_argument("--no-logit-bias", action="store_true")
    parser.add_argument("--seed", type=A.seed, default=0)
    _backend_args(parser)


def _sensitivity(args: argparse.Namespace) -> int:
    from dataclasses import replace as swap

    from biasscope.backends.cache import Cached
    from biasscope.backends.reward import HFRewardModel, RewardOptions
    from biasscope.core.labels import label_models, parse_models
    from biasscope.report.sensitivity import write_sensitivity_report
    from biasscope.sensitivity.data import load_principles, read_conversations, read_hh_rlhf
    from biasscope.sensitivity.perturb import Templates
    from biasscope.sensitivity.run import SensitivityOptions, run_sensitivity

    constitution = load_principles(args.principles, data_dir=args.data_dir)
    source, _, count = args.prompts.rpartition(":")
    if args.prompts.startswith("hh-rlhf:"):
        if source != "hh-rlhf:harmless-base" or not count.isdigit():
            raise BiasscopeError(f"--prompts {args.prompts}: write hh-rlhf:harmless-base:N "
                                 "or a JSONL file of conversations")
        prompts = read_hh_rlhf(args.data_dir, n=int(count), seed=args.seed)
    else:
        prompts = read_conversations(args.prompts)
    if prompts.sentence():
        print(prompts.sentence())
    templates = Templates()
    for name in ("critique", "revision", "away"):
        path = getattr(args, f"{name}_template")
        if path:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise BiasscopeError(f"--{name}-template {path}: cannot read ({exc})") from None
            templates = swap(templates, **{name: text})
    templates.check()
    options = RewardOptions(device=args.device, dtype=args.dtype, batch_size=args.batch_size,
                            transform=args.transform, chat_template=not args.no_chat_template,
                            allow_pickle=args.allow_pickle)
    named = parse_models(args.reward_model, "--reward-model")  # NAME=SPEC; no model twice
    models = [HFRewardModel(spec, options) for _, spec in named]
    label_models(models, named, "--reward-model")
    perturber = Cached(_load_generator(args, args.perturber), _response_cache(args))
    directions = ("toward", "away") if args.direction == "both" else (args.direction,)
    store = run_sensitivity(models, perturber, prompts, constitution, args.out,
                            SensitivityOptions(directions, templates, args.max_tokens,
                                               args.seed, args.conventions))
    report = write_sensitivity_report(store.root)
    print(perturber.usage.line())
    print(f"run: {store.root}  summary: {store.summary_json}  report: {report}")
    failed = store.read_json("summary.json").get("incomplete")
    if failed:
        print(f"biasscope: {failed['failed_requests']} of {failed['requests']} perturbations "
              f"failed (e.g. {failed['first_error']}); the results leave them out; rerun the "
              "same command to retry them", file=sys.stderr)
        return 1
    return 0


def register(sub: Any) -> None:
    """Add the text-model commands to the ``biasscope`` subparsers."""
    gen = sub.add_parser("generate", help="answer a JSONL file of prompts with any backend")
    gen.add_argument("--model", required=True, help="openai:MODEL, openai-compatible:URL#MODEL, "
                     "hf:HUB_ID[@REVISION] or hf:DIR, litellm:PROVIDER/MODEL")
    gen.add_argument("--input", required=True, help="JSONL: {id, prompt} or {id, messages}, "
                     "optionally options")
    gen.add_argument("--out", required=True, help="JSONL of generations")
    gen.add_argument("--temperature", type=A.non_negative_float, default=0.0)
    gen.add_argument("--max-tokens", type=A.positive_int, default=256)
    gen.add_argument("--seed", type=A.seed)
    gen.add_argument("--stop", action="append", help="stop string; repeatable")
    gen.add_argument("--top-logprobs", type=A.non_negative_int, default=0,
                     help="ask for per-token logprobs with this many alternatives")
    _backend_args(gen)
    gen.set_defaults(func=_generate)

    audit = sub.add_parser("probe", help="fairness audit: adult-counterfactual, "
                           "professional-bias, bbq")
    audit.add_argument("--model", help="hf:DIR_OR_HUB_ID, openai:MODEL, "
                       "openai-compatible:URL#MODEL or litellm:PROVIDER/MODEL")
    audit.add_argument("--responses", help="JSONL of {item_id, response} produced elsewhere "
                       "(instead of --model; see `biasscope items`)")
    audit.add_argument("--name", help="model name for --responses (default: the file's name)")
    audit.add_argument("--probes", default="adult-counterfactual,professional-bias,bbq",
                       help="comma-separated; bbq:Age,Religion selects BBQ categories")
    _probe_data_args(audit)
    audit.add_argument("--out", required=True, type=A.run_dir,
                       help="run directory (reused runs resume)")
    audit.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"))
    audit.add_argument("--scoring", choices=["auto", "options", "generate"], default="auto",
                       help="auto: option scoring for local hf: models, generation otherwise; "
                       "options on an openai-compatible: server scores each option from the "
                       "echo of the plain prompt + option (llama.cpp: --logits_all true)")
    audit.add_argument("--max-tokens", type=A.positive_int, default=64)
    audit.add_argument("--temperature", type=A.non_negative_float, default=0.0)
    audit.add_argument("--seed", type=A.seed)
    audit.add_argument("--top-logprobs", type=A.non_negative_int, default=0,
                       help="generate: ask for the N likeliest first tokens and read the "
                       "options' probabilities from them (where their first tokens differ)")
    audit.add_argument("--plain-prompt", action="store_true",
                       help="ask as one plain prompt ('user: ...' lines, then 'assistant:'; "
                       "a server gets it on /completions) instead of a chat: how a base model "
                       "without a chat template reads it")
    _backend_args(audit)
    audit.set_defaults(func=_probe, model_defaults={d: audit.get_default(d) for d in MODEL_ONLY})

    items = sub.add_parser("items", help="export a probe's items (ids, prompts) as JSONL")
    items.add_argument("probe", help="one probe, e.g. winobias-gender, adult-counterfactual or "
                       "bbq:Age,Religion (`biasscope probes` lists them)")
    items.add_argument("--out", required=True)
    items.add_argument("--seed", type=A.seed, default=0,
                       help="the seed's items, for probes whose items vary with it (winobias-"
                       "gender: the order the options are shown in)")
    _probe_data_args(items)
    items.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"))
    items.set_defaults(func=_items)

    jud = sub.add_parser("judge", help="LLM-as-judge without name, position or model bias")
    _judge_args(jud)
    jud.add_argument("--aggregate", default="mean", choices=["mean", "majority"],
                     help="several judges: mean probabilities or majority vote")
    jud.set_defaults(func=_judge)

    jaudit = sub.add_parser("judge-audit", help="measure a judge's own biases")
    _judge_args(jaudit)
    jaudit.set_defaults(func=_judge_audit)

    sens = sub.add_parser("sensitivity", help="constitutional sensitivity of reward models")
    sens.add_argument("--reward-model", action="append", required=True,
                      help="hub id[@revision] or local dir of a sequence-classification reward "
                      "model, or NAME=SPEC; repeat for several")
    sens.add_argument("--perturber", required=True, help="generate backend spec for critique "
                      "and revision, e.g. openai:gpt-4o-mini")
    sens.add_argument("--principles", default="ccai:top10",
                      help="ccai:topK, or a YAML / JSON / text file of principles")
    sens.add_argument("--prompts", default="hh-rlhf:harmless-base:200",
                      help="hh-rlhf:harmless-base:N, or a JSONL file of conversations")
    sens.add_argument("--out", required=True, type=A.run_dir,
                      help="run directory (reruns send no requests)")
    sens.add_argument("--direction", choices=["toward", "away", "both"], default="toward",
                      help="revise to conform more (toward), less (away), or both")
    sens.add_argument("--critique-template", help="file: critique request ({conversation}, "
                      "{query}, {response}, {principle})")
    sens.add_argument("--revision-template", help="file: revision request (also {critique})")
    sens.add_argument("--away-template", help="file: revision request for --direction away")
    sens.add_argument("--conventions", choices=["biasscope", "source"], default="biasscope",
                      help="index definitions: biasscope's (SD ddof=1, originals once in the "
                      "percentile pool, absolute-sum normalisation) or the source code's")
    sens.add_argument("--transform", choices=["logit", "probability", "logprob"],
                      default="logit", help="reward read from the model's logit")
    sens.add_argument("--no-chat-template", action="store_true",
                      help="score the plain hh-rlhf format instead of the chat template")
    sens.add_argument("--dtype", default="auto", choices=["auto", "float32", "float16",
                                                          "bfloat16"])
    sens.add_argument("--batch-size", type=A.positive_int, default=16)
    sens.add_argument("--max-tokens", type=A.positive_int, default=512, help="perturber's limit")
    sens.add_argument("--seed", type=A.seed, default=0, help="prompt shuffling and perturber seed")
    sens.add_argument("--data-dir", default=os.environ.get("BIASSCOPE_DATA_DIR"))
    _backend_args(sens)
    sens.set_defaults(func=_sensitivity)
