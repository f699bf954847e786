from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from biasscope.backends.checkpoints import Checkpoint, from_dirs  # noqa: E402
from biasscope.backends.hf import HFScorer, iter_scorers  # noqa: E402
from biasscope.backends.hf_model import HFConfig  # noqa: E402
from biasscope.core.errors import ModelError  # noqa: E402
from biasscope.probes import load_probe  # noqa: E402


@pytest.fixture(scope="module")
def items(winobias_dir: Path):
    return load_probe("winobias-gender", data_dir=winobias_dir).items(0)


def reference(model, tokenizer, item):
    """One unpadded forward with the full logits: what the batched path must reproduce."""
    ids = torch.tensor([tokenizer(item.prompt)["input_ids"]])
    with torch.inference_mode():
        logits = model(ids).logits[0, -1].double()
    option_ids = [tokenizer(c, add_special_tokens=False)["input_ids"][0]
                  for c in item.continuations]
    logprobs = torch.log_softmax(logits, -1)[option_ids]
    target = logits[option_ids[item.answer]]
    return logprobs.tolist(), int((logits > target).sum()) + 1


def test_batched_scores_match_unpadded_reference(checkpoint_dirs, items):
    (scorer,) = list(iter_scorers(from_dirs(checkpoint_dirs[:1]), HFConfig(batch_size=7)))
    scores = scorer.score_next_token(items)
    assert len(scores) == len(items)
    for item, score in zip(items, scores):
        logprobs, rank = reference(scorer.model, scorer.tokenizer, item)
        assert score.option_logprobs == pytest.approx(logprobs, abs=2e-5)
        assert score.target_rank == rank


def test_batch_size_does_not_change_results(checkpoint_dirs, items):
    one = next(iter_scorers(from_dirs(checkpoint_dirs[:1]), HFConfig(batch_size=1)))
    many = HFScorer(one.ckpt, one.model, one.tokenizer, HFConfig(batch_size=64))
    a, b = one.score_next_token(items), many.score_next_token(items)
    assert [s.target_rank for s in a] == [s.target_rank for s in b]
    for x, y in zip(a, b):
        assert x.option_logprobs == pytest.approx(y.option_logprobs, abs=2e-5)


def test_scorers_follow_checkpoint_order_and_share_encodings(checkpoint_dirs, items):
    scorers = list(iter_scorers(from_dirs(reversed(checkpoint_dirs)), HFConfig()))
    assert [s.ckpt.step for s in scorers] == [10, 20, 30]
    assert len({id(s.encodings) for s in scorers}) == 1
    first = scorers[0].score_next_token(items[:4])
    last = scorers[2].score_next_token(items[:4])
    assert first != last  # different weights, different scores


def test_multi_token_option_is_an_error_unless_first_token(checkpoint_dirs, items):
    (scorer,) = list(iter_scorers(from_dirs(checkpoint_dirs[:1]), HFConfig()))
    odd = replace(items[0], continuations=(" male", " female", " notspecifiedzz"))
    with pytest.raises(ModelError, match=r"' notspecifiedzz' is \d+ tokens .*--first-token"):
        scorer.score_next_token([odd])
    lenient = HFScorer(scorer.ckpt, scorer.model, scorer.tokenizer, HFConfig(first_token=True))
    (score,) = lenient.score_next_token([odd])
    assert len(score.option_logprobs) == 3


def test_nan_logits_name_the_checkpoint(checkpoint_dirs, items):
    (scorer,) = list(iter_scorers(from_dirs(checkpoint_dirs[:1]), HFConfig()))
    broken = HFScorer(scorer.ckpt, scorer.model, scorer.tokenizer, HFConfig())
    weight = scorer.model.get_output_embeddings().weight
    saved = weight.detach().clone()
    try:
        with torch.no_grad():
            weight[0, 0] = float("nan")
        with pytest.raises(ModelError, match=r"checkpoint .*checkpoint-10 produced NaN/inf"):
            broken.score_next_token(items[:3])
    finally:
        with torch.no_grad():
            weight.copy_(saved)


