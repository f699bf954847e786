"""The BBQ authors' own R analysis against biasscope's BBQ scores, on UnifiedQA's stored answers
(docs/validation.md, "BBQ").

nyu-mll/BBQ stores UnifiedQA-T5-11B's answers in ``results/UnifiedQA/preds_<Category>.jsonl``:
each line is the data file's line plus the model's answer text under three prompt formats
(``unifiedqa-t5-11b_pred_race``, the paper's main one, ``_arc`` and ``_qonly``). Both sides score
the same answers:

- theirs: the authors' two R scripts, run with ``Rscript`` in a scratch copy of the repository's
  layout (``data/`` from ``--data-dir``, ``templates/`` and ``results/UnifiedQA/`` from the
  checkout). ``BBQ_results_metadata.R`` builds ``additional_metadata.csv`` (``target_loc``,
  ``label_type``) from the data and the templates, as its authors did; then
  ``BBQ_calculate_bias_score.R`` scores the stored answers with it. Their text is used as it
  is but for the substitutions in ``TO_RUN`` (each must occur as written, or the script stops):
  the RStudio-only ``setwd`` line, the RoBERTa/DeBERTa results (``df_bbq.csv``, not in the
  snapshot: the script merges their columns in by example and category, an inner join that
  drops nothing if, as assumed here, that file answers every item) and, in the metadata
  script, the section for the two intersectional categories, which have no data here. Lines
  appended to the score script write its tables as JSON at 17 significant digits;
- "like for like": the same, also without the rules biasscope leaves out by design
  (``LIKE_FOR_LIKE``: UnifiedQA's ``pantsu`` and ``o'brien`` fixes, the fallback that reads an
  unmatched answer by the first two words of an answer's ``answer_info`` text, the "(names)"
  split by ``label_type``);
- ours: ``biasscope audit --responses`` on the same answers as ``{item_id, response}`` lines.

Also checked: each stored line holds the same item as the data file (so both sides read the
same questions; their score script reads ``answer_info`` from the stored lines, which predate
a fix of it in the data: only whether an answer is the unknown one is used, and that must
agree), and their ``target_loc`` against biasscope's target for every item.

Usage (a checkout of nyu-mll/BBQ at bea11bd, or its bare git directory; R with the tidyverse
and jsonlite, e.g. Debian's ``r-base-core r-cran-tidyverse r-cran-jsonlite``)::

    PYTHONPATH=src python scripts/validate_bbq.py --bbq /path/to/BBQ --data-dir DIR

``DIR`` holds ``bbq/<Category>.jsonl`` (data-sources.md). Prints one row per category, context
condition and measure: theirs as published (their ``acc_bias`` / 100), theirs like for like,
biasscope's, the absolute differences; exits non-zero when biasscope differs from the
like-for-like run by more than 1e-12 (the published run differs from that one only by the
rules left out) or when any item's target differs. About 30 s.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from biasscope.probes import bbq

TOLERANCE = 1e-12
METADATA_R, SCORE_R = "BBQ_results_metadata.R", "BBQ_calculate_bias_score.R"
MODEL = {"race": "format_race", "arc": "format_arc"}  # their names of the answer columns
SETWD = "this.dir <- dirname(rstudioapi::getSourceEditorContext()$path)\nsetwd(this.dir)\n"
# (script, first text, last text or "" for the first alone, replacement, why)
TO_RUN = [
    (METADATA_R, SETWD, "", "", "RStudio only; Rscript runs in analysis_scripts/"),
    (SCORE_R, SETWD, "", "", "RStudio only; Rscript runs in analysis_scripts/"),
    (SCORE_R, "# read in roberta/deberta model results\n",
     'dat = merge(dat_uqa,dat_berts, by=c("example_id","category"))\n', "dat = dat_uqa\n",
     "df_bbq.csv (RoBERTa/DeBERTa) is not in the snapshot; only its columns are merged in"),
    (SCORE_R, "  mutate(`deberta-v3-base-race` = case_when(",
     '`roberta-large-race` == "ans2" ~ tolower(ans2)))%>%\n', "",
     "formats the RoBERTa/DeBERTa columns, absent without df_bbq.csv"),
    (METADATA_R, "# for intersectional templates\n",
     "all_metadata = rbind(dat_ints,dat_base_selected)\n", "all_metadata = dat_base_selected\n",
     "Race_x_gender and Race_x_SES have no data here (str_detect stops on their empty tables)"),
]
LIKE_FOR_LIKE = [
    (SCORE_R, '  mutate(prediction = gsub("pantsu$","pantsuit",prediction))%>%\n', "", "",
     "pantsu: fixes one model's misspelling"),
    (SCORE_R, '  mutate(prediction = gsub("o\'brien","obrien",prediction))%>%\n', "", "",
     "o'brien: fixes one name's spelling"),
    (SCORE_R, "  # when pred_label is empty, find the right value to put in\n",
     'word(ans2_text, 1,2, sep=" "))) ~ 2))%>%\n', "",
     "fallback: an unmatched answer taken as the first whose answer_info text's first two "
     "words it contains"),
    (SCORE_R, '  mutate(category = ifelse(label_type=="name", paste0(category, " (names)"),'
     'category))%>%\n', "", "", "(names): biasscope does not split by label_type"),
]
# Their tables at full precision (jsonlite writes at most 15 significant digits).
EXPORT = """
full <- function(d) mutate(as.data.frame(d), across(where(is.double), ~ sprintf("%.17g", .x)))
jsonlite::write_json(list(bias = full(dat_bias), accuracy = full(dat_acc),
                          n = count(dat_with_metadata, category, model, context_condition)),
                     {out!r})
