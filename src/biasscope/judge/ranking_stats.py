"""The numbers behind each judge's leaderboard (`judge.rankings`, whose doc gives the
conventions and why): the systems' scores, win rates or Bradley-Terry log-strengths, one row
per bootstrap resample, from what each resample's items come down to (tallies, a block of
resamples at a time); the resamples, drawn by pair; a score's interval; Kendall's τ-b of two
judges' scores; and the test of two systems' difference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from biasscope.core.bootstrap import index_blocks
from biasscope.core.intervals import clustered_wilson, percentile_interval
from biasscope.core.normal import ndtr
from biasscope.core.stats import Array
from biasscope.core.student import t_cdf


def win_tallies(a: npt.NDArray[np.intp], b: npt.NDArray[np.intp], won: Array,
                n_systems: int) -> tuple[Array, Array]:
    """Each system's wins (ties half) and games, rows x systems: ``a``/``b`` the systems'
    codes and ``won`` the outcomes (1 a won, 0 b won, 0.5 tie, NaN no verdict), each rows x
    items (a resample per row). A row's tallies are its own, however many rows come along."""
    ok = np.isfinite(won)
    w, m = np.where(ok, won, 0.0), ok.astype(np.float64)
    rows = np.arange(won.shape[0])[:, None] * n_systems
    size = won.shape[0] * n_systems
    wins = (np.bincount((rows + a).ravel(), w.ravel(), size)
            + np.bincount((rows + b).ravel(), (m - w).ravel(), size))
    games = np.bincount((rows + a).ravel(), m.ravel(), size) + np.bincount(
        (rows + b).ravel(), m.ravel(), size)
    # bincount's weighted counts are float64 already: no copies
    return (np.asarray(wins, dtype=np.float64).reshape(-1, n_systems),
            np.asarray(games, dtype=np.float64).reshape(-1, n_systems))


def win_rates(wins: Array, games: Array) -> Array:
    """Win rates from `win_tallies`, NaN for a system without a game in that row."""
    with np.errstate(invalid="ignore", divide="ignore"):
        out: Array = np.where(games > 0, wins / games, math.nan)
    return out


def win_rate_scores(a: npt.NDArray[np.intp], b: npt.NDArray[np.intp], won: Array,
                    n_systems: int) -> Array:
    """Win rates, rows x systems (same inputs as `win_tallies`)."""
    return win_rates(*win_tallies(a, b, won, n_systems))


def bt_tallies(a: npt.NDArray[np.intp], b: npt.NDArray[np.intp], won: Array,
               n_systems: int) -> tuple[Array, Array]:
    """What Bradley-Terry needs of each row's items (same inputs as `win_tallies`): the
    games system x played as a against system y (rows x systems x systems) and each
    system's wins, ties half (rows x systems): a resample's items, whatever their number,
    come down to these."""
    ok = np.isfinite(won)
    w, m = np.where(ok, won, 0.0), ok.astype(np.float64)
    n_rows, size = won.shape[0], n_systems * n_systems
    rows = np.arange(n_rows)[:, None]
    met = np.bincount((rows * size + a * n_systems + b).ravel(), m.ravel(), n_rows * size)
    cell = rows * n_systems
    wins = (np.bincount((cell + a).ravel(), w.ravel(), n_rows * n_systems)
            + np.bincount((cell + b).ravel(), (m - w).ravel(), n_rows * n_systems))
    return (np.asarray(met, dtype=np.float64).reshape(n_rows, n_systems, n_systems),
            np.asarray(wins, dtype=np.float64).reshape(n_rows, n_systems))


