"""The fairness audit: probes that ask a model questions, detectors that read its answers.

The probes themselves are registered with every other probe in ``biasscope.probes.PROBES``
and loaded with ``biasscope.probes.load_probe``. The names below are imported when first
named (`biasscope.core.imports.front`): ``biasscope audit --help`` reads the audit's
settings (`biasscope.audit.settings`) without loading the probes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biasscope.core.imports import front

if TYPE_CHECKING:
    from biasscope.probes import adult, bbq, professional
    from biasscope.probes.base import DETECTORS, AskedProbe, Detection, Detector

#: Each public name -> the module it comes from.
_HOMES = {"DETECTORS": "biasscope.probes.base", "AskedProbe": "biasscope.probes.base",
          "Detection": "biasscope.probes.base", "Detector": "biasscope.probes.base",
          "adult": "biasscope.probes", "bbq": "biasscope.probes",
          "professional": "biasscope.probes"}

if not TYPE_CHECKING:
    __getattr__, __dir__ = front(__name__, _HOMES)

__all__ = ["DETECTORS", "AskedProbe", "Detection", "Detector", "adult", "bbq", "professional"]
