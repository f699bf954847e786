"""What a call into a counterfactual run's ``--out`` must agree with, apart from the scoring
in `biasscope.counterfactual.job`: checked before any model loads (`check_before_loading`:
the pairs, their file, each scorer as known then, the panel's order), then run.json's
settings merged over the recorded ones once the scores are stored (`start`); and the rewards
the run stored, which a rerun reads back rather than ask again (`held_rewards`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from biasscope.backends.reward import whole_identity
from biasscope.core.errors import BiasscopeError
from biasscope.core.jsonl import read_jsonl
from biasscope.counterfactual.settings import CounterfactualConfig
from biasscope.data.sources import hashed, refuse_other_data
from biasscope.judge import refuse_reordered
from biasscope.store.directory import RunStore
from biasscope.store.run_json import check_run, model_versions, refuse_foreign_folder, start_run
from biasscope.store.settings import check_known, gain_identity, merge_settings, refuse_renamed

SCORES = "scores.jsonl"


def check_before_loading(config: CounterfactualConfig, now: dict[str, Any],
                         judges: list[str], ordered: bool = False,
                         read: dict[str, Path] | None = None) -> None:
    """Refuse, writing nothing, what `start` and the job's `_check_distinct` would refuse
    without the loaded models: a folder that is another kind of run or none, a damaged
    run.json, other pairs or seed, a scorer's settings as known before it loads
    (``now["scorers"]``: a reward model's `identities_before_loading`, a local judge's
    `_judges_before_loading`) other than recorded or under another name, a judge's name
    (``judges``: those known) that a reward model has, and (``ordered``: ``judges`` are all
    the judges' labels) the run's panel of judges in another order. The rest once they are
    loaded. ``read``: the data file the built-in pairs came from, named
    (`refuse_other_data`) where it changed since."""
    if shared := [name for name in now["scorers"] if name in judges
                  and now["scorers"][name].get("backend") == "hf-reward"]:
        raise BiasscopeError(f"{shared[0]!r} names both a --reward-model and a --judge-model "
                             "(scores and settings are kept by name): name them apart with "
                             "NAME=SPEC")
    store = RunStore(Path(config.out))

    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        if previous is not None:
            _refuse_other_split(store, previous, read or {})
            _refuse_other_pairs(store, previous, config.pairs, now["pairs"])
            check_known(store.run_json, _gain_file(previous.get("settings", {}), now),
                        now, "scorers", "scorer", _whole, {"scorers": "scorer"})
        return {}

    if store.run_json.is_file() or store.remote is not None:
        check_run(store, "counterfactual", build)
    else:
        refuse_foreign_folder(store)
    if ordered:
        refuse_reordered_panel(config, judges)


def _refuse_other_split(store: RunStore, previous: dict[str, Any], read: dict[str, Path]
                        ) -> None:
    """The hh-rlhf split edited since the run drew its pairs (``pairs.file_sha256``, the
    whole file's SHA-256, which an edit past the N pairs kept changes too), refused as an
    audit refuses a data file: naming the file and both SHA-256, not "a different 'pairs'".
    A file of the user's pairs is `_refuse_other_pairs`'."""
    pairs = (previous.get("settings") or {}).get("pairs")
    if not isinstance(pairs, dict) or pairs.get("source") == "jsonl":
        return
    if then := pairs.get("file_sha256"):
        refuse_other_data(store.root, dict.fromkeys(read, then), read, hashed(read))


def _refuse_other_pairs(store: RunStore, previous: dict[str, Any], given: str,
                        now: dict[str, Any]) -> None:
    """A file of the user's pairs other than the run's (edited since, or another file),
    refused as an audit refuses a data file, naming it: by the whole file's SHA-256, or, in
    a run recorded before that was (``file_sha256`` ""), by its pairs' (``sha256``)."""
    pairs = (previous.get("settings") or {}).get("pairs")
    if not isinstance(pairs, dict) or pairs.get("source") != "jsonl" \
            or now["source"] != "jsonl":
        return
    key = "file_sha256" if pairs.get("file_sha256") else "sha256"
    refuse_other_data(store.root, {"--pairs": pairs.get(key)}, {"--pairs": Path(given)},
                      {"--pairs": now[key]}, of="" if key == "file_sha256" else "its pairs")


def _gain_file(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """``before`` (recorded settings) with the SHA-256 of its file of pairs, where the run
    recorded none (made before it was) and the pairs are those ``now`` has: it gains it."""
    pairs, ours = before.get("pairs"), now["pairs"]
    if (isinstance(pairs, dict) and pairs.get("source") == ours["source"] == "jsonl"
            and pairs.get("file_sha256") == "" and pairs.get("sha256") == ours["sha256"]):
        return {**before, "pairs": {**pairs, "file_sha256": ours["file_sha256"]}}
    return before


def _whole(before: dict[str, Any]) -> dict[str, Any] | None:
    """A scorer's entry as known before loading made whole (`refuse_renamed`): a local model's
    by `whole_identity`; a server's or canned judge's is whole already (made, not loaded)."""
    return whole_identity(before) if before.get("backend") in _LOADED else dict(before)


_LOADED = ("hf", "hf-reward")  # the backends of scorers loaded from weights


def refuse_reordered_panel(config: CounterfactualConfig, judges: Sequence[str]) -> None:
    """A panel of judges whose scores the run holds, given in another order: order decides
    its scores (`refuse_reordered`), and it would be stored beside them as another scorer."""
    path = Path(config.out) / SCORES
    if len(judges) < 2 or not path.is_file():
        return
    panels = dict.fromkeys(str(r.get("scorer")) for _, r in read_jsonl(path) if "calls" in r)
    for panel in panels:
        refuse_reordered(path, panel.split("+"), judges, "--judge-model")


def held_rewards(path: Path, scorers: Iterable[str]
                 ) -> dict[str, dict[tuple[str, str, str], float | None]]:
    """The rewards ``scores.jsonl`` at ``path`` holds of each of ``scorers`` (reward models
    whose settings the run recorded as they are now: `start` refused any other), by pair,
    version and response, for a rerun to read back rather than ask again."""
    wanted = set(scorers)
    out: dict[str, dict[tuple[str, str, str], float | None]] = {}
    if not path.is_file() or not wanted:
        return out
    for _, r in read_jsonl(path):
        if isinstance(r, dict) and r.get("scorer") in wanted and "response" in r:
            key = (str(r.get("pair")), str(r.get("version")), str(r.get("response")))
            out.setdefault(str(r["scorer"]), {})[key] = r.get("score")
    return out


def start(store: RunStore, settings: dict[str, Any], waiting: Sequence[str] = ()) -> None:
    """run.json with ``settings`` merged over the recorded ones, or a one-line refusal.
    ``waiting``: scorers (a judge's) checked as the others are but recorded only once their
    scores are stored (until then as the run recorded them, or not at all): a judge whose
    requests failed leaves no settings behind to refuse the call with its server put right."""
    def build(previous: dict[str, Any] | None) -> dict[str, Any]:
        if previous is not None:
            refuse_renamed(store.run_json, previous.get("settings", {}).get("scorers"),
                           settings["scorers"], "scorer")
        merged = dict(settings) if previous is None else merge_settings(
            store.run_json, gain_identity(_gain_file(previous.get("settings", {}), settings),
                                          settings),
            settings, {"scorers": "scorer"})
        had = ((previous or {}).get("settings") or {}).get("scorers") or {}
        merged["scorers"] = {name: had[name] if name in waiting else entry
                             for name, entry in merged["scorers"].items()
                             if name not in waiting or name in had}
        return {"model": ", ".join(merged["scorers"]), "settings": merged}

    start_run(store, "counterfactual", build, now=model_versions(
        entry for name, entry in settings["scorers"].items() if name not in waiting))
