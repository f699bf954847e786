"""The reward-sensitivity source's own post-processing against biasscope's sensitivity
indices (docs/validation.md, "Reward-model sensitivity").

The source (DouwMarx/constitutional_sensitivities_of_preference_models, commit d13f989) turns
two reward files, ``data/augmented_dataset_with_rewards_ccai_group_{0,1}.csv`` (one row per
reward model, principle and hh-rlhf query-response pair; rewards are the hosted API's
probabilities), into sensitivity indices with ``src/postproc/make_processed_datasets_for_
sensitivity_plots.py`` (run here as a script, unchanged) and normalises them for its figures
in ``src/postproc/make_plots.py`` (its two figure functions are called unchanged, with
plotly's ``show`` and ``write_html`` replaced by a recorder of the bars).

Its stored reward files are not in the repository (``.gitignore`` leaves ``data/`` out); they
were published on the Hugging Face hub as ``douwmarx/hh-rlhf-constitutional-sensitivities-of-
pms`` (splits ``ccai_group_0``, ``ccai_group_1``). Where the hub cannot be reached, this
script writes **synthetic** reward files in the same format: the study's 19 CCAI principles
(top 10 of each group, one shared), two reward models, ``--prompts`` pairs, seeded rewards
with some unchanged (zero effects), a few failed (NaN) perturbations and a separate run of
the shared principle in each group's file, as the study had.

biasscope's side: ``sensitivity_indices`` and ``group_comparison`` on the same rewards (the
log of the probabilities, what ``--transform logprob`` reads; the shared principle's rows from
group 0's file, the row the source keeps), with ``conventions="source"`` and with the defaults.

Usage (``--python``: an environment with pandas, scipy, datasets and plotly for their code)::

    PYTHONPATH=src python scripts/validate_reward_sensitivity.py --source /path/to/checkout \\
        --python /path/to/venv/bin/python --data-dir /path/to/data   # holds ccai/

Prints the largest difference per index under each convention; exits non-zero when the
source conventions differ from the source's code by more than 1e-9 anywhere but the Wilcoxon
p-value of principles with zero effects (SciPy's approximation there against biasscope's exact
p on the nonzero effects, by design).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biasscope.sensitivity.indices import group_comparison, sensitivity_indices
from biasscope.sensitivity.principles import load_ccai

MODELS = ("Ray2333/GRM-Llama3.2-3B-rewardmodel-ft", "Ray2333/GRM-gemma2-2B-rewardmodel-ft")
# their column -> ours
INDICES = {"mean_effect": "mean_effect", "median_effect": "median_effect",
           "std_effect": "std_effect", "mean_percentile_effect": "mean_percentile_effect",
           "median_percentile_effect": "median_percentile_effect",
           "std_percentile_effect": "std_percentile_effect",
           "wilcoxon_statistic": "wilcoxon_statistic", "wilcoxon_p_value": "p_greater"}
PLOTTED = ("median_effect", "mean_effect", "median_percentile_effect", "wilcoxon_statistic")
TOLERANCE = 1e-9
# the columns the source drops duplicates by (its "groupless" table)
KEYS = ["query", "initial_response", "label", "model", "constitutional_principle",
        "critique_request", "revision_request"]
# SciPy's p with zero effects among the pairs: the source's is the normal approximation SciPy
# falls back to, biasscope's the exact distribution of the nonzero effects (by design)
BY_DESIGN = "wilcoxon_p_value, some zero effects"

# Runs in --python: their figure functions, recording each figure's bars instead of drawing.
DRIVER = """
import json, sys
import pandas as pd
import plotly.graph_objects as go
figures = []
go.Figure.write_html = lambda self, *a, **k: None
go.Figure.show = lambda self, *a, **k: figures.append(
    [{"name": t.name, "x": list(map(str, t.x)), "y": [float(v) for v in t.y],
      "hover": list(t.hovertext) if t.hovertext is not None else None} for t in self.data])
