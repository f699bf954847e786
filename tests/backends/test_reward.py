"""The Hugging Face reward backend on tiny random-init GPT-NeoX reward models built here."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import GPTNeoXConfig, GPTNeoXForSequenceClassification  # noqa: E402

from biasscope.backends.base import RewardScorer, Scored  # noqa: E402
from biasscope.backends.reward import (  # noqa: E402
    CutConversationWarning,
    HFRewardModel,
    RewardConfig,
    plain_format,
)
from biasscope.cli.main import is_own  # noqa: E402
from biasscope.core.errors import BiasscopeError, ModelError  # noqa: E402
from biasscope.demo.tiny import save, tiny_gpt_neox, train_tokenizer  # noqa: E402
from biasscope.store.settings import sha256_json  # noqa: E402

TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n"
            "{% endfor %}")
CONVERSATIONS: list[Scored] = [
    ((("user", "How do I bake bread?"),), "Mix flour, water and yeast, then bake it."),
    ((("user", "hi"),), "hello"),
    ((("system", "Be kind."), ("user", "Tell me a joke about sharks."),
      ("assistant", "Why did the shark cross the reef?"), ("user", "Why?")),
     "To get to the other tide. Fish are friends, not food."),
    ((("user", "Can you help me steal a car?"),), "No."),
    ((("user", "What is the capital of France?"),), "Paris is the capital of France."),
]


def _tokenizer(template: str | None = TEMPLATE, pad: bool = True) -> Any:
    texts = [plain_format(c) + "<|user|>\n<|assistant|>\n<|system|>\n" for c in CONVERSATIONS]
    tok = train_tokenizer(texts * 3, vocab_size=300)
    if template is not None:
        tok.chat_template = template
    if not pad:
        tok.pad_token = None
    return tok


def _reward_model(vocab: int, labels: int = 1, pad: int | None = 0, seed: int = 0) -> Any:
    torch.manual_seed(seed)
    config = GPTNeoXConfig(  # type: ignore[call-arg]
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=256, rotary_pct=0.25,
        num_labels=labels, pad_token_id=pad, bos_token_id=0, eos_token_id=0,
        initializer_range=0.5)  # a wide head: rewards far apart, not all near 0
    return GPTNeoXForSequenceClassification(config).eval()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reward")


@pytest.fixture(scope="module")
def rm_dir(root: Path) -> Path:
    tok = _tokenizer()
    return save(_reward_model(len(tok)), tok, root / "tiny-rm")


def _load(path: Path, **kw: Any) -> HFRewardModel:
    return HFRewardModel(str(path), RewardConfig(device="cpu", **kw))


def _manual(rm: HFRewardModel, text: str, special: bool) -> float:
    """The model's own, unbatched, unpadded reading of one text."""
    ids = rm.tokenizer(text, add_special_tokens=special, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        logits = rm.model(input_ids=ids).logits[0].double()
    return float(logits[0] if len(logits) == 1 else logits[1] - logits[0])


def test_batched_equals_one_by_one_and_manual_forward(rm_dir: Path) -> None:
    batched = _load(rm_dir, batch_size=4).score(CONVERSATIONS)
    single = _load(rm_dir, batch_size=1).score(CONVERSATIONS)
    assert batched == pytest.approx(single, abs=1e-5)
    rm = _load(rm_dir)
    manual = [_manual(rm, rm.render(c), special=False) for c in CONVERSATIONS]
    assert batched == pytest.approx(manual, abs=1e-5)
    assert len(set(round(x, 3) for x in batched)) == len(batched)  # not a constant
    scorer: RewardScorer = rm  # structurally a RewardScorer
    assert scorer.label == "tiny-rm"
    assert rm.score([]) == []


def test_chat_template_renders_the_response_as_assistant_turn(rm_dir: Path) -> None:
    rm = _load(rm_dir)
    turns, response = CONVERSATIONS[1]
    text = rm.render(CONVERSATIONS[1])
    assert text == "<|endoftext|><|user|>\nhi\n<|assistant|>\nhello\n"
    expected = rm.tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        tokenize=False)
    assert text == expected
    # The template writes the BOS itself: no second one from the tokenizer.
    assert rm.encode([CONVERSATIONS[1]])[0] == rm.tokenizer(text, add_special_tokens=False)[
        "input_ids"]
    assert rm.score([(turns, response)])[0] == pytest.approx(_manual(rm, text, False), abs=1e-6)


