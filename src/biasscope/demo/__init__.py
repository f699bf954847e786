"""The self-contained demo: a tiny model trained with an injected bias, swept and reported.

``run_demo(out, bias=0.95)`` lays out ``out`` as::

    out/checkpoints/checkpoint-<step>/   Hugging Face model dirs (plus train.json when done)
    out/run/                             the run directory: run.json, records/, summary.json
    out/run/report.html                  (or wherever the report writer puts it)

Everything is local: the corpus and the probes' sentences come from ``demo.corpus``. The
sweep runs WinoBias and professional bias (on the demo's occupations) at every checkpoint. A rerun
with the same ``out`` reuses finished training and resumes the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from biasscope.backends import lazy
from biasscope.backends.checkpoints import from_dirs
from biasscope.backends.hf_model import HFConfig
from biasscope.core import steps
from biasscope.core.errors import BiasscopeError
from biasscope.core.numbers import num
from biasscope.demo import corpus, train
from biasscope.demo.train import DemoConfig, Log, stderr_log
from biasscope.dynamics.analysis import AnalysisConfig
from biasscope.dynamics.live import LiveConfig, evaluate_now
from biasscope.dynamics.scoring import run_dynamics
from biasscope.dynamics.summary import write_dynamics_report
from biasscope.probes import Probe, professional
from biasscope.probes.winobias import WinoBiasGender

MODEL_NAME = "demo-tiny-neox"
#: The demo's smallest JSD-P gap of interest. Its prompts are near-identical in form, so even a
#: model trained on a neutral corpus has significant differences of a few thousandths (from its
#: random initialisation); a biased corpus gives gaps of several hundredths.
DEMO_MIN_GAP = 0.01


@dataclass(frozen=True)
class DemoResult:
    """Where the demo put things."""

    run_dir: Path
    report: Path
    checkpoints: list[Path]


def run_demo(out: Path, bias: float = 0.95, seed: int = 0, quiet: bool = False,
             config: DemoConfig | None = None) -> DemoResult:
    """Train (or reuse), sweep every checkpoint with the probes, and write the HTML report.

    ``bias`` is the share of sentences whose pronoun follows the referenced occupation's
    stereotype: 0.5 is none, 1.0 is total (below 0.5 the stereotype is reversed).
    """
    if not 0.0 <= bias <= 1.0:
        raise BiasscopeError(f"--bias must be between 0 and 1 (0.5 = no bias), got {bias}")
    log = stderr_log(quiet)
    log("loading torch")  # seconds on a cold start: the first line comes before it
    lazy.require_torch()  # without the 'hf' extra: one line naming it, before anything is written
    with steps.told_to(log):  # the library's steps (analysis, report) in the demo's lines
        return _run(Path(out), bias, seed, config or DemoConfig(), log)


def _run(out: Path, bias: float, seed: int, config: DemoConfig, log: Log) -> DemoResult:
    root, run_dir = out / "checkpoints", out / "run"
    probe = WinoBiasGender(corpus.eval_sentences(config.eval_pairings))
    # A second probe over the same checkpoints: professional bias on the demo's occupations.
    probes: list[Probe] = [probe,
                           professional.from_data(sentences=corpus.professional_sentences())]
    live = LiveConfig(seeds=config.seeds, batch_size=64, model_name=MODEL_NAME)

    def evaluate(model: object, tokenizer: object, saved: Path, step: int) -> None:
        # The live path (what BiasCallback runs): the run's records come from training itself.
        ckpt = from_dirs([saved], model=MODEL_NAME)[0]
        metrics = evaluate_now(model, tokenizer, probes, run_dir, step, live, saved_as=ckpt)
        log(f"step {step}: male-female JSD-P gap {metrics[f'{probe.name}/jsdp_gap']:+.4f}")

    checkpoints = train.finished(root, config, bias, seed)
    if checkpoints is None:
        log(f"writing a corpus of {num(config.documents)} documents")
        docs = list(corpus.documents(config.documents, bias, seed, config.qa_share,
                                     config.who_share))
        checkpoints = train.train(root, docs, config, bias, seed, log, on_checkpoint=evaluate)
    else:
        log(f"reusing {len(checkpoints)} checkpoints in {root}")
    # Units the live evaluation already wrote are skipped; this only fills gaps left by an
    # interrupted run.
    log("checking every checkpoint's records (scoring what an interrupted run left out)")
    store = run_dynamics(probes, from_dirs(checkpoints, model=MODEL_NAME), run_dir,
                         seeds=config.seeds, scoring=HFConfig(device="cpu", batch_size=64),
                         quiet=True)
    report = write_dynamics_report(store.root, options=AnalysisConfig(min_gap=DEMO_MIN_GAP))
    log(f"report: {report}")
    return DemoResult(run_dir=store.root, report=report, checkpoints=checkpoints)


__all__ = ["DEMO_MIN_GAP", "MODEL_NAME", "DemoConfig", "DemoResult", "run_demo"]
