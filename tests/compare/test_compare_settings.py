"""``biasscope compare`` notes the settings two runs were asked with that differ (scoring
method, --plain-prompt, temperature, max tokens, dtype, the items' and data files' SHA-256, the
model's revision): one note each in the sentences and in comparison.json, never a refusal. The
model itself is what is compared, so its identity is noted only where both runs name the same
model."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from biasscope.cli.main import main
from biasscope.compare.recorded import differences
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json
from biasscope.store.units import Unit
from test_compare import winobias_records

SHA_A, SHA_B = "1c8f977f6cbd50a1" * 4, "bc1a80001fc03dca" * 4
TEMPLATE = "{sentence}\nQuestion: What is the gender of the {occupation}?\nAnswer:"


def audit(**changes: Any) -> dict[str, Any]:
    """An audit's run.json as `biasscope audit --scoring generate` writes it (the shape of
    audit.harness.run_settings), with ``changes`` applied by dotted path."""
    run: dict[str, Any] = {
        "kind": "audit", "model": "tiny", "limit": 40,
        "responder": {"scoring": "generate",
                      "backend": {"backend": "hf", "source": "org/tiny", "revision": "main",
                                  "fingerprint": SHA_A, "dtype": "float32"},
                      "params": {"temperature": 0.0, "max_tokens": 64, "seed": None, "stop": [],
                                 "logit_bias": [], "logprobs": False, "top_logprobs": 0}},
        "probes": {"winobias-gender": {"probe": "winobias-gender", "template": TEMPLATE,
                                       "sentences": 24, "items_sha256": SHA_A},
                   "perplexity": {"probe": "perplexity", "items_sha256": SHA_A}}}
    for path, value in changes.items():
        *parents, last = path.split(".")
        at = run
        for key in parents:
            at = at[key]
        if value is None:
            del at[last]
        else:
            at[last] = value
    return run


def said(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [d.sentence for d in differences(a, b, {"winobias-gender"})]


def test_each_answering_and_data_setting_that_differs_is_one_note() -> None:
    assert said(audit(), copy.deepcopy(audit())) == []
    b = audit(**{"responder.scoring": "options", "responder.prompt": "plain",
                 "responder.params.temperature": 0.7, "responder.params.max_tokens": 8,
                 "responder.backend.dtype": "bfloat16",
                 "probes.winobias-gender.items_sha256": SHA_B, "limit": 80})
    assert said(audit(), b) == [
        "the runs differ in scoring method: generate vs options.",
        "the runs differ in prompt: chat vs plain text.",
        "the runs differ in temperature: 0.0 vs 0.7.",
        "the runs differ in max tokens: 64 vs 8.",
        "the runs differ in dtype: float32 vs bfloat16.",
        "the runs differ in --limit: 40 vs 80.",
        "the runs differ in winobias-gender's items (SHA-256): 1c8f977f6cbd… vs bc1a80001fc0….",
    ]
    local = audit(scored={"next_token": {"method": "local", "first_token": False}})
    echo = audit(scored={"next_token": {"method": "echo", "first_token": True}})
    assert said(local, echo) == [
        "the runs differ in how next_token requests are scored: local vs echo.",
        "the runs differ in first-token scoring: false vs true."]
    # a probe not compared is not noted; a template is in words where it differs
    other = audit(**{"probes.perplexity.items_sha256": SHA_B,
                     "probes.winobias-gender.template": TEMPLATE.replace("gender", "sex")})
    (note,) = said(audit(), other)
    assert note.startswith("the runs differ in winobias-gender's template: ") and "sex" in note


def test_the_model_is_noted_only_when_both_runs_name_the_same_one() -> None:
    revised = audit(**{"responder.backend.revision": "v2", "responder.backend.fingerprint":
                       SHA_B})
    assert said(audit(), revised) == [
        "the runs differ in model revision: main vs v2.",
        "the runs differ in model weights (fingerprint): 1c8f977f6cbd… vs bc1a80001fc0….",
    ]
    # another model is what the user compares: its source, revision and weights go unsaid
    other = audit(**{"responder.backend.source": "org/other", "responder.backend.revision":
                     "v2", "responder.backend.fingerprint": SHA_B, "model": "other"})
    assert said(audit(), other) == []
    served = audit(**{"responder.backend": {"backend": "openai-compatible",
                                            "base_url": "http://127.0.0.1:8000/v1",
                                            "model": "tiny"}})
    assert said(audit(), served) == []


def test_a_local_models_other_tokenizer_or_template_is_noted_in_words() -> None:
    """A local model's identity holds ``files_fingerprint`` (its tokenizer, chat template and
    config files): without words for it compare said "model files_fingerprint"."""
    first, edited = (audit(**{"responder.backend.files_fingerprint": sha}) for sha in
                     (SHA_A, SHA_B))
    assert said(first, edited) == [
        "the runs differ in tokenizer, chat template and config files (fingerprint): "
        "1c8f977f6cbd… vs bc1a80001fc0…."]


def test_a_setting_one_run_does_not_record_is_not_noted() -> None:
    """An older run, or the options scorer (no generation parameters): nothing shows a
    difference, so none is claimed; nor a template beside several wordings (design's)."""
    options = audit(**{"responder.params": None, "responder.backend.dtype": None})
    assert said(audit(), options) == []
    worded = audit(**{"probes.winobias-gender.wordings": [{"id": "w0", "template": "x"}],
                      "probes.winobias-gender.template": "x"})
    assert said(audit(), worded) == []


def sweep(fingerprints: dict[int, str], revision: str = "main", **versions: str
          ) -> dict[str, Any]:
    """A sweep's run.json (dynamics.scoring.runfile's shape): one checkpoint of model m per
    step, with these fingerprints, and the installed ``versions``."""
    return {"kind": "dynamics", "settings": {}, "seeds": [0],
            "checkpoints": [{"model": "m", "source": f"/runs/m/checkpoint-{step}",
                             "revision": revision, "step": step,
                             "identity": f"/runs/m/checkpoint-{step}", "fingerprint": sha}
                            for step, sha in fingerprints.items()],
            "versions": {"python": "3.12.1", "biasscope": "0.1.0", "numpy": "2.1.0",
                         **versions}}


def test_a_checkpoint_of_one_label_with_other_weights_or_revision_is_noted() -> None:
    """Before: the two sweeps' checkpoints m@100 went unsaid though their weights differed."""
    a = sweep({100: SHA_A, 200: SHA_A, 300: SHA_A})
    assert said(a, copy.deepcopy(a)) == []
    assert said(a, sweep({100: SHA_B, 200: SHA_A, 400: SHA_B})) == [
        "the runs differ in checkpoint m@100's weights (fingerprint): 1c8f977f6cbd… vs "
        "bc1a80001fc0…."]  # m@400 is in one run only: nothing to set beside it
    assert said(a, sweep({100: SHA_B, 200: SHA_A, 300: SHA_A}, revision="v2")) == [
        "the runs differ in checkpoint m@100's revision and weights (fingerprint): main, "
        "1c8f977f6cbd… vs v2, bc1a80001fc0….",
        "the runs differ in checkpoint m@200's revision: main vs v2.",
        "the runs differ in checkpoint m@300's revision: main vs v2."]
    many = {step: SHA_A for step in range(100, 600, 100)}
    (note,) = said(sweep(many), sweep({s: SHA_B for s in many}))
    assert note == ("5 checkpoints of the same label differ between the runs in revision or "
                    "weights (m@100, m@200, m@300, …): the runs may not have scored the same "
                    "models under these labels.")
    (found,) = differences(sweep(many), sweep({s: SHA_B for s in many}))
    assert found.as_dict()["a"].startswith("m@100: 1c8f977f6cbd…; m@200: ")


def test_a_checkpoint_of_one_label_with_other_tokenizer_or_config_files_is_noted() -> None:
    """A sweep's checkpoints record ``files_fingerprint`` too: compare words it as a local
    model's, and names it in the sentence for many."""
    def edited(sweep_run: dict[str, Any], sha: str) -> dict[str, Any]:
        for entry in sweep_run["checkpoints"]:
            entry["files_fingerprint"] = sha
        return sweep_run

    a = edited(sweep({100: SHA_A}), SHA_A)
    assert said(a, edited(sweep({100: SHA_A}), SHA_B)) == [
        "the runs differ in checkpoint m@100's tokenizer, chat template and config files "
        "(fingerprint): 1c8f977f6cbd… vs bc1a80001fc0…."]
    assert said(a, sweep({100: SHA_A})) == []  # a run from before it: nothing to compare
    many = {step: SHA_A for step in range(100, 600, 100)}
    (note,) = said(edited(sweep(many), SHA_A), edited(sweep(many), SHA_B))
    assert note.startswith("5 checkpoints of the same label differ between the runs in "
                           "revision, weights or tokenizer and config files (m@100, ")


def test_a_checkpoint_or_model_run_with_and_without_its_own_code_is_noted() -> None:
    """``remote_code`` (the code a model's auto_map names: "not run", or the fingerprint of the
    code that ran with --trust-remote-code) was no key compare set side by side: two runs of
    one checkpoint, one trusting its code, went unsaid, and an audit's said "model
    remote_code"."""
    def coded(sweep_run: dict[str, Any], code: str) -> dict[str, Any]:
        for entry in sweep_run["checkpoints"]:
            entry["remote_code"] = code
        return sweep_run

    a = coded(sweep({100: SHA_A}), "not run")
    assert said(a, coded(sweep({100: SHA_A}), SHA_B)) == [
        "the runs differ in checkpoint m@100's own code (auto_map, --trust-remote-code): "
        "not run vs bc1a80001fc0…."]
    assert said(a, sweep({100: SHA_A})) == []  # a run from before it: nothing to compare
    many = {step: SHA_A for step in range(100, 600, 100)}
    (note,) = said(coded(sweep(many), "not run"), coded(sweep(many), SHA_B))
    assert note.startswith("5 checkpoints of the same label differ between the runs in "
                           "revision, weights or own code (m@100, ")
    assert said(audit(**{"responder.backend.remote_code": SHA_A}),
                audit(**{"responder.backend.remote_code": "not run"})) == [
        "the runs differ in model's own code (auto_map, --trust-remote-code): 1c8f977f6cbd… "
        "vs not run."]


def test_the_library_versions_a_sweep_records_are_noted() -> None:
    """torch, transformers, tokenizers and biasscope decide the scores; numpy and python are
    not noted, nor a version one run does not record."""
    a = sweep({100: SHA_A}, torch="2.4.0", transformers="4.44.0")
    b = sweep({100: SHA_A}, torch="2.5.1", transformers="4.44.0", tokenizers="0.20.0")
    b["versions"].update(biasscope="0.2.0", numpy="2.2.0", python="3.13.0")
    assert said(a, b) == ["the runs differ in biasscope version: 0.1.0 vs 0.2.0.",
                          "the runs differ in torch version: 2.4.0 vs 2.5.1."]


def write(root: Path, settings: dict[str, Any]) -> str:
    """A sweep run of 150 WinoBias pairs with ``settings`` as its run.json's (the shape
    dynamics.scoring.runfile writes)."""
    root.mkdir(parents=True)
    write_json(root / "run.json", {"kind": "dynamics", "schema": "biasscope.run/1",
                                   "settings": settings, "seeds": [0]})
    RunStore(root).write_unit(Unit("m", None, "winobias-gender", 0, 100),
                              winobias_records(150, model="m"))
    return str(root)


def test_compare_prints_and_records_the_settings_that_differ(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    probes = {"winobias-gender": {"probe": "winobias-gender", "template": TEMPLATE}}
    base = {"probes": probes, "limit": None, "dtype": "float32", "first_token": False,
            "data": {"winobias/pro_stereotyped_type1.txt.dev": SHA_A}}
    a = write(tmp_path / "a", base)
    b = write(tmp_path / "b", {**base, "dtype": "bfloat16", "first_token": True,
                               "data": {"winobias/pro_stereotyped_type1.txt.dev": SHA_B}})
    assert main(["compare", a, b, "--out", str(tmp_path / "cmp")]) == 0  # noted, not refused
    printed = capsys.readouterr().out
    notes = ["the runs differ in dtype: float32 vs bfloat16.",
             "the runs differ in first-token scoring: false vs true.",
             "the runs differ in data file winobias/pro_stereotyped_type1.txt.dev (SHA-256): "
             "1c8f977f6cbd… vs bc1a80001fc0…."]
    assert [line for line in printed.splitlines() if "the runs differ" in line] == notes
    summary = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert summary["settings_differ"][0] == {"setting": "dtype", "a": "float32",
                                             "b": "bfloat16"}
    assert len(summary["settings_differ"]) == 3 and summary["notes"][-3:] == notes
    assert {c["verdict"] for c in summary["comparisons"]} == {"equivalent"}
    assert main(["compare", a, write(tmp_path / "same", base), "--out",
                 str(tmp_path / "same-cmp")]) == 0
    assert "the runs differ" not in capsys.readouterr().out


def test_a_model_without_a_chat_template_reads_a_chat_as_plain_text() -> None:
    """Its chats are rendered as `plain_chat`, the text --plain-prompt sends: no difference."""
    chat = audit(**{"responder.chat_template": False})
    plain = audit(**{"responder.prompt": "plain", "responder.chat_template": False})
    assert said(chat, plain) == []
    assert said(audit(), plain) == ["the runs differ in prompt: chat vs plain text."]
