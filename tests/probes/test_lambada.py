from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasscope.core.errors import DataError
from biasscope.probes import load_probe

PASSAGES = [
    "The designer argued with the developer and slapped him in the face. Question: the face",
    "Options: male, female, not specified. The nurse said she would help the nurse",
    "The mechanic gave the clerk a present and wished her happy birthday",
]


def write_lambada(root: Path, lines: list[str]) -> Path:
    (root / "lambada").mkdir(parents=True, exist_ok=True)
    (root / "lambada" / "lambada_test.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_items_split_the_last_word(tmp_path):
    probe = load_probe("lambada", data_dir=write_lambada(
        tmp_path, [json.dumps({"text": t}) for t in PASSAGES]))
    items = probe.items(0)
    assert [it.id for it in items] == ["lambada:0001", "lambada:0002", "lambada:0003"]
    assert items[2].prompt.endswith("wished her happy") and items[2].continuations == (
        " birthday",)
    assert probe.seeded is False and probe.requests == ("continuation",)


BAD_LINES = ["not json", json.dumps({"txt": "a b"}), json.dumps({"text": "x"})]


@pytest.mark.parametrize("line", BAD_LINES)
def test_malformed_line_names_file_and_line(tmp_path, line):
    root = write_lambada(tmp_path, [json.dumps({"text": "fine line"}), line])
    with pytest.raises(DataError, match=r"lambada_test\.jsonl:2: "):
        load_probe("lambada", data_dir=root)


def test_continuation_scores_match_an_unpadded_forward(tmp_path, checkpoint_dirs):
    torch = pytest.importorskip("torch")
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf import iter_scorers
    from biasscope.backends.hf_model import HFConfig

    probe = load_probe("lambada", data_dir=write_lambada(
        tmp_path, [json.dumps({"text": t}) for t in PASSAGES]))
    items = probe.items(0)
    (scorer,) = list(iter_scorers(from_dirs(checkpoint_dirs[:1]), HFConfig(batch_size=2)))
    scores = scorer.score_continuation(items)
    for item, score in zip(items, scores):
        context = scorer.tokenizer(item.prompt)["input_ids"]
        target = scorer.tokenizer(item.continuations[0], add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            logits = scorer.model(torch.tensor([context + target])).logits[0].double()
        logprobs = torch.log_softmax(logits, -1)[len(context) - 1: -1]
        expected = sum(float(logprobs[i, t]) for i, t in enumerate(target))
        greedy = all(int(logprobs[i].argmax()) == t for i, t in enumerate(target))
        assert score.logprob == pytest.approx(expected, abs=1e-4)
        assert (score.greedy, score.tokens) == (greedy, len(target))


def test_sweep_runs_performance_probe_once_per_checkpoint(tmp_path, checkpoint_dirs, winobias_dir):
    pytest.importorskip("torch")
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.dynamics.scoring.sweep import run_dynamics

    data = write_lambada(tmp_path / "data", [json.dumps({"text": t}) for t in PASSAGES])
    probes = [load_probe("winobias-gender", data_dir=winobias_dir),
              load_probe("lambada", data_dir=data)]
    store = run_dynamics(probes, from_dirs(checkpoint_dirs), tmp_path / "run", seeds=[0, 1],
                         quiet=True)
    records = store.records()
    assert len(records[records["probe"] == "lambada"]) == 3 * len(PASSAGES)  # seed 0 only
    summary = json.loads(store.summary_json.read_text())["checkpoints"]
    lam = [c for c in summary if c["probe"] == "lambada"]
    assert [c["step"] for c in lam] == [10, 20, 30] and lam[0]["seeds"] == [0]
    assert 0.0 <= lam[0]["mean"]["accuracy"] <= 1.0 and lam[0]["mean"]["perplexity"] > 1.0


def test_dynamics_with_lambada_performance(tmp_path: Path, checkpoint_dirs, winobias_dir,
                                           one_thread) -> None:
    """``--performance lambada`` loads the probe without the ``text`` option perplexity:FILE
    gives, which lambada now refuses as an unknown option."""
    pytest.importorskip("torch")
    import shutil

    from biasscope.dynamics import job

    data = shutil.copytree(winobias_dir, tmp_path / "data")
    write_lambada(data, [json.dumps({"text": t}) for t in PASSAGES])
    result = job.run(job.DynamicsConfig(
        out=tmp_path / "run", checkpoint_globs=[str(checkpoint_dirs[0].parent / "checkpoint-*")],
        seeds=[0], limit=8, data_dir=str(data), quiet=True,
        performance=job.Performance("lambada")))
    summary = json.loads(result.store.summary_json.read_text())
    assert [c["step"] for c in summary["checkpoints"] if c["probe"] == "lambada"] == [10, 20, 30]
