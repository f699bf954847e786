from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from biasscope.backends.checkpoints import from_model, parse_seeds, parse_step
from biasscope.cli.main import main
from biasscope.store.directory import RunStore
from biasscope.store.run_json import OtherVersionsWarning

pytest.importorskip("torch")


def dynamics_args(checkpoint_dirs: list[Path], data: Path, out: Path, *extra: str,
                  seeds: str = "0-2") -> list[str]:
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    return ["dynamics", "--checkpoint-glob", glob, "--data-dir", str(data), "--out", str(out),
            "--seeds", seeds, "--quiet", *extra]


@pytest.fixture(autouse=True)
def no_report(monkeypatch):
    """Reports have their own tests; these check the run directory."""
    import biasscope.dynamics.summary.write as reporting

    monkeypatch.setattr(reporting, "write_dynamics_report",
                        lambda run, *_, **__: Path(getattr(run, "root", run)) / "r.html")


def sorted_records(out: Path) -> pd.DataFrame:
    frame = RunStore(out).records()
    return frame.sort_values(["step", "seed", "item_id"]).reset_index(drop=True)


def test_sweep_writes_run_json_records_and_summary(checkpoint_dirs, winobias_dir, tmp_path):
    out = tmp_path / "run"
    assert main(dynamics_args(checkpoint_dirs, winobias_dir, out)) == 0
    run = json.loads((out / "run.json").read_text())
    assert [c["step"] for c in run["checkpoints"]] == [10, 20, 30]
    assert run["seeds"] == [0, 1, 2]
    assert run["settings"]["probes"]["winobias-gender"]["probe"] == "winobias-gender"
    assert "torch" in run["versions"]
    assert len(list((out / "records").glob("*.parquet"))) == 9
    records = sorted_records(out)
    assert len(records) == 9 * 48
    assert {"item_id", "sentence_id", "split", "subset", "occupation", "stereotype", "kind",
            "answer_label", "option_logprobs", "target_rank", "seed", "step"} <= set(records)
    summary = json.loads((out / "summary.json").read_text())
    assert [c["step"] for c in summary["checkpoints"]] == [10, 20, 30]
    first = summary["checkpoints"][0]
    assert first["seeds"] == [0, 1, 2] and set(first["per_seed"]) == {"0", "1", "2"}
    assert {"jsdp_gap", "average_rank/male", "stereotype_accuracy"} <= set(first["mean"])
    assert first["std"]["jsdp_gap"] >= 0


def test_rerun_skips_finished_units(checkpoint_dirs, winobias_dir, tmp_path):
    out = tmp_path / "run"
    main(dynamics_args(checkpoint_dirs, winobias_dir, out))
    stamps = {p: p.stat().st_mtime_ns for p in (out / "records").iterdir()}
    main(dynamics_args(checkpoint_dirs, winobias_dir, out, seeds="0-3"))
    after = {p: p.stat().st_mtime_ns for p in (out / "records").iterdir()}
    assert all(after[p] == t for p, t in stamps.items())
    assert len(after) == 12
    assert json.loads((out / "run.json").read_text())["seeds"] == [0, 1, 2, 3]


def test_a_sweep_keeps_the_versions_of_its_first_call(checkpoint_dirs, winobias_dir, tmp_path):
    """Before: every call rewrote run.json's versions, one that scored nothing too, so after an
    upgrade `compare` said two sweeps scored under other libraries used the same ones. Kept as
    an audit's are: a run from before one was recorded gains it, and another is told."""
    out = tmp_path / "run"
    args = dynamics_args(checkpoint_dirs, winobias_dir, out, seeds="0")
    assert main(args) == 0
    run = json.loads((out / "run.json").read_text())
    now = run["versions"]
    older = {"python": now["python"], "biasscope": "0.0.1"}  # no torch yet: gained
    (out / "run.json").write_text(json.dumps({**run, "versions": older}))
    with pytest.warns(OtherVersionsWarning, match=r"\(biasscope 0\.0\.1\); this call runs "
                      rf"biasscope {re.escape(now['biasscope'])}, and what it adds"):
        assert main(args) == 0  # scores nothing: every unit is stored
    assert json.loads((out / "run.json").read_text())["versions"] == {**now, **older}


