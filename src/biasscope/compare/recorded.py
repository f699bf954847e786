"""How two runs were asked, as their run.json files record it, set side by side: the settings
that decide the answers (scoring method, ``--plain-prompt``, temperature, max tokens, dtype,
``--limit``) and the data (each probe's recorded config: its template, items' SHA-256, options;
a sweep's data files' SHA-256; the versions of biasscope, torch, transformers and tokenizers
a sweep or an audit records) that differ, each in words.

They are noted, never refused: a difference may be exactly what the user compares. What is
compared is the model, so its identity (source, revision, weights' fingerprint, backend, the
code its ``auto_map`` names: ``remote_code``) is noted only when both runs name the same model:
then another revision, other weights or the model's own code run in one and not the other
under the same name are a difference the user may not expect. A sweep's checkpoints are its
models, and compare names them in every sentence: one label (model, step) in both runs with
another revision, other weights, tokenizer and config files, hub commit or own code is noted,
one sentence per checkpoint (or one for many). Settings one run does not record (an older
run, a setting of another scoring method) are not noted: nothing shows that they differ.
Wordings and seeds are compared by `biasscope.compare.design`, which says what it left out; a
probe's template is noted here only where neither run asked several wordings.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from biasscope.backends.remote_code import NOT_RUN
from biasscope.store.settings import in_words

#: A generation request's parameters (run.json ``responder.params``) in words.
PARAMS = {"temperature": "temperature", "max_tokens": "max tokens", "seed": "sampling seed",
          "stop": "stop strings", "logit_bias": "logit bias", "logprobs": "logprobs",
          "top_logprobs": "top logprobs"}

#: A model's identity (``responder.backend``) in words, where both runs name the same model.
IDENTITY = {"backend": "backend", "base_url": "server", "revision": "model revision",
            "fingerprint": "model weights (fingerprint)",
            "files_fingerprint": "tokenizer, chat template and config files (fingerprint)",
            "commit": "hub commit",
            # "not run" (transformers' classes) or the fingerprint of the code that ran
            "remote_code": "model's own code (auto_map, --trust-remote-code)",
            "gguf_file": "GGUF file",
            "gguf_sha256": "GGUF file (SHA-256)", "gguf_quantization": "quantisation",
            "method": "option scoring from the server"}

#: The installed libraries (run.json ``versions``) that decide a sweep's or an audit's scores,
#: noted where both runs record them.
VERSIONS = ("biasscope", "torch", "transformers", "tokenizers")

#: A sweep checkpoint's identity (run.json ``checkpoints``) in words, where both runs hold a
#: checkpoint of the same label; more than `MANY` such checkpoints are one sentence.
CHECKPOINT_KEYS = {"revision": "revision", "fingerprint": "weights (fingerprint)",
                   "files_fingerprint": IDENTITY["files_fingerprint"],
                   "commit": IDENTITY["commit"],
                   "remote_code": "own code (auto_map, --trust-remote-code)"}
#: The same, for the one sentence of many checkpoints.
KINDS = {"revision": "revision", "fingerprint": "weights",
         "files_fingerprint": "tokenizer and config files", "commit": "hub commit",
         "remote_code": "own code"}
MANY = 3

#: A probe's recorded config in words (others by their key); ``probe`` is its name, and its
#: wordings are `biasscope.compare.design`'s.
PROBE_KEYS = {"items_sha256": "items (SHA-256)", "prompts_sha256": "prompts (SHA-256)",
              "system": "system turn", "limit_sample": "how --limit draws items",
              "answer_text": "answer text", "base_rate": "base rate"}


@dataclass(frozen=True)
class Difference:
    """One setting the two runs recorded with different values, both in words."""

    setting: str
    a: str
    b: str
    said: str = ""  # the sentence, where it is not "the runs differ in SETTING: A vs B."

    @property
    def sentence(self) -> str:
        return self.said or f"the runs differ in {self.setting}: {self.a} vs {self.b}."

    def as_dict(self) -> dict[str, str]:
        return {"setting": self.setting, "a": self.a, "b": self.b}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _model(run: Mapping[str, Any]) -> Mapping[str, Any]:
    """The model's identity an audit records (``responder.backend``), without its dtype."""
    backend = _mapping(_mapping(run.get("responder")).get("backend"))
    return {k: v for k, v in backend.items() if k != "dtype"}


def _checkpoints(run: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """A sweep's checkpoints (run.json ``checkpoints``) by the label compare matches them by
    (`compare.runs.label`: model, then ``@step`` where it has one)."""
    entries = run.get("checkpoints")
    out: dict[str, Mapping[str, Any]] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, Mapping) and entry.get("model") is not None:
            step = entry.get("step")
            out[str(entry["model"]) + ("" if step is None else f"@{step}")] = entry
    return out