def test_missing_checkpoint_is_a_model_error(tmp_path):
    (tmp_path / "checkpoint-5").mkdir()
    (tmp_path / "checkpoint-5" / "config.json").write_text("{}")
    with pytest.raises(ModelError, match=r"cannot load .*checkpoint-5"):
        list(iter_scorers(from_dirs([tmp_path / "checkpoint-5"]), HFConfig()))


def test_prefetch_reads_each_checkpoint_in_the_background_before_its_turn(checkpoint_dirs,
                                                                         monkeypatch):
    """The weight files are read (read_ahead) and every weight page touched (fault_in) in the
    prefetch thread, before the caller gets that checkpoint's scorer."""
    import threading

    import biasscope.backends.hf as hf

    events: list[tuple[str, str, str]] = []
    real_read, real_fault = hf.read_ahead, hf.fault_in

    def read(ckpt):
        events.append(("read", Path(ckpt.source).name, threading.current_thread().name))
        real_read(ckpt)

    def fault(model):
        events.append(("fault", "", threading.current_thread().name))
        real_fault(model)

    monkeypatch.setattr(hf, "read_ahead", read)
    monkeypatch.setattr(hf, "fault_in", fault)
    for scorer in iter_scorers(from_dirs(checkpoint_dirs), HFConfig(device="cpu")):
        events.append(("yield", Path(scorer.ckpt.source).name, ""))
    names = [p.name for p in checkpoint_dirs]
    background = [e for e in events if e[0] in ("read", "fault")]
    assert len(background) == 2 * len(names)
    assert all(thread.startswith("biasscope-prefetch") for _, _, thread in background)
    for name in names:
        assert events.index(("yield", name, "")) > next(
            i for i, e in enumerate(events) if e[:2] == ("read", name))
    hf.read_ahead(Checkpoint("m", "org/not-a-local-dir"))  # not in the hub cache: no-op


@pytest.mark.parametrize("sendfile", [True, False])
def test_read_through_reads_every_byte_from_disk(tmp_path, monkeypatch, sendfile):
    """Both paths (sendfile to /dev/null, and plain reads where there is no sendfile) pull
    the whole file from the block device. Needs root to drop the page cache first."""
    import os
    import re

    import biasscope.backends.weights as weights

    drop = Path("/proc/sys/vm/drop_caches")
    if os.geteuid() != 0 or not os.access(drop, os.W_OK):
        pytest.skip("dropping the page cache needs root")
    path = tmp_path / "model.safetensors"
    path.write_bytes(os.urandom(8 << 20))
    if not sendfile:
        monkeypatch.delattr(os, "sendfile")

    def read_bytes() -> int:
        return int(re.search(r"read_bytes:\s*(\d+)", Path("/proc/self/io").read_text())[1])

    os.sync()
    drop.write_text("1\n")
    before = read_bytes()
    with open(os.devnull, "wb") as sink:
        weights._read_through(path, sink.fileno())
    assert read_bytes() - before >= 8 << 20


@pytest.mark.parametrize("sharded", [False, True])
def test_read_ahead_finds_a_hub_revision_in_the_local_hub_cache(tmp_path, monkeypatch, sharded):
    """Hub ids are read ahead from huggingface_hub's cache layout (refs/<revision> -> snapshot),
    single-file and sharded; a revision not in the cache reads nothing."""
    import json

    import huggingface_hub.constants

    import biasscope.backends.weights as weights

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "step1000").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"] \
        if sharded else ["model.safetensors"]
    for name in names:
        (snapshot / name).write_bytes(b"\0" * 64)
    if sharded:
        (snapshot / "model.safetensors.index.json").write_text(json.dumps(
            {"weight_map": {"a.weight": names[0], "b.weight": names[1], "c.weight": names[1]}}))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    read: list[Path] = []
    monkeypatch.setattr(weights, "_read_through", lambda path, sink: read.append(Path(path)))

    weights.read_ahead(Checkpoint("tiny", "org/tiny", "step1000"))
    assert [p.name for p in read] == names
    read.clear()
    weights.read_ahead(Checkpoint("tiny", "org/tiny", "step2000"))  # not downloaded yet
    assert read == []
