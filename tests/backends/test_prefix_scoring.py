"""Shared-prefix scoring (backends/prefix.py) equals the plain one-prompt-per-row path.

Tiny random-init GPT-NeoX (Pythia shape), Llama, Gemma 3, Gemma 2 and Mistral models (Gemma 3,
Gemma 2 and Mistral with a sliding window of 8 tokens, far shorter than the prompts, so their
sliding layers matter; Gemma 2 with soft-capped logits and eager attention), five seeds of
WinoBias items plus prompts that repeat or contain one another, small batches that mix row
lengths under padding.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from biasscope.backends import prefix  # noqa: E402
from biasscope.backends.checkpoints import Checkpoint  # noqa: E402
from biasscope.backends.hf import HFScorer  # noqa: E402
from biasscope.backends.hf_model import HFConfig  # noqa: E402
from biasscope.core.items import Item  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402

ATOL = 1e-4


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _unvouched(monkeypatch):
    """Every test's models are checked afresh (tests change models' code between scorings)."""
    monkeypatch.setattr(prefix, "_VOUCHED", set())


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


def gemma2(vocab: int) -> Any:
    """Soft-capped logits (copied by the head) and eager attention (the 4-D mask added)."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(6)
    config = Gemma2Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=8,
        final_logit_softcapping=2.0, max_position_embeddings=256)
    return Gemma2ForCausalLM._from_config(config, attn_implementation="eager").eval()


