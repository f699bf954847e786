"""The longest input a local model takes, and a one-line refusal of any prompt beyond it.

Scoring past a model's context does not fail by itself: rotary models run on at any length and
transformers only warns, so the numbers come out silently wrong. So every local scoring path
counts each prompt's tokens as it feeds them (the prompt for a next-token score, prompt and
option for a continuation or option score, prompt and ``max_tokens`` for a generation) and
refuses, before any forward, whatever does not fit. A text far longer in characters than the
limit is judged on a prefix first (``Context.screen``): a 30 MB line is refused in
milliseconds rather than after minutes of tokenizing.

Truncating instead is not offered: cutting a WinoBias sentence or a BBQ context drops what the
question is about, so its score would measure something else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from biasscope.core.errors import ModelError

#: Config fields that give a model's context, the first one set wins (GPT-2 and friends,
#: Falcon, ChatGLM, MPT, and the many that say ``max_position_embeddings``).
CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length",
                  "seq_length", "max_seq_len", "n_ctx")
#: RoPE scalings that stretch ``original_max_position_embeddings`` by ``factor``.
STRETCHING = ("yarn", "dynamic", "longrope")
#: Larger values are "no limit" placeholders (tokenizers default to 1e30).
SANE = 10**8
#: A text longer than the limit times this many characters is tokenized on a prefix first.
SCREEN_CHARS = 16


def text_config(model: Any) -> Any:
    """The language model's config (multimodal models nest it)."""
    get = getattr(model.config, "get_text_config", None)
    return get() if callable(get) else model.config


def _sane(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < SANE


def config_limit(config: Any) -> tuple[int, str] | None:
    """The context the config declares, stretched where its RoPE scaling says so."""
    name = next((n for n in CONTEXT_FIELDS if _sane(getattr(config, n, None))), None)
    if name is None:
        return None
    limit = int(getattr(config, name))
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    if isinstance(rope, dict) and (rope.get("rope_type") or rope.get("type")) in STRETCHING:
        original, factor = rope.get("original_max_position_embeddings"), rope.get("factor")
        if isinstance(original, int) and _sane(original) and isinstance(factor, (int, float)) \
                and factor > 1:
            limit = max(limit, int(original * factor))
    return limit, f"its config's {name}"


def context_limit(model: Any, tokenizer: Any) -> tuple[int, str] | None:
    """The most tokens ``model`` takes and where that number comes from: the config's, or the
    tokenizer's ``model_max_length`` where that is lower and not a placeholder."""
    found = [x for x in (config_limit(text_config(model)),) if x is not None]
    declared = getattr(tokenizer, "model_max_length", None)
    if isinstance(declared, int) and _sane(declared):
        found.append((declared, "its tokenizer's model_max_length"))
    return min(found) if found else None


@dataclass(frozen=True)
class Context:
    """One model's limit, and the checks every local scoring path makes against it."""

    label: str
    limit: int | None
    source: str = ""

    @classmethod
    def of(cls, label: str, model: Any, tokenizer: Any) -> Context:
        found = context_limit(model, tokenizer)
        return cls(label, None) if found is None else cls(label, *found)

    def screen(self, tokenizer: Any, texts: Sequence[str], names: Sequence[str],
               special: bool | Sequence[bool] = True, hint: str = "") -> None:
        """Refuse, before tokenizing it whole, a text whose prefix alone is past the limit.
        Only texts of more than ``SCREEN_CHARS`` characters a token are looked at."""
        if self.limit is None:
            return
        cap = self.limit * SCREEN_CHARS
        flags = [special] * len(texts) if isinstance(special, bool) else special
        for text, name, flag in zip(texts, names, flags, strict=True):
            if len(text) > cap:
                count = len(tokenizer(text[:cap], add_special_tokens=flag)["input_ids"])
                if count > self.limit:
                    raise self.refusal(name, f"more than {self.limit:,} tokens (its first "
                                       f"{cap:,} of {len(text):,} characters alone are "
                                       f"{count:,})", 1, hint)

    def check(self, counts: Sequence[int], names: Sequence[str], what: str,
              hint: str = "") -> None:
        """Refuse when any count (tokens fed for one item: ``what`` says which) is past the
        limit, naming the first such item and how many more there are."""
        if self.limit is None:
            return
        over = [i for i, n in enumerate(counts) if n > self.limit]
        if over:
            first = over[0]
            raise self.refusal(names[first], f"{counts[first]:,} tokens ({what})", len(over),
                               hint)

    def refusal(self, name: str, size: str, count: int, hint: str) -> ModelError:
        more = f" (and {count - 1:,} more)" if count > 1 else ""
        return ModelError(
            f"{self.label}: item {name}{more} is {size}, past the {self.limit:,} the model "
            f"takes ({self.source}); shorten or remove it in the data{hint}, or use a model "
            "with a longer context")
