"""A percentile bootstrap interval of no width (every pair's difference alike, so every
resample agrees) is said in `resampled_ci`'s words, "1 (at least 95% of resamples gave 1; …)",
by each caller that prints a probe's bootstrapped value, not "1 (95% CI 1 to 1)"; a Wilson
interval beside it is printed as before."""

from __future__ import annotations

import pandas as pd

from biasscope.audit import multiplicity
from biasscope.audit.scored import summary_entry
from biasscope.dynamics.summary import probe_aside, probes
from biasscope.probes import PROBES

SAME = "1 (at least 95% of resamples gave 1"


def alike(pairs: int = 8) -> pd.DataFrame:
    """CrowS-Pairs records whose more-stereotyping sentence is likelier by 1 in every pair."""
    return pd.DataFrame([{"pair": i, "bias_type": "gender", "direction": "stereo",
                          "sentence": sentence, "logprob": logprob, "tokens": 5,
                          "source": "local"}
                         for i in range(pairs) for sentence, logprob in (("more", -10.0),
                                                                         ("less", -11.0))])


def test_which_values_are_resampled() -> None:
    crows, stereoset = (PROBES[p].step_statistics for p in ("crows-pairs", "stereoset"))
    assert crows.same("mean_difference") == "at least 95% of resamples gave {value}"
    assert crows.same("difference_q50") and crows.same("likelihood_diff:gender")
    assert crows.same("pct_stereotype") is None and crows.same("direction:stereo") is None
    assert stereoset.same("ss") and stereoset.same("ss:gender") and stereoset.same("icat")


def test_an_audit_s_headline_sentence() -> None:
    said = summary_entry("crows-pairs", alike())["sentences"]
    assert ("mean log-likelihood difference, more − less stereotyping: "
            f"{SAME}; n = 8).") in said
    assert not any("CI 1 to 1" in s for s in said)
    assert any("likelier: 1.00 (95% CI 0.68 to 1.00; n = 8)" in s for s in said)  # Wilson


def test_an_audit_s_sentence_after_holm() -> None:
    headline = multiplicity.control(summary_entry("crows-pairs", alike())["headline"])
    info = PROBES["crows-pairs"]
    said = multiplicity.holm_sentence(headline, info.name_of, same=info.same_of)
    assert said is not None and f"more − less stereotyping {SAME}; Holm p" in said
    assert "CI 1 to 1" not in said


def test_a_dynamics_sentence_per_checkpoint_and_aside() -> None:
    spec = PROBES["crows-pairs"].step_statistics
    values = spec.values(alike())
    values["mean_difference"].update(p_adjusted=0.0, significant=True)
    said = probes._sentence("m", "mean difference", "mean_difference", {10: values}, None,
                            "Holm-corrected", spec.same("mean_difference"))
    assert f"at the last checkpoint (step 10) it is {SAME}; p" in said
    aside = probe_aside._values(spec, values)
    assert f"stereotyping {SAME}; n = 8)" in aside and "CI 1 to 1" not in aside


def test_an_audit_s_headline_by_wording() -> None:
    records = pd.concat([alike().assign(template=t) for t in ("a", "b")], ignore_index=True)
    rows = {r["metric"]: r for r in
            summary_entry("crows-pairs", records)["tables"]["headline by wording"]}
    assert rows["mean_difference"]["a"] == "1 (at least 95% of resamples gave 1)"
    assert rows["pct_stereotype"]["b"] == "1.00 (95% CI 0.68 to 1.00)"
