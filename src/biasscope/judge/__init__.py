"""A debiased LLM judge that measures its own biases.

    from biasscope import load_generator
    from biasscope.judge import Judge, classify
    verdicts = classify(Judge(load_generator("openai:gpt-4o-mini")), texts, {"POSITIVE": "...",
                                                                          "NEGATIVE": "..."})
"""

from typing import TYPE_CHECKING

from biasscope.core.renamed import renamed
from biasscope.judge.batch import read_labels, verdict_row
from biasscope.judge.core import Call, Judge, JudgeError, JudgingConfig, Verdict
from biasscope.judge.detector import JudgeDetector
from biasscope.judge.job import check_task
from biasscope.judge.tasks import classify, compare, question_sha256
from biasscope.judge.verbosity import VerbosityBiasWarning, check_label_descriptions

__all__ = [
           "Call",
           "Judge",
           "JudgeDetector",
           "JudgeError",
           "JudgingConfig",
           "VerbosityBiasWarning",
           "Verdict",
           "check_label_descriptions",
           "check_task",
           "classify",
           "compare",
           "question_sha256",
           "read_labels",
           "verdict_row",
]


if not TYPE_CHECKING:  # the old name, for one release
    __getattr__ = renamed(__name__, {"JudgeOptions": "JudgingConfig"}, globals().__getitem__)
