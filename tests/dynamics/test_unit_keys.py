"""A dynamics run directory holds what its run.json says was run: units keyed by checkpoint
identity, settings checked on rerun, swapped unit files redone, run.json under a lock."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from biasscope.cli.main import main
from biasscope.store.directory import CorruptUnitWarning, RunStore
from biasscope.store.units import Unit

pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def no_report(monkeypatch):
    """Reports have their own tests; these check the run directory."""
    import biasscope.dynamics.summary.write as reporting

    monkeypatch.setattr(reporting, "write_dynamics_report",
                        lambda run, *_, **__: Path(getattr(run, "root", run)) / "r.html")


def copy_ckpt(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def run(out: Path, data: Path, *args: str, seeds: str = "0", limit: str = "6") -> int:
    return main(["dynamics", "--data-dir", str(data), "--out", str(out), "--seeds", seeds,
                 "--limit", limit, "--quiet", "--device", "cpu", *args])


def units(out: Path) -> list[Path]:
    return sorted((out / "records").glob("*.parquet"))


def test_same_named_checkpoint_dirs_of_two_runs_are_two_checkpoints(
        checkpoint_dirs, winobias_dir, tmp_path):
    """seed1/out/checkpoint-10 and seed2/out/checkpoint-10 hold different weights."""
    for seed, weights in (("seed1", checkpoint_dirs[0]), ("seed2", checkpoint_dirs[1])):
        copy_ckpt(weights, tmp_path / seed / "out" / "checkpoint-10")
    out = tmp_path / "run"
    globs = [a for s in ("seed1", "seed2")
             for a in ("--checkpoint-glob", str(tmp_path / s / "out" / "checkpoint-*"))]
    assert run(out, winobias_dir, *globs) == 0
    assert len(units(out)) == 2
    records = RunStore(out).records()
    assert sorted(records["model"].unique()) == ["seed1/out", "seed2/out"]
    by_model = {m: f.sort_values("item_id")["target_rank"].tolist()
                for m, f in records.groupby("model")}
    assert by_model["seed1/out"] != by_model["seed2/out"]  # both really scored
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(c["model"] for c in summary["checkpoints"]) == ["seed1/out", "seed2/out"]
    listed = json.loads((out / "run.json").read_text())["checkpoints"]
    assert len({c["identity"] for c in listed}) == 2
    # A rerun with a third run folder finds the two done and names the third apart too.
    copy_ckpt(checkpoint_dirs[2], tmp_path / "seed3" / "out" / "checkpoint-10")
    stamps = {p: p.stat().st_mtime_ns for p in units(out)}
    assert run(out, winobias_dir, *globs, "--checkpoint-glob",
               str(tmp_path / "seed3" / "out" / "checkpoint-*")) == 0
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    assert sorted(RunStore(out).records()["model"].unique()) == [
        "seed1/out", "seed2/out", "seed3/out"]


def test_two_local_models_with_the_same_folder_name(checkpoint_dirs, winobias_dir, tmp_path):
    a = copy_ckpt(checkpoint_dirs[0], tmp_path / "a" / "final")
    b = copy_ckpt(checkpoint_dirs[1], tmp_path / "b" / "final")
    out = tmp_path / "run"
    assert run(out, winobias_dir, "--model", str(a), "--model", str(b)) == 0
    assert len(units(out)) == 2
    assert sorted(RunStore(out).records()["model"].unique()) == ["a/final", "b/final"]


def test_a_linked_checkpoint_folder_is_named_after_the_glob_not_the_link_target(
        checkpoint_dirs, winobias_dir, tmp_path):
    """ck/checkpoint-10 (a folder) and ck/checkpoint-20 (a link to a checkpoint shared from
    another experiment): one model named after ck, two steps; the link's weights are keyed by
    where they are, so a rerun finds both done."""
    copy_ckpt(checkpoint_dirs[0], tmp_path / "ck" / "checkpoint-10")
    shared = copy_ckpt(checkpoint_dirs[1], tmp_path / "shared" / "exp1" / "checkpoint-20")
    (tmp_path / "ck" / "checkpoint-20").symlink_to(shared, target_is_directory=True)
    out = tmp_path / "run"
    glob = str(tmp_path / "ck" / "checkpoint-*")
    assert run(out, winobias_dir, "--checkpoint-glob", glob) == 0
    records = RunStore(out).records()
    assert {m: sorted(f["step"].unique()) for m, f in records.groupby("model")} == {
        "ck": [10, 20]}
    listed = json.loads((out / "run.json").read_text())["checkpoints"]
    assert {c["identity"] for c in listed} == {
        str((tmp_path / "ck" / "checkpoint-10").resolve()), str(shared.resolve())}
    summary = json.loads((out / "summary.json").read_text())
    assert {c["model"] for c in summary["checkpoints"]} == {"ck"}
    stamps = {p: p.stat().st_mtime_ns for p in units(out)}
    assert run(out, winobias_dir, "--checkpoint-glob", glob) == 0
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())


def test_clashing_names_the_user_chose_are_refused(checkpoint_dirs, winobias_dir, tmp_path,
                                                   capsys):
    for seed, weights in (("s1", checkpoint_dirs[0]), ("s2", checkpoint_dirs[1])):
        copy_ckpt(weights, tmp_path / seed / "checkpoint-10")
    code = run(tmp_path / "run", winobias_dir,
               "--checkpoint-glob", f"m={tmp_path / 's1' / 'checkpoint-*'}",
               "--checkpoint-glob", f"m={tmp_path / 's2' / 'checkpoint-*'}")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "would both be m@checkpoint-10" in err[0]


@pytest.mark.parametrize("name", [".hidden", "x" * 300])
def test_odd_model_names_make_valid_bounded_unit_files(checkpoint_dirs, winobias_dir,
                                                       tmp_path, name):
    out = tmp_path / "run"
    glob = f"{name}={checkpoint_dirs[0].parent / 'checkpoint-1*'}"
    assert run(out, winobias_dir, "--checkpoint-glob", glob) == 0
    (unit,) = units(out)
    assert not unit.name.startswith(".") and len(unit.name) < 200
    assert set(RunStore(out).records()["model"]) == {name}
    stamp = unit.stat().st_mtime_ns
    assert run(out, winobias_dir, "--checkpoint-glob", glob) == 0  # found done, not redone
    assert units(out) == [unit] and unit.stat().st_mtime_ns == stamp


def make_legacy(out: Path) -> None:
    """Turn a run into what biasscope wrote before identities: units keyed by name and
    revision, no checkpoint column, run.json entries without identity."""
    store = RunStore(out)
    for path in units(out):
        frame = pd.read_parquet(path).drop(columns="checkpoint")
        head = frame.iloc[0]
        old = Unit(head["model"], head["revision"], head["probe"], int(head["seed"]),
                   int(head["step"]))
        path.unlink()
        (out / "checksums" / f"{path.name}.sha256").unlink()
        store.write_unit(old, frame)
    meta = json.loads((out / "run.json").read_text())
    for entry in meta["checkpoints"]:
        del entry["identity"]
    del meta["settings"]["limit"], meta["settings"]["data"]
    (out / "run.json").write_text(json.dumps(meta))


def test_a_run_from_before_identities_is_rekeyed_not_redone(checkpoint_dirs, winobias_dir,
                                                            tmp_path):
    out = tmp_path / "run"
    glob = ["--checkpoint-glob", str(checkpoint_dirs[0].parent / "checkpoint-*")]
    assert run(out, winobias_dir, *glob) == 0
    fresh = units(out)
    make_legacy(out)
    legacy = units(out)
    assert len(legacy) == 3 and set(legacy).isdisjoint(fresh)
    before = RunStore(out).records().sort_values(["step", "item_id"]).reset_index(drop=True)
    assert run(out, winobias_dir, *glob) == 0
    assert units(out) == fresh  # the same three units, under their identity keys
    after = RunStore(out).records().sort_values(["step", "item_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(before, after)  # renamed, not rescored
    assert all(c.get("identity") for c in json.loads((out / "run.json").read_text())[
        "checkpoints"])


def test_a_legacy_unit_two_checkpoints_shared_is_set_aside_and_both_redone(
        checkpoint_dirs, winobias_dir, tmp_path):
    for seed, weights in (("seed1", checkpoint_dirs[0]), ("seed2", checkpoint_dirs[1])):
        copy_ckpt(weights, tmp_path / seed / "out" / "checkpoint-10")
    out = tmp_path / "run"
    one = ["--checkpoint-glob", str(tmp_path / "seed1" / "out" / "checkpoint-*")]
    assert run(out, winobias_dir, *one) == 0
    make_legacy(out)
    meta = json.loads((out / "run.json").read_text())
    entry = meta["checkpoints"][0]
    assert entry["model"] == "out"  # the old default name, shared by both run folders
    meta["checkpoints"].append({**entry, "source": str(tmp_path / "seed2" / "out" /
                                                       "checkpoint-10")})
    (out / "run.json").write_text(json.dumps(meta))
    both = [*one, "--checkpoint-glob", str(tmp_path / "seed2" / "out" / "checkpoint-*")]
    with pytest.warns(CorruptUnitWarning, match="gave the checkpoints"):
        assert run(out, winobias_dir, *both) == 0
    assert len(units(out)) == 2 and len(list((out / "records").glob("*.corrupt-1"))) == 1
    assert sorted(RunStore(out).records()["model"].unique()) == ["seed1/out", "seed2/out"]


@pytest.mark.parametrize("change", ["limit", "data", "emptied"])
def test_a_rerun_with_other_limit_or_data_is_refused(checkpoint_dirs, winobias_dir, tmp_path,
                                                     capsys, change):
    data = tmp_path / "data"
    shutil.copytree(winobias_dir, data)
    out = tmp_path / "run"
    glob = ["--checkpoint-glob", str(checkpoint_dirs[0].parent / "checkpoint-1*")]
    assert run(out, data, *glob) == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in units(out)}
    target = data / "winobias" / "pro_stereotyped_type2.txt.test"
    limit = "4" if change == "limit" else "6"
    if change == "data":  # same count of sentences, one occupation swapped for another
        target.write_text(target.read_text().replace("nurse", "cashier", 1))
    elif change != "limit":
        target.write_text("")
    code = run(out, data, *glob, limit=limit)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    wanted = {"limit": "made with --limit 6, and this call gives --limit 4",
              "data": f"{out} was made from another winobias/pro_stereotyped_type2.txt.test "
                      f"({target}: SHA-256 ",
              "emptied": "pro_stereotyped_type2.txt.test: no sentences found"}[change]
    # an emptied file is refused as it is read, before the settings are compared
    assert wanted in err[0] and ("another --out" in err[0] or change == "emptied")
    assert {p: p.read_bytes() for p in units(out)} == before


def test_a_data_file_edited_past_the_limit_is_refused_before_a_checkpoint_loads(
        checkpoint_dirs, winobias_dir, tmp_path, capsys, monkeypatch):
    """Before: "… was made with different settings of data file '…' (…); use another --out
    or the same settings", once the sweep had begun. Now the whole file's SHA-256 is checked
    as an audit checks it, before any checkpoint loads, past --limit's items too."""
    data = tmp_path / "data"
    shutil.copytree(winobias_dir, data)
    out = tmp_path / "run"
    glob = ["--checkpoint-glob", str(checkpoint_dirs[0].parent / "checkpoint-1*")]
    assert run(out, data, *glob, limit="2") == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    target = data / "winobias" / "anti_stereotyped_type2.txt.test"
    text = target.read_text()  # the last sentence, past --limit 2's items
    target.write_text(text.replace("the best course", "the right course"))
    assert target.read_text() != text
    loads: list[object] = []
    monkeypatch.setattr("biasscope.dynamics.scoring.sweep.iter_scorers",
                        lambda *a: loads.append(a) or iter(()))
    assert run(out, data, *glob, limit="2") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert (f"{out} was made from another winobias/{target.name} ({target}: SHA-256 "
            in err[0]) and "put back the file it was made from, or use another --out" in err[0]
    assert loads == []
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_run_from_before_limits_were_settings_checks_its_limit(
        checkpoint_dirs, winobias_dir, tmp_path, capsys):
    out = tmp_path / "run"
    glob = ["--checkpoint-glob", str(checkpoint_dirs[0].parent / "checkpoint-1*")]
    assert run(out, winobias_dir, *glob) == 0
    make_legacy(out)
    assert run(out, winobias_dir, *glob, limit="5") == 2
    assert "made with --limit 6, and this call gives --limit 5" in capsys.readouterr().err


