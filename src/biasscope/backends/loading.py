"""Loading a model directory: every way its files can be broken is one line, not a traceback.

``from_pretrained`` fails in several voices: ``SafetensorError`` for a truncated or garbage
``.safetensors`` file, ``RuntimeError`` when the weights' shapes do not fit ``config.json``
(after logging a many-line table of the mismatched keys). ``loading`` turns each into a
``ModelError`` naming the checkpoint; the table is held back while the load runs and only
shown if the load succeeds (it then tells of weights initialised afresh).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from biasscope.backends.remote_code import refuse_remote_code
from biasscope.core.errors import ModelError

#: Weight files that are pickles: loading one can run any code it carries.
PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")
#: Files a tokenizer is loaded from: equal contents, equal tokenizer.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt",
                   "tokenizer.model", "spiece.model", "sentencepiece.bpe.model",
                   "chat_template.jinja")
#: What a folder a model was saved to holds: any of these and the loader says what is wrong.
MODEL_FILES = ("config.json", "*.safetensors", "*.safetensors.index.json", "*.gguf",
               *PICKLE_WEIGHTS, *TOKENIZER_FILES)


def require_model_dir(path: Path, what: str = "checkpoint") -> None:
    """Refuse a local folder that holds no model at all (an empty folder, a typo'd or
    not-yet-copied one): the loaders would blame a config or say its tokenizer files "look
    damaged", though there is nothing to damage."""
    try:
        if any(next(path.glob(pattern), None) is not None for pattern in MODEL_FILES):
            return
        names = [(p.name, p.is_dir()) for p in path.iterdir()]
    except OSError:  # unreadable: the loader's own error says so
        return
    folders = sorted(name for name, is_dir in names if is_dir)
    inside = (f"; it holds the folders {', '.join(folders[:3])}{', ...' if folders[3:] else ''}"
              if folders else "" if names else "; the folder is empty")
    raise ModelError(f"{what} {path} holds no model (no config.json, weights or tokenizer "
                     f"files{inside}): point at the folder the model was saved to "
                     "(save_pretrained writes them), or give a hub id")


def _errors() -> tuple[type[Exception], ...]:
    """What ``loading`` turns into one line; the callers' own ``except`` already says what a
    missing file or a hub repo without safetensors (``OSError``, ``ValueError``) means."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # safetensors comes with transformers; without it nothing loads anyway
        return (RuntimeError,)
    return (RuntimeError, SafetensorError)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _why(exc: BaseException) -> str:
    """What is wrong, said for the user rather than for the library's developers."""
    text = str(exc)
    if type(exc).__name__ == "SafetensorError":
        return (f"a .safetensors file is damaged ({first_line(exc)}): it may be truncated or "
                "not a safetensors file; copy or download it again")
    if "ignore_mismatched_sizes" in text or "size mismatch" in text:
        return ("the weights' shapes do not fit its config.json (size mismatch): the config "
                "belongs to another model size; put the matching config.json beside the weights")
    return first_line(exc)


@contextmanager
def loading(what: str) -> Iterator[None]:
    """Around one ``from_pretrained`` call of ``what`` (e.g. "checkpoint step1000")."""
    logger = logging.getLogger("transformers")
    held: list[logging.LogRecord] = []

    class Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            held.append(record)

    handlers, hold = list(logger.handlers), Hold()
    for handler in handlers:
        logger.removeHandler(handler)
    logger.addHandler(hold)
    loaded = False
    try:
        yield
        loaded = True
    except _errors() as exc:
        raise ModelError(f"cannot load {what}: {_why(exc)}") from None
    finally:
        logger.removeHandler(hold)
        for handler in handlers:
            logger.addHandler(handler)
        for record in held if loaded else ():  # a failure's table would bury its one line
            logger.handle(record)


__all__ = ["MODEL_FILES", "PICKLE_WEIGHTS", "TOKENIZER_FILES", "first_line", "loading",
           "refuse_remote_code", "require_model_dir"]
