"""A call killed while it writes leaves a temporary file (`atomic_write`'s, named after its host
and pid); the next call into the run that passes every check removes it, wherever in the run it
lies, and `report` ignores it meanwhile. Before, only `dynamics` and `intervene` removed theirs,
and only in ``records/``: a killed `judge`, `judge-audit`, `audit`, `counterfactual` or
`sensitivity` left its file in the run for good. Real kills: SIGKILL as a file is renamed into
place, its temporary file whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from biasscope.cli.main import main
from biasscope.core.processes import HOST
from biasscope.store.directory import RunStore

KILLER = """
import os, signal, sys
from biasscope.cli.main import main
real_replace = os.replace
def replace_then_die(src, dst):
    # SIGKILL the whole process as the first file named KILL_IN is renamed into place.
    if str(src).endswith(".tmp") and os.environ["KILL_IN"] in str(dst):
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(src, dst)
os.replace = replace_then_die
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def given(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Each command's flags, but --out: canned judges and perturber, stored responses and a
    tiny reward model, so that nothing waits on a server."""
    pytest.importorskip("torch")
    from sensitivity_fixture import write_reward_model

    root = tmp_path_factory.mktemp("given")
    pairs, cf, prompts = root / "pairs.jsonl", root / "cf.jsonl", root / "prompts.jsonl"
    pairs.write_text("".join(json.dumps({"id": i, "prompt": f"Q{i}?", "a": "yes", "b": "no"})
                             + "\n" for i in range(4)))
    cf.write_text("".join(json.dumps({"id": str(i), "prompt": "My wife?", "chosen": "Her.",
                                      "rejected": "No."}) + "\n" for i in range(4)))
    prompts.write_text("".join(json.dumps({"prompt": f"Ask my wife {i}?", "response": "No."})
                               + "\n" for i in range(2)))
    (root / "principles.txt").write_text("Be kind.\nBe brief.\n")
    items, responses = root / "items.jsonl", root / "responses.jsonl"
    assert main(["items", "--probe", "professional-bias", "--limit", "6", "--out",
                 str(items)]) == 0
    responses.write_text("".join(json.dumps({"item_id": json.loads(line)["item_id"],
                                             "response": "The nurse."}) + "\n"
                                 for line in items.read_text().splitlines()))
    return {
        "judge": ["judge", "--model", "canned:A", "--input", str(pairs), "--no-cache"],
        "judge-audit": ["judge-audit", "--model", "canned:A", "--input", str(pairs),
                        "--no-cache"],
        "audit": ["audit", "--responses", str(responses), "--probe", "professional-bias",
                  "--limit", "6"],
        "counterfactual": ["counterfactual", "--pairs", str(cf), "--judge-model", "canned:A",
                           "--no-cache"],
        "sensitivity": ["sensitivity", "--perturber", "canned:It is rude.", "--principles",
                        str(root / "principles.txt"), "--prompts", str(prompts),
                        "--sanity-pairs", "0", "--no-chat-template", "--device", "cpu",
                        "--no-cache", "--reward-model", str(write_reward_model(root / "rm"))],
    }


def temporary(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*.tmp"))


@pytest.mark.parametrize(("command", "kill_in"), [
    ("judge", "report.html"), ("judge-audit", "summary.json"), ("audit", "checksums"),
    ("counterfactual", "scores.jsonl"), ("sensitivity", "records")])
def test_a_rerun_removes_what_a_killed_call_was_writing(
        given: dict[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        command: str, kill_in: str) -> None:
    out = tmp_path / "run"
    argv = [*given[command], "--out", str(out)]
    proc = subprocess.run([sys.executable, "-c", KILLER, *argv], capture_output=True,
                          env={**os.environ, "KILL_IN": kill_in}, timeout=300)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    left = temporary(out)
    assert len(left) == 1 and kill_in in str(left[0].relative_to(out)), left
    assert main(argv) == 0
    assert temporary(out) == []


def test_report_ignores_a_killed_call_s_temporary_file(
        given: dict[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Killed as it wrote its report, a judge run's summary is whole: `report` renders it and
    leaves the killed call's file, which only a call that writes into the run removes."""
    out = tmp_path / "run"
    argv = [*given["judge"], "--out", str(out)]
    subprocess.run([sys.executable, "-c", KILLER, *argv], capture_output=True,
                   env={**os.environ, "KILL_IN": "report.html"}, timeout=300)
    left = temporary(out)
    assert len(left) == 1 and not (out / "report.html").exists()
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    said = capsys.readouterr().out + (out / "report.html").read_text()
    assert left[0].name not in said
    assert temporary(out) == left


def test_only_this_host_s_dead_writers_files_are_removed(tmp_path: Path) -> None:
    """A live writer's file (this process's) and another host's stay: either may still be
    renamed into place."""
    store = RunStore(tmp_path / "run")
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    names = {"dead": f".x.{HOST}~{dead.pid}.ab12.tmp", "live": f".x.{HOST}~{os.getpid()}.cd34.tmp",
             "other": f".x.elsewhere-{HOST}~{dead.pid}.ef56.tmp"}
    folders = (store.root, store.records_dir, store.checksums_dir)
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        for name in names.values():
            (folder / name).write_bytes(b"half a file")
    removed = store.remove_stale_temp_files()
    assert sorted(removed) == sorted(folder / names["dead"] for folder in folders)
    assert {p.name for p in temporary(store.root)} == {names["live"], names["other"]}
