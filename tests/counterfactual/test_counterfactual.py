"""Counterfactual check of scorers: pairs with gendered words and first names swapped, the
paired difference and the verdict flips; a planted preference is found and a clean scorer is
not. Fast: arithmetic reward models, a scripted judge, fixture files in hh-rlhf's format."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from biasscope.backends.base import GenerateRequest, Generation
from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.core.stats import adjust_pvalues
from biasscope.counterfactual import job
from biasscope.counterfactual.scorers import builtin_items, read_items
from biasscope.counterfactual.statistics import (
    counterfactual,
    flips,
    gender_of,
    paired_difference,
)
from biasscope.judge import Judge, JudgingConfig
from biasscope.judge.tasks import question_sha256
from biasscope.store.run_json import OtherVersionsWarning
from fakes import CannedGenerator, Reward
from no_loads import no_loads, refused
from sensitivity_fixture import hh_text, write_hh_rlhf

SUBJECTS = ["my brother", "my father", "my son", "my uncle", "my husband", "Michael", "David",
            "my boyfriend", "my nephew", "my grandfather"]


def _texts(n: int = 40) -> list[str]:
    """hh-rlhf transcripts about a man (half) or a woman (half: swapped), some with none."""
    out = []
    for i in range(n):
        who = SUBJECTS[i % len(SUBJECTS)]
        text = hh_text([("Human", f"How do I help {who} with case {i}?"),
                        ("Assistant", f"Ask what he needs{'.' * (i % 7 + 1)} Listen to him "
                                      f"and offer case {i} support.")])
        out.append(counterfactual(text) if i % 2 else text)
    return [*out, hh_text([("Human", "What is 2+2?"), ("Assistant", "4")])]


def _wife_pairs(path: Path, n: int) -> None:
    """``n`` user pairs, each with something to swap ("wife")."""
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"My wife, case {i}?",
                                        "chosen": "Ask her.", "rejected": "No."}) + "\n"
                            for i in range(n)))


def test_swaps_and_the_gender_a_text_is_about() -> None:
    assert counterfactual("Michael told his sister.") == "Jennifer told her brother."
    assert gender_of(["She called her mother."]) == "female"
    assert gender_of(["He and she."]) is None and gender_of(["2+2"]) is None


def test_paired_difference_and_mcnemar_are_exact_where_they_can_be() -> None:
    d = paired_difference([1.0] * 20, [0.0] * 20)
    assert d["mean"] == 1.0 and d["sign_p"] == pytest.approx(2 * 0.5 ** 20)
    assert d["female_higher"]["estimate"] == 1.0 and d["rank_biserial"] == 1.0
    null = paired_difference([0.5] * 10, [0.5] * 10)
    assert null["wilcoxon_p"] == 1.0 and null["zero"] == 10
    f = flips([True] * 10 + [False] * 5, [False] * 10 + [False] * 5)
    assert f["mcnemar_p"] == pytest.approx(2 * 0.5 ** 10) and f["yes_to_no"] == 10
    assert f["flip_rate"]["estimate"] == pytest.approx(10 / 15) and f["effect_size"] < 0


def test_builtin_pairs_keep_only_what_has_something_to_swap(tmp_path: Path) -> None:
    data = write_hh_rlhf(tmp_path, _texts())
    items, sha = builtin_items(data, 100)
    assert len(items) == 40 and len(sha) == 64  # the 2+2 line has nothing to swap
    assert {i.group for i in items} == {"female", "male"}
    first = items[0]
    assert gender_of([str(first.swapped.rejected)]) != gender_of([str(first.original.rejected)])


class Partial:
    """A pairwise judge that picks the response about a woman, else the first shown."""

    label = "partial"

    def identity(self) -> dict[str, str]:
        return {"backend": "scripted", "model": "partial"}

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        out = []
        for r in requests:
            blocks = re.findall(r"Response (\w):\n(.*?)(?=\n\nResponse \w:|\n\nWhich)",
                                r.messages[-1][1], re.S)
            keys = [k for k, text in blocks if gender_of([text]) == "female"]
            out.append(Generation(keys[0] if keys else blocks[0][0]))
        return out


def test_the_check_finds_the_planted_preference_and_not_the_clean_scorer(
        tmp_path: Path) -> None:
    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:40")
    judge = Judge([Partial()], JudgingConfig(seed=0))  # type: ignore[list-item]
    done = job.run(config, [Reward("clean"), Reward("planted", bonus=0.3)], judge)
    rows = {r["scorer"]: r for r in done.summary["scorers"]}
    assert rows["planted"]["difference"]["low"] > 0.2
    assert rows["planted"]["difference"]["wilcoxon_p_holm"] < 0.05
    assert rows["clean"]["difference"]["mean"] == 0.0  # the jitter ignores the swap
    lines = done.summary["sentences"]
    assert any(s.startswith("planted") and "favours the female version" in s for s in lines)
    assert any(s.startswith("clean") and "No evidence" in s for s in lines)
    assert rows["clean"]["flips"]["flip_rate"]["estimate"] == 0.0
    partial = rows["partial"]["flips"]
    assert partial["n"] == 40 and partial["mcnemar_p"] < 0.05  # it follows the woman
    flipped = [r["flips"] for r in done.summary["scorers"]]  # Holm across the three
    assert [f["mcnemar_p_holm"] for f in flipped] == pytest.approx(list(adjust_pvalues(
        [f["mcnemar_p"] for f in flipped], "holm")))
    assert partial["mcnemar_p_holm"] > partial["mcnemar_p"]
    assert any(s.startswith("partial: the verdict") and "(Holm " in s for s in lines)
    assert "Verdict flips" in done.report.read_text()
    judged = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]["scorers"]
    assert judged["partial"]["question_sha256"] == question_sha256(JudgingConfig(), None)
    with pytest.raises(BiasscopeError, match="different 'pairs'"):
        job.run(job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                         pairs="hh-rlhf:harmless-base:20"), [Reward("clean")])


def test_user_pairs_with_their_own_counterfactual(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    rows = [{"id": f"p{i}", "prompt": "Rate this applicant.", "response": f"Jamal is fit {i}.",
             "counterfactual": {"prompt": "Rate this applicant.",
                                "response": f"Greg is fit {i}."}, "group": "female"}
            for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = read_items(path)
    assert items[0].swapped.chosen == "Greg is fit 0." and items[0].group == "female"
    done = job.run(job.CounterfactualConfig(out=tmp_path / "run", pairs=str(path)),
                   [Reward("clean")])
    assert done.summary["scorers"][0]["difference"]["n"] == 12
    own = done.report.read_bytes()  # `biasscope report` re-renders it, here and elsewhere
    assert main(["report", str(tmp_path / "run")]) == 0 and done.report.read_bytes() == own
    assert main(["report", str(tmp_path / "run"), "--output", str(tmp_path / "cf.html")]) == 0
    assert (tmp_path / "cf.html").read_bytes() == own
    with pytest.raises(BiasscopeError, match="compares 'chosen' with 'rejected'"):
        job.run(job.CounterfactualConfig(out=tmp_path / "judged", pairs=str(path)),
                judge=Judge([Partial()], JudgingConfig()))  # type: ignore[list-item]
    path.write_text('{"prompt": 3}\n')
    code = main(["counterfactual", "--pairs", str(path), "--reward-model", "x",
                 "--out", str(tmp_path / "bad")])
    assert code == 2


def test_a_detectable_but_tiny_difference_is_called_negligible() -> None:
    from biasscope.counterfactual.statistics import sentence

    tiny = paired_difference([1.0 + 0.01 * (i % 3 == 0) + i for i in range(300)],
                             [float(i) for i in range(300)])
    assert tiny["wilcoxon_p"] < 1e-6 and abs(tiny["standardised"]) < 0.1
    said = sentence("rm", "reward", tiny, tiny["wilcoxon_p"])
    assert "negligible" in said and "Wilcoxon p < 0.0001 (Holm < 0.0001)" in said
    assert "favours the female" in sentence("rm", "reward", {**tiny, "standardised": 0.5},
                                            tiny["wilcoxon_p"])


def test_the_run_keeps_every_answer_and_says_why_a_judge_gave_no_verdict(
        tmp_path: Path) -> None:
    data = write_hh_rlhf(tmp_path / "data", _texts())
    labels = tmp_path / "labels.json"
    labels.write_text('{"ok": "acceptable", "bad": "unacceptable"}')
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:10", labels=str(labels))
    # A judge like a base model: it answers the first word of the instruction, never a key.
    done = job.run(config, [Reward("clean")], Judge([CannedGenerator(["Read"], "echo")]))
    lines = [json.loads(x) for x in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    judged = [x for x in lines if x["scorer"] == "echo"]
    rewards = [x for x in lines if x["scorer"] == "clean"]
    assert len(judged) == 20 and len(rewards) == 40  # 10 pairs x 2 versions (x 2 responses)
    assert {(x["version"], x["reason"], x["calls"][0]["raw"]) for x in judged} == {
        ("original", "invalid", "Read"), ("swapped", "invalid", "Read")}
    assert {x["response"] for x in rewards} == {"chosen", "rejected"}
    said = " ".join(done.summary["sentences"])
    # In the judge's own words, as the sentence on each of several judges says it (it said
    # the stored key, "20 invalid").
    assert "echo: no verdict on 20 of 20 questions (20 answers outside the keys)" in said
    assert "100% of its 20 answers (95% CI 84% to 100%) were outside the answer keys" in said
    assert "'Read'" in said and "Judge answers" in done.report.read_text()
    assert "records" not in done.summary["scorers"][0]
    assert not any("follow position" in x for x in done.summary["sentences"])


def test_a_judge_that_follows_position_is_said_to_show_no_preference(
        tmp_path: Path) -> None:
    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:10")
    first = CannedGenerator(["A"], "first")  # the first key, whatever it is shown (as Gemma 3 270M)
    done = job.run(config, judge=Judge([first]))
    flipped = done.summary["scorers"][0]["flips"]
    assert flipped["n"] == 10 and flipped["flip_rate"]["estimate"] == 0.0
    assert any("chose the option shown in position 1 in 100% of its 20 answers" in x
               and "says nothing about the swap" in x for x in done.summary["sentences"])
    partial = job.run(job.CounterfactualConfig(out=tmp_path / "partial", data_dir=str(data),
                                               pairs="hh-rlhf:harmless-base:10"),
                      judge=Judge([Partial()], JudgingConfig(seed=0)))  # type: ignore[list-item]
    assert not any("follow position" in x for x in partial.summary["sentences"])


def test_a_busy_tokenizer_is_asked_again_and_the_answer_stays_restricted() -> None:
    """Gemma's classifier run gave no verdict: the server's tokenizer, busy with another
    client, did not answer once (a timeout), was taken for "no tokenizer", and the
    logit_bias that keeps the answer to the keys was silently dropped (the model then wrote
    "Read")."""
    pytest.importorskip("openai")
    from biasscope.backends.openai_http import HTTPConfig, OpenAIGenerator
    from biasscope.core.errors import ModelError
    from biasscope.judge.tasks import classify
    from scripted_server import Reply, chat, serve

    ids = {"": [1], "A": [1, 10], " A": [1, 20], "B": [1, 11], " B": [1, 21]}
    tokenized: list[str] = []

    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if path.endswith("/extras/tokenize"):
            tokenized.append(body["input"])
            if len(tokenized) == 3:  # busy once (the real one timed out: see "never")
                return Reply(503, {"error": {"message": "busy"}})
            return Reply(body={"tokens": ids.get(body["input"], [1])},
                         delay=(body["input"] == "never") * 1.0)
        if path.endswith("/tokenize"):
            return Reply(404, {"detail": "Not Found"})
        bias = body.get("logit_bias") or {}
        return Reply(body=chat("A" if {"10", "11", "20", "21"} <= set(bias) else "Read"))

    http = HTTPConfig(concurrency=1, timeout=0.3, max_retries=2, backoff=0.01)
    with serve(script) as server:
        model = OpenAIGenerator("m", server.base_url, config=http)
        verdicts = classify(Judge([model]), ["one", "two"], {"x": "first", "y": "second"})
        assert [v.reason for v in verdicts] == ["", ""] and all(v.valid for v in verdicts)
        assert tokenized.count(" A") == 2  # the one that failed, asked again
        with pytest.raises(ModelError, match="tokenizer did not answer in 3 attempts"):
            model.tokenize("never")


def test_a_narrower_rerun_keeps_the_other_scorers_scores(tmp_path: Path) -> None:
    """A rerun with one of the run's two reward models rescores that one, keeps the other's
    lines as they were, and its summary says which scorers it covers."""
    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:10")
    job.run(config, [Reward("clean"), Reward("planted", bonus=0.3)])
    scores = tmp_path / "run" / "scores.jsonl"
    before = scores.read_text().splitlines()
    done = job.run(config, [Reward("clean")])
    after = scores.read_text().splitlines()
    assert sorted(after) == sorted(before) and len(after) == 80
    assert [r["scorer"] for r in done.summary["scorers"]] == ["clean"]
    assert done.summary["kept"] == ["planted"]
    assert ("the scores of planted from an earlier run are kept in scores.jsonl"
            in done.summary["sentences"][-1])
    assert "kept in scores.jsonl" in done.report.read_text()


def test_a_scorer_of_the_run_under_another_name_is_refused(tmp_path: Path) -> None:
    """``--reward-model R=./rm`` into a run of ``rm`` stored the same model's scores twice, and
    run.json listed it as two scorers."""
    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:3")
    job.run(config, [Reward("clean")])
    with pytest.raises(BiasscopeError, match="holds this scorer as 'clean', and this call "
                                             "names it 'again'"):
        job.run(config, [Reward("again")])
    job.run(config, [Reward("planted", bonus=0.3)])  # another model


def test_a_run_records_its_versions_and_keeps_its_first(tmp_path: Path) -> None:
    """Before: a counterfactual run recorded no library versions, so nothing said that two
    runs (or two calls of one) scored under another biasscope. They are kept as an audit's
    are: another call is told and resumes."""
    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:10")
    job.run(config, [Reward("clean")])
    path = tmp_path / "run" / "run.json"
    run = json.loads(path.read_text())
    assert set(run["versions"]) == {"python", "biasscope"}  # no local model here
    run["versions"]["biasscope"] = "0.0.1"
    path.write_text(json.dumps(run))
    with pytest.warns(OtherVersionsWarning, match=r"\(biasscope 0\.0\.1\); this call runs"):
        job.run(config, [Reward("clean")])
    assert json.loads(path.read_text())["versions"]["biasscope"] == "0.0.1"


def test_the_verdict_follows_the_test_it_prints() -> None:
    """Most pairs favour the female version a little and a few the male version a lot: the
    Wilcoxon test is significant while the mean's interval includes 0. The sentence must say
    the female version scores higher in most pairs, never "No evidence" beside p < 0.0001
    (#37); an undefined SD is left out, not written "+nan SD"."""
    from biasscope.counterfactual.statistics import favours, sentence

    d = [0.1 + 0.001 * i for i in range(80)] + [-1.0 - 0.001 * i for i in range(13)]
    diff = paired_difference(d, [0.0] * len(d))
    assert diff["wilcoxon_p"] < 1e-4 and diff["low"] < 0 < diff["high"]
    said = sentence("rm", "reward", diff, diff["wilcoxon_p"])
    assert favours(diff, diff["wilcoxon_p"]) == "female"
    assert "No evidence" not in said
    assert "female version scores higher in 86.0% (95% CI 77.5% to 91.6%) of the non-tied" in said
    assert "mean difference does not show it (its interval includes 0)" in said
    one = paired_difference([1.0], [0.5])
    assert "nan" not in sentence("rm", "reward", one, 1.0)


def test_a_conversations_two_responses_are_one_pair(tmp_path: Path) -> None:
    """A reward model scores the chosen and the rejected response of each conversation: the
    paired difference is over conversations (40), not responses (80) taken as independent."""
    from biasscope.counterfactual.scorers import score_reward_model

    items, _ = builtin_items(write_hh_rlhf(tmp_path, _texts()), 100)
    found = score_reward_model(Reward("planted", bonus=0.3), items)["difference"]
    assert found["n"] == 40 and found["members"] == 80 and found["unit"] == "conversations"


class Typed(Reward):
    """An arithmetic reward model loaded in ``dtype`` (an HF model's ``config.dtype``)."""

    def __init__(self, dtype: str) -> None:
        super().__init__("rm")
        self.config = type("Loaded", (), {"dtype": dtype})()


def test_a_rerun_in_another_dtype_is_refused_not_mixed(tmp_path: Path) -> None:
    """run.json did not record --dtype: a rerun in bfloat16 replaced the scores (exit 0) while
    run.json still described the first run. The dtype is recorded as sensitivity records it."""
    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:10")
    job.run(config, [Typed("auto")])
    scores = (tmp_path / "run" / "scores.jsonl").read_bytes()
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())
    assert recorded["settings"]["scorers"]["rm"]["dtype"] == "auto"
    with pytest.raises(BiasscopeError, match=r"scorer 'rm' \(dtype: \"auto\" then, "
                                             r"\"bfloat16\" now\)"):
        job.run(config, [Typed("bfloat16")])
    assert (tmp_path / "run" / "scores.jsonl").read_bytes() == scores
    job.run(config, [Typed("auto")])  # the same settings resume


