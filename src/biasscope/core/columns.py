"""Record columns as pandas categoricals, built in Arrow where the records are Arrow strings.

A report narrows each unit's string columns (model, prompt, split, occupation…) to categoricals
before grouping them. ``pd.Categorical(column.to_numpy())`` first makes one Python string per
record and hashes them all; Arrow's ``dictionary_encode`` finds the distinct values in C++,
so only those become Python strings (a third of the time on a WinoBias unit's labels); and
the distinct values lately sorted are kept with their order, as every seed of a checkpoint
holds the same prompts and labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

#: Distinct values lately sorted (an Arrow array), their codes' ranks and sorted categories,
#: most recent first.
_SORTED: list[tuple[Any, np.ndarray, pd.Index]] = []
_KEPT = 16


def categorical(column: pd.Series) -> pd.Categorical:
    """``pd.Categorical(column.to_numpy())``: the same categories (sorted), codes and missing
    values (code -1), by Arrow's dictionary encoding when ``column`` holds Arrow strings."""
    if not hasattr(column.array, "__arrow_array__") or not pd.api.types.is_string_dtype(
            column.dtype):
        return pd.Categorical(column.to_numpy())
    import pyarrow as pa
    import pyarrow.compute as pc

    data = pa.array(column.array)
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    if data.null_count == len(data):  # no value: categories of no type, as pandas gives
        return pd.Categorical(column.to_numpy())
    encoded = pc.dictionary_encode(data)
    distinct = encoded.dictionary
    kept = next((k for k in list(_SORTED) if len(k[0]) == len(distinct) and k[0].equals(distinct)),
                None)
    if kept is not None:
        _, rank, categories = kept
    else:
        found = np.asarray(distinct.to_pylist(), dtype=object)
        order = np.argsort(found, kind="stable")
        rank = np.empty(order.size + 1, dtype=np.int64)  # the last: missing values stay -1
        rank[order], rank[-1] = np.arange(order.size), -1
        categories = pd.Index(found[order])
        _SORTED[:] = [(distinct, rank, categories), *_SORTED[:_KEPT - 1]]
    codes = rank[encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)]
    return pd.Categorical.from_codes(codes, categories)


def group_codes(keys: list[pd.Series]) -> tuple[np.ndarray, np.ndarray]:
    """Per row, its group among the distinct rows of ``keys`` (codes 0..k-1 in the order of
    ``groupby(keys, sort=True, dropna=False)``: each key sorted, a missing key last), and
    each group's first row."""
    combined = np.zeros(len(keys[0]) if keys else 0, dtype=np.int64)
    for key in keys:
        codes, uniques = pd.factorize(key, sort=True)
        combined = combined * (len(uniques) + 1) + np.where(codes < 0, len(uniques), codes)
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    return inverse.reshape(-1), first


def group_means(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Each group's mean of each column of ``values`` (rows, columns), missing values left
    out (NaN where a group has none): the numbers pandas' grouped ``mean`` gives, to the
    last bit, as it sums the same way (each group's values in row order, with Kahan's
    compensation), here for all groups at once, one row of each group per step."""
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    place = np.arange(ordered.size) - np.searchsorted(ordered, ordered)
    width = int(place.max(initial=-1)) + 1
    table = np.full((n_groups, width, values.shape[1]), np.nan)
    table[ordered, place] = values[order]
    total, compensation, count = (np.zeros((n_groups, values.shape[1])) for _ in range(3))
    with np.errstate(invalid="ignore"):
        for step in range(width):
            value = table[:, step]
            held = ~np.isnan(value)
            y = value - compensation
            t = total + y
            lost = (t - total) - y
            lost[np.isnan(lost)] = 0.0  # an infinite value: no compensation, as pandas does
            total = np.where(held, t, total)
            compensation = np.where(held, lost, compensation)
            count += held
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)
