"""A real OpenAI-compatible server for integration tests: llama-cpp-python's server on 127.0.0.1
serving a tiny GGUF model whose next-token distributions are known exactly.

The model (`write_tiny_gguf`) is a 1-layer Llama whose attention-output and FFN-down projections
are zero, so the residual stream at every position is just that position's token embedding. The
logits for the next token are therefore a pure function of the *last* token:

    logits = W_out @ (g * x / sqrt(mean(x**2) + eps)),   x = token_embd[last_token]

and `TinyLlama.expected_logprobs(last_token_id)` reproduces them in numpy (float64 from the same
float32 weights; llama.cpp agrees to ~1e-6). Whole words get random output rows (fixed seed);
specials, byte tokens, the bare "▁" and word-prefix pieces get a strongly negative logit through a
constant "bias" embedding dimension: after any token, the 45 words and punctuation pieces
(`word_ids()`) outrank every other token (by >= 0.8 nats), so top-k lists with k <= 45 hold only
those, whose surface strings are unique. After a word piece the top-1 margin is >= 0.04 nats
(argmax is robust).

Tokenizer: SentencePiece-style ("llama") vocabulary: <unk>=0, <s>=1 (BOS, added to every prompt),
</s>=2, the 256 byte-fallback tokens <0x00>..<0xFF> (ids 3..258), then "▁", a few punctuation
pieces and whole words ("▁yes", "▁female", ...), then (ids 423..431) the judge keys "A".."E" and
"▁B".."▁E" ("▁A", id 381, is already there as a prefix of "▁Answer"); 432 tokens. The keys are
"dead" (like the prefixes) unless `write_tiny_gguf(prefer=...)` makes one the answer after a given
token (see `judge_server`; then the 45-word claims above hold after every token but the sources).
llama.cpp's SPM tokenizer merges only pairs whose concatenation is in the vocabulary, so every
word comes with its chain of prefixes ("▁f", "▁fe", ... "▁female"); that makes tokenization
unambiguous: a space-separated run of known words tokenizes to exactly those words, anything
else falls back to bytes (but a capital A..E not merged into a word is its key piece). A space
is prepended to the text after BOS/any special token (add_space_prefix), so "The doctor said" ->
[<s>, ▁The, ▁doctor, ▁said]. The GGUF carries a chat template (`CHAT_TEMPLATE`):
"<s>user: hi\\nassistant:", whose last token is always the ":" piece.

Keys through /extras/tokenize: "A" -> [<s>, ▁A] (one id after BOS: the space prefix makes it
the "▁" form), " A" and "▁A" -> [<s>, ▁, ▁A], "Answer:A" -> [<s>, ▁Answer, :, A] (the bare form
follows a non-space), "Answer: A" -> [..., :, ▁A], "Answer: " -> [..., :, ▁]. So a model that
answers "assistant: A" emits "▁A" right after the template's ":"; the server returns it as
content " A" (leading space kept: strip it).

Behaviour of llama-cpp-python 0.3.36's server (`python -m llama_cpp.server`), observed against
this model (tests/backends/test_llama_server.py pins the important ones):

* /v1/completions, legacy `logprobs: k`: works. `choices[0].logprobs` has `tokens`,
  `text_offset`, `token_logprobs`, `top_logprobs` (one {token string: logprob} dict per
  generated token). Values are a float32 log-softmax of the raw model logits (match numpy to
  ~1e-6). No maximum: k is only checked `>= 0` (OpenAI caps it at 5); k = n_vocab is accepted.
  Each dict is the top k plus the sampled token (k+1 entries when the sampled token is outside
  the top k); `logprobs: 0` gives just the sampled token. Keys are *detokenized strings*
  (leading "▁" -> " "), so tokens with the same surface text collide: the ":" piece and byte
  <0x3A> both read ":", and every byte >= 0x80 reads "" (invalid UTF-8 is dropped). A collision
  keeps the key's first (highest) rank but the value of the LOWEST-ranked colliding token: with
  k = n_vocab, ":" is reported at -20.98 (the byte's log-prob) instead of -4.86, and the dict has
  292 keys for 432 tokens (the bare keys "A".."E" collide with the bytes <0x41>..<0x45>).
  Logprobs need logits_all, which the server turns on by default.
* `echo: true` with `logprobs` scores the prompt as well: BOS is dropped, the first prompt token's
  `token_logprobs`/`top_logprobs` are None, then the log-prob of each prompt token given its
  prefix. Echoed `tokens` keep SentencePiece's leading space (" The" for a prompt "The").
  `max_tokens: 0` does NOT mean "score only": <= 0 means "until the context is full" (252 tokens
  here), so score with `max_tokens: 1`.
* /v1/chat/completions: `logprobs: true, top_logprobs: k` works: choices[0].logprobs.content[i]
  = {token, logprob, bytes: None, top_logprobs: [{token, logprob, bytes: None}, ...]}, same
  string keys/collisions and no cap (k = 50 accepted; OpenAI caps it at 20). `logprobs: true`
  WITHOUT `top_logprobs` returns `logprobs: null` (the handler passes on `top_logprobs if
  logprobs else None`); `top_logprobs: 0` gives the sampled token only; `logprobs: false` with
  `top_logprobs` gives null. The prompt is the GGUF's chat template (tokenizer.chat_template).
* Reported log-probs are computed BEFORE `logit_bias`, temperature and the repeat/presence/
  frequency penalties: those only change which token is sampled. `logit_bias` keys are the
  server's token ids as strings (`logit_bias_type` defaults to "input_ids"); the llama.cpp
  extension `logit_bias_type: "tokens"` takes text instead and biases every id it tokenizes to.
  The bias is added to the logit, so -100/+100 effectively ban/force a token.
* Penalties: the request default `repeat_penalty` is 1.1, applied to generated tokens only (not
  to the prompt): greedy decoding matches the argmax chain until a token repeats; pass
  `repeat_penalty: 1.0` (extra_body) for a pure argmax chain.
* `seed` is honoured at temperature > 0: the same seed and prompt give the same completion.
  Without a seed each request draws a fresh seed from a generator seeded at server start, so
  consecutive identical requests differ. temperature 0 is greedy (argmax after bias/penalties).
* Tokenization: POST /extras/tokenize {"input": text} -> {"tokens": [...]} (adds BOS and parses
  special tokens, so "<s>The" -> [1, 1, ...]); /extras/tokenize/count -> {"count": n};
  /extras/detokenize {"tokens": [...]} -> {"text": ...} (drops the space after BOS). These live
  at the server root, not under /v1; an optional "model" field is accepted.
* Model names: GET /v1/models lists only the alias ("tiny"). A request naming an unknown model
  is silently served by the default (only) model and its response's `model` echoes the requested
  name; a request with no `model` gets the GGUF's path as `model`.
* Requests are served one at a time (a global lock in the server); a prompt sharing a prefix
  with the previous one reuses the KV cache.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

MODEL_ALIAS = "tiny"
N_CTX = 2048  # room for a judge prompt spelled out in byte tokens
N_EMBD = 32
N_HEAD = 4
N_FF = 64
RMS_EPS = 1e-5
SEED = 20240611

UNK, BOS, EOS = 0, 1, 2
SPACE = "▁"  # SentencePiece's escaped space, U+2581
WORDS = (
    "the", "The", "a", "an", "he", "she", "they", "him", "her", "his", "hers", "them", "is",
    "was", "said", "told", "asked", "because", "who", "doctor", "nurse", "engineer", "teacher",
    "lawyer", "secretary", "man", "woman", "person", "male", "female", "yes", "no", "not",
    "specified", "answer", "Answer", "question", "Question", "user", "assistant", "system",
)
PUNCTUATION = (":", ".", ",", "?")
KEYS = ("A", "B", "C", "D", "E")  # judge answer keys: pieces "A".."E" and "▁A".."▁E"
N_EMBD_PREFER = 4 * N_EMBD  # embedding width with `prefer`: one spare dimension per source
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@dataclass(frozen=True)
class TinyLlama:
    """A written tiny GGUF model and the numpy reference for its next-token distribution."""

    path: Path
    vocab: list[str]  # token strings, by id (SentencePiece form: "▁yes")
    token_embd: np.ndarray  # (n_vocab, n_embd) float32
    output_norm: np.ndarray  # (n_embd,) float32
    output: np.ndarray  # (n_vocab, n_embd) float32
    rms_eps: float = RMS_EPS
    chat_template: str = CHAT_TEMPLATE
    prefer: dict[int, int] = field(default_factory=dict)  # source id -> forced next-token id

    @property
    def n_vocab(self) -> int:
        return len(self.vocab)

    def token_id(self, piece: str) -> int:
        """Id of a vocabulary piece; a leading space may be written as " " or "▁"."""
        return self.vocab.index(piece.replace(" ", SPACE))

    def text(self, token_id: int) -> str:
        """The surface text of a normal piece ("▁yes" -> " yes")."""
        return self.vocab[token_id].replace(SPACE, " ")

    def key_ids(self, space: bool = True) -> dict[str, int]:
        """Ids of the judge keys "A".."E": the "▁A" pieces (what follows "...:" when the text is
        "...: A"; what `judge_server` emits after the chat template) or, with `space=False`,
        the bare "A" pieces (what follows "...: " or "...:A")."""
        return {k: self.token_id(SPACE + k if space else k) for k in KEYS}

    def word_ids(self) -> list[int]:
        """Ids of the whole-word and punctuation pieces (the only ones with real probability,
        apart from the targets of `prefer` after their sources)."""
        return [self.token_id(SPACE + w) for w in WORDS] + [self.token_id(p) for p in PUNCTUATION]

    def encode_words(self, text: str) -> list[int]:
        """Server tokenization of a prompt made of known words separated by single spaces,
        punctuation attached to the preceding word: BOS then one piece per word/punctuation."""
        ids = [BOS]
        for word in text.split(" "):
            tail = [c for c in PUNCTUATION if word.endswith(c)]
            stem = word[: len(word) - len(tail[0])] if tail else word
            ids.append(self.token_id(SPACE + stem))
            ids.extend(self.token_id(t) for t in tail)
        return ids

    def hidden(self, last_token_id: int) -> np.ndarray:
        """The final rms-normed hidden state after `last_token_id` (its normed embedding)."""
        x = self.token_embd[last_token_id].astype(np.float64)
        return x / np.sqrt(np.mean(x * x) + self.rms_eps) * self.output_norm.astype(np.float64)

    def logits(self, last_token_id: int) -> np.ndarray:
        return self.output.astype(np.float64) @ self.hidden(last_token_id)

    def expected_logprobs(self, last_token_id: int) -> np.ndarray:
        """log-softmax over the vocabulary of the next token after `last_token_id`."""
        z = self.logits(last_token_id)
        z = z - z.max()
        return z - np.log(np.exp(z).sum())


def _vocabulary() -> tuple[list[str], list[int], set[str], int]:
    """Token strings, token types, the set of pieces that get real probability and the size of
    the base vocabulary (the judge keys not already in it come after it)."""
    import gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    pieces: dict[str, None] = {SPACE: None}
    for word in WORDS:
        full = SPACE + word
        for end in range(2, len(full) + 1):  # "▁d", "▁do", ... "▁doctor": SPM needs the chain
            pieces[full[:end]] = None
    for p in PUNCTUATION:
        pieces[p] = None
    tokens += list(pieces)
    n_base = len(tokens)
    # Judge keys, appended so that the base ids (and their random weights) stay as they were;
    # "▁A" is already there as a prefix of "▁Answer".
    tokens += [p for p in [*KEYS, *(SPACE + k for k in KEYS)] if p not in pieces]
    types += [gguf.TokenType.NORMAL] * (len(tokens) - len(types))
    live = {SPACE + w for w in WORDS} | set(PUNCTUATION)
    return tokens, [int(t) for t in types], live, n_base


def _prefer_ids(tokens: list[str], prefer: Mapping[str, str] | None) -> dict[int, int]:
    def tid(piece: str) -> int:
        for p in (piece, piece.replace(" ", SPACE)):
            if p in tokens:
                return tokens.index(p)
        raise ValueError(f"prefer: {piece!r} is not a piece of the tiny vocabulary")

    ids = {tid(src): tid(dst) for src, dst in (prefer or {}).items()}
    if len(ids) != len(prefer or {}):
        raise ValueError(f"prefer: two sources name the same token: {dict(prefer or {})}")
    if len(ids) > N_EMBD_PREFER - N_EMBD:
        raise ValueError(f"prefer: at most {N_EMBD_PREFER - N_EMBD} source tokens")
    return ids


def write_tiny_gguf(path: str | os.PathLike[str], prefer: Mapping[str, str] | None = None,
                    margin: float = 8.0) -> TinyLlama:
    """Write the tiny Llama GGUF to `path` and return its numpy reference.

    `prefer` maps a last-token piece to the next-token piece the model must then pick: after
    each source token its target is the argmax by at least `margin` nats over every other token
    (checked on the float32 weights; llama.cpp agrees to ~1e-5). Pieces are vocabulary strings
    ("▁A" or " A", "A", ":", "</s>"). E.g. {":": "▁A"} answers " A" after the chat template and
    after "...Answer:" prompts: a judge that always picks the first key.

    How: the embedding is widened from N_EMBD to N_EMBD_PREFER dims; source i gets a 1 in the
    spare dimension N_EMBD + i (every other token has 0 there) and its target's output row a
    weight there that lifts its logit to the margin. The normalisation of every other token is
    unchanged, exactly: the width is 4x, so rms_eps is quartered and output_norm halved (powers
    of two), hence after non-source tokens the distribution is the `prefer=None` model's.
    With `prefer=None` the weights are those of the 32-dim model the tests were written against
    (the appended judge-key pieces have their own random generator and a "dead" output row).
    """
    import gguf

    path = Path(path)
    if margin <= 0:
        raise ValueError(f"margin must be > 0, got {margin}")
    tokens, types, live, n_base = _vocabulary()
    n_vocab = len(tokens)
    prefer_ids = _prefer_ids(tokens, prefer)
    rng = np.random.default_rng(SEED)

    # Embeddings: dim 0 is a constant "bias" feature, the rest random.
    token_embd = rng.normal(0.0, 1.0, size=(n_base, N_EMBD))
    token_embd[:, 0] = 1.0
    output_norm = rng.uniform(0.8, 1.2, size=N_EMBD)
    output = np.zeros((n_base, N_EMBD))
    is_live = np.array([t in live for t in tokens[:n_base]])
    # Whole words: random rows, logit std ~2.5 -> peaked but far from one-hot distributions.
    output[is_live, 1:] = rng.normal(0.0, 2.5 / np.sqrt(N_EMBD), size=(is_live.sum(), N_EMBD - 1))
    # Everything else: pushed down by ~12 nats (noise keeps the values distinct).
    output[~is_live, 0] = -12.0
    output[~is_live, 1:] = rng.normal(0.0, 0.05, size=((~is_live).sum(), N_EMBD - 1))
    # The appended judge keys: dead like the rest (their own generator: base draws unchanged).
    key_rng = np.random.default_rng(SEED + 1)
    n_keys = n_vocab - n_base
    key_embd = key_rng.normal(0.0, 1.0, size=(n_keys, N_EMBD))
    key_embd[:, 0] = 1.0
    key_out = np.zeros((n_keys, N_EMBD))
    key_out[:, 0] = -12.0
    key_out[:, 1:] = key_rng.normal(0.0, 0.05, size=(n_keys, N_EMBD - 1))
    token_embd = np.vstack([token_embd, key_embd])
    output = np.vstack([output, key_out])

    f32 = np.float32
    n_embd, rms_eps = N_EMBD, RMS_EPS
    if prefer_ids:
        n_embd, spare = N_EMBD_PREFER, N_EMBD_PREFER - N_EMBD
        scale = n_embd // N_EMBD  # 4: mean(x**2) over 4x the dims is a quarter
        token_embd = np.hstack([token_embd, np.zeros((n_vocab, spare))])
        output = np.hstack([output, np.zeros((n_vocab, spare))])
        output_norm = np.concatenate([output_norm / np.sqrt(scale), np.ones(spare)])
        rms_eps = RMS_EPS / scale
        for i, src in enumerate(prefer_ids):
            token_embd[src, N_EMBD + i] = 1.0
    token_embd, output_norm, output = (a.astype(f32) for a in (token_embd, output_norm, output))
    for i, (src, dst) in enumerate(prefer_ids.items()):
        ref = TinyLlama(path, tokens, token_embd, output_norm, output, rms_eps=rms_eps)
        z = ref.logits(src)  # the target's spare weight is still 0
        lift = np.delete(z, dst).max() + margin + 1e-3 - z[dst]
        output[dst, N_EMBD + i] = f32(lift / ref.hidden(src)[N_EMBD + i])
    ref = TinyLlama(path=path, vocab=tokens, token_embd=token_embd, output_norm=output_norm,
                    output=output, rms_eps=rms_eps, prefer=prefer_ids)
    for src, dst in prefer_ids.items():
        lp = ref.expected_logprobs(src)
        assert lp[dst] - np.delete(lp, dst).max() >= margin, (tokens[src], tokens[dst])
    head_dim = n_embd // N_HEAD
    small = 0.1

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("biasscope-tiny-llama")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(1)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(rms_eps)
    writer.add_vocab_size(n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * n_vocab)
    writer.add_token_types(types)
    writer.add_bos_token_id(BOS)
    writer.add_eos_token_id(EOS)
    writer.add_unk_token_id(UNK)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    def rand(*shape: int) -> np.ndarray:
        return rng.normal(0.0, small, size=shape).astype(f32)

    # numpy shapes are ggml's reversed: (rows=out_features, cols=in_features).
    writer.add_tensor("token_embd.weight", token_embd)
    writer.add_tensor("output_norm.weight", output_norm)
    writer.add_tensor("output.weight", output)
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(n_embd, dtype=f32))
    writer.add_tensor("blk.0.attn_q.weight", rand(n_embd, n_embd))
    writer.add_tensor("blk.0.attn_k.weight", rand(n_embd, n_embd))
    writer.add_tensor("blk.0.attn_v.weight", rand(n_embd, n_embd))
    writer.add_tensor("blk.0.attn_output.weight", np.zeros((n_embd, n_embd), dtype=f32))
    writer.add_tensor("blk.0.ffn_norm.weight", np.ones(n_embd, dtype=f32))
    writer.add_tensor("blk.0.ffn_gate.weight", rand(N_FF, n_embd))
    writer.add_tensor("blk.0.ffn_up.weight", rand(N_FF, n_embd))
    writer.add_tensor("blk.0.ffn_down.weight", np.zeros((n_embd, N_FF), dtype=f32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return ref


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerError(RuntimeError):
    pass


class Server:
    """`python -m llama_cpp.server` in its own process group, logging to `log_path`."""

    def __init__(self, model_path: str | os.PathLike[str], port: int | None = None,
                 extra_args: Sequence[str] = (), log_path: str | os.PathLike[str] | None = None,
                 startup_timeout: float = 60.0, alias: str = MODEL_ALIAS) -> None:
        self.model_path = Path(model_path)
        self.port = port if port is not None else free_port()
        self.extra_args = tuple(extra_args)
        self.startup_timeout = startup_timeout
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self.model = alias  # the only name GET /v1/models lists
        self._proc: subprocess.Popen[bytes] | None = None
        atexit.register(self.stop)

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path),
                "--model_alias", self.model, "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", str(N_CTX), "--n_threads", "1", "--n_threads_batch", "1",
                *self.extra_args]

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Server:
        if self.running():
            return self
        with self.log_path.open("ab") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} start: {self.command()}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        while True:
            assert self._proc is not None
            rc = self._proc.poll()
            if rc is not None:
                raise ServerError(f"llama_cpp.server exited with rc={rc} during startup; "
                                  f"log {self.log_path}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ServerError(f"llama_cpp.server not answering GET {self.base_url}/models "
                                  f"after {self.startup_timeout:.0f}s; log {self.log_path}:\n"
                                  f"{self.log_tail()}")
            time.sleep(0.1)

    def _signal(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it if it has not gone after `timeout` s."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._proc.wait()
        self._signal(signal.SIGKILL)  # stragglers in the group, if any
        self._proc = None

    def kill(self) -> None:
        """Crash the server (SIGKILL the process group) without a graceful shutdown."""
        if self._proc is not None:
            self._signal(signal.SIGKILL)
            self._proc.wait()
            self._proc = None

    def restart(self) -> Server:
        """Stop and start again on the same port (the URL the clients hold stays valid)."""
        self.stop()
        return self.start()

    def log_tail(self, n_chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError as e:
            return f"<no log: {e}>"

    def post(self, path: str, body: dict[str, Any], timeout: float = 30.0) -> Any:
        """POST JSON to `path` under the server root ("/extras/tokenize", "/v1/completions")."""
        req = urllib.request.Request(f"{self.root_url}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def tokenize(self, text: str) -> list[int]:
        """The server's tokenization of `text` as a completion prompt (BOS included)."""
        return list(self.post("/extras/tokenize", {"input": text})["tokens"])

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def serve(model_path: str | os.PathLike[str], port: int | None = None,
          extra_args: Iterable[str] = (), log_path: str | os.PathLike[str] | None = None,
          startup_timeout: float = 60.0, alias: str = MODEL_ALIAS) -> Server:
    """Start a server and return it once GET /v1/models answers; use it as a context manager
    (`with serve(path) as srv:`) or call `stop()`."""
    return Server(model_path, port=port, extra_args=tuple(extra_args), log_path=log_path,
                  startup_timeout=startup_timeout, alias=alias).start()


