"""``biasscope generate``: a JSONL file of requests in, a JSONL file of generations out.

Input lines are ``{"id": ..., "prompt": "..."}`` or ``{"id": ..., "messages": [{"role": ...,
"content": ...}, ...]}``, optionally with ``"options": [...]`` to read a multiple-choice answer
(from logprobs where the backend gives them, else from the text). Requests go out in chunks
through the response cache, so a killed run loses no answer it paid for: run it again and only
what is missing is sent. The output file is written atomically at the end, and only over a file
of this call's own answers (`biasscope.generate.output`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from biasscope.backends.base import GenerateParams, GenerateRequest, Generation, Generator
from biasscope.backends.cache import Cached, ResponseCache, Usage
from biasscope.backends.specs import check_top_logprobs
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import given_file, line_id, read_jsonl
from biasscope.generate import output as out_file
from biasscope.generate.settings import GenerateConfig as GenerateConfig
from biasscope.probes.choices import normalise, read_choice
from biasscope.store.files import json_line, remove_stale_temp_files, write_bytes

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Job:
    request: GenerateRequest
    options: tuple[str, ...] | None


def _job(path: Path, number: int, data: Any, params: GenerateParams) -> Job:
    where = f"{path}:{number}"
    if not isinstance(data, dict):
        raise BiasscopeError(f"{where}: expected a JSON object")
    rid = line_id(data, number, where)
    options = data.get("options")
    if options is not None and not (isinstance(options, list) and options
                                    and all(isinstance(o, str) for o in options)):
        raise BiasscopeError(f"{where}: 'options' must be a non-empty list of strings")
    _check_options(options or [], where)
    if "messages" in data and "prompt" in data:  # one would be dropped without a word
        raise BiasscopeError(f"{where}: gives both 'prompt' and 'messages': keep one")
    if "messages" in data:
        messages = data["messages"]
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and m.get("role") in ROLES
                and isinstance(m.get("content"), str) for m in messages):
            raise BiasscopeError(f"{where}: 'messages' must be a list of {{role, content}} "
                                 f"with role one of {', '.join(ROLES)}")
        request = GenerateRequest(messages=tuple((m["role"], m["content"]) for m in messages),
                                  params=params, id=rid)
    elif isinstance(data.get("prompt"), str):
        request = GenerateRequest(prompt=data["prompt"], params=params, id=rid)
    else:
        raise BiasscopeError(f"{where}: needs a 'prompt' string or a 'messages' list")
    return Job(request, tuple(options) if options else None)


def _check_options(options: Sequence[str], where: str) -> None:
    """One line for an option with no text or one given twice: answers are matched case-blind
    without surrounding spaces, so such options cannot be told apart (or never answered)."""
    seen: set[str] = set()
    for option in options:
        key = normalise(option).lower()
        why = "has no text" if not key else "given twice" if key in seen else ""
        if why:
            raise BiasscopeError(f"{where}: 'options': {option!r} {why}; give distinct options "
                                 "(compared without case and surrounding spaces)")
        seen.add(key)


def read_jobs(path: str | os.PathLike[str], params: GenerateParams) -> list[Job]:
    path = Path(path)
    numbered = [(number, _job(path, number, data, params)) for number, data in read_jsonl(path)]
    if not numbered:
        raise BiasscopeError(f"{path}: no requests in the file")
    seen: dict[str, int] = {}
    for number, job in numbered:
        rid = job.request.id
        if rid in seen:  # a line without an id is its line number, which may collide
            raise BiasscopeError(f"{path}:{number}: id {rid!r} already used on line "
                                 f"{seen[rid]}; give each line a unique 'id'")
        seen[rid] = number
    return [job for _, job in numbered]


def row(job: Job, generation: Generation, made: dict[str, Any] | None = None
        ) -> dict[str, Any]:
    """One output line; ``made`` (`output.made_with`) says which model and settings made it."""
    out: dict[str, Any] = {"id": job.request.id, **asdict(generation)}
    out["logprobs"] = out.pop("tokens")
    if job.options is not None:
        reading = read_choice(generation, job.options, asked(job.request))
        out.update(answer=reading.answer, answer_source=reading.source,
                   option_probs=reading.probs, missing_mass=reading.missing_mass)
    return {**out, **(made or {})}


def requests(jobs: Sequence[Job]) -> list[Any]:
    """What ``jobs`` ask, as JSON: hashed as the answers' ``input`` (`output.made_with`)."""
    return [[j.request.id, j.request.prompt, j.request.messages, j.options] for j in jobs]