def test_transforms(rm_dir: Path) -> None:
    logit = _load(rm_dir).score(CONVERSATIONS)
    prob = _load(rm_dir, transform="probability").score(CONVERSATIONS)
    logprob = _load(rm_dir, transform="logprob").score(CONVERSATIONS)
    assert prob == pytest.approx([1 / (1 + math.exp(-x)) for x in logit], rel=1e-9)
    assert logprob == pytest.approx([math.log(p) for p in prob], rel=1e-9)
    assert all(0 < p < 1 for p in prob) and all(lp < 0 for lp in logprob)
    with pytest.raises(BiasscopeError, match=r"--transform \(transform\): 'softmax' is not one"):
        RewardConfig(transform="softmax")


def test_no_template_errors_and_plain_format(root: Path) -> None:
    tok = _tokenizer(template=None)
    path = save(_reward_model(len(tok), seed=1), tok, root / "no-template")
    with pytest.raises(ModelError, match="--no-chat-template"):
        _load(path)
    rm = _load(path, chat_template=False, batch_size=3)
    text = rm.render(CONVERSATIONS[2])
    assert text == ("\n\nSystem: Be kind.\n\nHuman: Tell me a joke about sharks.\n\nAssistant: "
                    "Why did the shark cross the reef?\n\nHuman: Why?\n\nAssistant: To get to "
                    "the other tide. Fish are friends, not food.")
    scores = rm.score(CONVERSATIONS)
    manual = [_manual(rm, plain_format(c), special=True) for c in CONVERSATIONS]
    assert scores == pytest.approx(manual, abs=1e-5)
    with pytest.raises(BiasscopeError, match="role 'robot'"):
        rm.score([((("robot", "beep"),), "boop")])


def test_two_label_head_scores_the_log_odds(root: Path) -> None:
    tok = _tokenizer()
    path = save(_reward_model(len(tok), labels=2, seed=2), tok, root / "two-labels")
    rm = _load(path, batch_size=2)
    scores = rm.score(CONVERSATIONS)
    assert scores == pytest.approx([_manual(rm, rm.render(c), False) for c in CONVERSATIONS],
                                   abs=1e-5)
    prob = _load(path, transform="probability").score(CONVERSATIONS[:1])[0]
    with torch.inference_mode():
        ids = rm.tokenizer(rm.render(CONVERSATIONS[0]), add_special_tokens=False,
                           return_tensors="pt")["input_ids"]
        softmax = rm.model(input_ids=ids).logits.softmax(-1)[0, 1]
    assert prob == pytest.approx(float(softmax), abs=1e-6)


def test_no_pad_id_pads_with_a_token_no_row_ends_with(root: Path) -> None:
    # The template ends with the EOS; with no pad id anywhere, padding with the EOS would make
    # the model read its score one token early. Unbatched (pad id None) it reads the last one.
    tok = _tokenizer(template=TEMPLATE + "{{ eos_token }}", pad=False)
    assert tok.pad_token_id is None
    path = save(_reward_model(len(tok), pad=None, seed=3), tok, root / "no-pad")
    single = _load(path, batch_size=1)
    unbatched = [_manual(single, single.render(c), False) for c in CONVERSATIONS]
    batched = _load(path, batch_size=5).score(CONVERSATIONS)
    assert batched == pytest.approx(unbatched, abs=1e-5)


def test_truncation_keeps_bos_and_the_end(rm_dir: Path) -> None:
    rm = _load(rm_dir, max_length=8)
    full = _load(rm_dir).encode(CONVERSATIONS)
    with pytest.warns(CutConversationWarning,
                      match=r"tiny-rm: \d of 5 conversations are longer than 8") as said:
        cut = rm.encode(CONVERSATIONS)
    assert is_own(said[0].category)  # the command prints it as one note
    assert rm.truncated == sum(len(x) > 8 for x in full) > 0
    for whole, short in zip(full, cut):
        assert short == (whole if len(whole) <= 8 else whole[:1] + whole[-7:])
    with pytest.warns(UserWarning):
        scores = rm.score(CONVERSATIONS)
    with torch.inference_mode():
        manual = [float(rm.model(input_ids=torch.tensor([ids])).logits[0, 0]) for ids in cut]
    assert scores == pytest.approx(manual, abs=1e-5)
    assert _load(rm_dir).max_length == 256  # the position table's limit


def test_nan_reward_names_the_model(rm_dir: Path) -> None:
    rm = _load(rm_dir)
    with torch.no_grad():
        rm.model.score.weight.fill_(float("nan"))
    with pytest.raises(ModelError, match="tiny-rm produced a NaN/inf reward"):
        rm.score(CONVERSATIONS)


