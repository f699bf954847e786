"""The recipes of docs/architecture.md are real: their code blocks, registered exactly as the
recipes say, run end to end through the public library (a probe folder swept over the tiny
checkpoints and asked by the audit, its metric in summary.json, a backend answering the audit).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import biasscope.probes
from biasscope.backends import canned
from biasscope.backends.base import NextTokenScore
from biasscope.backends.checkpoints import Checkpoint, from_dirs
from biasscope.backends.generators import BACKENDS, load_generator, parse_model_spec
from biasscope.core.errors import BiasscopeError, ModelError
from biasscope.dynamics.scoring.units import SweepConfig
from biasscope.probes import PROBES, load_probe

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
BLOCK = re.compile(r"```python\n# (src/biasscope/\S+\.py)\n(.*?)```", re.DOTALL)


def blocks() -> dict[str, str]:
    """Each recipe's code, by the file the recipe puts it in."""
    return dict(BLOCK.findall(DOC.read_text(encoding="utf-8")))


def recipe_module(path: str, tmp_path: Path) -> ModuleType:
    """A recipe's new file, imported as its own module (as if written at ``path``)."""
    file = tmp_path / Path(path).name
    file.write_text(blocks()[path], encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"recipe_{file.stem}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROBE_FILES = ("__init__.py", "items.py", "metrics.py")


@pytest.fixture
def pronoun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The probe recipe: its folder ``probes/pronoun/`` (written beside the package's own
    probes, as ``biasscope.probes.pronoun``) and its one line in ``PROBES``."""
    folder = tmp_path / "probes" / "pronoun"
    folder.mkdir(parents=True)
    for name in PROBE_FILES:
        (folder / name).write_text(blocks()[f"src/biasscope/probes/pronoun/{name}"],
                                   encoding="utf-8")
    monkeypatch.setattr(biasscope.probes, "__path__", [*biasscope.probes.__path__,
                                                       str(folder.parent)])
    for name in ("", ".items", ".metrics"):
        monkeypatch.delitem(sys.modules, f"biasscope.probes.pronoun{name}", raising=False)
    module = importlib.import_module("biasscope.probes.pronoun")
    monkeypatch.setitem(PROBES, module.PROBE.name, module.PROBE)
    return module


@pytest.fixture
def pronoun_metrics(pronoun: ModuleType) -> Any:
    """The metric recipe: a function in the probe's folder, named in its entry."""
    metric = sys.modules["biasscope.probes.pronoun.metrics"].pronoun_metrics
    assert pronoun.PROBE.unit_metrics is metric
    return metric


def test_the_backend_recipe_is_the_shipped_canned_backend() -> None:
    """The backend recipe is the library's own file, shown whole, and its registry line."""
    path = "src/biasscope/backends/canned.py"
    assert blocks()[path] == (ROOT / path).read_text(encoding="utf-8")
    registry = (ROOT / "src/biasscope/backends/generators.py").read_text(encoding="utf-8")
    assert '    "canned": canned.from_spec,\n' in registry
    assert BACKENDS["canned"] is canned.from_spec


def test_the_recipes_name_files_and_registries_that_exist() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert set(blocks()) == {*(f"src/biasscope/probes/pronoun/{n}" for n in PROBE_FILES),
                             "src/biasscope/backends/canned.py"}
    for path in blocks():
        folder = (ROOT / path).parent
        assert folder.is_dir() or folder.parent.name == "probes", path  # or a new probe's
    for line in ("pronoun.PROBE,", "unit_metrics=pronoun_metrics", '"canned": canned.from_spec,'):
        assert line in text
    registry = (ROOT / "src/biasscope/probes/__init__.py").read_text(encoding="utf-8")
    assert re.search(r"^    \w+\.PROBE,$", registry, re.MULTILINE)  # the line the recipe adds


def test_a_registered_probe_is_listed_and_loaded(pronoun: ModuleType) -> None:
    info = PROBES["pronoun-gender"]
    assert info.about == "Pronoun gender: whether a model follows the pronoun a sentence " \
                         "gives a person"
    assert info.requests == ("next_token", "generate") and info.data is None
    probe = load_probe("pronoun-gender", occupations=("nurse",))
    items = probe.items(0)
    assert [(i.id, i.options[i.answer]) for i in items] == [
        ("pronoun-gender:nurse:he", "male"), ("pronoun-gender:nurse:she", "female")]


def test_the_probe_asks_the_chat_its_items_prompt(pronoun: ModuleType) -> None:
    """The audit contract (tests/audit/test_audit_contract.py) holds every probe asked by chat
    to it: the last turn is the item's prompt, which `biasscope items` exports and the report
    shows beside the answer. The recipe once appended a question, and failed there."""
    probe = load_probe("pronoun-gender")
    assert all(probe.messages(i)[-1] == ("user", i.prompt) for i in probe.items(0))


def test_an_unregistered_probe_is_unknown() -> None:
    with pytest.raises(BiasscopeError, match="unknown probe 'pronoun-gender'"):
        load_probe("pronoun-gender")


def test_the_probe_and_its_metric_sweep_the_tiny_checkpoints(
        pronoun: ModuleType, pronoun_metrics: Any, checkpoint_dirs: list[Path],
        tmp_path: Path) -> None:
    from biasscope import run_dynamics

    store = run_dynamics(load_probe("pronoun-gender"), from_dirs(checkpoint_dirs[:2]),
                         tmp_path / "run", seeds=[0, 1], quiet=True)
    summary = json.loads(store.summary_json.read_text())
    rows = summary["checkpoints"]
    assert [(r["probe"], r["step"], r["seeds"], r["items_per_seed"]) for r in rows] == [
        ("pronoun-gender", 10, [0], 6), ("pronoun-gender", 20, [0], 6)]  # not seeded
    for row in rows:
        assert set(row["mean"]) == {"accuracy/all", "accuracy/male", "accuracy/female",
                                    "p_pronoun/he", "p_pronoun/she"}
        assert all(0 < row["mean"][f"p_pronoun/{p}"] < 1 for p in ("he", "she"))
    records = store.records()
    assert set(records["pronoun"]) == {"he", "she"} and len(records) == 12


def test_the_metric_reads_what_it_says(pronoun_metrics: Any) -> None:
    import pandas as pd

    records = pd.DataFrame({
        "option_logprobs": [[math.log(0.8), math.log(0.2)], [math.log(0.6), math.log(0.4)]],
        "answer": [0, 1], "answer_label": ["male", "female"], "pronoun": ["he", "she"]})
    out = pronoun_metrics(records)
    assert out["p_pronoun/he"] == pytest.approx(0.8)
    assert out["p_pronoun/she"] == pytest.approx(0.4)
    assert out["accuracy/all"] == pytest.approx(0.5)


def test_the_backend_answers_the_probe_through_the_audit(
        pronoun: ModuleType, tmp_path: Path) -> None:
    from biasscope.audit.harness import GenerationResponder, run_audit

    spec = parse_model_spec("canned:female")
    assert (spec.kind, spec.target) == ("canned", "female")
    generator = load_generator("canned:female")
    assert generator.label == "canned:female"
    store = run_audit([load_probe("pronoun-gender")], GenerationResponder(generator),
                      tmp_path / "audit")
    entry = json.loads(store.summary_json.read_text())["probes"]["pronoun-gender"]
    assert entry["items"] == 6 and entry["no_response"] == 0
    assert entry["headline"]["pronoun_accuracy"]["estimate"] == pytest.approx(0.5)
    assert entry["detector"] == "label-parsing"
    answers = store.records()
    assert set(answers["response"]) == {"female"} and set(answers["label"]) == {"female"}
    assert list(answers["hit"]) == [a != "female" for a in answers["answer_label"]]
    run = json.loads(store.run_json.read_text())
    assert run["responder"]["backend"] == {"backend": "canned", "model": "female"}


def test_an_unregistered_backend_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ModelError, match="one of openai, openai-compatible, hf, litellm, canned"):
        load_generator("mock:female")


def test_a_scoring_backend_is_a_scorer_source(pronoun: ModuleType, tmp_path: Path) -> None:
    """The sweep takes any ``score_next_token``: here one that always prefers ``male``."""
    from biasscope import sweep

    class Leaning:
        label = "leaning"

        def score_next_token(self, items: Any) -> list[NextTokenScore]:
            return [NextTokenScore((math.log(0.9), math.log(0.1)), 1 + i.answer)
                    for i in items]

    def source(checkpoints: Any) -> Any:
        return (Leaning() for _ in checkpoints)

    ckpt = Checkpoint("leaning", "in-memory/leaning", "step1", 1)
    store = sweep(load_probe("pronoun-gender"),
                  SweepConfig([ckpt], tmp_path / "run", [0]), source, quiet=True)
    mean = json.loads(store.summary_json.read_text())["checkpoints"][0]["mean"]
    assert mean["accuracy/male"] == 1.0 and mean["accuracy/female"] == 0.0
