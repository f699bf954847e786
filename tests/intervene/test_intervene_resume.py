"""A killed full fine-tune resumes to exactly the run it would have been: same weights, same
held-out perplexity at every evaluation, for output layers named and tied as the lab's
architectures have them (GPT-NeoX's untied ``embed_out``, Llama's ``lm_head`` untied and tied,
Gemma's tied head). A checkpoint missing a weight, or holding one the model lacks, stops the
resume instead of training on from the starting weights."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
TEXTS = [f"the nurse said that she would help {i}; the doctor said that he would wait {i}"
         for i in range(48)]


class Killed(BaseException):
    """The process killed mid-evaluation: as KeyboardInterrupt, no Exception (`BiasCallback`
    trains on past an evaluation's Exception)."""


def _neox(vocab: int) -> Any:
    from biasscope.demo.tiny import tiny_gpt_neox

    return tiny_gpt_neox(vocab, hidden=32, layers=1, heads=2, seed=0)


def _llama(tied: bool) -> Callable[[int], Any]:
    def build(vocab: int) -> Any:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        return LlamaForCausalLM(LlamaConfig(
            vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
            tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0, pad_token_id=0))
    return build


def _gemma(vocab: int) -> Any:
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    return Gemma3ForCausalLM(Gemma3TextConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        max_position_embeddings=128, sliding_window=16, bos_token_id=0, eos_token_id=0,
        pad_token_id=0))


ARCHITECTURES = {"gpt-neox": _neox, "llama": _llama(False), "llama-tied": _llama(True),
                 "gemma3-tied": _gemma}


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    pytest.importorskip("torch")
    from biasscope.demo.tiny import train_tokenizer

    return train_tokenizer(TEXTS, 300)


def _train(tmp: Path, base: Path, tokenizer: Any, kill_at: int | None = None
           ) -> dict[str, Any]:
    """One 4-step arm (evaluated and checkpointed every 2 steps) into ``tmp``; its final
    weights, or Killed after the checkpoint at ``kill_at`` is saved."""
    from transformers import AutoModelForCausalLM, TrainerCallback

    from biasscope.dynamics.live.evaluate import LiveConfig
    from biasscope.intervene.train import Training, train_arm
    from biasscope.probes import perplexity
    from biasscope.store.directory import RunStore

    final: dict[str, Any] = {}

    class Watch(TrainerCallback):  # type: ignore[misc]
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if state.global_step == kill_at:
                raise Killed
            return control

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            final.update({k: v.detach().clone() for k, v in kwargs["model"].state_dict().items()})
            return control

    docs = [perplexity.Document(str(i), t) for i, t in enumerate(TEXTS[:6])]
    train_arm("arm", TEXTS[6:], lambda: AutoModelForCausalLM.from_pretrained(base),
              tokenizer, [perplexity.Perplexity(docs, "texts")], RunStore(tmp),
              Training(steps=4, every=2, batch_size=4, seq_len=24, lr=3e-3),
              LiveConfig(seeds=(0,), batch_size=8), _cpu(), quiet=True, after=[Watch()])
    return final


def _cpu() -> Any:
    import torch

    return torch.device("cpu")


def _scores(run: Path) -> Any:
    from biasscope.store.directory import RunStore

    records = RunStore(run).records()
    return records.sort_values(["step", "item_id"])[["step", "item_id", "logprob"]].reset_index(
        drop=True)


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_resumed_run_equals_uninterrupted(architecture, tmp_path, tokenizer, one_thread
                                          ) -> None:
    import torch

    from biasscope.demo.tiny import save

    base = save(ARCHITECTURES[architecture](len(tokenizer)), tokenizer, tmp_path / "base")
    whole = _train(tmp_path / "whole", base, tokenizer)
    with pytest.raises(Killed):
        _train(tmp_path / "resumed", base, tokenizer, kill_at=2)
    assert (tmp_path / "resumed" / "train" / "arm" / "checkpoint-2").is_dir()
    resumed = _train(tmp_path / "resumed", base, tokenizer)
    assert set(resumed) == set(whole)
    changed = [k for k in whole if not torch.equal(whole[k], resumed[k])]
    assert changed == []
    assert _scores(tmp_path / "resumed").equals(_scores(tmp_path / "whole"))


def test_checkpoint_unlike_the_model_stops_the_resume(tmp_path, tokenizer, one_thread) -> None:
    from safetensors.torch import load_file, save_file

    from biasscope.core.errors import ModelError
    from biasscope.demo.tiny import save

    base = save(_neox(len(tokenizer)), tokenizer, tmp_path / "base")
    with pytest.raises(Killed):
        _train(tmp_path / "run", base, tokenizer, kill_at=2)
    weights = tmp_path / "run" / "train" / "arm" / "checkpoint-2" / "model.safetensors"
    tensors = load_file(str(weights))
    tensors["stray.weight"] = tensors.pop("embed_out.weight")
    save_file(tensors, str(weights), metadata={"format": "pt"})
    with pytest.raises(ModelError, match=r"checkpoint-2.*missing lm_head\.weight; "
                       r"unexpected stray\.weight"):
        _train(tmp_path / "run", base, tokenizer)
