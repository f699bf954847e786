"""Whole-sentence probes in `biasscope audit` (CrowS-Pairs, StereoSet): a local model scores
them as a checkpoint sweep does, a completions server from the echo of each sentence where it
gives every token's log-prob after the start token, and whatever cannot is refused in one
line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasscope.cli.main import main
from biasscope.probes import PROBES, load_probe
from biasscope.store.directory import RunStore
from crows_fixture import write_crows
from stereoset_fixture import write_stereoset
from winogender_fixture import write_winogender

pytest.importorskip("torch")


def _unit(run: Path, probe: str) -> pd.DataFrame:
    frames = [f for f in RunStore(run).iter_units() if f["probe"].iloc[0] == probe]
    assert len(frames) == 1
    return frames[0]


def _sweep(probe_name: str, data: Path, checkpoint: Path, out: Path) -> pd.DataFrame:
    """The records `biasscope dynamics` keeps for this probe and checkpoint."""
    from biasscope import sweep
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf import iter_scorers
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.scoring import SweepConfig

    probe = load_probe(probe_name, data_dir=data)
    store = sweep(probe, SweepConfig(from_dirs([checkpoint]), out, [0]),
                  lambda cks: iter_scorers(cks, HFConfig()), quiet=True)
    return pd.concat(list(store.iter_units()), ignore_index=True)


@pytest.mark.parametrize(("probe", "write"), [("crows-pairs", write_crows),
                                              ("stereoset", write_stereoset)])
def test_a_local_audit_gives_the_sweeps_numbers_and_a_rerun_scores_nothing(
        tmp_path: Path, checkpoint_dirs: list[Path], probe: str, write: Any) -> None:
    data = write(tmp_path / "data")
    swept = _sweep(probe, data, checkpoint_dirs[0], tmp_path / "sweep")
    args = ["audit", "--model", f"hf:{checkpoint_dirs[0]}", "--probe", probe,
            "--data-dir", str(data), "--out", str(tmp_path / "run")]
    assert main(args) == 0
    audited = _unit(tmp_path / "run", probe)
    both = swept.merge(audited, on="item_id", suffixes=("_sweep", "_audit"))
    assert len(both) == len(swept) == len(audited) > 0
    np.testing.assert_allclose(both["logprob_audit"], both["logprob_sweep"], rtol=0, atol=1e-5)
    assert (both["tokens_audit"] == both["tokens_sweep"]).all()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    entry = summary["probes"][probe]
    info = PROBES[probe]
    assert entry["metrics"] == pytest.approx(info.unit_metrics(swept), abs=1e-6)
    values = info.step_statistics.values(swept, 0.95, 2000)  # the audit's default resamples
    assert set(entry["headline"]) == set(values)
    for name, value in values.items():
        assert entry["headline"][name]["estimate"] == pytest.approx(value["estimate"], abs=1e-6)
        assert entry["headline"][name]["low"] == pytest.approx(value["low"], abs=1e-6)
    tested = [v for v in entry["headline"].values() if v.get("p_value") is not None]
    assert all("p_holm" in v for v in tested)  # one family with the probe's other tests
    assert entry["sources"] == {"local": len(audited)}
    assert json.loads((tmp_path / "run" / "run.json").read_text())["scored"]["continuation"][
        "method"] == \
        "local"
    report = (tmp_path / "run" / "report.html").read_text()
    assert next(iter(info.step_statistics.headline)) in report
    assert main(args) == 0  # the unit is stored: nothing is scored again
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["requests"] == 0


def test_crows_pairs_beside_an_asked_probe_and_added_later(tmp_path: Path,
                                                           checkpoint_dirs: list[Path]) -> None:
    """A run of option-scored probes gains a whole-sentence probe on a rerun (its scoring
    settings are recorded then) and a changed limit is still refused."""
    data = write_crows(tmp_path / "data")
    base = ["audit", "--model", f"hf:{checkpoint_dirs[0]}", "--data-dir", str(data),
            "--out", str(tmp_path / "run"), "--limit", "8"]
    assert main([*base, "--probe", "professional-bias"]) == 0
    assert main([*base, "--probe", "professional-bias,crows-pairs"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert set(summary["probes"]) == {"professional-bias", "crows-pairs"}
    assert summary["requests"] == 8  # the 4 pairs, 8 sentences; the other probe was stored


SCORED = [("crows-pairs", write_crows, "crows-pairs is scored from each whole sentence"),
          ("winogender", write_winogender,
           "winogender is scored from its options' log-probabilities")]


@pytest.mark.parametrize(("probe", "write", "what"), SCORED)
@pytest.mark.parametrize(("extra", "said"), [
    (["--model", "openai:gpt-4o-mini"], "OpenAI's API no longer returns"),
    (["--model", "canned:A"], "this backend does not give"),
    (["--model", "canned:A", "--scoring", "generate"], "generated text does not give"),
    (["--responses", "r.jsonl"], "a file of answers does not hold"),
])
def test_backends_that_cannot_score_are_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        probe: str, write: Any, what: str, extra: list[str], said: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "r.jsonl").write_text('{"item_id": "x", "response": "y"}\n')
    code = main(["audit", *extra, "--probe", probe, "--data-dir",
                 str(write(tmp_path / "data")), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert said in err and what in err
    assert "--model hf:DIR" in err
    assert not (tmp_path / "run").exists()


# --- through a completions server's echo ---------------------------------------------------

def _completion(tokens: list[str], values: list[float | None],
                tops: list[dict[str, float] | None]) -> Any:
    logprobs = SimpleNamespace(tokens=tokens, token_logprobs=values, top_logprobs=tops,
                               text_offset=list(range(len(tokens))))
    return SimpleNamespace(logprobs=logprobs, text="".join(tokens))


def test_a_server_that_echoes_the_start_token_scores_the_whole_sentence() -> None:
    """vLLM's echo: the start token with a null log-prob, then every sentence token with its
    own, then the one new token. The sum is over the sentence's tokens, all of them."""
    from biasscope.backends.echo import EchoScorer
    from biasscope.backends.openai_http import OpenAIGenerator

    scorer = EchoScorer(OpenAIGenerator("m", "http://127.0.0.1:9/v1", None,
                                        kind="openai-compatible"))
    tokens = ["<s>", "The", " nurse", " said", "."]
    values = [None, -3.0, -2.5, -1.0, -0.5]
    tops = [None, {"The": -3.0, "A": -3.1}, {" doctor": -1.0, " nurse": -2.5},
            {" said": -1.0}, {".": -0.5}]
    score = scorer._sentence("x", "The nurse said", (_completion(tokens, values, tops), 1))
    assert (score.logprob, score.tokens, score.greedy) == (-6.5, 3, False)
    tops[2] = {" nurse": -2.5}
    assert scorer._sentence("x", "The nurse said",
                            (_completion(tokens, values, tops), 1)).greedy