def bt_fit(met: Array, wins: Array, prior: float = 1.0, tol: float = 1e-10,
           max_iter: int = 10_000) -> Array:
    """Bradley-Terry log-strengths from `bt_tallies`, rows x systems, centred to mean 0;
    ``prior`` virtual games, each a tie, between every two systems; NaN for a system without
    a real game in that row. All rows iterate together until the largest step of any is below
    ``tol``, so a row's last bits depend on the others: a bootstrap fits all its resamples'
    tallies in one call, however it drew them."""
    n_systems = wins.shape[1]
    games = met + met.transpose(0, 2, 1)
    played = games.sum(axis=2) > 0
    games = games + prior * (1.0 - np.eye(n_systems))
    wins = wins + prior * (n_systems - 1) / 2
    theta = np.zeros(wins.shape)
    for _ in range(max_iter):
        strength = np.exp(theta)
        per_game = games / (strength[:, :, None] + strength[:, None, :])
        new = np.log(wins) - np.log(per_game.sum(axis=2))
        new -= new.mean(axis=1, keepdims=True)
        step = float(np.abs(new - theta).max())
        theta = new
        if step < tol:
            break
    out: Array = np.where(played, theta, math.nan)
    return out


def bradley_terry(a: npt.NDArray[np.intp], b: npt.NDArray[np.intp], won: Array,
                  n_systems: int, prior: float = 1.0, tol: float = 1e-10,
                  max_iter: int = 10_000) -> Array:
    """Bradley-Terry log-strengths, rows x systems (same inputs as `win_tallies`; the rest
    as `bt_fit`)."""
    return bt_fit(*bt_tallies(a, b, won, n_systems), prior, tol, max_iter)


#: Per score, what a row's items come down to (a block of resamples at a time) and the
#: scores from those tallies (all resamples' at once).
SCORES: dict[str, tuple[Callable[..., tuple[Array, Array]], Callable[..., Array]]] = {
    "win-rate": (win_tallies, win_rates), "bradley-terry": (bt_tallies, bt_fit)}


def kendall_tau(x: Array, y: Array) -> Array:
    """Kendall's τ-b of the rows of ``x`` and ``y`` (resamples x systems), over the systems
    both score: Σ sign(xi-xj) sign(yi-yj) / sqrt(Σ sign(xi-xj)² Σ sign(yi-yj)²); NaN where
    either has no order."""
    i, j = np.triu_indices(x.shape[1], 1)
    ok = np.isfinite(x[:, i]) & np.isfinite(x[:, j]) & np.isfinite(y[:, i]) & np.isfinite(
        y[:, j])
    sx = np.where(ok, np.sign(np.nan_to_num(x[:, i] - x[:, j])), 0.0)
    sy = np.where(ok, np.sign(np.nan_to_num(y[:, i] - y[:, j])), 0.0)
    den = np.sqrt((sx**2).sum(axis=1) * (sy**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out: Array = np.where(den > 0, (sx * sy).sum(axis=1) / den, math.nan)
    return out


#: Resample indices drawn at once at most (`index_blocks`): a block is gathered into the
#: items' systems and outcomes, a few arrays of its size per judge, before it is tallied.
BLOCK_CELLS = 1 << 20


def draw_blocks(unit: npt.NDArray[np.intp], n_resamples: int, rng: np.random.Generator
                ) -> Iterator[npt.NDArray[np.intp]]:
    """Bootstrap resamples of the items (rows), drawn by their pairs (``unit``: each item's
    pair code) with all of a pair's items, in blocks of whole rows (`index_blocks`: together
    the single draw's); a pair of fewer items than the largest is padded with the no-game
    index ``unit.size``. Every item its own pair: the items drawn as they always were."""
    n = unit.size
    if n == 0:
        yield np.zeros((n_resamples, 0), dtype=np.intp)
        return
    if np.array_equal(unit, np.arange(n)):
        yield from index_blocks(n, n_resamples, rng, BLOCK_CELLS)
        return
    order = np.argsort(unit, kind="stable")
    sizes = np.bincount(unit)
    members = np.full((sizes.size, int(sizes.max())), n)
    members[unit[order], np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)] = order
    for block in index_blocks(sizes.size, n_resamples, rng, BLOCK_CELLS // members.shape[1]):
        yield members[block].reshape(block.shape[0], -1)


def score_interval(score: str, estimate: float, boot: Array, won: Array,
                   sides: tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]],
                   unit: npt.NDArray[np.intp], confidence: float) -> dict[str, float]:
    """A system's score with its percentile bootstrap interval; a win rate whose resamples
    all agree (a system that won, or lost, every game: 100% to 100%) with the Wilson interval
    of its wins (ties half) over its games instead, since resampling shows no spread where
    there is some, the games of one pair (``unit``) a cluster. ``sides``: the items where the
    system wrote response a, and b."""
    found = percentile_interval(estimate, boot, confidence).as_dict()
    ok = boot[np.isfinite(boot)]
    if score != "win-rate" or ok.size == 0 or np.ptp(ok) > 0:
        return found
    valid = np.isfinite(won)
    as_a, as_b = sides[0] & valid, sides[1] & valid
    honest = clustered_wilson(np.concatenate([won[as_a], 1.0 - won[as_b]]),
                              np.concatenate([unit[as_a], unit[as_b]]), confidence)
    return {"estimate": estimate, "low": honest["low"], "high": honest["high"]}


