"""The report's narrow columns and group means are pandas' own numbers, faster: a categorical
built from Arrow's dictionary equals ``pd.Categorical`` of the values, and the group means of
`group_means` equal pandas' grouped ``mean`` to the last bit (same order, same compensated
sums), missing keys and values and infinities included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from biasscope.core.columns import categorical, group_codes, group_means


def same_categorical(a: pd.Categorical, b: pd.Categorical) -> bool:
    return (list(a.categories) == list(b.categories) and a.categories.dtype == b.categories.dtype
            and np.array_equal(a.codes, b.codes))


@pytest.mark.parametrize("column", [
    pd.Series(["b", "a", None, "b", "é", "Z"], dtype="str"),
    pd.Series(["b", None, "a"], dtype="string[pyarrow]"),
    pd.Series(["b", "a", "b"], dtype=object),
    pd.Series([], dtype="str"),
    pd.Series([None, None], dtype="str"),
    pd.Series([3, 1, 3], dtype="Int64"),
])
def test_a_categorical_is_pandas_own(column: pd.Series) -> None:
    for _ in range(2):  # the second time from the kept order
        assert same_categorical(categorical(column), pd.Categorical(column.to_numpy()))


def test_kept_orders_are_told_apart() -> None:
    """Values of one length but other content, or in another first-seen order, are sorted
    afresh."""
    for values in (["b", "a"], ["a", "b"], ["c", "a"], ["b", "a"]):
        column = pd.Series(values, dtype="str")
        assert same_categorical(categorical(column), pd.Categorical(column.to_numpy()))


@pytest.mark.parametrize("trial", range(40))
def test_group_means_are_pandas_to_the_bit(trial: int) -> None:
    rng = np.random.default_rng(trial)
    n, k = int(rng.integers(1, 2000)), int(rng.integers(1, 300))
    values = rng.normal(size=(n, 3)) * 10.0 ** rng.uniform(-6, 6, (n, 3))
    values[rng.random((n, 3)) < 0.05] = np.nan
    values[rng.random((n, 3)) < 0.005] = rng.choice([np.inf, -np.inf])
    frame = pd.DataFrame(values, columns=["x", "y", "z"]).assign(
        a=np.array([f"m{i % 3}" for i in rng.integers(0, k, n)], dtype=object),
        b=pd.array([None if i % 17 == 0 else i % 5 for i in rng.integers(0, k, n)],
                   dtype="Int64"),
        c=pd.Categorical(rng.integers(0, k, n).astype(str)))
    expected = frame.groupby(["a", "b", "c"], sort=True, dropna=False, observed=True)[
        ["x", "y", "z"]].mean()
    groups, first = group_codes([frame["a"], frame["b"], frame["c"]])
    got = group_means(groups, values, len(first))
    assert np.array_equal(got, expected.to_numpy(), equal_nan=True)
    heads = list(frame[["a", "b", "c"]].iloc[first].itertuples(index=False, name=None))
    assert [tuple("NA" if pd.isna(v) else v for v in h) for h in heads] == [
        tuple("NA" if pd.isna(v) else v for v in h) for h in expected.index]


def test_no_rows_no_groups() -> None:
    groups, first = group_codes([pd.Series([], dtype="str")])
    assert groups.size == 0 and first.size == 0
    assert group_means(groups, np.zeros((0, 2)), 0).shape == (0, 2)
