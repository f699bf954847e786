"""API keys never reach a file or the terminal: a server that echoes the key in its error body
(every error status, and a connection dropped mid-body) through every HTTP backend and every
command that talks to one; and the redaction rules themselves."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from biasscope.backends.redact import MASK, error_line, redact, redact_url, redact_urls, url_secrets
from biasscope.cli.main import main
from require import missing_modules
from scripted_server import Reply, serve

KEY = "sk-PLANTED-q7Zx93LmWv2Rk8TtYb5NcH4"
STATUSES = [400, 404, 422, 429, 500, 503, "drop"]
BACKENDS = ["openai", "openai-compatible", "litellm"]
FAST = ["--retries", "0", "--timeout", "5", "--concurrency", "2"]


def echo(status: int | str) -> Any:
    """A server that answers every generation request with an error quoting the key."""
    said = {"error": {"message": f"bad request; you sent Authorization: Bearer {KEY} "
                                 f"(api_key={KEY}); the key {KEY[3:22]}... is not allowed"}}

    def script(path: str, body: dict[str, Any], n: int) -> Reply:
        if path.endswith("tokenize"):
            return Reply(404, {"error": "no tokenizer"})
        if status == "drop":
            return Reply(200, json.dumps(said).encode(), drop=True)
        return Reply(int(status), said)
    return script


def spec(backend: str, url: str) -> tuple[list[str], dict[str, str]]:
    """The --model spec, extra arguments and environment of each backend."""
    if backend == "openai":
        return ["openai:m", "--base-url", url], {"OPENAI_API_KEY": KEY}
    if backend == "openai-compatible":
        return [f"openai-compatible:{url}#m", "--api-key-env", "MY_KEY"], {"MY_KEY": KEY}
    return ["litellm:openai/m", "--base-url", url], {"LITELLM_API_KEY": KEY}


def commands(model: list[str], tmp: Path) -> dict[str, list[str]]:
    prompts = tmp / "in.jsonl"
    prompts.write_text('{"id": "a", "prompt": "Q?"}\n{"id": "b", "messages": '
                       '[{"role": "user", "content": "Q?"}], "options": ["yes", "no"]}\n')
    texts = tmp / "texts.jsonl"
    texts.write_text('{"id": 1, "text": "a fine day"}\n')
    labels = tmp / "labels.json"
    labels.write_text('{"HAPPY": "happy", "SAD": "sad"}')
    cache = ["--cache", str(tmp / "cache.sqlite"), *FAST]
    return {
        "generate": ["generate", "--model", *model, "--input", str(prompts), "--out",
                     str(tmp / "gen" / "out.jsonl"), *cache],
        "probe": ["audit", "--model", *model, "--probe", "professional-bias", "--limit", "2",
                  "--out", str(tmp / "probe"), *cache],
        "judge": ["judge", "--model", *model, "--input", str(texts), "--labels", str(labels),
                  "--out", str(tmp / "judge"), *cache],
    }


def leaks(root: Path) -> list[str]:
    """Files under ``root`` that hold the key, or any 8 characters of it."""
    pieces = [KEY[i:i + 8].encode() for i in range(len(KEY) - 7)]
    return [str(p) for p in root.rglob("*") if p.is_file()
            and any(piece in p.read_bytes() for piece in pieces)]


# A server that drops the connection can leave the HTTP client's socket for the garbage
# collector (inside the client library); collected here, its ResourceWarning is not a secret.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "canned"])  # no key
@pytest.mark.parametrize("status", STATUSES)
def test_an_echoed_key_reaches_no_file_and_no_terminal(backend, status, tmp_path, capsys,
                                                       monkeypatch):
    if backend == "litellm" and missing_modules("litellm"):
        pytest.skip("litellm is not installed")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with serve(echo(status)) as server:
        model, env = spec(backend, server.base_url)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        codes = {}
        for command, argv in commands(model, tmp_path).items():
            codes[command] = main(argv)
        assert len(server.generation_calls()) > 0  # the server did see (and echo) the key
    out, err = capsys.readouterr()
    assert codes["generate"] in (1, 2) and codes["probe"] in (1, 2), (codes, err)
    assert "Traceback" not in err
    assert not leaks(tmp_path), leaks(tmp_path)
    for piece in (KEY, KEY[3:22], KEY[-10:]):
        assert piece not in out and piece not in err, err
    if status != "drop" and status != 404:  # an error text is kept, with the key masked
        rows = (tmp_path / "gen" / "out.jsonl").read_text()
        assert MASK in rows
    gc.collect()  # this test's dropped sockets, under its own warning filter


def test_redact_masks_the_key_pieces_of_it_and_labelled_credentials():
    text = (f"Authorization: Bearer {KEY}; {{'api_key': '{KEY}'}}; x-api-key=abc123secret; "
            f"masked {KEY[:6]}***{KEY[-4:]}; part {KEY[5:20]}; token=fine")
    out = redact(text, [KEY])
    assert KEY not in out and KEY[5:20] not in out and "abc123secret" not in out
    assert out.count(MASK) >= 4 and "token=fine" in out
    assert f"{KEY[:6]}***{KEY[-4:]}" in out  # a server's own 10-character mask tells nothing
    assert redact("EMPTY keys stay", ["EMPTY"[:3]]) == "EMPTY keys stay"
    assert redact("no secret here", [None, ""]) == "no secret here"


def test_error_line_redacts_before_it_cuts():
    long = "x" * 290 + KEY + " and more"
    line = error_line(ValueError(long + "\nsecond line"), [KEY])
    assert len(line) <= 300 and KEY[:8] not in line and "second" not in line
    assert error_line(ValueError(""), [KEY]) == "ValueError"


def test_error_line_masks_a_url_credential_nobody_configured():
    """A server's error may quote another URL with its credential (a proxy's upstream): the
    failure record on disk held it, where only the configured key was removed."""
    line = error_line(ValueError("upstream http://u:sk-upstream-9xQ2@10.0.0.1:9/v1 refused"))
    assert "sk-upstream-9xQ2" not in line and "http://***@10.0.0.1:9/v1" in line


# A credential in the base URL itself: user info and a query parameter.
URL_KEY = "sk-INURL-w4Kp9Qz2Rt7Ym3Vx"
URL_TOKEN = "tok-INQUERY-h8Jd2Ls5Nf"


def answering(path: str, body: dict[str, Any], n: int) -> Reply:
    from scripted_server import chat, completion

    path = path.partition("?")[0]
    if path.endswith("tokenize"):
        return Reply(404, {"error": "no tokenizer"})
    return Reply(200, chat("A") if path.endswith("chat/completions") else completion("A"))


def with_credentials(base_url: str) -> str:
    scheme, _, rest = base_url.partition("://")
    return f"{scheme}://me:{URL_KEY}@{rest}?api-version=1&api-key={URL_TOKEN}"


def url_leaks(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file()
            and (URL_KEY.encode() in p.read_bytes() or URL_TOKEN.encode() in p.read_bytes())]


@pytest.mark.parametrize("given", ["spec", "--base-url"])
def test_a_credential_in_the_base_url_reaches_no_file_and_no_terminal(given, tmp_path, capsys):
    """``openai-compatible:http://me:KEY@host/v1?api-key=TOKEN#m`` (or ``--base-url``): the
    URL was recorded verbatim in run.json (a judge's spec, every backend identity) and quoted
    in messages. The requests still carry it; what is recorded and shown is masked."""
    with serve(answering) as server:
        url = with_credentials(server.base_url)
        model = [f"openai-compatible:{url}#m"] if given == "spec" else [
            "openai-compatible:m", "--base-url", url]
        argv = commands(model, tmp_path)
        pairs = tmp_path / "pairs.jsonl"
        pairs.write_text('{"id": "a", "prompt": "My wife?", "chosen": "Her.", "rejected": '
                         '"No."}\n')
        argv["counterfactual"] = ["counterfactual", "--judge-model", *model, "--pairs",
                                  str(pairs), "--out", str(tmp_path / "cf"),
                                  *argv["generate"][-8:]]
        codes = {command: main(args) for command, args in argv.items()}
        sent = server.calls
    out, err = capsys.readouterr()
    assert codes == dict.fromkeys(argv, 0), (codes, err)
    # The URL was used as given: its query on every request, its user info as Basic auth.
    assert sent and all(f"api-key={URL_TOKEN}" in path for path, _, _ in sent)
    assert all(h["authorization"].startswith("Basic ") for _, _, h in sent)
    assert not url_leaks(tmp_path), url_leaks(tmp_path)
    assert URL_KEY not in out + err and URL_TOKEN not in out + err
    recorded = json.loads((tmp_path / "judge" / "run.json").read_text())
    assert "http://***@127.0.0.1:" in json.dumps(recorded) and "api-key=***" in json.dumps(
        recorded)


def test_a_rotated_url_credential_still_hits_the_cache_and_another_server_does_not(
        tmp_path, capsys):
    with serve(answering) as one, serve(answering) as other:
        def generate(url: str, out: str) -> int:
            return main(["generate", "--model", f"openai-compatible:{url}#m", "--input",
                         str(tmp_path / "in.jsonl"), "--out", str(tmp_path / out),
                         "--cache", str(tmp_path / "cache.sqlite"), *FAST])
        commands([], tmp_path)  # writes in.jsonl
        assert generate(with_credentials(one.base_url), "a.jsonl") == 0
        asked = len(one.generation_calls())
        rotated = with_credentials(one.base_url).replace(URL_KEY, "sk-ROTATED-x9").replace(
            URL_TOKEN, "tok-ROTATED-y8")
        assert generate(rotated, "b.jsonl") == 0
        assert len(one.generation_calls()) == asked  # every answer from the cache
        assert generate(with_credentials(other.base_url), "c.jsonl") == 0
        assert len(other.generation_calls()) == asked  # another server is asked itself
    assert not url_leaks(tmp_path) and URL_KEY not in str(capsys.readouterr())


@pytest.mark.parametrize("argv", [
    ["generate", "--model", "openai-compatible:{url}#m"],  # nothing listens there
    ["judge", "--model", "openai-compatible:{url}#m"],  # its tokenizer is asked first
    ["generate", "--model", "openai-compatible:{url}"],  # no #MODEL: the spec is refused
    ["judge", "--model", "openai-compatible:{url}#m", "--model", "openai-compatible:{url}#m"],
])
def test_messages_mask_a_url_credential(argv, tmp_path, capsys):
    url = with_credentials("http://127.0.0.1:9/v1")
    paths = commands([], tmp_path)
    rest = paths["judge"][2:] if argv[0] == "judge" else paths["generate"][2:]
    rest = [x for x in rest if x != "--model"]
    code = main([a.format(url=url) for a in argv] + rest)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert URL_KEY not in err and URL_TOKEN not in err, err
    assert "127.0.0.1:9/" in err and "api-key=***" in err, err
    assert not url_leaks(tmp_path)


def test_redact_url_masks_user_info_and_secret_query_values_only():
    assert redact_url("http://me:sk-1@h:8/v1?api-version=2&key=abc&x") == (
        "http://***@h:8/v1?api-version=2&key=***&x")
    assert redact_url("https://TOKEN@h/v1") == "https://***@h/v1"
    plain = "http://127.0.0.1:8000/v1?api-version=2024-01"
    assert redact_url(plain) == plain and url_secrets(plain) == ()
    assert url_secrets("http://me:p%40ss@h/v1?access_token=t%2Fk") == (
        "p%40ss", "p@ss", "t%2Fk", "t/k")
    assert redact_urls("openai-compatible:http://me:pw12@h/v1#m: no") == (
        "openai-compatible:http://***@h/v1#m: no")
