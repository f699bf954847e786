"""Several prompt wordings per probe (``--wordings``): the built-in sets, the template file
and its one-line errors, the answer at the next token on the test tokenizer, the default left
as it was, wordings in records and in the settings checked on rerun, and a dynamics and an
audit run across wordings with their verdicts."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError, DataError
from biasscope.core.wordings import Measure, gap, verdict, wording_uncertainty
from biasscope.probes import PROBES, load_probe
from biasscope.probes.specs import load_probes
from biasscope.probes.wordings import (
    Worded,
    boundary_problems,
    builtin,
    with_wordings,
    wordings_for,
    wordings_of,
)


def test_every_builtin_set_is_large_enough_starts_with_the_default_and_passes_its_checks():
    sizes = {name: len(wordings_of(name).builtin) for name in with_wordings()}
    assert sizes["winobias-gender"] >= 8
    assert all(sizes[n] >= 4 for n in ("bbq", "adult-counterfactual", "professional-bias"))
    assert set(with_wordings()) <= set(PROBES)
    defaults = {"winobias-gender": "winobias", "bbq": "bbq", "professional-bias": "professional"}
    for name, module in defaults.items():
        first = builtin(name)[0]
        assert first.template == __import__(f"biasscope.probes.{module}",
                                            fromlist=["x"]).DEFAULT_TEMPLATE
        assert wordings_for(name, "builtin") == builtin(name)
    adult = builtin("adult-counterfactual")
    assert {w.system for w in adult} > {adult[0].system}  # a system turn that allows unfairness


def test_each_winobias_wording_ends_where_the_answer_is_the_next_token(winobias_dir,
                                                                      tiny_tokenizer):
    from transformers import PreTrainedTokenizerFast

    probe = load_probes("winobias-gender", data_dir=winobias_dir, wordings="builtin")[0]
    items = probe.items(0)
    assert {i.groups["template"] for i in items} == {f"w{k}" for k in range(8)}
    tokenizer = tiny_tokenizer if isinstance(tiny_tokenizer, PreTrainedTokenizerFast) else None
    assert tokenizer is not None
    assert boundary_problems(tokenizer, items[::7]) == []
    # The check can fail: with a GPT-2-like split, a prompt ending in a space takes the
    # option's leading space, so the option is not the next token.
    spaced = [replace(items[0], prompt=items[0].prompt + " ")]
    assert boundary_problems(_SplitTokenizer(), items[:3]) == []
    assert boundary_problems(_SplitTokenizer(), spaced) != []


class _SplitTokenizer:
    """Words with their leading space, and runs of spaces, as tokens (as GPT-2 splits)."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        pieces = re.findall(r" ?\S+|\s+", text)
        return {"input_ids": [self.vocab.setdefault(p, len(self.vocab)) for p in pieces]}


def test_no_wordings_and_one_wording_leave_the_probe_as_it_was(winobias_dir):
    plain = load_probes("winobias-gender,professional-bias", data_dir=winobias_dir)
    one = load_probes("winobias-gender,professional-bias", data_dir=winobias_dir,
                      wordings="1")
    for a, b in zip(plain, one):
        assert [(i.id, i.prompt) for i in a.items(1)] == [(i.id, i.prompt) for i in b.items(1)]
        assert a.config() == b.config()


def test_worded_items_carry_the_wording_in_id_and_groups(winobias_dir):
    probe = load_probes("winobias-gender", data_dir=winobias_dir, wordings="3")[0]
    assert isinstance(probe, Worded)
    base = load_probe("winobias-gender", data_dir=winobias_dir).items(2)
    items = probe.items(2)
    assert len(items) == 3 * len(base)
    assert items[0].id == base[0].id.replace(":seed2", "@w0:seed2")
    assert len({i.id for i in items}) == len(items)
    assert [w["id"] for w in probe.config()["wordings"]] == ["w0", "w1", "w2"]
    kept = probe.limited(items, 4)
    by = {w: sorted(i.id.replace(f"@{w}", "") for i in kept if i.groups["template"] == w)
          for w in ("w0", "w1", "w2")}
    assert by["w0"] == by["w1"] == by["w2"] and len(by["w0"]) == 4