sys.path.insert(0, sys.argv[1])
from src.postproc import make_plots as mp
models = pd.read_csv("data/sensitivity_data_for_different_models.csv", index_col=0)
groups = pd.read_csv("data/sensitivity_data_for_different_groups.csv", index_col=0)
wrapped = dict(zip(models["principle_wrapped"], models["principle"]))
out = {}
for metric in json.loads(sys.argv[2]):
    mp.make_sensitivity_plot_comparing_models(models, metric)
    for model in models["model"].unique():
        mp.make_sensitivity_plot_comparing_groups(groups, metric, model=model)
    bars, *by_group = figures[-1 - len(models["model"].unique()):]
    out[metric] = {"models": {t["name"]: dict(zip([wrapped[x] for x in t["x"]], t["y"]))
                              for t in bars},
                   "groups": {m: [list(zip(t["x"], t["y"])) for t in f][0]
                              for m, f in zip(models["model"].unique(), by_group)}}
json.dump(out, open("bars.json", "w"))
"""


def synthetic(principles: dict[str, list[str]], n_prompts: int, seed: int, unchanged: float
              ) -> dict[str, pd.DataFrame]:
    """Reward files in the source's format, one per CCAI group (see the module doc)."""
    rng = np.random.default_rng(seed)
    queries = [f"synthetic query {i}" for i in range(n_prompts)]
    responses = [f"synthetic response {i}" for i in range(n_prompts)]
    original = {m: rng.normal(-4, 2, n_prompts) for m in MODELS}  # logits, per model
    files = {}
    for group, texts in principles.items():
        rows = []
        for k, text in enumerate(texts):
            shift = rng.normal(0.5, 1.0)
            for m in MODELS:
                perturbed = original[m] + shift + rng.normal(0, 1.0, n_prompts)
                same = rng.random(n_prompts) < unchanged  # revisions that left the reward as it was
                perturbed[same] = original[m][same]
                for i in range(n_prompts):
                    rows.append({
                        "query": queries[i], "initial_response": responses[i], "label": "rejected",
                        "model": m, "constitutional_principle": text,
                        "critique_request": f"critique by: {text}",
                        "revision_request": f"revise by: {text}",
                        "critique": "c", "revised_response": f"revised {i} by {k}",
                        "original_reward": 1 / (1 + np.exp(-original[m][i])),
                        "perturbed_reward": 1 / (1 + np.exp(-perturbed[i])),
                        "ccai_group": int(group[-1])})
        frame = pd.DataFrame(rows)
        shared = frame["constitutional_principle"].isin(set.intersection(
            *(set(t) for t in principles.values())))
        failed = rng.choice(frame.index[~shared], size=3, replace=False)  # API failures
        frame.loc[failed, "perturbed_reward"] = np.nan
        files[group] = frame
    return files


