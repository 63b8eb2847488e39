"""Generate the golden legacy (0.1) Lance files and datasets under ``tests/data/`` with pylance 14.0.2.

    .venv/bin/python tests/data/datagen_legacy01.py

pylance 14 writes legacy data only through datasets (``data_storage_version="legacy"``; its
``LanceFileWriter`` refuses 0.1 and its ``LanceFileReader`` cannot open 0.1 files). Layout written:

``files/0.1/<name>.lance``
    The single data file of a one-fragment legacy dataset written by pylance (footer version 0.2),
    small ``max_rows_per_group`` values giving several batches per file.
``files/0.1/expected/<name>.arrow``
    What pylance reads back from that dataset, as an Arrow IPC file (so the tests need no pylance;
    IPC rather than ``golden.py``'s Parquet because Parquet drops integer-valued dictionaries).
``files/0.1/batches.json``
    Rows per batch of each file, as pylance was asked to write them.
``datasets/legacy01_<name>.lance`` and ``datasets/legacy01_<name>.expected/``
    Legacy datasets (several fragments, deletions), recorded like ``datagen.py``'s datasets and
    read by the same golden tests.

What pylance reads back is not always what it was given: legacy files store no validity, so
nulls in fixed-width, list and struct columns read as the bytes under them (or empty lists), and
empty strings in nullable string columns read as null. The expectations record pylance's reading.
Regenerating this data is independent of ``datagen.py`` (which removes ``files/`` and ``datasets/``
first: run this script after it).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import UTC, date, datetime
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
from datagen import _decimals, _ints, _nulls, _record_versions, _with_nulls
from golden import DATASETS_DIR, FILES_DIR, PYLANCE_VERSION

LEGACY_DIR = FILES_DIR / "0.1"
EXPECTED_DIR = LEGACY_DIR / "expected"
DATASET_PREFIX = "legacy01_"


def primitives(n: int = 400, seed: int = 1) -> pa.Table:
    """Every fixed-width family, with nulls over non-zero values."""
    rng = np.random.default_rng(seed)
    mask = _nulls(rng, n)
    ints = {
        f"{t}": _with_nulls(pa.array(_ints(rng, t, n)), mask) for t in ("int8", "uint16", "int32", "uint64")
    }
    days = rng.integers(-20000, 20000, size=n).astype(np.int32)
    return pa.table(
        {
            **ints,
            "int64": pa.array(_ints(rng, "int64", n)),
            "float16": pa.array(rng.normal(size=n).astype(np.float16)),
            "float32": _with_nulls(pa.array(rng.normal(size=n).astype(np.float32)), mask),
            "float64": pa.array(rng.normal(size=n)),
            "bool": pa.array(rng.random(n) < 0.3, mask=mask),
            "decimal128": pa.array(_decimals(rng, n, 20, 4), pa.decimal128(20, 4)),
            "decimal256": pa.array(_decimals(rng, n, 40, 2), pa.decimal256(40, 2)),
            "date32": pa.array(days, pa.date32()),
            "date64": pa.array(days.astype(np.int64) * 86_400_000, pa.date64()),
            "timestamp_us_utc": pa.array(
                days.astype(np.int64) * 86_400_000_000 + 17, pa.timestamp("us", tz="UTC")
            ),
            "timestamp_s": pa.array(days.astype(np.int64) * 86_400, pa.timestamp("s")),
            "time32_ms": pa.array(rng.integers(0, 86_400_000, size=n).astype(np.int32), pa.time32("ms")),
            "time64_ns": pa.array(rng.integers(0, 86_400 * 10**9, size=n), pa.time64("ns")),
            "duration_us": pa.array(rng.integers(-(10**9), 10**9, size=n), pa.duration("us")),
            "fixed_binary": pa.array(
                [bytes(rng.integers(0, 256, size=5, dtype=np.uint8)) for _ in range(n)], pa.binary(5)
            ),
            "null": pa.nulls(n),
        }
    )


def _words(rng: np.random.Generator, n: int, empty_every: int = 5) -> list[str]:
    lengths = rng.integers(1, 12, size=n)
    lengths[::empty_every] = 0
    return ["".join(chr(97 + int(c)) for c in rng.integers(0, 26, size=int(k))) for k in lengths]


def strings(n: int = 400, seed: int = 2) -> pa.Table:
    """Variable-length values with nulls and empty values (nullable and not) and a few long ones."""
    rng = np.random.default_rng(seed)
    mask = _nulls(rng, n)
    words = _words(rng, n)
    words[3] = "é" * 3000
    schema = pa.schema(
        [
            ("string", pa.string()),
            ("large_string", pa.large_string()),
            ("binary", pa.binary()),
            ("large_binary", pa.large_binary()),
            pa.field("required_string", pa.string(), nullable=False),
        ]
    )
    return pa.table(
        {
            "string": pa.array(words, mask=mask),
            "large_string": pa.array(words[::-1], pa.large_string()),
            "binary": pa.array([w.encode() for w in words], pa.binary(), mask=mask[::-1]),
            "large_binary": pa.array([w.encode() * 2 for w in words], pa.large_binary()),
            "required_string": pa.array(words),
        },
        schema=schema,
    )


def dictionaries(n: int = 400, seed: int = 3) -> pa.Table:
    """Dictionary-typed columns: string and integer values, several index types."""
    rng = np.random.default_rng(seed)
    cities = pa.array(["Oslo", "Lima", "", "Pune", "Kyiv"])
    keys = rng.integers(0, len(cities), size=n)
    return pa.table(
        {
            "dict_int8_string": pa.DictionaryArray.from_arrays(pa.array(keys, pa.int8()), cities),
            "dict_int32_large_string": pa.DictionaryArray.from_arrays(
                pa.array(keys[::-1], pa.int32()), cities.cast(pa.large_string())
            ),
            "dict_uint16_int64": pa.DictionaryArray.from_arrays(
                pa.array(keys % 3, pa.uint16()), pa.array([10, -20, 30**5], pa.int64())
            ),
            "dict_with_nulls": pa.array(
                [None if i % 9 == 0 else str(k) for i, k in enumerate(keys)]
            ).dictionary_encode(),
        }
    )


def nested(n: int = 400, seed: int = 4) -> pa.Table:
    """Lists (empty, null), large lists, fixed-size lists, structs and their nestings."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 5, size=n)
    values = [list(range(int(i), int(i) + int(k))) for i, k in enumerate(sizes)]
    list_int = [None if i % 11 == 0 else v for i, v in enumerate(values)]
    words = _words(rng, int(sizes.sum()) + n)
    large_list = [[words[(i + j) % len(words)] for j in range(int(k))] for i, k in enumerate(sizes[::-1])]
    structs = [
        None
        if i % 13 == 0
        else {"x": int(i), "y": words[i], "inner": {"z": float(i) / 2, "tags": values[i][:2]}}
        for i in range(n)
    ]
    list_struct = [[{"a": int(i + j), "b": words[j]} for j in range(int(k))] for i, k in enumerate(sizes)]
    return pa.table(
        {
            "list_int32": pa.array(list_int, pa.list_(pa.int32())),
            "large_list_string": pa.array(large_list, pa.large_list(pa.string())),
            "list_list": pa.array(
                [[v, []] if i % 2 else [] for i, v in enumerate(values)], pa.list_(pa.list_(pa.int16()))
            ),
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.normal(size=4 * n).astype(np.float32)), 4
            ),
            "bool_triples": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(3 * n) < 0.5), 3),
            "struct": pa.array(structs),
            "list_struct": pa.array(list_struct),
            "struct_list_struct": pa.array([{"items": v, "n": len(v)} for v in list_struct]),
        }
    )


