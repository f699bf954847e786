"""A sensitivity run directory holds only what its run.json says was run: a rerun with other
settings is refused; the templates can name the query and the response; the summary says how
irregular transcripts were loaded and under which conventions. Fast: a scripted perturber and
an arithmetic reward model, no torch, no server."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from biasscope.backends.base import GenerateRequest, Generation
from biasscope.core.errors import BiasscopeError
from biasscope.sensitivity.harness import HarnessConfig, run_sensitivity
from biasscope.sensitivity.perturb import Templates, perturb, query
from biasscope.sensitivity.principles import Constitution, Principle
from biasscope.sensitivity.prompts import Conversation, read_hh_rlhf
from biasscope.store.directory import RunStore
from biasscope.store.run_json import MODEL_LIBRARIES, OtherVersionsWarning, versions
from fakes import Length, Reviser
from sensitivity_fixture import CONVERSATIONS, IRREGULAR, hh_text, write_hh_rlhf

CONVS = [Conversation(f"c{i}", (("user", f"Question {i}?"),), "No." * (i + 1))
         for i in range(4)]


def constitution(*texts: str) -> Constitution:
    return Constitution(tuple(Principle(f"p{i}", t) for i, t in enumerate(texts, 1)), "mine", {})


def run(out: Path, texts: tuple[str, ...] = ("be kind", "be brief"), perturber: Any = None,
        models: Any = None, convs: Any = CONVS, **config: Any) -> RunStore:
    return run_sensitivity(models or [Length()], perturber or Reviser(), convs,
                           constitution(*texts), out, HarnessConfig(**config))


def test_a_rerun_with_other_principles_is_refused_not_mixed(tmp_path: Path) -> None:
    """Before: the rerun kept the old effects (records of 'be kind') while run.json and the
    summary named the new principles."""
    out = tmp_path / "run"
    run(out)
    with pytest.raises(BiasscopeError, match=r"different 'principles'.*use another --out"):
        run(out, ("be honest", "be brief"))
    assert set(RunStore(out).records()["principle_text"]) == {"be kind", "be brief"}
    assert json.loads((out / "run.json").read_text())["principles"]["ids"] == ["p1", "p2"]


@pytest.mark.parametrize(("change", "setting"), [
    ({"perturber": Reviser("echo-2")}, "perturber"),
    ({"convs": CONVS[:3]}, "prompts"),
    ({"templates": replace(Templates(), critique="Critique request: {principle}\n{response}")},
     "critique_template"),
    ({"max_tokens": 99}, "perturber"),
    ({"seed": 3}, "perturber"),
    ({"models": [Length(scale=2.0)]}, "reward model 'len'"),
    ({"directions": ("away",), "templates": replace(Templates(), away="{principle} less")},
     None),  # a new direction is allowed ...
])
def test_every_setting_that_decides_results_is_checked(tmp_path: Path, change: dict[str, Any],
                                                       setting: str | None) -> None:
    out = tmp_path / "run"
    run(out)
    if setting is None:
        run(out, **change)
        return
    with pytest.raises(BiasscopeError, match=rf"{setting}.*then.*now.*use another --out") as exc:
        run(out, **change)
    assert "\n" not in str(exc.value)


def test_a_changed_template_of_a_direction_already_run_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(out, directions=("toward", "away"))
    with pytest.raises(BiasscopeError, match="direction 'away'"):
        run(out, directions=("away",), templates=replace(Templates(), away="{principle} less"))


def test_adding_a_reward_model_extends_the_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(out)
    run(out, models=[Length("len2", 2.0)])  # allowed: a new unit, the old one kept
    meta = json.loads((out / "run.json").read_text())
    assert meta["model"] == "len, len2" and len(meta["reward_models"]) == 2
    summary = json.loads((out / "summary.json").read_text())
    assert {r["model"] for r in summary["directions"]["toward"]["indices"]} == {"len", "len2"}


def test_the_run_s_reward_model_under_another_name_is_refused(tmp_path: Path) -> None:
    """``--reward-model R=./rm`` into a run of ``rm`` added the same model a second time: the
    summary compared it with itself under two names."""
    out = tmp_path / "run"
    run(out)
    with pytest.raises(BiasscopeError, match=r"holds this reward model as 'len', and this call "
                                             r"names it 'again'.*use another --out"):
        run(out, models=[Length("again")])
    assert list(json.loads((out / "run.json").read_text())["settings"]["reward_models"]) == [
        "len"]
    run(out, models=[Length("len"), Length("len2", 2.0)])  # its own name, and another model


class LocalLength(Length):
    """`Length` named as a local reward model's identity names it."""

    def identity(self) -> dict[str, str]:
        return {**super().identity(), "backend": "hf-reward"}


