"""The files a performance series is imported from (``--performance-csv``, ``--lm-eval-results``)
are known by their SHA-256: run.json records each, and a rerun from an edited or other file is
refused before any checkpoint loads, as an edited data file is. Before, such a rerun recomputed
the early-stopping recommendation from other numbers under the same run.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from biasscope.cli.main import main
from biasscope.core.digest import file_sha256

pytest.importorskip("torch")

CSV = "--performance-csv for small"


@pytest.fixture(autouse=True)
def no_html(monkeypatch: pytest.MonkeyPatch) -> None:
    """summary.json is written; the HTML page has its own tests."""
    import biasscope.dynamics.summary.write as reporting

    monkeypatch.setattr(reporting, "render_dynamics_report",
                        lambda store, summary, target: target)


def argv(out: Path, checkpoint_dirs: list[Path], data: Path, *extra: str,
         limit: str = "6") -> list[str]:
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    return ["dynamics", "--checkpoint-glob", f"small={glob}", "--data-dir", str(data),
            "--out", str(out), "--seeds", "0", "--limit", limit, "--device", "cpu", "--quiet",
            *extra]


def run(out: Path, checkpoint_dirs: list[Path], data: Path, *extra: str,
        limit: str = "6") -> int:
    return main(argv(out, checkpoint_dirs, data, *extra, limit=limit))


def files(out: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def recorded(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "run.json").read_text())["settings"]["data"]
    return data


def loads_nothing(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    loads: list[object] = []
    monkeypatch.setattr("biasscope.dynamics.scoring.sweep.iter_scorers",
                        lambda *a: loads.append(a) or iter(()))
    return loads


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def lm_eval(folder: Path, values: dict[int, float]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for step, acc in values.items():
        (folder / f"results_{step}.json").write_text(json.dumps({
            "results": {"lambada_openai": {"acc,none": acc, "f1,none": acc / 2}},
            "config": {"model_args": f"pretrained=x,revision=step{step}"}}))
    return str(folder / "*.json")


def test_an_edited_performance_csv_is_refused_before_a_checkpoint_loads(
        tmp_path, checkpoint_dirs, winobias_dir, capsys, monkeypatch):
    csv, out = tmp_path / "perf.csv", tmp_path / "run"
    csv.write_text("step,lambada\n10,0.20\n20,0.30\n30,0.31\n")
    assert run(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)) == 0
    assert recorded(out)[CSV] == file_sha256(csv)
    then = file_sha256(csv)
    moved = tmp_path / "elsewhere.csv"  # the same content under another name: the same file
    moved.write_bytes(csv.read_bytes())
    assert run(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(moved)) == 0
    capsys.readouterr()
    before, loads = files(out), loads_nothing(monkeypatch)
    csv.write_text("step,lambada\n10,0.20\n20,0.30\n30,0.10\n")
    assert run(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)) == 2
    assert one_line(capsys) == (
        f"biasscope: error: {out} was made from another {CSV} ({csv}: SHA-256 {then[:12]}… "
        f"then, {file_sha256(csv)[:12]}… now): put back the file it was made from, or use "
        "another --out for this one")
    assert loads == [] and files(out) == before


def test_an_edited_or_other_lm_eval_results_file_is_refused(
        tmp_path, checkpoint_dirs, winobias_dir, capsys, monkeypatch):
    out, folder = tmp_path / "run", tmp_path / "lm_eval"
    glob = lm_eval(folder, {10: 0.1, 20: 0.2, 30: 0.25})
    given = ("--lm-eval-results", glob, "--lm-eval-metric", "lambada_openai/acc")
    assert run(out, checkpoint_dirs, winobias_dir, *given) == 0
    names = {f"--lm-eval-results for small at step {s}": folder / f"results_{s}.json"
             for s in (10, 20, 30)}
    assert {k: v for k, v in recorded(out).items() if k.startswith("--lm")} == {
        k: file_sha256(p) for k, p in names.items()}
    capsys.readouterr()
    before, loads = files(out), loads_nothing(monkeypatch)
    target = folder / "results_20.json"
    then = file_sha256(target)
    target.write_text(target.read_text().replace("0.2", "0.9"))
    assert run(out, checkpoint_dirs, winobias_dir, *given) == 2
    assert one_line(capsys) == (
        f"biasscope: error: {out} was made from another --lm-eval-results for small at step 20 "
        f"({target}: SHA-256 {then[:12]}… then, {file_sha256(target)[:12]}… now): put back the "
        "file it was made from, or use another --out for this one")
    target.write_text(target.read_text().replace("0.9", "0.2"))
    other = ("--lm-eval-results", glob, "--lm-eval-metric", "lambada_openai/f1")
    assert run(out, checkpoint_dirs, winobias_dir, *other) == 2
    assert one_line(capsys) == (
        f"biasscope: error: {out} was made with --lm-eval-metric lambada_openai/acc, and this "
        "call gives lambada_openai/f1: give it again, or use another --out for this one")
    other_folder = tmp_path / "more"  # the same files elsewhere: the same record
    lm_eval(other_folder, {10: 0.1, 20: 0.2, 30: 0.25})
    moved = ("--lm-eval-results", str(other_folder / "*.json"), "--lm-eval-metric",
             "lambada_openai/acc")
    (other_folder / "results_10.json").unlink()
    (other_folder / "step10.json").write_text(json.dumps({"results": {"lambada_openai": {
        "acc,none": 0.1}}}))  # step 10 from its name, but another file than the run's
    assert run(out, checkpoint_dirs, winobias_dir, *moved) == 2
    assert "another --lm-eval-results for small at step 10 (" in one_line(capsys)
    assert loads == [] and files(out) == before
    (other_folder / "step10.json").unlink()
    (other_folder / "results_10.json").write_bytes((folder / "results_10.json").read_bytes())
    assert run(out, checkpoint_dirs, winobias_dir, *moved) == 0


def test_a_glob_that_no_longer_matches_a_recorded_step_is_refused(
        tmp_path, checkpoint_dirs, winobias_dir, capsys):
    """Step 40 has no checkpoint here, so coverage does not ask for it; its file is still
    part of the series the run was made from."""
    out, folder = tmp_path / "run", tmp_path / "lm_eval"
    glob = lm_eval(folder, {10: 0.1, 20: 0.2, 30: 0.25, 40: 0.3})
    given = ("--lm-eval-results", glob, "--lm-eval-metric", "lambada_openai/acc")
    assert run(out, checkpoint_dirs, winobias_dir, *given) == 0
    capsys.readouterr()
    before = files(out)
    (folder / "results_40.json").unlink()
    assert run(out, checkpoint_dirs, winobias_dir, *given) == 2
    assert one_line(capsys) == (
        f"biasscope: error: {out} was made from --lm-eval-results for small at step 40, a file "
        "--lm-eval-results no longer matches: give a glob that matches it, or use another --out "
        "for this one")
    assert files(out) == before


def test_two_lm_eval_results_of_one_step_are_refused(tmp_path) -> None:
    """Before, the later file of the two was taken, unsaid."""
    from biasscope.core.errors import BiasscopeError
    from biasscope.dynamics.analysis.performance import from_lm_eval

    lm_eval(tmp_path / "a" / "x", {10: 0.1})
    lm_eval(tmp_path / "a" / "y", {10: 0.3})
    with pytest.raises(BiasscopeError, match=r"x/results_10.json and .*y/results_10.json both "
                       r"hold step 10: give --lm-eval-results a glob that matches one file"):
        from_lm_eval(str(tmp_path / "a" / "*" / "*.json"), "lambada_openai/acc")


def test_the_other_flag_for_a_model_is_refused(tmp_path, checkpoint_dirs, winobias_dir, capsys):
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    csv.write_text("10,0.1\n20,0.2\n30,0.25\n")
    assert run(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)) == 0
    capsys.readouterr()
    before = files(out)
    glob = lm_eval(tmp_path / "lm_eval", {10: 0.1, 20: 0.2, 30: 0.25})
    assert run(out, checkpoint_dirs, winobias_dir, "--lm-eval-results", glob,
               "--lm-eval-metric", "lambada_openai/acc") == 2
    assert one_line(capsys) == (
        f"biasscope: error: {out} was made from --performance-csv for small, and this call "
        "gives --lm-eval-results: give --performance-csv again, or use another --out for this "
        "one")
    assert files(out) == before


def test_two_series_for_one_model_are_refused(tmp_path, checkpoint_dirs, winobias_dir, capsys):
    """Before, the later replaced the earlier in performance.json, unsaid."""
    csv = tmp_path / "perf.csv"
    csv.write_text("10,0.1\n20,0.2\n30,0.25\n")
    glob = lm_eval(tmp_path / "lm_eval", {10: 0.1, 20: 0.2, 30: 0.25})
    assert run(tmp_path / "run", checkpoint_dirs, winobias_dir, "--performance-csv", str(csv),
               "--lm-eval-results", glob, "--lm-eval-metric", "lambada_openai/acc") == 2
    assert one_line(capsys) == (
        f"biasscope: error: --lm-eval-results {glob}: --performance-csv gives small's "
        "performance already; give one series per model")
    assert not (tmp_path / "run").exists()


def test_a_rerun_without_the_flag_keeps_the_series_and_its_record(
        tmp_path, checkpoint_dirs, winobias_dir):
    """As a rerun keeps the run's probes and seeds: the report states the recommendation from
    the file run.json records, neither dropped nor left unrecorded."""
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    csv.write_text("step,lambada\n10,0.20\n20,0.30\n30,0.31\n")
    assert run(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)) == 0
    was = json.loads((out / "summary.json").read_text())["analysis"]["models"]["small"]
    record = recorded(out)
    csv.unlink()  # no longer needed: the run holds its copy and its SHA-256
    assert run(out, checkpoint_dirs, winobias_dir) == 0
    now = json.loads((out / "summary.json").read_text())["analysis"]["models"]["small"]
    assert now["performance"] == was["performance"]
    assert now["recommendation"] == was["recommendation"] and now["recommendation"]
    assert recorded(out) == record and CSV in record
    assert main(["report", str(out), "--quiet"]) == 0  # `biasscope report`: the same series
    again = json.loads((out / "summary.json").read_text())["analysis"]["models"]["small"]
    assert again["recommendation"] == was["recommendation"]


def test_a_series_added_by_a_refused_rerun_is_not_kept(
        tmp_path, checkpoint_dirs, winobias_dir, capsys):
    """performance.json goes back with run.json: else the report stated a recommendation from
    a file the run did not record."""
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    assert run(out, checkpoint_dirs, winobias_dir) == 0
    before = files(out)
    csv.write_text("10,0.1\n20,0.2\n30,0.25\n")
    assert run(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv),
               limit="4") == 2  # refused by the sweep, once the series was read
    assert "--limit 6, and this call gives --limit 4" in one_line(capsys)
    assert files(out) == before and not (out / "performance.json").exists()


def _as_before_records(out: Path) -> None:
    """run.json as a run from before performance files were recorded wrote it."""
    meta = json.loads((out / "run.json").read_text())
    data = meta["settings"]["data"]
    meta["settings"]["data"] = {k: v for k, v in data.items() if not k.startswith("--")}
    (out / "run.json").write_text(json.dumps(meta))


def test_a_run_from_before_gains_the_record_or_refuses_other_values(
        tmp_path, checkpoint_dirs, winobias_dir, capsys, monkeypatch):
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    csv.write_text("step,lambada\n10,0.20\n20,0.30\n30,0.31\n")
    assert run(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)) == 0
    _as_before_records(out)
    edited = tmp_path / "edited.csv"
    edited.write_text("step,lambada\n10,0.20\n20,0.35\n30,0.31\n")
    capsys.readouterr()
    before, loads = files(out), loads_nothing(monkeypatch)
    assert run(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(edited)) == 2
    assert one_line(capsys) == (
        f"biasscope: error: {out} was made from another {CSV} ({edited}: values at steps 20 "
        "differ from its performance.json): put back the file it was made from, or use another "
        "--out for this one")
    assert loads == [] and files(out) == before
    assert run(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)) == 0
    assert recorded(out)[CSV] == file_sha256(csv)  # gained


def test_a_file_for_a_live_run_s_series_says_it_came_from_the_training(
        tmp_path, winobias_dir, tiny_tokenizer, one_thread, capsys, monkeypatch):
    """A live run's series is the Trainer's eval loss, recorded by BiasCallback: no file. A
    later --performance-csv into its folder was refused as "made from another
    --performance-csv", a file it never had, and one with the same values replaced it."""
    import torch

    from live_trainer import train

    (tmp_path / "data").symlink_to(winobias_dir)
    out = tmp_path / "live"
    ids = tiny_tokenizer(["The doctor said he would help. Answer: male"] * 4)["input_ids"]
    held = [{"input_ids": torch.tensor(x), "labels": torch.tensor(x)} for x in ids]
    # scored at steps 0, 4: a sweep of checkpoint-2 under its name is no step of its own
    train(tiny_tokenizer, tmp_path, out, 4, eval_dataset=held, eval_strategy="steps",
          eval_steps=2, eval_on_start=True, every=4)
    series = json.loads((out / "performance.json").read_text())["series"]["live"]
    csv = tmp_path / "perf.csv"
    for values in ({2: 0.1, 4: 0.2}, {int(k): v for k, v in series["values"].items()}):
        csv.write_text("".join(f"{k},{v!r}\n" for k, v in values.items()))
        capsys.readouterr()
        before, loads = files(out), loads_nothing(monkeypatch)
        glob = str(tmp_path / "trainer" / "checkpoint-2")
        assert main(["dynamics", "--checkpoint-glob", f"live={glob}", "--data-dir",
                     str(winobias_dir), "--out", str(out), "--device", "cpu", "--quiet",
                     "--performance-csv", str(csv)]) == 2
        assert one_line(capsys) == (
            f"biasscope: error: {out} holds live's performance series from its training's "
            "own evaluation (1 / eval perplexity, recorded by BiasCallback), not from a file, "
            "and --performance-csv would replace it: drop --performance-csv (the run keeps its "
            "series), or use another --out for this one")
        assert loads == [] and files(out) == before