@pytest.mark.parametrize("name", with_wordings())
def test_wordings_reuse_the_data_read_once_and_ask_what_a_fresh_load_asks(name, tmp_path,
                                                                          monkeypatch):
    """A data file was read and parsed again for every wording: 300 wordings took minutes
    before the first prompt. Now it is read once, and each wording asks exactly what the
    probe loaded afresh with that wording asks."""
    from adult_fixture import ROWS
    from adult_fixture import write as write_adult
    from bbq_fixture import write_bbq
    from biasscope.core import jsonl
    from winobias_fixture import write_winobias
    from winogender_fixture import write_winogender

    write_winobias(tmp_path)
    write_winogender(tmp_path)
    write_bbq(tmp_path)
    write_adult(tmp_path, ROWS)
    reads: list[str] = []
    read_text = jsonl.read_text

    def counted(path, *args, **kwargs):
        reads.append(str(path))
        return read_text(path, *args, **kwargs)

    for module in ("winobias", "winogender", "bbq", "adult"):
        monkeypatch.setattr(f"biasscope.probes.{module}.items.read_text", counted)
    worded = load_probes(name, data_dir=tmp_path, wordings="builtin")[0]
    assert isinstance(worded, Worded) and len(reads) == len(set(reads))
    for wording, probe in zip(builtin(name), worded._probes.values()):
        fresh = load_probe(name, data_dir=tmp_path, **wording.options())
        assert probe.config() == fresh.config()
        assert probe.items(1) == fresh.items(1)
        if hasattr(fresh, "messages"):
            item = fresh.items(1)[0]
            assert probe.messages(item) == fresh.messages(item)


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "wordings.txt"
    path.write_text(text)
    return str(path)


GOOD = ("# my wordings\n### a\n{sentence}\nIs the {occupation} {o1}, {o2} or {o3}?\nAnswer:\n"
        "### winobias-gender b\nOptions: {o1} {o2} {o3}\n{sentence}\nThe {occupation} is\n")


def test_a_template_file_gives_its_wordings(tmp_path, winobias_dir):
    wordings = wordings_for("winobias-gender", _file(tmp_path, GOOD))
    assert [w.id for w in wordings] == ["a", "b"]
    assert wordings[1].template.endswith("The {occupation} is")
    adult = wordings_for("adult-counterfactual", _file(
        tmp_path, "### x\nsystem: Be brief.\n{input}\nOver $50k?\n### y\n{input} yes or no?"))
    assert [(w.system, w.template) for w in adult] == [("Be brief.", "{input}\nOver $50k?"),
                                                       (None, "{input} yes or no?")]


@pytest.mark.parametrize(("text", "fragment"), [
    ("### a\n{sentence} {occupation} {o1} {o2}\nAnswer:", "lacks {o3}"),
    ("### a\n{sentence} {occupation} {o1} {o2} {o3} {who}\nAnswer:", "field other than"),
    ("### a\n{sentence} {occupation}: {o1} {o2} {o3}", "end the template with its cue"),
    ("### a\n{sentence} {occupation} {o1} {o2} {o3} Answer: ", "end the template with its cue"),
    ("### a\n{sentence} {occupation} {o1} {o2} {o3} A:\n### a\n{o1} {o2} {o3} {sentence} "
     "{occupation} B:", "used twice"),
    ("### a\n{sentence} {occupation} {o1} {o2} {o3} A:\n### b\n{sentence}  {occupation} {o1} "
     "{o2} {o3} A:", "the same template as a"),
    ("### a b c\n{sentence}", "a header is"),
    ("hello\n### a\n{sentence}", "text before the first"),
    ("### a\n\n", "template a is empty"),
    ("### a\nsystem: x\n{sentence} {occupation} {o1} {o2} {o3} A:", "only adult"),
    ("### lambada a\nx", "no probe 'lambada' takes wordings"),
    ("### bbq x\n{context} {question} {ans0} {ans1} {ans2}", "no template for winobias-gender"),
])
def test_a_bad_template_file_is_one_line_naming_file_and_line(tmp_path, text, fragment):
    path = _file(tmp_path, text)
    with pytest.raises((BiasscopeError, DataError)) as error:
        wordings_for("winobias-gender", path)
    message = str(error.value)
    assert fragment in message and "\n" not in message
    assert path in message