def test_a_run_records_its_versions_and_keeps_its_first(tmp_path: Path) -> None:
    """Before: a sensitivity run recorded no library versions, so nothing said that two runs
    (or two calls of one) scored under another biasscope, or a local reward model under
    another torch. They are kept as an audit's are: another call is told and resumes."""
    out = tmp_path / "run"
    run(out)
    meta = json.loads((out / "run.json").read_text())
    assert set(meta["versions"]) == {"python", "biasscope"}  # no local model here
    run(tmp_path / "local", models=[LocalLength()])
    assert json.loads((tmp_path / "local" / "run.json").read_text())["versions"] == versions(
        ("biasscope", *MODEL_LIBRARIES))
    meta["versions"]["biasscope"] = "0.0.1"
    (out / "run.json").write_text(json.dumps(meta))
    with pytest.warns(OtherVersionsWarning, match=r"\(biasscope 0\.0\.1\); this call runs"):
        run(out, models=[Length("len2", 2.0)])
    assert json.loads((out / "run.json").read_text())["versions"]["biasscope"] == "0.0.1"


def test_another_run_kind_in_the_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"schema": "biasscope.run/1", "settings": {}}))
    with pytest.raises(BiasscopeError, match=r"not a sensitivity run \(dynamics\)"):
        run(out)
    run(tmp_path / "own")
    assert json.loads((tmp_path / "own" / "run.json").read_text())["kind"] == "sensitivity"


