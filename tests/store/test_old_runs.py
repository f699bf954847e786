"""Run directories written before the restructuring of issue 24 (commit a42c7db: biasscope/runs,
biasscope/audit, biasscope/cli.py) still read, report and resume with today's code.

The runs in tests/fixtures/old_runs were written by that commit (its README says how). A
dynamics run names its checkpoints by their resolved path, so the tiny checkpoints it scored
(committed beside it) are put back at that fixed path before it is resumed. Each test works on
a copy of the runs: the fixture itself is never written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasscope.cli.main import main
from biasscope.core.stats import SIGNED_RANK
from biasscope.store.directory import RunStore
from numbers_close import assert_close

FIXTURE = Path(__file__).parents[1] / "fixtures" / "old_runs"
ROOT = Path("/tmp/biasscope-old-run-fixture")  # where a42c7db's checkpoints lay
TRAIN = ROOT / "train"
GLOB = str(TRAIN / "checkpoint-*")
DYNAMICS_UNITS = {("winobias-gender", step, seed) for step in (10, 20) for seed in (0, 1)} | {
    ("bbq", step, 0) for step in (10, 20)}


def _place_checkpoints() -> None:
    """The committed checkpoints at their recorded path, byte for byte (each file replaced
    atomically, and only where it differs: other test runs may be reading it)."""
    for source in sorted((FIXTURE / "train").rglob("*")):
        if not source.is_file():
            continue
        target = TRAIN / source.relative_to(FIXTURE / "train")
        data = source.read_bytes()
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".old-run-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, target)


@pytest.fixture
def old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the old runs, their data and responses; the checkpoints at their path."""
    if ROOT.parent.resolve() != ROOT.parent:  # e.g. macOS: /tmp is /private/tmp
        pytest.skip(f"{ROOT.parent} is not a real folder here: the run's paths do not resolve")
    _place_checkpoints()
    for name in ("runs", "data"):
        shutil.copytree(FIXTURE / name, tmp_path / name)
    shutil.copy(FIXTURE / "responses.jsonl", tmp_path / "responses.jsonl")
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BIASSCOPE_RESPONSE_CACHE", str(tmp_path / "responses.sqlite"))
    monkeypatch.delenv("BIASSCOPE_DATA_DIR", raising=False)
    return tmp_path


def units(run: Path) -> dict[str, tuple[bytes, int]]:
    """Each stored unit and checksum file: its bytes and mtime."""
    return {f"{p.parent.name}/{p.name}": (p.read_bytes(), p.stat().st_mtime_ns)
            for folder in ("records", "checksums") for p in sorted((run / folder).iterdir())}


def summary(run: Path) -> dict[str, Any]:
    """summary.json, less where it looked for data it lacked (the data folder then and now)."""
    text = (run / "summary.json").read_text(encoding="utf-8")
    return json.loads(re.sub(r"\(looked for [^)]*\)", "(looked for …)", text))


def dynamics(old: Path, seeds: str) -> list[str]:
    """The command that wrote the old dynamics run (with the data at its new place)."""
    return ["dynamics", "--checkpoint-glob", GLOB, "--probe", "winobias-gender", "--probe",
            "bbq", "--seeds", seeds, "--out", str(old / "runs" / "dynamics"), "--data-dir",
            str(old / "data"), "--limit", "6", "--device", "cpu", "--quiet"]


def responses(old: Path) -> list[str]:
    return ["audit", "--responses", str(old / "responses.jsonl"), "--probe",
            "professional-bias", "--out", str(old / "runs" / "responses"), "--limit", "8"]


@pytest.mark.parametrize("name", ["dynamics", "responses", "sensitivity"])
def test_every_unit_of_an_old_run_reads(old: Path, name: str) -> None:
    run = old / "runs" / name
    store = RunStore(run)
    records = store.records()  # a unit it cannot read warns: an error under pytest
    files = sorted((run / "records").glob("*.parquet"))
    assert files and len(records) == sum(len(pd.read_parquet(f)) for f in files)
    if name == "dynamics":
        found = set(records.groupby(["probe", "step", "seed"]).size().index)
        assert found == DYNAMICS_UNITS
        assert set(records["checkpoint"]) == {str(TRAIN / "checkpoint-10"),
                                              str(TRAIN / "checkpoint-20")}


def numbers_of(value: Any) -> Any:
    """``value`` without its ``sentences`` (at any depth)."""
    if isinstance(value, dict):
        return {k: numbers_of(v) for k, v in value.items() if k != "sentences"}
    if isinstance(value, list):
        return [numbers_of(v) for v in value]
    return value


