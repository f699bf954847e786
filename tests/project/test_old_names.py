"""Settings classes renamed from ``*Options`` to ``*Config`` still import by their old names for
one release, with a warning that names the new one."""

from __future__ import annotations

import importlib

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


#: Names that moved from `biasscope.core.stats` to `biasscope.core.intervals`.
MOVED_FROM_STATS = ["Interval", "percentile_interval", "MEAN", "DIFFERENCE", "SMALL", "UNIT",
                    "bootstrap_mean", "t_interval", "skewed_t_interval", "range_wilson",
                    "bootstrap_means", "bootstrap_difference", "flat_difference", "none_differ",
                    "wilson", "boundary_rate", "paired_boundary_difference", "clustered_wilson",
                    "group_t_interval"]


@pytest.mark.parametrize("name", MOVED_FROM_STATS)
def test_an_interval_still_imports_from_stats_with_a_warning(name: str) -> None:
    from biasscope.core import intervals, stats

    with pytest.warns(DeprecationWarning) as caught:
        given = getattr(stats, name)
    assert given is getattr(intervals, name)
    assert str(caught[0].message) == (f"{name} is now biasscope.core.intervals.{name}; the old "
                                      "name goes in the next release")
    assert caught[0].filename == __file__
    with pytest.raises(AttributeError, match="has no attribute '_resampled'"):
        stats._resampled  # noqa: B018  (private: patched where it is looked up, not here)
