"""The judges a call names, known before any of them loads: a rerun's settings are checked on
what is known then (`judges_before_loading`), so another judge, name or setting is refused
before a local judge loads (minutes) or a GGUF file is converted; then the rest are made
(`make_judges`). `biasscope judge`, `judge-audit` and `counterfactual` make their judges so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from biasscope.backends.base import Generator
from biasscope.backends.checkpoints import from_model
from biasscope.backends.config import BackendConfig
from biasscope.backends.fingerprints import fingerprint_while_loading
from biasscope.backends.hf_generate import identity_before_loading
from biasscope.backends.hf_model import checkpoint_dtype, resolve_device
from biasscope.backends.labels import Named, label_models, model_labels


@dataclass(frozen=True)
class KnownJudges:
    """``labels``: each judge's label, in order; ``identities``: each one's identity as known
    before it loads, by label; ``made``: the judges made already (a server's, canned
    answers: made without a request), by position."""

    labels: list[str]
    identities: dict[str, dict[str, Any]]
    made: dict[int, Generator]


def judges_before_loading(backend: BackendConfig, named: Sequence[Named], option: str,
                          joiner: str = "", recorded: Mapping[str, Any] | None = None, *,
                          local_beside: bool = False) -> KnownJudges:
    """A judge that loads nothing is made now, sending no request: its label and whole
    identity are known. A local one's identity is what its spec settles
    (`identity_before_loading`: a GGUF file's path, SHA-256 and quantisation, hashed, not
    converted) and the dtype it loads in, where its files say it (`local_judge`).
    ``recorded``: the run's judges' identities by label; a local folder's whose entry holds
    its weights' ``fingerprint`` is hashed now (cached: its load does not hash again), so
    weights replaced under the same path are refused before they load. ``local_beside``: the
    call's other models are local (`BackendConfig.check`)."""
    parsed = backend.check([spec for _, spec in named], option,
                           local_beside=local_beside) if named else []
    served = [i for i, p in enumerate(parsed) if p.backend != "hf"]
    made = dict(zip(served, backend.generators([named[i][1] for i in served], option))) \
        if served else {}
    loaded = [i for i, p in enumerate(parsed) if p.backend == "hf"]
    device = resolve_device(backend.device).type if loaded else ""  # torch: a local judge's
    local = {i: local_judge(parsed[i].rest, device, backend.dtype) for i in loaded}
    labels = model_labels(named, [local[i][0] if i in local else made[i].label
                                  for i in range(len(named))], option, joiner)
    identities = {labels[i]: found for i, (_, found) in local.items()}
    for label, entry in identities.items():
        then = (recorded or {}).get(label)
        if isinstance(then, Mapping) and "fingerprint" in then:
            identities[label] = _hashed(entry)
    identities.update({labels[i]: g.identity() for i, g in made.items()})
    return KnownJudges(labels, {label: identities[label] for label in labels}, made)


def local_judge(model: str, device: str, dtype: str = "auto") -> tuple[str, dict[str, Any]]:
    """A local judge's label and identity as known before it loads (`identity_before_loading`),
    from its spec's model (``./dir``, ``hub/id@rev``, ``model.gguf``): nothing loaded or
    converted. With the dtype it loads in under ``--dtype dtype`` on ``device``
    (`resolve_device`'s type) where that and its files say it, by the rule its load checks
    (`checkpoint_dtype`): the one asked; under auto float32 on a CPU, on a GPU the one a local
    folder's config names, so a rerun in another dtype is refused unloaded too."""
    ckpt = from_model(model, convert=False)[0]
    found = identity_before_loading(ckpt)
    if (loads_in := checkpoint_dtype(ckpt, dtype, device)) is not None:
        found["dtype"] = loads_in
    return ckpt.label, found


def _hashed(entry: dict[str, Any]) -> dict[str, Any]:
    """A local folder's identity with its weights' and answer files' fingerprints, hashed
    before it loads; any other's as it is (a GGUF file's SHA-256 is in it already)."""
    if entry.get("gguf_file") or not Path(entry["source"]).is_dir():
        return entry
    with fingerprint_while_loading(entry["source"]) as fingerprints:
        return {**entry, **fingerprints()}


def make_judges(backend: BackendConfig, named: Sequence[Named], known: KnownJudges, option: str,
                joiner: str = "") -> list[Generator]:
    """Every judge of ``named``, labelled: those ``known`` made already, the others made now,
    a local one deferred (`HFGenerator`): it loads when a request is not in the response
    cache, so a rerun whose every answer is cached loads none. The flags were checked over
    every judge: beside a server's, a local one takes none."""
    rest = [i for i in range(len(named)) if i not in known.made]
    local = replace(backend, base_url=None, api_key_env=None) if known.made else backend
    loaded = dict(zip(rest, local.generators([named[i][1] for i in rest], option,
                                             deferred=True))) if rest else {}
    models = [known.made.get(i) or loaded[i] for i in range(len(named))]
    label_models(models, named, option, joiner)
    return models
