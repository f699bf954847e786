"""Where each public dataset lives: a URL pinned to a commit, its SHA-256, and a local cache.

A file is found, in order, in ``--data-dir`` / ``$BIASSCOPE_DATA_DIR`` (a local copy with the
layout ``<data-dir>/<source>/<file>``, checked against the pinned checksum like the cache, so
a truncated or emptied copy is refused; with ``BIASSCOPE_OWN_DATA=1`` the files there are the
user's own and used as they are), then in the cache (``$BIASSCOPE_CACHE_DIR/data``, default
``~/.cache/biasscope/data``: the variable names the cache's root, `biasscope.core.cache_root`),
then downloaded into the cache and checked against its pinned checksum (never with
``BIASSCOPE_OFFLINE=1``). Files whose checksum could not be pinned are trusted on first use:
the hash seen is recorded beside the file and checked from then on.

Before the variable named the root, the cache was ``$BIASSCOPE_CACHE_DIR`` itself: a file
downloaded there (``$BIASSCOPE_CACHE_DIR/<source>/<file>``) is still found, checked against its
pin as any cached file, and used where it lies (`old_cache_dir`), with one line on stderr
saying where; nothing is downloaded again.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasscope.core.cache_root import VARIABLE, cache_root
from biasscope.core.digest import file_sha256
from biasscope.core.errors import DataError
from biasscope.core.spelling import option

_WINOBIAS = (
    "https://raw.githubusercontent.com/uclanlp/corefBias/"
    "0bce984dd081bbc10b0622f326727a024c607895/WinoBias/wino/data/"
)
_BBQ = "https://raw.githubusercontent.com/nyu-mll/BBQ/bea11bd97d79217245b5871acd247b9d6eb24598/"
_DT = (
    "https://raw.githubusercontent.com/AI-secure/DecodingTrust/"
    "161ae8321ced62f45fcd9ceb412e05b47c603cd4/data/fairness/fairness_data/"
)
_CCAI = "https://raw.githubusercontent.com/saffronh/ccai/3ff5dce9a1299d6035f1dd9e2f95be995311cb6e/"
_HH = "https://media.githubusercontent.com/media/anthropics/hh-rlhf/354e5c3cb8960630860dd5774a6ac2a58313bf4d/"
_ETHICS = ("https://raw.githubusercontent.com/AI-secure/DecodingTrust/"
           "161ae8321ced62f45fcd9ceb412e05b47c603cd4/data/machine_ethics/ethics/commonsense/")
_CROWS = ("https://raw.githubusercontent.com/nyu-mll/crows-pairs/"
          "8aaac11c485473159ec9328a65253a5be9a479dc/data/")
# The revised English CrowS-Pairs (Névéol et al., 2022; lm-evaluation-harness's
# crows_pairs_english): published on gitlab.inria.fr's moving branch only; this is the copy kept
# at a fixed commit in the repository of Si et al. (2025), 1,677 pairs.
_CROWS_REVISED = ("https://raw.githubusercontent.com/shijing001/bayes_factor_bias_detection/"
                  "9efa5cb6a9854d4f1407d475d86995a1a75968b3/")
_STEREOSET = ("https://raw.githubusercontent.com/moinnadeem/StereoSet/"
              "ead7d086a64a192a1eca88e0dd2fd163de375218/data/")
_WINOGENDER = ("https://raw.githubusercontent.com/rudinger/winogender-schemas/"
               "1c7f8b481ad8a234b41e9f76a424d6e856e13f7f/data/")


@dataclass(frozen=True)
class DataFile:
    """One file of a public dataset. ``sha256`` is None where it is trusted on first use."""

    source: str
    name: str
    url: str
    sha256: str | None
    size: int | None = None


def _f(source: str, name: str, url: str, sha256: str | None, size: int | None) -> DataFile:
    return DataFile(source, name, url, sha256, size)


SOURCES: dict[tuple[str, str], DataFile] = {
    (f.source, f.name): f
    for f in [
        _f("winobias", "pro_stereotyped_type1.txt.dev", _WINOBIAS + "pro_stereotyped_type1.txt.dev",
           "dd55a0d220fe4c0ceb63dd4648223fb4fe1a58d5ad95c116a002ad24b0e292a5", 32786),
        _f("winobias", "pro_stereotyped_type1.txt.test", _WINOBIAS + "pro_stereotyped_type1.txt.test",
           "db7838907238a758eeb5779e48f38c013b892910d6fe864456c59f04245c6689", 34820),
        _f("winobias", "anti_stereotyped_type1.txt.dev", _WINOBIAS + "anti_stereotyped_type1.txt.dev",
           "a4e0ebae344e78b56f657a42e8ae684b9db7747d177c5e7149c0907ebb7f3bf6", 32782),
        _f("winobias", "anti_stereotyped_type1.txt.test",
           _WINOBIAS + "anti_stereotyped_type1.txt.test",
           "331db5bd74bfefebf146a60b67645152a4a1991570d2a56f57154103ac361dd2", 34778),
        _f("winobias", "pro_stereotyped_type2.txt.dev", _WINOBIAS + "pro_stereotyped_type2.txt.dev",
           "8f0250de723cea9328e3eaf7169e07936f01aa5909ce7aa580db66eb803f4e86", 30884),
        _f("winobias", "pro_stereotyped_type2.txt.test", _WINOBIAS + "pro_stereotyped_type2.txt.test",
           "ea1c1fd94fa612e3cc44d7fa3cc4cb76021bb63fdf94f9826f430051e9052438", 31749),
        _f("winobias", "anti_stereotyped_type2.txt.dev", _WINOBIAS + "anti_stereotyped_type2.txt.dev",
           "763ad829ad724f9a85ead689ba8ca69072020cb1238def6210f0fc6a47b97e59", 30875),
        _f("winobias", "anti_stereotyped_type2.txt.test",
           _WINOBIAS + "anti_stereotyped_type2.txt.test",
           "336571ac1ea8c06cd2aba8e5dd2bd98e00acc0c48da3e4ec5ec7e54eb2633a8f", 31769),
        _f("winobias", "male_occupations.txt", _WINOBIAS + "male_occupations.txt",
           "6b82d88847b69d56d207a0c396e9830b031890de585e916e6b4e9bc50672657e", 169),
        _f("winobias", "female_occupations.txt", _WINOBIAS + "female_occupations.txt",
           "693bff12286c2c1d46c7d4d45a44a631574710c30b39c1a3001bb7bdebb44ed8", 177),
        _f("bbq", "Age.jsonl", _BBQ + "data/Age.jsonl",
           "46e805b3fc2d8cbd26eeb8e8430d98cf7b2dc9c83574ff3674e8ce4f0fca2a60", 3091834),
        _f("bbq", "Disability_status.jsonl", _BBQ + "data/Disability_status.jsonl",
           "375d40d9b71f056150264445ec189b13934998f3f49a1e311aa7578eb3b45e5f", 1336984),
        _f("bbq", "Gender_identity.jsonl", _BBQ + "data/Gender_identity.jsonl", None, None),
        _f("bbq", "Nationality.jsonl", _BBQ + "data/Nationality.jsonl",
           "a583e74666aec0341ded8aa3983e7cad694eb24de72c254d28b2df3035720090", 2900040),
        _f("bbq", "Physical_appearance.jsonl", _BBQ + "data/Physical_appearance.jsonl",
           "e48d7e13508565f4801574e611043470c25c95a0a62af3699cb5ee7cb02608fb", 1347476),
        _f("bbq", "Race_ethnicity.jsonl", _BBQ + "data/Race_ethnicity.jsonl", None, None),
        _f("bbq", "Race_x_gender.jsonl", _BBQ + "data/Race_x_gender.jsonl", None, None),
        _f("bbq", "Race_x_SES.jsonl", _BBQ + "data/Race_x_SES.jsonl", None, None),
        _f("bbq", "Religion.jsonl", _BBQ + "data/Religion.jsonl",
           "cb9555f9f3454a52cd2df85956b59bd7fcca5aa922c8527693b1164d08417616", 1118728),
        _f("bbq", "SES.jsonl", _BBQ + "data/SES.jsonl", None, None),
        _f("bbq", "Sexual_orientation.jsonl", _BBQ + "data/Sexual_orientation.jsonl",
           "2c71036b9e7584fe589c42aef32c1a42bc01b9a5e9b1b8704342630cdb08cefd", 729010),
        _f("bbq", "additional_metadata.csv", _BBQ + "supplemental/additional_metadata.csv",
           None, None),
        _f("decodingtrust", "adult_0_200_test_base_rate_0.0.jsonl",
           _DT + "adult_0_200_test_base_rate_0.0.jsonl",
           "f4b1e39f1c19cbede7bb6a9971481e2e5cb35df1dc10a74f1444cd799f1a13d5", 96881),
        _f("decodingtrust", "adult_0_200_test_base_rate_0.5.jsonl",
           _DT + "adult_0_200_test_base_rate_0.5.jsonl",
           "f8fdc7c2fd00d10b27f2fb7cd3295cafb7cfd0b39c4a3518940cd9b552b0e3f9", 96904),
        _f("decodingtrust", "adult_0_200_test_base_rate_1.0.jsonl",
           _DT + "adult_0_200_test_base_rate_1.0.jsonl",
           "3c3adcb5e49e0cf21b1e312df9416b4fb996f17205f037521b1928152ce3413d", 96915),
        _f("ccai", "clean_comments.csv", _CCAI + "clean_comments.csv",
           "2e4812b729fc424d26a79520e29c1fb9521ed30fed06b9a41f00ce3744479da8", 40975),
        _f("hh-rlhf", "harmless-base/test.jsonl.gz", _HH + "harmless-base/test.jsonl.gz",
           "ebfaaed21162a4de120ae85366075b34425e2a6303fac59b99555002f7016f03", 742801),
        _f("winogender", "occupations-stats.tsv", _WINOGENDER + "occupations-stats.tsv",
           "3f7f37c16381a70571356982ea7fe613ac700ad04a6d3b19b9f2be18248df567", 1578),
        _f("winogender", "all_sentences.tsv", _WINOGENDER + "all_sentences.tsv",
           "bd69da16bf228cb8df63fd0843aec2d8b5c36a7f21bf8c7b168bcc83932556c8", 83644),
        _f("winogender", "templates.tsv", _WINOGENDER + "templates.tsv",
           "496f2e2dc77296bcebcdd8865a8dc5715ce22b772de9abb5f531d5b3114c48a0", 14903),
        _f("crows-pairs", "crows_pairs_anonymized.csv", _CROWS + "crows_pairs_anonymized.csv",
           "dfb36986ce0502abbaf7055b9176da3d08d48e07df1251991b5dfbcbceab9d0c", 437764),
        _f("crows-pairs", "crows_pairs_EN_revised+210.csv",
           _CROWS_REVISED + "crows_pairs_EN_revised%2B210.csv",
           "c2c449a051ae93a61dae7a882c7a3efdfce04215c492ed2365d01c0861cecafe", 267281),
        _f("stereoset", "dev.json", _STEREOSET + "dev.json", None, None),
        _f("ethics-commonsense", "cm_test.csv", _ETHICS + "cm_test.csv",
           "a004f51b8f863d85eb5575d86e8723897f850fcb7fc8de38c1f30105dfb13c4d", 3180898),
        _f("lambada", "lambada_test.jsonl",
           "https://openaipublic.blob.core.windows.net/gpt-2/data/lambada_test.jsonl", None, None),
    ]
}

#: The help of every job's ``data_dir`` setting.
DATA_DIR_HELP = ("local copy of the datasets (<data-dir>/<source>/...; default "
                 "$BIASSCOPE_DATA_DIR, else the cache)")


#: What a data directory holds, for the messages that refuse one.
_HOLDS = "the folder holding <source>/<file> (e.g. winobias/male_occupations.txt)"


def _named(data_dir: object) -> str:
    """What set the data directory, as a message names it."""
    return option("data_dir") if data_dir is not None else "$BIASSCOPE_DATA_DIR"


def drop_data_dir(data_dir: object) -> str:
    """How to stop reading a local data directory: drop the flag, or unset the variable where
    that set it (the user may never have given a --data-dir)."""
    return f"drop {option('data_dir')}" if data_dir is not None else "unset BIASSCOPE_DATA_DIR"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The local data directory: the argument, else ``$BIASSCOPE_DATA_DIR``, else None. An
    empty argument, a file or a missing folder is refused in one line: ``''`` (an unset
    ``$VARIABLE``) used to mean the cache, and a file one error per data file under it."""
    given = data_dir is not None
    chosen = data_dir if given else os.environ.get("BIASSCOPE_DATA_DIR")
    named = _named(data_dir)
    if given and not str(chosen).strip():
        raise DataError(f"{named} is empty: give {_HOLDS}, or leave it out")
    if not chosen:
        return None
    root = Path(chosen).expanduser()
    if root.is_dir():
        return root
    what = "is a file, not a folder" if root.exists() else "does not exist"
    drop = "leave it out" if given else "unset it"
    raise DataError(f"{named} {chosen} {what}: give {_HOLDS}, or {drop}")


