"""A dynamics sweep loads and tries every checkpoint's tokenizer before it scores the first: a
later checkpoint without tokenizer files, or whose tokenizer splits an option into several
tokens, was refused only after the checkpoints before it were scored (an hour into a long
sweep), the first in words that named no checkpoint. No weights load for the check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import no_loads
from user_error import one_line

pytest.importorskip("torch")


def _copies(checkpoint_dirs: list[Path], where: Path) -> Path:
    for ckpt in checkpoint_dirs:
        shutil.copytree(ckpt, where / ckpt.name)
    return where / "checkpoint-30"


def _argv(where: Path, data: Path, out: Path) -> list[str]:
    return ["dynamics", "--checkpoint-glob", str(where / "checkpoint-*"), "--data-dir",
            str(data), "--seeds", "0", "--limit", "8", "--quiet", "--out", str(out)]


@pytest.mark.parametrize("tokenizer", ["missing", "other"])
def test_a_later_checkpoint_s_tokenizer_is_refused_before_any_weights_load(
        checkpoint_dirs, winobias_dir, tmp_path, monkeypatch, capsys, tokenizer) -> None:
    from biasscope.backends import hf
    from biasscope.demo.tiny import train_tokenizer

    last = _copies(checkpoint_dirs, tmp_path / "train")
    for path in last.iterdir():
        if path.name.startswith("tokenizer"):
            path.unlink()
    if tokenizer == "other":  # a word-piece vocabulary without the options' words
        train_tokenizer(["a b c d e f g"] * 20, vocab_size=40).save_pretrained(last)
        said = ("option ' male' is 5 tokens ['Ġ', 'm', 'a', 'l', 'e'] for the tokenizer of "
                "train@checkpoint-30; pass --first-token")
    else:
        said = (f"prompt tokenizes to nothing: 'The teacher asked the physician about the "
                f"best course of act'; {last} holds no tokenizer files (tokenizer.json, "
                "tokenizer_config.json): copy them from the model's source")
    loads = no_loads.loads_counted(monkeypatch, hf, fail=True)
    out = tmp_path / "run"
    line = one_line(capsys, _argv(tmp_path / "train", winobias_dir, out), 2)
    assert said in line and "train@checkpoint-30" in line, line
    assert loads == [] and not out.exists()


def test_checked_tokenizers_are_the_ones_the_scoring_uses(checkpoint_dirs, winobias_dir,
                                                         tmp_path, monkeypatch) -> None:
    """Three checkpoints of one tokenizer: it loads once, in the check."""
    from biasscope.backends import hf
    from biasscope.cli.main import main

    real = hf.load_tokenizer
    loaded: list[str] = []
    monkeypatch.setattr(hf, "load_tokenizer", lambda c, *a: loaded.append(c.label) or real(c, *a))
    assert main(_argv(checkpoint_dirs[0].parent, winobias_dir, tmp_path / "run")) == 0
    assert len(loaded) == 1
