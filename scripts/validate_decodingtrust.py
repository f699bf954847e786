"""DecodingTrust's own fairness scoring against biasscope's adult-counterfactual audit, on
DecodingTrust's stored GPT-4 and GPT-3.5 answers (docs/validation.md, "Adult counterfactual").

DecodingTrust (AI-secure/DecodingTrust) stores the chat completions of gpt-4-0314 and
gpt-3.5-turbo-0301 for its zero-shot Adult prompts in
``data/fairness/generations/<model>_adult_0_200.jsonl``: a JSON list of [request messages,
response] pairs, in the order of ``adult_0_200_test_base_rate_0.0.jsonl`` (in
``data/fairness/fairness_data``; the script checks this prompt by prompt). Both sides score
those same answers:

- theirs: ``aggregate_current_scores`` of ``score_calculation_script.py`` (in
  ``src/dt/perspectives/fairness``), loaded from the checkout as it is, on the answers
  written in its output format (``zero_shot_br_0.0.json``: requests, responses, labels, as
  ``fairness_evaluation.main`` writes it). Their function scores only when every one of its
  11 settings' files exists; the other ten are written empty, which it skips as not
  evaluated (so no fairness score, and its averages are over the one setting);
- ours: ``biasscope audit --responses`` on the same answers as ``{item_id, response}`` lines of
  the original items (the sex-flipped twins have no answer: biasscope reports parity and odds
  on the originals, as DecodingTrust does).

Usage (a checkout of AI-secure/DecodingTrust at 161ae83 with ``data/fairness`` and
``src/dt/perspectives/fairness``; fairlearn installed)::

    PYTHONPATH=src python scripts/validate_decodingtrust.py --dt /path/to/DecodingTrust

Prints one table row per model and metric: DecodingTrust's value, biasscope's, the absolute
difference; exits non-zero when any differs by more than 1e-12.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import subprocess
import sys
import tempfile
from argparse import Namespace
from pathlib import Path
from typing import Any

import numpy as np

MODELS = ("gpt-4-0314", "gpt-3.5-turbo-0301")
TEST_FILE = "adult_0_200_test_base_rate_0.0.jsonl"
SETTING = "zero_shot_br_0.0.json"
# every output file their aggregate_current_scores expects before it scores anything
THEIR_SETTINGS = ("zero_shot_br_0.0.json", "zero_shot_br_0.5.json", "zero_shot_br_1.0.json",
                  "few_shot_tr_br_0.0.json", "few_shot_tr_br_0.5.json",
                  "few_shot_tr_br_1.0.json", "few_shot_16_fair_demon.json",
                  "few_shot_32_fair_demon.json", "crime_br_0.0.json", "crime_br_0.5.json",
                  "crime_br_1.0.json")
# their name -> (biasscope headline metric, field)
METRICS = {"demographic parity difference": ("demographic_parity_difference", "estimate"),
           "equalized odds difference": ("equalized_odds_difference", "estimate")}


def stored_answers(dt: Path, model: str) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    """The stored (requests, responses) of one model and the test file's rows, checked to be
    the same prompts in the same order."""
    pairs = json.loads((dt / "data/fairness/generations" / f"{model}_adult_0_200.jsonl")
                       .read_text())
    rows = [json.loads(line) for line in
            (dt / "data/fairness/fairness_data" / TEST_FILE).read_text().splitlines() if line]
    if len(pairs) != len(rows):
        raise SystemExit(f"{model}: {len(pairs)} stored answers for {len(rows)} prompts")
    for n, ((messages, _), row) in enumerate(zip(pairs, rows), 1):
        if messages[-1]["content"].split("\n", 1)[1] != row["input"]:
            raise SystemExit(f"{model}: stored answer {n} is not for line {n} of {TEST_FILE}")
    return [p[0] for p in pairs], [p[1] for p in pairs], rows


def theirs(dt: Path, work: Path, model: str) -> dict[str, Any]:
    """Their aggregate_current_scores on the stored answers; its final_scores.json entry."""
    requests, responses, rows = stored_answers(dt, model)
    out_dir = work / "dt-results" / model
    out_dir.mkdir(parents=True)
    for name in THEIR_SETTINGS:  # empty = not evaluated, which their code skips
        (out_dir / name).write_text(json.dumps({"requests": [], "responses": [], "labels": []}))
    (out_dir / SETTING).write_text(json.dumps({
        "requests": requests, "responses": responses, "labels": [r["label"] for r in rows],
        "scores": {}}))
    path = dt / "src/dt/perspectives/fairness/score_calculation_script.py"
    spec = importlib.util.spec_from_file_location("dt_fairness_scores", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    np.random.seed(0)  # their tie-break for answers with both a yes- and a no-word
    with contextlib.redirect_stdout(sys.stderr):  # their progress lines
        module.aggregate_current_scores(Namespace(
            fairness=Namespace(data_dir=str(dt / "data/fairness/fairness_data") + "/",
                               out_file=str(out_dir / "x.json")),
            model_config=Namespace(model=model)))
    scores: dict[str, Any] = json.loads((out_dir / "final_scores.json").read_text())[SETTING]
    return scores


def ours(dt: Path, work: Path, model: str) -> dict[str, Any]:
    """biasscope audit --responses on the same answers; the probe's headline."""
    _, responses, _ = stored_answers(dt, model)
    data = work / "data" / "decodingtrust"
    data.mkdir(parents=True, exist_ok=True)
    (data / TEST_FILE).write_bytes((dt / "data/fairness/fairness_data" / TEST_FILE).read_bytes())
    answers = work / f"{model}.jsonl"
    answers.write_text("".join(json.dumps({
        "item_id": f"adult-counterfactual:0.0:{n}:original",
        "response": r["choices"][0]["message"]["content"]}) + "\n"
        for n, r in enumerate(responses, 1)))
    out = work / "runs" / model
    subprocess.run([sys.executable, "-m", "biasscope", "audit", "--responses", str(answers),
                    "--probe", "adult-counterfactual", "--base-rate", "0.0", "--data-dir",
                    str(work / "data"), "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    summary = json.loads((out / "summary.json").read_text())
    return headline(summary)


def headline(summary: Any) -> dict[str, Any]:
    """The adult-counterfactual headline, wherever the summary nests it."""
    if isinstance(summary, dict):
        if "demographic_parity_difference" in summary and "accuracy_male" in summary:
            return summary
        for value in summary.values():
            if found := headline(value):
                return found
    if isinstance(summary, list):
        for value in summary:
            if found := headline(value):
                return found
    return {}


def compare(dt: Path, work: Path) -> float:
    worst, notes = 0.0, []
    print("| model | metric | DecodingTrust | biasscope | difference |")
    print("| --- | --- | --- | --- | --- |")
    for model in MODELS:
        a, b = theirs(dt, work, model), ours(dt, work, model)
        answered = 1 - b["refusal_rate"]["estimate"] - b["unparsed_rate"]["estimate"]
        male, female = b["accuracy_male"], b["accuracy_female"]
        n_male, n_female = male["n"], female["n"]
        accuracy = (male["estimate"] * n_male + female["estimate"] * n_female) / (n_male + n_female)
        pairs = [(name, a[name], b[key][field]) for name, (key, field) in METRICS.items()]
        pairs += [("accuracy", a["accuracy"], accuracy),
                  ("rejection rate", a["rejection rate"], 1 - answered)]
        for name, x, y in pairs:
            worst = max(worst, abs(x - y))
            print(f"| {model} | {name} | {x!r} | {y!r} | {abs(x - y):.1e} |")
        notes += [f"{model}: biasscope's {key} {b[key]['estimate']:.3f} (95% CI "
                  f"{b[key]['low']:.3f} to {b[key]['high']:.3f}, {b[key]['n']} prompts)"
                  for key, _ in METRICS.values()]
    print("\n".join(notes))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dt", type=Path, required=True, help="DecodingTrust checkout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        worst = compare(args.dt.resolve(), Path(tmp))
    print(f"largest difference: {worst:.1e}")
    return 0 if worst <= 1e-12 else 1


if __name__ == "__main__":
    sys.exit(main())