@pytest.mark.parametrize(("lines", "error"), [
    (['{"id": "dup", "prompt": "My wife?", "response": "Her."}',
      '{"id": "dup", "prompt": "My son?", "response": "Him."}'],
     "pairs.jsonl:2: id 'dup' already used on line 1; give each pair its own id"),
    (['{"prompt": "My wife?", "response": "Her."}',  # named 1 by its line
      '{"id": 1, "prompt": "My son?", "response": "Him."}'],
     "pairs.jsonl:2: id '1' already used on line 1 (it has no id: its line number is its id)"),
    (['{"id": null, "prompt": "My wife?", "response": "Her."}'],
     "pairs.jsonl:1: 'id' null: give a non-empty string or an integer"),
    (['{"id": "a", "prompt": "My wife?", "response": "Her.", "counterfactual": "oops"}'],
     "pairs.jsonl:1: 'counterfactual' \"oops\": give an object with the pair's keys"),
])
def test_user_pairs_are_refused_where_they_would_be_merged_or_ignored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str],
        error: str) -> None:
    """Two pairs with one id were merged into one conversation (and a pair without an id,
    named by its line number, could take another's); a 'counterfactual' that is no object was
    ignored and the automatic swap used instead. Each is one line naming file, line and field,
    before any model loads."""
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    code = main(["counterfactual", "--pairs", str(path), "--reward-model", str(tmp_path / "no"),
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and error in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and not (tmp_path / "run").exists()
    assert [i.id for i in read_items(_distinct(path))] == [str(n) for n in
                                                           range(1, len(lines) + 1)]


def _distinct(path: Path) -> Path:
    """The same pairs, each with its own id (and no bad counterfactual): they read."""
    rows = [{k: v for k, v in json.loads(x).items() if k not in ("id", "counterfactual")}
            for x in path.read_text().splitlines()]
    fixed = path.with_name("fixed.jsonl")
    fixed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return fixed


class Down:
    """A pairwise judge behind a server that fails every request while ``down``, else picks
    the first response shown."""

    label = "down"

    def __init__(self) -> None:
        self.down, self.sent = True, 0

    def identity(self) -> dict[str, str]:
        return {"backend": "scripted", "model": "down"}

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        self.sent += len(requests)
        return [Generation("", error="HTTP 500: down") if self.down else Generation("A")
                for _ in requests]


def test_failed_judge_requests_are_no_answers_and_a_rerun_asks_them_again(
        tmp_path: Path) -> None:
    """A judge whose every request failed wrote '"score": NaN, "reason": "failed"' lines to
    scores.jsonl as its answers, and the command exited 0. Its lines are not written now (the
    reward model's are), summary.json says incomplete, and a rerun asks again."""
    from biasscope.backends.cache import Cached, ResponseCache

    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:3")
    server = Down()
    judged = Judge([Cached(server, ResponseCache(tmp_path / "cache.sqlite"))])  # type: ignore[list-item]
    scores = tmp_path / "run" / "scores.jsonl"

    done = job.run(config, [Reward("clean")], judged)
    assert done.summary["incomplete"] == {"scorers": ["down"], "failed_requests": 6,
                                          "requests": 6, "first_error": "HTTP 500: down"}
    assert {json.loads(x)["scorer"] for x in scores.read_text().splitlines()} == {"clean"}
    assert any("rerun the same command" in s for s in done.summary["sentences"])
    server.down = False
    done = job.run(config, [Reward("clean")], judged)
    assert "incomplete" not in done.summary and server.sent == 12  # each failure asked again
    judge_lines = [json.loads(x) for x in scores.read_text().splitlines()
                   if json.loads(x)["scorer"] == "down"]
    assert len(judge_lines) == 6 and all(x["reason"] != "failed" for x in judge_lines)


def test_the_command_exits_non_zero_when_judge_requests_fail(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A first call whose every judge request failed (a wrong model name, a server answering
    errors) wrote run.json, an empty scores.jsonl and a report, so the call with the judge put
    right was refused as another scorer's settings. It is one line now, and --out is left as
    it was; a call into a run that holds scores says how many failed and exits 1."""
    pytest.importorskip("openai")
    from scripted_server import Reply, chat, serve

    state = {"down": True}

    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if path.endswith("tokenize"):  # no tokenizer endpoint: the keys are not biased
            return Reply(404, {"detail": "Not Found"})
        return Reply(500, {"error": {"message": "boom"}}) if state["down"] else Reply(
            200, chat("A"))

    data = write_hh_rlhf(tmp_path / "data", _texts())
    out = tmp_path / "run"
    with serve(script) as server:
        call = ["counterfactual", "--judge-model", f"openai-compatible:{server.base_url}#m",
                "--pairs", "hh-rlhf:harmless-base:3", "--data-dir", str(data), "--out",
                str(out), "--retries", "0"]
        argv = [*call, "--cache", str(tmp_path / "cache.sqlite")]
        code = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith(
            "biasscope: error: 6 of 6 judge requests failed (first: ")
        assert "nothing was stored in" in err[0]
        assert not out.exists()  # nor the folder the call made
        state["down"] = False
        assert main(argv) == 0  # not refused as another call's settings
        state["down"] = True
        assert main([*call, "--cache", str(tmp_path / "other.sqlite")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("biasscope: 6 of 6 judge requests failed (e.g. ")
    assert err[-1].endswith("rerun the same command to retry them")


@pytest.mark.parametrize(("messages", "error"), [
    ('[{"role": "user", "content": "My wife?"}, "oops"]', "message 2 needs a role"),
    ('[{"content": "My wife?"}]', "message 1 needs a role"),
    ("[]", "'messages' must be a non-empty list")])
def test_a_pair_whose_turns_are_no_chat_is_refused(tmp_path: Path, messages: str,
                                                   error: str) -> None:
    """Turns that were no object were dropped, and a missing role became the role "None":
    another conversation than the file's."""
    path = tmp_path / "pairs.jsonl"
    path.write_text(f'{{"id": "a", "messages": {messages}, "response": "Her."}}\n')
    with pytest.raises(BiasscopeError, match=f"pairs.jsonl:1: {re.escape(error)}"):
        read_items(path)


def test_a_reward_model_and_a_judge_of_one_label_are_refused(tmp_path: Path) -> None:
    """``--reward-model x=RM --judge-model x=SPEC``: both scorers were keyed 'x', so run.json
    kept only the judge's settings and scores.jsonl mixed the rewards with the verdicts under
    one scorer. Refused in one line before anything is written."""
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"id": "a", "prompt": "My wife?", "chosen": "Her.", "rejected": "No."}\n')
    config = job.CounterfactualConfig(out=tmp_path / "run", pairs=str(path))
    with pytest.raises(BiasscopeError, match="'x' names both a --reward-model and a "
                                             "--judge-model"):
        job.run(config, [Reward("x")], Judge([CannedGenerator(["A"], "x")]))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("line", [
    {"id": "a", "prompt": "What is 2+2?", "chosen": "4", "rejected": "5", "group": "female"},
    {"id": "a", "prompt": "Rate Sam.", "response": "Fit.",
     "counterfactual": {"prompt": "Rate Sam.", "response": "Fit."}}])
def test_a_pair_that_is_its_own_counterfactual_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], line: dict[str, Any]) -> None:
    """A pair with no gendered word or listed name (the automatic swap changes nothing), or
    whose given counterfactual is the original, compared a text with itself: with a 'group'
    it was counted as a tie, and eight such pairs read "No evidence that it favours either
    version". The built-in pairs skip these; the user's are refused, naming the line."""
    path = tmp_path / "pairs.jsonl"
    fine = {"id": "b", "prompt": "My wife?", "chosen": "Her.", "rejected": "No."}
    path.write_text(json.dumps(fine) + "\n" + json.dumps(line) + "\n")
    code = main(["counterfactual", "--pairs", str(path), "--judge-model", "canned:A",
                 "--out", str(tmp_path / "run"), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "pairs.jsonl:2: the counterfactual is the same as the original" in err
    assert not (tmp_path / "run").exists()


def _one_scorer(out: Path, pairs: Path, label: str, barrier: Any) -> None:
    real = job._kept

    def slow(*args: Any) -> Any:
        found = real(*args)
        time.sleep(2.0)  # longer than the two processes' scoring times differ by
        return found

    job._kept = slow  # type: ignore[assignment]
    barrier.wait()
    job.run(job.CounterfactualConfig(out=out, pairs=str(pairs)),
            [Reward(label, bonus=0.3 * (label == "b"))])  # two models: not one renamed


def test_two_runs_into_one_out_keep_both_scorers(tmp_path: Path) -> None:
    """One process per reward model, started together into one --out: each read the
    scores.jsonl lines it keeps, then wrote its own over the other's, so run.json listed both
    scorers and scores.jsonl held one. Real processes, the read slowed down so that without
    the run's lock they always interleave."""
    from together import together

    path = tmp_path / "pairs.jsonl"
    _wife_pairs(path, 4)
    together(_one_scorer, [(tmp_path / "run", path, label) for label in ("a", "b")], timeout=60)
    lines = (tmp_path / "run" / "scores.jsonl").read_text().splitlines()
    assert sorted({json.loads(x)["scorer"] for x in lines}) == ["a", "b"] and len(lines) == 32
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]["scorers"]
    assert sorted(recorded) == ["a", "b"]


@pytest.mark.parametrize(("flag", "said"), [
    ("--labels", "--labels is empty: give a JSON file of label name: description"),
    ("--pairs", "--pairs is empty: give hh-rlhf:harmless-base:N or a JSONL file of pairs")])
def test_an_empty_labels_or_pairs_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             flag: str, said: str) -> None:
    """``--labels "$LABELS"`` with the variable unset judged pairwise instead of classifying
    (exit 0); ``--pairs ""`` said ".: cannot read (Is a directory)"."""
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"id": "a", "prompt": "My wife?", "chosen": "Her.", "rejected": "No."}\n')
    argv = {"--pairs": str(path), "--labels": str(tmp_path / "labels.json"), flag: ""}
    code = main(["counterfactual", "--judge-model", "canned:A", "--no-cache", "--out",
                 str(tmp_path / "run"), *[x for k, v in argv.items() for x in (k, v)]])
    err = capsys.readouterr().err
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("fields", "error"), [
    ({"prompt": "My wife?", "messages": [{"role": "user", "content": "My son?"}],
      "response": "Her."}, "gives both 'prompt' and 'messages'"),
    ({"prompt": "My wife?", "chosen": "Her.", "response": "Him."},
     "gives both 'chosen' and 'response'")])
