"""Every bootstrap over a probe's items draws its resamples in blocks
(`biasscope.core.bootstrap.index_blocks`) and reduces each before drawing the next: at
``--resamples 100000`` the single draw of resamples x items held 1.2 GB of indices and as much
again of gathered values for CrowS-Pairs' 1508 pairs. With a small block, each bootstrap holds
a small part of that and gives the numbers of one block, run after run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from biasscope.core import bootstrap
from biasscope.dynamics.analysis.occupations import spearman
from biasscope.intervene import analysis
from biasscope.intervene.settings import InterventionAnalysisConfig
from biasscope.probes.crows_pairs.metrics import quantile_interval
from biasscope.probes.perplexity.items import perplexity_interval
from biasscope.probes.stereoset.metrics import with_intervals
from biasscope.probes.winogender.metrics import occupation_correlation
from biasscope.sensitivity.confounds import length_adjusted
from traced import traced_peak

N, RESAMPLES = 500, 4000  # one draw of them: 16 MB of indices


def _sites() -> dict[str, Callable[[], Any]]:
    r = np.random.default_rng(1)
    x, y = r.normal(size=N), r.normal(size=N)
    words = pd.DataFrame({"key": np.repeat(np.arange(N), 2), "gender": ["male", "female"] * N,
                          "p_occupation": r.uniform(size=2 * N),
                          "occupation": np.repeat([f"o{i}" for i in range(N)], 2),
                          "bls_pct_female": np.repeat(r.uniform(0, 100, N), 2)})
    examples = pd.DataFrame({"target": r.integers(0, 9, N).astype(str),
                             "pro": r.integers(0, 2, N), "related": r.integers(0, 2, N)})
    rewards = pd.DataFrame({"model": "m", "principle": "p", "length_change": x,
                            "original": y, "perturbed": r.normal(size=N)})
    docs = pd.DataFrame({"logprob": -r.uniform(1, 50, N), "tokens": r.integers(1, 30, N)},
                        index=pd.Index(range(N), name="item_id")).astype(np.float64)
    control = docs.assign(logprob=docs["logprob"] * r.uniform(0.9, 1.1, N))
    config = InterventionAnalysisConfig(n_resamples=RESAMPLES)
    return {
        "occupations.spearman": lambda: spearman(x, y, 0.95, RESAMPLES),
        "perplexity_interval": lambda: perplexity_interval(docs["logprob"], docs["tokens"],
                                                           0.95, RESAMPLES),
        "winogender.occupation_correlation": lambda: occupation_correlation(words, RESAMPLES),
        "stereoset.with_intervals": lambda: with_intervals(examples, RESAMPLES),
        "crows_pairs.quantile_interval": lambda: quantile_interval(x, 0.5, RESAMPLES),
        "confounds.length_adjusted": lambda: length_adjusted(rewards, 0.95, RESAMPLES),
        "intervene cost": lambda: analysis._cost(docs, control, config),
    }


@pytest.mark.parametrize("site", list(_sites()))
def test_a_bootstrap_in_many_blocks_holds_one_and_gives_the_numbers_of_one(
        site: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _sites()[site]
    whole = run()  # 4000 resamples of 500 items: one block
    monkeypatch.setattr(bootstrap, "BLOCK_CELLS", 1 << 12)  # 8 resamples a block: 500 blocks
    blocked, peak = traced_peak(run)
    assert peak < RESAMPLES * N * 8 / 8, f"{site}: {peak / 2**20:.1f} MiB at its peak"
    assert repr(blocked) == repr(run()) == repr(whole)


def test_crows_pairs_median_holds_less_than_the_single_draw_at_any_resamples() -> None:
    """CrowS-Pairs' median over its 1508 pairs at the default 2000 resamples once held the
    single draw's indices and its gathered values (2 x 23 MiB); in blocks it held a block's
    indices beside the values and `np.quantile`'s copy of them, three arrays (69 MiB). Now
    less than the single draw, and no more at ten times the resamples."""
    x = np.random.default_rng(0).normal(0.2, 1.5, 1508)
    peaks = [traced_peak(lambda n=n: quantile_interval(x, 0.5, n))[1] for n in (2000, 20_000)]
    single = 2 * 2000 * x.size * 8
    assert peaks[0] < single, f"{peaks[0] / 2**20:.1f} MiB against {single / 2**20:.1f}"
    assert peaks[1] < 1.1 * peaks[0], [f"{p / 2**20:.1f} MiB" for p in peaks]


def test_spearman_ranks_a_block_without_copying_it() -> None:
    """Occupations' ρ ranked each block whole (``rankdata``: 8.4 blocks of memory at its
    peak); ranked a few rows at a time into reused buffers it holds the block's indices and
    its two gathered sides (3 blocks), and gives ``rankdata``'s numbers bit for bit."""
    import scipy.stats as sps

    from biasscope.dynamics.analysis import occupations

    r = np.random.default_rng(2)
    x, y = r.normal(size=N).round(1), r.normal(size=N)  # ties on one side
    block = bootstrap.BLOCK_CELLS * 8
    found, peak = traced_peak(lambda: spearman(x, y, 0.95, bootstrap.BLOCK_CELLS // N + 1))
    assert peak < 3.2 * block, f"{peak / block:.2f} blocks"
    idx = r.integers(0, N, (300, N))
    rx, ry = sps.rankdata(x[idx], axis=1), sps.rankdata(y[idx], axis=1)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    whole = (rx * ry).sum(axis=1) / np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
    np.testing.assert_array_equal(occupations._rho(x[idx], y[idx]), whole, strict=True)
    assert found["low"] < found["estimate"] < found["high"]
