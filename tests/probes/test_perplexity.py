"""The perplexity probe: ETHICS-format CSV (multi-line quoted fields) and own text files, the
held-out split disjoint by document id, scores equal to a direct forward pass, and
``dynamics --performance perplexity:FILE``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from biasscope.core.errors import DataError
from biasscope.probes import load_probe
from biasscope.probes.perplexity import (
    Document,
    held_out,
    load_documents,
    perplexity,
    perplexity_interval,
    split,
)
from ethics_fixture import write_ethics


def test_ethics_csv_with_multiline_fields(tmp_path: Path) -> None:
    docs, name = load_documents(None, write_ethics(tmp_path))
    assert name == "ethics-commonsense" and len(docs) == 42
    assert docs[1].id == "ethics:0002" and docs[1].text.startswith("AITA for this?\n\nMy")
    assert '"can you help"' in docs[1].text


def test_own_text_files(tmp_path: Path) -> None:
    lines = tmp_path / "docs.txt"
    lines.write_text("first doc here\n\nsecond doc\n")
    docs, name = load_documents(lines)
    assert [d.id for d in docs] == ["docs.txt:1", "docs.txt:3"] and name == str(lines)
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(json.dumps({"text": "a b c"}) + "\n" + json.dumps({"txt": "x"}) + "\n")
    with pytest.raises(DataError, match=r"docs\.jsonl:2: expected a JSON object"):
        load_documents(jsonl)
    with pytest.raises(DataError, match="does not exist"):
        load_documents(tmp_path / "nope.txt")


def test_split_is_disjoint_by_id_and_stable() -> None:
    docs = [Document(f"d{i}", f"text {i}") for i in range(500)]
    train, out = split(docs, 0.2, seed=3)
    assert not {d.id for d in train} & {d.id for d in out}
    assert len(train) + len(out) == 500 and 60 < len(out) < 140
    # keyed by the id alone: order and the other documents do not matter
    again = split(list(reversed(docs[:250])), 0.2, seed=3)[1]
    assert {d.id for d in again} == {d.id for d in out if int(d.id[1:]) < 250}
    assert split(docs, 0.2, seed=4)[1] != out
    assert all(held_out(d.id, 0.2, 3) for d in out)
    with pytest.raises(DataError, match="repeat"):
        split([Document("a", "x"), Document("a", "y")], 0.5)
    with pytest.raises(DataError, match=r"leave one side empty: give more documents \(--text\) "
                       "or another --held-out"):
        split(docs[:3], 0.0001)


def test_probe_items_and_default_split(tmp_path: Path) -> None:
    probe = load_probe("perplexity", data_dir=write_ethics(tmp_path), max_words=5)
    items = probe.items(0)
    assert 0 < len(items) < 42  # the pinned text: its held-out 10% only
    assert all(len((it.prompt + it.continuations[0]).split()) <= 5 for it in items)
    assert probe.config()["corpus"] == "ethics-commonsense"
    own = tmp_path / "held.txt"
    own.write_text("one two three\nfour five six\n")
    assert len(load_probe("perplexity", text=own).items(0)) == 2  # own text: all of it


def test_perplexity_and_interval() -> None:
    lp, n = np.array([-10.0, -20.0, -5.0]), np.array([5, 10, 5])
    assert perplexity(lp, n) == pytest.approx(math.exp(35 / 20))
    ci = perplexity_interval(lp, n, n_resamples=500)
    assert ci.low <= ci.estimate <= ci.high


def test_dynamics_with_perplexity_file(tmp_path: Path, checkpoint_dirs, winobias_dir,
                                       one_thread) -> None:
    pytest.importorskip("torch")
    from biasscope.dynamics import job

    held = tmp_path / "held.txt"
    held.write_text("the nurse said that she was tired\nthe man helped his father today\n")
    result = job.run(job.DynamicsConfig(
        out=tmp_path / "run", checkpoint_globs=[str(checkpoint_dirs[0].parent / "checkpoint-*")],
        seeds=[0], limit=8, data_dir=str(winobias_dir), quiet=True,
        performance=job.Performance(f"perplexity:{held}")))
    summary = json.loads(result.store.summary_json.read_text())
    ppl = [c for c in summary["checkpoints"] if c["probe"] == "perplexity"]
    assert [c["step"] for c in ppl] == [10, 20, 30]
    assert all(c["mean"]["perplexity"] > 1 for c in ppl)
    perf = summary["analysis"]["models"]
    assert any((m.get("performance") or {}).get("source") == "1 / held-out perplexity"
               for m in perf.values())