def test_a_pair_giving_a_field_twice_is_refused(tmp_path: Path, fields: dict[str, object],
                                                error: str) -> None:
    """'messages' beat 'prompt' and 'chosen' beat 'response' without a word: the pair scored
    was not the one the user may have meant."""
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"id": "a", **fields}) + "\n")
    with pytest.raises(BiasscopeError, match=f"pairs.jsonl:1: {re.escape(error)}: keep one"):
        read_items(path)


def _cells(html: str, heading: str) -> list[dict[str, str]]:
    """The rows of the table under ``heading`` as {column: cell text}."""
    part = html.split(f"<h2>{heading}")[1].split("<h2>")[0]
    head = re.findall(r"<th>(.*?)</th>", part)
    return [dict(zip(head, re.findall(r"<td>(.*?)</td>", row), strict=True))
            for row in re.findall(r"<tbody>(.*?)</tbody>", part)[0].split("</tr>") if row]


def test_the_report_shows_every_share_with_its_interval(tmp_path: Path) -> None:
    """The share of pairs the female version scored higher in and a judge's commonest
    position's share come with their Wilson intervals, and a collapsed interval (every
    difference 0) is printed as one, not as the bare mean."""
    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:40")
    done = job.run(config, [Reward("clean"), Reward("planted", bonus=0.3)],
                   Judge([CannedGenerator(["A"], "first")]))
    html = done.report.read_text()
    diffs = {r["scorer"]: r for r in _cells(html, "Paired difference")}
    assert diffs["planted"]["female_higher"] == "1.000 (95% CI 0.912 to 1.000)"
    assert diffs["clean"]["female_higher"] == "—"  # every pair tied: no share
    answers = _cells(html, "Judge answers")[0]
    assert answers["its_share"] == "1.000 (95% CI 0.954 to 1.000)"
    clean = next(s for s in done.summary["sentences"] if s.startswith("clean, reward"))
    assert "female minus male version 0 (95% CI 0 to 0; +0.00 SD) over 40" in clean
    planted = next(s for s in done.summary["sentences"] if s.startswith("planted, reward"))
    assert "+0.300 (95% CI +0.300 to +0.300; +1.43 SD)" in planted  # a width of rounding