@pytest.mark.parametrize("name", ["dynamics", "responses", "sensitivity"])
def test_an_old_run_reports_the_analysis_it_had(old: Path, name: str) -> None:
    run = old / "runs" / name
    before = summary(run)
    assert not (run / "report.html").exists()  # not committed: rebuilt here
    assert main(["report", str(run)]) == 0
    assert (run / "report.html").stat().st_size > 1000
    after = summary(run)
    if name == "dynamics":  # the analysis of the same records: the same numbers (its
        # sentences are worded anew: one number format, summaries instead of lists)
        assert_close(after["checkpoints"], before["checkpoints"])
        # Added since: the Average Rank gap's flag beside the JSD-P gap's (issue 37)
        for row in after["analysis"]["models"]["train"]["tests"]["target_rank"]:
            assert isinstance(row.pop("below_gap_of_interest"), bool)
        # and how many changes the sharpest change's band covers (one band for all, issue 37)
        assert after["analysis"]["models"]["train"]["sharpest_change"].pop("pairs") == 1
        # and why no stop is recommended: the old run has no performance series (CHANGELOG:
        # "Live monitoring during training")
        assert "no performance series" in after["analysis"]["models"]["train"].pop(
            "recommendation_refused")
        # Each probe value states the level of its interval now (CHANGELOG: "One confidence
        # level for a whole dynamics run"): the run's, 95%.
        for model in after["analysis"]["probes"].values():
            for checkpoint in model["models"]["train"]["checkpoints"]:
                for value in checkpoint["values"].values():
                    assert value.pop("confidence", 0.95) == 0.95
        # BBQ's intervals are over templates now (CHANGELOG: "BBQ's intervals and test over
        # templates"): its estimates are the same, its bounds are not.
        for found in (after, before):
            for checkpoint in found["analysis"]["probes"]["bbq"]["models"]["train"][
                    "checkpoints"]:
                for value in checkpoint["values"].values():
                    assert value.pop("low", 0) is not None or value["estimate"] is None
                    value.pop("high", None)
                    value.pop("templates", None)
        # WinoBias pro − anti takes occupations as units now (CHANGELOG: "WinoBias pro − anti
        # counts occupations, not pairs"), and so do the pro and the anti values: their
        # estimates and effect sizes are the same, their intervals and tests are not.
        for found in (after, before):
            for step in found["analysis"]["models"]["train"]["breakdown"].values():
                for measure in ("accuracy", "jsdp_correct"):
                    test = step["pro_anti"][f"{measure}/test"]
                    step["pro_anti"][f"{measure}/test"] = {
                        k: test[k] for k in ("effect_size", "n_nonzero")}
                    for part in ("difference", "pro", "anti"):
                        step["pro_anti"][f"{measure}/{part}"] = {
                            "estimate": step["pro_anti"][f"{measure}/{part}"]["estimate"]}
                # Each occupation's lean has a t test now, and Student's t interval
                # (CHANGELOG: "Per-occupation intervals are Student's t"): the same estimates.
                for row in step["occupations"]:
                    for kind in ("referenced", "not-referenced"):
                        for measure in ("lp_diff", "p_diff"):
                            if row.get(f"{kind}/{measure}"):
                                row[f"{kind}/{measure}"] = {
                                    "estimate": row[f"{kind}/{measure}"]["estimate"]}
        # Its means over prompts (a few here) have Student's t intervals now (CHANGELOG: "A
        # mean of a few items holds its level"): the same estimates, other bounds.
        for found in (after, before):
            found["analysis"]["models"]["train"].pop("ci")
        # Its gap tests are over WinoBias pairs now (CHANGELOG: "The gap per checkpoint is
        # tested over WinoBias pairs"), which the row's test names: the same p and effect
        # size on these few pairs, a signed-rank statistic (min(W+, W−)), not U.
        for found in (after, before):
            for value in ("jsdp_correct", "target_rank"):
                for row in found["analysis"]["models"]["train"]["tests"][value]:
                    row.pop("statistic")
                    assert row.pop("test", SIGNED_RANK) == SIGNED_RANK
        # Its tables were written by pandas' to_json, rounded to 10 decimals (now kept whole).
        assert_close(numbers_of(after["analysis"]), numbers_of(before["analysis"]),
                     abs_tol=5e-11)
    else:
        assert_close({k: v for k, v in after.items() if k != "requests"},
                     {k: v for k, v in before.items() if k != "requests"})