def cache_dir() -> Path:
    """The data cache: ``data/`` under the cache's root (``$BIASSCOPE_CACHE_DIR``, else
    ``~/.cache/biasscope``), beside remote runs' ``runs/``."""
    return cache_root() / "data"


def old_cache_dir() -> Path | None:
    """Where the data cache was while ``$BIASSCOPE_CACHE_DIR`` named it rather than the
    cache's root: that folder itself; None where the variable is unset (its default was
    ``~/.cache/biasscope/data`` then too)."""
    return cache_root() if os.environ.get(VARIABLE) else None


#: The old data caches a file was found in this process, said once each (`_old_cached`).
_SAID_OLD: set[Path] = set()


def _inside(root: Path, relative: str) -> Path:
    """``root/relative`` with links resolved, refused where it lands outside ``root`` (``..``,
    an absolute name, a symlink out): data is read, and the cache written, only under its root."""
    try:
        path, base = (root / relative).resolve(), root.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # NUL byte, symlink loop
        raise DataError(f"data file name {relative!r} under {root} cannot be resolved ({exc})"
                        ) from None
    if not path.is_relative_to(base):
        raise DataError(f"data file name {relative!r} escapes {root} (it resolves to {path})")
    return path


_RECORDERS: list[dict[str, Path]] = []


