"""Writing ``lance.blob.v2`` columns into 2.2 datasets, like pylance 14.0.2.

* the same table written by pylance and by us gives the same manifest schema, ``DataFile.fields``,
  data file bytes, sidecar names and sidecar bytes (kinds by the default thresholds and by the
  metadata overrides, two blob columns sharing sidecar ids, rollover into several data files);
* pylance reads and appends to datasets we write; we append to datasets pylance writes (bytes,
  ``<data, uri>`` structs, ``lance.blob_array`` external blobs) and pylance reads the result;
* round trips on edge shapes (0 / 1 rows, all-null, empty blobs, sizes around both thresholds,
  several MiB, several batches and data files) and a hypothesis property of the kind rule;
* ``take`` reads only the blobs asked for, whatever their kind;
* blobs inside structs (pylance makes them blob v2 too): same bytes, appends both ways;
* 2.1 datasets keep blob pages (as pylance does); failed writes leave no sidecar behind; errors.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops._proto import file_pb2
from lance_ops.errors import SchemaError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader
from lance_ops.fragment import write_fragments
from lance_ops.table.blob import BlobKind, is_blob_v2
from tests.data.golden import DATA_DIR

MIB = 1024 * 1024
BLOB = {"lance-encoding:blob": "true"}
SMALL = {
    **BLOB,
    "lance-encoding:blob-inline-size-threshold": "100",
    "lance-encoding:blob-dedicated-size-threshold": "1000",
}


def blob_field(name: str = "b", metadata: dict[str, str] | None = None) -> pa.Field:
    return pa.field(name, pa.large_binary(), metadata=metadata or BLOB)


def blob_table(
    columns: dict[str, Sequence[bytes | None]], metadata: dict[str, str] | None = None
) -> pa.Table:
    n = len(next(iter(columns.values())))
    schema = pa.schema([pa.field("id", pa.int64()), *(blob_field(name, metadata) for name in columns)])
    arrays = [pa.array(range(n), pa.int64()), *(pa.array(v, pa.large_binary()) for v in columns.values())]
    return pa.Table.from_arrays(arrays, schema=schema)


def filler(size: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).bytes(size)


def blob_bytes(table: pa.Table, name: str = "b") -> list[bytes | None]:
    """The ``data`` of a blob v2 column read by us (None for null blobs)."""
    return [None if row is None else row["data"] for row in table.column(name).to_pylist()]


def data_tree(uri: Path) -> dict[str, bytes | tuple[bytes, file_pb2.FileDescriptor]]:
    """Files under ``data/``, data file stems replaced by their fragment's position.

    A data file is its bytes but the file descriptor (pylance writes field metadata in any order),
    and the descriptor parsed, field ids renumbered 0, 1, ... (pylance writes the dataset's, we
    number the file's fields afresh; readers go by ``DataFile.fields``).
    """
    stems = {
        Path(f.path).stem: str(i)
        for i, fragment in enumerate(lance_ops.dataset(str(uri)).get_fragments())
        for f in fragment.metadata.files
    }
    out = {}
    for path in sorted((uri / "data").rglob("*")):
        if path.is_file():
            parts = path.relative_to(uri / "data").parts
            first = parts[0].removesuffix(".lance")
            content = path.read_bytes()
            key = "/".join((stems[first] + parts[0][len(first) :], *parts[1:]))
            out[key] = content if path.suffix == ".blob" else _split_descriptor(path, content)
    return out


def _split_descriptor(path: Path, content: bytes) -> tuple[bytes, file_pb2.FileDescriptor]:
    reader = LanceFileReader(str(path))
    where = reader.metadata().global_buffers[0]
    descriptor = file_pb2.FileDescriptor.FromString(reader.read_global_buffer(0))
    renumbered = {-1: -1}
    for field in descriptor.schema.fields:
        renumbered.setdefault(field.id, len(renumbered) - 1)
        field.id, field.parent_id = renumbered[field.id], renumbered[field.parent_id]
    return content[: where.position] + content[where.position + where.size :], descriptor


def descriptions(uri: Path, name: str = "b") -> list[list[tuple[int, int, int, int] | None]]:
    """``(kind, position, size, blob_id)`` of every row, per data file."""
    out = []
    for fragment in lance_ops.dataset(str(uri)).get_fragments():
        for data_file in fragment.metadata.files:
            rows = LanceFileReader(str(uri / "data" / data_file.path)).read_all().to_table()
            out.append(
                [
                    None if d is None else (d["kind"], d["position"], d["size"], d["blob_id"])
                    for d in rows.column(name).to_pylist()
                ]
            )
    return out


# --- the same bytes as pylance --------------------------------------------------------------------

CASES = {
    # inline up to 64 KiB, packed up to 4 MiB, dedicated above; nulls and empties
    "defaults": (
        {
            "b": [
                b"abc",
                None,
                b"",
                filler(64 * 1024),
                filler(64 * 1024 + 1),
                filler(4 * MIB),
                filler(4 * MIB + 1),
            ]
        },
        BLOB,
        {},
    ),
    # metadata thresholds: inline <= 100, dedicated > 1000
    "thresholds": ({"b": [b"a" * 100, b"b" * 101, b"c" * 1000, b"d" * 1001, b"e" * 99, b""]}, SMALL, {}),
    # two columns share the packed sidecar and the id counter (column by column)
    "two_columns": (
        {"b": [b"a" * 150, b"A" * 1500, b"x"], "c": [b"c" * 150, b"C" * 1500, b"y"]},
        SMALL,
        {},
    ),
    # dedicated before packed: ids in the order blobs are stored
    "dedicated_first": ({"b": [b"d" * 2000, b"p" * 500, b"d" * 3000, b"p" * 700, b"i"]}, SMALL, {}),
    # rollover: each data file has its own sidecars and ids
    "rollover": ({"b": [b"x" * 10] * 3 + [None] * 2 + [b"y" * 700] * 4}, SMALL, {"max_rows_per_file": 4}),
    "all_null": ({"b": [None] * 5}, BLOB, {}),
}


@pytest.mark.interop
@pytest.mark.parametrize("case", list(CASES))
def test_same_bytes_as_pylance(tmp_path: Path, case: str) -> None:
    lance = pytest.importorskip("lance")
    columns, metadata, options = CASES[case]
    table = blob_table(columns, metadata)
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    lance.write_dataset(table, str(theirs), data_storage_version="2.2", **options)
    # pylance writes no page statistics: without ours, the data files match it byte for byte
    lance_ops.write_dataset(table, str(ours), data_storage_version="2.2", page_statistics=False, **options)
    mine, reference = lance_ops.dataset(str(ours)), lance_ops.dataset(str(theirs))
    assert mine.manifest.schema.to_pb() == reference.manifest.schema.to_pb()
    assert [[f.fields for f in fr.metadata.files] for fr in mine.get_fragments()] == [
        [f.fields for f in fr.metadata.files] for fr in reference.get_fragments()
    ]
    assert data_tree(ours) == data_tree(theirs)
    for name in columns:
        assert blob_bytes(mine.to_table(), name) == list(columns[name])


@pytest.mark.interop
def test_2_1_keeps_blob_pages_like_pylance(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    table = blob_table({"b": [b"abc", None, filler(70_000)]})
    lance.write_dataset(table, str(tmp_path / "theirs"), data_storage_version="2.1")
    lance_ops.write_dataset(table, str(tmp_path / "ours"), data_storage_version="2.1")
    ours = lance_ops.dataset(str(tmp_path / "ours"))
    assert ours.manifest.schema.to_pb() == lance_ops.dataset(str(tmp_path / "theirs")).manifest.schema.to_pb()
    assert ours.schema.field("b").type == pa.large_binary()
    assert not list((tmp_path / "ours" / "data").glob("*/*.blob"))
    # like pylance, blob v2 data cannot go into a 2.1 dataset
    v2 = tmp_path / "v2"
    lance_ops.write_dataset(table, str(v2), data_storage_version="2.2")
    with pytest.raises(UnsupportedFeatureError, match="2.2"):
        lance_ops.write_dataset(
            lance_ops.dataset(str(v2)).to_table(), str(tmp_path / "v21"), data_storage_version="2.1"
        )


# --- interop: appends both ways -------------------------------------------------------------------


def mixed_values(n: int, seed: int) -> list[bytes | None]:
    """Inline, packed and dedicated blobs (small thresholds), nulls and empties."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([0, 1, 99, 100, 101, 500, 1000, 1001, 3000], n)
    values: list[bytes | None] = [rng.bytes(int(s)) for s in sizes]
    for i in range(3, n, 7):
        values[i] = None
    return values


@pytest.mark.interop
def test_pylance_reads_and_appends_to_our_dataset(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    first, second, third = mixed_values(40, 1), mixed_values(25, 2), mixed_values(30, 3)
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(blob_table({"b": first}, SMALL), uri, max_rows_per_file=15)
    theirs = lance.dataset(uri)
    assert is_blob_v2(theirs.schema.field("b"))
    present = [i for i, v in enumerate(first) if v is not None]
    assert [f.read() for f in theirs.take_blobs("b", indices=present)] == [first[i] for i in present]
    table = (
        blob_table({"b": second}, SMALL)
        .drop_columns("id")
        .add_column(0, "id", pa.array(range(40, 65), pa.int64()))
    )
    lance.write_dataset(table, uri, mode="append")
    lance_ops.write_dataset(blob_table({"b": third}, SMALL), uri, mode="append")
    everything = first + second + third
    assert blob_bytes(lance_ops.dataset(uri).to_table()) == everything
    theirs = lance.dataset(uri)
    present = [i for i, v in enumerate(everything) if v is not None]
    assert [f.read() for f in theirs.take_blobs("b", indices=present)] == [everything[i] for i in present]
    kinds = theirs.to_table().column("b").combine_chunks().field("kind").to_pylist()
    assert {BlobKind.INLINE, BlobKind.PACKED, BlobKind.DEDICATED} <= set(kinds)


@pytest.mark.interop
def test_we_append_to_pylance_datasets(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    from lance.blob import Blob, blob_array
    from lance.blob import blob_field as v2_field

    external = tmp_path / "external.bin"
    external.write_bytes(b"EXTERNAL-0123456789")
    # pylance refuses "lance-encoding:blob" on a lance.blob.v2 field: thresholds only
    thresholds = {k: v for k, v in SMALL.items() if k not in BLOB}
    field = v2_field("b").with_metadata({**(v2_field("b").metadata or {}), **thresholds})
    written = [
        Blob(data=b"abc"),
        None,
        Blob(data=b"p" * 300),
        Blob(uri=external.as_uri(), position=9, size=4),
    ]
    uri = str(tmp_path / "ds")
    lance.write_dataset(
        pa.Table.from_arrays([blob_array(written)], schema=pa.schema([field])),
        uri,
        allow_external_blob_outside_bases=True,
    )
    ours = lance_ops.dataset(uri)
    # bytes, our own <data, uri, position, size> rows (the external one stays external), blob_array
    lance_ops.write_dataset(
        pa.table({"b": pa.array([b"x" * 2000, None, b""], pa.large_binary())}), uri, mode="append"
    )
    lance_ops.write_dataset(ours.to_table(), uri, mode="append")
    lance_ops.write_dataset(
        pa.Table.from_arrays([blob_array([Blob(data=b"q" * 150), Blob(uri=external.as_uri())])], names=["b"]),
        uri,
        mode="append",
    )
    once = [b"abc", None, b"p" * 300, b"0123"]
    expected = [*once, b"x" * 2000, None, b"", *once, b"q" * 150, b"EXTERNAL-0123456789"]
    assert blob_bytes(lance_ops.dataset(uri).to_table()) == expected
    theirs = lance.dataset(uri)
    present = [i for i, v in enumerate(expected) if v is not None]
    assert [f.read() for f in theirs.take_blobs("b", indices=present)] == [expected[i] for i in present]
    described = theirs.to_table().column("b").combine_chunks()
    assert described.field("kind").to_pylist()[4] == BlobKind.DEDICATED
    assert described.field("blob_uri").to_pylist()[10] == external.as_uri()


@pytest.mark.interop
def test_append_to_golden_pylance_dataset(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    uri = tmp_path / "ds"
    shutil.copytree(DATA_DIR / "blob" / "dataset_2.2.lance", uri)
    before = lance_ops.dataset(str(uri)).to_table()
    lance_ops.write_dataset(before, str(uri), mode="append")
    after = lance_ops.dataset(str(uri)).to_table()
    assert after.num_rows == 2 * before.num_rows
    assert blob_bytes(after, "blob") == 2 * blob_bytes(before, "blob")
    theirs = lance.dataset(str(uri))
    wanted = [i for i, v in enumerate(blob_bytes(after, "blob")) if v is not None]
    assert [f.read() for f in theirs.take_blobs("blob", indices=wanted)] == [
        blob_bytes(after, "blob")[i] for i in wanted
    ]


@pytest.mark.interop
def test_write_fragments_and_commit(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    values = mixed_values(30, 4)
    lance.write_dataset(blob_table({"b": values[:10]}, SMALL), uri)
    fragments = write_fragments(blob_table({"b": values[10:]}, SMALL), uri, max_rows_per_file=8)
    lance_ops.LanceDataset.commit(uri, lance_ops.LanceOperation.Append(fragments), read_version=1)
    assert blob_bytes(lance_ops.dataset(uri).to_table()) == values
    present = [i for i, v in enumerate(values) if v is not None]
    assert [f.read() for f in lance.dataset(uri).take_blobs("b", indices=present)] == [
        values[i] for i in present
    ]


# --- edge shapes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        [],
        [b"one"],
        [None],
        [b""] * 3,
        [filler(6 * MIB, 1), None, filler(5 * MIB, 2)],
        [filler(size, size) for size in (64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1, 4 * MIB, 4 * MIB + 1)],
    ],
    ids=["empty", "one", "null", "empties", "mib", "thresholds"],
)
def test_round_trip(tmp_path: Path, values: list[bytes | None]) -> None:
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(blob_table({"b": values}), uri)
    ds = lance_ops.dataset(uri)
    assert is_blob_v2(ds.schema.field("b"))
    assert blob_bytes(ds.to_table()) == values
    if values:
        rows = list(range(len(values)))[::-1]
        assert blob_bytes(ds.take(rows)) == [values[i] for i in rows]


def test_batches_and_rollover(tmp_path: Path) -> None:
    """Several batches share the packed sidecar; each data file has its own."""
    values = mixed_values(50, 5)
    table = blob_table({"b": values}, SMALL)
    uri = tmp_path / "ds"
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=7))
    lance_ops.write_dataset(reader, str(uri), max_rows_per_file=20)
    assert blob_bytes(lance_ops.dataset(str(uri)).to_table()) == values
    files = descriptions(uri)
    assert [len(f) for f in files] == [20, 20, 10]
    for per_file, start in zip(files, (0, 20, 40), strict=True):
        packed_ids = {d[3] for d in per_file if d is not None and d[0] == BlobKind.PACKED}
        assert len(packed_ids) <= 1
        packed = [(d[1], d[2]) for d in per_file if d is not None and d[0] == BlobKind.PACKED]
        assert [p for p, _ in packed] == list(np.cumsum([0] + [s for _, s in packed])[:-1])
        ids = [d[3] for d in per_file if d is not None and d[0] in (BlobKind.PACKED, BlobKind.DEDICATED)]
        assert sorted(set(ids)) == list(range(1, len(set(ids)) + 1))
        assert [d is None for d in per_file] == [v is None for v in values[start : start + 20]]
    sidecars = sorted(p.name for p in (uri / "data").glob("*/*.blob"))
    assert all(len(name) == len("0" * 32 + ".blob") for name in sidecars)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.one_of(st.none(), st.integers(0, 1200)), max_size=40),
    inline=st.integers(0, 200),
    extra=st.integers(0, 800),
)
def test_kind_rule_property(tmp_path: Path, sizes: list[int | None], inline: int, extra: int) -> None:
    metadata = {
        **BLOB,
        "lance-encoding:blob-inline-size-threshold": str(inline),
        "lance-encoding:blob-dedicated-size-threshold": str(inline + extra),
    }
    values = [None if s is None else filler(s, s) for s in sizes]
    uri = tmp_path / f"ds-{len(list(tmp_path.iterdir()))}"
    lance_ops.write_dataset(blob_table({"b": values}, metadata), str(uri))
    assert blob_bytes(lance_ops.dataset(str(uri)).to_table()) == values
    for per_file in descriptions(uri):
        for size, description in zip(sizes, per_file, strict=True):
            if size is None:
                assert description is None
                continue
            assert description is not None
            kind = description[0]
            expected = (
                BlobKind.INLINE
                if size <= inline
                else BlobKind.DEDICATED
                if size > inline + extra
                else BlobKind.PACKED
            )
            assert (kind, description[2]) == (expected, size)
            if kind == BlobKind.INLINE:
                assert description[1] % 64 == 0


