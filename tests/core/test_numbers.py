"""core/numbers: the one number format (digits from the CI, floored p-values, percent)."""

from biasscope.core.numbers import (
    level_of,
    num,
    p_is,
    percent,
    pvalue,
    resampled_ci,
    setting_percent,
    with_ci,
)


def test_digits_come_from_the_ci_half_width():
    assert with_ci(-0.06521, -0.0653155, -0.0651045) == "-0.06521 (95% CI -0.06532 to -0.06510)"
    assert with_ci(0.5, 0.4, 0.6, signed=True) == "+0.50 (95% CI +0.40 to +0.60)"
    assert with_ci(1.766e-05, float("nan"), 1.0) == "0.0000177"
    assert num(-0.0) == "0" and num(0.000123456) == "0.000123"


def test_an_interval_of_no_width_is_said_at_the_values_precision():
    """Every value alike gives 0 to 0, or a width of rounding noise (0.1 + 0.2 beside 0.3),
    which printed the bare value, or asked for 17 decimals."""
    assert with_ci(0.0, 0.0, 0.0, signed=True, extra="+0.00 SD") == (
        "0 (95% CI 0 to 0; +0.00 SD)")
    assert with_ci(0.3, 0.3, 0.1 + 0.2, signed=True) == "+0.300 (95% CI +0.300 to +0.300)"
    assert with_ci(0.3, 0.4, 0.2) == "0.300"  # no interval: low above high


def test_an_interval_of_no_width_is_said_in_the_words_of_its_kind():
    """A t interval or a range of identical values printed "0 (95% CI 0 to 0)": a misprint,
    or certainty. Its caller says what it means; one with width is as before."""
    every = "every one of the 12 values is {value}; no interval"
    assert with_ci(0.0, 0.0, 0.0, signed=True, extra="d_z = 0", same=every) == (
        "0 (every one of the 12 values is 0; no interval; d_z = 0)")
    assert with_ci(0.25, 0.25, 0.25, same="at least 95% of resamples gave {value}") == (
        "0.250 (at least 95% of resamples gave 0.250)")
    assert with_ci(0.5, 0.4, 0.6, same=every) == "0.50 (95% CI 0.40 to 0.60)"


def test_a_bootstrap_interval_of_one_value_is_said_in_words():
    """Every resample between the percentiles at one step printed "(CI 167 to 167)"."""
    assert resampled_ci(160.0, 170.0, ".0f", 0.95) == "95% CI 160 to 170"
    assert resampled_ci(167.0, 167.0, ".0f", 0.95, "put it at step {value}") == (
        "at least 95% of resamples put it at step 167")
    assert resampled_ci(1.0, 1.0, "+.2f", 0.9) == "at least 90% of resamples gave +1.00"
    assert resampled_ci(0.5, 0.5000001, num, 0.95) == "95% CI 0.500 to 0.500"  # two values


def test_a_level_is_written_as_chosen_not_rounded():
    """99.9% read "100% CI" (and 99.5% "100%"): no interval is at 100%."""
    assert [level_of(c) for c in (0.9, 0.95, 0.975, 0.99, 0.995, 0.999)] == [
        "90%", "95%", "97.5%", "99%", "99.5%", "99.9%"]
    assert with_ci(0.5, 0.4, 0.6, 0.999) == "0.50 (99.9% CI 0.40 to 0.60)"
    assert resampled_ci(1.0, 1.0, "+.2f", 0.999) == "at least 99.9% of resamples gave +1.00"
    assert resampled_ci(0.0, 1.0, ".0f", 0.995) == "99.5% CI 0 to 1"


def test_p_values_are_floored_and_read_as_a_relation():
    assert pvalue(1.7e-62) == "< 0.0001" and pvalue(0.01234) == "0.012"
    assert p_is(1.7e-62) == "p < 0.0001" and p_is(0.0499, "Holm p") == "Holm p = 0.050"
    assert p_is(float("nan")) == "p = n/a"


def test_percent_scales_and_takes_the_ci_digits():
    assert percent(0.1234, 0.10, 0.15) == "12.3% (95% CI 10.0% to 15.0%)"
    assert percent(0.02, 0.01, 0.03, signed=True, confidence=0.9) == (
        "+2.0% (90% CI +1.0% to +3.0%)")
    assert percent(0.5) == "50%" and percent(0.0123) == "1.23%" and percent(None) == "n/a"


def test_a_setting_in_percent_is_written_as_given() -> None:
    """A budget is a setting, not an estimate: 0.0001 is "0.01%", never "0%" (issue 38)."""
    assert [setting_percent(v) for v in (0.02, 0.025, 0.0001, 1.0)] == [
        "2%", "2.5%", "0.01%", "100%"]
    assert setting_percent(None) == "n/a"


def test_record_tables_write_intervals_and_p_values_as_the_sentences_do() -> None:
    from biasscope.report.tables import record_table

    page = record_table([{"scorer": "planted", "mean": 2.6213, "low": 2.4411, "high": 2.8123,
                          "wilcoxon_p": 1e-84, "sign p": 0.0434, "r": 0.98512,
                          "change": 1.766e-05}])
    cells = [c.split("</td>")[0] for c in page.split("<td>")[1:]]
    assert cells == ["planted", "2.62", "2.44", "2.81", "&lt; 0.0001", "0.043", "0.985",
                     "0.0000177"]


def test_json_rows_keep_every_float_whole_and_nulls_as_none() -> None:
    """pandas' to_json rounded to 10 decimals: a p-value of 1.37e-15 was written as 0, and
    the report then said it was smaller than a double holds."""
    import json

    import numpy as np
    import pandas as pd

    from biasscope.core.numbers import json_rows

    table = pd.DataFrame({
        "p": [1.3714506313145575e-15, 0.123456789012345678, np.nan],
        "n": pd.array([3, None, 5], dtype="Int64"), "ok": [True, False, True],
        "name": ["a", None, "c"], "inf": [np.inf, -1.5, 2.0]})
    rows = json_rows(table)
    assert rows[0] == {"p": 1.3714506313145575e-15, "n": 3, "ok": True, "name": "a",
                       "inf": None}
    assert rows[1]["p"] == 0.123456789012345678 and rows[1]["n"] is None
    assert rows[1]["name"] is None and rows[2]["p"] is None
    assert json.loads(json.dumps(rows)) == rows  # plain Python values only
