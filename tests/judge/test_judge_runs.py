"""A judge run directory holds what its run.json says was run: every setting that changes a
verdict is recorded and a rerun with another is refused before anything is written; failed
requests are retried, never stored as answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from biasscope.cli.main import main
from biasscope.judge.batch import start
from biasscope.store.run_json import MODEL_LIBRARIES, OtherVersionsWarning, versions
from scripted_server import Reply, chat, serve

PAIRS = [{"id": "p1", "prompt": "What is 2+2?", "a": "4", "b": "5", "model_a": "m1",
          "model_b": "m2"},
         {"id": "p2", "prompt": "Capital of France?", "a": "Paris", "b": "Lyon",
          "model_a": "m2", "model_b": "m1"},
         {"id": "p3", "prompt": "Color of sky?", "a": "blue", "b": "green", "model_a": "m1",
          "model_b": "m2"}]
LABELS = {"POSITIVE": "The text is happy.", "NEGATIVE": "The text is sad."}


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())
            if p.is_file() and not p.name.startswith(".")}  # not the run's lock


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    return _jsonl(tmp_path / "pairs.jsonl", PAIRS)


def _judge(kind: str, out: Path, data: Path, *extra: str, model: str = "canned:A|B"
           ) -> list[str]:
    return [kind, "--model", model, "--input", str(data), "--out", str(out), "--no-cache",
            *extra]


CHANGED = [(["--seed", "7"], "'seed' (0 then, 7 now)"),
           (["--keys", "1,2,3"], "'keys'"),
           (["--no-logit-bias"], "'logit_bias' (true then, false now)"),
           (["--reasoning"], "'reasoning' (false then, true now)"),
           (["--position", "permute"], "'position' (\"shuffle\" then, \"permute\" now"),
           (["--ranking", "bradley-terry"], "'ranking'")]


@pytest.mark.parametrize(("extra", "named"), CHANGED)
def test_a_judge_rerun_with_another_setting_is_refused_and_removes_nothing(
        pairs, tmp_path, capsys, extra, named):
    out = tmp_path / "run"
    assert main(_judge("judge", out, pairs)) == 0
    before = _files(out)
    assert set(before) >= {"run.json", "verdicts.jsonl", "summary.json", "report.html"}
    capsys.readouterr()
    assert main(_judge("judge", out, pairs, *extra)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"run.json was made with a different {named}" in err
    assert "use another --out or the same settings" in err
    assert _files(out) == before  # run.json still says what the results are


def test_judge_run_json_records_what_decides_the_verdicts(pairs, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_judge("judge", out, pairs, "--seed", "3", "--keys", "XYZW")) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["kind"] == "judge" and run["judges"] == {"canned:A|B": "canned:A|B"}
    settings = run["settings"]
    assert settings["seed"] == 3 and settings["keys"] == ["X", "Y", "Z"]
    assert settings["position"] == "shuffle" and settings["samples"] is None
    assert settings["logit_bias"] is True and settings["reasoning"] is False
    assert settings["ranking"] == "win-rate" and settings["labels_sha256"] is None
    import hashlib
    assert settings["input_sha256"] == hashlib.sha256(pairs.read_bytes()).hexdigest()
    assert settings["judges"] == {"canned:A|B": {"backend": "canned", "model": "A|B"}}
    # A fourth key the pairs never show is no other setting; the same command reruns.
    assert main(_judge("judge", out, pairs, "--seed", "3", "--keys", "XYZ")) == 0
    assert json.loads((out / "run.json").read_text()) == run


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_an_input_edited_since_the_run_is_refused_before_a_judge_is_made(
        pairs, tmp_path, capsys, monkeypatch, kind):
    """Before: "… was made with a different 'input_sha256' (…)", and only once the judges
    were made: a local judge had loaded (minutes). The input file is now checked first, in
    the words an audit's data file is refused in."""
    from biasscope.backends.config import BackendConfig

    out = tmp_path / "run"
    assert main(_judge(kind, out, pairs)) == 0
    before = _files(out)
    pairs.write_text(pairs.read_text().replace("Color of sky?", "Colour of sky?"))  # its last
    made: list[Any] = []
    monkeypatch.setattr(BackendConfig, "generators", lambda *a, **k: made.append(a) or [])
    capsys.readouterr()
    assert main(_judge(kind, out, pairs)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{out} was made from another --input ({pairs}: SHA-256 " in err
    assert "put back the file it was made from, or use another --out" in err
    assert made == [] and _files(out) == before


def test_judge_refuses_another_input_judge_samples_or_aggregate(pairs, tmp_path, capsys):
    out = tmp_path / "run"
    permute = ["--position", "permute", "--samples", "1"]
    assert main(_judge("judge", out, pairs, *permute)) == 0
    before = _files(out)
    other = _jsonl(tmp_path / "other.jsonl", [{**PAIRS[0], "b": "22"}, *PAIRS[1:]])
    for argv, named in [
            (_judge("judge", out, pairs, "--position", "permute", "--samples", "2"),
             "'samples' (1 then, 2 now)"),
            (_judge("judge", out, other, *permute), f"from another --input ({other}: SHA-256"),
            (_judge("judge", out, pairs, *permute, model="canned:B|A"), "'judges'")]:
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert (f"made with a different {named}" in err or f"made {named}" in err) and (
            err.count("\n") == 1)
        assert _files(out) == before
    two = tmp_path / "two"
    several = ["--model", "canned:A", "--model", "canned:B"]
    assert main(_judge("judge", two, pairs, *several)) == 0
    capsys.readouterr()
    assert main(_judge("judge", two, pairs, *several, "--aggregate", "majority")) == 2
    assert "different 'aggregate' (\"mean\" then, \"majority\" now)" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_rerun_with_a_judge_dropped_is_refused_naming_the_judges(pairs, tmp_path, capsys,
                                                                   kind):
    """Before: the refusal named 'aggregate' ("mean" then, null now), a setting the user
    never gave, which follows from the number of judges."""
    out = tmp_path / "run"
    assert main(_judge(kind, out, pairs, "--model", "two=canned:B")) == 0
    before = _files(out)
    capsys.readouterr()
    assert main(_judge(kind, out, pairs)) == 2
    err = capsys.readouterr().err
    assert "was made with a different 'judges' (judges.two: " in err and "aggregate" not in err
    assert _files(out) == before


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_rerun_with_the_judges_reordered_is_refused_naming_the_runs_order(
        pairs, tmp_path, capsys, kind):
    """Order decides results: an item no judge labelled takes the first judge's reason (x
    answers outside the keys, y disagrees with itself across the two orders). A reordered
    rerun was taken and rewrote the run's verdicts with the other reason."""
    x, y = ["--model", "x=canned:Q"], ["--model", "y=canned:A"]
    how = ["--position", "consensus"] if kind == "judge" else []
    out, other = tmp_path / "run", tmp_path / "other"

    def argv(where: Path, *judges: str) -> list[str]:
        return [kind, *judges, "--input", str(pairs), "--out", str(where), "--no-cache", *how]

    assert main(argv(out, *x, *y)) == 0
    before = _files(out)
    capsys.readouterr()
    assert main(argv(out, *y, *x)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (f"{out / 'run.json'} has its judges in the order x, y, and this call gives y, x: "
            "the order can change the results, so give --model in the run's order") in err
    assert _files(out) == before
    assert main(argv(out, *x, *y)) == 0  # its own order
    if kind == "judge":
        assert main(argv(other, *y, *x)) == 0
        reasons = [json.loads((run / "summary.json").read_text())["probes"]["judge"]
                   ["headline"] for run in (out, other)]
        assert "invalid_rate" in reasons[0] and "disagreement_rate" in reasons[1]


def test_judge_audit_records_and_checks_its_settings(tmp_path, capsys):
    texts = _jsonl(tmp_path / "texts.jsonl", [{"id": i, "text": f"Day {i}."} for i in range(4)])
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(LABELS))
    out = tmp_path / "audit"
    argv = _judge("judge-audit", out, texts)
    assert main([*argv, "--labels", str(labels)]) == 0
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["keys"] == ["A", "B"] and settings["labels_sha256"]
    assert "position" not in settings  # judge-audit asks in the fixed order and its reverse
    before = _files(out)
    reordered = tmp_path / "reordered.json"
    reordered.write_text(json.dumps(dict(reversed(list(LABELS.items())))))
    # Before: "… a different 'labels_sha256'", naming no file (the set is hashed, not it).
    for extra, named in [(["--seed", "1", "--labels", str(labels)], "with a different 'seed'"),
                         (["--no-logit-bias", "--labels", str(labels)],
                          "with a different 'logit_bias'"),
                         (["--labels", str(reordered)], f"from another --labels ({reordered}: "
                          "labels POSITIVE, NEGATIVE then, NEGATIVE, POSITIVE now)")]:
        capsys.readouterr()
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err
        assert f" was made {named}" in err and err.count("\n") == 1, err
        assert _files(out) == before
    with pytest.raises(SystemExit):  # no setting of judge-audit: refused by the parser
        main([*argv, "--labels", str(labels), "--position", "permute"])


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_judge_run_records_its_versions_and_keeps_its_first(pairs, tmp_path, kind):
    """Before: a judge or judge-audit run recorded no library versions, so nothing said that
    two runs (or two calls of one) judged under another biasscope, or a local judge under
    another torch. They are kept as an audit's are: an older run gains them, another call is
    told and resumes."""
    out = tmp_path / "run"
    assert main(_judge(kind, out, pairs)) == 0
    run = json.loads((out / "run.json").read_text())
    now = run.pop("versions")
    assert set(now) == {"python", "biasscope"}  # a canned judge: no local model's libraries
    (out / "run.json").write_text(json.dumps(run))  # as an older biasscope wrote it
    assert main(_judge(kind, out, pairs)) == 0
    assert json.loads((out / "run.json").read_text())["versions"] == now
    (out / "run.json").write_text(json.dumps({**run, "versions": {**now, "biasscope": "0.0.1"}}))
    with pytest.warns(OtherVersionsWarning, match=r"\(biasscope 0\.0\.1\); this call runs"):
        assert main(_judge(kind, out, pairs)) == 0
    assert json.loads((out / "run.json").read_text())["versions"]["biasscope"] == "0.0.1"


def test_a_local_judge_records_its_libraries(tmp_path):
    """A judge that runs here (an ``hf`` backend) records torch, transformers and
    tokenizers, whose versions can change its verdicts."""
    start(tmp_path / "run", "judge", ["j"], {"judges": {"j": {"backend": "hf", "source": "m"}}})
    found = json.loads((tmp_path / "run" / "run.json").read_text())["versions"]
    assert found == versions(("biasscope", *MODEL_LIBRARIES))


def test_a_run_from_before_settings_were_recorded_is_not_rerun_unchecked(pairs, tmp_path,
                                                                        capsys):
    out = tmp_path / "old"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({
        "kind": "judge", "model": "canned:A|B", "position": "shuffle", "reasoning": False,
        "ranking": "win-rate", "judges": {"canned:A|B": "canned:A|B"}}))
    before = _files(out)
    assert main(_judge("judge", out, pairs)) == 2
    assert "not recorded then" in capsys.readouterr().err and _files(out) == before


def _server_script(state: dict[str, Any]):
    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if "tokenize" in path:
            return Reply(404, {"error": "no tokenizer"})
        state["chats"] += 1
        text = json.dumps(body.get("messages"))
        if state["fail"] and any(p["prompt"] in text for p in state["fail"]):
            return Reply(500, {"error": {"message": "the server is down"}})
        return Reply(body=chat("A"))
    return script


FAST = ["--retries", "0", "--timeout", "5", "--concurrency", "2"]


def test_failed_requests_exit_non_zero_are_not_stored_and_are_retried(pairs, tmp_path, capsys):
    state: dict[str, Any] = {"chats": 0, "fail": [PAIRS[1]]}
    out, cache = tmp_path / "run", tmp_path / "cache.sqlite"
    with serve(_server_script(state)) as server:
        argv = ["judge", "--model", f"openai-compatible:{server.base_url}#m", "--input",
                str(pairs), "--out", str(out), "--cache", str(cache), *FAST]
        assert main(argv) == 1
        printed, err = capsys.readouterr()
        # The file's 3 items, not the 2 that got through ("2 of 2 items got a verdict")
        assert printed.splitlines()[0] == ("2 of 3 items got a verdict; 1 not yet (its "
                                           "requests failed).")
        assert "1 of 3 judge requests failed" in err and "rerun the same command" in err
        assert "Traceback" not in err and err.count("\n") == 1
        rows = [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()]
        assert [r["id"] for r in rows] == ["p1", "p3"]  # no failure stored as an answer
        result = json.loads((out / "summary.json").read_text())["probes"]["judge"]
        assert result["failed_requests"] == 1 and result["requests"] == 3
        assert result["items"] == 2 and result["failed_items"] == 1
        assert result["sentences"][0].startswith("1 of 3 requests failed")
        assert "1 of 3 items have no verdict yet" in result["sentences"][0]
        assert "failed_rate" not in result["headline"]

        state["fail"], state["chats"] = [], 0
        assert main(argv) == 0, capsys.readouterr().err
        assert state["chats"] == 1  # only the failed request again, the others cached
    rows = [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["p1", "p2", "p3"] and all(r["label"] for r in rows)
    result = json.loads((out / "summary.json").read_text())["probes"]["judge"]
    assert "failed_requests" not in result and result["items"] == 3


def test_a_failing_rerun_keeps_the_verdicts_and_run_json_in_step(pairs, tmp_path, capsys):
    """Every request fails on a rerun (no cache): the stored verdicts stay, with the run.json
    that made them, and the summary says so; nothing written is removed."""
    state: dict[str, Any] = {"chats": 0, "fail": []}
    out = tmp_path / "run"
    with serve(_server_script(state)) as server:
        argv = ["judge", "--model", f"openai-compatible:{server.base_url}#m", "--input",
                str(pairs), "--out", str(out), "--no-cache", *FAST]
        assert main(argv) == 0
        run, verdicts = (out / "run.json").read_bytes(), (out / "verdicts.jsonl").read_bytes()
        state["fail"] = PAIRS
        capsys.readouterr()
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "3 of 3 judge requests failed" in err and err.count("\n") == 1
        # Not "the results leave them out": they keep what the first call stored.
        assert "3 keep the verdict an earlier call stored" in err and "leave" not in err
    assert (out / "run.json").read_bytes() == run
    assert (out / "verdicts.jsonl").read_bytes() == verdicts
    result = json.loads((out / "summary.json").read_text())["probes"]["judge"]
    assert result["items"] == 3 and result["failed_items"] == 0
    assert "3 keep the verdict an earlier call stored" in result["sentences"][0]


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_call_whose_every_request_fails_leaves_run_json_as_it_was(pairs, tmp_path, capsys,
                                                                    kind):
    """Before: the check before judging rewrote run.json, so a run from before versions were
    recorded gained this call's from a call that stored nothing (judge-audit: "run.json is
    as it was"), and judge rewrote it again after: its verdicts looked made with them."""
    state: dict[str, Any] = {"chats": 0, "fail": []}
    out = tmp_path / "run"
    with serve(_server_script(state)) as server:
        argv = [kind, "--model", f"openai-compatible:{server.base_url}#m", "--input",
                str(pairs), "--out", str(out), "--no-cache", *FAST]
        assert main(argv) == 0
        old = json.loads((out / "run.json").read_text())
        del old["versions"]  # as an older biasscope wrote it
        (out / "run.json").write_text(json.dumps(old))
        before = (out / "run.json").read_bytes()
        state["fail"] = PAIRS
        assert main(argv) == 1
        assert "judge requests failed" in capsys.readouterr().err
        assert (out / "run.json").read_bytes() == before
        state["fail"] = []
        assert main(argv) == 0  # a call that stores results records them
    assert "versions" in json.loads((out / "run.json").read_text())


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_call_stopped_before_its_results_are_written_leaves_run_json_as_it_was(
        pairs, tmp_path, capsys, monkeypatch, kind):
    """run.json is written just before the verdicts (judge-audit: the summary); a call stopped
    between (Ctrl-C, a full disk) left a first call's run.json with no results, and a rerun's
    rewritten (its versions gained from a call that stored nothing)."""
    import biasscope.judge.batch as batch
    import biasscope.judge.job as job

    def stop(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    out = tmp_path / "run"
    argv = _judge(kind, out, pairs)
    where = (batch, "batch_result") if kind == "judge" else (job, "finish")
    with monkeypatch.context() as patch:
        patch.setattr(*where, stop)
        assert main(argv) == 130
        assert not (out / "run.json").exists()
    assert main(argv) == 0
    old = json.loads((out / "run.json").read_text())
    del old["versions"]  # as an older biasscope wrote it
    (out / "run.json").write_text(json.dumps(old))
    before = _files(out)
    monkeypatch.setattr(*where, stop)
    assert main(argv) == 130
    assert _files(out) == before


def test_every_request_failing_is_no_success(pairs, tmp_path, capsys):
    """A first call whose every request failed (a server answering errors) wrote run.json, an
    empty verdicts.jsonl and a report, so the call with the server's URL put right, under the
    judge's name, was refused as another judge; it is one line now, and --out is as it was."""
    state: dict[str, Any] = {"chats": 0, "fail": PAIRS}
    out = tmp_path / "run"
    with serve(_server_script(state)) as server, serve(_server_script(
            {"chats": 0, "fail": []})) as fixed:
        argv = ["judge", "--model", f"J=openai-compatible:{server.base_url}#m", "--input",
                str(pairs), "--out", str(out), "--no-cache", *FAST]
        assert main(argv) == 2
        captured = capsys.readouterr()
        err = captured.err.splitlines()
        assert len(err) == 1 and err[0].startswith(
            "biasscope: error: 3 of 3 judge requests failed (first: ")
        assert f"nothing was stored in {out}; run again with the --model" in err[0]
        assert "got a verdict" not in captured.out
        assert not out.exists() or not [p for p in out.iterdir() if not p.name.startswith(".")]
        assert main([*argv[:2], f"J=openai-compatible:{fixed.base_url}#m", *argv[3:]]) == 0
        assert len((out / "verdicts.jsonl").read_text().splitlines()) == 3
        audit = ["judge-audit", *argv[1:-len(FAST) - 3], "--out", str(tmp_path / "audit"),
                 "--no-cache", *FAST]
        assert main(audit) == 1
        err = capsys.readouterr().err
        assert "judge requests failed" in err and "none were written" in err
        assert not (tmp_path / "audit" / "summary.json").exists()


def test_a_judge_that_never_answers_gives_no_leaderboard(pairs, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_judge("judge", out, pairs, model="canned:X")) == 0
    result = json.loads((out / "summary.json").read_text())["probes"]["judge"]
    assert not any("nan" in s for s in result["sentences"])
    assert ("canned:X gave no verdict on a pair of named systems: no leaderboard is possible "
            "without verdicts.") in result["sentences"]
    assert "leaderboard" not in result["tables"]
    page = (out / "report.html").read_text()
    assert "no leaderboard is possible" in page and "(nan%)" not in page


def test_each_judges_identity_is_recorded_and_checked(pairs, tmp_path, capsys, monkeypatch):
    """A judge loaded from a GGUF file is known by the file's SHA-256 (docs/how-to/gguf.md):
    other weights under the same spec are another judge."""
    from biasscope.backends.canned import CannedGenerator
    from biasscope.backends.config import BackendConfig
    from biasscope.judge import panel

    weights = {"sha": "1" * 64}

    class Converted(CannedGenerator):
        def identity(self) -> dict[str, str]:
            return {"backend": "hf", "source": "model.gguf", "revision": "",
                    "gguf_file": "model.gguf", "gguf_sha256": weights["sha"]}

    monkeypatch.setattr(BackendConfig, "generators", lambda self, specs, flag="--model", **_: [
        Converted(("A",), label="hf:model.gguf") for _ in specs])
    # What is known of it before it loads: its file's SHA-256 (`identity_before_loading`).
    monkeypatch.setattr(panel, "local_judge", lambda model, device, dtype="auto": (
        "hf:model.gguf", {k: v for k, v in Converted(("A",)).identity().items()
                          if k != "dtype"}))
    out = tmp_path / "run"
    argv = _judge("judge", out, pairs, model="hf:model.gguf")
    assert main(argv) == 0
    judges = json.loads((out / "run.json").read_text())["settings"]["judges"]
    assert judges["hf:model.gguf"]["gguf_sha256"] == "1" * 64
    before = _files(out)
    weights["sha"] = "2" * 64
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "different 'judges' (judges.hf:model.gguf.gguf_sha256: 111111111111… then" in err
    assert _files(out) == before
    # A key an identity gained since (a dtype) is recorded by the rerun, not refused.
    weights.update(sha="1" * 64, dtype="float32")
    Converted.identity = lambda self: {"backend": "hf", "source": "model.gguf",  # type: ignore
                                       "gguf_sha256": weights["sha"], "dtype": weights["dtype"],
                                       "revision": "", "gguf_file": "model.gguf"}
    assert main(argv) == 0, capsys.readouterr().err
    judges = json.loads((out / "run.json").read_text())["settings"]["judges"]
    assert judges["hf:model.gguf"]["dtype"] == "float32"


def test_a_first_call_that_fails_before_any_verdict_leaves_no_run_json(pairs, tmp_path,
                                                                       capsys):
    """Before: run.json was written first, so after "does not serve 'typo'" the corrected
    command was refused for a changed judge, in a run that held nothing."""
    state: dict[str, Any] = {"chats": 0, "fail": []}
    out = tmp_path / "run"
    with serve(_server_script(state)) as server:
        for kind in ("judge", "judge-audit"):
            typo = [kind, "--model", f"openai-compatible:{server.base_url}#typo", "--input",
                    str(pairs), "--out", str(out / kind), "--no-cache", *FAST]
            assert main(typo) == 2
            assert "does not serve 'typo'" in capsys.readouterr().err
            assert not (out / kind).exists() or not (out / kind / "run.json").exists()
            fixed = [*typo[:2], f"openai-compatible:{server.base_url}#m", *typo[3:]]
            assert main(fixed) == 0, capsys.readouterr().err
            assert (out / kind / "run.json").is_file()


def test_a_verdicts_file_without_run_json_is_not_replaced(pairs, tmp_path, capsys):
    """A judge run writes run.json before verdicts.jsonl, so a folder holding verdicts.jsonl
    but no run.json is someone else's (or a run whose run.json was deleted): it was
    replaced without a word."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "verdicts.jsonl").write_text('{"id": "mine"}\n')
    assert main(_judge("judge", out, pairs)) == 2
    err = capsys.readouterr().err
    assert f"{out} holds verdicts.jsonl but no run.json" in err and err.count("\n") == 1
    assert _files(out) == {"verdicts.jsonl": b'{"id": "mine"}\n'}


def test_verdicts_with_nan_probabilities_are_strict_json_and_read_back_the_same(tmp_path):
    """A judge's probabilities may be NaN (a server's logprob missing): verdicts.jsonl held a
    bare ``NaN``. It is stored as null and read back as NaN, so a rerun that keeps the
    earlier verdicts keeps them unchanged."""
    import math

    from biasscope.judge.batch import stored_verdicts, write_verdicts
    from biasscope.judge.core import Call, Verdict

    nan = float("nan")
    verdict = Verdict(None, {"a": nan, "b": 0.25}, "tie",
                      (Call("m", ("a", "b"), "A", "a", None, "A"),), {"m": "a"})
    path = tmp_path / "verdicts.jsonl"
    write_verdicts(path, ["x"], [verdict])

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON")
    assert json.loads(path.read_text(), parse_constant=refuse)["probs"] == {"a": None,
                                                                            "b": 0.25}
    back = stored_verdicts(path)["x"]
    assert back.probs is not None and math.isnan(back.probs["a"]) and back.probs["b"] == 0.25
    assert (back.label, back.reason, back.calls, back.by_judge) == (
        verdict.label, verdict.reason, verdict.calls, verdict.by_judge)


def test_the_terminal_shows_every_sentence_that_leaves_something_out(tmp_path, capsys):
    """The command printed the summary's first two sentences only: pairs left out of the
    leaderboards, a judge without a verdict, a measure that could not be made were in
    summary.json and the report alone. They are printed; the other findings are not."""
    authors = [("m1", "m2"), ("m2", "m1"), ("m1", "m1"), ("m1", None), ("m2", "m1")]
    data = _jsonl(tmp_path / "pairs.jsonl", [
        {"id": i, "prompt": "Q?", "a": "yes" * (i + 1), "b": "no", "model_a": x, "model_b": y}
        for i, (x, y) in enumerate(authors)])
    out = tmp_path / "run"
    assert main(_judge("judge", out, data, "--model", "canned:X", model="canned:A")) == 0
    printed = capsys.readouterr().out.splitlines()
    result = json.loads((out / "summary.json").read_text())["probes"]["judge"]
    notes = [
        "No length-controlled win rate for judge canned:X: there are no verdicts.",
        "1 pair names the same system as model_a and model_b: left out of the leaderboards, "
        "which rank systems against others.",
        "1 pair names only one of its two systems (model_a or model_b missing): left out of "
        "the leaderboards, which need both.",
        "canned:X gave no verdict on a pair of named systems: no leaderboard is possible "
        "without verdicts."]
    assert printed[:-1] == [*result["sentences"][:2], *notes]
    assert result["notes"] == [*result["sentences"][:2], *notes]  # canned:X's count, α
    assert len(result["sentences"]) > len(printed)  # canned:A's findings: in the report
    assert printed[-1].startswith("verdicts: ")


def test_a_judge_that_never_answers_is_counted_beside_the_panels_verdicts(pairs, tmp_path,
                                                                          capsys):
    """Two judges, one answering outside the keys on every item: the other decided each, and
    the run said "3 of 3 items got a verdict" and no more. Each judge's own count is said and
    printed, and its answered rate is in the headline; judge-audit says it too."""
    two = ["--model", "canned:X", "--aggregate", "majority"]
    assert main(_judge("judge", tmp_path / "run", pairs, *two, model="canned:A")) == 0
    printed = capsys.readouterr().out.splitlines()
    result = json.loads((tmp_path / "run" / "summary.json").read_text())["probes"]["judge"]
    said = ("3 of 3 items got a verdict; judge canned:X answered 0 of 3 (3 answers outside "
            "the keys).")
    assert printed[0] == result["sentences"][0] == result["notes"][0] == said
    head = result["headline"]
    assert (head["verdict_rate"]["estimate"], head["answered_rate:canned:A"]["estimate"],
            head["answered_rate:canned:X"]["estimate"]) == (1.0, 1.0, 0.0)
    assert head["answered_rate:canned:X"]["n"] == 3
    argv = _judge("judge-audit", tmp_path / "audit", pairs, "--model", "canned:X",
                  model="canned:A")
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    result = json.loads((tmp_path / "audit" / "summary.json").read_text())["probes"][
        "judge-audit"]
    said = ("Judge canned:X answered 0 of 6 questions (3 items in both orders; 6 answers "
            "outside the keys): its measures cover only those it answered.")
    assert printed[0] == result["sentences"][0] == said
    mute = result["headline"]["answered_rate:canned:X"]
    assert (mute["estimate"], mute["n"], mute["clusters"]) == (0.0, 6, 3)
    assert result["headline"]["answered_rate:canned:A"]["estimate"] == 1.0


def test_judges_that_answer_as_often_as_the_panel_add_nothing_to_the_count(pairs, tmp_path,
                                                                            capsys):
    """Only a judge short of the panel's verdicts is named: the count stays one clause."""
    assert main(_judge("judge", tmp_path / "run", pairs, "--model", "canned:A|A",
                       model="canned:A")) == 0
    result = json.loads((tmp_path / "run" / "summary.json").read_text())["probes"]["judge"]
    assert result["sentences"][0] == "3 of 3 items got a verdict."
    assert result["sentences"][0] not in result["notes"]
    assert result["headline"]["answered_rate:canned:A|A"]["estimate"] == 1.0


def test_a_local_judge_is_one_model_however_its_path_is_written(
        pairs, tmp_path, checkpoint_dirs, monkeypatch, capsys):
    """``--model hf:./gemma`` recorded ``gemma`` as the judge's source, so a rerun with
    ``hf:/abs/gemma`` was refused as another judge, and ``./gemma`` from another directory
    named another folder under the same source. The source is recorded resolved; a run that
    recorded a relative path resumes where that path, resolved, is the folder given now."""
    import shutil

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    for where, ckpt in (("a", checkpoint_dirs[0]), ("b", checkpoint_dirs[1])):
        shutil.copytree(ckpt, tmp_path / where / "gemma")
    folder, out = (tmp_path / "a" / "gemma").resolve(), tmp_path / "run"
    argv = ["--device", "cpu"]

    def rerun(where: str, spec: str) -> int:
        monkeypatch.chdir(tmp_path / where)
        return main(_judge("judge", out, pairs, *argv, model=f"j=hf:{spec}"))

    def source() -> str:
        return str(json.loads((out / "run.json").read_text())["settings"]["judges"]["j"][
            "source"])

    assert rerun("a", "./gemma") == 0 and source() == str(folder)
    assert rerun("b", str(folder)) == 0 and source() == str(folder)
    recorded = json.loads((out / "run.json").read_text())
    recorded["settings"]["judges"]["j"]["source"] = "gemma"  # as run.json held it before
    (out / "run.json").write_text(json.dumps(recorded))
    assert rerun("a", str(folder)) == 0 and source() == str(folder)
    capsys.readouterr()
    before = _files(out)
    assert rerun("b", "./gemma") == 2  # another folder: another judge
    assert "made with a different" in capsys.readouterr().err and _files(out) == before


def test_a_local_judge_whose_chat_template_was_edited_is_another_judge(
        pairs, tmp_path, checkpoint_dirs, monkeypatch, capsys):
    """A chat template edited in place (weights unchanged) was the same judge to a rerun,
    which added the new template's verdicts to the old ones'. The identity's
    ``files_fingerprint`` refuses it, as other weights are; a run recorded before it resumes
    and gains it."""
    import shutil

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    folder, out = tmp_path / "gemma", tmp_path / "run"
    shutil.copytree(checkpoint_dirs[0], folder)
    argv = _judge("judge", out, pairs, "--device", "cpu", model=f"j=hf:{folder}")
    run_json = out / "run.json"
    assert main(argv) == 0
    recorded = json.loads(run_json.read_text())
    first = recorded["settings"]["judges"]["j"].pop("files_fingerprint")
    run_json.write_text(json.dumps(recorded))  # as a run from before files_fingerprint
    assert main(argv) == 0
    assert json.loads(run_json.read_text())["settings"]["judges"]["j"][
        "files_fingerprint"] == first
    config = folder / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()),
                                  "chat_template": "{{ messages[0].content }}"}))
    capsys.readouterr()
    before = _files(out)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"different 'judges' (judges.j.files_fingerprint: {first[:12]}… then" in err
    assert _files(out) == before


