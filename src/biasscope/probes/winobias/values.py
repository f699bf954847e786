"""WinoBias records as per-record and per-prompt values: what the dynamics analysis, its
breakdowns, the intervention and ``biasscope compare`` read from them.

Seeds (and wordings) are repeated measurements of one prompt, so values are averaged over them
per prompt before any test (`biasscope.core.stats`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from biasscope.core.columns import categorical
from biasscope.core.stats import Array
from biasscope.probes.next_token import OptionScores, correct, record_jsd_parts

# A wording (``@w3``, `biasscope.probes.wordings`) goes with the seed: both are repeated
# measurements of one prompt, so tests over prompts do not count a prompt once per wording.
_SEED_SUFFIX = re.compile(r"(?:@[A-Za-z0-9][A-Za-z0-9_.-]*)?:seed\d+$")


@functools.lru_cache(maxsize=1 << 17)
def _pair_of(sentence_id: str) -> str | None:
    """The pair a sentence id names: what follows its first ``-`` (None without one).
    Remembered: every seed and checkpoint asks again."""
    parts = sentence_id.split("-", 1)
    return parts[1] if len(parts) > 1 else None


def prompt_pair(prompt: str) -> str | None:
    """The pro/anti pair of a `prompt_ids` id, its kind kept: ``winobias-gender:pro-dev-004:
    referenced`` and ``…:anti-dev-004:referenced`` are ``winobias-gender:dev-004:referenced``,
    one pronoun apart (one male prompt, one female). None for an id of another shape."""
    head, _, rest = prompt.partition(":")
    sentence, _, kind = rest.partition(":")
    pair = _pair_of(sentence) if kind else None
    return None if pair is None else f"{head}:{pair}:{kind}"


def pair_rows(prompts: npt.NDArray[Any], label: npt.NDArray[Any], asked: npt.NDArray[np.bool_],
              groups: tuple[str, str]) -> tuple[list[int], list[int]] | None:
    """Per complete pair (`prompt_pair`: one asked prompt of each of ``groups``), the row of
    its ``groups[0]`` prompt and of its ``groups[1]`` prompt. Prompts of an incomplete pair
    are left out: in the pinned WinoBias test split, pairs test-382 and test-384 answer
    "male" under both pronouns, and required of every prompt, pairing fell back to prompts
    apart on every full run. None where an asked prompt is of no pair (not WinoBias ids), or
    fewer than `PAIRED_SHARE` of the asked prompts are in complete pairs."""
    found: dict[str, dict[int, int]] = {}
    broken: set[str] = set()
    considered = np.flatnonzero(asked & np.isin(label, groups)).tolist()
    for row in considered:
        pair = prompt_pair(str(prompts[row]))
        if pair is None:
            return None
        side = groups.index(label[row])
        if side in found.setdefault(pair, {}):
            broken.add(pair)
        found[pair][side] = row
    complete = sorted(k for k, sides in found.items() if len(sides) == 2 and k not in broken)
    if not complete or 2 * len(complete) < PAIRED_SHARE * len(considered):
        return None
    return [found[k][0] for k in complete], [found[k][1] for k in complete]


#: The share of a checkpoint's prompts that must be in complete pairs for `pair_rows` to
#: pair them (the rest left out); below it, prompts are taken apart as before pairing.
PAIRED_SHARE = 0.9


def paired_values(values: pd.DataFrame, groups: tuple[str, str]
                  ) -> tuple[Array, Array] | None:
    """Per pair, its ``groups[0]`` prompt's value and its ``groups[1]`` prompt's (in pair
    order), from one checkpoint's `prompt_values` (prompt, answer_label, value): the complete
    pairs of `pair_rows` (None where it pairs none). A run draws pairs, and a pair's two
    prompts move against each other, so tests and intervals that take them apart are
    anti-conservative (docs/explanation/statistics.md, "Per checkpoint")."""
    value = values["value"].to_numpy(dtype=np.float64)
    rows = pair_rows(values["prompt"].to_numpy(), values["answer_label"].to_numpy(),
                     np.isfinite(value), groups)
    return None if rows is None else (value[rows[0]], value[rows[1]])


def prompt_ids(records: pd.DataFrame) -> pd.Series:
    """The prompt an item id belongs to: the id without its ``:seed<N>`` suffix (and the
    ``@<wording>`` before it, with several wordings). Vectorised: on the records' Arrow
    strings one replacement in C++, a few times faster than a Python regex call per id."""
    ids = records["item_id"].astype(str)
    prompts: pd.Series = ids.str.replace(_SEED_SUFFIX.pattern, "", regex=True)
    return prompts


def record_values(records: pd.DataFrame, value: str = "jsdp_correct") -> Array:
    """Per record: ``jsdp_correct`` (JSD-P part of the correct option), ``target_rank``,
    ``correct`` (1.0 where the correct option is the most probable, else 0.0), or
    ``jsdp:<option>`` (the JSD-P part of a named option, e.g. ``jsdp:male``)."""
    if value == "target_rank":
        return np.asarray(records["target_rank"].to_numpy(dtype=np.float64))
    if not (value in ("jsdp_correct", "correct") or value.startswith("jsdp:")):
        raise ValueError(f"unknown value {value!r}: jsdp_correct, target_rank, correct or "
                         "jsdp:<option>")
    if records.empty:
        return np.zeros(0)
    if value == "correct":
        return correct(records).astype(np.float64)
    parts = record_jsd_parts(records)
    if value == "jsdp_correct":
        return np.asarray(parts[np.arange(len(records)), records["answer"].to_numpy(dtype=int)])
    options = list(records["options"].iloc[0])
    return np.asarray(parts[:, options.index(value.removeprefix("jsdp:"))])


def prompt_values(records: pd.DataFrame, value: str = "jsdp_correct") -> pd.DataFrame:
    """One row per (model, step, prompt, answer_label): ``value`` averaged over seeds, and
    ``seeds``, how many records were averaged. Vectorised over all checkpoints at once."""
    return seed_means(pd.DataFrame({
        "model": records["model"].array, "step": records["step"].array,  # keeps Int64 steps
        "prompt": prompt_ids(records).to_numpy(),
        "answer_label": records["answer_label"].to_numpy(),
        "value": record_values(records, value)}))


def seed_means(frame: pd.DataFrame) -> pd.DataFrame:
    """`prompt_values` from per-record values (columns model, step, prompt, answer_label,
    value), so that callers holding only those, one checkpoint at a time, get the same."""
    keys = ["model", "step", "prompt", "answer_label"]
    grouped: pd.DataFrame = frame.groupby(keys, dropna=False, sort=True)["value"].agg(
        value="mean", seeds="size").reset_index()
    return grouped


#: Seed-averaged per-prompt values (`prompt_means`).
MEANS = ("correct", "jsdp_correct", "lp_diff", "p_diff")


def _pairs(sentence_ids: pd.Series) -> pd.Categorical:
    """`_pair_of` each sentence id, as a categorical: found once per distinct sentence (a
    unit holds each twice, referenced and not)."""
    sentences = categorical(sentence_ids.astype(str))
    pairs = pd.Categorical(np.array([_pair_of(s) for s in sentences.categories], dtype=object))
    codes = np.append(pairs.codes, -1)[sentences.codes]  # a code -1 stays -1
    return pd.Categorical.from_codes(codes, pairs.categories)


def breakdown_values(records: pd.DataFrame, scores: OptionScores | None = None,
                     prompts: pd.Categorical | None = None) -> pd.DataFrame:
    """Per record of one probe's records: what the breakdowns use, in narrow columns.
    ``scores`` and ``prompts``: the records' `OptionScores` and `categorical` `prompt_ids`,
    if already built."""
    n = len(records)
    if n == 0:
        empty: pd.DataFrame = pd.DataFrame({c: [] for c in (
            "prompt", "pair", "split", "kind", "occupation", "stereotype", *MEANS)})
        return empty
    options = list(records["options"].iloc[0])
    scores = OptionScores.of(records) if scores is None else scores
    lp, probs, answers = scores.logprobs, scores.probs, scores.answers
    male, female = options.index("male"), options.index("female")
    frame: pd.DataFrame = pd.DataFrame({
        "prompt": categorical(prompt_ids(records)) if prompts is None else prompts,
        "pair": _pairs(records["sentence_id"]),
        **{c: categorical(records[c]) for c in ("split", "kind", "occupation", "stereotype")},
        "correct": scores.correct.astype(np.float64),
        "jsdp_correct": scores.parts[np.arange(n), answers],
        "lp_diff": lp[:, male] - lp[:, female],
        "p_diff": probs[:, male] - probs[:, female]})
    if "template" in records:  # several wordings: what `dynamics.wordings` needs beside
        frame["template"] = categorical(records["template"].astype(str))
        frame["answer_label"] = categorical(records["answer_label"])
    return frame


def prompt_means(values: pd.DataFrame) -> pd.DataFrame:
    """One row per prompt: its labels and the seed mean of each of `MEANS`."""
    labels = ["prompt", "pair", "split", "kind", "occupation", "stereotype"]
    grouped = values.groupby(labels, observed=True, sort=True)
    out: pd.DataFrame = grouped[list(MEANS)].mean().reset_index()
    for column in labels:
        out[column] = out[column].astype(str)
    return out