# A sweep killed outright (SIGKILL: no except, no finally) between recording a performance
# series' files in run.json and writing the series into performance.json leaves no series
# that run.json does not vouch for. Before, performance.json was written first, and a kill
# before run.json left a series the report used with no record of the file it came from.


def killed(where: str, args: list[str]) -> None:
    """``biasscope ARGS`` in a child process that dies as SIGKILL leaves it (``os._exit``)
    as soon as ``where`` (a dotted name, patched) is called."""
    code = textwrap.dedent(f"""
        import os
        from unittest import mock
        from biasscope.cli.main import main
        with mock.patch({where!r}, lambda *a, **k: os._exit(9)):
            main({args!r})
        """)
    path = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 9, done.stderr


def performance(out: Path) -> dict[str, object] | None:
    """The model's performance as the run's analysis states it."""
    summary = json.loads((out / "summary.json").read_text())
    value: dict[str, object] | None = summary["analysis"]["models"]["small"]["performance"]
    return value


def test_killed_before_run_json_records_the_file_no_series_is_reported(
        tmp_path, checkpoint_dirs, winobias_dir):
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    assert main(argv(out, checkpoint_dirs, winobias_dir)) == 0
    csv.write_text("step,lambada\n10,0.20\n20,0.30\n30,0.31\n")
    killed("biasscope.dynamics.job.run_dynamics",
           argv(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)))
    assert CSV not in recorded(out)
    assert not (out / "performance.json").exists()  # before: the series, vouched for by none
    assert main(["report", str(out), "--quiet"]) == 0
    assert performance(out) is None
    assert not list(out.glob("performance.pending*.json"))  # thrown away, never read
    assert main(argv(out, checkpoint_dirs, winobias_dir)) == 0  # a rerun without the flag
    assert performance(out) is None and CSV not in recorded(out)