# --- take reads only what it needs ----------------------------------------------------------------


def test_take_reads_only_requested_blobs(tmp_path: Path, recorded_reads: list[tuple[str, int, int]]) -> None:
    size = 40 * 1024
    values = [filler(size - 2, i) for i in range(12)]
    metadata = {**BLOB, "lance-encoding:blob-dedicated-size-threshold": str(size)}
    # inline (<= 64 KiB by default), then packed (<= size) and dedicated (> size) rows
    values[4:8] = [filler(size - 1, 40 + i) for i in range(4)]
    values[8:] = [filler(size + 1, 80 + i) for i in range(4)]
    metadata["lance-encoding:blob-inline-size-threshold"] = str(size - 2)
    uri = tmp_path / "ds"
    lance_ops.write_dataset(blob_table({"b": values}, metadata), str(uri))
    assert [d[0] for d in descriptions(uri)[0] if d] == [0] * 4 + [1] * 4 + [2] * 4  # size-1 is packed
    ds = lance_ops.dataset(str(uri))
    ds.take([0])
    recorded_reads.clear()
    rows = [9, 5, 2]
    assert blob_bytes(ds.take(rows)) == [values[i] for i in rows]
    assert sum(length for _, _, length in recorded_reads) < sum(len(values[i]) for i in rows) + 64 * 1024
    touched_sidecars = {Path(path).name for path, _, _ in recorded_reads if path.endswith(".blob")}
    assert len(touched_sidecars) == 2  # the packed file and row 9's own file


