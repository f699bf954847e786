"""A small reward model for `make real-model`'s sensitivity step, trained here in about a minute.

Not a real preference model: a 2-layer, 64-wide GPT-NeoX sequence classifier with its own
byte-level BPE tokenizer, trained with the Bradley-Terry loss (chosen above rejected) on
hh-rlhf harmless-base test lines 1001-2500: its sanity check must use the other lines
(`biasscope sensitivity --sanity-lines 1-1000`), or it scores pairs it was trained on.
It shows the job end to end on real perturbations; its rewards say little about harm.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def _pairs(data_dir: Path | None, skip: int = 1000, n: int = 1500) -> list[tuple[str, str]]:
    root = data_dir or Path.home() / ".cache" / "biasscope" / "data"
    out = []
    with gzip.open(root / "hh-rlhf" / "harmless-base" / "test.jsonl.gz", "rt") as handle:
        for number, line in enumerate(handle):
            if number >= skip:
                row = json.loads(line)
                out.append((row["chosen"].strip(), row["rejected"].strip()))
            if len(out) == n:
                break
    return out


def train_reward_model(data_dir: Path | None, path: Path, steps: int = 300,
                       seed: int = 0, extra: list[tuple[str, str]] | None = None) -> Path:
    """Train and save the classifier at ``path`` (kept when already there); ``extra``
    (chosen, rejected) pairs join the hh-rlhf ones (a planted preference)."""
    if (path / "config.json").is_file():
        return path
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForSequenceClassification

    from biasscope.demo.tiny import save, train_tokenizer

    pairs = _pairs(data_dir) + list(extra or [])
    tokenizer = train_tokenizer([t for pair in pairs for t in pair], vocab_size=2000)
    torch.manual_seed(seed)
    config = GPTNeoXConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=256,
                           max_position_embeddings=512, num_labels=1,
                           pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    model = GPTNeoXForSequenceClassification(config)
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for step in range(steps):
        batch = [pairs[int(i)] for i in torch.randint(len(pairs), (16,), generator=generator)]
        texts = [t for pair in batch for t in pair]
        # Keep each text's end: the final response is what differs.
        ids = [tokenizer(t)["input_ids"][-256:] for t in texts]
        width = max(map(len, ids))
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(i)) + i for i in ids])
        mask = (torch.arange(width)[None, :] >= torch.tensor([width - len(i) for i in ids])[:,
                                                                                            None])
        rewards = model(input_ids=input_ids, attention_mask=mask.long()).logits[:, 0]
        loss = -torch.nn.functional.logsigmoid(rewards[0::2] - rewards[1::2]).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if step % 100 == 0 or step == steps - 1:
            print(f"reward model step {step}: loss {loss.item():.3f}", flush=True)
    model.eval()
    tokenizer.padding_side = "left"
    return save(model, tokenizer, path)
