"""Several models on one command line are told apart by their full spec (or the user's
NAME=SPEC): two judges whose checkpoint folders share a name stay two judges, the same model
given twice is a one-line error, and labels stay short where they can."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from biasscope.backends.labels import model_labels, parse_models, split_named
from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError

LABELS = {"POSITIVE": "The text is happy.", "NEGATIVE": "The text is sad."}


def test_split_named_never_cuts_a_spec() -> None:
    assert split_named("judge1=hf:a/checkpoint-600") == ("judge1", "hf:a/checkpoint-600")
    assert split_named("openai-compatible:http://h/v1?x=1#m") == (
        None, "openai-compatible:http://h/v1?x=1#m")
    assert split_named("litellm:foo=bar") == (None, "litellm:foo=bar")
    assert split_named("org/model=x") == (None, "org/model=x")
    assert split_named("=hf:x") == (None, "=hf:x")


@pytest.mark.parametrize(("value", "said"), [
    ("=rm1", "--reward-model '=rm1': the name before '=' is empty; write NAME=SPEC, or the "
     "SPEC alone"),
    ("A=", "--reward-model 'A=': the model after '=' is empty; write NAME=SPEC"),
    ("", "--reward-model is empty: give a model (SPEC or NAME=SPEC)"),
    (" ", "--reward-model is empty"),
    ("=", "--reward-model '=': the name before '=' is empty"),
])
def test_an_empty_name_or_spec_is_refused(value: str, said: str) -> None:
    """``=rm1`` and ``A=`` reached the hub loader and failed with its message; ``''`` (an
    unset ``$VARIABLE``) was loaded as the folder ``.``."""
    with pytest.raises(BiasscopeError, match="^" + re.escape(said)):
        parse_models(["hf:x", value], "--reward-model")


EVERY_COMMAND = [
    (["judge", "--input", "{tmp}/texts.jsonl", "--labels", "{tmp}/labels.json", "--model"],
     "--model"),
    (["judge-audit", "--input", "{tmp}/pairs.jsonl", "--model"], "--model"),
    (["sensitivity", "--perturber", "canned:x", "--principles", "{tmp}/principles.txt",
      "--prompts", "{tmp}/chats.jsonl", "--sanity-pairs", "0", "--reward-model"],
     "--reward-model"),
    (["counterfactual", "--pairs", "{tmp}/cf.jsonl", "--reward-model"], "--reward-model"),
    (["counterfactual", "--pairs", "{tmp}/cf.jsonl", "--judge-model"], "--judge-model"),
]


@pytest.mark.parametrize("value", ["=rm1", "A=", ""])
@pytest.mark.parametrize(("argv", "flag"), EVERY_COMMAND)
def test_every_command_refuses_an_empty_name_or_spec(argv: list[str], flag: str, value: str,
                                                     tmp_path: Path, capsys) -> None:
    err = _refused(argv, value, tmp_path, capsys)
    assert err.startswith(f"biasscope: error: {flag} ") and "empty" in err


@pytest.mark.parametrize(("value", "said"), [
    ("a,b=canned:A", "the name 'a,b' holds ',' (run.json lists the models joined by ', ')"),
    ("a\nb=canned:A", "the name 'a\\nb' holds '\\n' (a label is shown on one line)")])
@pytest.mark.parametrize(("argv", "flag"), EVERY_COMMAND)
def test_every_command_refuses_a_name_that_would_read_as_two(
        argv: list[str], flag: str, value: str, said: str, tmp_path: Path, capsys) -> None:
    """``--model a,b=canned:A`` was taken: run.json's ``"model": "a,b, c"`` then read as three
    judges."""
    err = _refused(argv, value, tmp_path, capsys)
    assert err.startswith(f"biasscope: error: {flag} ") and said in err
    assert err.endswith("; name it without that character\n")


def _refused(argv: list[str], value: str, tmp_path: Path, capsys) -> str:
    """The one-line error of the command ``argv`` + ``value``, which wrote nothing."""
    (tmp_path / "texts.jsonl").write_text('{"id": 1, "text": "fine"}\n')
    (tmp_path / "pairs.jsonl").write_text('{"id": 1, "prompt": "q", "a": "x", "b": "y"}\n')
    (tmp_path / "chats.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}, '
                                          '{"role": "assistant", "content": "yo"}]}\n')
    (tmp_path / "principles.txt").write_text("Be kind.\n")
    (tmp_path / "labels.json").write_text(json.dumps(LABELS))
    (tmp_path / "cf.jsonl").write_text('{"prompt": "Rate him.", "chosen": "He is fit.", '
                                       '"rejected": "He is not."}\n')
    capsys.readouterr()
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]
                + [value, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and not (tmp_path / "run").exists()
    return err


def test_a_judge_name_joined_into_a_panel_name_is_refused_there_alone(tmp_path: Path,
                                                                      capsys) -> None:
    """counterfactual names its panel of judges ``a+b``: a judge named ``a+b`` would be that
    panel's name, and a label made from a path (``./rm,v2``) must be named."""
    with pytest.raises(BiasscopeError, match=r"^--judge-model 'a\+b=canned:A': the name "
                       r"'a\+b' holds '\+' \(the panel of judges is named by their names "
                       r"joined by '\+'\)"):
        parse_models(["a+b=canned:A", "c=canned:B"], "--judge-model", joiner="+")
    assert parse_models(["a+b=canned:A"], "--model") == [("a+b", "canned:A")]
    assert "holds '+'" in _refused(EVERY_COMMAND[-1][0], "a+b=canned:A", tmp_path, capsys)
    with pytest.raises(BiasscopeError, match=r"^--model 'hf:/x/rm,v2' is labelled 'rm,v2', "
                       r"which holds ','.*: name it with NAME=SPEC$"):
        model_labels(parse_models(["hf:/x/rm,v2"], "--model"), ["rm,v2"], "--model")
    assert model_labels(parse_models(["rm=hf:/x/rm,v2"], "--model"), ["rm,v2"],
                        "--model") == ["rm"]