def test_killed_after_run_json_records_the_file_the_next_call_keeps_the_series(
        tmp_path, checkpoint_dirs, winobias_dir):
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    csv.write_text("step,lambada\n10,0.20\n20,0.30\n30,0.31\n")
    killed("biasscope.dynamics.imported.Imported.save",
           argv(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)))
    assert recorded(out)[CSV] == file_sha256(csv)
    assert not (out / "performance.json").exists()
    csv.unlink()  # the run keeps what it staged: the file is not needed again
    assert main(["report", str(out), "--quiet"]) == 0
    assert performance(out) == {"source": "performance (perf.csv)",
                                "values": {"10": 0.2, "20": 0.3, "30": 0.31},
                                "missing_steps": []}
    assert not list(out.glob("performance.pending*.json"))
    series = json.loads((out / "performance.json").read_text())["series"]["small"]
    assert series["values"] == {"10": 0.2, "20": 0.3, "30": 0.31}


def test_a_rerun_killed_after_its_units_keeps_its_series_for_the_next_call(
        tmp_path, checkpoint_dirs, winobias_dir):
    """The next sweep, not only the report, keeps what run.json records."""
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    csv.write_text("10,0.1\n20,0.2\n30,0.25\n")
    killed("biasscope.dynamics.imported.Imported.save",
           argv(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)))
    assert main(argv(out, checkpoint_dirs, winobias_dir)) == 0
    assert performance(out) == {"source": "performance (perf.csv)",
                                "values": {"10": 0.1, "20": 0.2, "30": 0.25},
                                "missing_steps": []}
    assert not list(out.glob("performance.pending*.json"))