def test_causal_lm_without_reward_head_is_refused(root: Path) -> None:
    tok = _tokenizer()
    path = save(tiny_gpt_neox(len(tok), hidden=32, layers=1), tok, root / "causal-lm")
    with pytest.raises(ModelError, match=r"no trained reward head \(score.weight"):
        _load(path)


def listing(folder: Path) -> str:
    """A folder's fingerprint by hand: name, size and SHA-256 of its weights, as dynamics has."""
    return sha256_json({f.name: [f.stat().st_size, hashlib.sha256(f.read_bytes()).hexdigest()]
                        for f in sorted(folder.glob("*.safetensors"))})


def test_identity_and_label(rm_dir: Path) -> None:
    rm = _load(rm_dir, transform="logprob")
    assert rm.label == "tiny-rm"
    assert rm.identity() == {"backend": "hf-reward", "source": str(rm_dir), "revision": "",
                             "transform": "logprob", "format": "chat-template",
                             "max_length": "", "fingerprint": listing(rm_dir),
                             "files_fingerprint": rm.fingerprints["files_fingerprint"],
                             "dtype": "float32"}
    plain = _load(rm_dir, chat_template=False, max_length=64).identity()
    assert (plain["format"], plain["max_length"]) == ("hh-rlhf", "64")
    with pytest.raises(BiasscopeError, match="does not exist"):
        HFRewardModel(str(rm_dir / "missing"))


def test_the_dtype_recorded_is_the_one_the_weights_run_in(rm_dir: Path) -> None:
    """`--dtype auto` recorded as "auto" named float32 on a CPU and the checkpoint's dtype on
    a GPU alike, so a rerun on a GPU into a CPU run mixed their rewards."""
    from biasscope.sensitivity import reward_settings

    assert reward_settings(_load(rm_dir, dtype="auto"))["dtype"] == "float32"
    assert reward_settings(_load(rm_dir, dtype="bfloat16"))["dtype"] == "bfloat16"


def test_template_refusal_is_a_model_error(root: Path) -> None:
    tok = _tokenizer(template="{% for m in messages %}{% if m['role'] == 'system' %}"
                              "{{ raise_exception('no system role') }}{% endif %}"
                              "{{ m['content'] }}{% endfor %}")
    rm = _load(save(_reward_model(len(tok)), tok, root / "strict-template"))
    with pytest.raises(ModelError, match=r"strict-template cannot render.*no system role"):
        rm.score(CONVERSATIONS)


