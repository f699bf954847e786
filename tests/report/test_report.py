"""The dynamics HTML report, from synthetic run directories (no model)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import biasscope.dynamics.summary.write as reporting
from biasscope.backends.base import ContinuationScore, NextTokenScore
from biasscope.backends.checkpoints import Checkpoint
from biasscope.cli.main import main
from biasscope.core.errors import BiasscopeError
from biasscope.core.items import Item
from biasscope.dynamics.analysis import performance
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.scoring.runfile import init_run
from biasscope.dynamics.scoring.units import SweepConfig, records_frame
from biasscope.dynamics.summary.write import write_dynamics_report
from biasscope.probes import Probe, load_probe
from biasscope.store.directory import RunStore
from biasscope.store.units import Unit

TITLES = (
    "JSD-P per correct answer (male, female)",
    "Average Rank per correct answer",
    "JSD-P of gendered options where “not specified” is correct",
    "Accuracy vs Average Rank per correct answer",
    "Stereotype accuracy vs JSD-P per correct answer",
)
BLS_TITLE = "Gender preference against the share of women (U.S. BLS)"
P_TITLES = (
    "Significance of the JSD-P gap per checkpoint",
    "Significance of the Average Rank gap per checkpoint",
    "Significance of model differences where “not specified” is correct",
)
HOSTILE = "</script><script>alert(1)</script>"


@dataclass
class TemplatedProbe:
    """A real probe's items with another name or template in its config (what run.json shows)."""

    base: Probe
    template: str | None = None
    name: str = "winobias-gender"

    def items(self, seed: int) -> list[Item]:
        return self.base.items(seed)

    def config(self) -> dict[str, object]:
        config = dict(self.base.config())
        if self.template is not None:
            config["template"] = self.template
        return config


@dataclass
class TwoOptionProbe:
    """Items with no groups and no ``not specified`` option: several figures have no data."""

    name: str = "two-option"
    sizes: dict[int, int] = field(default_factory=lambda: {0: 6, 1: 6})

    def items(self, seed: int) -> list[Item]:
        return [Item(f"q{i}:seed{seed}", f"prompt {i}", ("male", "female"), (" male", " female"),
                     i % 2) for i in range(self.sizes[seed])]

    def config(self) -> dict[str, object]:
        return {"probe": self.name}


def synthetic_scores(items: Sequence[Item], step: int, seed: int) -> list[NextTokenScore]:
    """Option log-probs that favour the answer more with each step, "male" most of all."""
    rng = np.random.default_rng(1000 * step + seed)
    scores = []
    for item in items:
        logits = rng.normal(0.0, 0.5, size=len(item.options)) - 6.0
        boost = 0.5 + step / 1000 * (1.5 if item.options[item.answer] == "male" else 0.7)
        logits[item.answer] += boost
        rank = int(rng.integers(1, 40)) + max(0, 200 - step // 10)
        scores.append(NextTokenScore(tuple(float(x) for x in logits), rank))
    return scores


def make_run(root: Path, probe: Any, checkpoints: Sequence[Checkpoint],
             seeds: Sequence[int] = (0, 1),
             scores: Callable[[Sequence[Item], int, int], list[NextTokenScore]]
             = synthetic_scores) -> Path:
    store = RunStore(root)
    init_run(store, [probe], SweepConfig(list(checkpoints), root, list(seeds),
                                       comparable={"dtype": "auto", "first_token": False}))
    for ckpt in checkpoints:
        for seed in seeds:
            unit = Unit(ckpt.model, ckpt.revision, probe.name, seed, ckpt.step)
            items = probe.items(seed)
            store.write_unit(unit, records_frame(unit, items, scores(items, ckpt.step or 0,
                                                                     seed)))
    return root


def pythia(model: str = "EleutherAI/pythia-70m", steps: Sequence[int] = (0, 1000, 2000)
           ) -> list[Checkpoint]:
    return [Checkpoint(model, model, f"step{s}", s) for s in steps]


def figures(page: str) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """The traces and layout of every ``Plotly.newPlot`` call in the page."""
    decoder = json.JSONDecoder()
    out = []
    for match in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page):
        traces, end = decoder.raw_decode(page, match.end())
        layout, _ = decoder.raw_decode(page, page.index("{", end))
        out.append((traces, layout))
    return out


