from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from biasscope.backends.base import GenerateParams, GenerateRequest  # noqa: E402
from biasscope.backends.cache import Cached, ResponseCache  # noqa: E402
from biasscope.backends.checkpoints import Checkpoint, from_dirs  # noqa: E402
from biasscope.backends.fingerprints import answer_files, folder_fingerprint  # noqa: E402
from biasscope.backends.hf_generate import HFGenerator, render_chat  # noqa: E402
from biasscope.backends.hf_model import HFConfig  # noqa: E402
from biasscope.core.errors import ModelError  # noqa: E402
from biasscope.demo.tiny import tiny_gpt_neox  # noqa: E402

PROMPTS = ["The nurse took care of the CEO and gave",
           "The developer argued with",
           "He"]


@pytest.fixture(scope="module")
def gen(tiny_tokenizer) -> HFGenerator:
    model = tiny_gpt_neox(len(tiny_tokenizer), seed=3)
    return HFGenerator.from_loaded(model, tiny_tokenizer, Checkpoint("tiny", "<mem>", "step1"),
                                   HFConfig(batch_size=8))


def req(prompt: str, **params) -> GenerateRequest:
    return GenerateRequest(prompt=prompt, params=GenerateParams(**params))


def no_eos(gen: HFGenerator) -> tuple[tuple[int, float], ...]:
    """A bias that keeps the random-init model writing printable ASCII until max_tokens
    (byte tokens of split UTF-8 characters decode differently alone and in context)."""
    tokenizer = gen.tokenizer
    return tuple((i, -100.0) for i in range(len(tokenizer))
                 if i == tokenizer.eos_token_id or not (
                     (s := tokenizer.decode([i])).isascii() and s.isprintable()))


def ids_of(gen: HFGenerator, text: str) -> list[int]:
    return gen.tokenizer(text)["input_ids"]


def full_logprobs(gen: HFGenerator, ids: list[int]):
    """One unpadded, uncached forward: log-softmax at every position."""
    with torch.inference_mode():
        return torch.log_softmax(gen.model(torch.tensor([ids])).logits[0].double(), -1)


def manual_greedy(gen: HFGenerator, prompt: str, max_tokens: int,
                  bias: tuple[tuple[int, float], ...] = ()) -> list[int]:
    ids, out = ids_of(gen, prompt), []
    for _ in range(max_tokens):
        row = full_logprobs(gen, ids + out)[-1].clone()
        for i, value in bias:
            row[i] += value
        token = int(row.argmax())
        out.append(token)
        if token == gen.tokenizer.eos_token_id:
            break
    return out


def test_greedy_equals_manual_argmax_loop(gen):
    results = gen.generate([req(p, max_tokens=10) for p in PROMPTS])  # one left-padded batch
    for prompt, result in zip(PROMPTS, results):
        expected = manual_greedy(gen, prompt, 10)
        body = expected[:-1] if expected[-1] == gen.tokenizer.eos_token_id else expected
        assert result.text == gen.tokenizer.decode(body, skip_special_tokens=True)
        assert result.completion_tokens == len(expected)
        assert result.prompt_tokens == len(ids_of(gen, prompt))
        assert result.finish_reason == ("length" if len(expected) == 10 and body == expected
                                        else "stop")
        assert result.tokens is None


def test_logprobs_and_top_logprobs_match_a_manual_forward(gen):
    results = gen.generate([req(p, max_tokens=8, logit_bias=no_eos(gen), top_logprobs=5)
                            for p in PROMPTS])
    for prompt, result in zip(PROMPTS, results):
        prompt_ids = ids_of(gen, prompt)
        out = manual_greedy(gen, prompt, 8, no_eos(gen))
        assert len(out) == 8 and "".join(t.token for t in result.tokens) == result.text
        lp = full_logprobs(gen, prompt_ids + out)
        for k, tok in enumerate(result.tokens):
            row = lp[len(prompt_ids) - 1 + k]
            assert tok.logprob == pytest.approx(float(row[out[k]]), abs=1e-5)
            values, indices = row.topk(5)
            assert [v for _, v in tok.top] == pytest.approx(values.tolist(), abs=1e-5)
            assert [s for s, _ in tok.top] == [gen.tokenizer.decode([i]) for i in indices]
            assert [v for _, v in tok.top] == sorted((v for _, v in tok.top), reverse=True)
            assert tok.logprob <= tok.top[0][1] + 1e-6
    for result in gen.generate([req(p, max_tokens=4, top_logprobs=3) for p in PROMPTS]):
        for tok in result.tokens:  # unbiased greedy picks the top alternative
            assert tok.top[0] == (tok.token, pytest.approx(tok.logprob))