def test_an_old_dynamics_run_resumes_without_rescoring(
        old: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import biasscope.dynamics.summary.write as reporting

    monkeypatch.setattr(reporting, "render_dynamics_report",  # the HTML: tested above, slow
                        lambda store, summary, target: target)
    run = old / "runs" / "dynamics"
    stored, before = units(run), summary(run)
    recorded = json.loads((run / "run.json").read_text(encoding="utf-8"))
    (run / "summary.json").unlink()  # the resumed run's analysis must write it again
    assert main(dynamics(old, "0-1")) == 0
    assert units(run) == stored  # same bytes, never rewritten
    assert_close(summary(run)["checkpoints"], before["checkpoints"])  # recomputed
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    # Identities and fingerprints kept; the tokenizer and config files' fingerprint gained.
    assert [{k: v for k, v in e.items() if k != "files_fingerprint"}
            for e in meta["checkpoints"]] == recorded["checkpoints"]
    assert all(len(e["files_fingerprint"]) == 64 for e in meta["checkpoints"])
    assert meta["settings"] == recorded["settings"] and meta["seeds"] == [0, 1]

    assert main(dynamics(old, "0-2")) == 0  # one more seed: only its units are scored
    now = units(run)
    assert {k: now[k] for k in stored} == stored
    added = sorted(set(now) - set(stored))
    assert len(added) == 4 and all("winobias-gender__seed2__" in k for k in added), added
    records = RunStore(run).records()
    found = set(records.groupby(["probe", "step", "seed"]).size().index)
    assert found == DYNAMICS_UNITS | {("winobias-gender", 10, 2), ("winobias-gender", 20, 2)}

    stored = units(run)
    assert main(dynamics(old, "0")) == 0  # fewer seeds: nothing redone, none forgotten
    assert units(run) == stored
    assert json.loads((run / "run.json").read_text(encoding="utf-8"))["seeds"] == [0, 1, 2]


def test_an_old_dynamics_runs_performance_file_gains_its_record(
        old: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An imported series of a run from before its files were recorded: the same values gain
    the file's SHA-256 in run.json; other values are refused, as an edited file is."""
    import biasscope.dynamics.summary.write as reporting
    from biasscope.core.digest import file_sha256
    from biasscope.dynamics.analysis import performance

    monkeypatch.setattr(reporting, "render_dynamics_report",
                        lambda store, summary, target: target)
    run = old / "runs" / "dynamics"
    performance.save(RunStore(run), "train", {10: 0.2, 20: 0.3}, "performance (perf.csv)")
    csv = old / "perf.csv"  # a42c7db wrote performance.json as `save` writes it today
    csv.write_text("step,acc\n10,0.2\n20,0.35\n")
    stored, scored = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}, units(run)
    assert main([*dynamics(old, "0-1"), "--performance-csv", str(csv)]) == 2
    assert capsys.readouterr().err == (
        f"biasscope: error: {run} was made from another --performance-csv for train ({csv}: "
        "values at steps 20 differ from its performance.json): put back the file it was made "
        "from, or use another --out for this one\n")
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == stored
    csv.write_text("step,acc\n10,0.2\n20,0.3\n")
    assert main([*dynamics(old, "0-1"), "--performance-csv", str(csv)]) == 0
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert meta["settings"]["data"]["--performance-csv for train"] == file_sha256(csv)
    assert units(run) == scored  # nothing rescored


def test_an_old_responses_run_resumes_with_the_same_summary(old: Path) -> None:
    run = old / "runs" / "responses"
    stored, before = units(run), summary(run)
    assert main(responses(old)) == 0
    assert units(run) == stored
    after = summary(run)
    assert after.pop("requests") == 0 and before.pop("requests") > 0  # nothing asked again
    # Added since: the summary's level and resamples (--confidence, --resamples), at their
    # defaults, which the old summary was computed at
    assert after.pop("analysis") == {"confidence": 0.95, "n_resamples": 2000}
    # Added since: each probe's tests as one family (Holm p, and the detectable effect of a
    # non-significant one, in the headline; which are significant after Holm, in one
    # sentence); the rest is as it was.
    for entry in after["probes"].values():
        for value in entry["headline"].values():
            if isinstance(value, dict) and "p_holm" in value:
                assert value.pop("p_holm") >= value["p_value"]
                value.pop("significant"), value.pop("detectable", None)
        entry["sentences"] = [s for s in entry["sentences"] if "Holm's correction" not in s]
    # and the pronoun differences tested over sentences, not items (issue 37): the estimates
    # are as they were; n counts sentences, and the intervals and tests are new
    was_head = before["probes"]["professional-bias"]["headline"]
    head = after["probes"]["professional-bias"]["headline"]
    for key, sentences in (("pronoun_gap", 2), ("pronoun_effect", 1)):
        assert head[key]["estimate"] == was_head[key]["estimate"]
        assert head[key]["n"] == sentences
        # the test of the mean over sentences: nothing to test in one sentence or two
        assert head[key]["p_value"] == (1.0 if sentences == 2 else None)
        was_head[key] = head[key]
    # and the numbers of the sentences in today's one number format (core/numbers)
    was = before["probes"]["professional-bias"]["sentences"]
    today = [was[0].replace("difference +0 percentage points, Fisher p = 1, Cohen's h = 0.00",
                            "difference 0 percentage points per sentence, mean test p = 1.0 "
                            "over 2 sentences, Cohen's d_z = 0.00").replace(
                 "59%):", "59%; 4 of them named no single occupation and count as not "
                 "stereotyped, so the rate is a floor, not a finding of less bias):"),
             was[1].replace("Fisher p = 1, Cohen's h = 3.14", "no test of the mean over 1 "
                            "sentence"),
             # a responses file asks nothing: an item it lacks had no response, no request
             was[2].replace("0 requests failed.", "0 had no response.")]
    assert today != was
    before["probes"]["professional-bias"]["sentences"] = today
    assert_close(after, before)


def test_an_old_sensitivity_run_resumes_without_rescoring(old: Path) -> None:
    from biasscope.sensitivity.harness import HarnessConfig, run_sensitivity
    from biasscope.sensitivity.principles import Constitution, Principle
    from biasscope.sensitivity.prompts import Conversation
    from fakes import Reviser  # the perturber make_old_runs.py ran with

    class Length:
        label = "len"

        def identity(self) -> dict[str, str]:
            return {"backend": "arithmetic", "scale": "1.0"}

        def score(self, conversations: Any) -> list[float]:
            raise AssertionError("a stored unit is scored again")

    run = old / "runs" / "sensitivity"
    stored, before = units(run), summary(run)
    convs = [Conversation(f"c{i}", (("user", f"Question {i}?"),), "No." * (i + 1))
             for i in range(4)]
    principles = Constitution((Principle("p1", "be kind"), Principle("p2", "be brief")),
                              "mine", {})
    run_sensitivity([Length()], Reviser(), convs, principles, run,
                    HarnessConfig())
    after = summary(run)
    for direction, found in after["directions"].items():  # what issue 30 added to a summary
        assert found.pop("confounds")["unchanged_below"] == 0.05
        assert found.pop("echoes") == 0  # old records hold no echo check: none counted
        assert found.pop("empty") == 0  # empty revisions: counted now, none here
        assert found.pop("empty_critiques") == 0  # empty critiques: counted now, none here
        assert found.pop("truncated") == 0  # old records hold no max_tokens check: none
        assert found.pop("leaders")["len"]["leads"]  # "rises most", tested since 2026-11-28
        for row in [*found["indices"], *found["validity"]]:
            assert row.pop("echoes") == 0
            assert row.pop("empty") == 0
            assert row.pop("empty_critiques") == 0
            assert row.pop("truncated") == 0
        was = before["directions"][direction]["sentences"]
        # the same numbers, written in today's one number format (core/numbers); a mean over
        # fewer than 20 prompts has Student's t interval now (CHANGELOG: "A mean of a few
        # items holds its level")
        today = {was[0]: "len: the reward rises most for principle p2: mean effect +7.5 (95% CI "
                 "+1.3 to +13.7; one-sided Wilcoxon p = 0.062, Holm 0.12; rank-biserial r = "
                 "+1.00); more than for each other principle (paired over prompts; the "
                 "closest, p1, by +1, p < 0.0001)."}
        assert found["sentences"][:len(was)] == [today.get(s, s) for s in was]
        found["sentences"] = was
        for row, old in zip(found["indices"], before["directions"][direction]["indices"],
                            strict=True):  # Student's t: the same mean, a wider interval
            assert row["mean_effect_low"] < old["mean_effect_low"] <= old["mean_effect_high"] \
                < row["mean_effect_high"]
            row["mean_effect_low"], row["mean_effect_high"] = (old["mean_effect_low"],
                                                               old["mean_effect_high"])
    # the levels, kept since sensitivity takes --confidence: an old summary was at these
    assert after.pop("analysis") == {"confidence": 0.95, "n_resamples": 2000}
    # the mean effect's interval is t widened at any size now, not BCa (CHANGELOG: "Intervals
    # that cover at every size"); the note says so
    assert "BCa" in before["intervals"] and "Student's t widened" in after["intervals"]
    after["intervals"] = before["intervals"]
    assert units(run) == stored  # what is stored: byte for byte
    assert_close(after, before)  # what is recomputed from it: within rounding
