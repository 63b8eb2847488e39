"""Generate the golden blob files and dataset under ``tests/data/blob/`` with pylance 14.0.2.

    .venv/bin/python tests/data/datagen_blob.py

Layout written (everything under ``tests/data/blob/`` is regenerated):

``blob/<version>/<name>.lance``
    Lance files written by ``lance.file.LanceFileWriter(version=<version>)`` (2.1 and 2.2) with
    ``large_binary`` columns marked ``lance-encoding:blob``; the script asserts every page of those
    columns is a ``BlobLayout`` page.
``blob/expected/<name>.parquet``
    What pylance's file reader returns for ``<name>.lance`` (the blob bytes), same in both versions.
``blob/dataset_2.1.lance`` and ``blob/expected/dataset_2.1.parquet``
    A two-fragment pylance dataset (data storage version 2.1) with a blob column, and its content
    with the blob bytes (pylance's scanner returns blob *descriptions*; the script checks the bytes
    with ``take_blobs``).
``blob/dataset_2.2.lance`` and ``blob/expected/dataset_2.2.parquet``
    The same rows in a 2.2 dataset, where pylance stores the column as ``lance.blob.v2``; the
    inline / dedicated thresholds are lowered (100 / 1 000 bytes) so the small rows use all three
    stored kinds: inline, packed sidecar and dedicated sidecar files. The expectation is the
    ``struct<data, uri>`` lance_ops returns (``uri`` is null: no external blobs).
"""

from __future__ import annotations

import shutil

import lance
import numpy as np
import pyarrow as pa
from golden import DATA_DIR, FILE_VERSIONS, PYLANCE_VERSION, write_expected
from lance.file import LanceFileReader, LanceFileWriter

BLOB_DIR = DATA_DIR / "blob"
BLOB = {"lance-encoding:blob": "true"}
LARGE_VALUE_BYTES = 40_000  # one value above 32 KiB


def _blobs(rng: np.random.Generator, n: int, longest: int = 100) -> pa.Array:
    """Nulls (every 7th row), empties (every 11th), random values of 1 to ``longest - 1`` bytes
    and one > 32 KiB."""
    values: list[bytes | None] = [rng.bytes(int(k)) for k in rng.integers(1, longest, n)]
    for i in range(0, n, 11):
        values[i] = b""
    for i in range(3, n, 7):
        values[i] = None
    values[n // 2] = rng.bytes(LARGE_VALUE_BYTES)
    return pa.array(values, pa.large_binary())


def blobs() -> pa.Table:
    """Top-level, all-null and struct-nested blob columns."""
    rng = np.random.default_rng(7)
    n = 200
    child = _blobs(rng, n)
    mask = pa.array(np.arange(n) % 13 == 5)
    struct = pa.StructArray.from_arrays(
        [pa.array(np.arange(n, dtype=np.int32)), child],
        fields=[pa.field("x", pa.int32()), pa.field("b", pa.large_binary(), metadata=BLOB)],
        mask=mask,
    )
    schema = pa.schema(
        [
            pa.field("id", pa.int32()),
            pa.field("blob", pa.large_binary(), metadata=BLOB),
            pa.field("all_null", pa.large_binary(), metadata=BLOB),
            pa.field("s", struct.type),
        ]
    )
    columns = [
        pa.array(np.arange(n, dtype=np.int32)),
        _blobs(rng, n),
        pa.nulls(n, pa.large_binary()),
        struct,
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def empty() -> pa.Table:
    schema = pa.schema([pa.field("blob", pa.large_binary(), metadata=BLOB)])
    return schema.empty_table()


def dataset_rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("blob", pa.large_binary(), metadata=BLOB)])
    ids = pa.array(np.arange(start, start + n, dtype=np.int64))
    return pa.Table.from_arrays([ids, _blobs(rng, n, longest=300)], schema=schema)


def _leaves(schema: pa.Schema) -> list[pa.Field]:
    """Leaf fields in column order (top-level fields and the children of top-level structs)."""
    return [
        child for field in schema for child in (field.type if pa.types.is_struct(field.type) else [field])
    ]