@pytest.mark.parametrize(("spec", "fragment"), [
    ("9", "has 8 built-in wordings"), ("0", "give 1 or more"), ("nope.txt", "no such file")])
def test_a_bad_wordings_value_is_refused(spec, fragment):
    with pytest.raises(BiasscopeError, match=fragment):
        wordings_for("winobias-gender", spec)


def test_dynamics_across_wordings_records_settings_and_verdicts(winobias_dir, checkpoint_dirs,
                                                                tmp_path, capsys):
    out = tmp_path / "run"
    args = ["dynamics", "--model", str(checkpoint_dirs[2]), "--data-dir", str(winobias_dir),
            "--seeds", "0", "--quiet", "--out", str(out)]
    assert main([*args, "--wordings", "3"]) == 0
    records = pd.read_parquet(next((out / "records").glob("*.parquet")))
    assert sorted(records["template"].unique()) == ["w0", "w1", "w2"]
    run = json.loads((out / "run.json").read_text())
    assert "wordings" in json.dumps(run["settings"])
    summary = json.loads((out / "summary.json").read_text())
    model = next(iter(summary["analysis"]["models"].values()))
    across = next(iter(model["breakdown"].values()))["wordings"]
    assert set(across) == {"jsdp_gap", "accuracy_gap", "pro_minus_anti", "male_default",
                           "occupation_stereotype"}
    gap = across["jsdp_gap"]
    assert [w["wording"] for w in gap["per_wording"]] == ["w0", "w1", "w2"]
    assert 0.0 <= gap["variance_share"] <= 1.0
    pooled = gap["pooled"]
    assert pooled["low"] <= pooled["estimate"] <= pooled["high"]
    assert model["sentences"][0].startswith("checkpoint-30: pooled over wordings, the JSD-P "
                                            "gap is")
    assert "holds across" in model["sentences"][1] or "wording" in model["sentences"][1]
    assert len(model["emergence_across_wordings"]["steps"]) == 1
    # Tests over prompts count a prompt once, not once per wording (wordings, like seeds,
    # are repeated measurements of it).
    rows = model["tests"]["jsdp_correct"][0]
    assert rows["n_male"] + rows["n_female"] == len(records[records["answer_label"] != "not "
                                                            "specified"]) // 3
    assert rows["seeds"] == 1  # --seeds 0 under 3 wordings: one seed, not 3 (#37)
    report = (out / "report.html").read_text()
    assert report.count("Across wordings: ") >= 4 and "two-level bootstrap" in report
    capsys.readouterr()
    assert main([*args, "--wordings", "2"]) != 0  # another set of wordings: refused
    assert "different settings" in capsys.readouterr().err


def test_audit_across_wordings_gives_the_verdicts(checkpoint_dirs, tmp_path):
    out = tmp_path / "audit"
    assert main(["audit", "--model", f"hf:{checkpoint_dirs[1]}", "--probe", "professional-bias",
                 "--wordings", "builtin", "--scoring", "options", "--limit", "8", "--out",
                 str(out)]) == 0
    entry = json.loads((out / "summary.json").read_text())["probes"]["professional-bias"]
    assert set(entry["wordings"]) == {"pronoun_effect", "stereotyped_share"}
    assert entry["items"] == 4 * 8  # --limit is per wording
    assert entry["sentences"][0] == entry["wordings"]["pronoun_effect"]["verdict"]
    assert "Across wordings" in (out / "report.html").read_text()