# --- failures ---------------------------------------------------------------------------------------


def test_failed_write_leaves_no_sidecars(tmp_path: Path) -> None:
    table = blob_table({"b": [b"d" * 2000, b"p" * 500]}, SMALL)

    def batches() -> Iterator[pa.RecordBatch]:
        yield from table.to_batches()
        raise RuntimeError("source failed")

    uri = tmp_path / "ds"
    with pytest.raises(RuntimeError, match="source failed"):
        lance_ops.write_dataset(pa.RecordBatchReader.from_batches(table.schema, batches()), str(uri))
    assert not [p for p in (uri / "data").rglob("*") if p.is_file()]


def test_bad_threshold(tmp_path: Path) -> None:
    metadata = {**BLOB, "lance-encoding:blob-inline-size-threshold": "big"}
    with pytest.raises(SchemaError, match="inline-size-threshold"):
        lance_ops.write_dataset(blob_table({"b": [b"x"]}, metadata), str(tmp_path / "ds"))


def test_bad_input_for_blob_v2_column(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(blob_table({"b": [b"x"]}), uri)
    bad = pa.table({"id": pa.array([1], pa.int64()), "b": pa.array([{"bytes": b"y"}])})
    with pytest.raises(SchemaError, match="blob v2"):
        lance_ops.write_dataset(bad, uri, mode="append")
    with pytest.raises(SchemaError, match="blob v2"):
        lance_ops.write_dataset(pa.table({"id": [1], "b": [3]}), uri, mode="append")
    assert lance_ops.dataset(uri).count_rows() == 1


def nested_table(rows: int, seed: int) -> pa.Table:
    """``s: struct<x, b: blob, y: struct<c: blob>>`` and a top-level blob ``z`` (small thresholds)."""
    inner = pa.struct([blob_field("c", SMALL)])
    struct = pa.struct([pa.field("x", pa.int32()), blob_field("b", SMALL), pa.field("y", inner)])
    b, c, z = mixed_values(rows, seed), mixed_values(rows, seed + 1), mixed_values(rows, seed + 2)
    s = pa.StructArray.from_arrays(
        [
            pa.array(range(rows), pa.int32()),
            pa.array(b, pa.large_binary()),
            pa.StructArray.from_arrays([pa.array(c, pa.large_binary())], fields=list(inner)),
        ],
        fields=list(struct),
        mask=pa.array([i % 5 == 4 for i in range(rows)]),
    )
    schema = pa.schema([pa.field("s", struct), blob_field("z", SMALL)])
    return pa.Table.from_arrays([s, pa.array(z, pa.large_binary())], schema=schema)


def nested_bytes(table: pa.Table) -> list[tuple[bytes | None, bytes | None, bytes | None]]:
    """``(s.b, s.y.c, z)`` bytes per row of a table we read (None under a null ``s``)."""
    out = []
    for s, z in zip(table.column("s").to_pylist(), blob_bytes(table, "z"), strict=True):
        b = c = None
        if s is not None:
            b = None if s["b"] is None else s["b"]["data"]
            c = None if s["y"] is None or s["y"]["c"] is None else s["y"]["c"]["data"]
        out.append((b, c, z))
    return out


def expected_nested(table: pa.Table) -> list[tuple[bytes | None, bytes | None, bytes | None]]:
    return [
        (None, None, row["z"]) if row["s"] is None else (row["s"]["b"], row["s"]["y"]["c"], row["z"])
        for row in table.to_pylist()
    ]


@pytest.mark.interop
def test_blobs_in_structs(tmp_path: Path) -> None:
    """pylance 2.2 makes blobs inside structs lance.blob.v2 too: same bytes, appends both ways."""
    lance = pytest.importorskip("lance")
    first, second, third = nested_table(20, 1), nested_table(15, 11), nested_table(10, 21)
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    lance.write_dataset(first, str(theirs), data_storage_version="2.2")
    lance_ops.write_dataset(first, str(ours), data_storage_version="2.2")
    assert (
        lance_ops.dataset(str(ours)).manifest.schema.to_pb()
        == lance_ops.dataset(str(theirs)).manifest.schema.to_pb()
    )
    assert data_tree(ours) == data_tree(theirs)
    assert [f.metadata.files[0].fields for f in lance_ops.dataset(str(ours)).get_fragments()] == [
        (1, 2, 6, 9)
    ]
    assert nested_bytes(lance_ops.dataset(str(theirs)).to_table()) == expected_nested(first)
    for uri in (theirs, ours):
        lance.write_dataset(second, str(uri), mode="append")
        lance_ops.write_dataset(third, str(uri), mode="append")
        got = lance_ops.dataset(str(uri)).to_table()
        expected = expected_nested(first) + expected_nested(second) + expected_nested(third)
        assert nested_bytes(got) == expected
        rows = [33, 2, 20, 44]
        assert nested_bytes(lance_ops.dataset(str(uri)).take(rows)) == [expected[i] for i in rows]
        present = [i for i, row in enumerate(expected) if row[1] is not None]
        blobs = lance.dataset(str(uri)).take_blobs("s.y.c", indices=present)
        assert [f.read() for f in blobs] == [expected[i][1] for i in present]


@pytest.mark.interop
def test_schema_keeps_nullability_and_metadata(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    field = pa.field("b", pa.large_binary(), nullable=False, metadata={**SMALL, "other": "x"})
    table = pa.table({"b": pa.array([b"a" * 500], pa.large_binary())}, schema=pa.schema([field]))
    lance.write_dataset(table, str(tmp_path / "theirs"), data_storage_version="2.2")
    lance_ops.write_dataset(table, str(tmp_path / "ours"), data_storage_version="2.2")
    ours = lance_ops.dataset(str(tmp_path / "ours"))
    assert ours.manifest.schema.to_pb() == lance_ops.dataset(str(tmp_path / "theirs")).manifest.schema.to_pb()
    assert not ours.schema.field("b").nullable


@pytest.mark.interop
def test_copy_a_blob_v2_table_into_a_new_dataset(tmp_path: Path) -> None:
    """Our ``<data, uri>`` output (an extension type once pylance is imported) creates a new dataset."""
    lance = pytest.importorskip("lance")
    values = mixed_values(20, 6)
    lance_ops.write_dataset(blob_table({"b": values}, SMALL), str(tmp_path / "a"))
    copied = lance_ops.dataset(str(tmp_path / "a")).to_table()
    assert isinstance(copied.column("b").type, pa.BaseExtensionType)
    lance_ops.write_dataset(copied, str(tmp_path / "b"))
    assert data_tree(tmp_path / "b") == data_tree(tmp_path / "a")
    present = [i for i, v in enumerate(values) if v is not None]
    blobs = lance.dataset(str(tmp_path / "b")).take_blobs("b", indices=present)
    assert [f.read() for f in blobs] == [values[i] for i in present]


@pytest.mark.interop
def test_overwrite_and_empty_writes(tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    lance.write_dataset(blob_table({"b": [b"old"]}), uri, data_storage_version="2.2")
    values = mixed_values(12, 7)
    lance_ops.write_dataset(blob_table({"b": values}, SMALL), uri, mode="overwrite")
    present = [i for i, v in enumerate(values) if v is not None]
    assert [f.read() for f in lance.dataset(uri).take_blobs("b", indices=present)] == [
        values[i] for i in present
    ]
    lance_ops.write_dataset(blob_table({"b": []}, SMALL), uri, mode="append")
    assert blob_bytes(lance_ops.dataset(uri).to_table()) == values
    empty = str(tmp_path / "empty")
    lance_ops.write_dataset(blob_table({"b": []}), empty)
    assert is_blob_v2(lance.dataset(empty).schema.field("b"))
    assert lance.dataset(empty).count_rows() == 0


@pytest.mark.interop
def test_ranged_external_blob_into_a_data_uri_dataset(tmp_path: Path) -> None:
    """Like pylance, an external blob's range is kept though the dataset's struct is ``<data, uri>``."""
    lance = pytest.importorskip("lance")
    from lance.blob import Blob, blob_array

    external = tmp_path / "external.bin"
    external.write_bytes(b"EXTERNAL-0123456789")
    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(blob_table({"b": [b"x"]}).drop_columns("id"), uri)
    ranged = blob_array([Blob(uri=external.as_uri(), position=9, size=4), Blob(uri=external.as_uri())])
    lance_ops.write_dataset(pa.Table.from_arrays([ranged], names=["b"]), uri, mode="append")
    assert [c.name for c in lance_ops.dataset(uri).schema.field("b").type.storage_type] == ["data", "uri"]
    assert blob_bytes(lance_ops.dataset(uri).to_table()) == [b"x", b"0123", b"EXTERNAL-0123456789"]
    theirs = lance.dataset(uri)
    assert [f.read() for f in theirs.take_blobs("b", indices=[0, 1, 2])] == [
        b"x",
        b"0123",
        b"EXTERNAL-0123456789",
    ]
    described = theirs.to_table().column("b").combine_chunks()
    assert described.field("position").to_pylist()[1:] == [9, 0]
