"""Shared-prefix scoring (backends/prefix.py) equals the plain one-prompt-per-row path.

Tiny random-init GPT-NeoX (Pythia shape), Llama and Gemma 3 models (Gemma 3 with a sliding
window of 8 tokens, far shorter than the prompts, so its sliding layers matter), five seeds of
WinoBias items plus prompts that repeat or contain one another, small batches that mix prefix
lengths under left padding.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from biasscope.backends import prefix  # noqa: E402
from biasscope.backends.hf import HFOptions, HFScorer  # noqa: E402
from biasscope.items import Item  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402
from biasscope.runs.checkpoints import Checkpoint  # noqa: E402

ATOL = 1e-4


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models on a shared 2-core machine: extra OpenMP threads only spin (10-20x slower)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def items(winobias_dir) -> list[Item]:
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    every = [it for seed in range(5) for it in probe.items(seed)]
    # The same prompt with another answer, and a prompt that is a prefix of another one.
    first = every[0]
    extra = [replace(first, id="same-prompt-other-answer", answer=(first.answer + 1) % 3),
             replace(first, id="cut-short", prompt=first.prompt[: len(first.prompt) // 2]),
             replace(first, id="tiny", prompt="The")]
    return every + extra


def neox(vocab: int) -> Any:
    from biasscope.demo.tiny import tiny_gpt_neox

    return tiny_gpt_neox(vocab, seed=3)


def llama(vocab: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(4)
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256)
    return LlamaForCausalLM(config).eval()


def gemma3(vocab: int, window: int = 8) -> Any:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(5)
    config = Gemma3TextConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
        sliding_window=window, max_position_embeddings=256,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"])
    model = Gemma3ForCausalLM(config).eval()
    with torch.no_grad():  # random-init norms are zero-centred: make every layer count
        for name, param in model.named_parameters():
            if "norm" in name:
                param.normal_(0.0, 0.5)
    return model


MODELS = {"gpt-neox": neox, "llama": llama, "gemma3": gemma3}


def scorer_for(model: Any, tokenizer: Any, batch_size: int) -> HFScorer:
    return HFScorer(Checkpoint("tiny", "tiny"), model, tokenizer, HFOptions(batch_size=batch_size))


def assert_same(shared: list[Any], plain: list[Any], scorer: HFScorer,
                items: list[Item]) -> None:
    """Log-probs to ATOL; ranks identical unless another token's logit is within ATOL of the
    target's (a float near-tie), checked on an unpadded reference forward."""
    assert len(shared) == len(plain) == len(items)
    for item, a, b in zip(items, shared, plain):
        assert a is not None
        assert a.option_logprobs == pytest.approx(b.option_logprobs, abs=ATOL), item.id
        if a.target_rank != b.target_rank:
            ids = torch.tensor([scorer.tokenizer(item.prompt)["input_ids"]])
            with torch.inference_mode():
                logits = scorer.model(ids).logits[0, -1, : scorer.vocab].double()
            target = logits[scorer.tokenizer(item.continuations[item.answer],
                                             add_special_tokens=False)["input_ids"][0]]
            near = int(((logits - target).abs() <= ATOL).sum())
            assert abs(a.target_rank - b.target_rank) < near, item.id


@pytest.mark.parametrize("name", sorted(MODELS))
def test_shared_prefixes_score_as_the_plain_path(name, items, tiny_tokenizer, capsys):
    scorer = scorer_for(MODELS[name](len(tiny_tokenizer)), tiny_tokenizer, batch_size=5)
    plain = scorer.score_next_token(items)
    done: list[int] = []
    shared = scorer.score_next_token_shared(items, [True] * len(items), done.append)
    assert_same(shared, plain, scorer, items)
    assert sum(done) == len(items)
    assert "no prefix reuse" not in capsys.readouterr().err  # the cache was reused


def test_the_plan_shares_prefixes_and_mixes_their_lengths(items, tiny_tokenizer):
    scorer = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=5)
    work = prefix.SharedScoring(scorer, items, [True] * len(items), None)
    groups, alone = prefix.plan_groups(work.seqs)
    assert len(work.seqs) < len(items)  # identical prompts (equal option orders) once
    members = sorted(d for g in groups for d in g.members) + alone
    assert sorted(members) == list(range(len(work.seqs)))  # every prompt exactly once
    assert len(groups) > 0 and len({g.prefix for g in groups[:5]}) > 1
    tokens = sum(g.prefix + sum(len(work.seqs[d]) - g.prefix for d in g.members)
                 for g in groups) + sum(len(work.seqs[d]) for d in alone)
    assert tokens < 0.5 * sum(len(s) for s in work.seqs)  # under half the forward tokens