def extras(n: int = 300, seed: int = 5) -> pa.Table:
    """Extension types, dictionaries inside structs and of binary values, deeper nestings."""
    rng = np.random.default_rng(seed)
    ids = np.arange(n)
    uuids = pa.array([bytes(rng.integers(0, 256, size=16, dtype=np.uint8)) for _ in ids], pa.binary(16))
    codes = pa.DictionaryArray.from_arrays(
        pa.array(ids % 3, pa.int8()), pa.array([b"a", b"", b"ccc"], pa.large_binary())
    )
    halves = pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=2 * n).astype(np.float16)), 2)
    return pa.table(
        {
            "uuid": pa.ExtensionArray.from_storage(pa.uuid(), uuids),
            "dict_large_binary": codes,
            "struct_dict": pa.StructArray.from_arrays([codes, pa.array(ids)], names=["code", "id"]),
            "list_fsl": pa.array(
                [[[float(i), 1.0]] * int(i % 3) for i in ids], pa.list_(pa.list_(pa.float64(), 2))
            ),
            "large_list_struct": pa.array(
                [[{"a": int(i)}] * int(i % 2) for i in ids], pa.large_list(pa.struct([("a", pa.int32())]))
            ),
            "half_pairs": halves,
            "timestamp_tz_ns": pa.array(ids * 10**9, pa.timestamp("ns", tz="America/New_York")),
        }
    )


def rows(n: int) -> pa.Table:
    """A small mixed schema for the row-count edge files."""
    ids = np.arange(n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "flag": pa.array(ids % 3 == 0),
            "name": pa.array([f"r{i}" for i in ids]),
            "tags": pa.array([[int(i)] * int(i % 3) for i in ids], pa.list_(pa.int64())),
            "point": pa.array([{"x": float(i), "label": str(i % 7)} for i in ids]),
        }
    )


# name -> (table, max_rows_per_group)
FILES: dict[str, tuple[pa.Table, int]] = {
    "primitives": (primitives(), 256),
    "strings": (strings(), 200),
    "dictionaries": (dictionaries(), 256),
    "nested": (nested(), 100),
    "extras": (extras(), 128),
    "rows_1": (rows(1), 1024),
    "rows_1023": (rows(1023), 1024),
    "rows_1024": (rows(1024), 1024),
    "rows_1025": (rows(1025), 1024),
}


