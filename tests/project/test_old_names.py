"""Settings classes renamed from ``*Options`` to ``*Config`` still import by their old names for
one release, with a warning that names the new one."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from biasscope.core.renamed import renamed

OLD_NAMES = [  # (module that gave the old name, old name, the class's qualified new name)
    ("biasscope", "LiveOptions", "biasscope.dynamics.live.evaluate.LiveConfig"),
    ("biasscope.dynamics.live", "LiveOptions", "biasscope.dynamics.live.evaluate.LiveConfig"),
    ("biasscope.dynamics.live.evaluate", "LiveOptions",
     "biasscope.dynamics.live.evaluate.LiveConfig"),
    ("biasscope.backends.hf_model", "HFOptions", "biasscope.backends.hf_model.HFConfig"),
    ("biasscope.dynamics.analysis", "AnalysisOptions",
     "biasscope.dynamics.analysis.config.AnalysisConfig"),
    ("biasscope.sensitivity.harness", "SensitivityOptions",
     "biasscope.sensitivity.harness.HarnessConfig"),
    ("biasscope.backends.openai_http", "HTTPOptions", "biasscope.backends.openai_http.HTTPConfig"),
    ("biasscope.backends.specs", "GeneratorOptions", "biasscope.backends.specs.GeneratorConfig"),
    ("biasscope.backends.generators", "GeneratorOptions",
     "biasscope.backends.specs.GeneratorConfig"),
    ("biasscope.backends.reward", "RewardOptions", "biasscope.backends.reward.RewardConfig"),
    ("biasscope.judge", "JudgeOptions", "biasscope.judge.core.JudgingConfig"),
    ("biasscope.judge.core", "JudgeOptions", "biasscope.judge.core.JudgingConfig"),
    ("biasscope.intervene.analysis", "Options",
     "biasscope.intervene.analysis.InterventionAnalysisConfig"),
]


@pytest.mark.parametrize(("module", "old", "new"), OLD_NAMES)
def test_an_old_name_warns_and_gives_the_new_class(module: str, old: str, new: str) -> None:
    home, _, name = new.rpartition(".")
    with pytest.warns(DeprecationWarning) as caught:
        given = getattr(importlib.import_module(module), old)
    assert given is getattr(importlib.import_module(home), name)
    assert str(caught[0].message) == (f"{old} is now {name}; the old name goes in the next "
                                      "release")
    assert caught[0].filename == __file__  # points at the code that used the old name


def test_other_missing_names_still_fail() -> None:
    attribute = renamed("m", {"Old": "New"}, {"New": int}.__getitem__)
    with pytest.raises(AttributeError, match="module 'm' has no attribute 'Other'"):
        attribute("Other")


#: Names of `biasscope.core.stats` -> their names in `biasscope.core.intervals`.
MOVED_FROM_STATS = {**{name: name for name in (
    "Interval", "percentile_interval", "MEAN", "DIFFERENCE", "SMALL", "UNIT", "t_interval",
    "skewed_t_interval", "range_wilson", "flat_difference", "none_differ", "wilson",
    "boundary_rate", "paired_boundary_difference", "clustered_wilson", "group_t_interval")},
    "bootstrap_mean": "mean_ci", "bootstrap_means": "mean_cis",
    "bootstrap_difference": "mean_difference_ci"}


@pytest.mark.parametrize(("old", "new"), MOVED_FROM_STATS.items())
def test_an_interval_still_imports_from_stats_with_a_warning(old: str, new: str) -> None:
    from biasscope.core import intervals, stats

    with pytest.warns(DeprecationWarning) as caught:
        given = getattr(stats, old)
    # bootstrap_difference keeps its arguments (`stats._bootstrap_difference`); the rest are
    # the new functions themselves
    assert given is (stats._bootstrap_difference if old == "bootstrap_difference"
                     else getattr(intervals, new))
    assert str(caught[0].message) == (f"{old} is now biasscope.core.intervals.{new}; the old "
                                      "name goes in the next release")
    assert caught[0].filename == __file__
    with pytest.raises(AttributeError, match="has no attribute '_resampled'"):
        stats._resampled  # noqa: B018  (private: patched where it is looked up, not here)


def test_the_old_names_give_the_same_numbers() -> None:
    """Code written against ``stats.bootstrap_mean`` and its kin gets the numbers it got."""
    from biasscope.core import intervals, stats

    x, y = np.random.default_rng(0).exponential(size=(2, 12))
    with pytest.warns(DeprecationWarning):
        old = (stats.bootstrap_mean(x), stats.bootstrap_means([x, y]),
               stats.bootstrap_difference(x, y, bounds=(-1.0, 1.0)))
    assert old == (intervals.mean_ci(x), intervals.mean_cis([x, y]),
                   intervals.mean_difference_ci(x, y, bounds=(-1.0, 1.0)))


def test_the_old_difference_still_takes_the_resampling_arguments_it_no_longer_uses() -> None:
    """`mean_difference_ci` takes no resamples, method or seed (it resamples nothing); a call
    of its old name that passes them, by place or by name, runs and gets the same numbers."""
    from biasscope.core import intervals, stats

    x, y = np.random.default_rng(1).exponential(size=(2, 5))
    with pytest.warns(DeprecationWarning):
        old = stats.bootstrap_difference
    assert old(x, y, 0.9, 500, "percentile", 3, (-2.0, 2.0)) == old(
        x, y, confidence=0.9, n_resamples=99, method="BCa", seed=1, bounds=(-2.0, 2.0)) == (
        intervals.mean_difference_ci(x, y, 0.9, bounds=(-2.0, 2.0)))
    with pytest.raises(TypeError):
        intervals.mean_difference_ci(x, y, n_resamples=500)  # type: ignore[call-arg]