def figure_data(page: str) -> list[list[dict[str, Any]]]:
    """The traces of every ``Plotly.newPlot`` call in the page."""
    return [traces for traces, _ in figures(page)]


def absent(page: str) -> str:
    """The one findings sentence that names the figures the run cannot draw."""
    return page.split("Not drawn, for want of data: ", 1)[1].split("</li>", 1)[0]


def section(page: str, title: str) -> str:
    """The page from heading ``title`` to the next ``<h2>``."""
    return page.split(f"<h2>{escape(title)}</h2>", 1)[1].split("<h2>", 1)[0]


@pytest.fixture(scope="module")
def winobias(winobias_dir: Path) -> Probe:
    return load_probe("winobias-gender", data_dir=winobias_dir)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, winobias: Probe) -> tuple[Path, str]:
    run = make_run(tmp_path_factory.mktemp("run"), winobias, pythia())
    path = write_dynamics_report(run)
    return path, path.read_text(encoding="utf-8")


def test_default_output_is_in_the_run_dir(report: tuple[Path, str]) -> None:
    path, _ = report
    assert path == path.parent / "report.html" and path.is_file()
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_self_contained(report: tuple[Path, str]) -> None:
    _, page = report
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script[^>]*\bsrc=", page)
    assert 'src="http' not in page and "cdn.plot.ly/plotly" not in page
    # one model: no model comparison; + pro/anti, occupations ranked, occupation heatmap (no
    # occupation statistics in the test environment's data dir or cache)
    assert page.count("Plotly.newPlot(") == 10
    assert len(page) > 1_000_000  # plotly.js inline, once
    assert page.count("window.PlotlyConfig") == 1


def test_every_figure_title(report: tuple[Path, str]) -> None:
    _, page = report
    for title in (*TITLES, *P_TITLES, BLS_TITLE):
        if title in (P_TITLES[2], BLS_TITLE):  # one model; no occupation statistics here
            assert f"<h2>{escape(title)}</h2>" not in page and escape(title) in absent(page)
        else:
            assert f"<h2>{escape(title)}</h2>" in page
    assert page.count("Not drawn") == 1 and "Not available" not in page
    assert f"{escape(P_TITLES[2])} (the run has fewer than two models" in absent(page)
    assert "biasscope data fetch winogender" in absent(page)


def test_summary_sentences(report: tuple[Path, str], winobias: Probe) -> None:
    _, page = report
    summary = page.split('<section class="summary">')[1].split("</section>")[0]
    assert "<b>EleutherAI/pythia-70m</b> on probe <b>winobias-gender</b>" in summary
    n = len(winobias.items(0))
    assert f"3 checkpoints (steps 0 to 2000), 2 seeds (0, 1), {n} items per seed." in summary
    ci = r"[+-]?[\d.]+ \(95% CI [+-]?[\d.]+ to [+-]?[\d.]+; std over 2 seeds [\d.]+\)"
    assert re.search(rf"The JSD-P gap \(male − female\) went from {ci} at step 0 to {ci} at "
                     r"step 2000", summary)
    assert "n/a" not in summary and "e-0" not in summary


def test_configuration_at_the_bottom(report: tuple[Path, str]) -> None:
    _, page = report
    config = page.split("<h2>Run configuration</h2>")[1]
    assert "probes.winobias-gender.template" in config
    assert "Question: What is the gender of the" in config
    assert config.count("step1000") == 1 and "first_token" in config
    assert "<th>package</th>" in config and "pandas" in config


def test_lines_have_std_bands_and_hover(report: tuple[Path, str]) -> None:
    _, page = report
    first = figure_data(page)[0]
    names = [t.get("name") for t in first]
    assert {"male correct", "female correct", "gap (male − female)"} <= set(names)
    bands = [t for t in first if t.get("fill") == "toself"]
    assert len(bands) == 3 and all(len(b["x"]) == 6 for b in bands)
    male = next(t for t in first if t.get("name") == "male correct")
    assert male["x"] == [0, 1000, 2000]
    assert re.search(r"step 1000 \(step1000\)<br>[\d.]+ \(95% CI [\d.]+ to [\d.]+\)<br>"
                     r"\(bootstrap CI over prompts\)<br>std over 2 seeds [\d.]+",
                     male["hovertext"][1])
    accuracy_bands = [t for t in figure_data(page)[3] if t.get("fill") == "toself"
                      and "/accuracy/" in t["legendgroup"]]
    assert accuracy_bands and all(0 <= y <= 1 for t in accuracy_bands for y in t["y"])