def test_labels_are_the_shortest_distinct_suffix() -> None:
    specs = ["hf:/runs/a/checkpoint-600", "hf:/runs/b/checkpoint-600", "openai:gpt-4o-mini"]
    named = parse_models(specs, "--model")
    labels = model_labels(named, ["checkpoint-600", "checkpoint-600", "openai:gpt-4o-mini"],
                          "--model")
    assert labels == ["a/checkpoint-600", "b/checkpoint-600", "openai:gpt-4o-mini"]
    # Same folder names two levels up too: more of the path, never a merge.
    named = parse_models(["hf:/x/a/final", "hf:/y/a/final"], "--model")
    assert model_labels(named, ["final", "final"], "--model") == ["x/a/final", "y/a/final"]
    # Servers at two URLs serving one model name.
    named = parse_models(["openai-compatible:http://a:1/v1#m",
                          "openai-compatible:http://b:1/v1#m"], "--model")
    assert model_labels(named, ["openai-compatible:m"] * 2, "--model") == [
        "a:1/v1#m", "b:1/v1#m"]
    # The user's names win; an unnamed model keeps its own label.
    named = parse_models(["old=hf:/a/final", "hf:/b/final"], "--model")
    assert model_labels(named, ["final", "final"], "--model") == ["old", "final"]


def test_the_same_model_twice_and_clashing_names_are_errors(tmp_path: Path) -> None:
    with pytest.raises(BiasscopeError, match="'hf:x/y' is given twice: give each model once"):
        parse_models(["hf:x/y", "hf:x/y"], "--model")
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(BiasscopeError, match=r"is given twice \(as "):
        parse_models([f"hf:{tmp_path}/ckpt", f"hf:{tmp_path}/./ckpt"], "--model")
    with pytest.raises(BiasscopeError, match="the name 'j' is given to two models"):
        parse_models(["j=hf:a", "j=hf:b"], "--model")
    # A name another model's label already is: that model takes a longer one.
    assert model_labels(parse_models(["final=hf:/a/x", "hf:/b/final"], "--m"),
                        ["x", "final"], "--m") == ["final", "b/final"]
    with pytest.raises(BiasscopeError, match="both be labelled 'gpt2'; name them"):
        model_labels(parse_models(["gpt2=org/x", "gpt2"], "--m"), ["x", "gpt2"], "--m")
    # A name holding '=': it was cut at the first, and the rest refused as a spec ("model
    # spec 'b=canned:A': write BACKEND:MODEL"), never naming the name.
    with pytest.raises(BiasscopeError, match=r"^--judge-model 'a=b=canned:A': a name cannot "
                       r"hold '=' \(this reads as the name 'a' for the model 'b=canned:A'\)"):
        parse_models(["a=b=canned:A", "c=canned:B"], "--judge-model")
    assert parse_models(["rm=my=rm"], "--reward-model") == [("rm", "my=rm")]  # a folder's name
    # hf revisions of one hub id are different models.
    assert len(parse_models(["hf:org/m@step1", "hf:org/m@step2"], "--model")) == 2


@pytest.fixture
def same_named(checkpoint_dirs: list[Path], tmp_path: Path) -> list[Path]:
    """Two checkpoints in different training runs, both called checkpoint-600."""
    out = []
    for run in ("a", "b"):
        target = tmp_path / run / "checkpoint-600"
        shutil.copytree(checkpoint_dirs[0 if run == "a" else 1], target)
        out.append(target)
    return out


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": i, "text": f"Review {i}: fine."}) + "\n"
                             for i in range(4)))
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps(LABELS))
    return texts, labels


