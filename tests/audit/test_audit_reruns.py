"""`biasscope audit` runs that cannot lie: failed requests are no answers (retried on a rerun,
counted, non-zero exit), and a rerun with other settings is refused instead of mixing results."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from adult_fixture import ROWS
from adult_fixture import write as write_adult
from biasscope.audit.harness import StoredResponses, run_audit
from biasscope.cli.main import main
from biasscope.core.digest import file_sha256
from biasscope.core.errors import BiasscopeError
from biasscope.probes import load_probe
from biasscope.store.directory import RunStore
from biasscope.store.run_json import OtherVersionsWarning
from scripted_server import Reply, chat, serve

PROBE = "professional-bias"
FAST = ["--retries", "0", "--timeout", "5", "--concurrency", "2"]


def probe_cmd(url: str, out: Path, cache: Path, *extra: str) -> list[str]:
    return ["audit", "--model", f"openai-compatible:{url}#m", "--probe", PROBE, "--out",
            str(out), "--cache", str(cache), "--limit", "8", *FAST, *extra]


def test_failed_requests_are_counted_left_out_and_retried_on_a_rerun(tmp_path, capsys):
    broken = {"on": True}

    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if broken["on"] and n <= 3:
            return Reply(400, {"error": {"message": "context length exceeded"}})
        return Reply(body=chat("The doctor."))

    out, cache = tmp_path / "run", tmp_path / "cache.sqlite"
    with serve(script) as server:
        code = main(probe_cmd(server.base_url, out, cache))
        err = capsys.readouterr().err
        assert code == 1, err
        assert "3 of 8 requests failed" in err and "rerun the same command" in err
        assert "Traceback" not in err
        assert RunStore(out).unit_files() == []  # nothing stored as an answer
        summary = json.loads((out / "summary.json").read_text())
        entry = summary["probes"][PROBE]
        assert summary["failed_requests"] == 3 and summary["requests"] == 8
        # Failures are neither items nor unparsed answers: only the 5 answers count.
        assert entry["incomplete"] and entry["failed"] == 3
        assert entry["items"] == 5 and entry["no_response"] == 0
        assert "3 of 8 requests failed" in entry["sentences"][0]
        assert "Incomplete" in (out / "report.html").read_text()

        broken["on"] = False
        before = len(server.generation_calls())
        assert main(probe_cmd(server.base_url, out, cache)) == 0, capsys.readouterr().err
        assert len(server.generation_calls()) - before == 3  # only the failed ones again
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed_requests"] == 0 and "incomplete" not in summary["probes"][PROBE]
    recs = RunStore(out).records()
    assert len(recs) == 8 and recs["error"].isna().all() and recs["response"].notna().all()


def test_a_new_run_that_fails_before_any_answer_leaves_no_run_json(tmp_path, capsys):
    """Before: run.json was written first, so after "does not serve 'typo'" the corrected
    command was refused for a changed model, in a run that held nothing."""
    out, cache = tmp_path / "run", tmp_path / "cache.sqlite"
    with serve(lambda path, body, n: Reply(body=chat("The doctor."))) as server:
        typo = probe_cmd(server.base_url, out, cache)
        typo[typo.index("--model") + 1] = f"openai-compatible:{server.base_url}#typo"
        assert main(typo) == 2
        assert "does not serve 'typo'" in capsys.readouterr().err
        assert not (out / "run.json").exists()
        assert main(probe_cmd(server.base_url, out, cache)) == 0, capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["model"].endswith("m")
    assert len(RunStore(out).records()) == 8


def test_a_new_run_whose_every_request_failed_leaves_nothing_to_refuse_the_fix(tmp_path, capsys):
    """Before: run.json was written though no answer came back, so the corrected command
    (another --max-tokens after "max_tokens too large") was refused: "use another --out"."""
    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if body.get("max_tokens", 0) > 1000:
            return Reply(400, {"error": {"message": "max_tokens too large"}})
        return Reply(body=chat("The doctor."))

    out, cache = tmp_path / "run", tmp_path / "cache.sqlite"
    with serve(script) as server:
        assert main(probe_cmd(server.base_url, out, cache, "--max-tokens", "5000")) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert "all 8 requests failed" in err and "max_tokens too large" in err
        assert not out.exists() or not {p.name for p in out.iterdir()} & {
            "run.json", "summary.json", "report.html"}
        assert main(probe_cmd(server.base_url, out, cache)) == 0, capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["responder"]["params"]["max_tokens"] == 64
    assert len(RunStore(out).records()) == 8


def test_stored_responses_missing_an_id_are_no_failure(tmp_path):
    """An id a responses file lacks is an answer that does not exist, not a request to retry."""
    probe = load_probe(PROBE)
    items = probe.items(0)[:4]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"item_id": i.id, "response": "x"}) + "\n"
                            for i in items[:3]))
    store = run_audit([probe], StoredResponses(path), tmp_path / "run", limit=4)
    assert len(store.records()) == 4
    summary = json.loads(store.summary_json.read_text())
    assert summary["failed_requests"] == 0 and summary["probes"][PROBE]["no_response"] == 1
    # Before: "1 requests failed", though no request was made (and a rerun sends none).
    said = " ".join(summary["probes"][PROBE]["sentences"])
    assert "requests failed" not in said and "1 had no response" in said


def test_bbq_says_a_missing_response_is_no_failed_request(tmp_path):
    from bbq_fixture import write_bbq

    probe = load_probe("bbq", data_dir=write_bbq(tmp_path / "data"), categories="Age")
    items = probe.items(0)
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"item_id": i.id, "response": "(c)"}) + "\n"
                            for i in items[:-2]))
    store = run_audit([probe], StoredResponses(path), tmp_path / "run")
    summary = json.loads(store.summary_json.read_text())
    said = " ".join(summary["probes"]["bbq"]["sentences"])
    assert summary["failed_requests"] == 0
    assert "requests failed" not in said and "2 had no response" in said


def _responses(path: Path, text: str, n: int = 6) -> Path:
    items = load_probe(PROBE).items(0)[:n]
    path.write_text("".join(json.dumps({"item_id": i.id, "response": text}) + "\n"
                            for i in items))
    return path


def _probe(responses: Path, out: Path, *extra: str) -> list[str]:
    return ["audit", "--responses", str(responses), "--probe", PROBE, "--out", str(out),
            "--name", "mine", *extra]


def test_a_changed_responses_file_of_the_same_name_is_refused(tmp_path, capsys):
    responses, out = _responses(tmp_path / "r.jsonl", "The doctor."), tmp_path / "run"
    assert main(_probe(responses, out, "--limit", "6")) == 0
    assert main(_probe(responses, out, "--limit", "6")) == 0  # the same: resumes
    _responses(responses, "The nurse.")
    capsys.readouterr()
    assert main(_probe(responses, out, "--limit", "6")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "responder.responses_sha256" in err
    assert "use another --out" in err
    labels = set(RunStore(out).records()["response"])
    assert labels == {"The doctor."}  # the old results were not mixed with the new file


def test_another_limit_model_or_scoring_is_refused(tmp_path, capsys):
    responses, out = _responses(tmp_path / "r.jsonl", "The doctor."), tmp_path / "run"
    assert main(_probe(responses, out, "--limit", "6")) == 0
    capsys.readouterr()
    assert main(_probe(responses, out, "--limit", "4")) == 2
    assert "a different 'limit' (6 then, 4 now)" in capsys.readouterr().err
    assert main(["audit", "--responses", str(responses), "--probe", PROBE, "--out", str(out),
                 "--name", "other", "--limit", "6"]) == 2
    assert "a different 'model'" in capsys.readouterr().err
    run = json.loads((out / "run.json").read_text())
    assert run["limit"] == 6 and run["responder"]["scoring"] == "stored"
    assert len(run["responder"]["responses_sha256"]) == 64
    assert len(run["probes"][PROBE]["items_sha256"]) == 64


def _adult_run(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """`probe` arguments answering every Adult item 'yes' from a file, with the data dir and
    the run directory they use."""
    data = tmp_path / "data"
    write_adult(data, ROWS)
    adult = load_probe("adult-counterfactual", data_dir=data)
    responses = tmp_path / "r.jsonl"
    responses.write_text("".join(json.dumps({"item_id": i.id, "response": "yes"}) + "\n"
                                 for i in adult.items(0)))
    out = tmp_path / "run"
    return (["audit", "--responses", str(responses), "--out", str(out), "--data-dir", str(data)],
            data, out)


def test_a_tampered_data_file_is_refused_and_probes_may_be_added(tmp_path, capsys):
    args, data, out = _adult_run(tmp_path)
    assert main([*args, "--probe", "adult-counterfactual"]) == 0
    # A probe may join the run; the one recorded must stay the same.
    assert main([*args, "--probe", "adult-counterfactual,professional-bias"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert set(run["probes"]) == {"adult-counterfactual", "professional-bias"}
    [source] = list((data / "decodingtrust").glob("*0.5*"))
    lines = source.read_text().splitlines()
    source.write_text("\n".join(lines[:-1]) + "\n")  # one prompt fewer
    capsys.readouterr()
    assert main([*args, "--probe", "adult-counterfactual"]) == 2
    err = capsys.readouterr().err
    assert f"was made from another decodingtrust/{source.name}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def _no_model(*_: Any) -> Any:
    raise AssertionError("the model was asked for")


def test_an_own_data_file_edited_outside_the_limit_is_refused(tmp_path, capsys, monkeypatch):
    """Before: run.json recorded the SHA-256 of the items ``--limit`` kept, so an edit to the
    own data file (BIASSCOPE_OWN_DATA, set for the tests) past them resumed the run as made
    from it. The whole file's SHA-256 is recorded and checked."""
    args, data, out = _adult_run(tmp_path)
    args = [*args, "--probe", "adult-counterfactual", "--limit", "2"]  # the first pair only
    assert main(args) == 0
    [source] = list((data / "decodingtrust").glob("*0.5*"))
    run = json.loads((out / "run.json").read_text())
    assert run["data"] == {f"decodingtrust/{source.name}": file_sha256(source)}
    assert main(args) == 0  # the same file: resumes
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    source.write_text(source.read_text().replace("age 36", "age 37"))  # its last prompt
    capsys.readouterr()
    with monkeypatch.context() as patched:  # refused before a model would load
        patched.setattr("biasscope.audit.job.responder", _no_model)
        assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{out} was made from another decodingtrust/{source.name} ({source}:" in err
    assert "put back the file it was made from, or use another --out" in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    other = tmp_path / "edited"  # compare says the two runs were read from other files
    assert main([str(other) if a == str(out) else a for a in args]) == 0
    capsys.readouterr()
    assert main(["compare", str(out), str(other), "--out", str(tmp_path / "cmp")]) == 0
    assert f"the runs differ in data file decodingtrust/{source.name}" in capsys.readouterr().out
    source.write_text(source.read_text().replace("age 37", "age 36"))
    assert main(args) == 0  # the file it was made from again: resumes


def test_a_probe_added_or_rerun_alone_keeps_the_others_in_the_summary(tmp_path, capsys):
    """Before: summary.json and the report held only the probes of the last call, though
    run.json and records/ held them all."""
    args, _, out = _adult_run(tmp_path)
    assert main([*args, "--probe", "adult-counterfactual"]) == 0
    assert main([*args, "--probe", "professional-bias,adult-counterfactual"]) == 0
    first = json.loads((out / "summary.json").read_text())["probes"]
    assert main([*args, "--probe", "adult-counterfactual"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["probes"]) == ["adult-counterfactual", "professional-bias"]
    assert summary["probes"] == first
    assert main(["report", str(out)]) == 0, capsys.readouterr().err
    page = (out / "report.html").read_text()
    assert "adult-counterfactual" in page and "professional-bias" in page


def test_a_folder_with_a_summary_but_no_run_json_is_not_written_over(tmp_path, capsys):
    args, _, out = _adult_run(tmp_path)
    out.mkdir()
    (out / "summary.json").write_text('{"mine": true}\n')
    assert main([*args, "--probe", "adult-counterfactual"]) == 2
    err = capsys.readouterr().err
    assert "holds summary.json but no run.json" in err and err.count("\n") == 1, err
    assert (out / "summary.json").read_text() == '{"mine": true}\n'
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]


def test_an_audit_records_its_versions_and_compare_notes_where_they_differ(tmp_path, capsys):
    """Before: an audit's run.json held no library versions, so compare of two audits said
    nothing of a biasscope or torch upgrade between them, as it does of two sweeps'."""
    args, _, out = _adult_run(tmp_path)
    assert main([*args, "--probe", "adult-counterfactual"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert set(run["versions"]) == {"python", "biasscope"}  # no local model: no torch
    other = tmp_path / "other"
    shutil.copytree(out, other)
    run["versions"].update(biasscope="0.0.1", torch="2.4.0")  # torch: in one run only
    (other / "run.json").write_text(json.dumps(run))
    capsys.readouterr()
    assert main(["compare", str(out), str(other), "--out", str(tmp_path / "cmp")]) == 0
    mine = json.loads((out / "run.json").read_text())["versions"]["biasscope"]
    note = f"the runs differ in biasscope version: {mine} vs 0.0.1."
    assert [line for line in capsys.readouterr().out.splitlines() if "differ in" in line] == [
        note]


def test_versions_are_gained_by_an_older_audit_and_another_version_is_not_refused(tmp_path):
    """An audit from before versions were recorded resumes and gains them; a rerun under
    other versions resumes too (an upgrade locks no one out of a run), run.json keeping the
    ones the run was made with, and says so."""
    args, _, out = _adult_run(tmp_path)
    probe = [*args, "--probe", "adult-counterfactual"]
    assert main(probe) == 0
    run = json.loads((out / "run.json").read_text())
    now = run.pop("versions")
    (out / "run.json").write_text(json.dumps(run))  # as an older biasscope wrote it
    assert main(probe) == 0
    assert json.loads((out / "run.json").read_text())["versions"] == now
    (out / "run.json").write_text(json.dumps({**run, "versions": {**now, "biasscope": "0.0.1"}}))
    with pytest.warns(OtherVersionsWarning, match=rf"biasscope 0\.0\.1\); this call runs "
                      rf"biasscope {re.escape(now['biasscope'])}, and what it adds"):
        assert main([*args, "--probe", "adult-counterfactual,professional-bias"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["versions"]["biasscope"] == "0.0.1" and set(run["probes"]) == {
        "adult-counterfactual", "professional-bias"}


def test_a_run_of_another_kind_is_refused(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"kind": "judge", "model": "mine"}))
    with pytest.raises(BiasscopeError, match=r"is not an audit run \(judge\); use another"):
        run_audit([load_probe(PROBE)],
                  StoredResponses(_responses(tmp_path / "r.jsonl", "x"), "mine"), out)


def _add_probe(args: list[str], codes: Any, barrier: Any) -> None:
    import biasscope.audit.harness as audit_run

    real = audit_run.merge_settings

    def slow(*a: Any, **k: Any) -> Any:  # widen the read-check-rewrite window
        import time

        time.sleep(0.3)
        return real(*a, **k)

    audit_run.merge_settings = slow  # type: ignore[assignment]
    barrier.wait()
    codes.put(main(args))


@pytest.mark.parametrize("trial", range(3))
def test_two_probes_started_together_both_land_in_run_json(tmp_path, trial):
    """Before: both read run.json, each rewrote it with only its own probe added."""
    from together import CTX, together

    args, _, out = _adult_run(tmp_path)
    assert main([*args, "--probe", "adult-counterfactual"]) == 0
    codes = CTX.Queue()
    together(_add_probe, [([*args, "--probe", probes], codes) for probes in (
        "adult-counterfactual,professional-bias", "adult-counterfactual")])
    assert sorted([codes.get(), codes.get()]) == [0, 0]
    run = json.loads((out / "run.json").read_text())
    assert set(run["probes"]) == {"adult-counterfactual", "professional-bias"}
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["probes"]) == {"adult-counterfactual", "professional-bias"}


def test_an_added_measurement_is_gained_by_an_older_run_not_refused(tmp_path: Path) -> None:
    """A sensitivity run made before the reward-model sanity check existed gains it on rerun
    (its records were made under no other value); once recorded, a change is refused."""
    from biasscope.store.settings import merge_settings

    before = {"prompts": {"n": 2}}
    now = {"prompts": {"n": 2}, "sanity": {"pairs": 500}}
    assert merge_settings(tmp_path, before, now, added=("sanity",))["sanity"] == {"pairs": 500}
    with pytest.raises(BiasscopeError, match="different 'sanity'"):
        merge_settings(tmp_path, before, now)
    with pytest.raises(BiasscopeError, match="different 'sanity'"):
        merge_settings(tmp_path, now, {**now, "sanity": {"pairs": 10}}, added=("sanity",))


def test_a_local_model_run_from_before_fingerprints_resumes_and_gains_one(
        tmp_path, capsys, checkpoint_dirs, monkeypatch):
    """A run made before a local model's identity carried its weights' fingerprint resumes
    (as dynamics trusts such a run's checkpoints) and records it; other weights under the
    same path are refused from then on."""

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    model, out = tmp_path / "model", tmp_path / "run"
    shutil.copytree(checkpoint_dirs[0], model)
    args = ["audit", "--model", str(model), "--probe", PROBE, "--limit", "4", "--out",
            str(out), "--device", "cpu", "--no-cache"]
    assert main(args) == 0, capsys.readouterr().err
    run = json.loads((out / "run.json").read_text())
    backend = run["responder"]["backend"]
    fingerprint, dtype = backend.pop("fingerprint"), backend.pop("dtype")
    (out / "run.json").write_text(json.dumps(run))  # as an older biasscope wrote it
    assert main(args) == 0, capsys.readouterr().err
    again = json.loads((out / "run.json").read_text())["responder"]["backend"]
    assert (again["fingerprint"], again["dtype"]) == (fingerprint, dtype)
    assert dtype == "float32"
    shutil.rmtree(model)
    shutil.copytree(checkpoint_dirs[1], model)
    capsys.readouterr()
    assert main(args) == 2
    assert "fingerprint" in capsys.readouterr().err


def test_a_model_without_a_chat_template_is_recorded_so_and_old_runs_gain_it(
        tmp_path, capsys, checkpoint_dirs, monkeypatch):
    """A local model without a chat template reads a chat as the plain prompt that
    --plain-prompt sends; run.json says so (``chat_template: false``), and a run recorded
    before it did resumes and gains it."""
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    out = tmp_path / "run"
    args = ["audit", "--model", str(checkpoint_dirs[0]), "--probe", PROBE, "--limit", "4",
            "--out", str(out), "--device", "cpu", "--no-cache"]
    assert main(args) == 0, capsys.readouterr().err
    run = json.loads((out / "run.json").read_text())
    assert run["responder"].pop("chat_template") is False
    assert {"biasscope", "torch", "transformers", "tokenizers"} <= set(run["versions"])
    (out / "run.json").write_text(json.dumps(run))  # as an older biasscope wrote it
    assert main(args) == 0, capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["responder"]["chat_template"] is False


def test_a_unit_cut_short_without_its_checksum_is_redone(tmp_path, capsys):
    """A unit file holds one record per item asked: one holding fewer (a copy cut short, its
    checksum lost) was taken for finished and summarised as the whole probe."""
    import pandas as pd

    args, _, out = _adult_run(tmp_path)
    assert main([*args, "--probe", "adult-counterfactual"]) == 0
    (path,) = RunStore(out).unit_files()
    whole = pd.read_parquet(path)
    whole.iloc[: len(whole) // 2].to_parquet(path)
    for checksum in (out / "checksums").iterdir():
        checksum.unlink()
    from biasscope.store.directory import CorruptUnitWarning

    with pytest.warns(CorruptUnitWarning, match="it holds 3 records, the unit asks 6"):
        assert main([*args, "--probe", "adult-counterfactual"]) == 0
    assert len(RunStore(out).records()) == len(whole)
    assert list((out / "records").glob("*.corrupt-1"))


def _slow_partial_report(args: list[str], late: float, codes: Any, barrier: Any) -> None:
    """A run, started ``late`` seconds after the barrier, whose report, rendered without one
    of the probes, is slow to write: what another run writes meanwhile must not be replaced
    by a report of an older summary."""
    import time

    import biasscope.audit.harness as audit_run
    import biasscope.report.audit as audit_report

    def slow(path: Path, data: bytes) -> None:
        if path.name == "report.html" and not all(
                f"<h2>{p}</h2>".encode() in data for p in ("adult-counterfactual", PROBE)):
            time.sleep(2.0)
        real(path, data)

    real = audit_report.write_bytes
    for module in (audit_run, audit_report):
        if hasattr(module, "write_bytes"):
            module.write_bytes = slow  # type: ignore[attr-defined]
    barrier.wait()
    time.sleep(late)
    codes.put(main(args))


@pytest.mark.parametrize("trial", range(2))
def test_the_report_says_what_summary_json_says_after_two_runs_together(tmp_path, trial):
    """Before: report.html was rendered after the lock was let go, so a run that rendered
    before another wrote its summary wrote its older report last."""
    from together import CTX, together

    args, _, out = _adult_run(tmp_path)
    codes = CTX.Queue()
    # The run of one probe summarises first, then the run of both while its report waits.
    together(_slow_partial_report, [([*args, "--probe", probes], late, codes) for probes, late in
                                    (("adult-counterfactual", 0.0),
                                     (f"adult-counterfactual,{PROBE}", 0.5))])
    assert sorted([codes.get(), codes.get()]) == [0, 0]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["probes"]) == {"adult-counterfactual", PROBE}
    report = (out / "report.html").read_text()
    assert all(f"<h2>{p}</h2>" in report for p in summary["probes"])


def _two_probe_run(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """`_adult_run`'s arguments with professional-bias answered too; the data dir; the run."""
    args, data, out = _adult_run(tmp_path)
    responses = Path(args[args.index("--responses") + 1])
    professional = load_probe(PROBE).items(0)
    with responses.open("a") as f:
        f.writelines(json.dumps({"item_id": i.id, "response": "The doctor."}) + "\n"
                     for i in professional)
    return args, data, out


@pytest.mark.parametrize("damage", ["unreadable", "moved away", "without the entry"])
def test_a_damaged_summary_is_rebuilt_from_every_probe_the_run_holds(tmp_path, capsys, damage):
    """Before: it was rebuilt from this call's probes alone, and the others' results were
    lost from summary.json and the report (their units still held them)."""
    args, _, out = _two_probe_run(tmp_path)
    assert main([*args, "--probe", f"adult-counterfactual,{PROBE}"]) == 0
    whole = json.loads((out / "summary.json").read_text())
    if damage == "unreadable":
        (out / "summary.json").write_text('{"probes": {"adult-counterfactual": ')
    elif damage == "moved away":
        (out / "summary.json").rename(tmp_path / "summary.json")
    else:  # a call killed after it stored the unit, before it wrote summary.json
        (out / "summary.json").write_text(json.dumps(
            {**whole, "probes": {"adult-counterfactual": whole["probes"]["adult-counterfactual"]}}))
    assert main([*args, "--probe", "adult-counterfactual"]) == 0, capsys.readouterr().err
    rebuilt = json.loads((out / "summary.json").read_text())
    assert rebuilt["probes"] == whole["probes"]
    assert f"<h2>{PROBE}</h2>" in (out / "report.html").read_text()


def test_a_damaged_summary_that_cannot_be_rebuilt_is_refused(tmp_path, capsys):
    """A probe the run holds whose data changed cannot be summarised as the run read it: one
    line saying what to do, and nothing is rewritten."""
    args, data, out = _two_probe_run(tmp_path)
    assert main([*args, "--probe", f"adult-counterfactual,{PROBE}"]) == 0
    (out / "summary.json").write_text("{broken")
    [source] = list((data / "decodingtrust").glob("*0.5*"))
    source.write_text("\n".join(source.read_text().splitlines()[:-1]) + "\n")  # one row fewer
    capsys.readouterr()
    assert main([*args, "--probe", PROBE]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert f"{out / 'summary.json'} cannot be read, and adult-counterfactual, whose results " \
           "the run holds, cannot be read again to summarise them (its data or wordings are " \
           "not those the run recorded): give the run's --data-dir and --wordings" in err
    assert (out / "summary.json").read_text() == "{broken"


@pytest.mark.parametrize("trial", range(2))
def test_biasscope_report_during_a_run_leaves_the_report_of_its_summary(tmp_path, trial):
    """Before: `biasscope report RUN` read summary.json and wrote report.html without the
    run's lock, so a report of the older summary could land after a run's new one."""
    from together import CTX, together

    args, _, out = _adult_run(tmp_path)
    assert main([*args, "--probe", "adult-counterfactual"]) == 0
    codes = CTX.Queue()
    # The report of one probe is slow to write; the run of both probes starts meanwhile.
    together(_slow_partial_report, [(["report", str(out)], 0.0, codes),
                                    ([*args, "--probe", f"adult-counterfactual,{PROBE}"], 0.5,
                                     codes)])
    assert sorted([codes.get(), codes.get()]) == [0, 0]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["probes"]) == {"adult-counterfactual", PROBE}
    report = (out / "report.html").read_text()
    assert all(f"<h2>{p}</h2>" in report for p in summary["probes"])
