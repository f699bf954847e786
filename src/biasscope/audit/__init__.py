"""The fairness audit: probes that ask a model questions, detectors that read its answers.

The probes themselves are registered with every other probe in ``biasscope.probes.PROBES``
and loaded with ``biasscope.probes.load_probe``; ``AUDIT_PROBES`` and ``load_audit_probe``
still work for one release, with a DeprecationWarning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from biasscope.core.errors import BiasscopeError
from biasscope.probes import adult, bbq, professional
from biasscope.probes.base import DETECTORS, AuditProbe, Detection, Detector


def _load_audit_probe(name: str, data_dir: str | Path | None = None, **options: Any
                      ) -> AuditProbe:
    from biasscope.probes import PROBES

    info = PROBES.get(name)
    if info is None or "generate" not in info.requests:
        raise BiasscopeError(f"unknown audit probe {name!r}; available: "
                             f"{', '.join(_audit_probes())}") from None
    probe = info.load(data_dir=data_dir, **options)
    return cast(AuditProbe, probe)  # a probe that takes generate requests is an AuditProbe


def _audit_probes() -> dict[str, Any]:
    from biasscope.probes import PROBES

    return {n: i.load for n, i in PROBES.items() if "generate" in i.requests}


def __getattr__(name: str) -> Any:
    # The old second registry: the probes that take generate requests, from the one registry.
    if name in ("AUDIT_PROBES", "load_audit_probe"):
        from biasscope.probes import deprecated

        new = "PROBES" if name == "AUDIT_PROBES" else "load_probe"
        deprecated(f"biasscope.audit.{name}", f"biasscope.probes.{new}")
        return _audit_probes() if name == "AUDIT_PROBES" else _load_audit_probe
    raise AttributeError(f"module 'biasscope.audit' has no attribute {name!r}")


__all__ = ["DETECTORS", "AuditProbe", "Detection", "Detector", "adult", "bbq", "professional"]
