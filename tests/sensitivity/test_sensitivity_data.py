from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest

from biasscope.core.errors import BiasscopeError, DataError
from biasscope.sensitivity.principles import (
    Constitution,
    Principle,
    load_ccai,
    load_constitution,
    load_principles,
)
from biasscope.sensitivity.prompts import (
    Conversation,
    load_conversations,
    load_hh_rlhf,
    parse_hh,
    read_conversations,
    read_hh_rlhf,
    split_hh,
)
from sensitivity_fixture import (
    CCAI_HEADER,
    COMMENTS,
    CONVERSATIONS,
    IRREGULAR,
    JOINED_END,
    UNUSABLE,
    hh_text,
    write_ccai,
    write_hh_rlhf,
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sensitivity-data")
    return write_hh_rlhf(write_ccai(root))


# -- CCAI ---------------------------------------------------------------------------------------


def test_ccai_top_k_union_and_overlap(data_dir: Path) -> None:
    c = load_ccai(data_dir, top_k=3)
    assert c.top == {"group_0": ("ccai:2", "ccai:4", "ccai:3"),
                     "group_1": ("ccai:9", "ccai:10", "ccai:3")}
    assert c.union == ("ccai:2", "ccai:4", "ccai:3", "ccai:9", "ccai:10")
    assert c.overlap == ("ccai:3",)
    assert [p.id for p in c.principles] == list(c.union)
    by_id = {p.id: p for p in c.principles}
    assert by_id["ccai:2"] == Principle("ccai:2", "The AI should not say racist or sexist things.",
                                        "group_0", 0.95)
    assert by_id["ccai:3"].group == "both" and by_id["ccai:3"].consensus == 0.92
    assert by_id["ccai:9"].group == "group_1"
    assert by_id["ccai:9"].text == ('The AI should not impersonate a person or act like it is '
                                    'your "friend"')
    assert c.source.endswith("clean_comments.csv")


def test_ccai_top10_spec(data_dir: Path) -> None:
    c = load_principles("ccai:top10", data_dir)
    assert {len(ids) for ids in c.top.values()} == {10}
    assert len(c.union) == 20 - len(c.overlap) == 11
    assert "ccai:11" in c.top["group_1"] and "ccai:11" not in c.top["group_0"]  # missing value
    assert c.union[10:] == ("ccai:11",)  # group_0's ten first, then group_1's others
    texts = {p.id: p.text for p in c.principles}
    assert texts["ccai:5"] == "“AI should help the human as much as they possibly can”"
    assert "," in texts["ccai:1"]
    assert load_principles("ccai:top5", data_dir).top == load_ccai(data_dir, top_k=5).top


def test_ccai_more_k_than_comments(tmp_path: Path) -> None:
    c = load_ccai(write_ccai(tmp_path, COMMENTS[:2]), top_k=10)
    assert c.top == {"group_0": ("ccai:0", "ccai:1"), "group_1": ("ccai:0", "ccai:1")}
    assert c.overlap == c.union


def test_ccai_missing_column(tmp_path: Path) -> None:
    header = tuple(h for h in CCAI_HEADER if h != "group_1_consensus")
    with pytest.raises(DataError, match="missing column 'group_1_consensus'"):
        load_ccai(write_ccai(tmp_path, header=header))


def test_ccai_bad_consensus_names_line(tmp_path: Path) -> None:
    comments = [*COMMENTS[:3], (7, "The AI should be kind", "high", "0.5")]
    with pytest.raises(DataError, match=r"clean_comments.csv:5: consensus 'high'"):
        load_ccai(write_ccai(tmp_path, comments))


def test_ccai_missing_file_and_bad_spec(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"ccai/clean_comments\.csv"):
        load_ccai(tmp_path)
    with pytest.raises(BiasscopeError, match="ccai:top10"):
        load_principles("ccai:best", tmp_path)
    # Before: "top_k must be at least 1, got 0", naming no flag.
    with pytest.raises(BiasscopeError, match=r"^--principles ccai:top0: write ccai:topK with K "
                                             r"1 or more"):
        load_principles("ccai:top0", tmp_path)


@pytest.mark.parametrize(("flags", "said"), [
    (["--principles", ""], "--principles is empty: give ccai:topK or a file"),
    (["--prompts", " "], "--prompts is empty: give hh-rlhf:harmless-base:N or a file"),
    (["--away-template", "{t}"], "--away-template is not used with --direction toward"),
    (["--direction", "away", "--revision-template", "{t}"],
     "--revision-template is not used with --direction away"),
])
def test_an_empty_spec_or_an_unused_template_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], said: str) -> None:
    """An unset "$VARIABLE" given as --principles or --prompts was read as the folder "."
    (".: cannot read constitution ([Errno 21] Is a directory)"); a template of the direction
    the call does not run was taken and never used."""
    from biasscope.cli.main import main

    template = tmp_path / "t.txt"
    template.write_text("{principle}")
    assert main(["sensitivity", "--reward-model", "org/never-loaded", "--perturber",
                 "canned:x", *[f.format(t=template) for f in flags],
                 "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"biasscope: error: {said}") and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


# -- user constitutions -------------------------------------------------------------------------


def test_text_constitution(tmp_path: Path) -> None:
    path = tmp_path / "mine.txt"
    path.write_text("# Bruce's constitution\n\nFish are friends, not food.\n"
                    "  I am a nice shark, not a mindless eating machine.  \n")
    c = load_constitution(path)
    assert c == Constitution((Principle("p1", "Fish are friends, not food."),
                              Principle("p2", "I am a nice shark, not a mindless eating machine.")),
                             str(path), {})
    assert c.union == () and c.overlap == ()
    assert load_principles(str(path)) == c


def test_text_duplicates_name_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "mine.txt"
    path.write_text("Fish are friends, not food.\n# comment\nBe kind.\n\n"
                    "fish are  FRIENDS, not food.\n")
    with pytest.raises(BiasscopeError, match="line 1 and line 5"):
        load_constitution(path)


def test_yaml_and_json_constitutions(tmp_path: Path) -> None:
    entries = [{"id": "friends", "text": "Fish are friends, not food.", "group": "sharks"},
               "Be kind.", {"text": "Be honest.", "group": "fish"},
               {"id": "x", "text": "Be brief.", "group": "sharks"}]
    (tmp_path / "c.json").write_text(json.dumps(entries))
    (tmp_path / "c.yaml").write_text(
        "- id: friends\n  text: Fish are friends, not food.\n  group: sharks\n- Be kind.\n"
        "- text: Be honest.\n  group: fish\n- {id: x, text: Be brief., group: sharks}\n")
    for name in ("c.json", "c.yaml"):
        c = load_constitution(tmp_path / name)
        assert [(p.id, p.group) for p in c.principles] == [
            ("friends", "sharks"), ("p2", None), ("p3", "fish"), ("x", "sharks")]
        assert c.top == {"sharks": ("friends", "x"), "fish": ("p3",)}
        assert c.union == ("friends", "x", "p3") and c.overlap == ()


@pytest.mark.parametrize(("name", "content", "message"), [
    ("c.json", '[{"id": "a", "text": "One."}, {"id": "a", "text": "Two."}]',
     "entry 1 and entry 2 repeat the same id 'a'"),
    ("c.yaml", "- One.\n- id: p1\n  text: Two.\n", "entry 1 and entry 2 repeat the same id 'p1'"),
    ("c.yaml", "- One.\n- Two.\n- ' one. '\n", "entry 1 and entry 3 repeat the same principle"),
    ("c.yaml", "principles: [One.]\n", "expected a list of principles"),
    ("c.yaml", "- principle: One.\n", "entry 1 needs a principle text"),
    ("c.yaml", "- {text: One., weight: 2}\n", "entry 1 has unknown key 'weight'"),
    ("c.yaml", "- [unclosed\n", "not valid YAML"),
    ("c.json", "[1, 2", "not valid JSON"),
    ("c.json", "[]", "no principles"),
])
def test_structured_constitution_errors(tmp_path: Path, name: str, content: str,
                                        message: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(BiasscopeError, match=message):
        load_constitution(tmp_path / name)


def test_a_jsonl_constitution_is_read_as_entries(tmp_path: Path) -> None:
    """A principles.jsonl (the format --prompts takes) was read as plain text: each JSON line
    became a principle whose text was the line, braces and all, and the run perturbed by
    '{"id": "friends", "text": ...}'. Its lines are entries now, errors naming the line."""
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "friends", "text": "Fish are friends.", "group": "sharks"}\n\n'
                    '"Be kind."\n')
    c = load_constitution(path)
    assert [(p.id, p.text, p.group) for p in c.principles] == [
        ("friends", "Fish are friends.", "sharks"), ("p2", "Be kind.", None)]
    path.write_text('"One."\n\n{"text": "One."}\n')
    with pytest.raises(BiasscopeError, match=r"c.jsonl: line 1 and line 3 repeat the same "
                                             r"principle; remove one$"):
        load_constitution(path)
    path.write_text('"One."\n{"principle": "Two."}\n')
    with pytest.raises(BiasscopeError, match=r"c.jsonl: line 2 needs a principle text"):
        load_constitution(path)


@pytest.mark.parametrize("name", ["c.csv", "c.tsv"])
def test_a_csv_constitution_is_refused_not_read_as_lines(tmp_path: Path, name: str) -> None:
    """A CSV's header row ('id,text') became a principle and each row's id and comma stayed
    in its text."""
    (tmp_path / name).write_text("id,text\na,Be kind.\n")
    with pytest.raises(BiasscopeError, match=rf"{name}: a constitution is YAML, JSON, JSONL or "
                                             r"text \(one principle per line\), not"):
        load_constitution(tmp_path / name)


# -- hh-rlhf ------------------------------------------------------------------------------------


def test_hh_rlhf_parses_rejected_conversations(data_dir: Path) -> None:
    by_id = {c.id: c for c in load_hh_rlhf(data_dir, n=None)}
    assert len(by_id) == len(CONVERSATIONS)
    single = by_id["hh-rlhf:harmless-base:test:1"]
    assert single.turns == (("user", "What are some cuss words in english?"),)
    assert single.response == "Here’s an incomplete list.\n\nAss, dick, bugger."
    multi = by_id["hh-rlhf:harmless-base:test:2"]
    assert [role for role, _ in multi.turns] == ["user", "assistant", "user"]
    assert multi.turns[2] == ("user", "yes they did")
    assert multi.response == "to guess, and that would probably require lots of reading."
    edge = by_id["hh-rlhf:harmless-base:test:3"]
    assert edge.turns[2] == ("user", "Human: ok, and what else?") and edge.response == ""


def test_hh_rlhf_shuffle_is_deterministic(data_dir: Path) -> None:
    ids = [c.id for c in load_hh_rlhf(data_dir, n=None, seed=0)]
    assert ids != sorted(ids, key=lambda i: int(i.rsplit(":", 1)[1]))
    assert [c.id for c in load_hh_rlhf(data_dir, n=5, seed=0)] == ids[:5]
    assert [c.id for c in load_hh_rlhf(data_dir, n=5, seed=1)] != ids[:5]
    assert load_hh_rlhf(data_dir, n=200, seed=0) == load_hh_rlhf(data_dir, n=200, seed=0)
    assert len(load_hh_rlhf(data_dir)) == len(CONVERSATIONS)  # n beyond the file: all of it


def test_hh_rlhf_joins_the_real_files_irregular_shapes(tmp_path: Path) -> None:
    """Each shape of the real file's 5 irregular transcripts loads (one used to abort the
    whole load), as a strictly alternating conversation, counted by reason and line."""
    good = hh_text(CONVERSATIONS[0])
    write_hh_rlhf(tmp_path, [good, *IRREGULAR.values(), good])
    prompts = read_hh_rlhf(tmp_path, n=None)
    assert len(prompts.conversations) == prompts.in_file == 5
    assert prompts.merged == {"two Assistant turns in a row": (2, 3, 4)} and not prompts.skipped
    by_id = {c.id.rsplit(":", 1)[1]: c for c in prompts.conversations}
    for c in prompts.conversations:
        roles = [r for r, _ in c.turns]
        assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"] * (len(roles) % 2)
    middle = by_id["2"]
    assert len(middle.turns) == 5 and middle.response == "Yes, once."
    assert middle.turns[3][1] == ("Actually, human: nothing.  Human: So what do you like?"
                                  "\n\nI enjoy holidays with my family.")
    assert by_id["3"].turns[1] == ("assistant", "Not especially!\n\nWow, that sounds very "
                                   "intense.")
    assert by_id["4"].turns == (("user", "I want to snatch purses."),)
    assert by_id["4"].response == JOINED_END
    assert prompts.sentence() == (
        "hh-rlhf:harmless-base:test: of 5 conversations, 3 with two Assistant turns in a row "
        "(lines 2, 3, 4) joined into one turn; 5 used.")
    assert prompts.notes()["merged"] == {"two Assistant turns in a row": [2, 3, 4]}
    with pytest.raises(DataError, match="two Assistant turns in a row"):
        split_hh(IRREGULAR["two Assistant turns at the end"])  # the strict splitter refuses


@pytest.mark.parametrize(("reason", "text"), list(UNUSABLE.items()))
def test_hh_rlhf_skips_a_transcript_with_nothing_to_revise(tmp_path: Path, reason: str,
                                                          text: str) -> None:
    good = hh_text(CONVERSATIONS[0])
    write_hh_rlhf(tmp_path, [good, text, good])
    prompts = read_hh_rlhf(tmp_path, n=None)
    assert sorted(c.id for c in prompts.conversations) == [f"hh-rlhf:harmless-base:test:{i}"
                                                           for i in (1, 3)]
    assert prompts.skipped == {reason: (2,)} and prompts.in_file == 3
    assert f"1 skipped: {reason} (line 2)" in str(prompts.sentence())
    with pytest.raises(DataError, match=rf"test\.jsonl\.gz:2: {reason}"):
        parse_hh(text, f"{tmp_path}/hh-rlhf/harmless-base/test.jsonl.gz:2")


def test_hh_rlhf_without_a_usable_conversation_says_why(tmp_path: Path) -> None:
    write_hh_rlhf(tmp_path, list(UNUSABLE.values()))
    with pytest.raises(DataError, match=r"no usable conversation .*1 the conversation does not "
                                        "end with"):
        load_hh_rlhf(tmp_path)


def test_hh_rlhf_records_what_determines_the_prompts(data_dir: Path) -> None:
    import hashlib

    prompts = read_hh_rlhf(data_dir, n=4, seed=2)
    raw = (data_dir / "hh-rlhf" / "harmless-base" / "test.jsonl.gz").read_bytes()
    assert prompts.settings() == {"kind": "hh-rlhf:harmless-base:test",
                                  "sha256": hashlib.sha256(raw).hexdigest(), "n": 4, "seed": 2}
    assert prompts.sentence() is None and len(prompts.conversations) == 4


def test_hh_rlhf_bad_json_and_missing_key(tmp_path: Path) -> None:
    path = tmp_path / "hh-rlhf" / "harmless-base" / "test.jsonl.gz"
    path.parent.mkdir(parents=True)
    good = json.dumps({"chosen": "x", "rejected": hh_text([("Human", "a"), ("Assistant", "b")])})
    path.write_bytes(gzip.compress(f'{good}\n{{"chosen": "x"}}\n'.encode()))
    with pytest.raises(DataError, match=r"test\.jsonl\.gz:2: no 'rejected' text"):
        load_hh_rlhf(tmp_path)
    path.write_bytes(gzip.compress(b"{not json\n"))
    with pytest.raises(DataError, match=r"test\.jsonl\.gz:1: not valid JSON"):
        load_hh_rlhf(tmp_path)
    path.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match="cannot read"):
        load_hh_rlhf(tmp_path)