def test_cli_judge_with_two_same_named_checkpoints(same_named, tmp_path, capsys) -> None:
    pytest.importorskip("torch")
    texts, labels = _inputs(tmp_path)
    common = ["--input", str(texts), "--labels", str(labels), "--no-cache", "--device", "cpu",
              "--no-logit-bias", "--position", "fixed"]
    a, b = (f"hf:{p}" for p in same_named)
    out = tmp_path / "judged"
    assert main(["judge", "--model", a, "--model", b, "--out", str(out), *common]) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["judges"] == {"a/checkpoint-600": a, "b/checkpoint-600": b}
    rows = [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()]
    assert all(set(r["by_judge"]) == {"a/checkpoint-600", "b/checkpoint-600"} for r in rows)
    assert {c["model"] for r in rows for c in r["calls"]} == set(run["judges"])
    head = json.loads((out / "summary.json").read_text())["probes"]["judge"]["headline"]
    assert "krippendorff_alpha" in head  # agreement between the two, not a traceback
    # NAME=SPEC labels them as the user says; judge-audit takes the same path.
    audit = tmp_path / "audit"
    assert main(["judge-audit", "--model", f"early={a}", "--model", f"late={b}",
                 "--out", str(audit), *common[:-2]]) == 0  # it takes no --position
    assert json.loads((audit / "run.json").read_text())["judges"] == {"early": a, "late": b}
    # The same checkpoint twice: one line, before any model is loaded.
    capsys.readouterr()
    assert main(["judge", "--model", a, "--model", a, "--out", str(tmp_path / "x"),
                 *common]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is given twice" in err and "Traceback" not in err


def _reward_model(path: Path) -> Path:
    """A tiny untrained reward model with a chat template (as
    tests/sensitivity/test_sensitivity.py)."""
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForSequenceClassification

    from biasscope.demo.tiny import save, train_tokenizer

    words = "Human Assistant the a you I can help please sorry kind yes no response " * 20
    tokenizer = train_tokenizer([words, "<|user|>\n<|assistant|>\n"], vocab_size=300)
    tokenizer.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
                               "\n{% endfor %}")
    torch.manual_seed(0)
    config = GPTNeoXConfig(  # type: ignore[call-arg]
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=4096, rotary_pct=0.25, num_labels=1,
        pad_token_id=0)
    return Path(save(GPTNeoXForSequenceClassification(config).eval(), tokenizer, path))


def test_sensitivity_reward_models_with_one_folder_name(llama_server, tmp_path, capsys
                                                         ) -> None:
    pytest.importorskip("torch")
    from sensitivity_fixture import write_ccai, write_hh_rlhf

    same = [_reward_model(tmp_path / "x" / "rm")]
    same.append(Path(shutil.copytree(same[0], tmp_path / "y" / "rm")))
    data = write_hh_rlhf(write_ccai(tmp_path / "data"))
    args = ["sensitivity", "--perturber", f"openai-compatible:{llama_server.base_url}#tiny",
            "--principles", "ccai:top1", "--prompts", "hh-rlhf:harmless-base:2",
            "--data-dir", str(data), "--max-tokens", "4", "--device", "cpu", "--no-cache"]
    out = tmp_path / "run"
    assert main([*args, "--out", str(out), "--reward-model", str(same[0]),
                 "--reward-model", str(same[1])]) == 0
    records = json.loads((out / "summary.json").read_text())["directions"]["toward"]
    assert {r["model"] for r in records["indices"]} == {"x/rm", "y/rm"}
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "again"), "--reward-model", str(same[0]),
                 "--reward-model", f"{same[0]}/"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--reward-model" in err and "given twice" in err


def test_labels_and_errors_never_hold_a_url_credential() -> None:
    """Servers told apart by their URL are labelled from its masked form; two URLs that differ
    only in their credentials are one server, and one model (the response cache keys both by
    the masked URL, so the second would only repeat the first's answers)."""
    specs = ["openai-compatible:http://u:SECRET1@a:1/v1#m",
             "openai-compatible:http://u:SECRET2@b:1/v1#m"]
    labels = model_labels(parse_models(specs, "--judge"), ["openai-compatible:m"] * 2,
                          "--judge")
    assert labels == ["***@a:1/v1#m", "***@b:1/v1#m"]
    specs = ["openai-compatible:http://a:1/v1#m",
             "openai-compatible:http://a:1/v1?api-key=SECRET3#m"]
    labels = model_labels(parse_models(specs, "--judge"), ["openai-compatible:m"] * 2,
                          "--judge")
    assert labels == ["v1#m", "v1?api-key=***#m"]
    for same in (["openai-compatible:http://u:SECRET1@a:1/v1#m",
                  "openai-compatible:http://u:SECRET2@a:1/v1#m"],
                 ["openai-compatible:http://a:1/v1?api-key=SECRET1#m",
                  "openai-compatible:http://a:1/v1?api-key=SECRET2#m"],
                 ["openai-compatible:http://u:SECRET1@a:1/v1#m"] * 2):
        with pytest.raises(BiasscopeError, match="is given twice") as caught:
            parse_models(same, "--judge")
        assert "SECRET" not in str(caught.value) and "a:1/v1" in str(caught.value)