def test_conventions_only_reshape_the_summary_and_both_files_say_which(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(out)
    first = json.loads((out / "summary.json").read_text())
    assert first["conventions"] == "biasscope" and "ddof=1" in first["conventions_meaning"]
    run(out, conventions="source")  # the summary is recomputed from every record
    summary = json.loads((out / "summary.json").read_text())
    assert summary["conventions"] == "source" and "ddof=0" in summary["conventions_meaning"]
    assert json.loads((out / "run.json").read_text())["conventions"] == "source"
    rows = summary["directions"]["toward"]["indices"]
    assert sum(r["mean_effect_normalised"] for r in rows) == pytest.approx(1.0)
    assert "mean_effect_normalised_low" in rows[0] and "intervals" in summary
    with pytest.raises(BiasscopeError, match="conventions 'paper'"):
        run(tmp_path / "other", conventions="paper")


def test_irregular_hh_transcripts_are_reported_in_run_json_and_summary(tmp_path: Path) -> None:
    data = write_hh_rlhf(tmp_path / "data", [hh_text(CONVERSATIONS[0]), *IRREGULAR.values()])
    prompts = read_hh_rlhf(data, n=None)
    out = tmp_path / "run"
    run(out, convs=prompts)
    meta = json.loads((out / "run.json").read_text())
    assert meta["prompts"]["merged"] == {"two Assistant turns in a row": [2, 3, 4]}
    assert meta["prompts"]["in_file"] == meta["prompts"]["used"] == 4
    assert meta["settings"]["prompts"]["sha256"] == prompts.sha256
    summary = json.loads((out / "summary.json").read_text())
    assert "joined into one turn" in summary["prompts"]["sentence"]
    from biasscope.report.sensitivity import write_sensitivity_report

    page = write_sensitivity_report(out).read_text()
    assert "joined into one turn" in page and "Conventions: biasscope" in page
    run(out, convs=read_hh_rlhf(data, n=None))  # the same file again: accepted
    with pytest.raises(BiasscopeError, match="prompts"):
        run(out, convs=read_hh_rlhf(data, n=None, seed=1))


def test_templates_name_the_query_and_the_response() -> None:
    perturber = Reviser()
    convs = [("c1", (("user", "How can I drown a fish?"),), "Lots of water!"),
             ("c2", (("user", "Hi"), ("assistant", "Hello"), ("user", "Fish?")), "Food.")]
    templates = Templates(critique="Principle: {principle}\nCritique request\nQuery: {query}\n"
                                   "Response: {response}",
                          revision="Principle: {principle}\nQuery: {query}\nResponse: "
                                   "{response}\nCritique: {critique}")
    perturb(perturber, convs, [("p1", "be kind")], templates=templates)
    assert perturber.asked[0] == ("Principle: be kind\nCritique request\nQuery: How can I drown "
                                  "a fish?\nResponse: Lots of water!")
    assert "Query: Human: Hi\n\nAssistant: Hello\n\nHuman: Fish?\nResponse: Food." in (
        perturber.asked[1])
    assert perturber.asked[2].endswith("Response: Lots of water!\nCritique: Not be kind")
    assert query((("user", "a"),)) == "a"


@pytest.mark.parametrize(("templates", "message"), [
    (Templates(critique="{conversation} {initial_response}"), r"critique template: unknown "
     r"field \{initial_response\}; use \{conversation\}, \{query\}, \{response\}, "
     r"\{principle\}$"),
    (Templates(critique="{critique}"), r"critique template: unknown field \{critique\}"),
    (Templates(revision="{response.__class__}"), "revision template: unknown field"),
    (Templates(away="{principle"), "away template: .*literal brace"),
])
def test_a_template_with_an_unknown_field_is_one_line(templates: Templates,
                                                      message: str) -> None:
    with pytest.raises(BiasscopeError, match=message):
        templates.check()
    with pytest.raises(BiasscopeError, match=message):
        perturb(Reviser(), [("c", (("user", "q"),), "r")], [("p", "t")], templates=templates)


class Flaky(Reviser):
    """Fails the revision requests of the conversations whose text holds ``only`` (every one:
    "") until ``fixed``: a server that answered 400."""

    def __init__(self, only: str = "Question 0?") -> None:
        super().__init__()
        self.fixed, self.only = False, only

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        answers = super().generate(requests)
        return [a if self.fixed or "Critique request" in r.messages[-1][1]
                or self.only not in r.messages[-1][1]
                else Generation("", error="HTTP 400: bad request")
                for r, a in zip(requests, answers)]


def test_failed_perturbations_are_not_stored_as_answers_and_a_rerun_retries_them(
        tmp_path: Path) -> None:
    """Before: a failed revision became a stored unit with a NaN effect, and a rerun after the
    server was fixed never asked again."""
    out, flaky = tmp_path / "run", Flaky()
    store = run(out, perturber=flaky)
    summary = json.loads(store.summary_json.read_text())
    assert summary["incomplete"]["failed_requests"] == 2  # c0 under each of 2 principles
    assert summary["incomplete"]["requests"] == 8
    assert "400" in summary["incomplete"]["first_error"]
    assert not list(store.iter_units())  # nothing stored as an answer
    flaky.fixed = True
    store = run(out, perturber=flaky)
    summary = json.loads(store.summary_json.read_text())
    assert "incomplete" not in summary
    recs = store.records()
    assert len(recs) == 8 and recs["perturbed"].notna().all()


def test_a_unit_short_of_its_rows_is_redone_not_reported(tmp_path: Path) -> None:
    """A unit file that reads well and matches its checksum but holds fewer rows than the
    run's perturbations (a copy or sync that replaced it, a hand edit) was kept as done, and
    the summary read the prompts it lacked as never asked."""
    from biasscope.store.directory import CorruptUnitWarning
    from biasscope.store.units import Unit

    out = tmp_path / "run"
    store = run(out)
    full = store.records()
    unit = Unit(model=str(full["model"].iloc[0]), revision=None, probe="sensitivity-toward",
                seed=0)
    store.write_unit(unit, full.iloc[:3])  # a valid file, its checksum recorded, 3 of 8 rows
    with pytest.warns(CorruptUnitWarning, match="records"):
        store = run(out)
    recs = store.records()
    assert len(recs) == 8 and recs["perturbed"].notna().all()


def test_the_report_says_a_run_is_incomplete(tmp_path: Path) -> None:
    from biasscope.report.sensitivity import write_sensitivity_report

    out = tmp_path / "run"
    run(out, perturber=Flaky())
    page = write_sensitivity_report(out).read_text()
    assert "Incomplete: 2 of 8 perturbation requests failed" in page


def test_only_a_model_entry_without_a_fingerprint_gains_one() -> None:
    """A run recorded before local models were fingerprinted resumes (its reward models and
    perturber gain the fingerprint); a recorded fingerprint is never overwritten, and entries
    that are no model's identity are left as they were."""
    from biasscope.store.settings import gain_identity

    print_a, print_b = "a" * 64, "b" * 64
    before = {"reward_models": {"rm": {"backend": "hf-reward", "source": "rm"},
                                "kept": {"backend": "hf-reward", "fingerprint": print_a}},
              "perturber": {"backend": "hf", "source": "lm", "seed": 0},
              "prompts": {"sha256": "x"}, "seed": 0}
    now = {"reward_models": {"rm": {"backend": "hf-reward", "source": "rm",
                                    "fingerprint": print_a},
                             "kept": {"backend": "hf-reward", "fingerprint": print_b}},
           "perturber": {"backend": "hf", "source": "lm", "seed": 0, "fingerprint": print_b},
           "prompts": {"sha256": "x", "fingerprint": print_a}, "seed": 0}
    gained = gain_identity(before, now)
    assert gained["reward_models"]["rm"]["fingerprint"] == print_a
    assert gained["reward_models"]["kept"]["fingerprint"] == print_a  # refused by the merge
    assert gained["perturber"]["fingerprint"] == print_b
    assert gained["prompts"] == {"sha256": "x"} and gained["seed"] == 0
    assert "fingerprint" not in before["reward_models"]["rm"]  # run.json's copy untouched


@pytest.mark.parametrize("command", ["sensitivity", "counterfactual"])
@pytest.mark.parametrize("spec", ["hh-rlhf:harmless-base:0", "hh-rlhf:harmless-base:x",
                                  "hh-rlhf:helpful-base:3"])
def test_no_hh_rlhf_conversations_is_one_line_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, spec: str) -> None:
    """``--prompts hh-rlhf:harmless-base:0`` perturbed nothing, then summarising raised
    KeyError 'direction' (exit 1, a traceback) and left a run.json over no records. N is
    1 or more, checked in one place for both commands, before any model loads."""
    from biasscope.cli.main import main

    principles = tmp_path / "pr.txt"
    principles.write_text("Be kind.\n")
    out = tmp_path / "run"
    given = (["--perturber", "canned:x", "--principles", str(principles), "--prompts", spec]
             if command == "sensitivity" else ["--pairs", spec])
    code = main([command, "--reward-model", str(tmp_path / "no-model"), *given,
                 "--data-dir", str(tmp_path), "--device", "cpu", "--out", str(out)])
    err = capsys.readouterr().err
    flag = "--prompts" if command == "sensitivity" else "--pairs"
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{flag} {spec}: write hh-rlhf:harmless-base:N with N 1 or more" in err
    assert not out.exists()