def test_hostile_strings_are_escaped(tmp_path: Path, winobias: Probe) -> None:
    probe = TemplatedProbe(winobias, template="<img src=x onerror=alert(2)>{sentence}")
    ckpts = [Checkpoint(HOSTILE, "/models/x", f"<b>rev{s}</b>", s) for s in (1, 2)]
    page = write_dynamics_report(make_run(tmp_path, probe, ckpts)).read_text(encoding="utf-8")
    assert "<script>alert" not in page.lower()
    assert "<img src=x" not in page and "<b>rev1" not in page
    assert escape(HOSTILE) in page  # readable in the summary and the tables
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    traces = figure_data(page)[0]
    assert all("<script>" not in t.get("name", "") for t in traces)
    assert any("&lt;b&gt;rev1&lt;/b&gt;" in h for t in traces for h in t.get("hovertext", []))


def test_several_models_get_their_own_traces(tmp_path: Path, winobias: Probe) -> None:
    ckpts = pythia("EleutherAI/pythia-160m") + pythia("EleutherAI/pythia-6.9b")
    page = write_dynamics_report(make_run(tmp_path, winobias, ckpts)).read_text(encoding="utf-8")
    assert "This run compares 2 models: <b>EleutherAI/pythia-160m</b>, " \
           "<b>EleutherAI/pythia-6.9b</b>." in page
    not_specified = figure_data(page)[2]
    names = {t["name"] for t in not_specified if t.get("fill") != "toself"}
    assert names == {f"EleutherAI/pythia-{m} · {g} option"
                     for m in ("160m", "6.9b") for g in ("male", "female")}
    dashes = {t["line"]["dash"] for t in not_specified if t.get("fill") != "toself"}
    assert dashes == {"solid", "dash"}


def test_checkpoints_without_steps_use_revision_labels(tmp_path: Path, winobias: Probe) -> None:
    ckpts = [Checkpoint("local", f"/ckpt/{r}", r, None) for r in ("early", "late")]
    path = write_dynamics_report(make_run(tmp_path, winobias, ckpts), tmp_path / "out" / "r.html")
    page = path.read_text(encoding="utf-8")
    # Not ordered, so not a curve: each is named, with its own intervals.
    assert "2 checkpoints without a training step (early and late)" in page
    male = next(t for t in figure_data(page)[0] if t.get("name") == "male correct")
    assert male["x"] == ["early", "late"]
    assert "no training step (early)" in male["hovertext"][0]
    assert "95% CI" in male["hovertext"][0]


def test_missing_metrics_and_partial_runs(tmp_path: Path) -> None:
    probe = TwoOptionProbe()
    run = make_run(tmp_path, probe, [Checkpoint("m", "m", "step5", 5)], seeds=(0,))
    init_run(RunStore(run), [probe], SweepConfig(pythia("m", (5, 10)), run, [0]))
    page = write_dynamics_report(run).read_text(encoding="utf-8")
    # "not specified" and stereotype figures; the p-value panels (no WinoBias records)
    assert absent(page).count("; ") == 4  # five figures
    assert page.count("Plotly.newPlot(") == 3 and page.count("window.PlotlyConfig") == 1
    assert "std over" not in page.split("</section>")[0]  # one seed: no spread to give
    assert "Unfinished: 1 of 2 checkpoints in run.json fully scored; no records yet for step " \
           "10." in page


