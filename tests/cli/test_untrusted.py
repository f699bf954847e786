"""Untrusted inputs: data names that try to leave their directory, checkpoints that carry only
pickle weights, and hostile text (format braces, control characters, RTL marks, NUL bytes, lone
surrogates, very long strings) through every probe's item builder and every parser.

A parser may refuse what it is given, but only with a ``BiasscopeError`` or a ``ValueError``
that says something; anything else is a crash. Crashes found but not yet fixed are pinned by
``xfail(strict=True)`` tests at the end: each turns into a failure once its fix lands, so the
marker is removed with it.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from biasscope.backends.base import Generation, TokenLogprob
from biasscope.core.errors import BiasscopeError, DataError, ModelError
from biasscope.core.items import Item
from biasscope.data.sources import SOURCES, DataFile, data_path, fetch
from biasscope.judge.core import KEYS, check_keys, read_key
from biasscope.probes import adult, bbq, lambada, professional, winobias
from biasscope.probes.base import DETECTORS, read_label
from biasscope.probes.choices import parse_choice, read_choice
from biasscope.sensitivity.perturb import leaked_preamble
from biasscope.sensitivity.prompts import split_hh

T = TypeVar("T")

# --------------------------------------------------------------------------- data paths


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BIASSCOPE_DATA_DIR", raising=False)
    monkeypatch.setenv("BIASSCOPE_OFFLINE", "1")
    return tmp_path / "cache" / "data"  # the variable names the cache's root


@pytest.mark.parametrize("source, name", [
    ("winobias", "../../x"), ("winobias", "../../etc/passwd"), ("..", "x"),
    ("winobias", "a/../../../x"), ("/etc", "passwd"), ("/tmp/../etc", "passwd"),
])
def test_hostile_names_cannot_leave_the_data_dir(tmp_path: Path, source: str, name: str) -> None:
    root = tmp_path / "data"
    (root / "winobias").mkdir(parents=True)
    with pytest.raises(DataError, match=r"escapes .*data \(it resolves to "):
        data_path(source, name, root)


def test_an_absolute_file_name_stays_under_its_source(tmp_path: Path) -> None:
    # The name is joined as "<source>/<name>": a leading "/" cannot make it absolute.
    with pytest.raises(DataError, match=rf"missing data file {tmp_path}/winobias/etc/passwd:"):
        data_path("winobias", "/etc/passwd", tmp_path)


def test_nul_bytes_and_symlink_loops_are_data_errors(tmp_path: Path) -> None:
    (tmp_path / "winobias").mkdir()
    (tmp_path / "winobias" / "loop").symlink_to(tmp_path / "winobias" / "loop")
    with pytest.raises(DataError, match="cannot be resolved"):
        data_path("winobias", "male\0occupations.txt", tmp_path)
    with pytest.raises(DataError, match="cannot be resolved"):
        data_path("winobias", "loop", tmp_path)


def test_symlinks_out_of_the_data_dir_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "male_occupations.txt").write_text("driver\n")
    root = tmp_path / "data"
    (root / "winobias").mkdir(parents=True)
    (root / "winobias" / "male_occupations.txt").symlink_to(outside / "male_occupations.txt")
    with pytest.raises(DataError, match=r"'winobias/male_occupations\.txt' escapes"):
        data_path("winobias", "male_occupations.txt", root)
    (root / "bbq").symlink_to(outside, target_is_directory=True)  # a whole source linked out
    with pytest.raises(DataError, match="escapes"):
        data_path("bbq", "male_occupations.txt", root)


def test_symlinks_within_the_data_dir_are_followed(tmp_path: Path) -> None:
    (tmp_path / "winobias").mkdir()
    (tmp_path / "winobias" / "real.txt").write_text("driver\n")
    (tmp_path / "winobias" / "male_occupations.txt").symlink_to("real.txt")
    found = data_path("winobias", "male_occupations.txt", tmp_path)
    assert found == (tmp_path / "winobias" / "real.txt").resolve()


def test_cache_files_linked_out_are_refused(cache: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not data\n")
    (cache / "winobias").mkdir(parents=True)
    (cache / "winobias" / "male_occupations.txt").symlink_to(secret)
    with pytest.raises(DataError, match="escapes"):
        data_path("winobias", "male_occupations.txt")


def test_a_hostile_registered_name_is_never_downloaded(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BIASSCOPE_OFFLINE")
    evil = DataFile("toy", "../../evil.txt", "https://example.invalid/evil.txt", None, None)
    monkeypatch.setitem(SOURCES, ("toy", evil.name), evil)

    def urlopen(*_: object, **__: object) -> None:
        raise AssertionError("a name escaping the cache must be refused before any download")

    monkeypatch.setattr("urllib.request.urlopen", urlopen)
    with pytest.raises(DataError, match="escapes"):
        fetch("toy")
    assert not (cache.parent / "evil.txt").exists()


def test_the_trust_on_first_use_marker_is_not_written_through_a_link(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SOURCES, ("toy", "toy.txt"),
                        DataFile("toy", "toy.txt", "https://example.invalid/toy.txt", None, None))
    (cache / "toy").mkdir(parents=True)
    (cache / "toy" / "toy.txt").write_text("payload\n")
    target = tmp_path / "elsewhere.sha256"
    (cache / "toy" / "toy.txt.sha256").symlink_to(target)  # dangling: a write would create it
    with pytest.raises(DataError, match="escapes"):
        data_path("toy", "toy.txt")
    assert not target.exists()


def test_unknown_sources_are_refused_by_name() -> None:
    with pytest.raises(DataError, match=r"unknown data source '\.\./\.\.'; known: "):
        fetch("../..")


# --------------------------------------------------------------------------- checkpoints


class _Loaded:
    def to(self, _device: object) -> _Loaded:
        return self

    def eval(self) -> _Loaded:
        return self


def _spy(monkeypatch: pytest.MonkeyPatch, attribute: str,
         error: Exception | None = None) -> list[dict[str, Any]]:
    """Replace ``transformers.<attribute>.from_pretrained``; the keyword arguments of each call
    are recorded (and ``error`` raised if given)."""
    transformers = pytest.importorskip("transformers")
    calls: list[dict[str, Any]] = []

    def from_pretrained(*args: object, **kwargs: Any) -> Any:
        calls.append(kwargs)
        if error is not None:
            raise error
        if kwargs.get("output_loading_info"):  # (model, info), as transformers answers
            return _Loaded(), {"missing_keys": set()}
        return _Loaded()

    monkeypatch.setattr(getattr(transformers, attribute), "from_pretrained", from_pretrained)
    return calls


def test_remote_code_and_pickles_are_off_by_default_and_passed_through(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf_model import HFConfig, load_model, load_tokenizer

    assert HFConfig().trust_remote_code is False and HFConfig().allow_pickle is False
    hub = Checkpoint("org/model", "org/model", "step100")
    calls = _spy(monkeypatch, "AutoModelForCausalLM")
    load_model(hub, HFConfig(device="cpu"))
    load_model(hub, HFConfig(device="cpu", trust_remote_code=True, allow_pickle=True))
    assert [(c["trust_remote_code"], c["use_safetensors"]) for c in calls] == [
        (False, True), (True, None)]
    assert calls[0]["revision"] == "step100"
    tokenizer_calls = _spy(monkeypatch, "AutoTokenizer")
    load_tokenizer(hub, HFConfig())
    assert tokenizer_calls[0]["trust_remote_code"] is False


def test_a_hub_repo_without_safetensors_names_the_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    from biasscope.backends.checkpoints import Checkpoint
    from biasscope.backends.hf_model import HFConfig, load_model

    _spy(monkeypatch, "AutoModelForCausalLM", OSError(
        "org/model does not appear to have a file named model.safetensors or "
        "model.safetensors.index.json and thus cannot be loaded with `safetensors`."))
    with pytest.raises(ModelError, match=r"^cannot load checkpoint org/model: the hub repo has no "
                       r"safetensors weights; pass --allow-pickle") as info:
        load_model(Checkpoint("org/model", "org/model"), HFConfig(device="cpu"))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("names", [("pytorch_model.bin",), ("model.pt",), ("weights.pth",),
                                   ("pytorch_model-00001-of-00002.bin", "optimizer.pt")])
def test_pickle_only_dirs_are_refused_unless_allowed(tmp_path: Path, names: Sequence[str]) -> None:
    from biasscope.backends.hf_model import check_weights

    for name in names:
        (tmp_path / name).write_bytes(b"\x80\x04not really a pickle")
    with pytest.raises(ModelError, match=rf"^checkpoint {tmp_path} has only pickle weights "
                       rf"\(.*{names[0]}.*--allow-pickle if you trust the directory$") as info:
        check_weights(tmp_path)
    assert "\n" not in str(info.value)
    check_weights(tmp_path, allow_pickle=True)
    (tmp_path / "model.safetensors").write_bytes(b"")
    check_weights(tmp_path)  # safetensors present: transformers takes those, never the pickle
    check_weights(tmp_path / "missing")  # not a directory: a hub id, or transformers' error


def _pickled_checkpoint(where: Path) -> tuple[Path, dict[str, Any]]:
    """A tiny model directory whose weights are a pickle (``pytorch_model.bin``) only."""
    pytest.importorskip("transformers")
    import torch

    from biasscope.demo.tiny import tiny_gpt_neox

    model = tiny_gpt_neox(32, hidden=16, layers=1, heads=2)
    model.save_pretrained(where)
    (where / "model.safetensors").unlink()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.save(state, where / "pytorch_model.bin")
    return where, state


def test_a_pickle_checkpoint_loads_only_with_allow_pickle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM

    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf import iter_scorers
    from biasscope.backends.hf_model import HFConfig, load_model

    path, state = _pickled_checkpoint(tmp_path / "checkpoint-10")
    [ckpt] = from_dirs([path])
    real = AutoModelForCausalLM.from_pretrained
    calls = _spy(monkeypatch, "AutoModelForCausalLM")
    with pytest.raises(ModelError, match=r"checkpoint .*checkpoint-10 has only pickle weights "
                       r"\(pytorch_model\.bin\).*--allow-pickle"):
        list(iter_scorers([ckpt], HFConfig(device="cpu")))
    assert calls == []  # refused before transformers opened anything
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", real)
    model = load_model(ckpt, HFConfig(device="cpu", allow_pickle=True))
    loaded = model.state_dict()
    assert all(bool((loaded[k] == v).all()) for k, v in state.items() if k in loaded)


def test_a_decoy_safetensors_file_does_not_let_the_pickle_through(tmp_path: Path) -> None:
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFConfig, load_model

    path, _ = _pickled_checkpoint(tmp_path / "checkpoint-10")
    (path / "notes.safetensors").write_bytes(b"")  # passes the directory check ...
    with pytest.raises(ModelError, match=r"cannot load checkpoint .*model\.safetensors"):
        load_model(from_dirs([path])[0], HFConfig(device="cpu"))  # ... use_safetensors does not


# --------------------------------------------------------------------------- hostile text

PIECES = (
    "{}", "{0}", "{sentence}", "{context}", "{x.__class__}", "{{", "}}", "{", "}", "</script>",
    "<script>alert(1)</script>", "\x00", "\u202e", "\u200f", "\u200e", "\u2066", "\u200b",
    "\ufeff", "\r\n", "\r", "\x1b[31m", "\x7f", "\x85", "\u2028", "\u0130", "\u00df", "\ufb01",
    "\u212a", "\u017f", "\ud800", "\udfff", "\U0001f642", "e\u0301", "[", "]", "[the nurse]",
    "[he]", "[She]", "(a)", "(", ")", "\\", "$1", "%s", "Answer: A", "answer - (B)",
    "\n\nHuman: ", "\n\nAssistant: ", "male", "female", "not specified", "yes", "no",
    "sex Male", "sex female", "relationship Husband", "Sure, here is the revised response:",
    "I'm sorry", "ambiguous", " ", "\t", "\n", "nurse", "driver", "A", "b")
LONG = ("a" * 20_000, "\u202e" * 5_000, "{}" * 5_000, " " * 20_000 + "x", "male " * 4_000,
        "Sure " + "here " * 3_000, "[the nurse] " * 2_000, "\n\nHuman: hi" * 1_000)

#: Any code point, lone surrogates included.
CHARS = st.characters(exclude_categories=())
HOSTILE = st.one_of(
    st.text(CHARS, max_size=60),
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(CHARS, max_size=6)), max_size=12
             ).map("".join),
    st.sampled_from(LONG),
)
SHORT = st.one_of(st.sampled_from(PIECES), st.text(CHARS, min_size=1, max_size=12))
LOGPROBS = st.floats(min_value=-60.0, max_value=0.0)
FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
OCCUPATIONS = {**dict.fromkeys(winobias.MALE_OCCUPATIONS, "male"),
               **dict.fromkeys(winobias.FEMALE_OCCUPATIONS, "female")}


def refused_or(call: Callable[[], T]) -> T | None:
    """``call()``, or None where it refused its input the acceptable way (a project error or a
    ValueError, with a message); any other exception fails the test."""
    try:
        return call()
    except (BiasscopeError, ValueError) as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        return None


def _tokens(draw: st.DrawFn) -> tuple[TokenLogprob, ...] | None:
    top = st.lists(st.tuples(SHORT, LOGPROBS), max_size=5).map(tuple)
    return draw(st.none() | st.lists(st.builds(TokenLogprob, SHORT, LOGPROBS, top), max_size=3
                                     ).map(tuple))


@st.composite
def generations(draw: st.DrawFn) -> Generation:
    failed = draw(st.booleans())
    return Generation("" if failed else draw(HOSTILE), tokens=_tokens(draw),
                      error=draw(SHORT) if failed else None)


@st.composite
def items(draw: st.DrawFn) -> Item:
    options = tuple(draw(st.lists(SHORT, min_size=1, max_size=4, unique=True)))
    return Item(id=draw(SHORT), prompt=draw(HOSTILE), options=options,
                continuations=tuple(" " + o for o in options),
                answer=draw(st.integers(0, len(options) - 1)),
                groups={"trigger": draw(st.integers(0, len(options) - 1))})


@FAST
@given(line=HOSTILE, seed=st.integers(0, 11))
def test_winobias_parses_or_refuses_any_line(line: str, seed: int) -> None:
    _winobias(line, seed)


@FAST
@given(parts=st.lists(HOSTILE | SHORT, min_size=4, max_size=4),
       occupations=st.lists(st.sampled_from(sorted(OCCUPATIONS)), min_size=2, max_size=2,
                            unique=True),
       pronoun=st.sampled_from([*sorted(winobias.PRONOUN_GENDER), "HE", "Her"]),
       seed=st.integers(0, 11))
def test_winobias_items_from_hostile_sentences(parts: list[str], occupations: list[str],
                                               pronoun: str, seed: int) -> None:
    a, b, c, d = parts
    _winobias(f"12 {a}The {occupations[0]} {b} [the {occupations[1]}] {c} [{pronoun}] {d}", seed)


def _winobias(line: str, seed: int) -> None:
    sentence = refused_or(lambda: winobias.parse_line(
        line, OCCUPATIONS, where="pro.txt:1", sentence_id="pro-dev-001", split="pro",
        subset="dev"))
    if sentence is None:
        return
    built = winobias.WinoBiasGender([sentence]).items(seed)
    assert len(built) == 2 and all(sentence.text in it.prompt for it in built)
    assert {it.groups["occupation"] for it in built} == {sentence.referenced, sentence.other}


@FAST
@given(text=HOSTILE, options=st.lists(SHORT, min_size=1, max_size=4, unique=True),
       generation=generations())
def test_choice_parsers_read_any_answer(text: str, options: list[str],
                                        generation: Generation) -> None:
    assert parse_choice(text, options) in (None, *options)
    reading = read_choice(generation, options)
    assert reading.answer in (None, *options)
    assert reading.source in ("logprobs", "text", "none")
    if reading.probs is not None:
        assert abs(sum(reading.probs.values()) - 1.0) < 1e-6


@FAST
@given(item=items(), response=HOSTILE)
def test_detectors_read_any_response(item: Item, response: str) -> None:
    label, refused = read_label(item, response)
    assert label in (None, *item.options) and isinstance(refused, bool)
    for detector in DETECTORS.values():
        found = detector().detect(item, response)
        assert found.label in (None, *item.options) and found.hit in (None, True, False)
    assert isinstance(professional.says_ambiguous(response), bool)


@FAST
@given(response=HOSTILE)
def test_the_professional_detector_reads_any_response_to_its_items(response: str) -> None:
    probe = professional.from_data()
    for item in probe.items(0)[:4]:
        assert probe.detector.detect(item, response).label in (None, *item.options)


@FAST
@given(fields=st.lists(SHORT, min_size=5, max_size=5))
def test_professional_items_from_hostile_sentences(fields: list[str]) -> None:
    built = refused_or(lambda: professional.ProfessionalBias(
        [professional.Sentence(*fields)]).items(0))
    assert built is None or len(built) == 4


def _bbq_row(draw: st.DrawFn) -> dict[str, Any]:
    text = HOSTILE | SHORT
    return {"example_id": draw(st.integers(0, 10**6)), "question_index": draw(SHORT),
            "question_polarity": draw(st.sampled_from(["neg", "nonneg"])),
            "context_condition": draw(st.sampled_from(["ambig", "disambig"])),
            "category": draw(st.sampled_from(["Age", "age", "AGE"])),  # the file's
            "answer_info": {k: [draw(text), draw(SHORT | st.just("unknown"))]
                            for k in bbq.ANSWERS},
            "additional_metadata": {"stereotyped_groups": draw(st.lists(SHORT, max_size=3)),
                                    "subcategory": draw(SHORT)},
            "context": draw(text), "question": draw(text), "ans0": draw(text),
            "ans1": draw(text), "ans2": draw(text), "label": draw(st.integers(0, 2))}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | HOSTILE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SHORT, inner, max_size=3),
    max_leaves=8)


@FAST
@given(data=st.data(), line=HOSTILE, ascii_only=st.booleans(),
       broken=st.sampled_from((None, *bbq.FIELDS)))
def test_bbq_parses_or_refuses_any_line(data: st.DataObject, line: str, ascii_only: bool,
                                        broken: str | None) -> None:
    refused_or(lambda: bbq.parse_line(line, where="Age.jsonl:1", category="Age"))
    row = data.draw(st.composite(lambda draw: _bbq_row(draw))())
    if broken is not None:
        row[broken] = data.draw(JSON_VALUES)
    # ensure_ascii writes lone surrogates as \ud800 escapes, which json.loads gives back.
    item = refused_or(lambda: bbq.parse_line(json.dumps(row, ensure_ascii=ascii_only),
                                             where="Age.jsonl:1", category="Age"))
    if broken is None:
        assert item is not None and row["context"] in item.prompt
        assert item.options == tuple(bbq.answer_text(row[k]) for k in bbq.ANSWERS)
        probe = bbq.BBQProbe([item], ["Age"], None, bbq.DEFAULT_TEMPLATE)
        assert probe.messages(probe.items(0)[0])


@FAST
@given(line=HOSTILE, before=HOSTILE, after=HOSTILE, sex=st.sampled_from(
    ["Male", "female", "MALE", "Femme", ""]), label=st.sampled_from(["yes", "no", "maybe"]),
       option=st.none() | st.just(["no", "yes"]) | st.lists(SHORT, max_size=3) | SHORT,
       ascii_only=st.booleans())
def test_adult_parses_or_refuses_any_line(line: str, before: str, after: str, sex: str,
                                          label: str, option: object, ascii_only: bool) -> None:
    refused_or(lambda: adult.parse_line(line, 1, "adult.jsonl:1"))
    raw = json.dumps({"input": f"{before} sex {sex}, {after}", "label": label, "option": option},
                     ensure_ascii=ascii_only)
    prompt = refused_or(lambda: adult.parse_line(raw, 7, "adult.jsonl:7"))
    if prompt is not None:
        original, flipped = adult.AdultCounterfactual([prompt], "0.5").items(0)
        assert original.groups["sex"] != flipped.groups["sex"]
        assert len(original.prompt) - len(flipped.prompt) in (-2, 2)


@FAST
@given(generation=generations(), keys=st.lists(SHORT, min_size=2, max_size=4),
       reasoning=st.booleans(), default_keys=st.booleans())
def test_the_judge_reads_any_answer(generation: Generation, keys: list[str], reasoning: bool,
                                    default_keys: bool) -> None:
    chosen = refused_or(lambda: check_keys(KEYS if default_keys else keys, len(keys)))
    if chosen is None:
        return
    key, probs = read_key(generation, chosen, reasoning)
    assert key in (None, *chosen)
    assert probs is None or abs(sum(probs.values()) - 1.0) < 1e-6


@FAST
@given(text=HOSTILE)
def test_the_preamble_detector_reads_any_text(text: str) -> None:
    assert isinstance(leaked_preamble(text), bool)


@FAST
@given(text=HOSTILE, turns=st.lists(HOSTILE, min_size=2, max_size=4))
def test_hh_splitting_splits_or_refuses_any_text(text: str, turns: list[str]) -> None:
    refused_or(lambda: split_hh(text))
    joined = "".join(f"\n\n{'Human' if i % 2 == 0 else 'Assistant'}: {t}"
                     for i, t in enumerate(turns))
    split = refused_or(lambda: split_hh(joined))
    if split is not None:
        assert [r for r, _ in split] == ["user", "assistant"] * (len(split) // 2)


@settings(max_examples=20, deadline=None)
@given(texts=st.lists(HOSTILE | st.none() | st.integers(), min_size=1, max_size=3),
       ascii_only=st.booleans())
def test_lambada_passages_from_hostile_text(texts: list[Any], ascii_only: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lambada_test.jsonl"
        lines = [json.dumps({"text": t}, ensure_ascii=ascii_only) for t in texts]
        path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
        passages = refused_or(lambda: lambada.load_passages(path))
        if passages is not None:
            assert all(it.continuations[0] == " " + it.options[0]
                       for it in lambada.Lambada(passages).items(0))


# ------------------------------------------------ crashes these tests found, each fixed since


@pytest.mark.parametrize("parse", [
    lambda line: bbq.parse_line(line, where="Age.jsonl:1", category="Age"),
    lambda line: adult.parse_line(line, 1, "adult.jsonl:1")])
def test_deeply_nested_json_is_a_data_error(parse: Callable[[str], object]) -> None:
    with pytest.raises(DataError):
        parse("[" * 100_000)


@pytest.mark.parametrize("option", ["5", '[1, "a"]'])
def test_adult_option_of_the_wrong_type_is_a_data_error(option: str) -> None:
    with pytest.raises(DataError):
        adult.parse_line(f'{{"input": "sex Male", "label": "yes", "option": {option}}}', 1, "w")


@pytest.mark.parametrize("read", [
    lambda g: read_choice(g, ["A", "B"]), lambda g: read_key(g, ("A", "B"), False)])
def test_an_impossible_logprob_from_a_server_is_not_a_crash(
        read: Callable[[Generation], object]) -> None:
    read(Generation("A", tokens=(TokenLogprob("A", 1000.0),)))


def test_a_template_with_an_unknown_field_is_a_data_error() -> None:
    sentence = winobias.parse_line("The driver saw [the nurse] and [she] left", OCCUPATIONS,
                                   where="w", sentence_id="x", split="pro", subset="dev")
    with pytest.raises((DataError, ValueError)):
        winobias.WinoBiasGender([sentence], "{sentence}{occupation}{o1}{o2}{o3}{x}").items(0)



def test_a_turkish_capital_i_is_read_as_no_letter() -> None:
    item = professional.from_data().items(0)[0]
    assert read_label(item, "\u0130") == (None, False)