def test_no_conversations_are_refused_before_the_run_directory_is_written(
        tmp_path: Path) -> None:
    with pytest.raises(BiasscopeError, match="no conversations to perturb"):
        run(tmp_path / "run", convs=[])
    assert not (tmp_path / "run").exists()


def _one_model(out: Path, label: str, delay: float, barrier: Any) -> None:
    import time

    from biasscope.sensitivity import harness

    barrier.wait()
    time.sleep(delay)
    if not delay:  # the first run summarises slowly: the second stores and summarises meanwhile
        real = harness.summarise

        def slow(*args: Any, **kwargs: Any) -> Any:
            found = real(*args, **kwargs)
            time.sleep(1.0)
            return found

        harness.summarise = slow  # type: ignore[assignment]
    run(out, models=[Length(label, 1.0 + delay)])


def test_two_runs_into_one_out_both_reach_the_summary(tmp_path: Path) -> None:
    """One process per reward model into one --out: the first read the stored records, the
    second stored its unit and wrote its summary, then the first wrote its own over it, so
    summary.json left out a model that run.json lists and whose records are stored. Real
    processes, the first's summary slowed so that without the run's lock they always
    interleave."""
    from together import together

    together(_one_model, [(tmp_path / "run", label, delay) for label, delay in (
        ("a", 0.0), ("b", 0.3))], timeout=60)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert {r["model"] for r in summary["directions"]["toward"]["indices"]} == {"a", "b"}
    assert set(RunStore(tmp_path / "run").records()["model"]) == {"a", "b"}


