"""Constitutional sensitivity end to end: fixture CCAI and hh-rlhf files, the real llama.cpp
server as perturber, tiny reward models built here; and the perturbation step on its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("openai")

from biasscope.backends.base import GenerateRequest, Generation
from biasscope.cli.main import main
from biasscope.sensitivity.perturb import Templates, perturb
from biasscope.store.directory import RunStore
from sensitivity_fixture import CONVERSATIONS, IRREGULAR, hh_text, write_ccai, write_hh_rlhf

TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n"
            "{% endfor %}")


class Scripted:
    """A perturber that says what it was asked, so the templates can be checked."""

    label = "scripted"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def identity(self) -> dict[str, str]:
        return {"backend": "scripted"}

    def generate(self, requests: list[GenerateRequest]) -> list[Generation]:
        out = []
        for r in requests:
            text = r.messages[-1][1] if r.messages else ""
            self.asked.append(text)
            if "Critique request" in text:
                out.append(Generation("It is rude."))
            elif "fail" in text:
                out.append(Generation("", error="down"))
            else:
                out.append(Generation("Sure, here is the revised response: Be kind."))
        return out


def test_perturb_fills_the_templates_and_flags_preambles():
    perturber = Scripted()
    conversations = [("c1", (("user", "Hi"),), "Go away."), ("c2", (("user", "Q"),), "No.")]
    principles = [("p1", "Be polite."), ("p2", "fail")]
    perts = perturb(perturber, conversations, principles, direction="away",
                    templates=Templates())
    assert len(perts) == 4 and len(perturber.asked) == 4 + 4
    first = perts[0]
    assert first.critique == "It is rude." and first.preamble
    assert first.revision == "Sure, here is the revised response: Be kind."
    assert first.length_change == len(first.revision) - len("Go away.")
    assert "Human: Hi\n\nAssistant: Go away." in perturber.asked[0]
    assert "follows the principle less closely" in perturber.asked[4]
    assert "Critique: It is rude." in perturber.asked[4]
    failed = perts[1]
    assert failed.revision is None and failed.error == "down" and not failed.preamble


@pytest.fixture(scope="module")
def reward_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForSequenceClassification

    from biasscope.demo.tiny import save, train_tokenizer

    words = ("Human Assistant the a you I can help please sorry kind polite friends food "
             "fish yes no answer question revised response " * 20)
    tokenizer = train_tokenizer([words, "<|user|>\n<|assistant|>\n"], vocab_size=300)
    tokenizer.chat_template = TEMPLATE
    root = tmp_path_factory.mktemp("rm")
    out = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        config = GPTNeoXConfig(  # type: ignore[call-arg]
            vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
            num_attention_heads=4, intermediate_size=64, max_position_embeddings=4096,
            rotary_pct=0.25, num_labels=1, pad_token_id=0, initializer_range=0.5)
        out.append(save(GPTNeoXForSequenceClassification(config).eval(), tokenizer,
                        root / f"rm{seed}"))
    return out


def test_sensitivity_end_to_end_with_a_real_perturber(llama_server, reward_dirs, tmp_path,
                                                      capsys):
    texts = [hh_text(turns) for turns in CONVERSATIONS] + list(IRREGULAR.values())
    data = write_hh_rlhf(write_ccai(tmp_path / "data"), texts)
    out = tmp_path / "run"
    args = ["sensitivity", "--perturber", f"openai-compatible:{llama_server.base_url}#tiny",
            "--principles", "ccai:top2", "--prompts", "hh-rlhf:harmless-base:3",
            "--data-dir", str(data), "--out", str(out), "--direction", "both",
            "--max-tokens", "6", "--device", "cpu", "--cache", str(tmp_path / "c.sqlite")]
    for path in reward_dirs:
        args += ["--reward-model", str(path)]
    assert main(args) == 0
    first = capsys.readouterr().out
    recs = RunStore(out).records()
    principles = recs["principle"].nunique()
    assert 2 <= principles <= 4
    assert len(recs) == 2 * 2 * principles * 3  # models x directions x principles x prompts
    assert recs["critique"].notna().all() and recs["perturbed"].notna().all()
    perts = [json.loads(line) for line in (out / "perturbations-away.jsonl").read_text()
             .splitlines()]
    assert len(perts) == principles * 3 and all(p["direction"] == "away" for p in perts)
    summary = json.loads((out / "summary.json").read_text())["directions"]
    toward = summary["toward"]
    assert {r["model"] for r in toward["indices"]} == {"rm0", "rm1"}
    assert toward["model_test"] is not None and toward["rank_agreement"]
    assert "groups" in toward and toward["sentences"]
    assert (out / "report.html").is_file() and "<script" in (out / "report.html").read_text()
    assert "0 sent" not in first
    assert "3 with two Assistant turns in a row (lines 31, 32, 33) joined into one turn" in first
    assert main([*args, "--conventions", "source"]) == 0  # the rerun: all from the cache
    assert "0 sent" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["conventions"] == "source" and summary["prompts"]["in_file"] == 33
    changed = [a if a != "ccai:top2" else "ccai:top3" for a in args]
    assert main(changed) == 2  # other principles into the same --out: refused, one line
    err = capsys.readouterr().err
    assert "different 'principles'" in err and "Traceback" not in err
    assert main(["report", str(out)]) == 0


def test_a_reward_model_without_chat_template_says_what_to_do(reward_dirs, tmp_path, capsys):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(reward_dirs[0])
    tok.chat_template = None
    bare = tmp_path / "bare"
    tok.save_pretrained(bare)
    import shutil

    for name in ("config.json", "model.safetensors"):
        shutil.copy(reward_dirs[0] / name, bare / name)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "Hi", "response": "Hello"}\n')
    code = main(["sensitivity", "--reward-model", str(bare), "--perturber",
                 "openai-compatible:http://127.0.0.1:9/v1#x", "--principles", "ccai:top2",
                 "--prompts", str(prompts), "--out", str(tmp_path / "r"), "--sanity-pairs",
                 "0", "--device", "cpu", "--data-dir", str(write_ccai(tmp_path / "d"))])
    err = capsys.readouterr().err
    assert code == 2 and "--no-chat-template" in err and "Traceback" not in err


def test_the_sanity_and_length_sentences_use_the_one_number_format():
    from biasscope.sensitivity.confounds import confound_sentences
    from biasscope.sensitivity.sanity import sanity_sentence

    acc = {"n": 500, "correct": 361, "estimate": 0.722, "low": 0.6809, "high": 0.7597,
           "p_value": 3.1e-23, "effect_size": 0.4567, "ties": 2, "verdict": "above chance"}
    assert sanity_sentence("rm", acc, "hh-rlhf") == (
        "rm: prefers the chosen response in 361 of 500 hh-rlhf pairs, 72.2% (95% CI 68.1% to "
        "76.0%; exact test against 50% p < 0.0001, Cohen's h = +0.46; 2 ties).")
    row = {"model": "rm", "principle": "p1", "slope_per_100_chars": 0.012345,
           "slope_per_100_chars_low": 0.0061, "slope_per_100_chars_high": 0.0187,
           "adjusted_effect": -0.000123456, "adjusted_effect_low": -0.05,
           "adjusted_effect_high": 0.05, "mean_effect": 0.0312345}
    said = confound_sentences({"length": [row], "unchanged": [], "correlations": []})
    assert said == ["rm, principle p1: the reward moves +0.0123 (95% CI +0.0061 to +0.0187) per "
                    "100 characters of length change; at unchanged length the effect is 0.000 "
                    "(95% CI -0.050 to +0.050) against +0.0312 unadjusted."]