def write_file(name: str, table: pa.Table, group: int, scratch: Path) -> list[int]:
    """Write ``table`` as a one-fragment legacy dataset, keep its data file and pylance's reading."""
    uri = scratch / f"{name}.lance"
    ds = lance.write_dataset(table, uri, data_storage_version="legacy", max_rows_per_group=group)
    (fragment,) = ds.get_fragments()
    (data_file,) = fragment.data_files()
    if (data_file.file_major_version, data_file.file_minor_version) not in ((0, 1), (0, 2)):
        version = f"{data_file.file_major_version}.{data_file.file_minor_version}"
        raise AssertionError(f"{name}: pylance wrote file version {version}")
    shutil.copyfile(uri / "data" / data_file.path, LEGACY_DIR / f"{name}.lance")
    # A fresh handle: the one write_dataset returns keeps the dictionaries it was given in memory.
    expected = lance.dataset(uri).to_table()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_file(EXPECTED_DIR / f"{name}.arrow", expected.schema, options=options) as sink:
        sink.write_table(expected)
    return [min(group, table.num_rows - start) for start in range(0, table.num_rows, group)]


def generate_files() -> None:
    EXPECTED_DIR.mkdir(parents=True)
    batches = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, (table, group) in FILES.items():
            batches[name] = write_file(name, table, group, Path(scratch))
    (LEGACY_DIR / "batches.json").write_text(json.dumps(batches, indent=1) + "\n")


def _mixed(start: int, n: int, seed: int) -> pa.Table:
    """One column per family for the datasets."""
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    cities = pa.array(["Oslo", "Lima", "Pune", "Kyiv"])
    return pa.table(
        {
            "id": ids,
            "score": pa.array(rng.normal(size=n)),
            "name": pa.array([f"person-{i}" for i in ids]),
            "city": pa.DictionaryArray.from_arrays(pa.array(ids % 4, pa.int8()), cities),
            "born": pa.array([date(1970, 1, 1)] * n, pa.date32()),
            "seen": pa.array([datetime(2024, 5, 1, tzinfo=UTC)] * n, pa.timestamp("ms", tz="UTC")),
            "tags": pa.array([[f"t{i % 5}"] * int(i % 3) for i in ids], pa.list_(pa.string())),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=2 * n)), 2),
            "address": pa.array([{"street": f"s{i}", "no": int(i % 50)} for i in ids]),
        }
    )


def generate_datasets() -> None:
    DATASETS_DIR.mkdir(exist_ok=True)
    options = {"data_storage_version": "legacy", "max_rows_per_file": 300, "max_rows_per_group": 128}

    # v1: 3 fragments; v2: 2 more by append; v3, v4: deletions (Arrow, then a whole-fragment delete).
    basic = DATASETS_DIR / f"{DATASET_PREFIX}basic.lance"
    lance.write_dataset(_mixed(0, 700, 30), basic, mode="create", **options)
    ds = lance.write_dataset(
        _mixed(700, 400, 31), basic, mode="append", max_rows_per_file=300, max_rows_per_group=128
    )
    ds.delete("id % 10 = 3 OR (id >= 150 AND id < 200)")
    ds.delete("id < 300")
    expected = DATASETS_DIR / f"{DATASET_PREFIX}basic.expected"
    expected.mkdir()
    _record_versions(basic, expected)

    # >= 5000 deleted rows in one fragment: a Roaring bitmap deletion file on a legacy dataset.
    bitmap = DATASETS_DIR / f"{DATASET_PREFIX}bitmap_deletes.lance"
    ids = pa.table({"id": pa.array(np.arange(6000, dtype=np.int32))})
    ds = lance.write_dataset(
        ids, bitmap, mode="create", data_storage_version="legacy", max_rows_per_group=1000
    )
    ds.delete("id % 7 <> 0")
    expected = DATASETS_DIR / f"{DATASET_PREFIX}bitmap_deletes.expected"
    expected.mkdir()
    _record_versions(bitmap, expected)
    if not list((bitmap / "_deletions").glob("*.bin")):
        raise AssertionError("legacy bitmap_deletes: pylance wrote no bitmap deletion file")

    empty = DATASETS_DIR / f"{DATASET_PREFIX}empty.lance"
    lance.write_dataset(rows(0), empty, mode="create", data_storage_version="legacy")
    expected = DATASETS_DIR / f"{DATASET_PREFIX}empty.expected"
    expected.mkdir()
    _record_versions(empty, expected)


def main() -> None:
    if lance.__version__ != PYLANCE_VERSION:
        raise SystemExit(
            f"golden data must be written by pylance {PYLANCE_VERSION}, found {lance.__version__}"
        )
    if LEGACY_DIR.exists():
        shutil.rmtree(LEGACY_DIR)
    for stale in DATASETS_DIR.glob(f"{DATASET_PREFIX}*"):
        shutil.rmtree(stale)
    generate_files()
    generate_datasets()


if __name__ == "__main__":
    main()
