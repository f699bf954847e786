"""An unfinished run: every verdict over the whole curve says it rests on the scored
checkpoints only, the stop's tradeoff (cost, gain, mirroring) as the emergence does."""

from __future__ import annotations

from pathlib import Path

from biasscope.dynamics.analysis import performance
from biasscope.dynamics.analysis.config import AnalysisConfig
from biasscope.dynamics.scoring.runfile import init_run
from biasscope.dynamics.scoring.units import SweepConfig
from biasscope.dynamics.summary.build import full_summary
from biasscope.probes import load_probe
from biasscope.store.directory import RunStore
from test_report import make_run, pythia

RESTS = ("This rests on the scored checkpoints only: the run is unfinished (step 3000 not yet "
         "scored).")


def test_the_tradeoff_of_the_stop_rests_on_the_scored_checkpoints(tmp_path: Path,
                                                                  winobias_dir: Path) -> None:
    winobias = load_probe("winobias-gender", data_dir=winobias_dir)
    run = make_run(tmp_path / "run", winobias, pythia(steps=(0, 1000, 2000)))
    store = RunStore(run)
    init_run(store, [winobias], SweepConfig(pythia(steps=(0, 1000, 2000, 3000)), run, [0, 1]))
    performance.save(store, "EleutherAI/pythia-70m",
                     {0: 0.5, 1000: 0.6, 2000: 0.61, 3000: 0.62}, "accuracy")
    model = full_summary(store, AnalysisConfig(n_resamples=200, budget=0.05)
                         )["analysis"]["models"]["EleutherAI/pythia-70m"]
    assert model["tradeoff"]
    mirroring = next(s for s in model["sentences"] if "mirrors the JSD-P gap" in s)
    assert mirroring.endswith(RESTS)
    assert sum(s.endswith(RESTS) for s in model["sentences"]) >= 5  # emergence … the stop