def test_a_server_that_returns_no_logprobs_is_refused_in_one_line() -> None:
    """A server that ignores ``echo`` and ``logprobs`` answers ``"logprobs": null``: the
    option cannot be scored, and the error says what to do instead of an AttributeError."""
    from biasscope.backends.echo import EchoScorer
    from biasscope.backends.openai_http import OpenAIGenerator
    from biasscope.core.errors import ModelError

    scorer = EchoScorer(OpenAIGenerator("m", "http://127.0.0.1:9/v1", None,
                                        kind="openai-compatible"))
    bare = SimpleNamespace(logprobs=None, text="The nurse said yes")
    with pytest.raises(ModelError, match=r"echoed no token offsets.*--scoring generate"):
        scorer._option_tokens("item 'x'", " yes", (bare, 1))


def test_a_server_that_nulls_the_first_sentence_token_is_refused(llama_server: Any,
                                                                 tiny_gguf: Any) -> None:
    """llama-cpp-python's server drops the start token from the echo and returns null for the
    first sentence token (its value after BOS is computed but hidden); every later token is
    the model's log-prob after BOS and the tokens before it. The probe is refused rather than
    summed without its first token."""
    from biasscope.backends.echo import EchoScorer
    from biasscope.backends.openai_http import OpenAIGenerator, run_sync
    from biasscope.core.errors import ModelError
    from biasscope.core.items import Item

    scorer = EchoScorer(OpenAIGenerator(llama_server.model, llama_server.base_url, None,
                                        kind="openai-compatible"))
    text = "The doctor said she"
    (echoed,) = run_sync(scorer._all([text]))
    choice, _ = echoed
    values = choice.logprobs.token_logprobs
    ids = tiny_gguf.encode_words(text)
    assert choice.logprobs.tokens[0] == " The" and values[0] is None
    want = [tiny_gguf.expected_logprobs(a)[b] for a, b in itertools.pairwise(ids[1:])]
    np.testing.assert_allclose(values[1:len(ids) - 1], want, atol=1e-5)
    item = Item(id="s", prompt="", options=("more",), continuations=(text,), answer=0)
    with pytest.raises(ModelError, match="no log-prob for the sentence's first token"):
        scorer.score_continuation([item])


def test_an_audit_through_that_server_stops_in_one_line_and_writes_no_unit(
        llama_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "--model", f"openai-compatible:{llama_server.base_url}#tiny",
                 "--probe", "crows-pairs", "--data-dir", str(write_crows(tmp_path / "data")),
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "llama-cpp-python's server returns null there" in err
    assert not list(RunStore(tmp_path / "run").iter_units())