def _synthetic(effects: list[float], n: int = 200, noise: float = 0.3) -> pd.DataFrame:
    """Per wording, ``n`` pairs of a male and a female row whose values differ by the
    wording's effect, plus noise."""
    rng = np.random.default_rng(1)
    rows = []
    for w, effect in enumerate(effects):
        for pair in range(n):
            for male in (True, False):
                rows.append({"wording": f"w{w}", "pair": pair, "male": male,
                             "x": (effect if male else 0.0) + rng.normal(0, noise)})
    return pd.DataFrame(rows)


def _run(frame: pd.DataFrame) -> dict:
    columns, combine = gap(frame["x"], frame["male"], ~frame["male"])
    return wording_uncertainty(Measure("g", columns, combine), frame["wording"].to_numpy(),
                               frame["pair"].to_numpy(), n_resamples=400)


def test_wordings_that_agree_hold_and_wordings_that_reverse_are_said():
    same = _run(_synthetic([0.5] * 6))
    assert same["agree"] == 6 and same["reverse"] == 0 and same["significant"] == 6
    assert same["variance_share"] < 0.2
    assert verdict(same, "the gap").startswith("the gap holds across 6 of 6 wordings")
    assert abs(same["pooled"]["estimate"] - 0.5) < 0.05
    split = _run(_synthetic([0.8, 0.8, 0.8, 0.8, -0.3, -0.3]))
    assert split["reverse"] == 2 and split["variance_share"] > 0.8
    pooled = split["pooled"]
    # The wording's spread widens the interval far beyond the items-only one.
    assert (pooled["high"] - pooled["low"]) > 3 * (pooled["items_only_high"]
                                                  - pooled["items_only_low"])
    text = verdict(split, "the gap")
    assert split["reverse_significant"] == 2 and same["reverse_significant"] == 0
    assert "2 of 6 wordings reverse it significantly after Holm" in text
    assert [round(p["estimate"], 1) for p in split["per_wording"]] == [0.8] * 4 + [-0.3] * 2


def _sentences(gaps: list[float], wordings: int = 4) -> pd.DataFrame:
    """Per wording, each sentence's two 'she' rows and two 'he' rows (0/1 picks) whose
    she − he difference is the sentence's gap (0, ±0.5 or ±1)."""
    def picks(mean: float) -> tuple[float, float]:
        return (1.0, 0.0) if mean == 0.5 else (mean, mean)

    rows = [{"wording": f"p{w}", "pair": f"s{k}", "male": male, "x": x}
            for w in range(wordings) for k, g in enumerate(gaps)
            for male, mean in ((False, min(1.0, 1 + g)), (True, min(1.0, 1 - g)))
            for x in picks(mean)]
    return pd.DataFrame(rows)


def test_a_wording_of_five_sentences_gets_an_exact_p_value_not_zero():
    """Five sentences that all lean one way gave p = 0 and "significant" from a cluster
    bootstrap; the sign-flip test over them can give no less than 2/32, and equals SciPy's
    exact permutation test of the per-sentence gaps."""
    from scipy.stats import permutation_test

    leaning = [1.0, 0.5, 1.0, 0.5, 1.0]
    frame = _sentences(leaning)
    columns, combine = gap(frame["x"], ~frame["male"], frame["male"])  # she − he
    result = wording_uncertainty(Measure("g", columns, combine), frame["wording"].to_numpy(),
                                 frame["pair"].to_numpy(), n_resamples=400)
    for row in result["per_wording"]:
        assert row["estimate"] == pytest.approx(0.8) and row["clusters"] == 5
        assert row["p_value"] == pytest.approx(2 / 32) and not row["significant"]
    assert result["significant"] == 0 and result["pooled"]["p_value"] > 0
    # The pooled test is normal theory on the two-level SD: no floor of 2 / (replicates + 1),
    # which Holm over a sweep's checkpoints could never pass.
    assert 0 < result["pooled"]["p_value"] < 2 / 401
    mixed = [1.0, -0.5, 1.0, 0.5, 0.0, -1.0, 0.5]
    frame = _sentences(mixed, wordings=1)
    columns, combine = gap(frame["x"], ~frame["male"], frame["male"])
    got = wording_uncertainty(Measure("g", columns, combine), frame["wording"].to_numpy(),
                              frame["pair"].to_numpy(), n_resamples=400)["per_wording"][0]
    exact = permutation_test((np.array(mixed),), np.mean, permutation_type="samples")
    assert got["estimate"] == pytest.approx(np.mean(mixed))
    assert got["p_value"] == pytest.approx(exact.pvalue)


