"""CrowS-Pairs: the pairs as the upstream CSV has them, its numbers exactly as
lm-evaluation-harness's ``crows_pairs`` task logic computes them (re-derived here from a plain
forward and log-softmax: empty context = the start token, ``[sent_more, sent_less]`` as
choices, no target delimiter), and its statistics over a sweep's checkpoints."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasscope.core.errors import DataError
from biasscope.probes import load_probe
from biasscope.probes.crows_pairs import crows_metrics, pairs
from biasscope.probes.crows_pairs.steps import crows_values
from biasscope.store.directory import RunStore
from crows_fixture import PAIRS, REVISED, csv_text, revised_text, write_crows


def test_pairs_are_read_as_the_csv_has_them(tmp_path: Path) -> None:
    probe = load_probe("crows-pairs", data_dir=write_crows(tmp_path))
    items = probe.items(0)
    assert len(items) == 2 * len(PAIRS) and probe.seeded is False  # type: ignore[attr-defined]
    more, less = items[4], items[5]
    assert more.id == "crows-pairs:0002:more" and less.id == "crows-pairs:0002:less"
    assert more.prompt == "" and more.continuations == (PAIRS[2][0],)  # quotes and commas kept
    assert dict(more.groups) == {"pair": 2, "bias_type": "gender", "direction": "antistereo",
                                 "sentence": "more"}
    kept = probe.limited(items, 6)  # type: ignore[attr-defined]
    assert len(kept) == 6 and {i.groups["pair"] for i in kept} == {
        i.groups["pair"] for i in kept if i.groups["sentence"] == "less"}


def test_the_revised_version_is_read_as_its_file_has_it(tmp_path: Path) -> None:
    root = write_crows(tmp_path, revised=revised_text())
    original = load_probe("crows-pairs", data_dir=root)
    probe = load_probe("crows-pairs", data_dir=root, version=["revised"])
    items = probe.items(0)
    assert len(items) == 2 * len(REVISED)
    assert [i.id for i in items[6:8]] == ["crows-pairs:0004:more", "crows-pairs:0004:less"]
    assert items[6].groups["pair"] == "0004"  # one type in the column: LA1 is text
    new = items[-2]
    assert new.id == "crows-pairs:LA1:more" and new.continuations == (REVISED[-1][1][0],)
    assert dict(new.groups) == {"pair": "LA1", "bias_type": "autre", "direction": "antistereo",
                                "sentence": "more"}
    assert probe.config()["version"] == "revised (crows_pairs_EN_revised+210.csv)"
    assert "version" not in original.config()  # an original run resumes as before
    kept = probe.limited(items, 4)  # type: ignore[attr-defined]
    assert len(kept) == 4 and len({i.groups["pair"] for i in kept}) == 2
    with pytest.raises(DataError, match=r"^crows-pairs:draft: name one version, "
                                        r"crows-pairs:original \(the default\) or "):
        load_probe("crows-pairs", data_dir=root, version=["draft"])
    # The revised file read as the original (commas) has none of its columns.
    with pytest.raises(DataError, match="expected the CrowS-Pairs columns"):
        load_probe("crows-pairs", data_dir=write_crows(tmp_path / "swapped",
                                                        text=revised_text()))


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace(",stereo,age,", ",maybe,age,"), r"csv:5: stereo_antistereo is 'maybe'"),
    (lambda t: t.replace("Asians are good at math.", ""), r"csv:6: empty 'sent_more'"),
    (lambda t: t.replace("sent_less", "other"), r"expected the CrowS-Pairs columns"),
])
def test_a_bad_row_names_file_line_and_field(tmp_path: Path, edit: Any, message: str) -> None:
    root = write_crows(tmp_path, edit(csv_text()))
    with pytest.raises(DataError, match=message):
        load_probe("crows-pairs", data_dir=root)


def harness(model: Any, tokenizer: Any, sentence: str) -> float:
    """lm-evaluation-harness's log-likelihood of a sentence with an empty context: the
    continuation's ids without special tokens after the prefix token (BOS, else EOS), or the
    first id as the context when it already is that token; summed log-softmax."""
    import torch

    prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else \
        tokenizer.eos_token_id
    cont = tokenizer.encode(sentence, add_special_tokens=False)
    context, cont = ([prefix], cont) if cont[0] != prefix else (cont[:1], cont[1:])
    ids = torch.tensor([context + cont])
    with torch.inference_mode():
        logp = torch.log_softmax(model(ids).logits[0].double(), dim=-1)
    at = torch.arange(len(context) - 1, ids.shape[1] - 1)
    return float(logp[at, ids[0, len(context):]].sum())


def test_a_sweep_gives_the_harness_numbers(tmp_path: Path, checkpoint_dirs: list[Path],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from biasscope import sweep
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf import iter_scorers
    from biasscope.backends.hf_model import HFConfig, load_model, load_tokenizer
    from biasscope.dynamics.analysis.config import AnalysisConfig
    from biasscope.dynamics.scoring import SweepConfig
    from biasscope.dynamics.summary.build import full_summary

    probe = load_probe("crows-pairs", data_dir=write_crows(tmp_path / "data"))
    checkpoints = from_dirs(checkpoint_dirs[:2])
    options = HFConfig(batch_size=4)
    store = sweep(probe, SweepConfig(checkpoints, tmp_path / "run", [0]),
                  lambda cks: iter_scorers(cks, options), quiet=True)
    assert "no prefix reuse" not in capsys.readouterr().err  # the shared-prefix path ran
    summary = json.loads(Path(store.root, "summary.json").read_text())
    for checkpoint, entry in zip(checkpoints, summary["checkpoints"]):
        model, tokenizer = load_model(checkpoint, options), load_tokenizer(checkpoint, options)
        lls = [(harness(model, tokenizer, m), harness(model, tokenizer, le))
               for m, le, _, _ in PAIRS]
        # lm-evaluation-harness's process_results, then the mean over documents.
        diff = np.mean([abs(a - b) for a, b in lls])
        pct = np.mean([1.0 if a > b else 0.0 for a, b in lls])
        assert entry["mean"]["pct_stereotype"] == pytest.approx(pct, abs=1e-12)
        assert entry["mean"]["likelihood_diff"] == pytest.approx(diff, abs=1e-4)
    assert 0 < summary["checkpoints"][0]["mean"]["pct_stereotype"] < 1  # not all alike
    model0, tokenizer0 = (load_model(checkpoints[0], options),
                          load_tokenizer(checkpoints[0], options))
    analysis = full_summary(store, AnalysisConfig(n_resamples=100))["analysis"]
    values = analysis["probes"]["crows-pairs"]["models"][checkpoints[0].model][
        "checkpoints"][0]["values"]
    assert {"pct_stereotype", "direction:stereo", "direction:antistereo",
            "pct_stereotype:gender", "difference_q50", "token_difference",
            "likelihood_diff:gender"} <= set(values)
    # Per bias type as the harness's crows_pairs_english_<type> tasks: the same mean of
    # absolute differences over that type's pairs.
    for bias_type in {b for _, _, _, b in PAIRS}:
        lls = [(harness(model0, tokenizer0, m), harness(model0, tokenizer0, le))
               for m, le, _, b in PAIRS if b == bias_type]
        assert values[f"likelihood_diff:{bias_type}"]["estimate"] == pytest.approx(
            np.mean([abs(a - b) for a, b in lls]), abs=1e-4)


def records(diffs: list[float], tokens: tuple[int, int] = (10, 10)) -> pd.DataFrame:
    rows = []
    for n, d in enumerate(diffs):
        for which, ll, tok in (("more", -20.0 + d, tokens[0]), ("less", -20.0, tokens[1])):
            rows.append({"pair": n, "bias_type": "gender" if n % 2 else "age",
                         "direction": "stereo", "sentence": which, "logprob": ll,
                         "tokens": tok})
    return pd.DataFrame(rows)


def test_a_hair_and_a_mile_are_told_apart() -> None:
    """Both models prefer every stereotype (pct_stereotype 1); the magnitude view differs."""
    hair, mile = records([0.01] * 40), records([5.0] * 40)
    assert crows_metrics(hair)["pct_stereotype"] == crows_metrics(mile)["pct_stereotype"] == 1
    a, b = crows_values(hair), crows_values(mile)
    assert a["difference_q50"]["high"] < b["difference_q50"]["low"]
    assert a["mean_difference"]["estimate"] == pytest.approx(0.01)
    assert b["token_difference"]["estimate"] == pytest.approx(0.5)
    assert a["pct_stereotype"]["p_value"] < 1e-6 and a["pct_stereotype"]["effect_size"] == 0.5


def test_ties_and_missing_sentences() -> None:
    frame = records([0.0, 1.0, -1.0])
    assert crows_metrics(frame)["pct_stereotype"] == pytest.approx(1 / 3)  # a tie is not >
    assert len(pairs(frame.iloc[1:])) == 2  # pair 0 lacks its more-stereotyping sentence
    assert math.isnan(crows_metrics(frame.iloc[:0])["pct_stereotype"])


def test_the_revised_version_through_dynamics(tmp_path: Path, checkpoint_dirs: list[Path]
                                              ) -> None:
    """``--probe crows-pairs:revised`` sweeps the revised pairs, says so in run.json, gives the
    new bias type its numbers, and a rerun on the original version is refused."""
    pytest.importorskip("torch")
    from biasscope.cli.main import main

    root = write_crows(tmp_path / "data", revised=revised_text())
    run = tmp_path / "run"
    glob = str(checkpoint_dirs[0].parent / "checkpoint-[12]0")
    args = ["dynamics", "--checkpoint-glob", glob, "--out", str(run), "--data-dir", str(root),
            "--device", "cpu", "--quiet"]
    assert main([*args, "--probe", "crows-pairs:revised"]) == 0
    meta = json.loads((run / "run.json").read_text())
    assert "revised (crows_pairs_EN_revised+210.csv)" in json.dumps(meta)
    records = RunStore(run).records()
    assert {"crows-pairs:LA1:more", "crows-pairs:0004:less"} <= set(records["item_id"])
    assert "crows-pairs:0003:more" not in set(records["item_id"])
    summary = json.loads((run / "summary.json").read_text())
    assert "likelihood_diff:autre" in json.dumps(summary)
    assert main([*args, "--probe", "crows-pairs"]) == 2  # another version: refused


def test_bounded_measures_say_their_bound_for_the_detectable_effect() -> None:
    """A detectable effect read back from a small run's CI could exceed what the measure can
    take (0.5 away from one half for a share; 1 for a gap of rates): entries say their bound,
    and `audit.multiplicity` then gives no number beyond it."""
    import pandas as pd

    from biasscope.audit.multiplicity import control
    from biasscope.probes.crows_pairs.steps import share
    from biasscope.probes.winogender.metrics import tested

    few = share(pd.Series([1.0, 0.0, 1.0, 1.0]))
    gap = tested(pd.Series([0.0, 1.0, -1.0, 0.0, 1.0]))
    assert (few["bound"], gap["bound"]) == (0.5, 1.0)
    checked = control({"pct_stereotype": few, "gap": gap})
    for entry in checked.values():
        assert entry["detectable"] is None and entry["detectable_beyond_bound"]
