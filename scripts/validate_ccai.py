"""The reward-sensitivity source's CCAI principle selection against biasscope's ``ccai:topK``,
on the real pinned ``clean_comments.csv`` (docs/validation.md, "CCAI principles").

The source (DouwMarx/constitutional_sensitivities_of_preference_models) picked its principles
with ``get_collective_constitutional_ai_principles(n, group)`` in
``constitutional_perturbations.py`` (last present at commit 208d8e1; the file's other imports
need LangChain and an OpenAI key, so the script compiles that one function from the checkout,
unchanged, and runs it with pandas). It sorts ``clean_comments.csv`` by the group's consensus,
descending, and keeps the first ``n`` comment bodies; the study used n = 10 per group.
biasscope's ``load_ccai`` does the same with ties broken by the lower comment id.

Usage (a checkout of the source at 208d8e1, at least ``constitutional_perturbations.py``)::

    PYTHONPATH=src python scripts/validate_ccai.py --source /path/to/checkout \\
        --data-dir /path/to/data   # holds ccai/clean_comments.csv (data-sources.md)

Prints, for each K and group, whether the two selections hold the same comments and in the
same order; exits non-zero when the K = 10 selections differ.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from biasscope.sensitivity.principles import load_ccai

FUNCTION = "get_collective_constitutional_ai_principles"
STUDY_K = 10


def source_function(checkout: Path) -> Callable[..., list[str]]:
    """The source's selection function, compiled alone from its file."""
    path = checkout / "constitutional_perturbations.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[ast.stmt] = [n for n in tree.body
                             if isinstance(n, ast.FunctionDef) and n.name == FUNCTION]
    if not found:
        raise SystemExit(f"{path}: no function {FUNCTION}")
    namespace: dict[str, Any] = {"pd": pd}
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)
    function: Callable[..., list[str]] = namespace[FUNCTION]
    return function


def selections(checkout: Path, data_dir: Path, k: int) -> list[tuple[int, list[str], list[str]]]:
    """Per group: the source's top-k comment bodies and biasscope's, both stripped."""
    select = source_function(checkout)
    ours = load_ccai(data_dir, top_k=k)
    text = {p.id: p.text for p in ours.principles}
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "data").mkdir()
        shutil.copy(data_dir / "ccai" / "clean_comments.csv",
                    Path(tmp, "data", "ccai_clean_comments.csv"))
        here = Path.cwd()
        os.chdir(tmp)  # the source reads data/ccai_clean_comments.csv from the working dir
        try:
            for group in (0, 1):
                theirs = [t.strip() for t in select(k, group=group)]
                mine = [text[pid] for pid in ours.top[f"group_{group}"]]
                out.append((group, theirs, mine))
        finally:
            os.chdir(here)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="the source's checkout")
    parser.add_argument("--data-dir", type=Path, required=True, help="holds ccai/")
    parser.add_argument("--max-k", type=int, default=20)
    args = parser.parse_args()
    study_ok, study = True, []
    table = pd.read_csv(args.data_dir / "ccai" / "clean_comments.csv")
    table["comment-body"] = table["comment-body"].str.strip()
    print("| K | group | same comments | same order | same consensus, rank by rank |")
    print("| --- | --- | --- | --- | --- |")
    for k in range(1, args.max_k + 1):
        for group, theirs, mine in selections(args.source, args.data_dir, k):
            same_set, same_order = set(theirs) == set(mine), theirs == mine
            score = table.set_index("comment-body")[f"group_{group}_consensus"]
            ties_only = [score[t] for t in theirs] == [score[m] for m in mine]
            print(f"| {k} | {group} | {same_set} | {same_order} | {ties_only} |")
            if k == STUDY_K:
                study_ok &= same_set
                study.append((group, theirs, mine))
    print(f"\nK = {STUDY_K} (the study's):")
    for group, theirs, mine in study:
        for rank, (a, b) in enumerate(zip(theirs, mine), 1):
            print(f"group {group} #{rank}: {a!r}" + ("" if a == b else f" | biasscope: {b!r}"))
    both = set(study[0][1]) & set(study[1][1])
    print(f"shared by both groups (source): {sorted(both)}; union: "
          f"{len(set(study[0][1]) | set(study[1][1]))} principles")
    ours = load_ccai(args.data_dir, top_k=STUDY_K)
    text = {p.id: p.text for p in ours.principles}
    print(f"shared by both groups (biasscope): {sorted(text[i] for i in ours.overlap)}; union: "
          f"{len(ours.union)} principles")
    return 0 if study_ok else 1


if __name__ == "__main__":
    sys.exit(main())