@contextlib.contextmanager
def recording() -> Iterator[dict[str, Path]]:
    """Collect every data file ``data_path`` resolves meanwhile (``source/name`` -> path), so
    a run can record the SHA-256 of what its probes read."""
    found: dict[str, Path] = {}
    _RECORDERS.append(found)
    try:
        yield found
    finally:
        _RECORDERS.remove(found)


def hashed(read: Mapping[str, Path]) -> dict[str, str]:
    """The SHA-256 of each whole file ``recording`` collected, for run.json ``data``: a run's
    items are hashed as ``--limit`` keeps them, and an edit to its file past them must be
    seen by a rerun too (the pins check only the upstream files)."""
    return {name: file_sha256(path) for name, path in sorted(read.items())}


def refuse_other_data(where: object, recorded: Any, read: Mapping[str, Path],
                      now: Mapping[str, str], of: str = "") -> None:
    """One line where a data file this call read (``read``, hashed as ``now``) is not the
    one the run in ``where`` recorded (``recorded``: its run.json ``data``); a file the run
    never recorded is not refused (another probe's, or a run from before they were).
    ``of``: what was hashed where it is not the whole file ("its requests"), so that the
    SHA-256 said is not taken for one `sha256sum` would print."""
    before = recorded if isinstance(recorded, Mapping) else {}
    hashed_what = f"SHA-256 of {of}" if of else "SHA-256"
    for name, sha in now.items():
        if isinstance(then := before.get(name), str) and then != sha:
            raise DataError(f"{where} was made from another {name} ({read[name]}: "
                            f"{hashed_what} {then[:12]}… then, {sha[:12]}… now): put back the "
                            "file it was made from, or use another --out for this one")


