"""The block-by-block LM head (backends/head.py) equals the full logits reduced at once."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from biasscope.backends import head as head_module  # noqa: E402
from biasscope.backends.head import Head, reduce_next_token  # noqa: E402
from biasscope.core.errors import ModelError  # noqa: E402

VOCAB, WIDTH = 5000, 16


def random_head(bias: bool = False, softcap: float | None = None, seed: int = 0) -> Head:
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(VOCAB + 7, WIDTH, generator=generator)  # 7 padding rows, no tokens
    return Head(weight, torch.randn(VOCAB + 7, generator=generator) if bias else None, VOCAB,
                softcap)


@pytest.mark.parametrize("bias,softcap", [(False, None), (True, None), (False, 3.0)])
def test_blocks_give_the_full_reduction(monkeypatch, bias, softcap):
    monkeypatch.setattr(head_module, "CPU_BLOCK_FLOATS", 8 * 700)  # blocks of 1024 here
    head = random_head(bias, softcap)
    hidden = torch.randn(8, WIDTH, generator=torch.Generator().manual_seed(1))
    # Options in the first, a middle and the last block; arities 3 and 2; every answer slot.
    options = [[3, 2600, VOCAB - 1], [4999, 0, 1500], [7, 8]] * 2 + [[10, 4090], [4100, 4099]]
    answers = [0, 1, 1, 2, 0, 1, 1, 0]
    got = head.scores(hidden, options, answers, [f"i{k}" for k in range(8)], "ckpt")
    want = reduce_next_token(head.logits(hidden), options, answers)
    assert head.block_size(8, hidden.device) == 1024
    for a, b in zip(got, want):
        assert a.option_logprobs == pytest.approx(b.option_logprobs, abs=1e-5)
        assert a.target_rank == b.target_rank
    assert len(got[2].option_logprobs) == 2


def test_ranks_count_strictly_higher_logits_across_blocks(monkeypatch):
    monkeypatch.setattr(head_module, "CPU_BLOCK_FLOATS", 1024)  # one row: blocks of 1024
    weight = torch.zeros(VOCAB, 1)
    weight[:, 0] = -1.0
    weight[[5, 1200, 3000, 4500], 0] = 2.0  # ties with the answer in three other blocks
    weight[[6, 4999], 0] = 3.0  # strictly higher, in the first and the last block
    head = Head(weight, None, VOCAB)
    score = head.scores(torch.ones(1, 1), [[3000, 6]], [0], ["i"], "ckpt")[0]
    assert score.target_rank == 3  # only the two strictly higher tokens count
    want = reduce_next_token(head.logits(torch.ones(1, 1)), [[3000, 6]], [0])[0]
    assert score.target_rank == want.target_rank
    assert score.option_logprobs == pytest.approx(want.option_logprobs, abs=1e-6)


def test_a_nan_logit_names_its_item():
    head = random_head()
    hidden = torch.randn(3, WIDTH)
    hidden[1, 0] = float("nan")
    with pytest.raises(ModelError, match=r"checkpoint ckpt produced NaN/inf logits \(first at "
                                         r"item b\)"):
        head.scores(hidden, [[1, 2]] * 3, [0, 0, 0], ["a", "b", "c"], "ckpt")


def test_heads_the_scorer_cannot_copy_are_named():
    from biasscope.demo.tiny import tiny_gpt_neox

    model = tiny_gpt_neox(100)
    assert isinstance(Head.of(model, 100), Head)
    model.config.logit_scale = 0.5
    assert Head.of(model, 100) == "its logits are rescaled (logit_scale)"
    model.config.logit_scale = None
    model.set_output_embeddings(torch.nn.Sequential(model.get_output_embeddings()))
    assert Head.of(model, 100) == "its output layer is a Sequential, not a Linear"
