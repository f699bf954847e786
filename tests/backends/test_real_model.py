"""Gemma 3 270M (a real pretrained base model, Gemma terms of use) through the GGUF path.

What the tiny test models hid: a 262k-token SentencePiece vocabulary, a BOS token, a real pad
token with left padding, sliding-window attention (512 tokens in 5 of 6 layers), no chat
template in the GGUF, multi-token BBQ options. Scores are checked against plain unbatched
forwards on the same dequantised weights, and two properties of a trained model are checked
against a random-initialised model of the same config. Measured on 2 cores shared with other
builds (load 5-9): 30 minutes with 20 Adult pairs and 64 reference forwards, hence the smaller
sizes now (8 pairs, 22 reference forwards); on a dedicated 2-core machine expect a few
minutes, plus ~2 minutes for the one-off conversion.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from real_model import gemma_file

torch = pytest.importorskip("torch")
scipy_stats = pytest.importorskip("scipy.stats")

from adult_fixture import line as adult_line  # noqa: E402
from adult_fixture import person, write  # noqa: E402
from bbq_fixture import write_bbq  # noqa: E402
from biasscope.backends.base import GenerateRequest  # noqa: E402
from biasscope.backends.checkpoints import Checkpoint, from_model  # noqa: E402
from biasscope.backends.hf import HFScorer, iter_scorers  # noqa: E402
from biasscope.backends.hf_generate import HFGenerator, render_chat  # noqa: E402
from biasscope.backends.hf_model import HFConfig  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402

BOS, PAD = 2, 0
TOP = 100  # "the answer is among the model's 100 most likely next tokens"


@pytest.fixture(scope="module")
def gemma() -> Checkpoint:
    (ckpt,) = from_model(str(gemma_file()))
    return ckpt


@pytest.fixture(scope="module")
def scorer(gemma: Checkpoint) -> HFScorer:
    (loaded,) = list(iter_scorers([gemma], HFConfig(batch_size=16)))
    return loaded


@pytest.fixture(scope="module")
def generator(gemma: Checkpoint, scorer: HFScorer) -> HFGenerator:
    return HFGenerator(gemma, HFConfig(batch_size=4), model=scorer.model,
                       tokenizer=scorer.tokenizer)


@pytest.fixture(scope="module")
def wino_items(winobias_dir: Path) -> list:
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    return [item for seed in (0, 1) for item in probe.items(seed)][:64]


@pytest.fixture(scope="module")
def wino_scores(scorer: HFScorer, wino_items: list) -> list:
    return scorer.score_next_token(wino_items)


def last_logprobs(model, ids: list[int], keep: int = 1):
    """A plain forward of one unpadded sequence: log-softmax of its last ``keep`` positions."""
    with torch.inference_mode():
        logits = model(torch.tensor([ids]), logits_to_keep=keep, use_cache=False).logits[0]
    logits = logits.double()
    return torch.log_softmax(logits, -1)


def test_provenance_and_tokenizer(gemma, scorer, generator):
    made = gemma.as_dict()["gguf"]
    assert (made["quantization"], made["architecture"]) == ("Q4_K_M", "gemma3")
    assert generator.identity()["gguf_quantization"] == "Q4_K_M"
    tokenizer = scorer.tokenizer
    assert (tokenizer.bos_token_id, tokenizer.pad_token_id, scorer._pad) == (BOS, PAD, PAD)
    assert [tokenizer(c, add_special_tokens=False)["input_ids"]
            for c in (" male", " female", " not")] == [[8937], [8256], [711]]
    # This GGUF carries no chat template: chats are plain "role: text" lines, one BOS.
    assert not getattr(tokenizer, "chat_template", None)
    text, special = render_chat(tokenizer, [("system", "Be brief."), ("user", "Hi")])
    assert special and text.endswith("assistant:")
    ids = generator.encode(GenerateRequest(messages=(("system", "Be brief."), ("user", "Hi"))))
    assert ids[0] == BOS and ids.count(BOS) == 1


def test_batched_winobias_scores_match_a_plain_forward(scorer, wino_items, wino_scores):
    ids = scorer.encodings.prompt_ids(scorer.tokenizer, scorer.fingerprint,
                                      [it.prompt for it in wino_items])
    assert len({len(i) for i in ids}) >= 3  # the batches really are left-padded
    for row, score in list(zip(ids, wino_scores))[::3]:  # 22 of them, from every batch
        assert row[0] == BOS and row.count(BOS) == 1
        logprobs = last_logprobs(scorer.model, row)[-1]
        expected = logprobs[[8937, 8256, 711]].tolist()
        assert score.option_logprobs == pytest.approx(expected, abs=1e-4)


def test_a_prompt_past_the_sliding_window_batched_with_short_ones(scorer, wino_items):
    long = replace(wino_items[0], id="long", prompt=(
        "The committee met again to discuss the budget. " * 70) + wino_items[0].prompt)
    batch = [long, *wino_items[1:4]]
    ids = scorer.encodings.prompt_ids(scorer.tokenizer, scorer.fingerprint, [long.prompt])[0]
    assert len(ids) > scorer.model.config.sliding_window
    scores = scorer.score_next_token(batch)
    expected = last_logprobs(scorer.model, ids)[-1][[8937, 8256, 711]].tolist()
    assert scores[0].option_logprobs == pytest.approx(expected, abs=1e-4)


def _option_reference(generator: HFGenerator, request: GenerateRequest, option: str) -> float:
    prompt = generator.encode(request)
    cont = generator.tokenizer(option, add_special_tokens=False)["input_ids"]
    lp = last_logprobs(generator.model, prompt + cont, keep=len(cont) + 1)[:-1]
    return float(sum(lp[i, t] for i, t in enumerate(cont)))


def test_adult_pair_option_scores_match_a_plain_forward(generator, tmp_path):
    rows = [adult_line(person(20 + 5 * n, "Female" if n % 2 else "Male"), "yes" if n % 3 else "no")
            for n in range(8)]
    write(tmp_path, rows)
    probe = load_probe("adult-counterfactual", data_dir=tmp_path)
    items = probe.items(0)
    assert len(items) == 16  # 8 pairs (~200-token prompts): each person and the sex-flipped twin
    for item in items:
        request = GenerateRequest(messages=probe.messages(item), id=item.id)
        scores, rest = generator.option_logprobs(request, item.continuations)
        options = [generator.tokenizer(o, add_special_tokens=False)["input_ids"]
                   for o in item.continuations]
        assert all(len(o) == 1 for o in options)  # " yes", " no": one plain forward each
        expected = last_logprobs(generator.model, generator.encode(request))[-1]
        assert [scores[o] for o in item.continuations] == pytest.approx(
            [float(expected[o[0]]) for o in options], abs=1e-4)
        assert 0.0 <= rest < 1.0


def test_bbq_multi_token_options_match_a_plain_forward(generator, tmp_path):
    probe = load_probe("bbq", data_dir=write_bbq(tmp_path))
    items = probe.items(0)[:4]
    lengths = set()
    for item in items:
        request = GenerateRequest(messages=probe.messages(item), id=item.id)
        scores, _ = generator.option_logprobs(request, item.continuations)
        for option in item.continuations:
            n = len(generator.tokenizer(option, add_special_tokens=False)["input_ids"])
            lengths.add(n)
            # Float32 rounding of a padded batch: up to ~1e-4 per token (measured 1.5e-4 on 3).
            assert scores[option] == pytest.approx(
                _option_reference(generator, request, option), abs=1e-4 * n)
    assert max(lengths) > 1 and len(lengths) > 1  # options of different token lengths


def _trained_properties(items: list, scores: list) -> tuple[float, float]:
    """The least probability mass the model puts on the three listed options (a uniform guess
    over 262,144 tokens puts 1.1e-5 there), and the one-sided binomial p-value of the answer
    being among the TOP most likely next tokens as often as it is, against chance
    TOP / vocabulary (3.8e-4)."""
    mass = min(sum(math.exp(v) for v in s.option_logprobs) for s in scores)
    hits = sum(s.target_rank <= TOP for s in scores)
    chance = TOP / 262_144
    return mass, scipy_stats.binomtest(hits, len(scores), chance, alternative="greater").pvalue


def test_trained_model_properties_that_a_random_one_fails(scorer, wino_items, wino_scores):
    # Measured (fixture, 64 items): option mass >= 0.30 on every item (>= 0.23 on 200 real
    # WinoBias items); the answer's rank at most 22 (28 on real items), median 3.
    mass, p_value = _trained_properties(wino_items, wino_scores)
    assert mass > 0.05 and p_value < 1e-12
    # The same config, random initialisation, on a few items: near-uniform next tokens.
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    random_model = AutoModelForCausalLM.from_config(scorer.model.config).eval()
    random_scorer = HFScorer(scorer.ckpt, random_model, scorer.tokenizer, scorer.config)
    few = wino_items[:12]
    random_mass, random_p = _trained_properties(few, random_scorer.score_next_token(few))
    assert random_mass < 1e-3 and random_p > 0.01
    # The trained model on those same few items passes where the random one fails.
    mass_few, p_few = _trained_properties(few, wino_scores[:12])
    assert mass_few > 0.05 and p_few < 1e-12


def test_every_builtin_winobias_wording_ends_at_the_answer(scorer: HFScorer, winobias_dir: Path):
    """``--wordings builtin`` on the real SentencePiece tokenizer: each wording's prompt,
    then each option, tokenizes as the prompt's tokens and then the option's own token."""
    from biasscope.probes.specs import load_probes
    from biasscope.probes.wordings import boundary_problems

    probe = load_probes("winobias-gender", data_dir=winobias_dir, wordings="builtin")[0]
    items = [i for seed in (0, 1) for i in probe.items(seed)][::5]
    assert len({i.groups["template"] for i in items}) == 8
    assert boundary_problems(scorer.tokenizer, items) == []
