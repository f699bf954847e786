"""The ``--out`` file of ``biasscope generate``: which call may replace it.

Each answer line records the ``model`` (the backend's identity, as the response cache keys
it), the generation ``params`` and the ``input`` (the SHA-256 of every request: ids, prompts
or messages, options) it was made with. The same call again rewrites the file (its answers
come from the cache); a call with another model, other settings or other requests would put
its answers in place of the ones the file holds, and only the cache would still have them, so
it is refused, naming what differs. A file that records neither (another file, or answers of a
biasscope from before these fields) cannot show it is this call's, and is refused too.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from biasscope.backends.base import GenerateParams, Generator
from biasscope.core.errors import BiasscopeError
from biasscope.data.sources import refuse_other_data
from biasscope.store.settings import as_gguf_file, merge_settings, sha256_json

#: The fields of every answer line that say what made it.
MADE_WITH = ("model", "params", "input")


def made_with(generator: Generator, params: GenerateParams, requests: Any) -> dict[str, Any]:
    """What decides this call's answers: recorded on every line. ``requests``: what was asked,
    as JSON (ids share line numbers between files, so a file of other prompts is told apart by
    its requests, not its ids)."""
    return {"model": generator.identity(), "params": asdict(params),
            "input": {"sha256": sha256_json(requests)}}


def check_input(output: Path, source: Path, requests: Any) -> None:
    """Refuse answers of other requests (``source`` edited since, or another file) as an
    audit refuses another data file, naming it: the requests' hash needs no model, so this
    runs before one is made (a local one loads for minutes), where `check` needs its identity.
    """
    before = recorded(output)
    then = before.get("input") if before is not None else None
    if isinstance(then, dict):
        refuse_other_data(f"--out {output}", {"--input": then.get("sha256")},
                          {"--input": source}, {"--input": sha256_json(requests)},
                          of="its requests")


def _refuse(output: Path, why: str, ours: bool = True) -> BiasscopeError:
    """One line; deleting is offered only for answers, never for a file of something else."""
    fix = ", or delete it to answer afresh" if ours else " (it is left as it is)"
    return BiasscopeError(f"--out {output} {why}: use another --out{fix}")


def recorded(output: Path) -> dict[str, Any] | None:
    """What the answers in ``output`` were made with; None when there is no such file, or
    one without answers (empty, or every request failed: a server that was down, whose answers
    a call with another model or URL may take the place of). Anything else is refused: a
    folder, a file that is no answers file, answers of an older biasscope (they record no
    model), answers made with two settings."""
    if output.is_dir():
        raise BiasscopeError(f"--out {output} is a directory: give the JSONL file to write")
    found: dict[str, Any] | None = None
    try:
        with output.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                made = _line(output, number, line)
                if made is None:  # a failed request: no answer to lose
                    continue
                if found is None:
                    found, first = made, number
                elif made != found:
                    raise _refuse(output, f"holds answers of two models or settings (lines "
                                          f"{first} and {number})")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise _refuse(output, "is not an answers file of biasscope generate (not UTF-8 "
                              "text)", ours=False) from None
    except OSError as exc:
        raise BiasscopeError(f"--out {output}: cannot read it to check what it holds "
                             f"({exc.strerror or exc}); fix it or use another --out") from None
    return found


def _line(output: Path, number: int, line: str) -> dict[str, Any] | None:
    """What made one answer line; None for a request that failed (no answer)."""
    try:
        data = json.loads(line)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not {"id", "text", "finish_reason"} <= set(data):
        raise _refuse(output, f"is not an answers file of biasscope generate (line {number})",
                      ours=False)
    if data.get("error") is not None:
        return None
    if not all(key in data for key in MADE_WITH):
        raise _refuse(output, "was written by an older biasscope and records no model, so "
                              "it cannot show this call made it")
    return {key: data[key] for key in MADE_WITH}


def check(output: Path, now: dict[str, Any]) -> None:
    """Refuse a call whose model or settings differ from those of the answers in
    ``output``, in one line naming what differs (`merge_settings`' words). Answers of a GGUF
    file recorded by its cache folder are the file's (`as_gguf_file`)."""
    before = recorded(output)
    if before is None:
        return
    before = {**before, "model": as_gguf_file(before["model"], now["model"])}
    try:
        merge_settings(f"--out {output}", before, now)
    except BiasscopeError as exc:
        raise BiasscopeError(f"{exc}, or delete it to answer afresh") from None
