"""The CLI driven with generated bad arguments: whatever a careless user types into a numeric
or path option, the command ends with a non-zero exit and a message, never a traceback.

Every command gets arguments that make it fail before any model loads or any request leaves
(a missing input file, an unreachable server, no data), so one example takes milliseconds;
the option under test is one of the command's numeric or path options with a generated value.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from biasscope.cli.main import main

NOWHERE = "openai-compatible:http://127.0.0.1:9/v1#m"
NUMERIC = {
    "dynamics": ["--batch-size", "--limit", "--seeds", "--gpus-per-checkpoint",
                 "--cpus-per-checkpoint",
                 "--alpha", "--min-gap", "--budget", "--confidence", "--resamples"],
    "report": ["--alpha", "--min-gap", "--budget", "--confidence", "--resamples"],
    "demo": ["--bias", "--seed"],
    "generate": ["--temperature", "--max-tokens", "--seed", "--top-logprobs", "--concurrency",
                 "--timeout", "--retries"],
    "audit": ["--limit", "--max-tokens", "--temperature", "--seed", "--concurrency",
              "--timeout", "--retries", "--base-rate", "--confidence", "--resamples"],
    "items": ["--limit", "--base-rate"],
    "judge": ["--samples", "--seed", "--concurrency", "--timeout", "--retries",
              "--confidence", "--resamples"],
    "judge-audit": ["--seed", "--timeout", "--confidence", "--resamples"],
    "sensitivity": ["--batch-size", "--max-tokens", "--seed", "--concurrency", "--timeout",
                    "--retries"],
    "intervene": ["--steps", "--every", "--lr", "--runs", "--budget", "--confidence",
                  "--resamples"],
}
PATHS = {
    "dynamics": ["--models-file", "--prompt-template", "--out", "--data-dir",
                 "--performance-csv", "--lm-eval-results"],
    "report": ["--output"],
    "demo": ["--out"],
    "generate": ["--input", "--out", "--cache"],
    "audit": ["--responses", "--out", "--data-dir", "--cache"],
    "items": ["--out", "--data-dir"],
    "judge": ["--input", "--labels", "--out", "--cache"],
    "judge-audit": ["--input", "--labels", "--out"],
    "sensitivity": ["--principles", "--prompts", "--out", "--critique-template",
                    "--revision-template", "--away-template", "--data-dir", "--cache"],
    "intervene": ["--out", "--text", "--data-dir"],
}


def base(command: str, root: Path) -> list[str]:
    """Arguments under which ``command`` fails early, whatever one option is changed to."""
    missing = str(root / "missing.jsonl")
    return {
        "dynamics": ["dynamics", "--models-file", missing, "--out", str(root / "run")],
        "report": ["report", str(root / "empty-run")],
        "demo": ["demo", "--out", str(root / "a-file" / "demo")],
        "generate": ["generate", "--model", NOWHERE, "--input", missing, "--out",
                     str(root / "out.jsonl"), "--no-cache"],
        "audit": ["audit", "--probe", "professional-bias", "--responses", missing, "--out",
                  str(root / "run")],
        "items": ["items", "--probe", "bbq", "--data-dir", str(root / "no-data"), "--out",
                  str(root / "items.jsonl")],
        "judge": ["judge", "--model", NOWHERE, "--input", missing, "--out", str(root / "run")],
        "judge-audit": ["judge-audit", "--model", NOWHERE, "--input", missing, "--out",
                        str(root / "run")],
        "sensitivity": ["sensitivity", "--reward-model", "org/never-loaded", "--perturber",
                        NOWHERE, "--principles", missing, "--out", str(root / "run")],
        "intervene": ["intervene", "--model", str(root / "no-model"), "--out",
                      str(root / "run")],
    }[command]


numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["0", "-0", "-1", "1e400", "nan", "-inf", "0x10", "1_000", "", " ", "٣",
                     "0-99999999999", "5-2", "1,,2", "--", "1e-400", "True", "½"]),
    st.text(max_size=12),
)
KINDS = ["missing", "directory", "file", "empty file", "inside a file", "not utf-8",
         "long name", "dot", "empty", "weird"]


def a_path(kind: str, root: Path, text: str) -> str:
    """A path a careless user might give: the kinds of ``KINDS``."""
    return {
        "missing": str(root / "nope" / "x.json"),
        "directory": str(root),
        "file": str(root / "a-file"),
        "empty file": str(root / "empty.jsonl"),
        "inside a file": str(root / "a-file" / "x.jsonl"),
        "not utf-8": str(root / "latin1.json"),
        "long name": str(root / ("n" * 300)),
        "dot": ".",
        "empty": "",
        "weird": str(root / (text or "x")),
    }[kind]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "a-file").write_text("not a folder\n")
    (root / "empty.jsonl").write_text("")
    (root / "latin1.json").write_bytes(b"[\xe9t\xe9]\n")
    (root / "empty-run").mkdir()
    for command in PATHS:  # imports happen here, not inside an example's deadline
        run(base(command, root))
    return root


@pytest.fixture(autouse=True, scope="module")
def _offline() -> object:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("BIASSCOPE_DATA_DIR", raising=False)
        patch.setenv("BIASSCOPE_OFFLINE", "1")
        yield


def run(argv: list[str]) -> tuple[int, str]:
    """The exit code and stderr of one in-process CLI call; any exception but SystemExit
    escaping ``main`` fails the test (with its traceback)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue()


def check(argv: list[str]) -> None:
    code, err = run(argv)
    assert code != 0, (argv, err)
    assert "Traceback" not in err, (argv, err)
    assert err.strip(), argv
    assert len(err.strip().splitlines()) == 1, (argv, err)


@settings(max_examples=80, deadline=2000,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(sorted(NUMERIC)), data=st.data(), value=numbers)
def test_numeric_options(command: str, data: st.DataObject, value: str, root: Path) -> None:
    option = data.draw(st.sampled_from(NUMERIC[command]))
    check([*base(command, root), f"{option}={value}"])


@settings(max_examples=80, deadline=2000,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(sorted(PATHS)), data=st.data(), kind=st.sampled_from(KINDS),
       text=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/"),
                    max_size=40))
def test_path_options(command: str, data: st.DataObject, kind: str, text: str,
                      root: Path) -> None:
    option = data.draw(st.sampled_from(PATHS[command]))
    if command == "demo" and kind in ("directory", "missing", "long name", "dot", "weird"):
        kind = "inside a file"  # a demo --out it can write would train a model
    argv = base(command, root)
    check([*argv, f"{option}={a_path(kind, root, text)}"])