def test_another_call_settling_meanwhile_leaves_a_running_call_s_staged_series(
        tmp_path, checkpoint_dirs, winobias_dir, monkeypatch):
    """A second sweep into the same --out settles as it starts: it took the first's staged
    series away as a killed call's (run.json did not vouch for it yet), and the first, stopped
    after its units and before performance.json, then left a run without its series."""
    import biasscope.dynamics.job as job
    from biasscope.dynamics.analysis import performance as perf
    from biasscope.dynamics.imported import Imported
    from biasscope.store.directory import RunStore

    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    csv.write_text("10,0.1\n20,0.2\n30,0.25\n")
    sweep = job.run_dynamics

    def meanwhile(*args: Any, **kwargs: Any) -> None:
        perf.settle(RunStore(out))  # the other call, starting
        sweep(*args, **kwargs)

    def stopped(*args: Any) -> None:
        raise KeyboardInterrupt  # after run.json and the units, before performance.json

    monkeypatch.setattr(job, "run_dynamics", meanwhile)
    monkeypatch.setattr(Imported, "save", stopped)
    assert main(argv(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv))) != 0
    monkeypatch.undo()
    assert main(["report", str(out), "--quiet"]) == 0
    assert performance(out) == {"source": "performance (perf.csv)",
                                "values": {"10": 0.1, "20": 0.2, "30": 0.25},
                                "missing_steps": []}