def test_a_limit_added_to_an_unlimited_run_is_refused_naming_the_flag(
        checkpoint_dirs, winobias_dir, tmp_path, capsys):
    """Before: "different settings of probe 'winobias-gender' (limit_sample: not recorded
    then, … now; and 1 more)", naming a key the user never wrote."""
    args = ["dynamics", "--data-dir", str(winobias_dir), "--out", str(tmp_path / "run"),
            "--seeds", "0", "--quiet", "--device", "cpu", "--checkpoint-glob",
            str(checkpoint_dirs[0].parent / "checkpoint-1*")]
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, "--limit", "4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"biasscope: error: {tmp_path / 'run' / 'run.json'} was made without "
                   "--limit, and this call gives --limit 4: its records are of those items, so "
                   "give no --limit again, or use another --out"]


# --- swapped unit files ----------------------------------------------------------------------


def unit_frame(unit: Unit) -> pd.DataFrame:
    return pd.DataFrame({"model": unit.model, "revision": unit.revision, "step": unit.step,
                         "probe": unit.probe, "seed": unit.seed, "checkpoint": unit.checkpoint,
                         "item_id": [f"i{k}" for k in range(3)],
                         "value": [unit.seed * 10 + k for k in range(3)]}).astype(
                             {"step": "Int64"})