def run_theirs(source: Path, python: str, files: dict[str, pd.DataFrame], root: Path
               ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Their indices (models CSV) and their figures' bars."""
    (root / "data").mkdir(parents=True)
    (root / "src/postproc").mkdir(parents=True)
    for group, frame in files.items():
        frame.to_csv(root / "data" / f"augmented_dataset_with_rewards_ccai_{group}.csv")
    script = source / "src/postproc/make_processed_datasets_for_sensitivity_plots.py"
    subprocess.run([python, str(script)], cwd=root / "src/postproc", check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (root / "driver.py").write_text(DRIVER)
    subprocess.run([python, "driver.py", str(source), json.dumps(PLOTTED)], cwd=root,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    models = pd.read_csv(root / "data/sensitivity_data_for_different_models.csv", index_col=0)
    return models, json.loads((root / "bars.json").read_text())


def ours_frame(files: dict[str, pd.DataFrame], ids: dict[str, str]) -> pd.DataFrame:
    """biasscope's rewards frame: log rewards, one row per (model, principle, pair), the rows
    the source keeps (failed rows dropped, the shared principle's from group 0's file)."""
    both = pd.concat([files["group_0"].dropna(), files["group_1"].dropna()])
    both = both.drop_duplicates(KEYS)
    pair = both["query"] + "\x1f" + both["initial_response"] + "\x1f" + both["label"]
    frame: pd.DataFrame = pd.DataFrame({"model": both["model"],
                                         "principle": both["constitutional_principle"]
                                         .str.strip().map(ids),
                                         "prompt_id": pair,
                                         "original": np.log(both["original_reward"]),
                                         "perturbed": np.log(both["perturbed_reward"])})
    if frame["principle"].isna().any():
        raise SystemExit("a principle of the reward files is not among CCAI's top 10")
    return frame


def read_rewards(folder: Path) -> dict[str, pd.DataFrame]:
    """The source's stored reward files, where they were saved from the hub."""
    return {g: pd.read_csv(folder / f"augmented_dataset_with_rewards_ccai_{g}.csv", index_col=0)
            for g in ("group_0", "group_1")}


def differences(theirs: pd.DataFrame, bars: dict[str, Any], frame: pd.DataFrame,
                ids: dict[str, str], groups: dict[str, str], conventions: str
                ) -> dict[str, float]:
    """Largest |theirs - ours| per index, normalised bar and group sum, under ``conventions``."""
    ours = sensitivity_indices(frame, n_resamples=200, conventions=conventions)
    ours = ours.set_index(["model", "principle"])
    theirs = theirs.assign(principle=theirs["principle"].map(ids)).set_index(["model", "principle"])
    gap = {name: np.abs(theirs[name] - ours.loc[theirs.index, mine].to_numpy())
           for name, mine in INDICES.items()}
    out = {name: float(np.nanmax(g)) for name, g in gap.items()}
    zeros = (frame["perturbed"] == frame["original"]).groupby(
        [frame["model"], frame["principle"]]).any().reindex(theirs.index).to_numpy()
    for label, where in ((BY_DESIGN, zeros), ("wilcoxon_p_value, no zero effects", ~zeros)):
        out[label] = float(np.nanmax(gap["wilcoxon_p_value"][where])) if where.any() else 0.0
    del out["wilcoxon_p_value"]
    for metric, figure in bars.items():
        out[f"{metric}, sum-normalised (model figure)"] = max(
            abs(y - ours.loc[(model, ids[text]), f"{metric}_normalised"])
            for model, values in figure["models"].items() for text, y in values.items())
        compared = group_comparison(ours.reset_index(), groups, f"{metric}_normalised",
                                    conventions=conventions)["models"].set_index("model")
        out[f"{metric}, group sums (group figure)"] = max(
            abs(sum(y for g, y in segments if g == str(k))
                - compared.loc[model, f"sum_group_{k}"])
            for model, segments in figure["groups"].items() for k in (0, 1))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="the source's checkout")
    parser.add_argument("--python", required=True, help="python with their dependencies")
    parser.add_argument("--data-dir", type=Path, required=True, help="holds ccai/")
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rewards", type=Path, help="a folder with the source's stored "
                        "augmented_dataset_with_rewards_ccai_group_{0,1}.csv (from the hub): "
                        "use them instead of synthetic rewards")
    parser.add_argument("--unchanged", type=float, default=0.1,
                        help="share of revisions that leave the reward as it was (zero effects)")
    args = parser.parse_args()
    constitution = load_ccai(args.data_dir, top_k=10)
    texts = {p.id: p.text for p in constitution.principles}
    ids = {text: pid for pid, text in texts.items()}
    principles = {g: [texts[i] for i in top] for g, top in constitution.top.items()}
    groups = {p.id: p.group for p in constitution.principles if p.group}
    files = (read_rewards(args.rewards) if args.rewards else
             synthetic(principles, args.prompts, args.seed, args.unchanged))
    with tempfile.TemporaryDirectory() as tmp:
        theirs, bars = run_theirs(args.source.resolve(), args.python, files, Path(tmp))
    frame = ours_frame(files, ids)
    found = {c: differences(theirs, bars, frame, ids, groups, c) for c in ("source", "biasscope")}
    print(f"the source's stored rewards in {args.rewards}: {len(frame)} rows" if args.rewards
          else f"synthetic rewards: {len(MODELS)} models x {len(texts)} principles x "
          f"{args.prompts} prompts, seed {args.seed}, {args.unchanged:.0%} unchanged")
    print("| index | --conventions source | biasscope defaults |")
    print("| --- | --- | --- |")
    for name in found["source"]:
        print(f"| {name} | {found['source'][name]:.1e} | {found['biasscope'][name]:.1e} |")
    worst = max(v for k, v in found["source"].items() if k != BY_DESIGN)
    print(f"largest difference under --conventions source: {worst:.1e} (besides {BY_DESIGN})")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
