"""The Ray executor: same records as the local one, and a worker killed mid-unit is redone once.

Skipped when ray is not importable, unless BIASSCOPE_REQUIRE_RAY=1 (then it fails).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from biasscope.backends.checkpoints import Checkpoint, from_dirs
from biasscope.backends.hf_model import HFConfig
from biasscope.dynamics.scoring.sweep import hf_scorers, sweep
from biasscope.dynamics.scoring.units import ScorerSource, SweepConfig
from biasscope.probes import load_probe
from biasscope.store.directory import RunStore
from require import missing_modules, require

pytest.importorskip("torch")
require(missing_modules("ray"), "BIASSCOPE_REQUIRE_RAY", "pip install -e '.[ray]'")

import ray  # noqa: E402
from ray import cloudpickle  # noqa: E402

import s3_server  # noqa: E402
from biasscope.dynamics.scoring.executors import RayExecutor  # noqa: E402
from s3_server import S3  # noqa: E402

SEEDS = [0, 1]
CPU = HFConfig(device="cpu")
UNIT_ORDER = ["model", "revision", "probe", "seed", "item_id"]


@pytest.fixture(scope="module")
def worker_hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Hugging Face hub cache the workers read (`hub_cache`'s layout)."""
    return tmp_path_factory.mktemp("hub")


@pytest.fixture(scope="module")
def ray_local(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
              worker_hub: Path) -> Iterator[S3 | None]:
    """A two-CPU local Ray; this module's scorers travel to workers by value.

    Started after the local S3 server (when the S3 tests run), so its workers inherit the
    server's AWS settings, as a cluster's nodes would have their own credentials; and with a
    cache folder of their own, where they stage remote runs, and `worker_hub` as their hub
    cache.
    """
    s3 = request.getfixturevalue("s3") if s3_server.available() else None
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    given = {"BIASSCOPE_CACHE_DIR": str(tmp_path_factory.mktemp("worker-cache")),
             "HF_HUB_CACHE": str(worker_hub)}
    saved = {name: os.environ.get(name) for name in given}
    os.environ.update(given)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=100 * 1024**2)
    try:
        yield s3
    finally:
        ray.shutdown()
        cloudpickle.unregister_pickle_by_value(module)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run(checkpoint_dirs: list[Path], data: Path, out: Path | str, scorers: ScorerSource,
        executor: RayExecutor | None = None) -> RunStore:
    """Two checkpoints x two seeds: one Ray task per checkpoint, both at once on two CPUs."""
    probe = load_probe("winobias-gender", data_dir=data)
    config = SweepConfig(from_dirs(checkpoint_dirs[:2]), out, list(SEEDS))
    return sweep(probe, config, scorers, quiet=True, executor=executor)


@pytest.fixture(scope="module")
def local_run(checkpoint_dirs: list[Path], winobias_dir: Path,
              tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    out = tmp_path_factory.mktemp("local") / "run"
    return run(checkpoint_dirs, winobias_dir, out, hf_scorers(CPU))


def sorted_records(store: RunStore) -> pd.DataFrame:
    return store.records().sort_values(UNIT_ORDER).reset_index(drop=True)


def test_ray_records_equal_local(ray_local, local_run, checkpoint_dirs, winobias_dir, tmp_path):
    remote = run(checkpoint_dirs, winobias_dir, tmp_path / "run", hf_scorers(CPU),
                 RayExecutor())
    assert len(remote.unit_files()) == 2 * len(SEEDS)
    assert sorted_records(remote).equals(sorted_records(local_run))
    # Same scores, same pandas/pyarrow: each unit file is the same bytes.
    for path in local_run.unit_files():
        assert (remote.records_dir / path.name).read_bytes() == path.read_bytes(), path.name
    assert remote.read_json("summary.json") == local_run.read_json("summary.json")


def test_ray_workers_share_a_run_in_an_s3_bucket(ray_local, local_run, checkpoint_dirs,
                                                  winobias_dir, tmp_path, monkeypatch):
    s3_server.require_s3()
    assert ray_local is not None
    url = f"s3://{ray_local.bucket()}/run"
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "driver-cache"))
    remote = run(checkpoint_dirs, winobias_dir, url, hf_scorers(CPU), RayExecutor())
    assert remote.remote == url
    # The workers wrote every unit into the bucket themselves: its objects are the local run's
    # bytes, each with its checksum, and the driver published the summary.
    from fsspec.core import url_to_fs

    fs, base = url_to_fs(url)
    for path in local_run.unit_files():
        assert fs.cat_file(f"{base}/records/{path.name}") == path.read_bytes(), path.name
        assert fs.exists(f"{base}/checksums/{path.name}.sha256")
    assert json.loads(fs.cat_file(f"{base}/summary.json")) == local_run.read_json("summary.json")
    assert sorted_records(remote).equals(sorted_records(local_run))