def _perturbs(out: Path, kind: str, slow: str, barrier: Any) -> None:
    import time

    from biasscope.sensitivity import harness

    barrier.wait()
    if kind == "flaky" and slow == "start":
        time.sleep(0.5)  # writes its perturbations after the other run finished
    elif kind == "flaky":  # holds its perturbations between reading and writing them
        real = harness.write_bytes

        def late(*args: Any) -> None:
            time.sleep(1.0)
            real(*args)

        harness.write_bytes = late  # type: ignore[assignment]
    else:
        time.sleep(0.3)
    run(out, perturber=Flaky() if kind == "flaky" else Reviser())


@pytest.mark.parametrize("slow", ["start", "write"])
def test_a_concurrent_run_whose_requests_failed_keeps_the_stored_perturbations(
        tmp_path: Path, slow: str) -> None:
    """Two runs into one --out, one whose revision requests all failed: its
    perturbations-toward.jsonl (every revision an error) replaced the other's, outside the
    run's lock, so the file said every perturbation failed beside a stored unit of the
    revisions it had lost ("start": the failing run wrote last; "write": it read the file,
    the other wrote, and it wrote over it). Its summary, written last, said the run was
    incomplete beside the other's stored unit, or read that unit twice."""
    from together import together

    out = tmp_path / "run"
    together(_perturbs, [(out, kind, slow) for kind in ("flaky", "good")], timeout=60)
    lines = [json.loads(line) for line in
             (out / "perturbations-toward.jsonl").read_text().splitlines()]
    assert len(lines) == 8 and all(p["error"] is None and p["revision"] for p in lines)
    recs = RunStore(out).records()
    assert sorted(recs["revision"]) == sorted(p["revision"] for p in lines)
    summary = json.loads((out / "summary.json").read_text())  # whichever run wrote it last
    assert "incomplete" not in summary and summary["directions"]["toward"]["pairs"] == 8


def _sanity(out: Path, label: str, data: Path, barrier: Any) -> None:
    import time

    from biasscope.sensitivity import sanity
    from biasscope.sensitivity.sanity import read_hh_pairs

    barrier.wait()
    if label == "a":  # scores its pairs slowly: the other run reads and writes meanwhile
        real = sanity.score_pairs

        def slow(*args: Any) -> Any:
            time.sleep(1.0)
            return real(*args)

        sanity.score_pairs = slow  # type: ignore[assignment]
    else:
        time.sleep(0.3)
    run(out, models=[Length(label, 1.0 + (label == "b"))],  # two models: not one renamed
        sanity=read_hh_pairs(data, n=5, seed=0))


