"""Every extra a message or the README tells users to install exists in pyproject.toml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[2]


def test_every_named_extra_exists():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"])
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "src").rglob("*.py"))]
    # '.[hf,gguf]' in install lines, install_hint("hf,gguf") and optional(..., "judge", ...)
    # in the import errors.
    pattern = (r"'\.\[([a-z0-9,\- ]+)\]'|install_hint\(\"([a-z0-9,\-]+)\"\)|"
               r"optional\(\"[^\"]+\", \"([a-z0-9-]+)\"")
    named = {(path.name, extra) for path in texts
             for group in re.findall(pattern, path.read_text())
             for extra in "".join(group).replace(" ", "").split(",")}
    assert len(named) >= 15  # the README, the docs and the import errors do name extras
    assert {("lazy.py", "hf"), ("install.md", "ray"), ("README.md", "hf")} <= named
    assert not {(where, extra) for where, extra in named if extra not in extras}


def test_a_missing_extra_is_one_line_that_names_it():
    import json

    from biasscope.core.errors import BiasscopeError, optional

    with pytest.raises(BiasscopeError, match=r"^Fleiss' kappa needs the 'judge' extra: pip "
                                             r"install -e '\.\[judge\]' in the biasscope clone$"):
        optional("biasscope_no_such_module", "judge", "Fleiss' kappa")
    assert optional("json", "judge", "JSON") is json


WITHOUT_HF = """
import sys

class NoHF:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers", "tokenizers"):
            raise ImportError(f"No module named {name!r}")

sys.meta_path.insert(0, NoHF())
from biasscope.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", [["demo", "--quiet"],
                                     ["dynamics", "--model", "EleutherAI/pythia-70m",
                                      "--revisions", "step1000", "--seeds", "0", "--quiet"]])
def test_without_the_hf_extra_model_commands_say_so_in_one_line(tmp_path, winobias_dir,
                                                                command):
    import subprocess
    import sys

    data = ["--data-dir", str(winobias_dir)] if command[0] == "dynamics" else []
    proc = subprocess.run([sys.executable, "-c", WITHOUT_HF, *command, *data, "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "biasscope: error: Hugging Face scoring needs the 'hf' extra: "
        "pip install -e '.[hf]' in the biasscope clone"]