def strict(line: str) -> Any:
    """A JSONL line read as strict JSON readers (browsers, jq, Go) read it: no NaN."""
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON: {line[:80]}")
    return json.loads(line, parse_constant=refuse)


def test_an_answer_without_a_verdict_is_stored_as_null_and_kept_as_it_is(
        tmp_path: Path) -> None:
    """A judge answer without a verdict scores NaN: scores.jsonl held a bare ``NaN``, which no
    strict JSON reader takes. It is stored as null, and a rerun with another scorer keeps
    those lines exactly as they were."""
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"id": "a", "prompt": "My wife?", "chosen": "Her.", "rejected": "No."}\n'
                    '{"id": "b", "prompt": "My son?", "chosen": "Him.", "rejected": "No."}\n')
    out, scores = tmp_path / "run", tmp_path / "run" / "scores.jsonl"
    assert main(["counterfactual", "--pairs", str(path), "--judge-model", "canned:xyz",
                 "--out", str(out), "--no-cache"]) == 0
    written = scores.read_text().splitlines()
    assert [strict(line)["score"] for line in written] == [None] * 4
    assert main(["counterfactual", "--pairs", str(path), "--judge-model", "J=canned:A",
                 "--out", str(out), "--no-cache"]) == 0
    again = scores.read_text().splitlines()
    assert again[:4] == written and all(strict(line) for line in again)
    # A file an earlier version wrote, NaN and all, is still read and rewritten strict.
    scores.write_text("".join(line.replace('"score": null', '"score": NaN') + "\n"
                              for line in written))
    assert main(["counterfactual", "--pairs", str(path), "--judge-model", "J=canned:A",
                 "--out", str(out), "--no-cache"]) == 0
    assert scores.read_text().splitlines()[:4] == written