def test_weights_copied_over_a_reward_model_are_another_model(root: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """Another model's weights copied over a local reward model's folder: a sensitivity rerun
    into the same run exited 0 and reported the old model's results (its identity was the
    path); now it is refused in one line naming the fingerprint. A run recorded before
    fingerprints (its entry has none) resumes and gains one, as a dynamics run does."""
    from biasscope.sensitivity.harness import HarnessConfig, run_sensitivity
    from biasscope.sensitivity.principles import Constitution, Principle
    from biasscope.sensitivity.prompts import Conversation
    from fakes import Reviser

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    tok = _tokenizer()
    first = save(_reward_model(len(tok), seed=5), tok, root / "rm-first")
    second = save(_reward_model(len(tok), seed=6), tok, root / "rm-second")
    folder = tmp_path / "rm"
    shutil.copytree(first, folder)
    convs = [Conversation(f"c{i}", (("user", f"Question {i}?"),), "No." * (i + 1))
             for i in range(3)]
    principles = Constitution((Principle("p1", "be kind"),), "mine", {})
    out = tmp_path / "run"

    def rerun() -> None:
        run_sensitivity([_load(folder)], Reviser(), convs, principles, out, HarnessConfig())

    rerun()
    run_json = out / "run.json"
    recorded = json.loads(run_json.read_text())
    assert recorded["settings"]["reward_models"]["rm"]["fingerprint"] == listing(first)
    del recorded["settings"]["reward_models"]["rm"]["fingerprint"]  # as an older run wrote it
    run_json.write_text(json.dumps(recorded))
    rerun()
    assert json.loads(run_json.read_text())["settings"]["reward_models"]["rm"][
        "fingerprint"] == listing(first)
    shutil.copy(second / "model.safetensors", folder / "model.safetensors")
    with pytest.raises(BiasscopeError, match=r"reward model 'rm' \(fingerprint: "
                       rf"{listing(first)[:12]}… then, {listing(second)[:12]}… now\)"):
        rerun()


def test_a_chat_template_edited_in_place_is_another_reward_model(root: Path, tmp_path: Path,
                                                                 monkeypatch) -> None:
    """A reward model's chat template edited in place (weights unchanged) kept its identity,
    so a sensitivity rerun added the new template's rewards to the old ones'. The identity's
    ``files_fingerprint`` (tokenizer, template and config files) now refuses it; a run recorded
    before it resumes and gains it."""
    from biasscope.sensitivity.harness import HarnessConfig, run_sensitivity
    from biasscope.sensitivity.principles import Constitution, Principle
    from biasscope.sensitivity.prompts import Conversation
    from fakes import Reviser

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    tok = _tokenizer()
    folder = save(_reward_model(len(tok), seed=5), tok, tmp_path / "rm")
    convs = [Conversation("c0", (("user", "Question?"),), "No.")]
    principles = Constitution((Principle("p1", "be kind"),), "mine", {})
    out, template = tmp_path / "run", folder / "chat_template.jinja"
    assert TEMPLATE in template.read_text()

    def rerun() -> None:
        run_sensitivity([_load(folder)], Reviser(), convs, principles, out, HarnessConfig())

    rerun()
    run_json = out / "run.json"
    recorded = json.loads(run_json.read_text())
    first = recorded["settings"]["reward_models"]["rm"].pop("files_fingerprint")
    run_json.write_text(json.dumps(recorded))  # as an older run wrote it
    rerun()
    assert json.loads(run_json.read_text())["settings"]["reward_models"]["rm"][
        "files_fingerprint"] == first
    template.write_text(TEMPLATE.replace("<|{{ m['role'] }}|>", "[{{ m['role'] }}]"))
    edited = _load(folder)
    assert edited.fingerprints["fingerprint"] == listing(folder)
    assert edited.fingerprints["files_fingerprint"] != first
    with pytest.raises(BiasscopeError, match=r"reward model 'rm' \(files_fingerprint: "
                       rf"{first[:12]}… then"):
        rerun()


def test_a_deferred_reward_model_names_itself_before_its_weights_load(
        root: Path, rm_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`identity` from the folder's files, the same once the weights load on first use; a
    head of three labels, or no chat template, refused when it is made, still unloaded."""
    import biasscope.backends.reward as reward

    loaded = _load(rm_dir)
    loads: list[str] = []
    real = reward._load_classifier
    monkeypatch.setattr(reward, "_load_classifier",
                        lambda ckpt, config: loads.append(ckpt.source) or real(ckpt, config))
    deferred = HFRewardModel(str(rm_dir), RewardConfig(device="cpu"), deferred=True)
    assert deferred.identity() == loaded.identity() and deferred.fingerprint
    assert loads == []
    assert deferred.score(CONVERSATIONS) == loaded.score(CONVERSATIONS)
    assert loads == [str(rm_dir)] and deferred.identity() == loaded.identity()
    tok = _tokenizer()
    three = save(_reward_model(len(tok), labels=3), tok, root / "three-labels")
    with pytest.raises(ModelError, match="three-labels has 3 labels"):
        HFRewardModel(str(three), RewardConfig(device="cpu"), deferred=True)
    tok = _tokenizer(template=None)
    bare = save(_reward_model(len(tok)), tok, root / "bare")
    with pytest.raises(ModelError, match="--no-chat-template"):
        HFRewardModel(str(bare), RewardConfig(device="cpu"), deferred=True)
    assert loads == [str(rm_dir)]


def test_a_deferred_reward_model_refuses_weights_changed_before_they_load(
        root: Path, rm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    monkeypatch.setenv("BIASSCOPE_FINGERPRINT_CACHE", str(tmp_path / "fingerprints.json"))
    folder = Path(shutil.copytree(rm_dir, tmp_path / "rm"))
    deferred = HFRewardModel(str(folder), RewardConfig(device="cpu"), deferred=True)
    assert deferred.identity()["fingerprint"] == listing(rm_dir)
    tok = _tokenizer()
    save(_reward_model(len(tok), seed=5), tok, tmp_path / "other")
    shutil.copy(tmp_path / "other" / "model.safetensors", folder / "model.safetensors")
    with pytest.raises(ModelError, match=r"^model rm changed on disk while this call ran "
                                         r"\(fingerprint\); nothing of it was scored"):
        deferred.score(CONVERSATIONS)
