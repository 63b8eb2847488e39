"""pylance's vector helpers: ``vec_to_table`` (``lance.vector.vec_to_table``: vectors as a table
with a ``fixed_size_list<float32>[dim]`` column) and ``validate_vector_index``
(``lance.util.validate_vector_index``: an index's in-sample recall check)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.errors import InvalidArgumentError

__all__ = ["validate_vector_index", "vec_to_table"]


def _vectors(values: Sequence[Any] | np.ndarray, ndim: int | None, check_ndim: bool) -> pa.FixedSizeListArray:
    rows = [np.asarray(v, dtype=np.float32).reshape(-1) for v in values]
    lengths = {len(r) for r in rows}
    if check_ndim and len(lengths) > 1:
        raise InvalidArgumentError(f"vectors of different lengths {sorted(lengths)}")
    shape = np.shape(values) if isinstance(values, np.ndarray) else ()
    inferred = lengths.pop() if lengths else (shape[1] if len(shape) == 2 else 0)
    dim = ndim if ndim is not None else inferred
    if check_ndim and rows and len(rows[0]) != dim:
        raise InvalidArgumentError(f"vectors of length {len(rows[0])}, expected ndim={dim}")
    flat = np.concatenate(rows) if rows else np.empty(0, np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), dim)


def vec_to_table(
    data: dict[Any, Any] | list[Any] | np.ndarray,
    names: str | Sequence[str] | None = None,
    ndim: int | None = None,
    check_ndim: bool = True,
) -> pa.Table:
    """A dict becomes columns ``id`` (its keys) and ``vector``; a list or a 2-d array one column
    ``vector`` (``names`` renames them)."""
    if isinstance(data, dict):
        names = list(names) if names is not None else ["id", "vector"]
        if len(names) != 2:
            raise InvalidArgumentError("If data is a dict, names must be a list or tuple of 2 strings")
        arrays = [pa.array(list(data.keys())), _vectors(list(data.values()), ndim, check_ndim)]
    elif isinstance(data, (list, np.ndarray)):
        names = [names] if isinstance(names, str) else list(names or ["vector"])
        if len(names) != 1:
            raise InvalidArgumentError(f"names cannot be more than 1 got {len(names)}")
        arrays = [_vectors(data, ndim, check_ndim)]
    else:
        raise NotImplementedError(f"data must be dict, list, or ndarray, got {type(data)} instead")
    return pa.Table.from_arrays(arrays, names=names)


def validate_vector_index(
    dataset: Any,
    column: str,
    refine_factor: int = 5,
    sample_size: int | None = None,
    pass_threshold: float = 1.0,
) -> None:
    """pylance's ``lance.util.validate_vector_index``: search each vector of the dataset (or of a
    sample of ``sample_size`` rows) for its one nearest neighbour with ``nprobes=1``; raise
    :class:`~lance_ops.errors.InvalidArgumentError` (a ``ValueError``) when fewer than
    ``pass_threshold`` of them find themselves (distance below 1e-6)."""
    data = dataset.to_table() if sample_size is None else dataset.sample(sample_size)
    values = data.column(column).combine_chunks()
    matrix = np.asarray(values.flatten().cast(pa.float32()), np.float32)
    valid = np.asarray(values.is_valid(), bool)
    full = np.full((len(values), values.type.list_size), np.nan, np.float32)
    full[valid] = matrix.reshape(-1, values.type.list_size)
    queries = full[np.isfinite(full).all(axis=1)]
    passes = 0
    for q in queries:  # one search per query vector, as pylance's check
        nearest = {"column": column, "q": q, "k": 1, "nprobes": 1, "refine_factor": refine_factor}
        distance = dataset.to_table(nearest=nearest).column("_distance").to_pylist()[0]
        passes += abs(distance) < 1e-6
    if not len(queries) or passes / len(queries) < pass_threshold:
        raise InvalidArgumentError(f"Vector index failed sanity check, only {passes}/{len(queries)} passed")