# A report that cannot settle a staged series (a read-only run, or --output elsewhere, which
# leaves the run as it is) reads it in memory where run.json vouches for its files, writing
# nothing into the run. Before, the series stayed unread: the report stated no performance.


def staged_after_run_json(tmp_path: Path, checkpoint_dirs: list[Path], winobias_dir: Path
                          ) -> Path:
    out, csv = tmp_path / "run", tmp_path / "perf.csv"
    csv.write_text("10,0.1\n20,0.2\n30,0.25\n")
    killed("biasscope.dynamics.imported.Imported.save",
           argv(out, checkpoint_dirs, winobias_dir, "--performance-csv", str(csv)))
    assert list(out.glob("performance.pending*.json")) and not (out / "performance.json").exists()
    return out


SERIES = {"source": "performance (perf.csv)", "values": {"10": 0.1, "20": 0.2, "30": 0.25},
          "missing_steps": []}


def reported(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The summaries the report renders."""
    import biasscope.dynamics.summary.write as reporting

    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(reporting, "render_dynamics_report",
                        lambda store, summary, target: seen.append(summary) or target)
    return seen


def test_a_report_elsewhere_reads_a_vouched_staged_series_and_writes_nothing_in_the_run(
        tmp_path, checkpoint_dirs, winobias_dir):
    out = staged_after_run_json(tmp_path, checkpoint_dirs, winobias_dir)
    before = files(out)
    target = tmp_path / "elsewhere" / "r.html"
    assert main(["report", str(out), "--output", str(target), "--quiet"]) == 0
    summary = json.loads(target.with_name("r.summary.json").read_text())
    assert summary["analysis"]["models"]["small"]["performance"] == SERIES
    assert files(out) == before


def test_a_report_of_a_run_it_cannot_write_to_reads_the_vouched_staged_series(
        tmp_path, checkpoint_dirs, winobias_dir, monkeypatch):
    """Every write fails as in a read-only folder (as root, chmod would not stop it)."""
    import errno

    import biasscope.store.files as files_mod

    out = staged_after_run_json(tmp_path, checkpoint_dirs, winobias_dir)
    before, seen = files(out), reported(monkeypatch)

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(files_mod.tempfile, "mkstemp", denied)
    assert main(["report", str(out), "--quiet"]) == 0
    assert seen[-1]["analysis"]["models"]["small"]["performance"] == SERIES
    assert files(out) == before


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root ignores file permissions")
def test_a_report_of_a_read_only_run_reads_the_vouched_staged_series(
        tmp_path, checkpoint_dirs, winobias_dir, monkeypatch):
    out = staged_after_run_json(tmp_path, checkpoint_dirs, winobias_dir)
    before, seen = files(out), reported(monkeypatch)
    folders = [out, *(p for p in out.rglob("*") if p.is_dir())]
    for folder in folders:
        folder.chmod(0o555)
    try:
        assert main(["report", str(out), "--quiet"]) == 0
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert seen[-1]["analysis"]["models"]["small"]["performance"] == SERIES
    assert files(out) == before
