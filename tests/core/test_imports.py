"""`installed_version` reads what `importlib.metadata` reads, without importing either."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from biasscope.core.imports import installed_version


@pytest.mark.parametrize("name", ["numpy", "pandas", "scipy", "pyarrow", "torch", "biasscope"])
def test_the_version_is_the_installed_distributions(name: str) -> None:
    assert installed_version(name) == metadata.version(name)


def test_a_missing_distribution_has_no_version() -> None:
    assert installed_version("biasscope_no_such_distribution") is None


def test_a_dist_info_beside_the_package_is_read_and_two_are_not_guessed_between(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "toypkg").mkdir()
    (tmp_path / "toypkg" / "__init__.py").write_text("")
    info = tmp_path / "toypkg-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toypkg\nVersion: 1.2.3\n\n"
                                   "Version: 9 (the description, not a header)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_version("toypkg") == "1.2.3"
    assert "toypkg" not in sys.modules  # read, not imported
    other = tmp_path / "toypkg-2.0.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Name: toypkg\nVersion: 2.0\n")
    # two are there: which one counts is importlib.metadata's choice, so it is asked
    assert installed_version("toypkg") == metadata.version("toypkg") in ("1.2.3", "2.0")


def test_a_report_imports_neither_importlib_metadata_nor_urllib_nor_plotly() -> None:
    """What a report runs beyond its analysis (the analysis key's library versions, the
    figures' plotly.js and template) imports none of them: each costs tens of milliseconds."""
    code = ("import sys, biasscope.dynamics.summary.write, biasscope.dynamics.summary.reuse; "
            "from biasscope.core.stats import scipy_rng_keyword; scipy_rng_keyword(); "
            "from biasscope.report import plotfig; "
            "assert 'Plotly' in plotfig.plotly_js() and plotfig.template('plotly_white'); "
            "biasscope.dynamics.summary.reuse.installed_version('scipy'); "
            "print(sorted(m for m in ('importlib.metadata', 'urllib.request', 'scipy', "
            "'plotly') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_plotly_js_is_the_installed_packages() -> None:
    from importlib import resources

    from biasscope.report import plotfig

    shipped = resources.files("plotly") / "package_data" / "plotly.min.js"
    assert plotfig.plotly_js() == shipped.read_text("utf-8")