KILLER = """
import os, signal, sys
import biasscope.dynamics.summary.write as reporting
from biasscope.store import directory as store
from biasscope.cli.main import main
real_replace = os.replace
writes = []
def replace_then_die(src, dst):
    # SIGKILL the whole process while the Nth unit's temporary file is complete but not yet
    # renamed: the worst moment for a half-written record file.
    if str(dst).endswith(".parquet"):
        writes.append(dst)
        if len(writes) == int(os.environ["KILL_AT"]):
            os.kill(os.getpid(), signal.SIGKILL)
    real_replace(src, dst)
store.os.replace = replace_then_die
reporting.write_dynamics_report = lambda run, *_, **__: getattr(run, "root", run)
sys.exit(main(sys.argv[1:]))
"""


def test_sigkill_mid_sweep_resumes_to_identical_records(checkpoint_dirs, winobias_dir, tmp_path):
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    main(dynamics_args(checkpoint_dirs, winobias_dir, clean))
    env = {**os.environ, "KILL_AT": "5"}
    proc = subprocess.run([sys.executable, "-c", KILLER,
                           *dynamics_args(checkpoint_dirs, winobias_dir, killed)],
                          env=env, capture_output=True, timeout=300)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert len(list((killed / "records").glob("*.parquet"))) == 4  # the 5th never landed
    # A call killed as it wrote summary.json or a checksum left its file there: removed too.
    [half] = (killed / "records").glob(".*.tmp")
    writer = half.name.split(".")[-3]  # HOST~pid of the killed call
    for where, name in ((killed, "summary.json"), (killed / "checksums", "x.sha256")):
        (where / f".{name}.{writer}.ab12.tmp").write_bytes(b"half a file")
    assert main(dynamics_args(checkpoint_dirs, winobias_dir, killed)) == 0
    assert not list(killed.rglob("*.tmp"))
    pd.testing.assert_frame_equal(sorted_records(clean), sorted_records(killed))
    a = json.loads((clean / "summary.json").read_text())["checkpoints"]
    b = json.loads((killed / "summary.json").read_text())["checkpoints"]
    assert a == b


def test_changed_settings_are_refused(checkpoint_dirs, winobias_dir, tmp_path, capsys):
    out = tmp_path / "run"
    main(dynamics_args(checkpoint_dirs, winobias_dir, out))
    template = tmp_path / "t.txt"
    template.write_text("{sentence} {occupation}? {o1} {o2} {o3}:")
    code = main(dynamics_args(checkpoint_dirs, winobias_dir, out, "--prompt-template",
                              str(template)))
    assert code == 2
    assert "different settings of probe 'winobias-gender'" in capsys.readouterr().err
    assert len(list((out / "records").glob("*.parquet"))) == 9  # nothing lost


def test_a_first_call_that_scores_nothing_leaves_no_run_json(checkpoint_dirs, tmp_path,
                                                             capsys):
    """The error asks for --first-token; the rerun with it was refused for the run.json of a
    run of nothing ("made with a different 'first_token'")."""
    from winogender_fixture import write_winogender

    data, out = write_winogender(tmp_path / "data"), tmp_path / "run"
    args = dynamics_args(checkpoint_dirs, data, out, "--probe", "winogender", seeds="0")
    assert main(args) == 2
    assert "pass --first-token" in capsys.readouterr().err
    assert not (out / "run.json").exists()
    assert main([*args, "--first-token"]) == 0, capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["settings"]["first_token"] is True