class DieHalfway:
    """Kills its worker process once, after checkpoint-20's first unit file has landed (its
    units are scored together, then written one by one)."""

    def __init__(self, scorer: Any, marker: Path, log: Path) -> None:
        self.scorer, self.label, self.marker, self.log = scorer, scorer.label, marker, log
        self.calls = 0

    def score_next_token_shared(self, items: Sequence[Any], needed: Sequence[bool],
                                progress: Any = None) -> list[Any]:
        self.calls += 1
        with self.log.open("a") as handle:
            handle.write(f"{self.label} {sum(needed)}\n")
        if self.label.endswith("checkpoint-20"):
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:  # the retry
                pass
            else:
                write = RunStore.write_unit

                def write_then_die(store: RunStore, unit: Any, frame: Any) -> None:
                    write(store, unit, frame)
                    os._exit(1)

                RunStore.write_unit = write_then_die  # type: ignore[method-assign]
        return list(self.scorer.score_next_token_shared(items, needed, progress))


def dying(marker: Path, log: Path) -> ScorerSource:
    inner = hf_scorers(CPU)

    def source(checkpoints: Sequence[Checkpoint]) -> Iterator[Any]:
        for scorer in inner(checkpoints):
            yield DieHalfway(scorer, marker, log)
    return source


def test_killed_worker_is_retried_and_each_unit_lands_once(
        ray_local, local_run, checkpoint_dirs, winobias_dir, tmp_path):
    marker, log = tmp_path / "killed", tmp_path / "calls.log"
    remote = run(checkpoint_dirs, winobias_dir, tmp_path / "run", dying(marker, log),
                 RayExecutor(max_retries=2))
    assert marker.exists()  # a worker did die between two unit writes
    calls = [line.rsplit("@", 1)[1] for line in log.read_text().splitlines()]
    # checkpoint-20: both seeds scored, seed 0 written, killed; the retry skips seed 0 and
    # scores seed 1's items only, planned as before, so they equal the local run's exactly.
    per_seed = len(load_probe("winobias-gender", data_dir=winobias_dir).items(0))
    assert sorted(calls) == sorted([f"checkpoint-10 {2 * per_seed}",
                                    f"checkpoint-20 {2 * per_seed}", f"checkpoint-20 {per_seed}"])
    assert sorted(p.name for p in remote.records_dir.iterdir()) == sorted(
        p.name for p in local_run.unit_files())  # no temp or quarantined files
    assert sorted_records(remote).equals(sorted_records(local_run))
    assert remote.read_json("summary.json") == local_run.read_json("summary.json")


def test_a_model_error_in_a_worker_reaches_the_driver_as_itself(ray_local, checkpoint_dirs,
                                                                winobias_dir, tmp_path):
    from biasscope.core.errors import ModelError

    broken = tmp_path / "train" / "checkpoint-5"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text((checkpoint_dirs[0] / "config.json").read_text())
    with pytest.raises(ModelError, match="cannot load"):
        run([broken], winobias_dir, tmp_path / "run", hf_scorers(CPU), RayExecutor())