def _check_blob_pages(path: str, schema: pa.Schema) -> None:
    columns = LanceFileReader(path).metadata().columns
    for leaf, column in zip(_leaves(schema), columns, strict=True):
        if (leaf.metadata or {}).get(b"lance-encoding:blob") == b"true":
            if not all("BlobLayout(" in page.encoding for page in column.pages):
                raise AssertionError(f"{path}: {leaf.name} has pages that are not blob pages")


def generate_files() -> None:
    expected = BLOB_DIR / "expected"
    expected.mkdir(parents=True)
    for name, table in (("blobs", blobs()), ("empty", empty())):
        for version in FILE_VERSIONS:
            out = BLOB_DIR / version
            out.mkdir(parents=True, exist_ok=True)
            path = str(out / f"{name}.lance")
            with LanceFileWriter(path, schema=table.schema, version=version) as writer:
                if table.num_rows:
                    writer.write_batch(table)
            actual = LanceFileReader(path).read_all().to_table()
            if not actual.equals(table):
                raise AssertionError(f"pylance does not read back what it wrote to {path}")
            _check_blob_pages(path, table.schema)
        write_expected(table, expected / f"{name}.parquet")


V2_THRESHOLDS = {
    "lance-encoding:blob-inline-size-threshold": "100",
    "lance-encoding:blob-dedicated-size-threshold": "1000",
}


def _check_take_blobs(ds: lance.LanceDataset, table: pa.Table) -> None:
    blobs = ds.take_blobs("blob", indices=list(range(table.num_rows)))
    if [None if f is None else f.read() for f in blobs] != table.column("blob").to_pylist():
        raise AssertionError("take_blobs does not return the bytes written")


def generate_datasets() -> None:
    parts = [dataset_rows(0, 60, 1), dataset_rows(60, 40, 2)]
    table = pa.concat_tables(parts)
    uri = BLOB_DIR / "dataset_2.1.lance"
    lance.write_dataset(parts[0], str(uri), data_storage_version="2.1")
    _check_take_blobs(lance.write_dataset(parts[1], str(uri), mode="append"), table)
    write_expected(table, BLOB_DIR / "expected" / "dataset_2.1.parquet")

    field = table.schema.field("blob")
    schema = table.schema.set(1, field.with_metadata({**BLOB, **V2_THRESHOLDS}))
    uri = BLOB_DIR / "dataset_2.2.lance"
    lance.write_dataset(parts[0].cast(schema), str(uri), data_storage_version="2.2")
    ds = lance.write_dataset(parts[1].cast(schema), str(uri), mode="append")
    _check_take_blobs(ds, table)
    described = ds.to_table().column("blob").combine_chunks()
    kinds = set(described.filter(described.is_valid()).field("kind").to_pylist())
    if kinds != {0, 1, 2}:
        raise AssertionError(f"expected inline, packed and dedicated blobs, got kinds {kinds}")
    blob = table.column("blob").combine_chunks()
    stored = pa.StructArray.from_arrays(
        [blob.fill_null(b""), pa.nulls(len(blob), pa.string())],
        fields=[pa.field("data", pa.large_binary()), pa.field("uri", pa.string())],
        mask=blob.is_null(),
    )
    write_expected(table.set_column(1, "blob", stored), BLOB_DIR / "expected" / "dataset_2.2.parquet")


def main() -> None:
    if lance.__version__ != PYLANCE_VERSION:
        raise SystemExit(
            f"golden data must be written by pylance {PYLANCE_VERSION}, found {lance.__version__}"
        )
    if BLOB_DIR.exists():
        shutil.rmtree(BLOB_DIR)
    generate_files()
    generate_datasets()
    total = sum(p.stat().st_size for p in BLOB_DIR.rglob("*") if p.is_file())
    print(f"wrote {total / 1024:.0f} KiB under {BLOB_DIR}")


if __name__ == "__main__":
    main()