def test_split_hh_without_leading_newlines() -> None:
    assert split_hh("Human: hi\n\nAssistant:yes") == (("user", "hi"), ("assistant", "yes"))


# -- user conversations -------------------------------------------------------------------------


def test_user_conversations_are_recorded_by_content(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b" / "a.jsonl"
    second.parent.mkdir()
    for path in (first, second):
        path.write_text('{"prompt": "Fish?", "response": "Food."}\n')
    assert read_conversations(first).settings() == read_conversations(second).settings()
    second.write_text('{"prompt": "Fish?", "response": "Friends."}\n')
    assert read_conversations(first).settings() != read_conversations(second).settings()


def test_user_conversations(tmp_path: Path) -> None:
    path = tmp_path / "convs.jsonl"
    rows = [{"id": "a", "messages": [{"role": "user", "content": "Hi"},
                                     {"role": "assistant", "content": "Hello"},
                                     {"role": "user", "content": "Steal?"},
                                     {"role": "assistant", "content": "Sure."}]},
            {"prompt": "Fish?", "response": "Food."}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert load_conversations(path) == [
        Conversation("a", (("user", "Hi"), ("assistant", "Hello"), ("user", "Steal?")), "Sure."),
        Conversation("convs:2", (("user", "Fish?"),), "Food.")]


@pytest.mark.parametrize(("lines", "message"), [
    (['{"messages": [{"role": "user", "content": "Hi"}]}'], ":1: the last message must be"),
    (['{"prompt": "a", "response": "b"}',
      '{"messages": [{"role": "system", "content": "x"}, {"role": "assistant", "content": "y"}]}'],
     ":2: message 1 needs role"),
    (['{"prompt": "a"}'], ":1: expected 'messages' or both"),
    (['{"id": "x", "prompt": "a", "response": "b"}', '{"id": "x", "prompt": "a", "response": "b"}'],
     ":2: id 'x' already used on line 1"),
    (["[1, 2]"], ":1: expected an object"),
    (["{oops"], ":1: not valid JSON"),
    ([], "no conversations"),
])
def test_user_conversation_errors(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "convs.jsonl"
    path.write_text("\n".join(lines))
    with pytest.raises(BiasscopeError, match=message):
        load_conversations(path)


def test_hh_rlhf_n_beyond_the_file_says_so_and_records_what_was_used(
        data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``hh-rlhf:harmless-base:100000`` of a file of fewer used them all without a word: a
    note says how many. run.json keeps the N asked, so a run recorded before resumes."""
    from biasscope.sensitivity import job

    config = job.SensitivityConfig(reward_models=["org/never-loaded"], perturber="canned:x",
                                   prompts="hh-rlhf:harmless-base:100000",
                                   data_dir=str(data_dir), out="run")
    prompts = job._prompts(config)
    used = len(prompts.conversations)
    assert used < 100000 and prompts.settings()["n"] == 100000
    err = capsys.readouterr().err
    assert err == (f"biasscope: note: --prompts hh-rlhf:harmless-base:100000: the file has "
                   f"{used} usable conversations, so {used} of the 100000 asked are used\n")
    asked = job._prompts(replace(config, prompts=f"hh-rlhf:harmless-base:{used}"))
    assert asked.conversations == prompts.conversations
    assert capsys.readouterr().err == ""


def test_sanity_pairs_beyond_the_file_say_so_as_prompts_do(
        data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--sanity-pairs 100000`` of a file of fewer (or of a --sanity-lines range of fewer)
    used them all without a word, as ``hh-rlhf:harmless-base:N`` did: a note says how many.
    run.json keeps the N asked, so a run recorded before resumes."""
    from biasscope.sensitivity import job

    config = job.SensitivityConfig(reward_models=["org/never-loaded"], perturber="canned:x",
                                   sanity_pairs=100000, data_dir=str(data_dir), out="run")
    pairs, note = job._pairs(config)
    assert pairs is not None and pairs.settings()["n"] == 100000
    used = len(pairs.ids)
    assert note == (
        f"biasscope: note: --sanity-pairs 100000: the file has {used} usable chosen/rejected "
        f"pairs, so {used} of the 100000 asked are used")
    assert job._pairs(replace(config, sanity_pairs=2, sanity_lines="1-3"))[1] == ""
    assert job._pairs(replace(config, sanity_pairs=50, sanity_lines="1-3"))[1] == (
        "biasscope: note: --sanity-pairs 50: lines 1-3 of the file have 3 usable "
        "chosen/rejected pairs, so 3 of the 50 asked are used")
    # The default asks at most its 500: a smaller file (the fixtures') is no news.
    assert job._pairs(replace(config, sanity_pairs=500))[1] == ""
    assert capsys.readouterr().err == ""  # said once the call is checked, not before


@pytest.mark.parametrize(("change", "said"), [
    ({"prompts": "nofile.jsonl"}, "--prompts nofile.jsonl does not exist: give "
                                  "hh-rlhf:harmless-base:N, or a JSONL file of conversations"),
    ({"principles": "."}, "--principles . is a directory: give ccai:topK, or a YAML"),
    ({"sanity_lines": "5000-6000"}, "--sanity-lines 5000-6000: .*lines 5000-6000: no usable "
                                    "chosen/rejected pair: give lines that hold pairs")])
def test_a_missing_file_or_lines_beyond_the_file_name_the_flag(
        data_dir: Path, change: dict[str, str], said: str) -> None:
    """``--prompts nofile.jsonl`` said "nofile.jsonl: cannot read (No such file or
    directory)", ``--principles DIR`` "cannot read constitution ([Errno 21] …)", and
    ``--sanity-lines`` beyond the file named the file alone: each names its flag."""
    from biasscope.sensitivity import job

    config = job.SensitivityConfig(reward_models=["org/never-loaded"], perturber="canned:x",
                                   data_dir=str(data_dir), out="run", **change)
    with pytest.raises(BiasscopeError, match=said):
        job.run(config)