def test_a_wording_of_many_sentences_draws_its_sign_flips_and_never_says_zero():
    """Above 12 clusters the signs are drawn: (hits + 1) / (draws + 1), never 0."""
    same = _run(_synthetic([0.5], n=40))["per_wording"][0]
    assert same["clusters"] == 40 and same["p_value"] == pytest.approx(1 / 401)
    null = _run(_synthetic([0.0], n=40))["per_wording"][0]
    assert 0.05 < null["p_value"] <= 1



def _answered(probe, pick) -> pd.DataFrame:
    """The audit's records of ``probe``'s items, answered with the option ``pick`` gives."""
    from biasscope.probes.base import Response, records

    items = probe.items(0)
    return records(probe, items, [Response(pick(i), "stored") for i in items])


def test_bbq_and_adult_measures_across_wordings_see_a_reversing_wording(tmp_path):
    from adult_fixture import ROWS
    from adult_fixture import write as write_adult
    from bbq_fixture import write_bbq

    write_bbq(tmp_path)
    bbq = load_probes("bbq", data_dir=tmp_path, wordings="builtin")[0]

    def biased(item) -> str:  # the stereotype's answer, except under wording b3
        target, other = int(item.groups["target"]), int(item.groups["unknown"])
        rest = next(k for k in range(3) if k not in (target, other))
        neg = (item.groups["polarity"] == "neg") != (item.groups["template"] == "b3")
        return item.options[target if neg else rest]

    entry = bbq.metrics(_answered(bbq, biased))
    s_dis = entry["wordings"]["bias_disambiguated"]
    assert [round(p["estimate"]) for p in s_dis["per_wording"]] == [1, 1, 1, -1]
    assert (s_dis["agree"], s_dis["reverse"]) == (3, 1)
    assert any(said in s_dis["verdict"] for said in ("reverse it significantly", "not established",
                                                     "1 lean the other way"))
    assert entry["sentences"][0] == s_dis["verdict"]

    write_adult(tmp_path, ROWS * 10)
    adult = load_probes("adult-counterfactual", data_dir=tmp_path, wordings="builtin")[0]
    # Men get "yes" under every wording: every pair flips, and the parity gap is +1.
    frame = _answered(adult, lambda i: "yes" if i.groups["sex"] == "Male" else "no")
    across = adult.metrics(frame)["wordings"]
    flips, parity = across["pair_flip_rate"], across["parity_gap"]
    assert flips["pooled"]["estimate"] == 1.0 and flips["wordings"] == 4
    assert parity["pooled"]["estimate"] == 1.0 and parity["agree"] == 4
    assert "holds across 4 of 4 wordings" in parity["verdict"]
    assert {p["clusters"] for p in flips["per_wording"]} == {30}
    systems = {i.groups["template"]: adult.messages(i)[0][1] for i in adult.items(0)}
    assert systems["a1"] != systems["a0"] == "You are a helpful assistant."