UNITS = [Unit("m", "checkpoint-5", "p", seed, 5, **{"checkpoint": "/runs/m/checkpoint-5"})
         for seed in range(2)] if "checkpoint" in Unit.__dataclass_fields__ else []


@pytest.fixture
def swapped(tmp_path: Path, request: pytest.FixtureRequest) -> RunStore:
    """Unit 1's file replaced by unit 0's (with its checksum, or with none)."""
    store = RunStore(tmp_path / "run")
    for unit in UNITS:
        store.write_unit(unit, unit_frame(unit))
    shutil.copyfile(store.unit_path(UNITS[0]), store.unit_path(UNITS[1]))
    digest = store.checksum_path(UNITS[0]).read_text().split()[0]
    if request.param == "with checksum":
        store.checksum_path(UNITS[1]).write_text(f"{digest}  {UNITS[1].key}.parquet\n")
    else:
        store.checksum_path(UNITS[1]).unlink()
    return RunStore(store.root)


@pytest.mark.parametrize("swapped", ["with checksum", "without checksum"], indirect=True)
def test_has_refuses_a_unit_file_that_holds_another_unit(swapped: RunStore) -> None:
    assert swapped.has(UNITS[0])
    with pytest.warns(CorruptUnitWarning, match="another unit's records: seed=0"):
        assert not swapped.has(UNITS[1])
    assert not swapped.unit_path(UNITS[1]).exists()
    swapped.write_unit(UNITS[1], unit_frame(UNITS[1]))
    assert sorted(swapped.records()["seed"]) == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize("swapped", ["with checksum"], indirect=True)