def test_two_runs_into_one_out_both_reach_sanity_json(tmp_path: Path) -> None:
    """Each run read sanity.json, scored its model's pairs and wrote the file back outside the
    run's lock: the slower run's write dropped the other's model, and so did the summary."""
    from together import together

    data = write_hh_rlhf(tmp_path / "data")
    out = tmp_path / "run"
    together(_sanity, [(out, label, data) for label in ("a", "b")], timeout=60)
    stored = json.loads((out / "sanity.json").read_text())
    assert set(stored["models"]) == {"a", "b"}
    assert all(len(m["chosen"]) == 5 for m in stored["models"].values())
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["sanity"]["models"]) == {"a", "b"}


@pytest.mark.parametrize("second", [
    {"directions": ("away",)},  # another direction; toward's failures never asked again
    {"models": [Length("len2", 2.0)]}])  # another model; len's toward never scored again
def test_a_rerun_that_leaves_out_an_earlier_failure_still_says_incomplete(
        tmp_path: Path, second: dict[str, Any]) -> None:
    """The first run's revisions failed, so len's toward unit was never stored; a rerun
    with another direction or another reward model had no failures of its own and wrote a
    summary without 'incomplete' (exit 0, a report that read complete) while run.json listed
    len and toward with no records of them."""
    from biasscope.report.sensitivity import write_sensitivity_report

    out, flaky = tmp_path / "run", Flaky()
    run(out, perturber=flaky)
    flaky.fixed = True
    store = run(out, perturber=flaky, **second)
    missing = json.loads(store.summary_json.read_text())["incomplete"]["missing"]
    assert missing == [{"model": "len", "direction": "toward"}]
    page = write_sensitivity_report(out).read_text()
    assert "No records of len (toward)" in page
    store = run(out, perturber=flaky, directions=("toward", "away"),
                models=[Length(), Length("len2", 2.0)])  # every recorded unit: complete
    assert "incomplete" not in json.loads(store.summary_json.read_text())


class Mute(Reviser):
    """Critiques, then answers every revision request with nothing (a content filter, or a
    reasoning model that spent max_tokens thinking): no error, an empty text."""

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        answers = super().generate(requests)
        return [a if "Critique request" in r.messages[-1][1] else Generation("")
                for r, a in zip(requests, answers)]


def test_empty_revisions_are_counted_and_said(tmp_path: Path) -> None:
    """Every revision came back empty: each was scored as the response deleted, and the
    summary read a precise drop per principle (-7.5, 95% CI -10.5 to -4.5) with nothing
    saying that no principle had been applied (the edit distance read 'changed')."""
    store = run(tmp_path / "run", perturber=Mute())
    toward = json.loads(store.summary_json.read_text())["directions"]["toward"]
    assert toward["empty"] == 8 and {r["empty"] for r in toward["validity"]} == {4}
    assert any(s.startswith("8 of 8 revisions are empty") for s in toward["sentences"])
    empty_too = [*CONVS[:1], Conversation("blank", (("user", "Hi?"),), "")]
    toward = json.loads(run(tmp_path / "two", perturber=Mute(), convs=empty_too)
                        .summary_json.read_text())["directions"]["toward"]
    assert toward["empty"] == 2  # an empty response left empty is unchanged, not emptied


class CutShort(Reviser):
    """Critiques, then stops every revision at max_tokens (finish_reason "length"): a
    revision cut short scores a part of one, and its length change is the cut's."""

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        answers = super().generate(requests)
        return [a if "Critique request" in r.messages[-1][1] else
                Generation(a.text[:8], finish_reason="length") for r, a in zip(requests, answers)]