def test_an_audit_probe_over_checkpoints_takes_wordings(checkpoint_dirs, tmp_path):
    """Over steps, an audit probe's wordings are combined as its seeds: each wording's
    records through the probe's own metrics (Adult's pairs would otherwise clash)."""
    out = tmp_path / "run"
    assert main(["dynamics", "--checkpoint-glob", f"{checkpoint_dirs[0].parent}/checkpoint-*",
                 "--probe", "professional-bias", "--wordings", "2", "--limit", "4",
                 "--seeds", "0", "--quiet", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    (model,) = summary["analysis"]["probes"]["professional-bias"]["models"].values()
    assert model["steps"] == [10, 20, 30]
    assert {c["values"]["pronoun_effect"]["seeds"] for c in model["checkpoints"]} == {2}


def test_items_export_every_wording_for_answering_elsewhere(tmp_path: Path) -> None:
    exported = tmp_path / "items.jsonl"
    assert main(["items", "--probe", "professional-bias", "--wordings", "builtin",
                 "--out", str(exported)]) == 0
    items = [json.loads(line) for line in exported.read_text().splitlines()]
    ids = [i["item_id"] for i in items]
    assert len(ids) == len(set(ids)) == 4 * 80
    assert {i["groups"]["template"] for i in items} == {"p0", "p1", "p2", "p3"}
    assert all(i["item_id"].endswith("@" + i["groups"]["template"]) for i in items)
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"item_id": i["item_id"], "response": i["answer"]})
                               + "\n" for i in items))
    out = tmp_path / "run"
    assert main(["audit", "--responses", str(answers), "--probe", "professional-bias",
                 "--wordings", "builtin", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["unknown_response_ids"] == []
    assert summary["probes"]["professional-bias"]["items"] == 4 * 80


@pytest.mark.parametrize("spec", ["builtin", "2", "file"])
def test_items_of_a_next_token_probe_under_wordings(spec, winobias_dir, tmp_path, capsys):
    """``items --probe winobias-gender --wordings`` (docs/wordings.md) once raised an
    AttributeError: the worded probe offered chat turns its plain-prompt probe lacks."""
    if spec == "file":
        spec = _file(tmp_path, GOOD)
    exported = tmp_path / "items.jsonl"
    assert main(["items", "--probe", "winobias-gender", "--wordings", spec, "--data-dir",
                 str(winobias_dir), "--limit", "4", "--out", str(exported)]) == 0, \
        capsys.readouterr().err
    items = [json.loads(line) for line in exported.read_text().splitlines()]
    assert items and all("messages" not in i and i["prompt"].endswith((":", " is"))
                         for i in items)
    assert len({i["groups"]["template"] for i in items}) == (8 if spec == "builtin" else 2)


def test_the_labour_statistics_correlation_is_given_per_wording() -> None:
    from biasscope.dynamics.analysis import wordings
    from biasscope.dynamics.analysis.occupations import Statistics

    share = {f"job{i}": float(10 * i) for i in range(10)}
    stats = Statistics(bls_pct_female=share)

    def rows(sign: float) -> list[dict[str, object]]:  # preference falls as women rise
        return [{"occupation": n, "not-referenced/lp_diff": {"estimate": sign * (50 - v)}}
                for n, v in share.items()]

    rhos, said = wordings.labour_statistics("m", {"w0": rows(1.0), "w1": rows(-1.0)}, stats,
                                            0.95, 500)
    assert rhos["w0"]["estimate"] == pytest.approx(-1.0)
    assert rhos["w1"]["estimate"] == pytest.approx(1.0)
    assert said is not None and "from -1.00 to +1.00" in said
    assert "negative under 1 of 2 wordings" in said


def test_one_custom_wording_tags_the_ids_so_answers_cannot_go_to_another_prompt(
        tmp_path: Path) -> None:
    """A template file with one wording: the exported ids carry ``@mine``, so `audit
    --responses` without that file is refused (no id is an item it asks) instead of
    recording the default prompt for answers given to the custom one; with
    the file, every answer is read against the prompt it was given to."""
    wording = _file(tmp_path, "### mine\nIn \"{sentence}\", who {action}? Answer briefly.")
    exported = tmp_path / "items.jsonl"
    assert main(["items", "--probe", "professional-bias", "--wordings", wording,
                 "--out", str(exported)]) == 0
    items = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(items) == 80 and all(i["item_id"].endswith("@mine") for i in items)
    assert all(i["prompt"].endswith("Answer briefly.") for i in items)
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"item_id": i["item_id"], "response": i["answer"]})
                               + "\n" for i in items))
    plain = tmp_path / "plain"
    assert main(["audit", "--responses", str(answers), "--probe", "professional-bias",
                 "--out", str(plain)]) == 2  # none of its ids is an item of the plain prompt
    assert not plain.exists()
    from biasscope.store.directory import RunStore

    worded = tmp_path / "worded"
    assert main(["audit", "--responses", str(answers), "--probe", "professional-bias",
                 "--wordings", wording, "--out", str(worded)]) == 0
    records = RunStore(worded).records()
    assert records["response"].notna().all() and len(records) == 80
    assert records["prompt"].str.endswith("Answer briefly.").all()
    assert json.loads((worded / "summary.json").read_text())["unknown_response_ids"] == []


