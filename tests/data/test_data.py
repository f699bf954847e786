from __future__ import annotations

import hashlib
import io
import urllib.error
from pathlib import Path

import pytest

from biasscope.core.errors import DataError
from biasscope.core.spelling import on_command_line
from biasscope.data.sources import SOURCES, DataFile, data_path


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("BIASSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BIASSCOPE_DATA_DIR", raising=False)
    monkeypatch.delenv("BIASSCOPE_OFFLINE", raising=False)
    return tmp_path / "cache" / "data"  # the variable names the cache's root


def test_every_source_is_pinned_to_a_commit_over_https():
    assert len([k for k in SOURCES if k[0] == "winobias"]) == 10
    assert len([k for k in SOURCES if k[0] == "bbq"]) == 12
    for f in SOURCES.values():
        assert f.url.startswith("https://")
        assert f.sha256 is None or len(f.sha256) == 64
        if "github" in f.url:
            assert any(len(part) == 40 for part in f.url.split("/")), f.url


def test_local_data_dir_is_used_as_is(tmp_path):
    (tmp_path / "winobias").mkdir()
    (tmp_path / "winobias" / "male_occupations.txt").write_text("driver")
    assert data_path("winobias", "male_occupations.txt", tmp_path).read_text() == "driver"
    with pytest.raises(DataError, match=r"missing data file .*female_occupations\.txt: download "
                       r"https://raw\.githubusercontent\.com/uclanlp/corefBias/0bce984"):
        data_path("winobias", "female_occupations.txt", tmp_path)


def test_paths_cannot_escape_the_data_dir(tmp_path):
    with pytest.raises(DataError, match="escapes"):
        data_path("winobias", "../../etc/passwd", tmp_path)