@pytest.mark.parametrize("command", ["judge", "judge-audit"])
def test_a_question_too_long_for_a_local_judge_is_refused_naming_its_item(
        command: str, checkpoint_dirs: list[Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal named no item (``item ''``): the judge's requests carried no id."""
    long = {**PAIRS[1], "id": "long-one", "b": "Lyon is a city. " * 400}
    path = _jsonl(tmp_path / "long.jsonl", [PAIRS[0], long])
    assert main([command, "--model", f"hf:{checkpoint_dirs[0]}", "--device", "cpu",
                 "--input", str(path), "--out", str(tmp_path / "run"), "--no-cache"]) == 2
    assert "item 'long-one' is " in capsys.readouterr().err


def test_a_judge_from_python_names_an_item_by_its_place(checkpoint_dirs: list[Path]) -> None:
    from biasscope import load_generator
    from biasscope.core.errors import ModelError
    from biasscope.judge import Judge, compare

    judge = Judge(load_generator(f"hf:{checkpoint_dirs[0]}"))
    with pytest.raises(ModelError, match=r"item '#2' is "):
        compare(judge, [("Hi?", "a", "b"), ("Hi?", "a", "word " * 2000)])


def test_a_labels_file_edited_since_the_run_is_refused_naming_it_before_a_judge_is_made(
        tmp_path, capsys, monkeypatch):
    """Before: "… a different 'labels_sha256' (…)", naming no file, once the judges were
    made (a local one loaded). The file's label set is checked first; the same labels
    written otherwise (spaces) are the same set and rerun."""
    from biasscope.backends.config import BackendConfig

    texts = _jsonl(tmp_path / "texts.jsonl", [{"id": i, "text": f"Day {i}."} for i in range(4)])
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(LABELS))
    out = tmp_path / "run"
    argv = [*_judge("judge", out, texts), "--labels", str(labels)]
    assert main(argv) == 0
    labels.write_text(json.dumps(LABELS, indent=2))
    assert main(argv) == 0
    before = _files(out)
    labels.write_text(json.dumps({**LABELS, "NEGATIVE": "The text is gloomy."}))
    made: list[Any] = []
    monkeypatch.setattr(BackendConfig, "generators", lambda *a, **k: made.append(a) or [])
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{out} was made from another --labels ({labels}: SHA-256 of its label set " in err
    assert made == [] and _files(out) == before


def _no_judge_made(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Judges made (none, where a call is refused first): `BackendConfig.generators` counted."""
    from biasscope.backends.config import BackendConfig

    made: list[Any] = []
    monkeypatch.setattr(BackendConfig, "generators", lambda *a, **k: made.append(a) or [])
    return made


def _labelled_run(kind: str, tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A ``kind`` run of four texts judged with `LABELS`: its labels file, --out and argv."""
    texts = _jsonl(tmp_path / "texts.jsonl", [{"id": i, "text": f"Day {i}."} for i in range(4)])
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(LABELS))
    out = tmp_path / "run"
    argv = [*_judge(kind, out, texts), "--labels", str(labels)]
    assert main(argv) == 0
    return labels, out, argv


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_label_set_with_other_labels_is_refused_naming_them(kind, tmp_path, capsys,
                                                              monkeypatch):
    """Before: "… SHA-256 of its label set … then, … now", which says nothing of what
    changed. run.json records the label set (``labels``), and labels renamed, added or
    reordered (the question lists them in order) are named; a description alone changed
    still says the SHA-256."""
    labels, out, argv = _labelled_run(kind, tmp_path)
    assert json.loads((out / "run.json").read_text())["settings"]["labels"] == LABELS
    before, made = _files(out), _no_judge_made(monkeypatch)
    for changed, said in [({"POSITIVE": "happy", "NEUTRAL": "calm", "NEGATIVE": "sad"},
                           "labels POSITIVE, NEGATIVE then, POSITIVE, NEUTRAL, NEGATIVE now"),
                          ({"HAPPY": "The text is happy.", "NEGATIVE": "The text is sad."},
                           "labels POSITIVE, NEGATIVE then, HAPPY, NEGATIVE now"),
                          ({**LABELS, "NEGATIVE": "The text is gloomy."},
                           "SHA-256 of its label set ")]:
        labels.write_text(json.dumps(changed))
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"{out} was made from another --labels ({labels}: {said}" in err, err
        assert err.rstrip().endswith("put back the file it was made from, or use another "
                                     "--out for this one"), err
        assert made == [] and _files(out) == before


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_run_that_recorded_its_label_set_by_sha256_alone_gains_it(kind, tmp_path, capsys,
                                                                    monkeypatch):
    """A run made before ``labels`` was recorded: the same label set reruns and gains it;
    another is refused by its SHA-256, as before (the run cannot say which labels it had)."""
    labels, out, argv = _labelled_run(kind, tmp_path)
    run = json.loads((out / "run.json").read_text())
    del run["settings"]["labels"]
    (out / "run.json").write_text(json.dumps(run))
    labels.write_text(json.dumps({"HAPPY": "yes", "SAD": "no"}))
    before = _files(out)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{out} was made from another --labels ({labels}: SHA-256 of its label set " in err
    assert _files(out) == before
    labels.write_text(json.dumps(LABELS, indent=2))
    assert main(argv) == 0
    assert json.loads((out / "run.json").read_text())["settings"]["labels"] == LABELS


@pytest.mark.parametrize("kind", ["judge", "judge-audit"])
def test_a_label_set_given_or_dropped_is_refused_by_what_the_input_holds(
        kind, pairs, tmp_path, capsys, monkeypatch):
    """Never the settings line: the input decides whether a label set is needed (texts need
    one, pairs take none), said in one line before a judge is made; with another input the
    input is named first ("… was made from another --input")."""
    texts = _jsonl(tmp_path / "texts.jsonl", [{"id": i, "text": f"Day {i}."} for i in range(4)])
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(LABELS))
    paired, labelled = tmp_path / "paired", tmp_path / "labelled"
    assert main(_judge(kind, paired, pairs)) == 0
    assert main([*_judge(kind, labelled, texts), "--labels", str(labels)]) == 0
    before, made = {o: _files(o) for o in (paired, labelled)}, _no_judge_made(monkeypatch)
    for argv, said in [([*_judge(kind, paired, pairs), "--labels", str(labels)],
                        "--labels is for classifying texts; this input holds pairs"),
                       ([*_judge(kind, paired, texts), "--labels", str(labels)],
                        f"{paired} was made from another --input ({texts}: "),
                       (_judge(kind, labelled, texts),
                        "classification needs a label set (--labels FILE.json)"),
                       (_judge(kind, labelled, pairs),
                        f"{labelled} was made from another --input ({pairs}: ")]:
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err and "settings" not in err, err
    assert made == [] and {o: _files(o) for o in (paired, labelled)} == before