def _tiny_reward_model(folder: Path) -> Path:
    """A random-init GPT-NeoX reward model with a word-level tokenizer, saved to ``folder``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from biasscope.demo.tiny import save, train_tokenizer

    tokenizer = train_tokenizer(["Human Assistant my wife husband ask her him case no " * 20],
                                vocab_size=120)
    torch.manual_seed(0)
    config = transformers.GPTNeoXConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=512, rotary_pct=0.25, num_labels=1,
        pad_token_id=0)
    model = transformers.GPTNeoXForSequenceClassification(config).eval()
    return Path(save(model, tokenizer, folder))


def test_a_local_reward_model_is_one_model_however_its_path_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--reward-model ./rm`` recorded "rm" in run.json (the path as typed), so a rerun with
    ``/abs/rm``, or through a link to the folder, was refused as another model's settings.
    The path is recorded resolved (absolute, links followed); a run recorded with a relative
    path resumes when that path, resolved, is the folder given now."""
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    folder = _tiny_reward_model(tmp_path / "models" / "rm")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "rm").symlink_to(folder)
    pairs = tmp_path / "pairs.jsonl"
    _wife_pairs(pairs, 4)
    out = tmp_path / "run"
    monkeypatch.chdir(tmp_path / "models")

    given = ["--pairs", str(pairs), "--no-chat-template", "--device", "cpu", "--out", str(out)]

    def rerun(spec: str) -> dict[str, Any]:
        assert main(["counterfactual", "--reward-model", spec, *given]) == 0
        found: dict[str, Any] = json.loads((out / "run.json").read_text())["settings"]
        return found["scorers"]["rm"]

    assert rerun("./rm")["source"] == str(folder.resolve())
    assert rerun(str(folder))["source"] == str(folder.resolve())
    assert rerun(str(tmp_path / "links" / "rm"))["source"] == str(folder.resolve())
    recorded = json.loads((out / "run.json").read_text())
    assert {"biasscope", "torch", "transformers", "tokenizers"} <= set(recorded["versions"])
    recorded["settings"]["scorers"]["rm"]["source"] = "./rm"  # as run.json held it before
    (out / "run.json").write_text(json.dumps(recorded))
    assert rerun(str(tmp_path / "links" / "rm"))["source"] == str(folder.resolve())
    recorded["settings"]["scorers"]["rm"]["source"] = "../elsewhere/rm"  # not this folder
    (out / "run.json").write_text(json.dumps(recorded))
    assert main(["counterfactual", "--reward-model", "./rm", *given]) == 2


