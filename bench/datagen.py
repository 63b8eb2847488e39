"""Synthetic tables for the benchmark, generated with numpy (vectorised, seeded, reproducible).

Each table mixes a few columns of one kind so that every encoding path gets exercised:

* ``ints_nulls``   int64 ids, small-range int32 (bit-packable), wide int64, all with ~10% nulls
* ``floats``       float64 random walk, float32 noise, low-cardinality float64
* ``strings_short`` 4-16 character strings: high- and low-cardinality (dictionary friendly)
* ``strings_long``  100-400 character strings next to an int64 id
* ``mixed``         seven columns: ints with and without nulls, floats, short and categorical strings,
                    nullable strings and variable-length int32 lists (some empty, some null)
* ``vectors``       128-d float32 vectors next to an int64 id, one row per ten requested rows
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ", dtype=np.uint8)
NULL_FRACTION = 0.1


def _nulls(rng: np.random.Generator, n: int) -> pa.Buffer:
    valid = rng.random(n) >= NULL_FRACTION
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _with_nulls(rng: np.random.Generator, values: np.ndarray) -> pa.Array:
    arrow_type = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(arrow_type, len(values), [_nulls(rng, len(values)), pa.py_buffer(values)])


def random_strings(rng: np.random.Generator, n: int, min_len: int, max_len: int) -> pa.Array:
    """``n`` random strings with uniform lengths in ``[min_len, max_len]``, built from one buffer."""
    lengths = rng.integers(min_len, max_len + 1, n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    chars = ALPHABET[rng.integers(0, len(ALPHABET), int(offsets[-1]))]
    return pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(chars)]
    ).cast(pa.string())


def ints_nulls(rng: np.random.Generator, n: int) -> pa.Table:
    return pa.table(
        {
            "id": _with_nulls(rng, np.arange(n, dtype=np.int64)),
            "small": _with_nulls(rng, rng.integers(0, 1000, n, dtype=np.int32)),
            "wide": _with_nulls(rng, rng.integers(-(2**62), 2**62, n, dtype=np.int64)),
        }
    )


def floats(rng: np.random.Generator, n: int) -> pa.Table:
    return pa.table(
        {
            "walk": np.cumsum(rng.normal(size=n)),
            "noise": rng.normal(size=n).astype(np.float32),
            "levels": rng.choice(np.array([0.5, 1.25, 2.0, 99.9]), n),
        }
    )


def strings_short(rng: np.random.Generator, n: int) -> pa.Table:
    categories = random_strings(rng, 50, 4, 16)
    return pa.table(
        {
            "name": random_strings(rng, n, 4, 16),
            "category": categories.take(pa.array(rng.integers(0, len(categories), n))),
        }
    )


def strings_long(rng: np.random.Generator, n: int) -> pa.Table:
    return pa.table({"id": np.arange(n, dtype=np.int64), "text": random_strings(rng, n, 100, 400)})


def mixed(rng: np.random.Generator, n: int) -> pa.Table:
    categories = random_strings(rng, 50, 4, 16)
    list_lengths = rng.integers(0, 6, n, dtype=np.int32)
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(list_lengths, out=list_offsets[1:])
    list_values = pa.array(rng.integers(0, 10_000, int(list_offsets[-1]), dtype=np.int32))
    lists = pa.ListArray.from_buffers(
        pa.list_(pa.int32()), n, [_nulls(rng, n), pa.py_buffer(list_offsets)], children=[list_values]
    )
    names = random_strings(rng, n, 4, 24)
    return pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "score": _with_nulls(rng, rng.integers(0, 1000, n, dtype=np.int32)),
            "value": rng.normal(size=n),
            "name": names,
            "category": categories.take(pa.array(rng.integers(0, len(categories), n))),
            "comment": pa.Array.from_buffers(pa.string(), n, [_nulls(rng, n), *names.buffers()[1:]]),
            "tags": lists,
        }
    )


def vectors(rng: np.random.Generator, n: int) -> pa.Table:
    rows = max(1, n // 10)
    values = pa.array(rng.normal(size=rows * 128).astype(np.float32))
    return pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "vector": pa.FixedSizeListArray.from_arrays(values, 128),
        }
    )


TABLES: dict[str, Callable[[np.random.Generator, int], pa.Table]] = {
    "ints_nulls": ints_nulls,
    "floats": floats,
    "strings_short": strings_short,
    "strings_long": strings_long,
    "mixed": mixed,
    "vectors": vectors,
}


def make_table(name: str, rows: int, seed: int = 0) -> pa.Table:
    return TABLES[name](np.random.default_rng(seed), rows)
