"""Next-token probes in `biasscope audit` (Winogender): a local model scores them as a
checkpoint sweep does, a completions server from the echo of prompt + option (each option's
first token after the prompt), an option of several tokens only with --first-token, and
whatever cannot is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasscope.cli.main import main
from biasscope.probes import PROBES, load_probe
from biasscope.store.directory import RunStore
from winogender_fixture import Template, sentences, write_winogender

pytest.importorskip("torch")


def _unit(run: Path) -> pd.DataFrame:
    (frame,) = list(RunStore(run).iter_units())
    return frame


def _summary(run: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return out


def _one_line_refusal(code: int, capsys: pytest.CaptureFixture[str]) -> str:
    """The error line (after any progress lines, e.g. a model loading)."""
    lines = capsys.readouterr().err.splitlines()
    errors = [line for line in lines if line.startswith("biasscope: error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in lines, lines
    assert not any(line.startswith(" ") for line in lines), lines
    return errors[0]


def _sweep(data: Path, checkpoint: Path, out: Path) -> pd.DataFrame:
    """The records `biasscope dynamics --first-token` keeps for Winogender on a checkpoint."""
    from biasscope import sweep
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf import iter_scorers
    from biasscope.backends.hf_model import HFConfig
    from biasscope.dynamics.scoring import SweepConfig

    probe = load_probe("winogender", data_dir=data)
    store = sweep(probe, SweepConfig(from_dirs([checkpoint]), out, [0]),
                  lambda cks: iter_scorers(cks, HFConfig(first_token=True)), quiet=True)
    return pd.concat(list(store.iter_units()), ignore_index=True)


def test_a_local_audit_gives_the_sweeps_numbers_and_a_rerun_scores_nothing(
        tmp_path: Path, checkpoint_dirs: list[Path], capsys: pytest.CaptureFixture[str]
        ) -> None:
    data = write_winogender(tmp_path / "data")
    args = ["audit", "--model", f"hf:{checkpoint_dirs[0]}", "--probe", "winogender",
            "--data-dir", str(data), "--out", str(tmp_path / "run")]
    # The tiny tokenizer splits the occupations: refused as dynamics refuses them.
    err = _one_line_refusal(main(args), capsys)
    assert "tokens ['" in err
    assert "pass --first-token to score its first token" in err
    assert not list(RunStore(tmp_path / "run").iter_units())
    swept = _sweep(data, checkpoint_dirs[0], tmp_path / "sweep")
    assert main([*args, "--first-token"]) == 0
    audited = _unit(tmp_path / "run")
    both = swept.merge(audited, on="item_id", suffixes=("_sweep", "_audit"))
    assert len(both) == len(swept) == len(audited) == 48
    np.testing.assert_allclose(np.stack(both["option_logprobs_audit"]),
                               np.stack(both["option_logprobs_sweep"]), rtol=0, atol=1e-5)
    assert (both["target_rank_audit"] == both["target_rank_sweep"]).all()
    entry = _summary(tmp_path / "run")["probes"]["winogender"]
    info = PROBES["winogender"]
    assert entry["request"] == "next_token" and entry["sources"] == {"local": 48}
    assert entry["metrics"] == pytest.approx(info.unit_metrics(swept), abs=1e-6, nan_ok=True)
    values = info.step_statistics.values(swept)
    occupations = {k for k in values if k.startswith("occupation_")} - {
        "occupation_correlation"}  # per occupation: a table each, not 8 headline numbers
    assert len(occupations) == 8 and set(entry["headline"]) == set(values) - occupations
    rows = entry["tables"]["Winogender accuracy gap he − she per occupation"]
    assert {r["group"] for r in rows} == {"nurse", "driver", "clerk", "mechanic"}
    assert all(r["estimate"] == pytest.approx(values[f"occupation_gap:{r['group']}"][
        "estimate"], nan_ok=True) for r in rows)
    for name in set(values) - occupations:
        value = values[name]
        for key in ("estimate", "low", "high"):
            assert entry["headline"][name][key] == pytest.approx(value[key], abs=1e-6,
                                                                 nan_ok=True)
    assert all("p_holm" in v for v in entry["headline"].values() if v.get("p_value") is not None)
    scored = json.loads((tmp_path / "run" / "run.json").read_text())["scored"]
    assert scored["next_token"]["method"] == "local" and scored["next_token"]["first_token"]
    assert "Winogender accuracy" in (tmp_path / "run" / "report.html").read_text()
    assert main([*args, "--first-token"]) == 0
    assert _summary(tmp_path / "run")["requests"] == 0  # the unit is stored
    err = _one_line_refusal(main(args), capsys)  # another setting than the run's
    assert "first_token" in err


def test_first_token_without_a_next_token_probe_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "--model", "canned:A", "--probe", "professional-bias",
                 "--first-token", "--out", str(tmp_path / "run")])
    assert "--first-token is for next-token probes" in _one_line_refusal(code, capsys)
    assert not (tmp_path / "run").exists()




# --- through a completions server's echo ---------------------------------------------------

#: Occupations and participants that are single words of the tiny GGUF's vocabulary
#: (tests/llama_server.py); the rest of each sentence falls back to bytes, as unknown text does.
WORDED: list[Template] = [
    ("doctor", "nurse", 0, "The $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN was tired.",
     40.0),
    ("doctor", "nurse", 1, "The $OCCUPATION asked the $PARTICIPANT about $POSS_PRONOUN answer.",
     40.0),
    ("lawyer", "secretary", 0, "The $OCCUPATION said to the $PARTICIPANT that $NOM_PRONOUN "
     "was not done.", 30.0),
    ("lawyer", "secretary", 1, "The $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN was "
     "done.", 30.0),
]


def test_a_server_gives_each_options_first_token_log_prob(
        llama_server: Any, tiny_gguf: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """llama-cpp-python's server on the tiny exact GGUF: every option's log-prob after the
    prompt's last token ("▁the") is the numpy reference's, to 1e-5 (float32 logits); the
    summary is the probe's own facets on those records, with no vocabulary rank; a rerun
    sends nothing. "someone" is several tokens there: refused without --first-token, its
    first token's log-prob with it."""
    from llama_server import SPACE

    data = write_winogender(tmp_path / "data", templates=WORDED)
    args = ["audit", "--model", f"openai-compatible:{llama_server.base_url}#tiny",
            "--probe", "winogender", "--data-dir", str(data), "--concurrency", "2"]
    err = _one_line_refusal(main([*args, "--out", str(tmp_path / "refused")]), capsys)
    assert "option ' someone'" in err and "on this server; pass --first-token" in err
    assert not list(RunStore(tmp_path / "refused").iter_units())

    run = tmp_path / "run"
    assert main([*args, "--first-token", "--out", str(run)]) == 0
    records = _unit(run)
    assert len(records) == len(sentences(WORDED)) == 24 and "target_rank" not in records
    after = tiny_gguf.expected_logprobs(tiny_gguf.token_id(SPACE + "the"))
    for row in records.itertuples():
        first = "s" if row.participant == "someone" else row.participant  # "▁s": "someone"
        want = [after[tiny_gguf.token_id(SPACE + row.occupation)],
                after[tiny_gguf.token_id(SPACE + first)]]
        np.testing.assert_allclose(row.option_logprobs, want, rtol=0, atol=1e-5)
    entry = _summary(run)["probes"]["winogender"]
    info = PROBES["winogender"]
    assert entry["sources"] == {"echo": 24}
    nan = float("nan")  # summary.json writes NaN (two occupations: no correlation) as null
    assert {k: nan if v is None else v for k, v in entry["metrics"].items()} == pytest.approx(
        info.unit_metrics(records), nan_ok=True)
    values = info.step_statistics.values(records)
    assert {k: nan if v["estimate"] is None else v["estimate"] for k, v in
            entry["headline"].items()} == pytest.approx(
        {k: v["estimate"] for k, v in values.items() if not k.startswith(
            ("occupation_accuracy:", "occupation_gap:"))}, nan_ok=True)
    assert any("without its rank over the whole vocabulary" in s for s in entry["sentences"])
    assert json.loads((run / "run.json").read_text())["scored"]["next_token"]["method"] == "echo"
    assert main([*args, "--first-token", "--out", str(run)]) == 0
    assert _summary(run)["requests"] == 0


def test_named_participants_are_one_token_and_need_no_flag(
        llama_server: Any, tmp_path: Path) -> None:
    lines = [line for line in sentences(WORDED) if ".someone." not in line[0]]
    data = write_winogender(tmp_path / "data", lines, templates=WORDED)
    assert main(["audit", "--model", f"openai-compatible:{llama_server.base_url}#tiny",
                 "--probe", "winogender", "--data-dir", str(data), "--concurrency", "2",
                 "--out", str(tmp_path / "run")]) == 0
    assert len(_unit(tmp_path / "run")) == 12
