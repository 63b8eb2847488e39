"""Generate the golden files for Arrow dictionary-typed columns with pylance 14.0.2.

    .venv/bin/python tests/data/datagen_dictionary.py

Layout written (everything under ``tests/data/dictionary/`` is regenerated):

``<version>/<name>.lance``
    Written by ``lance.file.LanceFileWriter(version=<version>)`` for 2.1 and 2.2 (``multipage``
    with small pages, ``batches`` from two batches with different dictionaries).
``<version>/encodings.json``
    Per file, per column, per page: the protobuf names of the layouts / compressions pylance
    chose (see ``datagen.page_features``). This script asserts that every dictionary column
    is a mini-block page with a dictionary, or an all-null constant page.
``expected/<name>.arrows``
    What pylance reads back from ``<name>.lance`` (the same in both versions), as an Arrow IPC
    stream (one dictionary per batch, as pylance returns them): exact dictionaries and keys,
    which Parquet cannot keep (unused dictionary entries).
``datasets/dict.lance`` and ``datasets/dict.expected.arrows``
    A two-version pylance dataset (create + append) with dictionary columns, and its content.

Data is deterministic (fixed seeds); pylance's dataset bytes are not (timestamps, UUIDs).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
from datagen import page_features
from golden import FILE_VERSIONS, PYLANCE_VERSION
from lance.file import LanceFileReader, LanceFileWriter

DICT_DIR = Path(__file__).resolve().parent / "dictionary"
EXPECTED_DIR = DICT_DIR / "expected"
DATASETS_DIR = DICT_DIR / "datasets"
INDEX_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


def _dict(
    keys: np.ndarray, values: pa.Array, index: str = "int32", null_keys: np.ndarray | None = None
) -> pa.Array:
    indices = pa.array(keys, pa.type_for_alias(index), mask=null_keys)
    return pa.DictionaryArray.from_arrays(indices, values)


def _words(n: int, prefix: str = "w") -> pa.Array:
    return pa.array([f"{prefix}{i:04d}" for i in range(n)])


def _meta(**keys: str) -> dict[str, str]:
    return {f"lance-encoding:{key.replace('_', '-')}": value for key, value in keys.items()}


def keys() -> pa.Table:
    """Every index type over strings with a null entry and an unused entry, null keys too; 1 025 rows."""
    n = 1025
    rng = np.random.default_rng(11)
    values = pa.array(["alpha", "beta", None, "gamma", "unused", ""])
    picks = rng.choice([0, 1, 2, 3, 5], n)
    null_keys = np.arange(n) % 9 == 0
    return pa.table({index: _dict(picks, values, index, null_keys) for index in INDEX_TYPES})


def values() -> pa.Table:
    """Value types: binary, large string / binary, integers, floats, bool; 1 024 rows."""
    n = 1024
    rng = np.random.default_rng(12)
    picks = rng.integers(0, 4, n)
    nulls = np.arange(n) % 13 == 0
    items = {
        "binary": pa.array([b"\x00a", b"bb", b"\xffc", b"d"]),
        "large_string": pa.array(["a", "bb", "ccc", "dddd"], pa.large_string()),
        "large_binary": pa.array([b"a", b"bb", b"", b"x"], pa.large_binary()),
        "int32": pa.array([7, -1, 2**31 - 1, 0], pa.int32()),
        "int64": pa.array([7, -1, 2**40, 0], pa.int64()),
        "uint16": pa.array([7, 1, 65535, 0], pa.uint16()),
        "float64": pa.array([1.5, -0.0, float("inf"), 3.25]),
        "float16": pa.array(np.array([1.5, -2, 0.25, 8], np.float16)),
        "bool": pa.array([True, False, True, False]),
    }
    return pa.table({name: _dict(picks, item, "int16", nulls) for name, item in items.items()})


def options() -> pa.Table:
    """Every ``lance-encoding:*`` option pylance looks at for dictionary columns; 3 000 rows."""
    n = 3000
    rng = np.random.default_rng(13)
    random_keys = _dict(rng.integers(0, 300, n), _words(300))
    run_keys = _dict(np.repeat(np.arange(10), 300), _words(300), "int64")
    columns = {
        "default": (random_keys, {}),
        "zstd": (random_keys, _meta(compression="zstd")),
        "lz4": (random_keys, _meta(compression="lz4")),
        "none": (random_keys, _meta(compression="none")),
        "fsst": (random_keys, _meta(compression="fsst")),
        "zstd_level": (random_keys, _meta(compression="zstd", compression_level="9")),
        "bss_on": (random_keys, _meta(compression="lz4", bss="on")),
        "rle_runs": (run_keys, {}),
        "rle_threshold_low": (run_keys, _meta(rle_threshold="0.0001")),
        "zstd_runs": (run_keys, _meta(compression="zstd")),
        "dict_values_zstd": (random_keys, _meta(dict_values_compression="zstd")),
        "dict_values_none": (random_keys, _meta(dict_values_compression="none")),
        "force_fullzip": (random_keys, _meta(structural_encoding="fullzip")),
        "force_miniblock": (random_keys, _meta(structural_encoding="miniblock")),
        "never_dictionary": (random_keys, _meta(dict_divisor="100000", dict_size_ratio="0.01")),
        "small_chunks": (random_keys, _meta(minichunk_size="512")),
    }
    fields = [pa.field(name, array.type, metadata=meta or None) for name, (array, meta) in columns.items()]
    return pa.Table.from_arrays([array for array, _ in columns.values()], schema=pa.schema(fields))


def edges() -> pa.Table:
    """All-null keys, all-null values, an empty dictionary, one value, > 32 KiB values; 1 023 rows."""
    n = 1023
    ids = np.arange(n)
    big = pa.array(["x" * 40_000, "y" * 33_000, "z"])
    return pa.table(
        {
            "null_keys": _dict(np.zeros(n, np.int64), pa.array(["a", "b"]), "uint8", np.ones(n, bool)),
            "null_values": _dict(ids % 2, pa.array([None, None], pa.string()), "int8"),
            "empty_dictionary": _dict(
                np.zeros(n, np.int64), pa.array([], pa.string()), "int32", np.ones(n, bool)
            ),
            "constant": _dict(np.ones(n, np.int64), pa.array(["a", "b"]), "int16"),
            "big_values": _dict(ids % 3, big, "uint32", ids % 10 == 0),
        }
    )


def one_row() -> pa.Table:
    return pa.table({"d": _dict(np.array([1]), pa.array(["a", "b"]), "int8")})


def nested() -> pa.Table:
    """Dictionaries under a list (null / empty lists) and a struct (null rows); 400 rows."""
    n = 400
    rng = np.random.default_rng(14)
    items = _dict(rng.integers(0, 3, 4 * n), pa.array(["a", None, "c"]), "int8", rng.random(4 * n) < 0.1)
    lengths = rng.integers(0, 5, n)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    lists = pa.ListArray.from_arrays(
        pa.array(offsets), items.slice(0, int(offsets[-1])), mask=pa.array(np.arange(n) % 11 == 0)
    )
    struct = pa.StructArray.from_arrays([items.slice(0, n)], ["x"], mask=pa.array(np.arange(n) % 7 == 0))
    return pa.table({"list": lists, "struct": struct})


def batches() -> list[pa.Table]:
    """Two batches whose dictionaries differ (pylance concatenates them into one page)."""
    first = _dict(np.arange(300) % 2, pa.array(["a", "b"]), "int8")
    second = _dict(np.arange(200) % 3, pa.array(["c", "a", "d"]), "int8", np.arange(200) % 5 == 0)
    return [pa.table({"d": first}), pa.table({"d": second})]


def multipage() -> list[pa.Table]:
    """20 000 rows in 1 000-row batches, written with small pages (several pages per column)."""
    rng = np.random.default_rng(15)
    n = 20_000
    words = pa.array([f"w{i:03d}" for i in range(300)] + [None])
    array = _dict(rng.integers(0, 301, n), words, "int16", rng.random(n) < 0.05)
    return [pa.table({"d": array.slice(start, 1000)}) for start in range(0, n, 1000)]


FILES = {
    "keys": lambda: [keys()],
    "values": lambda: [values()],
    "options": lambda: [options()],
    "edges": lambda: [edges()],
    "one_row": lambda: [one_row()],
    "nested": lambda: [nested()],
    "batches": batches,
    "multipage": multipage,
}
SMALL_PAGES = {"multipage": {"max_page_bytes": 8000, "data_cache_bytes": 8000}}
EMPTY_SCHEMA = pa.schema([pa.field("d", pa.dictionary(pa.uint16(), pa.string()))])


_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


def _write_ipc(table: pa.Table, path: Path) -> None:
    with (
        pa.OSFile(str(path), "wb") as sink,
        pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as writer,
    ):
        writer.write_table(table)


def write_files() -> None:
    for version in FILE_VERSIONS:
        (DICT_DIR / version).mkdir(parents=True)
        encodings: dict[str, list[list[list[str]]]] = {}
        for name, make in [*FILES.items(), ("empty", list)]:
            path = DICT_DIR / version / f"{name}.lance"
            tables = make()
            schema = tables[0].schema if tables else EMPTY_SCHEMA
            with LanceFileWriter(str(path), schema, version=version, **SMALL_PAGES.get(name, {})) as writer:
                for table in tables:
                    writer.write_batch(table)
            reader = LanceFileReader(str(path))
            back = reader.read_all().to_table()
            assert back.schema.equals(schema), (name, back.schema)
            expected = pa.concat_tables(tables) if tables else schema.empty_table()
            assert back.num_rows == expected.num_rows
            for got, want in zip(back.columns, expected.columns, strict=True):
                assert got.to_pylist() == want.to_pylist(), name
            pages = [
                [page_features(page.encoding) for page in column.pages]
                for column in reader.metadata().columns
            ]
            for column in pages:
                for features in column:
                    assert features == ["constant_layout"] or {"mini_block_layout", "dictionary"} <= set(
                        features
                    )
            encodings[name] = pages
            if version == FILE_VERSIONS[0]:
                _write_ipc(back, EXPECTED_DIR / f"{name}.arrows")
        (DICT_DIR / version / "encodings.json").write_text(
            json.dumps(encodings, indent=1, sort_keys=True) + "\n"
        )
    options_pages = json.loads((DICT_DIR / "2.2" / "encodings.json").read_text())["options"]
    assert "rle" in options_pages[7][0] and "byte_stream_split" in options_pages[1][0]
    assert all(
        len(column) > 1
        for column in json.loads((DICT_DIR / "2.1" / "encodings.json").read_text())["multipage"]
    )


def write_dataset() -> None:
    uri = DATASETS_DIR / "dict.lance"
    first = pa.table(
        {
            "id": pa.array(np.arange(50, dtype=np.int32)),
            "d": _dict(np.arange(50) % 3, pa.array(["x", None, "z"]), "int16", np.arange(50) % 7 == 0),
        }
    )
    second = pa.table(
        {
            "id": pa.array(np.arange(50, 80, dtype=np.int32)),
            "d": _dict(np.arange(30) % 2, pa.array(["q", "x"]), "int16"),
        }
    )
    lance.write_dataset(first, str(uri), data_storage_version="2.1")
    lance.write_dataset(second, str(uri), mode="append")
    _write_ipc(lance.dataset(str(uri)).to_table(), DATASETS_DIR / "dict.expected.arrows")


def main() -> None:
    assert lance.__version__ == PYLANCE_VERSION, lance.__version__
    shutil.rmtree(DICT_DIR, ignore_errors=True)
    EXPECTED_DIR.mkdir(parents=True)
    DATASETS_DIR.mkdir(parents=True)
    write_files()
    write_dataset()


if __name__ == "__main__":
    main()