class FakeResponse(io.BytesIO):
    def __init__(self, payload: bytes, headers: dict[str, str] | None = None) -> None:
        super().__init__(payload)
        self.headers = headers or {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def fake_source(monkeypatch, payload: bytes, sha: str | None) -> DataFile:
    known = DataFile("toy", "toy.txt", "https://example.invalid/toy.txt", sha, len(payload))
    monkeypatch.setitem(SOURCES, ("toy", "toy.txt"), known)
    calls = []

    def urlopen(url, timeout):
        calls.append(url)
        return FakeResponse(payload)

    monkeypatch.setattr("urllib.request.urlopen", urlopen)
    return known


def test_download_verifies_checksum_and_caches(cache, monkeypatch):
    payload = b"hello\n"
    fake_source(monkeypatch, payload, hashlib.sha256(payload).hexdigest())
    path = data_path("toy", "toy.txt")
    assert path == cache / "toy" / "toy.txt" and path.read_bytes() == payload
    monkeypatch.setattr("urllib.request.urlopen", None)  # a second call must not fetch
    assert data_path("toy", "toy.txt") == path
    path.write_bytes(b"tampered")
    with pytest.raises(DataError, match=r"checksum mismatch .*delete the file"):
        data_path("toy", "toy.txt")


def test_bad_download_is_not_kept(cache, monkeypatch):
    fake_source(monkeypatch, b"evil", "0" * 64)
    with pytest.raises(DataError, match="checksum does not match"):
        data_path("toy", "toy.txt")
    assert not list((cache / "toy").iterdir())


def test_unpinned_file_is_trusted_on_first_use(cache, monkeypatch):
    fake_source(monkeypatch, b"v1", None)
    path = data_path("toy", "toy.txt")
    marker = path.with_name("toy.txt.sha256")
    assert marker.read_text().strip() == hashlib.sha256(b"v1").hexdigest()
    path.write_bytes(b"v2")
    with pytest.raises(DataError, match="checksum mismatch"):
        data_path("toy", "toy.txt")


def test_a_cut_download_is_not_trusted_on_first_use(cache, monkeypatch):
    """A connection that drops mid-file gives urllib's read() a short body, without an error:
    an unpinned file must not be kept (nor its hash trusted from then on); a chunked one that
    drops raises http.client.IncompleteRead, which must be a one-line DataError too."""
    import http.client

    fake_source(monkeypatch, b"", None)
    cut = FakeResponse(b"half", {"Content-Length": "8"})
    monkeypatch.setattr("urllib.request.urlopen", lambda url, timeout: cut)
    with pytest.raises(DataError, match=r"stopped after 4 of 8 bytes"):
        data_path("toy", "toy.txt")
    assert not list((cache / "toy").iterdir())

    class Chunked(FakeResponse):
        def read(self, size=-1):
            raise http.client.IncompleteRead(b"ha")

    monkeypatch.setattr("urllib.request.urlopen", lambda url, timeout: Chunked(b""))
    with pytest.raises(DataError, match=r"could not download .*save it as"):
        data_path("toy", "toy.txt")
    assert not list((cache / "toy").iterdir())


def test_network_failure_says_where_to_put_the_file(cache, monkeypatch):
    fake_source(monkeypatch, b"", None)

    def down(url, timeout):
        raise urllib.error.URLError("no route")

    monkeypatch.setattr("urllib.request.urlopen", down)
    with pytest.raises(DataError, match=r"could not download .*save it as .*toy\.txt or pass "
                       r"data_dir=$"):
        data_path("toy", "toy.txt")
    with on_command_line(), pytest.raises(DataError, match=r"or pass --data-dir$"):
        data_path("toy", "toy.txt")


def test_offline_errors_name_the_setting_as_the_caller_gives_it(cache, monkeypatch, capsys):
    """A notebook user has no --data-dir to pass: load_probe says data_dir=, the command says
    --data-dir."""
    from biasscope.cli.main import main
    from biasscope.probes import load_probe

    monkeypatch.setenv("BIASSCOPE_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        load_probe("winobias-gender")
    assert str(err.value).endswith("or pass data_dir=") and "--data-dir" not in str(err.value)
    assert main(["items", "--probe", "winobias-gender", "--out", str(cache / "x.jsonl")]) == 2
    assert capsys.readouterr().err.strip().endswith("or pass --data-dir")


def test_offline_mode_never_downloads(cache, monkeypatch):
    fake_source(monkeypatch, b"x", None)
    monkeypatch.setenv("BIASSCOPE_OFFLINE", "1")
    with pytest.raises(DataError, match="missing data file"):
        data_path("toy", "toy.txt")


def test_a_data_dir_from_the_environment_is_named_as_such(cache, monkeypatch, capsys):
    """A data dir set by $BIASSCOPE_DATA_DIR, not by a flag: a file missing there says to
    unset the variable, not to drop a --data-dir the user never gave."""
    from biasscope.cli.main import main

    (cache.parent / "mine").mkdir(parents=True)
    (cache.parent / "other").mkdir()
    monkeypatch.setenv("BIASSCOPE_DATA_DIR", str(cache.parent / "mine"))
    assert main(["items", "--probe", "winobias-gender", "--out", str(cache / "x.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("or unset BIASSCOPE_DATA_DIR") and "--data-dir" not in err
    assert main(["items", "--probe", "winobias-gender", "--out", str(cache / "x.jsonl"),
                 "--data-dir", str(cache.parent / "other")]) == 2
    assert capsys.readouterr().err.strip().endswith("or drop --data-dir")


def test_data_fetch_takes_the_data_dir_its_errors_offer(cache, monkeypatch, capsys, tmp_path):
    """Offline, `data fetch` says "or pass --data-dir": it takes one, and checks the copy
    there (the fixture's files are the user's own here, so they are listed as they are)."""
    from biasscope.cli.main import main

    monkeypatch.setenv("BIASSCOPE_OFFLINE", "1")
    assert main(["data", "fetch", "winogender"]) == 2
    assert capsys.readouterr().err.strip().endswith("or pass --data-dir")
    mine = tmp_path / "mine"
    (mine / "winogender").mkdir(parents=True)
    for name in ("occupations-stats.tsv", "all_sentences.tsv", "templates.tsv"):
        (mine / "winogender" / name).write_text("x\n")
    assert main(["data", "fetch", "winogender", "--data-dir", str(mine)]) == 0
    assert capsys.readouterr().out.count(str(mine / "winogender")) == 3
    monkeypatch.setenv("BIASSCOPE_OWN_DATA", "0")
    assert main(["data", "fetch", "winogender", "--data-dir", str(mine)]) == 2
    assert "is not the pinned winogender/" in capsys.readouterr().err


def test_data_fetch_names_every_file_that_is_not_ready(cache, monkeypatch, capsys, tmp_path):
    """A data dir missing two of a source's files is told both at once, not one per call."""
    from biasscope.cli.main import main

    mine = tmp_path / "mine"
    (mine / "winogender").mkdir(parents=True)
    (mine / "winogender" / "templates.tsv").write_text("x\n")
    monkeypatch.setenv("BIASSCOPE_OWN_DATA", "1")
    assert main(["data", "fetch", "winogender", "--data-dir", str(mine)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("biasscope: error: 2 of 3 winogender files are not ready: missing data "
                          f"file {mine / 'winogender' / 'occupations-stats.tsv'}: download ")
    assert f"; missing data file {mine / 'winogender' / 'all_sentences.tsv'}: download " in err


def test_a_machine_without_network_is_told_once_not_per_file(cache, monkeypatch, capsys):
    """The tutorial's ``data fetch winobias`` offline said "could not download URL (no
    network); save it as PATH" ten times on one line of 3,000 characters."""
    from biasscope.cli.main import main

    def down(url, timeout):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr("urllib.request.urlopen", down)
    assert main(["data", "fetch", "winobias"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("biasscope: error: could not download 10 of 10 winobias files (<urlopen error "
                   f"Name or service not known>): save them in {cache / 'winobias'} (their URLs "
                   "and checksums: biasscope.data.sources) or pass --data-dir")
    assert not (cache / "winobias").exists() or not any((cache / "winobias").iterdir())


def test_a_data_dir_that_is_no_folder_of_sources_is_said_once(cache, monkeypatch, capsys,
                                                              tmp_path):
    """``--data-dir ""`` (an unset $VARIABLE) read the cache; a file, a missing folder or one
    source's own folder gave one "missing data file" per file, under paths that cannot be."""
    from biasscope.cli.main import main

    monkeypatch.setenv("BIASSCOPE_OFFLINE", "1")
    (tmp_path / "file.txt").write_text("x\n")
    (tmp_path / "winogender").mkdir()
    for name in ("occupations-stats.tsv", "all_sentences.tsv", "templates.tsv"):
        (tmp_path / "winogender" / name).write_text("x\n")
    said = {"": "--data-dir is empty: give the folder holding <source>/<file>",
            str(tmp_path / "file.txt"): f"--data-dir {tmp_path / 'file.txt'} is a file, not a "
                                        "folder",
            str(tmp_path / "none"): f"--data-dir {tmp_path / 'none'} does not exist",
            str(tmp_path / "winogender"): f"--data-dir {tmp_path / 'winogender'} holds "
                                          "winogender's files itself, not winogender/<file>: "
                                          f"give its parent folder {tmp_path} instead"}
    for given, start in said.items():
        for command in (["data", "fetch", "winogender"],
                        ["items", "--probe", "winogender", "--out", str(tmp_path / "i.jsonl")]):
            assert main([*command, "--data-dir", given]) == 2
            err = capsys.readouterr().err.strip()
            assert err.startswith(f"biasscope: error: {start}"), err
            assert len(err.splitlines()) == 1 and err.count("--data-dir") == 1, err
    assert not (tmp_path / "i.jsonl").exists()
    monkeypatch.setenv("BIASSCOPE_DATA_DIR", str(tmp_path / "none"))
    assert main(["data", "fetch", "winogender"]) == 2
    assert capsys.readouterr().err.strip().endswith("or unset it")