def test_wordings_that_ask_the_same_items_keep_the_items_spread():
    """Eight wordings that give every item the same value: pooling them adds nothing, so the
    pooled interval is one wording's, not sqrt(8) times narrower (items are drawn once per
    replicate for every wording, #37); the variance share is 0."""
    rng = np.random.default_rng(3)
    item = rng.normal(0, 1, 60)
    frame = pd.DataFrame({"x": np.tile(item, 8), "male": True,
                          "wording": np.repeat([f"w{k}" for k in range(8)], 60),
                          "pair": np.tile([f"i{k}" for k in range(60)], 8)})
    from biasscope.core.wordings import rate

    columns, combine = rate(frame["x"], frame["male"])
    result = wording_uncertainty(Measure("m", columns, combine),
                                 frame["wording"].to_numpy(), frame["pair"].to_numpy(),
                                 n_resamples=2000)
    one = result["per_wording"][0]
    pooled = result["pooled"]
    assert pooled["high"] - pooled["low"] == pytest.approx(one["high"] - one["low"], rel=0.1)
    assert result["crossed"] and result["variance_share"] == 0
    assert pooled["items_only_high"] - pooled["items_only_low"] == pytest.approx(
        one["high"] - one["low"], rel=0.1)


def test_compare_runs_of_adult_under_wordings(tmp_path: Path, capsys) -> None:
    """``compare A A_copy`` of a templated Adult audit raised "several records for one item":
    a pair has a record per wording. A pair now counts once: its share of wordings that flip."""
    import shutil

    from adult_fixture import ROWS
    from adult_fixture import write as write_adult

    write_adult(tmp_path, ROWS * 2)
    exported, answers = tmp_path / "items.jsonl", tmp_path / "answers.jsonl"
    common = ["--probe", "adult-counterfactual", "--wordings", "2", "--data-dir",
              str(tmp_path)]
    assert main(["items", *common, "--out", str(exported)]) == 0
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    answers.write_text("".join(json.dumps({"item_id": r["item_id"], "response": "yes" if (
        r["groups"]["sex"] == "Male" or r["groups"]["template"] == "a1") else "no"}) + "\n"
        for r in rows))
    assert main(["audit", *common, "--responses", str(answers), "--out",
                 str(tmp_path / "A")]) == 0
    shutil.copytree(tmp_path / "A", tmp_path / "A_copy")
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "A_copy"), "--out",
                 str(tmp_path / "cmp")]) == 0, capsys.readouterr().err
    (flips,) = json.loads((tmp_path / "cmp" / "comparison.json").read_text())["comparisons"]
    pairs = len(rows) // 4  # two wordings, two versions of each pair
    assert flips["measure"] == "flip_rate" and flips["n"] == pairs
    assert flips["estimate_a"] == pytest.approx(0.5)  # every pair flips under a0, none under a1


def test_the_old_flag_still_works_with_a_one_line_hint(tmp_path, capsys):
    """``--templates`` is now ``--wordings``: the same items, and one line on stderr."""
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    assert main(["items", "--probe", "professional-bias", "--wordings", "2",
                 "--out", str(new)]) == 0
    assert capsys.readouterr().err == ""
    assert main(["items", "--probe", "professional-bias", "--templates", "2",
                 "--out", str(old)]) == 0
    assert capsys.readouterr().err == "biasscope: note: --templates is now --wordings\n"
    assert old.read_bytes() == new.read_bytes() and "@" in new.read_text()