def asked(request: GenerateRequest) -> str:
    """The text a model may echo before its answer: the prompt, or every turn's content."""
    if request.messages is not None:
        return "\n".join(content for _, content in request.messages)
    return request.prompt or ""


def check_out(source: str | os.PathLike[str], output: Path, cache: ResponseCache | None
              ) -> None:
    """Refuse an ``output`` the answers must not replace: the requests or the cache."""
    if output.resolve() == Path(source).resolve():
        raise BiasscopeError(f"--out {output} is the --input file; the answers would replace "
                             "the requests: write them to another file")
    if cache is not None and output.resolve() == cache.path.resolve():
        raise BiasscopeError(f"--out {output} is the --cache file; the answers would replace "
                             "every cached answer: write them to another file")


def generate_file(generator: Generator, source: str | os.PathLike[str],
                  output: str | os.PathLike[str], params: GenerateParams,
                  cache: ResponseCache | None, chunk: int = 256,
                  on_progress: Callable[[int, int], None] | None = None) -> tuple[Usage, float]:
    """Answer every request of ``source`` into ``output``; the usage and the seconds taken."""
    jobs = read_jobs(source, params)
    check_out(source, Path(output), cache)
    out_file.check_input(Path(output), Path(source), requests(jobs))
    return answer(generator, jobs, Path(output), params, cache, chunk, on_progress)


def answer(generator: Generator, jobs: Sequence[Job], output: Path, params: GenerateParams,
           cache: ResponseCache | None, chunk: int = 256,
           on_progress: Callable[[int, int], None] | None = None) -> tuple[Usage, float]:
    """Answer ``jobs`` into ``output``, unless it holds answers of another model or other
    settings (`output.check`); the usage and the seconds taken."""
    made = out_file.made_with(generator, params, requests(jobs))
    out_file.check(output, made)  # before any request: nothing is asked for a refused call
    remove_stale_temp_files(output.parent)  # a killed call's half-written file
    cached = Cached(generator, cache)
    start = time.monotonic()
    rows: list[dict[str, Any]] = []
    for begin in range(0, len(jobs), chunk):
        part: Sequence[Job] = jobs[begin:begin + chunk]
        generations = cached.generate([j.request for j in part])
        rows += [row(j, g, made) for j, g in zip(part, generations)]
        if on_progress:
            on_progress(len(rows), len(jobs))
    elapsed = time.monotonic() - start
    # Atomic: a failed write (full disk, no permission, a directory in the way) is one line,
    # leaves no temp file and keeps the previous output whole; the answers stay cached. A
    # lone surrogate is written as the JSON escape \uXXXX, so the file stays valid UTF-8.
    # NaN (a token without a logprob) is null: strict JSON, as every run file.
    text = "".join(json_line(item) for item in rows)
    out_file.check(output, made)  # another call may have written it while this one ran
    write_bytes(output, text.encode("utf-8", "backslashreplace"))
    return cached.usage, elapsed


def run(config: GenerateConfig) -> tuple[Usage, float]:
    """The one library call of ``biasscope generate``: the usage and the seconds taken."""
    [spec] = config.backend.check([config.model])  # the flags first, before the files
    given_file("--input", config.input, "a JSONL file of {id, prompt} or {id, messages} lines")
    if not config.out.strip():  # an unset "$VARIABLE": the folder "."
        raise BiasscopeError("--out is empty: give the JSONL file to write")
    cache, output = config.backend.response_cache(), Path(config.out)
    jobs = read_jobs(config.input, config.params)
    check_top_logprobs(spec, config.params.top_logprobs,
                       completions=any(j.request.messages is None for j in jobs))
    check_out(config.input, output, cache)
    # a file that is no answers file, or answers to other requests: refused before a model
    # loads
    out_file.check_input(output, Path(config.input), requests(jobs))
    # A local model loads on its first request not cached: a call refused for another model
    # or dtype (`output.check`, on its identity from its files), or all cached, loads none.
    generator = config.backend.generator(config.model, deferred=True)
    return answer(generator, jobs, output, config.params, cache)
