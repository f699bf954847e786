"""Each command is one library call: the CLI and the library, given the same inputs, write the
same run directory, file by file (timestamps and the run's own path aside), and a command
opens its run once (one listing of a remote run)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasscope.cli.main import main
from biasscope.store.directory import RunStore

pytest.importorskip("torch")

VOLATILE = {"created", "updated", "versions", "seconds", "elapsed",
            "analysed_from"}  # the key of the analysis hashes run.json, whose times differ
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")


def steady(value: Any, root: Path) -> Any:
    """``value`` without what differs between two runs of one command (times, its path)."""
    if isinstance(value, dict):
        return {k: steady(v, root) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [steady(v, root) for v in value]
    if isinstance(value, str):
        return STAMP.sub("TIME", value.replace(str(root), "RUN"))
    return value


def named(page: str, root: Path) -> str:
    return page.replace(f"“{root.name}”", "“RUN”").replace(f"<td>{root.name}</td>", "<td>RUN</td>")


def same_run(a: Path, b: Path) -> None:
    files = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    assert files == {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    for name in sorted(files):
        left, right = a / name, b / name
        if name.suffix == ".parquet":
            pd.testing.assert_frame_equal(pd.read_parquet(left), pd.read_parquet(right))
        elif name.suffix == ".json":
            assert steady(json.loads(left.read_text()), a) == steady(
                json.loads(right.read_text()), b), name
        elif name.suffix == ".jsonl":
            rows = [left.read_text().splitlines(), right.read_text().splitlines()]
            assert [steady(json.loads(r), a) for r in rows[0] if r.strip()] == [
                steady(json.loads(r), b) for r in rows[1] if r.strip()], name
        elif name.suffix == ".html":  # the report names its run folder, not its path
            assert steady(named(left.read_text(), a), a) == steady(
                named(right.read_text(), b), b), name
        elif name.name not in (".run.lock", ".run.id"):  # the lock; each folder's own token
            assert left.read_bytes() == right.read_bytes(), name


def test_dynamics_through_the_cli_and_the_library(checkpoint_dirs, winobias_dir, tmp_path):
    from biasscope.dynamics import job

    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    assert main(["dynamics", "--checkpoint-glob", glob, "--data-dir", str(winobias_dir),
                 "--seeds", "0,1", "--limit", "8", "--alpha", "0.05", "--quiet",
                 "--out", str(tmp_path / "cli")]) == 0
    result = job.run(job.DynamicsConfig(
        out=tmp_path / "lib", checkpoint_globs=[glob], data_dir=str(winobias_dir),
        seeds=(0, 1), limit=8, analysis={"alpha": 0.05}, quiet=True))
    assert result.report == tmp_path / "lib" / "report.html"
    assert json.loads((tmp_path / "lib" / "run.json").read_text())["settings"]["data"]
    same_run(tmp_path / "cli", tmp_path / "lib")


def test_audit_through_the_cli_and_the_library(tmp_path):
    from biasscope.audit import job

    items = tmp_path / "items.jsonl"
    assert main(["items", "--probe", "professional-bias", "--limit", "6",
                 "--out", str(items)]) == 0
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps({"item_id": json.loads(line)["item_id"],
                                             "response": "The nurse."}) + "\n"
                                 for line in items.read_text().splitlines()))
    assert main(["audit", "--responses", str(responses), "--probe", "professional-bias",
                 "--limit", "6", "--out", str(tmp_path / "cli")]) == 0
    job.run(job.AuditConfig(out=tmp_path / "lib", probes=["professional-bias"],
                            responses=str(responses), limit=6))
    same_run(tmp_path / "cli", tmp_path / "lib")


def test_sensitivity_through_the_cli_and_the_library(llama_server, tmp_path):
    from biasscope.backends.config import BackendConfig
    from biasscope.sensitivity import job
    from sensitivity_fixture import write_ccai, write_hh_rlhf
    from test_model_labels import _reward_model

    model = _reward_model(tmp_path / "rm")
    data = write_hh_rlhf(write_ccai(tmp_path / "data"))
    perturber = f"openai-compatible:{llama_server.base_url}#tiny"
    assert main(["sensitivity", "--reward-model", str(model), "--perturber", perturber,
                 "--principles", "ccai:top1", "--prompts", "hh-rlhf:harmless-base:2",
                 "--data-dir", str(data), "--max-tokens", "4", "--device", "cpu",
                 "--no-cache", "--out", str(tmp_path / "cli")]) == 0
    job.run(job.SensitivityConfig(
        out=tmp_path / "lib", reward_models=[str(model)], perturber=perturber,
        principles="ccai:top1", prompts="hh-rlhf:harmless-base:2", data_dir=str(data),
        max_tokens=4, backend=BackendConfig(device="cpu", no_cache=True)))
    same_run(tmp_path / "cli", tmp_path / "lib")


def test_a_remote_run_is_listed_once_per_command(checkpoint_dirs, winobias_dir, s3,
                                                 tmp_path, monkeypatch):
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    refreshes: list[str] = []
    real = RunStore.refresh

    def counted(self: RunStore) -> None:
        refreshes.append(str(self.remote))
        real(self)

    monkeypatch.setattr(RunStore, "refresh", counted)
    url = f"s3://{s3.bucket()}/run"
    glob = str(checkpoint_dirs[0].parent / "checkpoint-*")
    assert main(["dynamics", "--checkpoint-glob", glob, "--data-dir", str(winobias_dir),
                 "--seeds", "0", "--limit", "8", "--quiet", "--out", url]) == 0
    assert refreshes == [url]
    refreshes.clear()
    assert main(["report", url, "--alpha", "0.05"]) == 0
    assert refreshes == [url]


def test_the_old_command_and_flag_spellings(tmp_path, capsys):
    assert main(["probe", "--responses", str(tmp_path / "none.jsonl"), "--probe",
                 "professional-bias", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "`biasscope probe` is now `biasscope audit`" in err and "none.jsonl" in err
    for old, new in (("--gpus-per-unit", "--gpus-per-checkpoint"),
                     ("--probes", "--probe")):
        command = ["dynamics", "--model", "org/x", old, "1", "--out", str(tmp_path / "d")]
        with pytest.raises(SystemExit) as exit_:
            main(command)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{old} is now {new}" in err


def test_one_writer_of_a_dynamics_summary():
    """One function writes a dynamics run's summary.json (``scoring.write_summary_json``,
    beside the sweep so that it imports no analysis); the sweep's progress and the report
    go through it."""
    package = Path(__file__).resolve().parents[2] / "src" / "biasscope"
    writers = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                     if re.search(r"write_json\([^)]*summary_json", p.read_text()))
    assert writers == ["audit/harness.py", "counterfactual/job.py", "dynamics/scoring/units.py",
                       "judge/batch.py", "sensitivity/harness.py"]