def test_logit_bias_forces_a_token_and_logprobs_stay_unbiased(gen):
    forced = ids_of(gen, " female")[0]
    prompt_ids = ids_of(gen, PROMPTS[0])
    for params in ({}, {"temperature": 1.0, "seed": 5}):
        (result,) = gen.generate([req(PROMPTS[0], max_tokens=4, logprobs=True,
                                      logit_bias=((forced, 100.0),), **params)])
        assert result.text == gen.tokenizer.decode([forced] * 4)
        lp = full_logprobs(gen, prompt_ids + [forced] * 4)
        for k, tok in enumerate(result.tokens):
            assert tok.logprob == pytest.approx(float(lp[len(prompt_ids) - 1 + k, forced]),
                                                abs=1e-5)
            assert tok.logprob < -1.0  # the model's own view, not the biased ~0
    with pytest.raises(ModelError, match="outside the vocabulary"):
        gen.generate([req("He", max_tokens=4, logit_bias=((10**6, 1.0),))])


def test_stop_strings_truncate_text_and_tokens(gen):
    (full,) = gen.generate([req(PROMPTS[1], max_tokens=12, logit_bias=no_eos(gen))])
    assert full.finish_reason == "length" and len(full.text) > 6
    stop = full.text[len(full.text) // 2: len(full.text) // 2 + 2]
    (cut,) = gen.generate([req(PROMPTS[1], max_tokens=12, logit_bias=no_eos(gen),
                               stop=("zzzz", stop), logprobs=True)])
    assert cut.text == full.text[: full.text.find(stop)]
    assert cut.finish_reason == "stop" and cut.completion_tokens < 12
    pieces = "".join(t.token for t in cut.tokens)
    assert pieces.startswith(cut.text) and len(pieces) < len(cut.text) + len(stop)


def test_sampling_is_reproducible_per_seed_whatever_the_batch(gen):
    def sample(prompt: str, seed: int) -> GenerateRequest:
        return req(prompt, temperature=1.0, seed=seed, max_tokens=15, logit_bias=no_eos(gen))

    (alone,) = gen.generate([sample(PROMPTS[0], 7)])
    batch = gen.generate([sample(PROMPTS[1], 1), sample(PROMPTS[2], 2), sample(PROMPTS[0], 7),
                          sample(PROMPTS[0], 8), sample(PROMPTS[0], 7)])
    assert batch[2].text == alone.text == batch[4].text
    assert batch[3].text != alone.text
    assert gen.generate([sample(PROMPTS[0], 7)])[0].text == alone.text
    cold = req(PROMPTS[0], temperature=1e-4, seed=1, max_tokens=15, logit_bias=no_eos(gen))
    greedy = req(PROMPTS[0], max_tokens=15, logit_bias=no_eos(gen))
    assert gen.generate([cold])[0].text == gen.generate([greedy])[0].text


def test_chat_without_template_uses_role_lines(gen):
    messages = (("system", "Be brief."), ("user", "The nurse said"))
    text, special = render_chat(gen.tokenizer, messages)
    assert (text, special) == ("system: Be brief.\nuser: The nurse said\nassistant:", True)
    chat = GenerateRequest(messages=messages, params=GenerateParams(max_tokens=6))
    assert gen.encode(chat) == ids_of(gen, text)
    assert gen.generate([chat]) == gen.generate([req(text, max_tokens=6)])


def test_chat_template_is_used_when_present(gen):
    tokenizer = copy.deepcopy(gen.tokenizer)
    tokenizer.chat_template = ("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n"
                               "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}")
    text, special = render_chat(tokenizer, (("user", "Hi"),))
    assert (text, special) == ("[user] Hi\n[assistant]", False)


def test_option_logprobs_equal_full_sequence_logprobs(gen):
    options = [" male", " female", " not specified", " the developer"]
    request = req(PROMPTS[0])
    prompt_ids = ids_of(gen, PROMPTS[0])
    small = HFGenerator.from_loaded(gen.model, gen.tokenizer, config=HFConfig(batch_size=3))
    for scorer in (gen, small):
        scores, rest = scorer.option_logprobs(request, options)
        assert list(scores) == options
        for option in options:
            cont = gen.tokenizer(option, add_special_tokens=False)["input_ids"]
            lp = full_logprobs(gen, prompt_ids + cont)
            expected = sum(float(lp[len(prompt_ids) - 1 + k, t]) for k, t in enumerate(cont))
            assert scores[option] == pytest.approx(expected, abs=1e-5)
        assert rest == pytest.approx(1 - sum(math.exp(v) for v in scores.values()), abs=1e-9)
        assert 0 < rest < 1


def test_mixed_params_in_one_call_match_separate_calls(gen):
    requests = [
        req(PROMPTS[0], max_tokens=5),
        req(PROMPTS[1], temperature=0.8, seed=3, max_tokens=8, top_logprobs=2),
        req(PROMPTS[2], max_tokens=5),
        req(PROMPTS[0], max_tokens=9, stop=("e",), logprobs=True),
    ]
    together = gen.generate(requests)
    assert len(together) == len(requests)
    for request, got in zip(requests, together):
        (alone,) = gen.generate([request])
        assert (got.text, got.finish_reason, got.prompt_tokens, got.completion_tokens) == (
            alone.text, alone.finish_reason, alone.prompt_tokens, alone.completion_tokens)
        assert (got.tokens is None) == (not request.params.wants_logprobs)
        for a, b in zip(got.tokens or (), alone.tokens or ()):
            assert a.token == b.token and a.logprob == pytest.approx(b.logprob, abs=1e-5)
            assert len(a.top) == request.params.top_logprobs
    assert gen.generate([]) == []


def test_loads_a_checkpoint_and_names_it(checkpoint_dirs):
    (ckpt,) = from_dirs(checkpoint_dirs[:1])
    loaded = HFGenerator(ckpt)
    assert loaded.label == ckpt.label
    assert loaded.identity() == {"backend": "hf", "source": str(checkpoint_dirs[0]),
                                 "revision": "checkpoint-10",
                                 "fingerprint": folder_fingerprint(checkpoint_dirs[0]),
                                 "files_fingerprint": loaded.fingerprints["files_fingerprint"],
                                 "dtype": "float32"}
    assert loaded.fingerprint == folder_fingerprint(checkpoint_dirs[0])  # the old name
    (result,) = loaded.generate([req("He", max_tokens=3)])
    assert result.prompt_tokens == len(loaded.tokenizer("He")["input_ids"])
    assert 1 <= result.completion_tokens <= 3


def test_a_deferred_generator_names_its_model_before_the_weights_load(checkpoint_dirs,
                                                                      monkeypatch):
    """`identity` and the tokenizer without the weights (an audit with every unit stored),
    the same identity once they have loaded, on first use."""
    import biasscope.backends.hf_generate as hf_generate

    (ckpt,) = from_dirs(checkpoint_dirs[:1])
    config = HFConfig(device="cpu")
    loaded = HFGenerator(ckpt, config)
    loads: list[object] = []
    load = hf_generate.load_model
    monkeypatch.setattr(hf_generate, "load_model", lambda *a: loads.append(a) or load(*a))
    deferred = HFGenerator(ckpt, config, deferred=True)
    assert deferred.identity() == loaded.identity()
    assert deferred.tokenizer("He")["input_ids"] == loaded.tokenizer("He")["input_ids"]
    assert loads == []
    assert deferred.generate([req("He", max_tokens=3)]) == loaded.generate(
        [req("He", max_tokens=3)])
    assert len(loads) == 1 and deferred.identity() == loaded.identity()


def test_a_deferred_generator_loads_on_every_attribute_a_load_sets(checkpoint_dirs):
    """A deferred generator loads when one of `_LOADED` is first read: an attribute a later
    `_load` sets and the list misses would be an AttributeError, not a load."""
    import biasscope.backends.hf_generate as hf_generate

    (ckpt,) = from_dirs(checkpoint_dirs[:1])
    config = HFConfig(device="cpu")
    before = set(vars(HFGenerator(ckpt, config, deferred=True)))
    loaded = set(vars(HFGenerator(ckpt, config)))
    assert loaded - before - {"tokenizer"} <= hf_generate._LOADED
    for name in sorted(hf_generate._LOADED):
        fresh = HFGenerator(ckpt, config, deferred=True)
        getattr(fresh, name)
        assert "model" in vars(fresh), name


def test_a_deferred_generator_refuses_weights_changed_before_they_load(checkpoint_dirs,
                                                                        tmp_path, monkeypatch):
    """The run was checked against the files hashed before the load: other weights copied in
    meanwhile are refused as they load, not scored under the identity of the first."""
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    folder = Path(shutil.copytree(checkpoint_dirs[0], tmp_path / "lm"))
    deferred = HFGenerator(Checkpoint("lm", str(folder)), HFConfig(device="cpu"), deferred=True)
    assert deferred.identity()["fingerprint"] == folder_fingerprint(checkpoint_dirs[0])
    shutil.copy(checkpoint_dirs[1] / "model.safetensors", folder / "model.safetensors")
    with pytest.raises(ModelError, match=r"^model lm changed on disk while this call ran "
                                         r"\(fingerprint\); nothing of it was scored"):
        deferred.generate([req("He", max_tokens=3)])


def test_a_deferred_hub_id_loads_at_once(checkpoint_dirs, tmp_path, monkeypatch):
    """A hub branch's commit is known once it has loaded (the cache may name the one it
    pointed at last time): a hub id is loaded when made, deferred or not."""
    from hub_cache import publish, use_cache

    hub = use_cache(monkeypatch, tmp_path / "hub")
    first = publish(hub, "org/tiny", checkpoint_dirs[0])
    generator = HFGenerator(Checkpoint("org/tiny", "org/tiny"), deferred=True)
    assert "model" in vars(generator) and generator.identity()["commit"] == first


def test_weights_replaced_under_the_same_path_are_another_model(checkpoint_dirs, tmp_path,
                                                               monkeypatch):
    """The response cache keys a model by its identity: another model's weights copied over a
    local folder got the old model's answers from the cache (the identity was the path alone).
    A local folder's identity now carries its weights' fingerprint; a hub id's does not."""
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    folder = tmp_path / "lm"
    shutil.copytree(checkpoint_dirs[0], folder)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    request = req("The nurse took care of", max_tokens=6)
    before = Cached(HFGenerator(Checkpoint("lm", str(folder))), cache)
    (old,) = before.generate([request])
    shutil.copy(checkpoint_dirs[1] / "model.safetensors", folder / "model.safetensors")
    after = Cached(HFGenerator(Checkpoint("lm", str(folder))), cache)
    assert after.identity()["fingerprint"] == folder_fingerprint(checkpoint_dirs[1])
    assert after.identity()["fingerprint"] != before.identity()["fingerprint"]
    (new,) = after.generate([request])
    (truth,) = HFGenerator(Checkpoint("other", str(checkpoint_dirs[1]))).generate([request])
    assert not new.cached and new.text == truth.text != old.text
    hub = HFGenerator(Checkpoint("org/m", "org/m", "abc123"), model=after.inner.model,
                      tokenizer=after.inner.tokenizer)
    assert hub.identity() == {"backend": "hf", "source": "org/m", "revision": "abc123",
                              "dtype": "float32"}
    half = HFGenerator(Checkpoint("org/m", "org/m", "abc123"),
                       model=after.inner.model.to(torch.bfloat16), tokenizer=hub.tokenizer)
    assert half.identity()["dtype"] == "bfloat16"  # another cache key than float32's


def test_a_hub_id_whose_main_moved_is_another_model(checkpoint_dirs, tmp_path, monkeypatch):
    """A hub id's identity was its revision alone: ``main`` moved to other weights between two
    calls got the old commit's answers from the response cache. It now holds the commit the
    revision resolved to when it loaded (none for a revision that is itself a commit)."""
    from hub_cache import publish, use_cache

    hub = use_cache(monkeypatch, tmp_path / "hub")
    first = publish(hub, "org/tiny", checkpoint_dirs[0])
    cache = ResponseCache(tmp_path / "cache.sqlite")
    request = req("The nurse took care of", max_tokens=6)
    before = Cached(HFGenerator(Checkpoint("org/tiny", "org/tiny")), cache)
    (old,) = before.generate([request])
    assert before.identity()["commit"] == first
    moved = publish(hub, "org/tiny", checkpoint_dirs[1])
    after = Cached(HFGenerator(Checkpoint("org/tiny", "org/tiny")), cache)
    assert after.identity()["commit"] == moved
    (new,) = after.generate([request])
    (truth,) = HFGenerator(Checkpoint("other", str(checkpoint_dirs[1]))).generate([request])
    assert not new.cached and new.text == truth.text != old.text
    pinned = HFGenerator(Checkpoint("org/tiny", "org/tiny", first))
    assert "commit" not in pinned.identity()


def test_the_hf_spec_loads_a_local_dir_through_the_registry(checkpoint_dirs):
    from biasscope.backends.generators import GeneratorConfig, load_generator

    gen = load_generator(f"hf:{checkpoint_dirs[0]}", GeneratorConfig(device="cpu"))
    assert gen.identity()["source"] == str(checkpoint_dirs[0])
    (result,) = gen.generate([req("He", max_tokens=2)])
    assert result.ok and 1 <= result.completion_tokens <= 2
    with pytest.raises(ModelError, match="write BACKEND:MODEL"):
        load_generator(str(checkpoint_dirs[0]))


def test_a_local_folder_is_one_model_however_its_path_is_written(checkpoint_dirs, tmp_path,
                                                                 monkeypatch):
    """``hf:./gemma`` recorded ``gemma`` as its identity's source, the response cache's key: the
    same folder as ``/abs/gemma`` missed the cache, and ``./gemma`` from another directory was
    another folder under the same source (its weights' fingerprint kept their answers apart).
    The source is the folder's resolved path."""
    from biasscope.backends.generators import GeneratorConfig, load_generator

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    for where, ckpt in (("a", checkpoint_dirs[0]), ("b", checkpoint_dirs[1])):
        shutil.copytree(ckpt, tmp_path / where / "gemma")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    request = req("The nurse took care of", max_tokens=6)

    def ask(where: str, spec: str) -> tuple[dict[str, str], bool, str]:
        monkeypatch.chdir(tmp_path / where)
        cached = Cached(load_generator(spec, GeneratorConfig(device="cpu")), cache)
        (answer,) = cached.generate([request])
        return cached.identity(), answer.cached, answer.text

    first, hit, text = ask("a", "hf:./gemma")
    assert first["source"] == str((tmp_path / "a" / "gemma").resolve()) and not hit
    assert ask("a", f"hf:{tmp_path / 'a' / 'gemma'}") == (first, True, text)
    other, hit, _ = ask("b", "hf:./gemma")
    assert other["source"] == str((tmp_path / "b" / "gemma").resolve()) and not hit
    assert other["fingerprint"] != first["fingerprint"]


def test_a_chat_template_edited_in_place_is_another_model(checkpoint_dirs, tmp_path,
                                                          monkeypatch):
    """The identity held the weights' fingerprint alone, and the cache key the messages, not
    the prompt they render to: a chat template (or tokenizer, or config) edited in place, the
    weights unchanged, got the old template's answers from the cache. The identity now holds
    ``files_fingerprint``, over the folder's files beside its weights."""
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    folder = tmp_path / "lm"
    shutil.copytree(checkpoint_dirs[0], folder)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    chat = GenerateRequest(messages=(("user", "The nurse took care of"),),
                           params=GenerateParams(max_tokens=6))

    def ask() -> tuple[dict[str, str], bool, int]:
        cached = Cached(HFGenerator(Checkpoint("lm", str(folder))), cache)
        (answer,) = cached.generate([chat])
        return cached.identity(), answer.cached, answer.prompt_tokens

    before, hit, plain = ask()
    assert not hit and ask()[1]
    config = folder / "tokenizer_config.json"
    edited = json.loads(config.read_text())
    edited["chat_template"] = "{% for m in messages %}{{ m.content }}{% endfor %}"
    config.write_text(json.dumps(edited))
    after, hit, templated = ask()
    assert not hit and templated < plain  # the new template's prompt, asked afresh
    assert after["fingerprint"] == before["fingerprint"]
    assert after["files_fingerprint"] != before["files_fingerprint"]
    assert [f.name for f in answer_files(folder)] == [
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]


def test_generation_passes_the_cache_by_its_current_name(gen, monkeypatch):
    """transformers 5.24 renamed the KV cache argument and output to ``cache``; the old name
    still works but logged "`past_key_values`/`cache_params` are deprecated" on the user's
    terminal at a local judge's first verdict."""
    generic = pytest.importorskip("transformers.utils.generic")
    said: list[str] = []
    monkeypatch.setattr(generic.logger, "warning_once", lambda message, *a, **k: said.append(
        str(message)))
    gen.generate([req(p, max_tokens=4) for p in PROMPTS])
    assert not [m for m in said if "deprecated" in m]
