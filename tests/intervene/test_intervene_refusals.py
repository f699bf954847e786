"""An intervention call refused late leaves nothing it made: no empty ``train/<arm>/`` folder,
and an arm with nothing to train on is refused before the first arm trains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasscope.core.errors import BiasscopeError
from test_intervene_base_identity import _argv, _folder
from user_error import one_line

pytest.importorskip("torch")


def test_an_arm_with_nothing_to_train_on_is_refused_before_any_arm_trains(
        tmp_path, winobias_dir, tiny_tokenizer, monkeypatch, capsys) -> None:
    """Before: drop-gendered keeping only one-token documents was refused once the control arm
    had trained (minutes on a real model), in words that blamed --text, and left an empty
    ``train/drop-gendered/`` beside the control arm's results."""
    from biasscope.core.gender_swap import has_gendered
    from biasscope.demo.corpus import documents
    from biasscope.intervene import job

    gendered = [d.replace("\n", " ") for d in documents(20, bias=0.5, seed=0)]
    assert all(map(has_gendered, gendered))
    text = tmp_path / "text.txt"
    text.write_text("\n".join([*gendered, *"xyzxyz"]) + "\n")  # one token each
    trained: list[str] = []
    monkeypatch.setattr(job, "train_arm", lambda name, *a, **k: trained.append(name))
    out = tmp_path / "run"
    argv = [*_argv(out, _folder(tmp_path / "base", tiny_tokenizer, seed=0), text, winobias_dir),
            "--method", "drop-gendered"]
    line = one_line(capsys, argv, 2)
    assert "drop-gendered leaves no training document of --text two tokens long" in line
    assert trained == [] and not out.exists()


def test_an_arm_stopped_before_it_holds_training_leaves_no_folder(tmp_path: Path) -> None:
    """Before: an arm whose model did not load (or whose commit was refused once it had) left
    an empty ``train/<arm>/`` in the run (one made by this call; one there before stays)."""
    from biasscope.dynamics.live import LiveConfig
    from biasscope.intervene.train import OWNER, Training, train_arm
    from biasscope.store.directory import RunStore

    store = RunStore(tmp_path / "run")
    (store.root / "train" / "control").mkdir(parents=True)  # a finished control arm's
    (store.root / "train" / "kept").mkdir()

    def refused() -> None:
        raise BiasscopeError("the base's commit moved")

    for arm in ("cda", "kept"):
        with pytest.raises(BiasscopeError, match="commit moved"):
            train_arm(arm, ["a b c"], refused, None, [], store, Training(steps=2, every=2),
                      LiveConfig(), None, own={"arm": arm})
    assert sorted(p.name for p in (store.root / "train").iterdir()) == ["control", "kept"]
    assert not (store.root / "train" / "kept" / OWNER).exists()
    (store.root / "train" / "kept" / OWNER).write_text(json.dumps({"arm": "kept"}))
    with pytest.raises(BiasscopeError):  # an arm.json it found stays
        train_arm("kept", ["a b c"], refused, None, [], store, Training(steps=2, every=2),
                  LiveConfig(), None, own={"arm": "kept"})
    assert (store.root / "train" / "kept" / OWNER).is_file()