def test_a_ray_worker_records_the_hub_commit_it_loaded(ray_local, worker_hub, checkpoint_dirs,
                                                       winobias_dir, tmp_path, monkeypatch):
    """A hub checkpoint of a branch scored by a Ray worker recorded no ``commit`` (the local
    path records it once the checkpoint has loaded), so a ``main`` moved since was scored beside
    the old commit's records. The worker records the commit it loaded, before its first unit,
    and refuses one moved, as the local path does."""
    from dataclasses import replace

    from biasscope.backends.checkpoints import from_model
    from biasscope.core.errors import BiasscopeError
    from hub_cache import publish, use_cache

    use_cache(monkeypatch, worker_hub)
    first = publish(worker_hub, "org/tiny", checkpoint_dirs[0])
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    config = SweepConfig(from_model("org/tiny"), tmp_path / "run", [0], limit=4)
    store = sweep(probe, config, hf_scorers(CPU), quiet=True, executor=RayExecutor())
    (entry,) = store.read_json("run.json")["checkpoints"]
    assert entry["identity"] == "org/tiny@main" and entry["commit"] == first
    moved = publish(worker_hub, "org/tiny", checkpoint_dirs[1])
    with pytest.raises(BiasscopeError, match=f"hub commit {first[:12]} then, {moved[:12]} now"):
        sweep(probe, replace(config, seeds=[0, 1]), hf_scorers(CPU), quiet=True,
              executor=RayExecutor())
    assert len(store.unit_files()) == 1


def test_a_ray_worker_records_the_remote_code_of_a_config_the_driver_had_not(
        ray_local, worker_hub, checkpoint_dirs, winobias_dir, tmp_path, monkeypatch):
    """A hub id whose config was not in the driver's cache when the run listed it had no
    ``remote_code`` (its auto_map unknown): the local sweep reads it once the checkpoint has
    loaded, a Ray worker did not, so a cluster's run gained it only on a rerun whose driver had
    the config by then. The worker records it from its own cache before its first unit."""
    import json
    import shutil

    from biasscope.backends.checkpoints import from_model
    from hub_cache import publish, use_cache

    folder = tmp_path / "coded"
    shutil.copytree(checkpoint_dirs[0], folder)
    config = folder / "config.json"
    # Code the sweep never runs (no AutoModelForCausalLM entry): transformers' classes load.
    config.write_text(json.dumps({**json.loads(config.read_text()), "auto_map": {
        "AutoModelForSequenceClassification": "modeling.Model"}}))
    (folder / "modeling.py").write_text("Model = None\n")
    publish(worker_hub, "org/coded", folder)
    use_cache(monkeypatch, tmp_path / "driver-hub")  # the driver's own, without the model
    probe = load_probe("winobias-gender", data_dir=winobias_dir)
    out = tmp_path / "run"
    sweep(probe, SweepConfig(from_model("org/coded"), out, [0], limit=4), hf_scorers(CPU),
          quiet=True, executor=RayExecutor())
    (entry,) = json.loads((out / "run.json").read_text())["checkpoints"]
    assert entry["identity"] == "org/coded@main" and entry["remote_code"] == "not run", entry


NO_RAY = """
import sys
from pathlib import Path
import biasscope
from biasscope.backends.base import NextTokenScore
from biasscope.probes import load_probe
from biasscope.backends.checkpoints import Checkpoint
from biasscope.dynamics.scoring.sweep import sweep
from biasscope.dynamics.scoring.units import SweepConfig
from biasscope.dynamics.scoring.executors import make_executor

class Fake:
    label = "fake"
    def score_next_token(self, items):
        return [NextTokenScore(tuple(-1.0 for _ in it.options), 1) for it in items]

probe = load_probe("winobias-gender", data_dir=sys.argv[1])
config = SweepConfig([Checkpoint("fake", "fake")], Path(sys.argv[2]), [0])
store = sweep(probe, config, lambda ckpts: (Fake() for _ in ckpts), quiet=True,
              executor=make_executor("local"))
assert len(store.unit_files()) == 1
assert "ray" not in sys.modules, "the local path imported ray"
"""


def test_import_and_local_sweep_never_import_ray(winobias_dir, tmp_path):
    import subprocess

    proc = subprocess.run([sys.executable, "-c", NO_RAY, str(winobias_dir), str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
