"""One PNG per report kind for the docs (``make screenshots``): the top of each report as a
reader's browser first shows it (``<kind>.png``) and its first figure (``<kind>-figure.png``),
in headless Chromium driven by Playwright (Debian's
/usr/bin/chromium, as the report tests use; ``scripts/browser-setup.sh`` installs both).

Built here, from the demo (trained once into ``--demo``, reused after):

- ``dynamics.png``: the demo's sweep over its checkpoints;
- ``snapshot.png``: the demo's last checkpoint alone (a one-checkpoint run is a snapshot);
- ``audit.png``: ``biasscope audit`` of that checkpoint on professional bias (option scores);
- ``intervention.png``: a short ``biasscope intervene`` from that checkpoint (CDA against a
  control on the demo's own corpus, 40 steps, evaluated every 20 on 60 WinoBias items: the
  WinoBias files come from ``--data-dir``, else $BIASSCOPE_DATA_DIR, else the cache, fetched
  once at their pinned commit).

Reports this script cannot build without a server or a real model (judge-audit, sensitivity)
are taken from ``make real-model``'s output when ``--real-model DIR`` is given; ``--report
NAME=PATH`` adds any other report, e.g. the docs' counterfactual one
(``real-model-counterfactual``, the two reward models of ``scripts/counterfactual_models.py``);
``biasscope report RUN --output PATH`` re-renders a stored run with the current code first.
A report without figures gets no ``-figure.png``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

CHROMIUM = os.environ.get("BIASSCOPE_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]
REAL_MODEL = {"judge-audit": "judge-audit/report.html", "sensitivity": "sensitivity/report.html"}


def demo_reports(demo: Path, work: Path, data_dir: str | None) -> dict[str, Path]:
    """The demo's sweep, its last checkpoint as a snapshot, an audit of that checkpoint and an
    intervention run from it."""
    from biasscope.backends.checkpoints import from_dirs
    from biasscope.backends.hf_model import HFConfig
    from biasscope.cli.main import main
    from biasscope.demo import DEMO_MIN_GAP, MODEL_NAME, DemoConfig, corpus, run_demo
    from biasscope.dynamics.analysis.config import AnalysisConfig
    from biasscope.dynamics.scoring.sweep import run_dynamics
    from biasscope.dynamics.summary.write import write_dynamics_report
    from biasscope.probes.winobias import WinoBiasGender

    result = run_demo(demo)
    last = result.checkpoints[-1]
    probe = WinoBiasGender(corpus.eval_sentences(DemoConfig().eval_pairings))
    store = run_dynamics(probe, from_dirs([last], model=MODEL_NAME), work / "snapshot",
                         seeds=DemoConfig().seeds, scoring=HFConfig(device="cpu"), quiet=True)
    snapshot = write_dynamics_report(store.root, options=AnalysisConfig(min_gap=DEMO_MIN_GAP))
    if main(["audit", "--model", f"hf:{last}", "--probe", "professional-bias",
             "--out", str(work / "audit")]) != 0:
        raise SystemExit("the audit of the demo's checkpoint failed")
    return {"dynamics": result.report, "snapshot": snapshot,
            "audit": work / "audit" / "report.html",
            "intervention": intervention_report(last, work, data_dir)}


def intervention_report(checkpoint: Path, work: Path, data_dir: str | None) -> Path:
    """CDA against a control from ``checkpoint``, on the demo's stereotyped corpus (600
    documents): the control keeps learning the stereotype, CDA sees both genders equally."""
    from biasscope.demo import corpus
    from biasscope.intervene import InterveneConfig, Training, run

    text = work / "intervene-text.txt"
    text.parent.mkdir(parents=True, exist_ok=True)
    text.write_text("\n".join(d.replace("\n", " ") for d in corpus.documents(600, 0.95, 0))
                    + "\n", encoding="utf-8")
    config = InterveneConfig(
        out=work / "intervene", model=str(checkpoint), text=str(text), method="cda",
        data_dir=data_dir, limit=60, eval_docs=12, quiet=True, device="cpu",
        save_recommended=False, training=Training(steps=40, every=20, batch_size=16,
                                                  seq_len=96, lr=3e-3))
    return run(config).intervention_report


def shoot(reports: dict[str, Path], out: Path, width: int, height: int) -> None:
    """``out/<name>.png`` of each report's first ``height`` pixels, once the figures drew."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as play:
        browser = play.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        for name, report in reports.items():
            page.goto(report.resolve().as_uri(), wait_until="load")
            page.wait_for_function(
                "() => [...document.querySelectorAll('div[id^=\"biasscope-figure-\"]')]"
                ".every(d => d.querySelector('.main-svg'))", timeout=30_000)
            page.screenshot(path=str(out / f"{name}.png"))
            # The first figure alone, for pages that show the picture rather than the page.
            figures = page.locator('div[id^="biasscope-figure-"]')
            shot = f"{name}.png"
            if figures.count():
                figures.first.screenshot(path=str(out / f"{name}-figure.png"))
                shot += f", {name}-figure.png"
            print(f"{out / shot}  <-  {report}", flush=True)
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    parser.add_argument("--demo", type=Path, default=Path("demo-run"),
                        help="the demo's folder: trained there if absent, reused if present")
    parser.add_argument("--work", type=Path, default=Path("demo-run/screenshots"),
                        help="where the snapshot and audit runs go")
    parser.add_argument("--real-model", type=Path, help="make real-model's output folder")
    parser.add_argument("--data-dir", help="local copy of the datasets (WinoBias for the "
                        "intervention run); default $BIASSCOPE_DATA_DIR, else the cache")
    parser.add_argument("--report", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--no-demo", action="store_true",
                        help="only the reports of --real-model and --report")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args()
    reports = {} if args.no_demo else demo_reports(args.demo, args.work, args.data_dir)
    if args.real_model:
        reports.update({name: args.real_model / path for name, path in REAL_MODEL.items()
                        if (args.real_model / path).is_file()})
    for given in args.report:
        name, _, path = given.partition("=")
        reports[name] = Path(path)
    shoot(reports, args.out, args.width, args.height)
    return 0


if __name__ == "__main__":
    sys.exit(main())