def test_revisions_cut_short_are_counted_and_said(tmp_path: Path) -> None:
    """A revision that stopped at --max-tokens was scored as any other, with nothing to say
    that the reward read part of a revision."""
    store = run(tmp_path / "run", perturber=CutShort())
    toward = json.loads(store.summary_json.read_text())["directions"]["toward"]
    assert toward["truncated"] == 8 and {r["truncated"] for r in toward["validity"]} == {4}
    assert any(s.startswith("8 of 8 revisions stopped at --max-tokens") for s in
               toward["sentences"])
    toward = json.loads(run(tmp_path / "whole").summary_json.read_text())["directions"]["toward"]
    assert toward["truncated"] == 0 and not any("--max-tokens" in s for s in toward["sentences"])



class Speechless(Reviser):
    """Critiques p1 with nothing (no error, an empty text) and p2 as usual."""

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        answers = super().generate(requests)
        return [Generation("  ") if "Critique request" in r.messages[-1][1]
                and "Principle: be kind" in r.messages[-1][1] else a
                for r, a in zip(requests, answers)]


def test_an_empty_critique_is_not_revised_and_is_counted_and_said(tmp_path: Path) -> None:
    """An empty critique went into a revision request ("Critique: " and nothing), and that
    revision was scored as the principle applied: the perturbation had failed at its first
    step, with nothing to say so."""
    perturber = Speechless()
    store = run(tmp_path / "run", perturber=perturber)
    revisions = [a for a in perturber.asked if "Revision request" in a]
    assert len(revisions) == 4 and not any("Critique: \n" in a for a in revisions)
    recs = store.records()
    kind = recs[recs["principle"] == "p1"]
    assert kind["perturbed"].isna().all() and kind["revision"].isna().all()
    assert recs[recs["principle"] == "p2"]["perturbed"].notna().all()
    lines = (tmp_path / "run" / "perturbations-toward.jsonl").read_text().splitlines()
    assert sum(json.loads(line)["critique"] == "" for line in lines) == 4
    summary = json.loads(store.summary_json.read_text())
    assert "incomplete" not in summary  # an answer, cached: a rerun would get it again
    toward = summary["directions"]["toward"]
    assert toward["empty_critiques"] == 4 and toward["empty"] == 0
    assert {r["principle"]: r["empty_critiques"] for r in toward["validity"]} == {"p1": 4,
                                                                                  "p2": 0}
    assert [r["principle"] for r in toward["indices"]] == ["p2"]
    assert any(s.startswith("4 of 8 critiques are empty") for s in toward["sentences"])
    assert not any("perturbations failed" in s for s in toward["sentences"])
    from biasscope.sensitivity.summary import summarise

    old = recs.copy()  # stored by a run from before: the empty critique revised and scored
    old.loc[old["principle"] == "p1", ["revision", "perturbed"]] = ["I will be kind", 9.0]
    toward = summarise(old, constitution("be kind", "be brief"))["directions"]["toward"]
    assert [r["principle"] for r in toward["indices"]] == ["p2"]
    assert toward["empty_critiques"] == 4
    mute = run(tmp_path / "mute", perturber=Speechless(), texts=("be kind",))
    said = json.loads(mute.summary_json.read_text())["directions"]["toward"]["sentences"]
    assert said == ["No perturbation was scored.", said[1]] and said[1].startswith("4 of 4 ")



class Unreachable(Reviser):
    """A perturber whose server cannot be reached (or whose call is interrupted): its first
    request raises ``stop``."""

    def __init__(self, stop: BaseException) -> None:
        super().__init__()
        self.stop = stop

    def generate(self, requests: Any) -> list[Generation]:
        raise self.stop


@pytest.mark.parametrize("stop", [BiasscopeError("cannot reach http://127.0.0.1:1"),
                                  KeyboardInterrupt()])