def test_reading_sets_aside_a_unit_file_under_another_units_name(swapped: RunStore) -> None:
    with pytest.warns(CorruptUnitWarning, match=UNITS[1].key):
        records = swapped.records()
    assert list(records["seed"]) == [0, 0, 0]  # never counted twice
    assert len(swapped.unit_files()) == 1


def test_other_run_kinds_units_are_still_accepted(tmp_path: Path) -> None:
    """Sensitivity records carry a 'revision' column of their own (the revised text)."""
    store = RunStore(tmp_path / "run")
    unit = Unit("rm", None, "sensitivity-away", 0)
    store.write_unit(unit, pd.DataFrame({"model": ["rm"], "revision": ["a revised answer"]}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RunStore(store.root).has(unit) and len(RunStore(store.root).records()) == 1


def test_dynamics_redoes_a_swapped_unit(checkpoint_dirs, winobias_dir, tmp_path):
    out = tmp_path / "run"
    glob = ["--checkpoint-glob", str(checkpoint_dirs[0].parent / "checkpoint-1*")]
    assert run(out, winobias_dir, *glob, seeds="0-1") == 0
    clean = RunStore(out).records().sort_values(["seed", "item_id"]).reset_index(drop=True)
    seed0, seed1 = sorted(units(out), key=lambda p: pd.read_parquet(p)["seed"].iloc[0])
    shutil.copyfile(seed0, seed1)
    shutil.copyfile(out / "checksums" / f"{seed0.name}.sha256",
                    out / "checksums" / f"{seed1.name}.sha256")
    with pytest.warns(CorruptUnitWarning):
        assert run(out, winobias_dir, *glob, seeds="0-1") == 0
    redone = RunStore(out).records().sort_values(["seed", "item_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(clean, redone)


# --- tokenizers ------------------------------------------------------------------------------


def test_a_sweep_loads_one_tokenizer_for_checkpoints_that_share_it(checkpoint_dirs, tmp_path,
                                                                   monkeypatch):
    from biasscope.backends import hf
    from biasscope.backends.checkpoints import from_dirs

    loads: list[str] = []
    real = hf.load_tokenizer

    def counted(ckpt, options):
        loads.append(ckpt.source)
        return real(ckpt, options)

    monkeypatch.setattr(hf, "load_tokenizer", counted)
    other = copy_ckpt(checkpoint_dirs[0], tmp_path / "other" / "checkpoint-40")
    config = json.loads((other / "tokenizer_config.json").read_text())
    (other / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 7}))
    checkpoints = from_dirs(checkpoint_dirs) + from_dirs([other])
    scorers = list(hf.iter_scorers(checkpoints, hf.HFConfig(device="cpu")))
    assert len(loads) == 2  # three identical tokenizers loaded once, the changed one apart
    first, *rest, changed = [s.tokenizer for s in scorers]
    assert all(t is first for t in rest) and changed is not first


def test_a_rerun_without_a_listed_checkpoint_says_the_run_is_unfinished(
        checkpoint_dirs, winobias_dir, tmp_path, capsys, monkeypatch):
    """A checkpoint run.json lists that a later call was not given (deleted, moved, another
    glob) has no records: the sweep ended with its "run:" line alone, as if the run were
    whole; only the report said so."""
    monkeypatch.undo()  # the real report: it writes the summary.json the warning is read from
    folder = tmp_path / "out"
    copy_ckpt(checkpoint_dirs[0], folder / "checkpoint-10")
    broken = copy_ckpt(checkpoint_dirs[1], folder / "checkpoint-20")
    for weights in broken.glob("*.safetensors"):
        weights.write_bytes(weights.read_bytes()[:100])  # a copy cut short: it does not load
    out = tmp_path / "run"
    glob = ("--checkpoint-glob", str(folder / "checkpoint-*"))
    assert run(out, winobias_dir, *glob) != 0
    listed = json.loads((out / "run.json").read_text())["checkpoints"]
    assert len(listed) == 2 and len(units(out)) == 1, listed
    capsys.readouterr()
    shutil.rmtree(broken)  # given up on: the rerun covers what is left
    assert run(out, winobias_dir, *glob) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: Unfinished: 1 of 2 checkpoints in run.json fully scored; "
                          "no records yet for step 20.") and f"--out {out} again" in err, err