def test_an_unfinished_run_says_what_it_lacks_and_what_rests_on_it(
        tmp_path: Path, winobias: Probe, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a sweep killed after two of its four checkpoints was reported as a run of two
    ("2 checkpoints (steps 0 to 1000)"), its emergence drawn from them as if final. It says
    which units run.json asks for that have none, first, and the curve's verdicts say they
    rest on the scored checkpoints only."""
    run = make_run(tmp_path / "run", winobias, pythia(steps=(0, 1000, 2000)))
    init_run(RunStore(run), [winobias], SweepConfig(pythia(steps=(0, 1000, 2000, 3000)), run,
                                                    [0, 1]))
    store = RunStore(run)
    killed = store.unit_path(Unit("EleutherAI/pythia-70m", "step2000", winobias.name, 1, 2000))
    killed.unlink()  # as kill -9 leaves it: no file, no checksum
    store.checksum_path(Unit("EleutherAI/pythia-70m", "step2000", winobias.name, 1,
                             2000)).unlink()
    page = write_dynamics_report(run).read_text(encoding="utf-8")
    said = ("Unfinished: 2 of 4 checkpoints in run.json fully scored; no records yet for step "
            "3000; step 2000 (seed 1). The findings rest on the scored checkpoints only. To "
            "finish it, run `biasscope dynamics` with --out run again over the same checkpoints "
            "(where run.json says they are).")
    headline = page.split("</section>")[0]
    assert escape(said, quote=False) in headline
    assert headline.index("Unfinished") < headline.index("3 checkpoints (steps 0 to 2000)")
    summary = json.loads(store.summary_json.read_text())
    assert summary["unfinished"]["sentence"] == said
    assert [(m["step"], m["seeds"]) for m in summary["unfinished"]["missing"]] == [
        (2000, [1]), (3000, [0, 1])]
    model = summary["analysis"]["models"]["EleutherAI/pythia-70m"]
    assert model["unscored"] == ["step 2000", "step 3000"]
    rests = ("This rests on the scored checkpoints only: the run is unfinished (steps 2000, "
             "3000 not yet scored).")
    verdicts = [s for s in summary["analysis"]["sentences"] if s.endswith(rests)]
    assert any("JSD-P gap is" in s for s in verdicts)
    assert any("sharpest change" in s for s in verdicts)
    assert main(["report", str(run)]) == 0  # and `biasscope report` says it on stderr
    assert f"warning: {said.replace('--out run', f'--out {run}')}" in capsys.readouterr().err


def test_summary_json_follows_the_records(tmp_path: Path, winobias: Probe) -> None:
    run = make_run(tmp_path, winobias, pythia(steps=(0, 10)))
    store = RunStore(run)
    store.summary_json.write_text("{}")
    write_dynamics_report(run)
    summary = json.loads(store.summary_json.read_text())
    assert [c["step"] for c in summary["checkpoints"]] == [0, 10]


def test_errors(tmp_path: Path, winobias: Probe) -> None:
    with pytest.raises(BiasscopeError, match="does not exist"):
        write_dynamics_report(tmp_path / "nowhere")
    with pytest.raises(BiasscopeError, match=r"run\.json not found"):
        write_dynamics_report(tmp_path)
    init_run(RunStore(tmp_path), [winobias], SweepConfig(pythia(), tmp_path, [0]))
    with pytest.raises(BiasscopeError, match=r"has no records: run `biasscope dynamics` first"):
        write_dynamics_report(tmp_path)
    assert not (tmp_path / "report.html").exists()


# --- the analysis in the report ---------------------------------------------------------------


def test_summary_states_the_method_and_the_findings(report: tuple[Path, str]) -> None:
    _, page = report
    summary = page.split('<section class="summary">')[1].split("</section>")[0]
    method = page.split("<details><summary>How these numbers were computed</summary>")[1]
    assert "by the Holm method (Holm by default; Benjamini-Hochberg on request)" in method
    assert "significant means corrected p &lt; 0.01" in method
    assert "95% bootstrap confidence intervals over prompts, 2000 resamples" in method
    assert "the raw and the corrected p side by side" in method  # why a CI and p can differ
    # The verdict on the gap in the headline; the other findings in a list under the figure.
    assert re.search(r"The male-female JSD-P gap is (not )?significant "
                     r"\(Holm-corrected, α = 0\.01\)", summary)
    findings = page.split('<section class="findings">')[1].split("</section>")[0]
    assert "<li>EleutherAI/pythia-70m: the sharpest change of the gap is between steps" in \
        findings
    assert page.index('<section class="summary">') < page.index("Plotly.newPlot(") < \
        page.index('<section class="findings">')


def test_bh_is_named_as_the_non_default(tmp_path: Path, winobias: Probe) -> None:
    run = make_run(tmp_path, winobias, pythia(steps=(0, 2000)))
    page = write_dynamics_report(run, options=AnalysisConfig(correction="bh", alpha=0.05))
    text = page.read_text(encoding="utf-8")
    assert "by Benjamini-Hochberg instead of the default Holm" in text
    assert "significant means corrected p &lt; 0.05" in text
    assert "<th>p adjusted (Benjamini-Hochberg)</th>" in text


def test_lines_have_ci_error_bars(report: tuple[Path, str]) -> None:
    _, page = report
    for index, name in ((0, "male correct"), (0, "gap (male − female)"), (1, "female correct"),
                        (2, "male option")):
        trace = next(t for t in figure_data(page)[index] if t.get("name") == name)
        error = trace["error_y"]
        assert error["type"] == "data" and error["symmetric"] is False
        assert len(error["array"]) == len(error["arrayminus"]) == 3
        assert all(e >= 0 for e in error["array"] + error["arrayminus"])
        assert re.search(r"95% CI -?[\d.]+ to -?[\d.]+\)<br>\(bootstrap CI over prompts\)",
                         trace["hovertext"][1])


def test_pvalue_panels(report: tuple[Path, str]) -> None:
    _, page = report
    for index in (5, 6):
        traces, layout = figures(page)[index]
        adjusted = next(t for t in traces if t["name"] == "Holm-adjusted p")
        raw = next(t for t in traces if t["name"] == "raw p")
        assert adjusted["x"] == raw["x"] == [0, 1000, 2000]
        assert raw["line"]["dash"] == "dot"
        assert all(0 < y <= 1 for y in adjusted["y"] + raw["y"])
        assert all(a >= r for a, r in zip(adjusted["y"], raw["y"]))
        assert "effect size r = " in adjusted["hovertext"][0]
        assert layout["yaxis"]["type"] == "log"
        assert any(s.get("y0") == s.get("y1") == 0.01 for s in layout["shapes"])
        assert any(a["text"] == "α = 0.01" for a in layout["annotations"])
    rows = section(page, "Tests per checkpoint")
    assert "<h3>EleutherAI/pythia-70m: JSD-P of the correct option, male vs female prompts</h3>" \
        in rows
    assert rows.count("<tr><td>1000</td>") == 2  # both tests
    assert "<th>effect size r</th>" in rows and "<th>significant (α = 0.01)</th>" in rows


def test_performance_overlay_markers_and_stop_table(tmp_path: Path, winobias: Probe) -> None:
    run = make_run(tmp_path, winobias, pythia(steps=(0, 1000, 2000, 3000)))
    performance.save(RunStore(run), "EleutherAI/pythia-70m",
                     {0: 0.1, 1000: 0.5, 2000: 0.6, 3000: 0.605}, "LAMBADA accuracy")
    page = write_dynamics_report(run).read_text(encoding="utf-8")
    traces, layout = figures(page)[0]
    perf = next(t for t in traces if t["name"] == "LAMBADA accuracy (right axis)")
    assert perf["x"] == [0, 1000, 2000, 3000] and perf["y"] == [0.1, 0.5, 0.6, 0.605]
    assert perf["yaxis"] == "y2" and layout["yaxis2"]["overlaying"] == "y"
    summary = json.loads(RunStore(run).summary_json.read_text())["analysis"]
    stop = summary["models"]["EleutherAI/pythia-70m"]["recommendation"]["step"]
    labels = [a["text"] for a in layout["annotations"]]
    assert f"recommended stop: step {stop}" in labels
    emergence = summary["models"]["EleutherAI/pythia-70m"]["emergence"]["jsdp_correct"]
    assert (f"gap significant from step {emergence}" in labels) == (emergence is not None)
    assert any(s["x0"] == s["x1"] == stop and s["yref"] == "paper" for s in layout["shapes"])
    table = section(page, "Where to stop training")
    assert "<th>LAMBADA accuracy</th>" in table and "Recommendation: " in table
    assert f"<tr><td>{stop}</td>" in table


def write_lambada(root: Path, n: int = 4) -> Probe:
    (root / "lambada").mkdir(parents=True)
    lines = [json.dumps({"text": f"passage number {i} ends with word{i}"}) for i in range(n)]
    (root / "lambada" / "lambada_test.jsonl").write_text("\n".join(lines) + "\n")
    return load_probe("lambada", data_dir=root)


def test_lambada_checkpoints_are_performance_not_fairness(tmp_path: Path,
                                                          winobias: Probe) -> None:
    ckpts = pythia(steps=(0, 1000, 2000))
    run = make_run(tmp_path / "run", winobias, ckpts)
    lambada = write_lambada(tmp_path / "data")
    store = RunStore(run)
    init_run(store, [winobias, lambada], SweepConfig(ckpts, run, [0, 1]))
    for ckpt in ckpts:
        unit = Unit(ckpt.model, ckpt.revision, lambada.name, 0, ckpt.step)
        items = lambada.items(0)
        scores = [ContinuationScore(-1.0, i < (ckpt.step or 0) // 1000 + 1, 1)
                  for i in range(len(items))]
        store.write_unit(unit, records_frame(unit, items, scores))
    page = write_dynamics_report(run).read_text(encoding="utf-8")
    summary = json.loads(store.summary_json.read_text())
    assert {c["probe"] for c in summary["checkpoints"]} == {"lambada", "winobias-gender"}
    traces = figure_data(page)[0]
    assert "male correct" in {t.get("name") for t in traces}  # one model, one probe: no suffix
    perf = next(t for t in traces if t.get("name") == "LAMBADA accuracy (right axis)")
    assert perf["y"] == [0.25, 0.5, 0.75]
    assert all("lambada" not in str(t.get("name")) for f in figure_data(page) for t in f)
    assert "on probe <b>winobias-gender</b>: 3 checkpoints" in page
    assert "on probe <b>lambada</b>" not in page


def test_two_models_comparison_panel_and_mismatch(tmp_path: Path, winobias: Probe) -> None:
    ckpts = pythia("a/small") + pythia("b/large", steps=(0, 2000))
    page = write_dynamics_report(make_run(tmp_path, winobias, ckpts)).read_text(encoding="utf-8")
    # + pro/anti, occupations ranked and a heatmap per model; no occupation statistics here
    assert absent(page).startswith(BLS_TITLE) and "; " not in absent(page)
    assert page.count("Plotly.newPlot(") == 12
    assert "b/large has no records at steps 1000: compared only where both models have a " \
           "checkpoint." in page
    traces, _ = figures(page)[7]
    names = {t["name"] for t in traces}
    assert {f"a/small vs b/large · {g} option · Holm-adjusted p" for g in ("male", "female")} \
        <= names
    assert all(t["x"] == [0, 2000] for t in traces)
    assert "<h3>a/small (A) vs b/large (B): JSD-P of the “male” option where “not specified” " \
           "is correct</h3>" in page
    pvalues = {t["name"] for t in figure_data(page)[5]}
    assert {"a/small · Holm-adjusted p", "b/large · raw p"} <= pvalues


def test_missing_analysis_parts_still_render(tmp_path: Path, winobias: Probe,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path, winobias, pythia(steps=(0, 1000)))
    real = reporting.full_summary
    model = "EleutherAI/pythia-70m"
    degraded: list[Any] = [
        None, {}, {"models": None, "comparisons": None, "sentences": None},
        {"correction": "holm", "alpha": None, "models": {model: {
            "steps": None, "tests": None, "emergence": None, "sharpest_change": None,
            "ci": None, "performance": None, "recommendation": None, "sentences": None}},
         "comparisons": [], "step_mismatch": {}, "sentences": []},
        {"models": {model: {"tests": {"jsdp_correct": [{"step": 0, "p_value": None}]},
                            "ci": {"0": {"jsdp_correct/male": [None, 1]}},
                            "performance": {"source": "x", "values": {}, "missing_steps": [0]},
                            "emergence": {"jsdp_correct": 0}}}},
    ]
    for analysis in degraded:
        def fake(store: RunStore, options: Any = None, *_: Any, analysis: Any = analysis
                 ) -> Any:
            summary = real(store, options)
            summary["analysis"] = analysis
            return summary

        monkeypatch.setattr(reporting, "full_summary", fake)
        (run / "summary.json").unlink(missing_ok=True)  # else the first one is reused
        page = write_dynamics_report(run, options=AnalysisConfig()).read_text(encoding="utf-8")
        assert page.count("Plotly.newPlot(") == 5 and "Not drawn" in page
        male = next(t for t in figure_data(page)[0] if t.get("name") == "male correct")
        assert male.get("error_y") is None


def test_one_checkpoint_and_unknown_steps(tmp_path: Path, winobias: Probe) -> None:
    one = write_dynamics_report(make_run(tmp_path / "one", winobias, pythia(steps=(5,))))
    page = one.read_text(encoding="utf-8")
    # A snapshot: bars with CIs instead of lines over steps (the metrics, the accuracy per
    # answer), then the p-value panels, pro/anti and the occupations (no heatmap over one step).
    assert page.count("Plotly.newPlot(") == 6 and "sharpest change" not in page
    assert "<h2>Snapshot: metrics per model</h2>" in page
    assert "<h2>Accuracy vs Average Rank per correct answer</h2>" not in page
    assert "per occupation over training" not in page
    bars = figures(page)[0][0]
    assert bars[0]["type"] == "bar" and bars[0]["error_y"]["array"][0] is not None
    assert figures(page)[2][0][0]["x"] == [5]  # after the accuracy bars
    assert "At its one checkpoint (step 5) the male-female JSD-P gap is" in page
    assert "from step 5 on" not in page
    ckpts = [Checkpoint("local", f"/ckpt/{r}", r, None) for r in ("early", "late")]
    page = write_dynamics_report(make_run(tmp_path / "none", winobias, ckpts)).read_text(
        encoding="utf-8")
    assert page.count("Plotly.newPlot(") == 5  # no steps: no p-value panels, no markers
    # each checkpoint's own tests, by name; never a step-less row pooling both
    tests = section(page, "Tests per checkpoint")
    name = '<td><span class="name">revision {}</span></td>'
    assert tests.count(name.format("early")) == tests.count(name.format("late")) == 2
    assert tests.count("<tr><td>") == 4 and "<th>checkpoint</th>" in tests
    assert all(not layout.get("shapes") or all(s.get("yref") != "paper" for s in
                                                layout["shapes"])
               for _, layout in figures(page))


def test_hostile_strings_in_the_analysis_are_escaped(tmp_path: Path, winobias: Probe) -> None:
    other = "<img src=y onerror=alert(3)>"
    ckpts = [Checkpoint(m, "/models/x", f"step{s}", s) for m in (HOSTILE, other)
             for s in (1, 2, 3)]
    run = make_run(tmp_path, winobias, ckpts)
    performance.save(RunStore(run), HOSTILE, {1: 0.1, 2: 0.2, 3: 0.21}, HOSTILE)
    page = write_dynamics_report(run).read_text(encoding="utf-8")
    assert "<script>alert" not in page.lower() and "<img src=y" not in page
    summary = page.split('<section class="summary">')[1].split("</section>")[0]
    assert f"<b>{escape(HOSTILE)}</b> on probe" in summary
    assert summary.count("The male-female JSD-P gap") == 2  # each model's verdict
    assert f"<h3>{escape(HOSTILE)}: JSD-P of the correct option" in page
    assert f"<th>{escape(HOSTILE)}</th>" in section(page, "Where to stop training")
    for traces, layout in figures(page):
        assert all("<script" not in t.get("name", "") + "".join(t.get("hovertext") or [])
                   and "<img" not in t.get("name", "") for t in traces)
        assert all("<script" not in a["text"] and "<img" not in a["text"]
                   for a in layout.get("annotations", []))
    perf = next(t for t in figure_data(page)[0] if "right axis" in t.get("name", ""))
    assert perf["name"] == f"{escape(HOSTILE)} · {escape(HOSTILE)} (right axis)"


def test_audit_tables_and_hovers_use_the_one_number_format() -> None:
    from biasscope.report.audit import headline_figure
    from biasscope.report.probe_panels import _hover, _tested

    v = {"estimate": 0.123456, "low": 0.0987, "high": 0.1502, "n": 40, "p_value": 2e-7,
         "p_adjusted": 0.01234, "effect_size": 0.4, "significant": True}
    section = {"headline": ["flip_rate"], "names": {"flip_rate": "flip rate"},
               "models": {"m": {"checkpoints": [{"step": 10, "values": {"flip_rate": v}}]}}}
    # The value's name once (above its table), r to two decimals as the sentences write it.
    assert _tested(section) == [("m", "flip rate", [[10, "0.123", "0.099 to 0.150",
                                                     "< 0.0001", "0.012", "0.40", "yes", 1]])]
    hover = _hover("m", "flip rate", 10, v)
    assert "0.123 (95% CI 0.099 to 0.150; n = 40)<br>p < 0.0001, adjusted 0.012" in hover
    fig = headline_figure("adult", {"flip_rate": v})
    assert fig is not None and fig.data[0]["customdata"] == ["0.123 (95% CI 0.099 to 0.150)"]