def data_path(
    source: str, name: str, data_dir: str | os.PathLike[str] | None = None, download: bool = True
) -> Path:
    """Path of one dataset file, from the local data dir, the cache, or a verified download."""
    path = _find(source, name, data_dir, download)
    for found in _RECORDERS:
        found[f"{source}/{name}"] = path
    return path


def _find(source: str, name: str, data_dir: str | os.PathLike[str] | None, download: bool
          ) -> Path:
    known = SOURCES.get((source, name))
    local_root = resolve_data_dir(data_dir)
    if local_root is not None:
        path = _inside(local_root, f"{source}/{name}")
        if path.is_file():
            if known is not None and not own_data():
                _verify_local(known, path)
            return path
        where = f"download {known.url}" if known else "add it"
        _refuse_source_folder(local_root, _named(data_dir), source, name)
        raise DataError(f"missing data file {path}: {where} to that path, or "
                        f"{drop_data_dir(data_dir)}")
    if known is None:
        raise DataError(f"unknown data file {source}/{name}; pass {option('data_dir')} with a "
                        "local copy")
    path = _inside(cache_dir(), f"{source}/{name}")
    if path.is_file():
        _verify(known, path)
        return path
    if (old := _old_cached(known)) is not None:
        return old
    if not download or os.environ.get("BIASSCOPE_OFFLINE", "") not in ("", "0"):
        raise DataError(f"missing data file {path}: download {known.url} or pass "
                        f"{option('data_dir')}")
    _download(known, path)
    return path


