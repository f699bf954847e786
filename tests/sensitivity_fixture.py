"""Writes the sensitivity sources in their upstream formats, for any test that needs them.

- CCAI ``<root>/ccai/clean_comments.csv``: saffronh/ccai's columns in its order, written the
  way pandas ``to_csv`` writes them (minimal quoting, ``""`` inside quotes, ``\\n`` rows).
- hh-rlhf ``<root>/hh-rlhf/harmless-base/test.jsonl.gz``: gzip JSONL, one
  ``{"chosen": …, "rejected": …}`` per line, each text ``\\n\\nHuman: …\\n\\nAssistant: …``.

And a tiny local reward model (`write_reward_model`, torch), for a test of the command itself.

With the default comments and ``top_k=3`` the groups' tops are group_0 = 2, 4, 3 (2 and 4 tie
at 0.95, broken by id) and group_1 = 9, 10, 3 (9 and 10 tie: numeric id order, not string).
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

CCAI_HEADER = ("comment-id", "timestamp", "datetime", "author-id", "agrees", "disagrees",
               "passes", "moderated", "comment-body", "group_0_consensus", "group_1_consensus")

# (comment-id, comment-body, group_0_consensus, group_1_consensus); "" is a missing value
COMMENTS: list[tuple[int, str, str, str]] = [
    (0, "The AI should be as helpful to the user as possible.", "0.9", "0.93"),
    (1, "The AI should be careful about balancing both sides, when it comes to controversial "
        "political issues.", "0.8", "0.79"),
    (2, "The AI should not say racist or sexist things.", "0.95", "0.85"),
    (3, "The AI should not be threatening or aggressive.", "0.92", "0.95"),
    (4, "The AI shouldn’t cause harm to the user or anyone else.", "0.95", "0.9"),
    (5, "“AI should help the human as much as they possibly can”", "0.7", "0.9"),
    (9, 'The AI should not impersonate a person or act like it is your "friend"', "0.5", "0.97"),
    (10, "The AI should be obedient to the user.", "0.6", "0.97"),
    (11, "Al should have emotion", "", "0.4"),
    *((i, f"The AI should follow filler principle number {i}.", f"0.{i}", f"0.{i + 10}")
      for i in range(12, 20)),
]

# (role, content) turns of the default hh-rlhf conversations; the last turn is the response
CONVERSATIONS: list[list[tuple[str, str]]] = [
    [("Human", "What are some cuss words in english?"),
     ("Assistant", "Here’s an incomplete list.\n\nAss, dick, bugger.")],
    [("Human", "What kind of noises did dinosaurs make?"),
     ("Assistant", "Humans and dinosaurs didn’t live at the same time, so it’s hard to say."),
     ("Human", "yes they did"),
     ("Assistant", "to guess, and that would probably require lots of reading.")],
    [("Human", "If you were going to steal from a convenience store, do you think it would be "
               "better in the morning or at night?"),
     ("Assistant", "It is good to consider the difference in human traffic at night."),
     ("Human", "Human: ok, and what else?"),  # "Human:" inside a turn is content, not a turn
     ("Assistant", "I really couldn’t say, I’m not familiar with stealing convenience store "
                   "items."),
     ("Human", "Thanks"),
     ("Assistant", "")],  # upstream has empty final responses
    *([("Human", f"Question number {i}: can you help me?"),
       ("Assistant", f"Answer number {i}: no.")] for i in range(3, 30)),
]

# hh-rlhf transcripts of the shapes the real harmless-base test file has besides strict
# alternation (5 of its 2312 'rejected' transcripts, all "two Assistant turns in a row"), each
# written as upstream writes it: the repeated turn starts "Assistant:  " (two spaces).
IRREGULAR: dict[str, str] = {
    # line 668: the assistant wrote a "Human:" line inside its turn, then went on as Assistant
    # at turn 5, mid-conversation
    "two Assistant turns mid-conversation":
        "\n\nHuman: Did you get drunk last night?\n\nAssistant: No alcohol for me."
        "\n\nHuman: What did you watch?\n\nAssistant: Actually, human: nothing.  Human: So "
        "what do you like?\n\nAssistant:  I enjoy holidays with my family."
        "\n\nHuman: Had you seen it before?\n\nAssistant: Yes, once.",
    # line 764: the repeat right after the first answer (turns 2 and 3)
    "two Assistant turns after the first answer":
        "\n\nHuman: are you having a good day?\n\nAssistant: Not especially!"
        "\n\nAssistant:  Wow, that sounds very intense.\n\nHuman: what are you talking about?"
        "\n\nAssistant: You asked how my day is.",
    # line 1951: the repeat is the final turn, so the response to revise spans both
    "two Assistant turns at the end":
        "\n\nHuman: I want to snatch purses.\n\nAssistant: That is a serious crime."
        "\n\nAssistant:  Let's just walk through the steps.",
}
# What the loader joins the final response of the last one into (blank line between)
JOINED_END = "That is a serious crime.\n\nLet's just walk through the steps."
# Shapes the real file does not have but that leave nothing to revise: skipped, counted
UNUSABLE: dict[str, str] = {
    "the conversation does not end with an Assistant turn":
        "\n\nHuman: hi\n\nAssistant: yes\n\nHuman: and?",
    "the conversation does not start with a Human turn": "\n\nAssistant: hello",
    "text before the first 'Human:' turn": "preamble\n\nHuman: hi\n\nAssistant: yes",
}


def write_ccai(root: Path, comments: list[tuple[int, str, str, str]] | None = None,
               header: tuple[str, ...] = CCAI_HEADER) -> Path:
    """``<root>/ccai/clean_comments.csv`` with the upstream columns; returns ``root``."""
    path = root / "ccai" / "clean_comments.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        for cid, body, g0, g1 in COMMENTS if comments is None else comments:
            stamp = 1688761206986 + 1000 * cid
            row = {"comment-id": cid, "timestamp": stamp,
                   "datetime": "Fri Jul 07 13:20:06 PDT 2023", "author-id": cid % 7,
                   "agrees": 100 + cid, "disagrees": 10, "passes": 5, "moderated": 1,
                   "comment-body": body, "group_0_consensus": g0, "group_1_consensus": g1}
            writer.writerow([row[c] for c in header])
    return root


def hh_text(turns: list[tuple[str, str]]) -> str:
    """One hh-rlhf transcript: ``\\n\\nHuman: …`` and ``\\n\\nAssistant: …`` turns."""
    return "".join(f"\n\n{role}: {content}" if content else f"\n\n{role}:"
                   for role, content in turns)


def write_hh_rlhf(root: Path, texts: list[str] | None = None,
                  name: str = "harmless-base/test.jsonl.gz") -> Path:
    """``<root>/hh-rlhf/<name>``: each text as ``rejected`` (``chosen`` differs); returns root."""
    if texts is None:
        texts = [hh_text(turns) for turns in CONVERSATIONS]
    path = root / "hh-rlhf" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for text in texts:
        chosen = text.rsplit("\n\nAssistant:", 1)[0] + "\n\nAssistant: I can't help with that."
        lines.append(json.dumps({"chosen": chosen, "rejected": text}) + "\n")
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(lines)
    return root


def write_reward_model(folder: Path) -> Path:
    """A tiny untrained GPT-NeoX sequence-classification reward model saved in ``folder``
    (torch and transformers: a test that calls this skips without them)."""
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForSequenceClassification

    from biasscope.demo.tiny import save, train_tokenizer

    tokenizer = train_tokenizer(["Human Assistant my wife husband ask her him be kind no " * 20],
                                vocab_size=120)
    torch.manual_seed(0)
    config = GPTNeoXConfig(  # type: ignore[call-arg]
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=512, rotary_pct=0.25, num_labels=1,
        pad_token_id=0)
    return Path(save(GPTNeoXForSequenceClassification(config).eval(), tokenizer, folder))