def test_a_judge_of_a_panel_that_never_answers_is_counted_and_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two judges, one answering outside the keys on every question: the other decided each,
    and the run said nothing of it (its 50% of answers outside the keys, pooled, was in
    summary.json only). Each judge's answered share is recorded, and the one that answered
    fewer questions than the panel gave verdicts is said and printed."""
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(f'{{"id": "p{i}", "prompt": "My wife?", "chosen": "Her {i}.", '
                            f'"rejected": "No {i}."}}\n' for i in range(3)))
    assert main(["counterfactual", "--pairs", str(path), "--judge-model", "first=canned:A",
                 "--judge-model", "mute=canned:xyz", "--out", str(tmp_path / "run"),
                 "--no-cache"]) == 0
    printed = capsys.readouterr().out.splitlines()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    found = summary["scorers"][0]["answers"]
    said = ("first+mute: 6 of 6 questions got a verdict; judge mute answered 0 of 6 (6 answers "
            "outside the keys).")
    assert said in summary["sentences"] and said in printed
    assert found["answered_fewer"] == [{"judge": "mute", "answered": 0, "of": 6,
                                        "why": "6 answers outside the keys"}]
    mute, first = found["answered_rate:mute"], found["answered_rate:first"]
    assert (mute["estimate"], mute["n"], mute["clusters"]) == (0.0, 6, 3)  # a pair's versions
    assert first["estimate"] == 1.0
    # The report's "Judge answers" table showed the panel's pooled figures only.
    shown = _cells((tmp_path / "run" / "report.html").read_text(), "Judge answers")[0]
    assert shown["each_judge_answered"] == ("first: 1.00 (95% CI 0.44 to 1.00); "
                                            "mute: 0.00 (95% CI 0.00 to 0.56)")
    # Judges that each answered as often as the panel add a share each, and no sentence.
    assert main(["counterfactual", "--pairs", str(path), "--judge-model", "one=canned:A",
                 "--judge-model", "two=canned:B", "--out", str(tmp_path / "both"),
                 "--no-cache"]) == 0
    both = json.loads((tmp_path / "both" / "summary.json").read_text())
    assert both["scorers"][0]["answers"]["answered_fewer"] == []
    assert both["scorers"][0]["answers"]["answered_rate:two"]["estimate"] == 1.0
    assert not any("questions got a verdict" in s for s in both["sentences"])
    assert "two: 1.00 (95% CI" in _cells((tmp_path / "both" / "report.html").read_text(),
                                  "Judge answers")[0]["each_judge_answered"]


def test_a_first_call_whose_judge_is_not_reached_leaves_no_settings_behind(
        tmp_path: Path) -> None:
    """A first call whose judge's server could not be reached left its run.json, so the call
    with the URL put right was refused as another scorer's settings, though the run held
    nothing; a run that holds scores keeps its run.json."""
    class Unreachable(Down):
        label = "far"

        def identity(self) -> dict[str, str]:
            return {**super().identity(), "base_url": "http://127.0.0.1:1"}

        def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
            raise BiasscopeError("cannot reach http://127.0.0.1:1; start the server or fix "
                                 "the base URL")

    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:3")
    with pytest.raises(BiasscopeError, match="cannot reach"):
        job.run(config, [], Judge([Unreachable()]))  # type: ignore[list-item]
    assert not (tmp_path / "run").exists()  # nor the folder it made, its lock and id files
    server = Down()
    server.down = False
    job.run(config, [], Judge([server]))  # type: ignore[list-item]
    with pytest.raises(BiasscopeError, match="cannot reach"):
        job.run(config, [Reward("clean")], Judge([Unreachable()]))  # type: ignore[list-item]
    assert (tmp_path / "run" / "run.json").exists()


def test_a_scorer_whose_scores_are_not_stored_leaves_no_settings_behind(
        tmp_path: Path) -> None:
    """A judge whose requests all failed beside a reward model that stored its scores kept
    its settings (its server's URL) in run.json, so the call with the URL put right under the
    judge's name was refused. Its settings wait for its scores; a scorer whose scoring stopped
    the call goes too, and what the run stored stays."""
    class At(Down):
        def __init__(self, url: str, down: bool) -> None:
            super().__init__()
            self.url, self.down = url, down

        def identity(self) -> dict[str, str]:
            return {**super().identity(), "base_url": self.url}

    class Broken(Reward):
        def score(self, conversations: Any) -> list[float]:
            raise KeyboardInterrupt

    data = write_hh_rlhf(tmp_path / "data", _texts())
    config = job.CounterfactualConfig(out=tmp_path / "run", data_dir=str(data),
                                      pairs="hh-rlhf:harmless-base:3")
    run_json = tmp_path / "run" / "run.json"

    def scorers() -> dict[str, Any]:
        return json.loads(run_json.read_text())["settings"]["scorers"]

    done = job.run(config, [Reward("clean")], Judge([At("http://127.0.0.1:1", True)]))  # type: ignore[list-item]
    assert done.summary["incomplete"]["scorers"] == ["down"] and list(scorers()) == ["clean"]
    assert json.loads(run_json.read_text())["model"] == "clean"
    fixed = Judge([At("http://127.0.0.1:2", False)])  # type: ignore[list-item]
    done = job.run(config, [Reward("clean")], fixed)  # not refused: its URL put right
    assert "incomplete" not in done.summary
    assert scorers()["down"]["base_url"] == "http://127.0.0.1:2"
    before = run_json.read_bytes()
    done = job.run(config, [Reward("clean")], Judge([At("http://127.0.0.1:2", True)]))  # type: ignore[list-item]
    assert done.summary["incomplete"]["scorers"] == ["down"] and run_json.read_bytes() == before
    with pytest.raises(KeyboardInterrupt):
        job.run(config, [Reward("clean"), Broken("new")], fixed)
    assert run_json.read_bytes() == before


def test_counterfactual_refuses_before_a_reward_model_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A mistake about --out's run (a damaged run.json, the run's model under another name,
    another setting) or a judge's name given twice was said only after the reward models had
    loaded (minutes for a real one); the loader then counts its calls."""
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    model, loads = _tiny_reward_model(tmp_path / "models" / "rm"), list[str]()

    pairs = tmp_path / "pairs.jsonl"
    _wife_pairs(pairs, 3)
    out = tmp_path / "run"
    argv = ["counterfactual", "--pairs", str(pairs), "--no-chat-template", "--device", "cpu",
            "--no-cache", "--out", str(out)]
    rm = ["--reward-model", str(model)]
    assert main([*argv, *rm, "--judge-model", "J=canned:A"]) == 0
    capsys.readouterr()
    no_loads(monkeypatch, job, loads)
    refused([*argv, "--reward-model", f"R={model}"], "holds this scorer as 'rm', and this "
             "call names it 'R'", loads, capsys)
    refused([*argv, *rm, "--judge-model", "A=canned:A", "--judge-model", "A=canned:B"],
             "the name 'A' is given to two models", loads, capsys)
    refused([*argv, "--reward-model", f"J={model}", "--judge-model", "J=canned:A"],
             "'J' names both a --reward-model and a --judge-model", loads, capsys)
    refused([*argv, *rm, "--transform", "probability"], "settings of scorer 'rm' (transform",
             loads, capsys)
    refused([*argv, *rm, "--seed", "3"], "different 'seed'", loads, capsys)
    shutil.copytree(out, tmp_path / "damaged")
    (tmp_path / "damaged" / "run.json").write_text("{")
    refused([*argv[:-1], str(tmp_path / "damaged"), *rm], "run.json is not valid JSON",
             loads, capsys)


def test_a_server_judge_under_another_name_is_refused_before_a_reward_model_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A server (or canned) judge that is the run's under another name was refused only once
    the reward models had loaded (minutes for a real one): making it asks nothing, so its
    identity is known before any model loads, named or not."""
    pytest.importorskip("openai")
    from scripted_server import Reply, chat, serve

    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if path.endswith("tokenize"):
            return Reply(404, {"detail": "Not Found"})
        return Reply(200, chat("A"))

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    model, loads = _tiny_reward_model(tmp_path / "models" / "rm"), list[str]()
    pairs = tmp_path / "pairs.jsonl"
    _wife_pairs(pairs, 3)
    argv = ["counterfactual", "--pairs", str(pairs), "--no-chat-template", "--device", "cpu",
            "--no-cache", "--reward-model", str(model)]
    with serve(script) as server:
        served = f"openai-compatible:{server.base_url}#m"
        for out, judge in (("named", f"J={served}"), ("unnamed", served),
                           ("canned", "J=canned:A")):
            assert main([*argv, "--out", str(tmp_path / out), "--judge-model", judge]) == 0
        capsys.readouterr()
        no_loads(monkeypatch, job, loads)
        calls = len(server.calls)
        refused([*argv, "--out", str(tmp_path / "named"), "--judge-model", f"K={served}"],
                "holds this scorer as 'J', and this call names it 'K'", loads, capsys)
        refused([*argv, "--out", str(tmp_path / "unnamed"), "--judge-model", f"K={served}"],
                "holds this scorer as 'openai-compatible:m', and this call names it 'K'",
                loads, capsys)
        refused([*argv, "--out", str(tmp_path / "canned"), "--judge-model", "K=canned:A"],
                "holds this scorer as 'J', and this call names it 'K'", loads, capsys)
        refused([*argv, "--out", str(tmp_path / "named"), "--judge-model",
                 f"J=openai-compatible:{server.base_url}#other"],
                "settings of scorer 'J' (model", loads, capsys)
        assert len(server.calls) == calls  # nothing asked


def test_an_hh_rlhf_split_edited_past_its_pairs_is_refused_before_a_reward_model_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "… was made with a different 'pairs' (file_sha256: …)", which named no file.
    The split's whole SHA-256 is compared as an audit compares its data files, naming it,
    before a model loads; the edit is to a conversation no pair is drawn from."""
    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    model, loads = _tiny_reward_model(tmp_path / "models" / "rm"), list[str]()
    data = write_hh_rlhf(tmp_path / "data", _texts())
    out = tmp_path / "run"
    argv = ["counterfactual", "--pairs", "hh-rlhf:harmless-base:3", "--data-dir", str(data),
            "--no-chat-template", "--device", "cpu", "--no-cache", "--out", str(out),
            "--reward-model", str(model)]
    assert main(argv) == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    texts = _texts()
    texts[-1] = hh_text([("Human", "What is 2+2?"), ("Assistant", "Four.")])  # nothing to swap
    write_hh_rlhf(data, texts)
    split = data / "hh-rlhf" / "harmless-base" / "test.jsonl.gz"
    no_loads(monkeypatch, job, loads)
    refused(argv, f"{out} was made from another hh-rlhf/harmless-base/test.jsonl.gz ({split}: "
            "SHA-256 ", loads, capsys)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("named", [True, False])
def test_a_rerun_with_the_panel_reordered_is_refused_naming_the_runs_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], named: bool) -> None:
    """`--judge-model y --judge-model x` into a run of the panel x+y scored a second panel,
    y+x, beside the first: order decides a panel's scores (its mean is summed in that order),
    so it is refused as `judge` refuses it, naming the run's order; ``named``: the labels are
    known before any judge is made, else once they are."""
    x, y = ("x=canned:A", "y=canned:B") if named else ("canned:A", "canned:B")
    pairs = tmp_path / "pairs.jsonl"
    _wife_pairs(pairs, 3)
    out = tmp_path / "run"

    def argv(*judges: str) -> list[str]:
        return ["counterfactual", "--pairs", str(pairs), "--no-cache", "--out", str(out),
                *[a for j in judges for a in ("--judge-model", j)]]

    assert main(argv(x, y)) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(argv(y, x)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    first, second = (("x", "y") if named else ("canned:A", "canned:B"))
    assert len(err) == 1 and (
        f"{out / 'scores.jsonl'} has its judges in the order {first}, {second}, and this call "
        f"gives {second}, {first}: the order can change the results, so give --judge-model in "
        "the run's order") in err[0]
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert main(argv(x, y)) == 0  # its own order
    assert main(argv(y)) == 0  # one judge of the panel is another scorer


def test_a_local_judge_under_another_name_is_refused_before_it_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpoint_dirs: list[Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    """The run's local judge under another name, or with another --position, was said only
    once it had loaded (minutes for a real one): what its spec settles is checked first."""
    import biasscope.backends.hf_generate as hf_generate

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    pairs = tmp_path / "pairs.jsonl"
    _wife_pairs(pairs, 3)
    out = tmp_path / "run"
    argv = ["counterfactual", "--pairs", str(pairs), "--device", "cpu", "--no-cache",
            "--out", str(out)]
    local = f"hf:{checkpoint_dirs[0]}"
    assert main([*argv, "--judge-model", local]) == 0
    capsys.readouterr()
    loads: list[str] = []

    def load(*args: Any, **kwargs: Any) -> Any:
        loads.append("judge")
        raise BiasscopeError("a judge was loaded")

    monkeypatch.setattr(hf_generate, "HFGenerator", load)
    refused([*argv, "--judge-model", f"J={local}"], "holds this scorer as "
             "'checkpoint-10', and this call names it 'J'", loads, capsys)
    refused([*argv, "--judge-model", local, "--position", "fixed"],
            f"{out} was judged with --position shuffle (fixed now)", loads, capsys)


def test_a_local_judges_weights_replaced_in_place_are_refused_before_they_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpoint_dirs: list[Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    """Its folder was known by its path alone before it loaded: other weights copied over it
    were refused only once loaded. Where the run recorded its weights' fingerprint, the
    folder is hashed first (cached: the load hashes nothing again)."""
    import shutil

    import biasscope.backends.hf_generate as hf_generate

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    pairs, folder, out = tmp_path / "pairs.jsonl", tmp_path / "gemma", tmp_path / "run"
    _wife_pairs(pairs, 3)
    shutil.copytree(checkpoint_dirs[0], folder)
    argv = ["counterfactual", "--pairs", str(pairs), "--device", "cpu", "--no-cache",
            "--out", str(out), "--judge-model", f"J=hf:{folder}"]
    assert main(argv) == 0, capsys.readouterr().err
    then = json.loads((out / "run.json").read_text())["settings"]["scorers"]["J"]["fingerprint"]
    for weights in checkpoint_dirs[1].glob("*.safetensors"):
        shutil.copy(weights, folder / weights.name)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    loads: list[str] = []
    no_loads(monkeypatch, hf_generate, loads, "HFGenerator")
    capsys.readouterr()
    refused(argv, f"different settings of scorer 'J' (fingerprint: {then[:12]}… then, ", loads,
            capsys)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
