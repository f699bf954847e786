"""A notebook's backend configs (`GeneratorConfig`, `HTTPConfig`, `RewardConfig`) are checked
when made, by the same declarations as the command's flags (`BackendConfig`, `HFConfig`)."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from typing import Any

import pytest

from biasscope.backends.config import BackendConfig
from biasscope.backends.hf_model import HFConfig
from biasscope.backends.openai_http import HTTPConfig, OpenAIGenerator
from biasscope.backends.reward import RewardConfig
from biasscope.backends.specs import GeneratorConfig
from biasscope.core.errors import BiasscopeError
from biasscope.intervene.settings import InterveneConfig


@pytest.mark.parametrize(("make", "says"), [
    (lambda: HTTPConfig(concurrency=0), "--concurrency (concurrency): 0 is not 1 or more"),
    (lambda: HTTPConfig(timeout=-1), "--timeout (timeout): -1 is not above 0"),
    (lambda: HTTPConfig(timeout="soon"), "--timeout (timeout): 'soon' is not a number"),
    (lambda: HTTPConfig(max_retries=-2), "--retries (max_retries): -2 is negative: give 0"),
    (lambda: HTTPConfig(max_retries=1.5), "--retries (max_retries): 1.5 is not a whole number"),
    (lambda: HTTPConfig(backoff=-1), "backoff: -1 is negative: give 0 or more"),
    (lambda: HTTPConfig(max_backoff=float("nan")), "max_backoff: nan is not a finite number"),
    (lambda: HTTPConfig(max_backoff=0.5), "backoff: 1 is above max_backoff 0.5, the longest "
                                          "wait before a retry: lower backoff or raise"),
    (lambda: replace(HTTPConfig(backoff=0.1, max_backoff=0.2), max_backoff=0.05),
     "backoff: 0.1 is above max_backoff 0.05"),
    (lambda: GeneratorConfig(batch_size=0), "--batch-size (batch_size): 0 is not 1 or more"),
    (lambda: GeneratorConfig(device=3), "--device (device): 3 is not text"),
    (lambda: GeneratorConfig(device="gpu"), "--device (device): 'gpu' is not a device: give "
                                            "auto, cpu, cuda, cuda:N (N from 0) or mps"),
    (lambda: HFConfig(device="cuda:-1"), "--device (device): 'cuda:-1' is not a device"),
    (lambda: HFConfig(device="cpu:0"), "--device (device): 'cpu:0' is not a device"),
    (lambda: RewardConfig(device="CUDA"), "--device (device): 'CUDA' is not a device"),
    (lambda: InterveneConfig(out="r", model="m", device="xpu"), "'xpu' is not a device"),
    (lambda: GeneratorConfig(dtype="float8"), "--dtype (dtype): 'float8' is not one of auto"),
    (lambda: GeneratorConfig(allow_pickle="no"), "--allow-pickle (allow_pickle): 'no' is not "
                                                 "True or False"),
    (lambda: GeneratorConfig(base_url=8000), "--base-url (base_url): 8000 is not text"),
    (lambda: GeneratorConfig(http={"concurrency": 0}),
     "--concurrency (http.concurrency): 0 is not 1 or more"),
    (lambda: GeneratorConfig(http={"backoff": 2, "max_backoff": 1}),
     "http.backoff: 2 is above max_backoff 1"),
    (lambda: GeneratorConfig(http=4), "http: give HTTPConfig(...) or a dict of its settings"),
])
def test_a_wrong_setting_is_refused_in_one_line(make: Any, says: str) -> None:
    """Before: each was taken, and was quietly changed (``concurrency=0`` ran one request at
    a time), misbehaved (``max_retries=-2``: a tokenizer call gave up "in -1 attempts") or was
    refused only once a local model loaded (``batch_size=0``, ``device=3``)."""
    with pytest.raises(BiasscopeError, match=re.escape(says)) as caught:
        make()
    assert "\n" not in str(caught.value)


def test_a_right_config_is_made_as_given() -> None:
    config = GeneratorConfig(http={"concurrency": 2, "timeout": "30"}, device="cpu",
                             dtype="bfloat16", batch_size=4, allow_pickle=True)
    assert config.http == HTTPConfig(concurrency=2, timeout=30.0)
    assert (config.device, config.dtype, config.batch_size) == ("cpu", "bfloat16", 4)
    assert [HFConfig(device=d).device for d in ("cuda", "cuda:0", "cuda:12", "mps")] == [
        "cuda", "cuda:0", "cuda:12", "mps"]
    fast = HTTPConfig(concurrency=4, timeout=5, max_retries=0, backoff=0, max_backoff=0.05)
    assert OpenAIGenerator("m", "http://127.0.0.1:9/v1", config=fast).config is fast
    assert GeneratorConfig() == GeneratorConfig(http=HTTPConfig())


def test_the_flags_are_the_library_settings() -> None:
    """One declaration each: the flag and the notebook's setting share help, check and
    default, so they cannot drift apart."""
    flags = {f.name: f for f in fields(BackendConfig)}
    for config, names in ((HTTPConfig, {"concurrency": "concurrency", "timeout": "timeout",
                                        "max_retries": "retries"}),
                          (GeneratorConfig, {n: n for n in ("base_url", "api_key_env", "device",
                                                            "allow_pickle")})):
        for f in fields(config):
            if f.name in names:
                flag = flags[names[f.name]]
                assert (flag.metadata, flag.default) == (f.metadata, f.default), f.name


@pytest.mark.parametrize(("given", "says"), [
    ({"trust_remote_code": "no"}, "--trust-remote-code (trust_remote_code): 'no' is not True"),
    ({"allow_pickle": "False"}, "--allow-pickle (allow_pickle): 'False' is not True or False"),
    ({"chat_template": "no"}, "--no-chat-template (chat_template): 'no' is not True or False"),
    ({"transform": "softmax"}, "--transform (transform): 'softmax' is not one of logit"),
    ({"batch_size": 0}, "--batch-size (batch_size): 0 is not 1 or more"),
    ({"batch_size": "eight"}, "--batch-size (batch_size): 'eight' is not a whole number"),
    ({"max_length": 2.5}, "max_length: 2.5 is not a whole number"),
    ({"device": 3}, "--device (device): 3 is not text"),
    ({"dtype": "float8"}, "--dtype (dtype): 'float8' is not one of auto"),
])
def test_a_reward_configs_loading_settings_are_checked(given: dict[str, Any], says: str) -> None:
    """Before: ``trust_remote_code="no"`` (a true string) would run the repo's code and
    ``allow_pickle="False"`` load pickles; ``batch_size="eight"`` was a TypeError traceback."""
    with pytest.raises(BiasscopeError, match=re.escape(says)) as caught:
        RewardConfig(**given)
    assert "\n" not in str(caught.value)
    assert RewardConfig(batch_size="8", max_length=512).batch_size == 8


def test_the_reward_flags_are_the_reward_configs_settings() -> None:
    """Before: `RewardScoring` declared transform, chat_template, dtype and batch_size again,
    apart from `RewardConfig`, so the two could drift; now each is declared once, in a module
    light enough for ``sensitivity --help`` (no NumPy), and `backends.reward` still gives it.
    --dtype and --batch-size are `BackendConfig`'s (every local model's): their checks,
    choices and defaults are the reward's, their help in the command's words."""
    from biasscope.backends import reward_config
    from biasscope.sensitivity.settings import LOCAL_HELP, RewardScoring

    assert RewardConfig is reward_config.RewardConfig
    declared = {f.name: f for f in fields(RewardConfig)}
    for f in fields(RewardScoring):
        assert (dict(f.metadata), f.default) == (dict(declared[f.name].metadata),
                                                 declared[f.name].default)
    backend = {f.name: f for f in fields(BackendConfig)}
    for name in ("dtype", "batch_size"):
        ours, theirs = dict(backend[name].metadata), dict(declared[name].metadata)
        assert ours.pop("help") and theirs.pop("help") and "judge" in LOCAL_HELP[name]
        assert (ours, backend[name].default) == (theirs, declared[name].default)


def test_the_reward_flags_make_the_reward_config_in_one_place() -> None:
    """sensitivity and counterfactual each built `RewardConfig` from `RewardScoring` field by
    field in copied code; `RewardScoring.reward_config` is the one, and hands on every flag."""
    from biasscope.sensitivity.settings import RewardScoring

    scoring = RewardScoring(transform="logprob", chat_template=False)
    made = scoring.reward_config(BackendConfig(device="cpu", allow_pickle=True,
                                               dtype="bfloat16", batch_size=3))
    assert made == RewardConfig(device="cpu", allow_pickle=True, transform="logprob",
                                chat_template=False, dtype="bfloat16", batch_size=3)
    assert all(getattr(made, f.name) == getattr(scoring, f.name) for f in fields(scoring))


@pytest.mark.parametrize("kind", ["sensitivity", "counterfactual"])
def test_one_dtype_for_every_local_model_of_a_notebooks_run(kind: str) -> None:
    """Before: ``reward=RewardScoring(dtype="bfloat16")`` beside ``backend=BackendConfig(
    dtype="float16")`` loaded the reward models in one dtype and a local judge or perturber
    in the other, a run the command (one --dtype) cannot make, its run.json saying each. Now
    the dtype and batch size are the backend's alone: the old keywords still work for one
    release, warned and moved there; given both ways apart they are refused."""
    from biasscope.counterfactual.settings import CounterfactualConfig
    from biasscope.sensitivity.settings import RewardScoring, SensitivityConfig

    def config(**given: Any) -> Any:
        if kind == "sensitivity":
            return SensitivityConfig(out="run", reward_models=["a/b"], perturber="canned:A",
                                     **given)
        return CounterfactualConfig(out="run", reward_models=["a/b"], **given)

    with pytest.warns(DeprecationWarning, match=r"RewardScoring\(dtype=…, batch_size=…\) is "
                      r"now backend=BackendConfig\(dtype=…, batch_size=…\)"):
        old = RewardScoring(dtype="bfloat16", batch_size="4")
    made = config(reward=old)
    assert (made.backend.dtype, made.backend.batch_size) == ("bfloat16", 4)
    assert made.reward.reward_config(made.backend).dtype == "bfloat16"
    assert config(reward=old, backend=BackendConfig(dtype="bfloat16")).backend.batch_size == 4
    with pytest.raises(BiasscopeError, match=re.escape(
            "reward dtype 'bfloat16' and backend dtype 'float16': one --dtype sets every local "
            "model of the command; give it once, as BackendConfig(dtype=…)")):
        config(reward=old, backend=BackendConfig(dtype="float16"))
    with pytest.warns(DeprecationWarning), pytest.raises(BiasscopeError, match="--dtype"):
        RewardScoring(dtype="float8")
    assert config().backend == BackendConfig()
