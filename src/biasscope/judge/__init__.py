"""A debiased LLM judge that measures its own biases.

    from biasscope import load_generator
    from biasscope.judge import Judge, classify
    verdicts = classify(Judge(load_generator("openai:gpt-4o-mini")), texts, {"POSITIVE": "...",
                                                                          "NEGATIVE": "..."})

The names below are imported when first named (`biasscope.core.imports.front`), so that
``biasscope judge --help`` reads the judge's settings (`biasscope.judge.settings`) alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biasscope.core.imports import front

if TYPE_CHECKING:
    from biasscope.judge.batch import labels_of, read_labels, verdict_row
    from biasscope.judge.core import (
        Call,
        Judge,
        JudgeError,
        JudgingConfig,
        Verdict,
        refuse_reordered,
        why_none,
    )
    from biasscope.judge.detector import JudgeDetector
    from biasscope.judge.job import check_task
    from biasscope.judge.label_sets import labels_sha256, refuse_other_label_set
    from biasscope.judge.panel import KnownJudges, judges_before_loading, make_judges
    from biasscope.judge.rates import answered
    from biasscope.judge.tasks import classify, compare, question_sha256
    from biasscope.judge.verbosity import VerbosityBiasWarning, check_label_descriptions

#: Each public name -> the module it comes from.
_HOMES = {
    **dict.fromkeys(("labels_of", "read_labels", "verdict_row"), "biasscope.judge.batch"),
    **dict.fromkeys(("Call", "Judge", "JudgeError", "JudgingConfig", "Verdict",
                     "refuse_reordered", "why_none"), "biasscope.judge.core"),
    "JudgeDetector": "biasscope.judge.detector",
    "check_task": "biasscope.judge.job",
    **dict.fromkeys(("labels_sha256", "refuse_other_label_set"), "biasscope.judge.label_sets"),
    **dict.fromkeys(("KnownJudges", "judges_before_loading", "make_judges"),
                    "biasscope.judge.panel"),
    "answered": "biasscope.judge.rates",
    **dict.fromkeys(("classify", "compare", "question_sha256"), "biasscope.judge.tasks"),
    **dict.fromkeys(("VerbosityBiasWarning", "check_label_descriptions"),
                    "biasscope.judge.verbosity"),
}

__all__ = [
           "Call",
           "Judge",
           "JudgeDetector",
           "JudgeError",
           "JudgingConfig",
           "KnownJudges",
           "VerbosityBiasWarning",
           "Verdict",
           "answered",
           "check_label_descriptions",
           "check_task",
           "classify",
           "compare",
           "judges_before_loading",
           "labels_of",
           "labels_sha256",
           "make_judges",
           "question_sha256",
           "read_labels",
           "refuse_other_label_set",
           "refuse_reordered",
           "verdict_row",
           "why_none",
]


if not TYPE_CHECKING:  # JudgeOptions: the old name, for one release
    __getattr__, __dir__ = front(__name__, _HOMES, {"JudgeOptions": "JudgingConfig"})
