"""StereoSet over training steps: SS, LMS and ICAT per checkpoint and the report's section."""

from __future__ import annotations

from biasscope.probes.facets import Panel, Panels, StepStatistics
from biasscope.probes.stereoset.metrics import stereoset_values

STEP_STATISTICS = StepStatistics(stereoset_values, ("ss", "icat"), {
    "ss": "StereoSet stereotype score (SS; 50 is unbiased)",
    "lms": "StereoSet language-modelling score (LMS)",
    "icat": "StereoSet idealized CAT score (ICAT)"}, resampled=("ss", "lms", "icat"))

PANELS = Panels("StereoSet over training steps", (
    Panel("SS, LMS and ICAT", "Stereotype score (share of examples whose stereotype outscores "
          "its anti-stereotype; 50 is unbiased), language-modelling score (share of meaningful "
          "fills outscoring the unrelated one) and ICAT = LMS x min(SS, 100 − SS) / 50, each "
          "averaged over target terms as StereoSet's evaluation does ({level} bootstrap CIs over "
          "examples).", ("ss", "lms", "icat")),
    Panel("SS per domain", "The stereotype score of each bias domain ({level} bootstrap CIs).",
          ("ss:*",))))