def difference_test(score: str, estimates: Array, boot: Array, x: int, y: int,
                    games: tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], Array,
                                 npt.NDArray[np.intp]]) -> tuple[int, float]:
    """The sign of a judge's score difference between systems ``x`` and ``y`` and its
    two-sided p-value (``games``: each item's systems a and b, its outcome, its pair). Win
    rates: a z-test against the largest variance verdicts in [0, 1] allow, a pair's verdicts
    as if they always agreed. Bradley-Terry: the bootstrap's standard error, scaled by
    √(n / (n − 1)) over the n pairs that involve x or y (a resample's variance divides by n),
    against Student's t on n − 1: unscaled, equal systems were shown apart in 5.4% of 6000
    runs of 3 systems x 12 items, scaled 4.9%. No difference, or no spread, gives p = 1."""
    estimate = float(estimates[x] - estimates[y])
    a, b, won, unit = games
    valid = np.isfinite(won)
    involved = valid & ((a == x) | (b == x) | (a == y) | (b == y))
    clusters = np.unique(unit[involved]).size
    if not math.isfinite(estimate) or estimate == 0 or clusters < 2:
        return 0, 1.0
    sign = 1 if estimate > 0 else -1
    if score == "win-rate":
        # How much the difference moves per unit of each outcome (in a's terms).
        slope = _win_rate_slope(a, b, valid, x) - _win_rate_slope(a, b, valid, y)
        spread = 0.5 * math.sqrt(float((np.bincount(unit, np.abs(slope)) ** 2).sum()))
        return sign, float(2 * ndtr(-abs(estimate) / spread))
    differences = boot[:, x] - boot[:, y]
    differences = differences[np.isfinite(differences)]
    spread = float(differences.std(ddof=1)) if differences.size > 1 else 0.0
    if spread == 0:
        return 0, 1.0
    spread *= math.sqrt(clusters / (clusters - 1))  # the bootstrap's variance is the plug-in's
    return sign, min(1.0, 2 * t_cdf(-abs(estimate) / spread, clusters - 1))


def _win_rate_slope(a: npt.NDArray[np.intp], b: npt.NDArray[np.intp],
                    valid: npt.NDArray[np.bool_], k: int) -> Array:
    """d(win rate of k) / d(outcome) per item: +1 / games where k wrote a, −1 / games where
    k wrote b, 0 elsewhere and where there was no verdict."""
    side = np.where(a == k, 1.0, np.where(b == k, -1.0, 0.0)) * valid
    games = float(np.abs(side).sum())
    out: Array = side / games if games else side
    return out


__all__ = ["SCORES", "bradley_terry", "bt_fit", "bt_tallies", "difference_test", "draw_blocks",
           "kendall_tau", "score_interval", "win_rate_scores", "win_rates", "win_tallies"]