def mistral(vocab: int) -> Any:
    """Every layer slides (no layer types): the window goes into the one mask."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(7)
    config = MistralConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           sliding_window=8, max_position_embeddings=256)
    return MistralForCausalLM(config).eval()


MODELS = {"gpt-neox": neox, "llama": llama, "gemma3": gemma3, "gemma2": gemma2,
          "mistral": mistral}


def scorer_for(model: Any, tokenizer: Any, batch_size: int) -> HFScorer:
    return HFScorer(Checkpoint("tiny", "tiny"), model, tokenizer, HFConfig(batch_size=batch_size))


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


def test_the_plan_shares_prefixes_at_every_depth_and_mixes_row_lengths(items, tiny_tokenizer):
    scorer = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=5)
    work = prefix.SharedScoring(scorer, items, [True] * len(items), None)
    assert len(work.seqs) < len(items)  # identical prompts (equal option orders) once
    batches = work.batches()
    tries = [t for batch in batches for t in batch]
    members = sorted(d for t in tries for d in t.members)
    assert members == list(range(len(work.seqs)))  # every prompt exactly once
    tokens = sum(len(t.tokens) for t in tries)
    assert tokens < 0.4 * sum(len(s) for s in work.seqs)  # well under half the forward tokens
    # The sentence is shared by both questions, each question by its option orders: the
    # tries branch at more than one depth.
    branch_depths = {t.depths[i] for t in tries for i in range(1, len(t.tokens))
                     if t.depths[i] <= t.depths[i - 1]}
    assert len(branch_depths) > 3
    assert any(len({len(t.tokens) for t in batch}) > 1 for batch in batches)  # padded rows
    budget = 5 * max(len(s) for s in work.seqs)
    assert all(len(batch) * len(batch[0].tokens) <= budget or len(batch) == 1
               for batch in batches)


def test_a_short_row_is_not_padded_to_a_long_rows_width():
    """Rows are batched longest first; one whose padding to the batch's width would take the
    batch past `prefix.PADDING` of its tokens starts a batch of its own (it cost a long row's
    work: 46% more tokens at batch 128 than at 32 on Pythia-410m)."""
    seqs = [tuple(range(100, 120)), tuple(range(200, 220)), tuple(range(300, 318)), (1, 2, 3)]
    batches = prefix.plan_batches(seqs, size=8, width=1)  # narrow: no prompts share a row
    widths = [[len(t.tokens) for t in batch] for batch in batches]
    assert widths == [[20, 20, 18], [3]]
    padded = sum(len(b) * w[0] for b, w in zip(batches, widths, strict=True))
    assert padded <= (1 + prefix.PADDING) * sum(map(len, seqs))


def test_a_trie_row_sees_exactly_each_prompts_own_prefix():
    seqs = [(1, 2, 3, 4), (1, 2, 3, 5, 6), (1, 2, 7), (1, 2, 3)]  # (1, 2, 3) inside another
    trie = prefix.build_trie(sorted(range(4), key=lambda i: seqs[i]), seqs)
    assert trie.members == (3, 0, 1, 2)
    assert trie.tokens == (1, 2, 3, 4, 5, 6, 7)
    assert trie.depths == (0, 1, 2, 3, 3, 4, 2)
    assert trie.lasts == (2, 3, 5, 6)
    for member, last in zip(trie.members, trie.lasts):
        seen = [j for j in range(len(trie.tokens)) if j <= last < trie.ends[j]]
        assert [trie.tokens[j] for j in seen] == list(seqs[member])
        assert [trie.depths[j] for j in seen] == list(range(len(seqs[member])))
    ids, positions, mask = prefix.tree_masks([trie], None, False, torch.float32)
    assert ids.tolist() == [[1, 2, 3, 4, 5, 6, 7]] and positions.tolist() == [list(trie.depths)]
    allowed = mask[0, 0] == 0
    assert allowed[5].nonzero().flatten().tolist() == [0, 1, 2, 4, 5]  # 1 2 3 5 6
    assert allowed[6].nonzero().flatten().tolist() == [0, 1, 6]  # 1 2 7


def test_sliding_windows_count_positions_and_padding_sees_itself():
    seqs = [(1, 2, 3, 4, 5), (1, 2, 3, 6, 7), (9,)]
    rows = [prefix.build_trie([0, 1], seqs), prefix.build_trie([2], seqs)]
    _, _, masks = prefix.tree_masks(rows, 2, True, torch.float32)
    full, near = (masks[k][:, 0] == 0 for k in ("full_attention", "sliding_attention"))
    # Token 6 of the first row is at depth 3 after 1 2 3: the window of 2 keeps 3 and itself.
    assert full[0, 5].nonzero().flatten().tolist() == [0, 1, 2, 5]
    assert near[0, 5].nonzero().flatten().tolist() == [2, 5]
    # The second row's padding columns attend to themselves only; nobody attends to them.
    assert full[1].nonzero().tolist() == [[i, i] for i in range(7)]
    _, _, single = prefix.tree_masks(rows, 2, False, torch.float32)
    assert torch.equal(single[:, 0] == 0, near)  # all layers slide: one windowed mask


def test_an_aligned_width_pads_with_tokens_that_see_themselves_only():
    seqs = [(1, 2, 3, 4, 5), (1, 2, 3, 6, 7), (9,)]
    rows = [prefix.build_trie([0, 1], seqs), prefix.build_trie([2], seqs)]
    ids, positions, mask = prefix.tree_masks(rows, None, False, torch.float32, align=16)
    assert ids.shape == positions.shape == (2, 16) and mask.shape == (2, 1, 16, 16)
    _, _, narrow = prefix.tree_masks(rows, None, False, torch.float32)
    allowed = mask[:, 0] == 0
    assert torch.equal(allowed[:, :7, :7], narrow[:, 0] == 0)  # the real tokens as before
    assert allowed[:, 7:].nonzero().tolist() == [[r, i, i + 7] for r in range(2)
                                                 for i in range(9)]
    assert not allowed[:, :7, 7:].any()  # nobody sees the padding


def test_masks_are_built_on_the_scoring_device():
    """Only the rows travel; every mask operation runs on the device (on "meta" a host
    tensor mixed in would raise)."""
    seqs = [(1, 2, 3, 4, 5), (1, 2, 3, 6, 7), (9,)]
    rows = [prefix.build_trie([0, 1], seqs), prefix.build_trie([2], seqs)]
    meta = torch.device("meta")
    ids, positions, masks = prefix.tree_masks(rows, 2, True, torch.bfloat16, 16, meta)
    assert {t.device for t in (ids, positions, *masks.values())} == {meta}
    assert masks["full_attention"].shape == (2, 1, 16, 16)
    assert masks["full_attention"].dtype == torch.bfloat16


def test_no_width_is_rounded_past_the_mask_limit(monkeypatch):
    seqs = [tuple(range(1, 31))]
    rows = [prefix.build_trie([0], seqs)]
    monkeypatch.setattr(prefix, "MASK_ELEMENTS", 30 * 30)
    ids, _, _ = prefix.tree_masks(rows, None, False, torch.float32, align=16)
    assert ids.shape == (1, 30)
    assert prefix.alignment(torch.device("cpu")) == 1
    assert prefix.alignment(torch.device("cuda")) == prefix.CUDA_ALIGN


def test_trie_rows_on_cuda_leave_cudnn_attention_out():
    """The flag is process-wide: set for the trie forward only, restored after."""
    cudnn = torch.backends.cuda.cudnn_sdp_enabled
    before = cudnn()
    with prefix.attention_kernels(torch.device("cuda")):
        assert not cudnn()
        assert torch.backends.cuda.mem_efficient_sdp_enabled()
    assert cudnn() == before
    with prefix.attention_kernels(torch.device("cpu")):
        assert cudnn() == before


def test_aligned_batches_score_as_whole_prompts(items, tiny_tokenizer, monkeypatch):
    """The CUDA rounding of widths, run on the CPU: the same scores as the plain path."""
    scorer = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=8)
    plain = scorer.score_next_token(items)
    real, widths = prefix.tree_masks, []

    def recorded(*args: Any) -> Any:
        ids, positions, masks = real(*args)
        widths.append(ids.shape[1])
        return ids, positions, masks

    monkeypatch.setattr(prefix, "tree_masks", recorded)
    monkeypatch.setattr(prefix, "alignment", lambda device: 16)
    shared = scorer.score_next_token_shared(items, [True] * len(items))
    assert_same(shared, plain, scorer, items)
    assert widths and all(w % 16 == 0 for w in widths)


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


def test_a_model_that_cannot_take_trie_rows_falls_back_with_one_notice(items, tiny_tokenizer,
                                                                       capsys, monkeypatch):
    scorer = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=8)
    plain = scorer.score_next_token(items)
    monkeypatch.setattr(prefix, "_NOTICES", set())
    scorer.model.config.layer_types = ["chunked_attention", "full_attention"]
    done: list[int] = []
    for _ in range(2):  # a second checkpoint of the same model class: no second notice
        shared = scorer.score_next_token_shared(items, [True] * len(items), done.append)
        assert_same(shared, plain, scorer, items)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "no prefix reuse for GPTNeoXForCausalLM (it has chunked_attention layers)" in err[0]
    assert sum(done) == 2 * len(items)


def test_rows_that_disagree_with_whole_prompts_fall_back(items, tiny_tokenizer, capsys,
                                                        monkeypatch):
    """A model that places tokens its own way is caught by the first batch."""
    scorer = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=8)
    plain = scorer.score_next_token(items)
    monkeypatch.setattr(prefix, "_NOTICES", set())
    real = prefix.tree_masks

    def stretched(*args: Any) -> Any:  # as if tokens sat twice as far apart
        ids, positions, masks = real(*args)
        return ids, positions * 2, masks

    monkeypatch.setattr(prefix, "tree_masks", stretched)
    done: list[int] = []
    shared = scorer.score_next_token_shared(items, [True] * len(items), done.append)
    assert_same(shared, plain, scorer, items)
    assert sum(done) == len(items)  # progress counts each item once
    assert "trie rows differ from whole prompts" in capsys.readouterr().err


def test_the_next_checkpoint_of_a_checked_model_is_not_checked_again(items, tiny_tokenizer,
                                                                    monkeypatch):
    """The check runs a plain forward beside the first batch; a sweep's next checkpoints (the
    same class and configuration, other weights) skip it, and score the same as when checked."""
    first = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=8)
    second = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=8)
    with torch.no_grad():
        for param in second.model.parameters():
            param.mul_(1.5)  # other weights, same code
    checked = []
    real = prefix.SharedScoring.check

    def check(self: Any, *args: Any) -> None:
        checked.append(self.scorer)
        real(self, *args)

    monkeypatch.setattr(prefix.SharedScoring, "check", check)
    some = items[:60]
    first.score_next_token_shared(some, [True] * len(some))
    unchecked = second.score_next_token_shared(some, [True] * len(some))
    assert checked == [first]
    monkeypatch.setattr(prefix, "_VOUCHED", set())
    assert second.score_next_token_shared(some, [True] * len(some)) == unchecked
    assert checked == [first, second]
    other = scorer_for(llama(len(tiny_tokenizer)), tiny_tokenizer, batch_size=8)
    other.score_next_token_shared(some, [True] * len(some))  # another model: checked
    assert checked[-1] is other


def test_what_keeps_a_model_off_trie_rows_is_named(tiny_tokenizer):
    class Plain(torch.nn.Module):
        config: Any = None

        def forward(self, input_ids: Any, attention_mask: Any = None) -> Any: ...

    model = Plain()
    model.base_model = model
    model.config = type("Config", (), {"_attn_implementation": "sdpa"})()
    assert prefix.reusable(model) == "Plain.forward takes no attention_mask/position_ids"
    model.config._attn_implementation = "flash_attention_2"
    assert prefix.reusable(model) == "its flash_attention_2 attention takes no 4-D mask"
    assert prefix.reusable(neox(len(tiny_tokenizer))) is None


def test_plan_rows_minimises_forward_work():
    seqs = [(1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 4, 5, 6, 7, 8, 10), (1, 2, 3, 4, 5, 6, 7, 11),
            (20, 21, 22), (1, 2, 9)]
    # A wide model: one row in sorted order (a row more costs more than what it saves).
    assert prefix.plan_rows(seqs, width=1000) == [(0, 1, 2, 4, 3)]
    # The trie of the first three has 9 + 1 + 1 tokens; (1, 2, 9) would make it 12.
    assert prefix.plan_rows(seqs, width=1000, max_row=11) == [(0, 1, 2), (4, 3)]
    # Attention grows with the row: on a narrow model two short prompts sharing one token of
    # a hundred stay apart.
    long = [(1, *range(10, 110)), (1, *range(200, 300))]
    assert prefix.plan_rows(long, width=1) == [(0,), (1,)]
    assert prefix.plan_rows(long, width=10**6) == [(0, 1)]


def test_half_precision_takes_the_rows_and_stays_close(items, tiny_tokenizer, capsys):
    """bfloat16 rounds differently along the two paths; the scores stay within its noise."""
    scorer = scorer_for(llama(len(tiny_tokenizer)).to(torch.bfloat16), tiny_tokenizer, 8)
    plain = scorer.score_next_token(items)
    shared = scorer.score_next_token_shared(items, [True] * len(items))
    assert "no prefix reuse" not in capsys.readouterr().err
    worst = max(abs(x - y) for a, b in zip(shared, plain) if a is not None
                for x, y in zip(a.option_logprobs, b.option_logprobs))
    assert worst < 0.1


def test_a_forward_that_refuses_the_masks_falls_back(items, tiny_tokenizer, capsys,
                                                     monkeypatch):
    """GPT-NeoX told it has sliding layers gets a mask per layer kind, which it cannot read."""
    scorer = scorer_for(neox(len(tiny_tokenizer)), tiny_tokenizer, batch_size=8)
    plain = scorer.score_next_token(items[:40])
    monkeypatch.setattr(prefix, "_NOTICES", set())
    scorer.model.config.layer_types = ["sliding_attention", "full_attention"]
    scorer.model.config.sliding_window = 8
    shared = scorer.score_next_token_shared(items[:40], [True] * 40)
    assert_same(shared, plain, scorer, items[:40])
    assert "(its forward refused a 4-D mask (" in capsys.readouterr().err
