"""The design claims of `calibration_designs`, small enough for CI (about 15 s on one core):
each printed verdict's false-claim rate at most α plus three simulation SEs, each interval's
coverage at least nominal minus three, under the nulls of issue #37 (items crossed with
wordings, tiny pilots, paired differences that are all 0, two responses per conversation).
`scripts/calibrate.py` runs the same claims large and writes docs/validation.md's table."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration_base import Claim, assert_calibrated
from calibration_designs import CLAIMS

N_SIMS = 200  # 3 SE: 0.046 at α = 0.05; a coverage of 0.95 must reach 0.904


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.claim} | {c.null} | {c.size}")
def test_the_claim_is_calibrated(claim: Claim) -> None:
    assert_calibrated(claim, N_SIMS)


def test_every_claim_of_the_issue_is_simulated() -> None:
    said = {c.claim.split(" (")[0] for c in CLAIMS}
    assert {"equivalent", "different", "holds across N of N wordings",
            "favours the female/male version", "the flips favour men/women"} <= said
    assert {c.kind for c in CLAIMS} == {"false-claim", "coverage"}


def test_the_script_writes_the_table_and_keeps_the_rest(tmp_path: Path) -> None:
    """scripts/calibrate.py on two claims, small: the Calibration section is added, then
    replaced (one section, rows of claims not run kept), the page around it untouched."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "calibrate.py"
    spec = importlib.util.spec_from_file_location("calibrate", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    doc = tmp_path / "validation.md"
    doc.write_text("# Validation\n\n## BBQ\n\ntext\n")
    args = ["--only", "Adult", "--n-sims", "20", "--doc", str(doc)]
    assert script.main(args) == 0
    first = doc.read_text()
    assert first.startswith("# Validation\n\n## BBQ\n\ntext\n\n## Calibration\n")
    assert first.count("| the flips favour men/women (Adult) |") == 2
    other = "| changes trend | AR(1) rho 0.8 | 20 checkpoints | α = 0.05 | 0.04 | yes |"
    doc.write_text(first.replace("| the flips favour", other + "\n| the flips favour", 1)
                   + "\n## Through a server\n\nmore\n")
    assert script.main(args) == 0
    second = doc.read_text()
    assert second.count("## Calibration") == 1 and other in second
    assert second.count("| the flips favour men/women (Adult) |") == 2
    assert second.endswith("## Through a server\n\nmore\n")