def _checkpoint_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Difference]:
    """Each checkpoint of one label in both sweeps whose revision, weights, tokenizer and
    config files, hub commit or own code (``remote_code``: one run trusting it, the other not)
    differ: one sentence each, or one for them all where there are more than `MANY`."""
    ours, theirs = _checkpoints(a), _checkpoints(b)
    found: list[tuple[str, list[str], list[str], list[str]]] = []
    for label, entry in ours.items():
        other = theirs.get(label)
        if other is None:
            continue
        keys = [k for k in CHECKPOINT_KEYS if entry.get(k) is not None
                and other.get(k) is not None and entry[k] != other[k]]
        if keys:
            said = [_said(entry[k], other[k]) for k in keys]
            found.append((label, [CHECKPOINT_KEYS[k] for k in keys], [x for x, _ in said],
                          [y for _, y in said]))
    if len(found) > MANY:
        labels = [label for label, *_ in found]
        named = [KINDS[k] for k in CHECKPOINT_KEYS if k in ("revision", "fingerprint") or any(
            CHECKPOINT_KEYS[k] in what for _, what, _, _ in found)]
        kinds = f"{', '.join(named[:-1])} or {named[-1]}"
        return [Difference(
            f"checkpoints' {kinds}", "; ".join(
                f"{label}: {', '.join(x)}" for label, _, x, _ in found), "; ".join(
                f"{label}: {', '.join(y)}" for label, _, _, y in found),
            said=f"{len(found)} checkpoints of the same label differ between the runs in "
                 f"{kinds} ({', '.join(labels[:MANY])}, …): the runs may not "
                 "have scored the same models under these labels.")]
    return [Difference(f"checkpoint {label}'s {' and '.join(what)}", ", ".join(x), ", ".join(y))
            for label, what, x, y in found]


def settings(run: Mapping[str, Any], probes: Collection[str]) -> dict[str, Any]:
    """The answering and data settings ``run`` (a run.json) records, by their words; of its
    probes only those in ``probes``."""
    nested = _mapping(run.get("settings"))
    out: dict[str, Any] = {"run kind": run.get("kind")}
    responder = _mapping(run.get("responder"))
    if responder:
        out["scoring method"] = responder.get("scoring")
        # A model without a chat template reads a chat as the plain prompt (`render_chat`).
        out["prompt"] = ("plain text" if responder.get("prompt") == "plain"
                         or responder.get("chat_template") is False else "chat")
        for key, value in _mapping(responder.get("params")).items():
            out[PARAMS.get(key, key.replace("_", " "))] = value
    scored = {str(kind): _mapping(how) for kind, how in _mapping(run.get("scored")).items()}
    for kind, how in scored.items():
        out[f"how {kind} requests are scored"] = how.get("method")
    out["dtype"] = nested.get("dtype", _mapping(responder.get("backend")).get("dtype"))
    out["first-token scoring"] = nested.get("first_token",
                                            scored.get("next_token", {}).get("first_token"))
    out["--limit"] = run.get("limit", nested.get("limit"))
    for name in VERSIONS:  # a sweep and an audit record them (store.run_json.versions)
        out[f"{name} version"] = _mapping(run.get("versions")).get(name)
    for name, sha in sorted(_mapping(nested.get("data") or run.get("data")).items()):
        out[f"data file {name} (SHA-256)"] = sha
    recorded = _mapping(nested.get("probes") or run.get("probes"))
    for probe in sorted(p for p in recorded if p in probes):
        config = _mapping(recorded[probe])
        skip = {"probe", "wordings"} | ({"template", "system"} if "wordings" in config else set())
        for key, value in config.items():
            if key not in skip:
                out[f"{probe}'s {PROBE_KEYS.get(key, key.replace('_', ' '))}"] = value
    return out


def _said(a: Any, b: Any) -> tuple[str, str]:
    """Short texts as they are (``options vs generate``); others as a rerun's refusal says
    them (a hash by its first digits, long texts where they differ). "not run" beside the
    fingerprint of code that ran reads as it is, not quoted."""
    if all(isinstance(v, str) and len(v) < 40 and "\n" not in v for v in (a, b)):
        return a, b
    x, y = in_words(a, b)
    return (a if a == NOT_RUN else x), (b if b == NOT_RUN else y)


def differences(a: Mapping[str, Any], b: Mapping[str, Any],
                probes: Collection[str] = ()) -> list[Difference]:
    """Each setting run.json files ``a`` and ``b`` both record with different values (of the
    probes, those in ``probes``: the ones compared); the model's identity only where both
    name the same model."""
    ours, theirs = settings(a, probes), settings(b, probes)
    pairs = [(k, ours[k], theirs[k]) for k in ours if k in theirs]
    model_a, model_b = _model(a), _model(b)
    named = [model.get("source") or model.get("model") for model in (model_a, model_b)]
    if named[0] is not None and named[0] == named[1]:
        pairs += [(IDENTITY.get(k, f"model {k}"), model_a[k], model_b[k]) for k in model_a
                  if k in model_b and k not in ("source", "model")]
    out = []
    for setting, x, y in pairs:
        if x is None or y is None or x == y:
            continue
        out.append(Difference(setting, *_said(x, y)))
    return out + _checkpoint_differences(a, b)


__all__ = ["Difference", "differences", "settings"]