def _old_cached(known: DataFile) -> Path | None:
    """``known``'s file where the data cache was before ``$BIASSCOPE_CACHE_DIR`` named the
    cache's root (`old_cache_dir`), checked against its pin as any cached file, else None.
    It is used where it lies (a download of hundreds of megabytes is not repeated, and a user's
    folder is not rearranged unasked); the first one found says so on stderr, once."""
    old = old_cache_dir()
    if old is None:
        return None
    path = _inside(old, f"{known.source}/{known.name}")
    if not path.is_file():
        return None
    _verify(known, path)
    if old not in _SAID_OLD:
        _SAID_OLD.add(old)
        print(f"biasscope: found {path} where ${VARIABLE} kept data before it named the "
              f"cache's root; using it there (move {old}/<source> folders into {cache_dir()} "
              "to keep data and runs apart)", file=sys.stderr)
    return path


def _refuse_source_folder(root: Path, named: str, source: str, *names: str) -> None:
    """A data directory given as one source's own folder (``data/winobias`` for ``data``):
    said as such, rather than as a file missing under ``data/winobias/winobias/``."""
    # A name is joined under the folder, as `data_path` joins it: "/etc/passwd" is no file here.
    if not (root / source).is_dir() and any((root / name.lstrip("/")).is_file()
                                            for name in names):
        raise DataError(f"{named} {root} holds {source}'s files itself, not {source}/<file>: "
                        f"give its parent folder {root.parent} instead")


def own_data() -> bool:
    """Whether ``$BIASSCOPE_OWN_DATA`` says the data dir holds the user's own files (a subset,
    a translation, test fixtures): used as they are, not checked against the pins."""
    return os.environ.get("BIASSCOPE_OWN_DATA", "") not in ("", "0")