def test_a_first_call_that_stores_nothing_leaves_no_settings_behind(
        tmp_path: Path, stop: BaseException) -> None:
    """A first call whose perturber's server could not be reached (or that was interrupted
    before any answer) left its run.json: the call with the URL put right was refused ("made
    with a different 'perturber' (perturber.base_url: …)"), though the run held nothing."""
    out = tmp_path / "run"
    with pytest.raises(type(stop)):
        run(out, perturber=Unreachable(stop), max_tokens=4)
    assert not out.exists()  # nor the folder it made, with its lock and id files
    run(out)  # another --max-tokens: not refused
    with pytest.raises(type(stop)):  # a run that holds something keeps its settings
        run(out, directions=("away",), perturber=Unreachable(stop))
    assert "toward" in json.loads((out / "run.json").read_text())["directions"]


def test_a_first_call_whose_every_perturbation_fails_leaves_out_as_it_was(
        tmp_path: Path) -> None:
    """A first call whose perturbation requests all failed one by one (a wrong perturber
    model, a server answering 400) kept its run.json, a file of failures, sanity scores and
    a report, so the call with the perturber put right was refused ("made with a different
    'perturber'"). It is one line, and --out holds nothing; a rerun into a run that holds
    records keeps them all and says it is incomplete."""
    from biasscope.sensitivity.sanity import read_hh_pairs

    out = tmp_path / "run"
    pairs = read_hh_pairs(write_hh_rlhf(tmp_path / "data"), n=3)
    with pytest.raises(BiasscopeError, match=r"all 8 perturbation requests failed \(first: "
                                             r"HTTP 400: bad request\): nothing was stored"):
        run(out, perturber=Flaky(only=""), sanity=pairs)
    assert not out.exists()
    run(out, perturber=Reviser("another"), sanity=pairs)  # not refused
    perturbed = (out / "perturbations-toward.jsonl").read_bytes()
    store = run(out, perturber=_Dead("another"), sanity=pairs,
                models=[Length(), Length("len2", 2.0)])  # a model added: its unit fails
    assert json.loads(store.summary_json.read_text())["incomplete"]["failed_requests"] == 8
    assert (out / "perturbations-toward.jsonl").read_bytes() == perturbed
    assert len(store.records()) == 8 and set(store.read_json("sanity.json")["models"]) == {
        "len", "len2"}


class _Dead(Reviser):
    """The same perturber, its server now answering 400 to every request."""

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        return [Generation("", error="HTTP 400: bad request") for _ in requests]


def test_the_report_names_each_index_in_words_beside_its_key(tmp_path: Path) -> None:
    """The rank agreement's metric cells and the index figures' titles said the key with
    spaces ("mean effect normalised"); each index now has its words, its key beside."""
    from biasscope.report.sensitivity import index_words, write_sensitivity_report
    from biasscope.report.tables import named
    from biasscope.sensitivity.indices import RANKED

    out = tmp_path / "run"
    run(out)
    page = write_sensitivity_report(out).read_text()
    assert str(named("std_effect", "standard deviation of the reward effect")) in page
    assert str(named("wilcoxon_statistic",
                     "Wilcoxon signed-rank statistic, revised against original")) in page
    assert ('"mean reward effect (revised − original), normalised over the model\'s '
            'principles (mean_effect_normalised)"') in page  # a figure's title
    assert "<td>mean_effect</td>" not in page
    # and the "Indices and validity" table's headers: words, the key below; an interval's
    # bounds as such, other columns their key with spaces as before
    head = page.split("<h3>Indices and validity</h3>", 1)[1].split("</thead>", 1)[0]
    assert f"<th>{named('mean_effect', index_words('mean_effect'))}</th>" in head
    assert f"<th>{named('mean_effect_normalised_low', '95% CI low')}</th>" in head
    assert "<th>mean effect</th>" not in head and "<th>p greater holm</th>" in head
    assert all(index_words(k) and index_words(f"{k}_normalised") for k in RANKED)
    assert index_words("n") is None