def test_the_sliding_window_matters_here(items, tiny_tokenizer):
    """Guard for the Gemma 3 case: a window of 8 changes the scores of these prompts."""
    near = scorer_for(gemma3(len(tiny_tokenizer), window=8), tiny_tokenizer, 8)
    far = scorer_for(gemma3(len(tiny_tokenizer), window=4096), tiny_tokenizer, 8)
    a, b = near.score_next_token(items[:8]), far.score_next_token(items[:8])
    assert max(abs(x - y) for s, t in zip(a, b)
               for x, y in zip(s.option_logprobs, t.option_logprobs)) > 1e-2


def test_only_needed_items_are_scored_and_equal_a_full_pass(items, tiny_tokenizer):
    """Results do not depend on which items are still needed: a resumed unit gets the same
    numbers, bit for bit, and batches holding nothing needed are skipped."""
    scorer = scorer_for(llama(len(tiny_tokenizer)), tiny_tokenizer, batch_size=4)
    everything = scorer.score_next_token_shared(items, [True] * len(items))
    needed = [i % 7 == 0 for i in range(len(items))]
    done: list[int] = []
    part = scorer.score_next_token_shared(items, needed, done.append)
    for flag, full, some in zip(needed, everything, part):
        if flag:
            assert some == full  # exactly equal, not approximately
    # Progress counts the needed items only (items of written units ride along in batches).
    assert sum(done) == sum(needed)


def test_a_cache_that_cannot_be_reused_falls_back_with_one_notice(items, tiny_tokenizer,
                                                                  capsys, monkeypatch):
    scorer = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=8)
    plain = scorer.score_next_token(items)
    monkeypatch.setattr(prefix, "_NOTICES", set())

    def refuse(cache: Any, rows: int) -> None:
        raise prefix.NoReuse("its cache is a MambaCache, not a DynamicCache")

    monkeypatch.setattr(prefix, "check_cache", refuse)
    done: list[int] = []
    for _ in range(2):  # a second checkpoint of the same model class: no second notice
        shared = scorer.score_next_token_shared(items, [True] * len(items), done.append)
        assert_same(shared, plain, scorer, items)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "no prefix reuse for GPTNeoXForCausalLM (its cache is a Mamba" in err[0]
    assert sum(done) == 2 * len(items)


def test_continuations_that_disagree_with_whole_prompts_fall_back(items, tiny_tokenizer,
                                                                 capsys, monkeypatch):
    """A model that places cached continuations its own way is caught by the first batch."""
    scorer = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=8)
    plain = scorer.score_next_token(items)
    monkeypatch.setattr(prefix, "_NOTICES", set())
    real = prefix.select_rows

    def shifted(cache: Any, rows: Any) -> Any:  # as if the prefix were seen one token late
        chosen = real(cache, rows)
        for layer in chosen.layers:
            layer.keys = torch.roll(layer.keys, 1, dims=2)
        return chosen

    monkeypatch.setattr(prefix, "select_rows", shifted)
    done: list[int] = []
    shared = scorer.score_next_token_shared(items, [True] * len(items), done.append)
    assert_same(shared, plain, scorer, items)
    assert sum(done) == len(items)  # progress counts each item once
    assert "cached continuations differ from whole prompts" in capsys.readouterr().err


def test_a_forward_without_past_key_values_is_named(tiny_tokenizer):
    class Plain(torch.nn.Module):
        base_model: Any = None

        def forward(self, input_ids: Any, attention_mask: Any = None) -> Any: ...

    model = Plain()
    model.base_model = model
    assert prefix.reusable(model) == "Plain.forward takes no past_key_values"
    assert prefix.reusable(neox(len(tiny_tokenizer))) is None


def test_plan_groups_minimises_forward_tokens():
    seqs = [(1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 4, 5, 6, 7, 8, 10), (1, 2, 3, 4, 5, 6, 7, 11),
            (20, 21, 22), (1, 2, 9)]
    groups, alone = prefix.plan_groups(seqs, min_prefix=4, row_cost=2)
    assert groups == [prefix.Group(7, (2, 0, 1))] or groups == [prefix.Group(7, (0, 1, 2))]
    assert sorted(alone) == [3, 4]
    # A prompt wholly inside another keeps one token of its own to score.
    groups, alone = prefix.plan_groups([(1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 5, 6, 7, 8)],
                                       min_prefix=4, row_cost=0)
    assert groups == [prefix.Group(5, (0, 1))] and alone == []