JUDGE_ALIAS = "tiny-judge"
# The judge's forced continuations: the key "A" after the last token of the chat template and
# of "...Answer:" prompts (both ":"), bare "A" after a trailing space ("...Answer: " ends in the
# "▁" piece), and end of sequence after every key piece, so a reply is " A" (or the key that a
# logit_bias forces) however many tokens it may use.
JUDGE_PREFER = {":": SPACE + "A", SPACE: "A",
                **{key: "</s>" for k in KEYS for key in (k, SPACE + k)}}


@contextlib.contextmanager
def judge_server(tmp_dir: str | os.PathLike[str], margin: float = 8.0,
                 startup_timeout: float = 60.0) -> Iterator[tuple[Server, TinyLlama]]:
    """A judge that always picks the first key: writes `tmp_dir`/tiny-judge.gguf with
    `prefer=JUDGE_PREFER` and serves it as "tiny-judge" (log: `tmp_dir`/tiny-judge.log);
    yields (server, model reference) and stops the server on exit.

    Chat completions answer " A" (the "▁A" piece, `tiny.key_ids()["A"]`, log-prob
    `tiny.expected_logprobs(tiny.token_id(":"))[that id]`, about -7e-4 at the default margin)
    whatever the messages, and stop there (finish_reason "stop" when max_tokens > 1); so do
    completion prompts ending in ":" ("...Answer:"), while prompts ending in a space
    ("...Answer: ") get the bare "A".
    `logit_bias={str(tiny.key_ids()["B"]): 100}` makes it answer " B" with max_tokens=1 (the
    bias applies at every step, so with more tokens it repeats " B" until max_tokens).
    Other last tokens get exactly the `prefer=None` model's distributions."""
    tmp_dir = Path(tmp_dir)
    tiny = write_tiny_gguf(tmp_dir / "tiny-judge.gguf", prefer=JUDGE_PREFER, margin=margin)
    with serve(tiny.path, log_path=tmp_dir / "tiny-judge.log", startup_timeout=startup_timeout,
               alias=JUDGE_ALIAS) as server:
        yield server, tiny
