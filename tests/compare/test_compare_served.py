"""The same GGUF scored locally (dequantised by transformers) and behind llama.cpp's server
(option scores from the echo of the plain prompt) gives equivalent audits: `biasscope
compare` must say so, item by item, and must not when the served model is another one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("gguf")
pytest.importorskip("torch")

from biasscope.cli.main import main
from conftest import SERVER_INSTALL
from gguf_fixture import write_llama_gguf
from llama_server import serve
from require import missing_modules, require

# Found, not imported: importing llama_cpp opens two /dev/null files it never closes (its
# _utils module), which printed two ResourceWarnings at the end of every test session.
require(missing_modules("llama_cpp", "fastapi", "uvicorn"), "BIASSCOPE_REQUIRE_SERVER",
        SERVER_INSTALL)

PROBE = ["--probe", "professional-bias", "--scoring", "options", "--plain-prompt",
         "--limit", "24"]


def _audit(model: str, out: Path) -> None:
    assert main(["audit", "--model", model, *PROBE, "--out", str(out)]) == 0


def _verdicts(out: Path) -> dict[str, str]:
    rows = json.loads((out / "comparison.json").read_text())["comparisons"]
    return {r["measure"]: r["verdict"] for r in rows if r.get("paired")}


def test_local_and_served_option_scores_are_equivalent(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BIASSCOPE_GGUF_CACHE", str(tmp_path / "cache"))
    # letters: the converted tokenizer then splits text as llama.cpp does (gguf_fixture.py)
    model = write_llama_gguf(tmp_path / "tiny.gguf", letters=True)
    other = write_llama_gguf(tmp_path / "other.gguf", seed=1, letters=True)
    _audit(str(model), tmp_path / "local")
    for name, path in (("served", model), ("other", other)):
        with serve(path, log_path=tmp_path / f"{name}.log") as server:
            _audit(f"openai-compatible:{server.base_url}#{server.model}", tmp_path / name)
    # 24 items are 12 per pronoun: no test shows equivalence from them within less than
    # ±0.22 (12 agreeing items are still likely when 22% of items could jump), so the
    # margin is 0.25; at the default 0.05 they are "too few items".
    assert main(["compare", str(tmp_path / "local"), str(tmp_path / "served"),
                 "--out", str(tmp_path / "same"), "--margin", "0.25"]) == 0
    same = _verdicts(tmp_path / "same")
    assert same and set(same.values()) == {"equivalent"}, same
    rows = json.loads((tmp_path / "same" / "comparison.json").read_text())["comparisons"]
    assert abs(rows[0]["estimate"]) < 0.01
    assert main(["compare", str(tmp_path / "local"), str(tmp_path / "served"),
                 "--out", str(tmp_path / "default")]) == 0
    assert set(_verdicts(tmp_path / "default").values()) == {"too few items"}
    assert main(["compare", str(tmp_path / "local"), str(tmp_path / "other"),
                 "--out", str(tmp_path / "differ"), "--margin", "0.25"]) == 0
    assert set(_verdicts(tmp_path / "differ").values()) != {"equivalent"}
