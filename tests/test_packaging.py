"""Every extra a message or the README tells users to install exists in pyproject.toml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]


def test_every_named_extra_exists():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"])
    texts = [ROOT / "README.md", *sorted((ROOT / "src").rglob("*.py"))]
    named = {(path.name, extra) for path in texts
             for group in re.findall(r"biasscope\[([a-z0-9,\- ]+)\]|optional\(\"[^\"]+\", "
                                     r"\"([a-z0-9-]+)\"", path.read_text())
             for extra in "".join(group).replace(" ", "").split(",")}
    assert len(named) >= 5  # the README and the import errors do name extras
    assert not {(where, extra) for where, extra in named if extra not in extras}


def test_a_missing_extra_is_one_line_that_names_it():
    import json

    from biasscope.errors import BiasscopeError, optional

    with pytest.raises(BiasscopeError, match=r"^Fleiss' kappa needs the 'judge' extra: "
                                             r"pip install 'biasscope\[judge\]'$"):
        optional("biasscope_no_such_module", "judge", "Fleiss' kappa")
    assert optional("json", "judge", "JSON") is json