"""


class Checkout:
    """Files of nyu-mll/BBQ from a work tree or a bare git directory (its HEAD)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bare = (path / "HEAD").is_file() and (path / "objects").is_dir()

    def _git(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        where = ["--git-dir", str(self.path)] if self.bare else ["-C", str(self.path)]
        return subprocess.run(["git", *where, *args], capture_output=True)

    def commit(self) -> str:
        return self._git("rev-parse", "HEAD").stdout.decode().strip() or "unknown"

    def read(self, rel: str) -> bytes | None:
        """The file's bytes; None when absent or a Git LFS pointer (the large files)."""
        if self.bare:
            got = self._git("show", f"HEAD:{rel}")
            data = got.stdout if got.returncode == 0 else None
        else:
            data = (self.path / rel).read_bytes() if (self.path / rel).is_file() else None
        return None if data is None or data.startswith(b"version https://git-lfs") else data

    def names(self, folder: str) -> list[str]:
        if self.bare:
            out = self._git("ls-tree", "--name-only", f"HEAD:{folder}").stdout.decode()
            return sorted(n for n in out.splitlines() if n)
        return sorted(p.name for p in (self.path / folder).iterdir())


def substituted(text: str, script: str, changes: list[tuple[str, str, str, str, str]]) -> str:
    """``text`` with each change for ``script``: from its first text through its last (or the
    first alone) replaced; every first text must occur (the names split: twice, the same)."""
    for name, first, last, new, why in changes:
        if name != script:
            continue
        pattern = re.escape(first) + (r".*?" + re.escape(last) if last else "")
        text, count = re.subn(pattern, lambda _, n=new: n, text, flags=re.S)
        if count == 0:
            raise SystemExit(f"{script}: text to change not found ({why}): {first[:60]!r}")
    return text


def _unknown(row: dict[str, Any]) -> list[str]:
    return [k for k, (_, group) in row["answer_info"].items() if group == "unknown"]


def stored(checkout: Path, data_dir: Path) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The stored answers of every category with both a preds file and a data file, each line
    checked against the data file's line of the same example: the same fields but the answers,
    except ``answer_info``, which the data fixed after the answers were stored (nyu-mll/BBQ
    9eba1ba): there only the unknown answer must be the same (all their score script reads from
    it is whether the answer picked is unknown). Also the lines whose answer_info differs."""
    repo, out, older = Checkout(checkout), {}, []
    for category in bbq.CATEGORIES:
        raw, data = repo.read(f"results/UnifiedQA/preds_{category}.jsonl"), \
            data_dir / "bbq" / f"{category}.jsonl"
        if raw is None or not data.is_file():
            continue
        preds = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        items = {r["example_id"]: r for r in map(json.loads, data.read_text().splitlines())}
        for row in preds:
            item = items.get(row["example_id"])
            if item is None or any(row.get(k) != item[k] for k in item if k != "answer_info") \
                    or _unknown(row) != _unknown(item):
                raise SystemExit(f"preds_{category}.jsonl: example {row['example_id']} is not "
                                 f"the item of {data}")
            if row["answer_info"] != item["answer_info"]:
                older.append(f"{category}:{row['example_id']}")
        if len(preds) != len(items):
            raise SystemExit(f"preds_{category}.jsonl: {len(preds)} answers, {len(items)} items")
        out[category] = preds
    if not out:
        raise SystemExit("no category has both results/UnifiedQA/preds_<C>.jsonl and "
                         "bbq/<C>.jsonl")
    return out, older


def scratch_tree(checkout: Path, data_dir: Path, categories: list[str], tree: Path) -> None:
    """The repository layout their scripts expect, holding only the compared categories."""
    repo = Checkout(checkout)
    for folder in ("analysis_scripts", "data", "templates", "results/UnifiedQA"):
        (tree / folder).mkdir(parents=True, exist_ok=True)
    for category in categories:
        shutil.copy(data_dir / "bbq" / f"{category}.jsonl", tree / "data")
        preds = repo.read(f"results/UnifiedQA/preds_{category}.jsonl")
        (tree / "results/UnifiedQA" / f"preds_{category}.jsonl").write_bytes(preds or b"")
    for name in repo.names("templates"):
        if (data := repo.read(f"templates/{name}")) is not None:
            (tree / "templates" / name).write_bytes(data)
    for script in (METADATA_R, SCORE_R):
        if (text := repo.read(f"analysis_scripts/{script}")) is None:
            raise SystemExit(f"{checkout}: no analysis_scripts/{script}")
        (tree / "analysis_scripts" / script).write_text(
            substituted(text.decode(), script, TO_RUN))


def run_r(rscript: str, tree: Path, script: str) -> None:
    got = subprocess.run([rscript, "--vanilla", script], cwd=tree / "analysis_scripts",
                         capture_output=True, text=True)
    if got.returncode != 0:
        raise SystemExit(f"{script} failed (exit {got.returncode}):\n{got.stderr[-3000:]}")


def theirs(rscript: str, tree: Path, like_for_like: bool) -> dict[str, Any]:
    """Their scores: acc_bias, accuracy and answers counted per (category, condition, model)."""
    name = "like_for_like" if like_for_like else "published"
    out = tree / f"{name}.json"
    text = (tree / "analysis_scripts" / SCORE_R).read_text()
    if like_for_like:
        text = substituted(text, SCORE_R, LIKE_FOR_LIKE)
    (tree / "analysis_scripts" / f"{name}.R").write_text(text + EXPORT.format(out=str(out)))
    run_r(rscript, tree, f"{name}.R")
    found = json.loads(out.read_text())

    def keyed(table: str, field: str) -> dict[tuple[str, str, str], Any]:
        return {(r["category"], r["context_condition"], r["model"]): r.get(field)
                for r in found[table]}

    def number(text: Any) -> float | None:
        return None if text in (None, "NA") else float(text)

    bias, accuracy, answers = (keyed("bias", "acc_bias"), keyed("accuracy", "accuracy"),
                               keyed("n", "n"))
    return {key: {"bias": None if number(bias.get(key)) is None else float(bias[key]) / 100,
                  "accuracy": number(accuracy[key]), "answers": answers.get(key)}
            for key in accuracy}


def ours(preds: dict[str, list[dict[str, Any]]], column: str, data_dir: Path, work: Path
         ) -> dict[tuple[str, str], dict[str, Any]]:
    """biasscope audit --responses on the stored answers: s, accuracy and answers read per
    (category, condition)."""
    answers = work / f"unifiedqa_{column}.jsonl"
    answers.write_text("".join(
        json.dumps({"item_id": f"bbq:{c}:{r['example_id']}",
                    "response": r[f"unifiedqa-t5-11b_pred_{column}"]}) + "\n"
        for c, rows in preds.items() for r in rows))
    out = work / "run"
    subprocess.run([sys.executable, "-m", "biasscope", "audit", "--responses", str(answers),
                    "--probe", "bbq:" + ",".join(preds), "--data-dir", str(data_dir),
                    "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    entry = json.loads((out / "summary.json").read_text())["probes"]["bbq"]
    rows = {r["category"]: r for r in entry["tables"]["categories"]}
    found = {}
    for category in preds:
        for condition, key in (("ambig", "ambiguous"), ("disambig", "disambiguated")):
            score = entry["headline"][f"bias_{key}:{category}"]
            found[(category, condition)] = {"bias": score["estimate"], "answers": score["n"],
                                            "accuracy": rows[category][f"accuracy_{key}"]}
    return found


def target_check(tree: Path, data_dir: Path, categories: list[str]) -> tuple[int, list[str]]:
    """Their target_loc (additional_metadata.csv, after their non-negative correction) against
    biasscope's: the target for negative questions, the other named person for non-negative
    ones; None where either drops the item. How many agree, and the items that differ."""
    with (tree / "analysis_scripts" / "additional_metadata.csv").open(newline="") as f:
        meta: dict[tuple[str, str], list[str]] = {}
        for row in csv.DictReader(f):
            if row["example_id"] not in ("", "NA"):
                meta.setdefault((row["category"], row["example_id"]), []).append(
                    row["target_loc"])
    agree, differ = 0, []
    for item in bbq.load_items(data_dir, categories):
        g = item.groups
        locs = meta.get((str(g["category"]), str(g["example_id"])), [])
        their = int(float(locs[0])) if len(locs) == 1 and locs[0] != "NA" else None
        target, unknown = int(str(g["target"])), int(str(g["unknown"]))
        other = next(i for i in range(3) if i not in (target, unknown))
        mine = None if target < 0 else target if g["polarity"] == "neg" else other
        if their == mine and len(locs) == 1:
            agree += 1
        else:
            differ.append(f"{item.id}: theirs {locs}, biasscope {mine}")
    return agree, differ


def by_design(preds: dict[str, list[dict[str, Any]]], column: str, tree: Path
              ) -> dict[str, str]:
    """Per category, which of the LIKE_FOR_LIKE rules touch its answers, and how many."""
    names: dict[str, int] = {}
    with (tree / "analysis_scripts" / "additional_metadata.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            names[row["category"]] = names.get(row["category"], 0) + (row["label_type"] == "name")
    out = {}
    for category, rows in preds.items():
        texts = [str(r[f"unifiedqa-t5-11b_pred_{column}"]) for r in rows]
        counts = {"pantsu": sum(bool(re.search("pantsu$", t)) for t in texts),
                  "o'brien": sum("o'brien" in t for t in texts),
                  "(names)": names.get(category, 0)}
        out[category] = ", ".join(f"{k}: {n} answers" if k != "(names)" else f"{k}: {n} items"
                                  for k, n in counts.items() if n)
    return out


def _gap(x: Any, y: Any) -> float:
    """|x - y|; 0 when both are missing (None or NaN), infinite when one is."""
    missing = [v is None or v != v for v in (x, y)]
    return 0.0 if all(missing) else float("inf") if any(missing) else abs(float(x) - float(y))


def compare(published: dict[Any, Any], like: dict[Any, Any], mine: dict[Any, Any], model: str,
            notes: dict[str, str]) -> float:
    """Print the table; the largest difference from the like-for-like run (where theirs is
    missing and ours 0, the by-design s_AMB of a condition where no answer names a person)."""
    worst = 0.0
    print("| category | condition | measure | theirs (published) | theirs (like for like) | "
          "biasscope | vs published | vs like for like | by design |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (category, condition), row in mine.items():
        a, b = published.get((category, condition, model), {}), \
            like.get((category, condition, model), {})
        for measure in ("bias", "accuracy", "answers"):
            x, y, z = a.get(measure), b.get(measure), row[measure]
            name = measure if measure != "bias" else "s_AMB" if condition == "ambig" else "s_DIS"
            design = (notes.get(category) or "a rule of LIKE_FOR_LIKE") \
                if _gap(x, y) > TOLERANCE else ""
            if y is None and measure == "bias" and z == 0:
                design, like_gap = "s_AMB 0 where theirs is missing", 0.0
            else:
                like_gap = _gap(z, y)
            worst = max(worst, like_gap)
            print(f"| {category} | {condition} | {name} | {x!r} | {y!r} | {z!r} | "
                  f"{_gap(z, x):.1e} | {like_gap:.1e} | {design} |")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bbq", type=Path, required=True,
                        help="nyu-mll/BBQ checkout or bare git directory (at bea11bd)")
    parser.add_argument("--data-dir", type=Path, required=True, help="holds bbq/<C>.jsonl")
    parser.add_argument("--column", choices=tuple(MODEL), default="race",
                        help="UnifiedQA's prompt format (race: the paper's main one)")
    parser.add_argument("--rscript", default="Rscript")
    parser.add_argument("--keep", type=Path, help="keep the scratch tree here")
    args = parser.parse_args()
    if shutil.which(args.rscript) is None:
        raise SystemExit(f"{args.rscript} not found: install R with the tidyverse and jsonlite "
                         "(Debian: apt-get install r-base-core r-cran-tidyverse r-cran-jsonlite)")
    preds, older = stored(args.bbq, args.data_dir)
    print(f"BBQ at {Checkout(args.bbq).commit()}; categories: {', '.join(preds)}; "
          f"{len(older)} stored lines hold the answer_info before the data's fix "
          f"({', '.join(older[:3])}{', ...' if len(older) > 3 else ''}), the same unknown")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        tree = work / "BBQ"
        scratch_tree(args.bbq, args.data_dir, list(preds), tree)
        run_r(args.rscript, tree, METADATA_R)
        agree, differ = target_check(tree, args.data_dir, list(preds))
        print(f"target_loc: {agree} items agree, {len(differ)} differ"
              + "".join(f"\n  {d}" for d in differ[:20]))
        published, like = theirs(args.rscript, tree, False), theirs(args.rscript, tree, True)
        worst = compare(published, like, ours(preds, args.column, args.data_dir, work),
                        MODEL[args.column], by_design(preds, args.column, tree))
    print(f"largest difference not by design: {worst:.1e}")
    return 0 if worst <= TOLERANCE and not differ else 1


if __name__ == "__main__":
    sys.exit(main())
