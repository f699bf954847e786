"""Every kind of HTML report biasscope writes, opened in headless Chromium at 1280 px: the
figures draw (plotly's plot elements exist, no console error of any kind), nothing is wider
than the page or cut off (a table may scroll in its own box with its first columns in view;
the dynamics report's tables fit), no point label covers another, and model text planted with
``<script>``, ``<img onerror>``, ``javascript:`` links and ``<svg onload>`` runs nothing. A
screenshot of each report is saved under the test's tmp dir and copied to
``$BIASSCOPE_ARTIFACTS`` when set.

Needs Debian's chromium and the playwright package (``scripts/browser-setup.sh``); skips
without them unless ``BIASSCOPE_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasscope.backends.base import NextTokenScore
from biasscope.backends.checkpoints import Checkpoint
from biasscope.cli.main import main
from biasscope.core.items import Item
from biasscope.dynamics.scoring.runfile import init_run
from biasscope.dynamics.scoring.units import SweepConfig, records_frame
from biasscope.dynamics.summary.write import write_dynamics_report
from biasscope.probes import Probe, load_probe
from biasscope.report.sensitivity import write_sensitivity_report
from biasscope.sensitivity.principles import Constitution, Principle
from biasscope.store.directory import RunStore
from biasscope.store.files import write_json
from biasscope.store.units import Unit
from browser import PAYLOAD, PAYLOADS, chromium, open_report, require_browser
from test_audit_dynamics import professional_records
from test_breakdown import write_statistics


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    with chromium() as context:
        yield context


# --- the reports, each with payloads wherever model (or user) text reaches the page -----------

@dataclass
class HostileProbe:
    """WinoBias items whose config (shown in the run configuration) carries the payload."""

    base: Probe
    name: str = "winobias-gender"

    def items(self, seed: int) -> list[Item]:
        return self.base.items(seed)

    def config(self) -> dict[str, object]:
        return {**self.base.config(), "template": PAYLOAD + " {sentence}"}


def add_professional_units(store: RunStore, ckpts: list[Checkpoint], emerge_at: int) -> None:
    """professional-bias units (option-scored, as a sweep stores them) of ``ckpts``: the
    stereotype preference appears at step ``emerge_at``."""
    for ckpt in ckpts:
        assert ckpt.step is not None
        frame = professional_records(ckpt.step, 2.0 if ckpt.step >= emerge_at else 0.0,
                                     model=ckpt.model)
        frame["revision"] = ckpt.revision
        frame["checkpoint"] = None
        store.write_unit(Unit(ckpt.model, ckpt.revision, "professional-bias", 0, ckpt.step),
                         frame)


def audit_dynamics_report(root: Path, winobias_dir: Path, mixed: bool) -> Path:
    """A sweep of hostile-named checkpoints through professional bias, beside WinoBias when
    ``mixed``; else of professional bias alone (no WinoBias figure may be drawn empty)."""
    store = RunStore(root)
    ckpts = [Checkpoint(PAYLOADS[1], "/models/y", f"{PAYLOADS[2]}rev{s}", s)
             for s in (0, 1000, 2000, 3000)]
    if mixed:
        dynamics_report(root, winobias_dir)
    else:
        init_run(store, [load_probe("professional-bias")], SweepConfig(
            ckpts, root, [0], comparable={"dtype": "auto", "first_token": False}))
    add_professional_units(store, ckpts, emerge_at=1000)
    return write_dynamics_report(root)


def dynamics_report(root: Path, winobias_dir: Path, snapshot: bool = False,
                    aside: bool = False) -> Path:
    """A sweep of two hostile-named models over three steps (every line figure, the p-value
    panels, the model comparisons and the heatmaps); ``snapshot``: the two models at one
    step each, with the occupation statistics (its bars, pro/anti, occupations and BLS
    figures); ``aside``: the first model's `best` and `final` beside its steps, named on the
    step axis past the last step."""
    probe = HostileProbe(load_probe("winobias-gender", data_dir=winobias_dir))
    # Named as the user names them (NAME=...), so run.json lists the checkpoints the units are
    # of: a run whose run.json asked for others would be reported unfinished.
    ckpts = [Checkpoint(PAYLOADS[m], f"/models/x{m}", f"{PAYLOADS[2]}rev{s}", s, named=True)
             for m in (0, 1) for s in (0, 1000, 2000)]
    if snapshot:
        ckpts = [Checkpoint(PAYLOADS[i], f"/models/x{i}", f"{PAYLOADS[2]}rev5", 5, named=True)
                 for i in (0, 1)]
    if aside:
        ckpts += [Checkpoint(PAYLOADS[0], f"/models/x0{r}", f"{PAYLOADS[2]}{r}", None, named=True)
                  for r in ("best", "final")]
    store = RunStore(root)
    init_run(store, [probe], SweepConfig(ckpts, root, [0, 1],
                                         comparable={"dtype": "auto", "first_token": False}))
    rng = np.random.default_rng(0)
    for ckpt in ckpts:
        for seed in (0, 1):
            unit = Unit(ckpt.model, ckpt.revision, probe.name, seed, ckpt.step)
            items = probe.items(seed)
            scores = [NextTokenScore(tuple(float(x) for x in rng.normal(-6, 0.5, len(it.options))),
                                     int(rng.integers(1, 40))) for it in items]
            store.write_unit(unit, records_frame(unit, items, scores))
    if snapshot:
        data = write_statistics(root.parent / "bls")
        return write_dynamics_report(root, data_dir=str(data))
    return write_dynamics_report(root)


def audit_report(root: Path) -> Path:
    probe = load_probe("professional-bias")
    lines = []
    for n, item in enumerate(probe.items(0)[:12]):
        trigger = item.options[int(item.groups.get("trigger", 0))]
        lines.append(json.dumps({"item_id": item.id,
                                 "response": f"The {trigger} {PAYLOADS[n % len(PAYLOADS)]}"}))
    lines.append(json.dumps({"item_id": PAYLOADS[1], "response": PAYLOAD}))  # unknown id
    responses = root.parent / f"{root.name}-responses.jsonl"
    responses.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["audit", "--responses", str(responses), "--probe", "professional-bias",
                 "--out", str(root)]) == 0
    return root / "report.html"


def judge_report(root: Path) -> Path:
    from biasscope.judge.batch import write_run

    ci = {"estimate": 0.6, "low": 0.4, "high": 0.8, "n": 10}
    result = {
        "items": 10, "detector": PAYLOADS[0], "no_response": 0, "sources": {PAYLOADS[2]: 10},
        "headline": {"verdict_rate": ci, "win_rate_a": {**ci, "estimate": 0.55},
                     PAYLOADS[3]: {**ci, "estimate": 0.3, "p_value": 0.04, "effect_size": 0.2}},
        "tables": {"labels": [{"label": p, "verdicts": 2, "share": 0.2} for p in PAYLOADS],
                   PAYLOADS[4]: [{"judges": f"{PAYLOADS[0]} / b", "estimate": 0.5}]},
        "sentences": [f"The judge said {p}" for p in PAYLOADS],
        "examples": [{"item_id": f"item-{n}", "prompt": p, "response": p, "label": p}
                     for n, p in enumerate(PAYLOADS)]}
    return write_run(root, "judge", [PAYLOADS[0], "judge-b"], {"labels": PAYLOADS[3]}, result)


def sensitivity_report(root: Path) -> Path:
    principles = tuple(Principle(f"p{i}", f"Principle {i}: {PAYLOADS[i % len(PAYLOADS)]}",
                                 ("group_0", "group_1")[i % 2]) for i in range(4))
    constitution = Constitution(principles, "hand-made", {"group_0": ("p0", "p2"),
                                                          "group_1": ("p1", "p3")})
    rng = np.random.default_rng(1)
    store = RunStore(root)
    root.mkdir(parents=True, exist_ok=True)
    models = ("rm-small", "rm-large")
    for m, model in enumerate(models):
        rows = []
        for prompt in range(8):
            original = float(rng.normal())
            for i, p in enumerate(principles):
                payload = PAYLOADS[(prompt + i) % len(PAYLOADS)]
                rows.append({
                    "model": model, "direction": "toward", "principle": p.id,
                    "principle_text": p.text, "group": p.group, "prompt_id": f"c{prompt}",
                    "original": original,
                    "perturbed": original + float(rng.normal(0.3 * (i + m), 0.5)),
                    "response": f"Sure. {payload}", "critique": f"Critique: {payload}",
                    "revision": f"Revised: {payload}", "preamble": prompt == 0,
                    "length_change": 5.0 * i, "error": None})
        store.write_unit(Unit(model, None, "sensitivity-toward", 0), pd.DataFrame(rows))
    from biasscope.sensitivity.summary import summarise

    write_json(store.run_json, {"kind": "sensitivity", "model": ", ".join(models),
                                "perturber": {"model": PAYLOADS[0]}, "directions": ["toward"]})
    write_json(store.summary_json, summarise(store.records(), constitution))
    return write_sensitivity_report(root)


def intervention_report(root: Path) -> Path:
    """An intervention analysis as `biasscope.intervene.analysis` writes it (no training),
    its arm, occupations and sentence carrying the payloads."""
    from biasscope.report.intervention import write_intervention_report

    def ci(estimate: float, half: float = 0.05, **more: Any) -> dict[str, Any]:
        return {"estimate": estimate, "low": estimate - half, "high": estimate + half, **more}

    arm, steps = PAYLOADS[3], [0, 50, 100]
    names = [f"{p} nurse" for p in PAYLOADS] + ["an occupation with a very long name " * 2]

    def point(step: int, sign: float) -> dict[str, Any]:
        return {"male_lean": ci(0.2 - sign * 0.001 * step), "pro_anti": ci(0.1, 0.3),
                "perplexity": ci(50 - 0.1 * step, 10),
                "occupations": {n: ci(0.3 - 0.1 * i + sign * 0.0005 * step, n=3)
                                for i, n in enumerate(names)}}

    test = {"p_adjusted": 0.01, "effect_size": 0.5}
    summary = {"arm": arm, "control": "control", "steps": steps, "recommended": 50,
               "arms": {a: {str(s): point(s, sign) for s in steps}
                        for a, sign in ((arm, 1.0), ("control", -1.0))},
               "did": {m: {str(s): ci(0.02 * s / 50, 0.01, test=test) for s in steps[1:]}
                       for m in ("male_lean", "pro_anti")},
               "cost": {str(s): ci(0.01 * s / 50, 0.005) for s in steps[1:]},
               "options": {"budget": 0.02, "confidence": 0.95},
               "sentence": f"The arm {PAYLOAD} did better than the control."}
    root.mkdir(parents=True, exist_ok=True)
    return write_intervention_report(RunStore(root), summary, root / "intervention.html")


REPORTS: dict[str, Callable[[Path, Path], Path]] = {
    "dynamics": dynamics_report,
    "dynamics-snapshot": lambda root, data: dynamics_report(root, data, snapshot=True),
    "dynamics-aside": lambda root, data: dynamics_report(root, data, aside=True),
    "dynamics-mixed": lambda root, data: audit_dynamics_report(root, data, mixed=True),
    "dynamics-audit-only": lambda root, data: audit_dynamics_report(root, data, mixed=False),
    "audit": lambda root, _: audit_report(root),
    "judge": lambda root, _: judge_report(root),
    "sensitivity": lambda root, _: sensitivity_report(root),
    "intervention": lambda root, _: intervention_report(root),
}


@pytest.mark.parametrize("kind", list(REPORTS))
def test_report_renders_and_runs_no_model_text(kind: str, browser: Any, tmp_path: Path,
                                               winobias_dir: Path) -> None:
    report = REPORTS[kind](tmp_path / "run", winobias_dir)
    html = report.read_text(encoding="utf-8")
    opened = open_report(browser, report, tmp_path / "screenshots", f"report-{kind}")

    # The figures draw: every figure div became a plotly plot with its SVG, without errors.
    assert not opened.console_errors, opened.console_errors
    assert not opened.page_errors, opened.page_errors
    dom = opened.dom
    figures = html.count("Plotly.newPlot(")
    assert figures >= 1
    if kind == "dynamics-snapshot":  # bars per model, not lines; the BLS figure drawn
        assert "<h2>Snapshot: metrics per model</h2>" in html and "Spearman ρ" in html
    if kind in ("dynamics-mixed", "dynamics-audit-only"):
        # The audit probe's section: sentences on top, its curves with CIs and markers.
        assert "<h2>Professional bias over training steps</h2>" in html
        assert "stereotype preference" in dom["text"] and "Tests over steps" in dom["text"]
        assert "significant from step 1000" in html
        assert html.index("<h2>Professional bias") < html.index("<h2>Run configuration")
        wino = "<h2>Significance of the JSD-P gap per checkpoint</h2>" in html
        assert wino == (kind == "dynamics-mixed")  # WinoBias figures first, where there are
        if wino:
            assert html.index("<h2>Significance of the JSD-P") < html.index(
                "<h2>Professional bias")
        else:
            assert "Not available" not in html and "no WinoBias records" in dom["text"]
    assert dom["figureDivs"] == dom["plots"] == dom["plotsWithSvg"] == figures, dom
    assert dom["plotsWithData"] == figures
    assert opened.hovered >= figures
    assert not opened.requests, opened.requests  # self-contained: nothing fetched

    # The planted model text ran nothing and made no elements, yet reads as text.
    assert not opened.dialogs, opened.dialogs
    assert dom["pwned"] is False
    assert dom["hostileScripts"] == 0 and dom["hostileImages"] == 0
    assert not dom["handlers"], dom["handlers"]
    assert not dom["jsLinks"], dom["jsLinks"]
    assert "<script>window.__pwned = 1" in dom["text"]

    assert opened.screenshot.stat().st_size > 10_000

    # Readable: no element wider than the page, no label cut at a figure's edge, no local
    # path or raw URL in what the reader sees.
    assert dom["pageWidth"] <= dom["viewport"], dom["tooWide"]
    assert not dom["tooWide"], dom["tooWide"]
    assert not dom["clippedText"], dom["clippedText"]
    assert not dom["cutOff"], dom["cutOff"]
    if kind.startswith("dynamics"):  # its number tables fit the page (others may scroll)
        assert not dom["scrollingTables"], dom["scrollingTables"]
    assert not dom["overlappingLabels"], dom["overlappingLabels"]
    if kind.startswith("dynamics") or kind in ("sensitivity", "intervention"):  # (audit.py:
        # the run folder's name in its header)
        assert str(tmp_path) not in dom["text"] and "http" not in dom["text"]
    # The headline, then the main figure above the fold (an audit-only run's figures are
    # its probes' sections).
    # (dynamics-aside: its headline names each checkpoint set aside, here by hostile names)
    if kind.startswith("dynamics") and kind not in ("dynamics-audit-only", "dynamics-aside"):
        assert dom["firstFigureTop"] < 900 - 300, dom["firstFigureTop"]
        headline = html.split('<section class="summary">')[1].split("</section>")[0]
        assert "n/a" not in headline and "CI" in headline
