"""The fairness audit: probes that ask a model questions, detectors that read its answers.

The probes themselves are registered with every other probe in ``biasscope.probes.PROBES``
and loaded with ``biasscope.probes.load_probe``.
"""

from __future__ import annotations

from biasscope.probes import adult, bbq, professional
from biasscope.probes.base import DETECTORS, AskedProbe, Detection, Detector

__all__ = ["DETECTORS", "AskedProbe", "Detection", "Detector", "adult", "bbq", "professional"]