def test_a_rerun_that_scores_nothing_leaves_run_json_as_it_was(checkpoint_dirs, tmp_path,
                                                              capsys):
    """Before: only a first call was put back; a rerun adding a probe that failed before its
    first unit left the probe in run.json, with its data files' hashes and no units."""
    from winobias_fixture import write_winobias
    from winogender_fixture import write_winogender

    data, out = write_winogender(write_winobias(tmp_path / "data")), tmp_path / "run"
    args = dynamics_args(checkpoint_dirs, data, out, seeds="0")
    assert main(args) == 0
    before = (out / "run.json").read_bytes()
    assert main([*args, "--probe", "winobias-gender,winogender"]) == 2
    assert "pass --first-token" in capsys.readouterr().err
    assert (out / "run.json").read_bytes() == before
    assert main(args) == 0, capsys.readouterr().err  # the run resumes as it was


def test_a_run_resumes_with_the_first_token_its_error_asked_for(checkpoint_dirs, tmp_path,
                                                                capsys):
    """Gemma's units stored, then a tiny checkpoint's 4-token ' lawyer' refused with "pass
    --first-token": the rerun with it was refused ("made with a different 'first_token'").
    Without it no unit holds an option of several tokens, so the units stored score the same
    with it; turning it off again stays refused."""
    from winobias_fixture import write_winobias
    from winogender_fixture import write_winogender

    data, out = write_winogender(write_winobias(tmp_path / "data")), tmp_path / "run"
    args = dynamics_args(checkpoint_dirs, data, out, seeds="0")
    assert main(args) == 0
    stored = {p.name: p.read_bytes() for p in (out / "records").glob("*.parquet")}
    assert main([*args, "--probe", "winobias-gender,winogender"]) == 2
    assert "pass --first-token" in capsys.readouterr().err
    both = [*args, "--probe", "winobias-gender,winogender", "--first-token"]
    assert main(both) == 0, capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["settings"]["first_token"] is True
    assert all((out / "records" / name).read_bytes() == data_ for name, data_ in stored.items())
    assert len(list((out / "records").glob("*winogender*.parquet"))) == 3
    assert main(args) == 2
    assert "different 'first_token' (true then, false now)" in capsys.readouterr().err


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "biasscope", *args], capture_output=True,
                          text=True, timeout=300)


def test_user_errors_are_one_line_without_traceback(tmp_path, winobias_dir, checkpoint_dirs):
    bad = tmp_path / "bad"
    (bad / "winobias").mkdir(parents=True)
    for f in (winobias_dir / "winobias").iterdir():
        (bad / "winobias" / f.name).write_text(f.read_text())
    broken = bad / "winobias" / "pro_stereotyped_type2.txt.test"
    broken.write_text(broken.read_text() + "7 The nurse waved at the driver.\n")
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    (tmp_path / "empty").mkdir()
    cases = {
        "pro_stereotyped_type2.txt.test:7: expected": ["--checkpoint-glob", glob,
                                                       "--data-dir", str(bad)],
        "unknown probe 'nope'": ["--checkpoint-glob", glob, "--probe", "nope"],
        "matches no directory": ["--checkpoint-glob", str(tmp_path / "none-*")],
        "does not exist": ["--model", str(tmp_path / "missing-model")],
        "missing data file": ["--checkpoint-glob", glob, "--data-dir", str(tmp_path / "empty")],
        "argument --seeds: 'x'": ["--checkpoint-glob", glob, "--seeds", "x"],
    }
    for fragment, args in cases.items():
        proc = run_cli("dynamics", "--out", str(tmp_path / "out"), *args)
        assert proc.returncode == 2, (fragment, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], (fragment, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_import_does_not_load_torch():
    code = "import sys, biasscope; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_checkpoint_specs():
    assert parse_step("step143000") == 143000 and parse_step("out/checkpoint-500") == 500
    assert parse_step("main") is None
    assert [c.revision for c in from_model("EleutherAI/pythia-160m", ["step1", "step8000"])] == [
        "step1", "step8000"]
    (ckpt,) = from_model("EleutherAI/pythia-70m@step3000")
    assert (ckpt.source, ckpt.revision, ckpt.step, ckpt.label) == (
        "EleutherAI/pythia-70m", "step3000", 3000, "EleutherAI/pythia-70m@step3000")
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4] and parse_seeds("3,0-1") == [0, 1, 3]