def _verify_local(known: DataFile, path: Path) -> None:
    """A pinned file in the data dir must be the upstream file: an emptied, truncated or
    edited copy would otherwise be read as the dataset, and the run would describe less."""
    if known.sha256 is None:
        return
    size = path.stat().st_size
    if (known.size is None or size == known.size) and file_sha256(path) == known.sha256:
        return
    raise DataError(
        f"{path} is not the pinned {known.source}/{known.name} ({size} bytes, expected "
        f"{known.size}; checksum differs): replace it with a fresh copy of {known.url}, or set "
        "BIASSCOPE_OWN_DATA=1 if the data dir holds your own files")


def _verify(known: DataFile, path: Path) -> None:
    seen = file_sha256(path)
    pinned = known.sha256
    marker = _inside(path.parent, path.name + ".sha256")  # never written through a link out
    if pinned is None and marker.is_file():
        pinned = marker.read_text().strip()
    if pinned is None:
        marker.write_text(seen + "\n")  # trust on first use
        return
    if seen != pinned:
        raise DataError(
            f"checksum mismatch for {path} (expected {pinned[:12]}…, got {seen[:12]}…): "
            "delete the file and run again to re-download"
        )


class _DownloadFailed(DataError):
    """A download that did not happen, with why: a source's files that all fail for one reason
    (no network) are said once, not once per file."""

    def __init__(self, message: str, reason: str, folder: Path) -> None:
        super().__init__(message)
        self.reason, self.folder = reason, folder


def _download(known: DataFile, path: Path) -> None:
    import http.client  # here: their import (SSL, HTTP) costs every report otherwise
    import urllib.request

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(known.url, timeout=60) as resp:
            length = resp.headers.get("Content-Length")
            while block := resp.read(1 << 20):
                out.write(block)
            got = out.tell()
        # A dropped connection ends read() early without an error: an unpinned file would be
        # kept, and its hash trusted from then on.
        if length is not None and length.isdigit() and got != int(length):
            raise DataError(f"the download of {known.url} stopped after {got} of {length} "
                            f"bytes: run again, or save it as {path} or pass "
                            f"{option('data_dir')}")
        if known.sha256 is not None and file_sha256(tmp) != known.sha256:
            raise DataError(
                f"downloaded {known.url} but its checksum does not match the pinned one; "
                f"get the file by other means and pass {option('data_dir')}"
            )
        os.replace(tmp, path)
        _verify(known, path)
    # URLError and TimeoutError are OSErrors; IncompleteRead (a chunked body cut short) is not
    except (OSError, http.client.HTTPException) as exc:
        raise _DownloadFailed(
            f"could not download {known.url} ({exc}); save it as {path} or pass "
            f"{option('data_dir')}", reason=str(exc), folder=path.parent
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def fetch(source: str, data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Every file of one source, downloaded and verified (for air-gapped preparation). Every
    file is tried, so that one error names all that are missing or wrong, not the first."""
    names = [name for (src, name) in SOURCES if src == source]
    if not names:
        known = sorted({src for src, _ in SOURCES})
        raise DataError(f"unknown data source {source!r}; known: {', '.join(known)}")
    root = resolve_data_dir(data_dir)  # an empty, missing or file one: said once, not per file
    if root is not None:
        _refuse_source_folder(root, _named(data_dir), source, *names)
    paths: list[Path] = []
    failed: list[DataError] = []
    for name in names:
        try:
            paths.append(data_path(source, name, data_dir))
        except DataError as exc:
            failed.append(exc)
    downloads = [exc for exc in failed if isinstance(exc, _DownloadFailed)]
    if (len(failed) > 1 and len(downloads) == len(failed)
            and len({(exc.reason, exc.folder) for exc in downloads}) == 1):
        first = downloads[0]
        raise DataError(f"could not download {len(failed)} of {len(names)} {source} files "
                        f"({first.reason}): save them in {first.folder} (their URLs and "
                        f"checksums: biasscope.data.sources) or pass {option('data_dir')}")
    if len(failed) > 1:
        raise DataError(f"{len(failed)} of {len(names)} {source} files are not ready: "
                        + "; ".join(map(str, failed)))
    if failed:
        raise failed[0]
    return paths
