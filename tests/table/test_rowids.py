"""Stable row ids: sequence codecs, assignment on write / commit, the row id index, ``_rowid``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops import LanceOperation
from lance_ops._proto import rowids_pb2
from lance_ops.errors import CorruptFileError
from lance_ops.fragment import write_fragments
from lance_ops.table.manifest import ExternalFile
from lance_ops.table.rowids import (
    RowIdIndex,
    decode_row_id_segments,
    decode_row_ids,
    decode_versions,
    encode_row_ids,
    encode_versions,
)
from tests.table.conftest import table


def segment_of(values: list[int]) -> rowids_pb2.U64Segment:
    seq = rowids_pb2.RowIdSequence()
    seq.ParseFromString(encode_row_ids([np.array(values, np.uint64)]))
    (segment,) = seq.segments
    return segment


def test_segment_kinds_match_pylance_choices() -> None:
    assert segment_of(list(range(5, 15))).WhichOneof("segment") == "range"
    # Observed from pylance: 1000 rows with holes 10, 500, 700.
    holes = segment_of([v for v in range(1000) if v not in (10, 500, 700)])
    assert holes.WhichOneof("segment") == "range_with_holes"
    assert holes.range_with_holes.holes.u16_array.base == 10
    assert np.frombuffer(holes.range_with_holes.holes.u16_array.offsets, "<u2").tolist() == [0, 490, 690]
    # Observed from pylance: the bitmap is LSB first.
    bitmap = segment_of([1000, 1001, 1003, 1004, 1006, 1007, 1009])
    assert bitmap.WhichOneof("segment") == "range_with_bitmap"
    assert bitmap.range_with_bitmap.bitmap == bytes([0xDB, 0x02])
    # pylance compaction of a 10-row fragment without row 3: 0a081a06100a1a02f703.
    assert encode_row_ids([np.array([0, 1, 2, 4, 5, 6, 7, 8, 9], np.uint64)]).hex() == "0a081a06100a1a02f703"
    sparse = segment_of([0, 10, 500, 700, 999])
    assert sparse.WhichOneof("segment") == "sorted_array"
    assert segment_of([5, 3, 9]).WhichOneof("segment") == "array"
    wide = segment_of([1, 2**40])
    assert wide.sorted_array.WhichOneof("array") == "u64_array"
    mid = segment_of([7, 7 + 2**20, 9 + 2**20])
    assert mid.sorted_array.WhichOneof("array") == "u32_array"
    assert mid.sorted_array.u32_array.base == 7


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 5000), max_size=300),
        max_size=4,
    ),
    st.booleans(),
)
def test_row_id_sequence_roundtrip(parts: list[list[int]], sort: bool) -> None:
    arrays = [np.array(sorted(set(p)) if sort else p, dtype=np.uint64) for p in parts]
    data = encode_row_ids(arrays)
    non_empty = [a for a in arrays if len(a)]
    assert [a.tolist() for a in decode_row_id_segments(data)] == [a.tolist() for a in non_empty]
    expected = np.concatenate(non_empty) if non_empty else np.zeros(0, np.uint64)
    assert decode_row_ids(data).tolist() == expected.tolist()


@pytest.mark.parametrize("n", [0, 1, 7, 1023, 1024, 1025])
def test_bitmap_edges(n: int) -> None:
    values = np.arange(n + 300, dtype=np.uint64)
    kept = values[(values % 3) != 1][: max(n, 0)]
    assert decode_row_ids(encode_row_ids([kept])).tolist() == kept.tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 4), max_size=300), st.integers(0, 5))
def test_version_sequence_roundtrip(versions: list[int], extra: int) -> None:
    data = encode_versions(np.array(versions, np.uint64))
    decoded = decode_versions(data, len(versions) + extra)
    assert decoded.tolist() == versions + [1] * extra


def test_corrupt_sequences_raise() -> None:
    with pytest.raises(CorruptFileError):
        decode_row_ids(b"\xff\xff\xff")
    with pytest.raises(CorruptFileError):
        decode_versions(encode_versions(np.ones(5, np.uint64)), 3)


def test_row_id_index_lookup() -> None:
    index = RowIdIndex.build(
        [
            (0, np.array([10, 11, 12], np.uint64), np.array([1], np.uint32)),
            (5, np.array([3, 99], np.uint64), np.zeros(0, np.uint32)),
        ]
    )
    assert len(index) == 4
    found, addresses = index.lookup(np.array([99, 11, 10, 1000, 3], np.uint64))
    assert found.tolist() == [True, False, True, False, True]
    assert addresses.tolist() == [(5 << 32) | 1, 0, 5 << 32]
    empty = RowIdIndex.build([])
    assert empty.lookup(np.array([1], np.uint64))[0].tolist() == [False]


def rows(ds: object, lance_ds: object) -> tuple[pa.Table, pa.Table]:
    ours = ds.to_table(with_row_id=True, with_row_address=True)  # type: ignore[attr-defined]
    theirs = lance_ds.to_table(with_row_id=True, with_row_address=True)  # type: ignore[attr-defined]
    return ours, theirs


@pytest.mark.interop
@pytest.mark.parametrize("stable", [True, False])
def test_row_ids_through_append_delete_overwrite_match_pylance(tmp_path, lance_module, stable: bool) -> None:  # type: ignore[no-untyped-def]
    lance = lance_module
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    steps = [
        ("create", table(25), {"max_rows_per_file": 10, "enable_stable_row_ids": stable}),
        ("append", table(7, 25), {}),
        ("delete", "id % 4 = 1", {}),
        ("append", table(3, 32), {}),
        ("overwrite", table(12, 100), {"max_rows_per_file": 5}),
        ("append", table(4, 200), {}),
        ("delete", "id = 101", {}),
    ]
    for mode, data, kwargs in steps:
        if mode == "delete":
            lance_ops.dataset(ours_uri).delete(data)
            lance.dataset(theirs_uri).delete(data)
            continue
        lance_ops.write_dataset(data, ours_uri, mode=mode, **kwargs)
        lance.write_dataset(data, theirs_uri, mode=mode, **kwargs)
        ours, theirs = lance_ops.dataset(ours_uri), lance.dataset(theirs_uri)
        assert ours.manifest.next_row_id == (
            theirs.to_table(with_row_id=True)["_rowid"].to_pylist()[-1] + 1 if stable else 0
        )
    ours_table, theirs_table = rows(lance_ops.dataset(ours_uri), lance.dataset(theirs_uri))
    assert ours_table.equals(theirs_table)
    # pylance reads the row ids we assigned identically
    assert (
        lance.dataset(ours_uri)
        .to_table(with_row_id=True)
        .equals(lance_ops.dataset(ours_uri).to_table(with_row_id=True))
    )
    assert lance.dataset(ours_uri).has_stable_row_ids == stable


@pytest.mark.interop
def test_take_rows_by_stable_id_matches_pylance(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    lance_ops.write_dataset(table(50), uri, max_rows_per_file=8, enable_stable_row_ids=True)
    lance_ops.dataset(uri).delete("id % 7 = 0")
    lance_module.dataset(uri).optimize.compact_files(target_rows_per_fragment=20)
    ids = [49, 3, 7, 1000, 0, 21, 22]
    ours = lance_ops.dataset(uri)._take_rows(ids, columns=["id", "s"])
    theirs = lance_module.dataset(uri)._take_rows(ids, columns=["id", "s"])
    assert ours.to_pydict() == theirs.to_pydict()


def test_next_row_id_reassigned_when_commit_retries(tmp_path) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    lance_ops.write_dataset(table(10), uri, enable_stable_row_ids=True)
    first = write_fragments(table(5, 10), uri)
    second = write_fragments(table(4, 20), uri)
    lance_ops.LanceDataset.commit(uri, LanceOperation.Append(first), read_version=1)
    late = lance_ops.LanceDataset.commit(uri, LanceOperation.Append(second), read_version=1)
    assert late.manifest.next_row_id == 19
    got = late.to_table(columns=["id"], with_row_id=True)
    assert got["_rowid"].to_pylist() == list(range(19))
    assert got["id"].to_pylist() == [*range(15), *range(20, 24)]
    # the transaction file keeps the fragments as submitted (no sequences), as pylance writes them
    txn = late.read_transaction()
    assert txn is not None
    assert all(f.row_ids is None for f in txn.operation.fragments)


@pytest.mark.interop
def test_external_row_id_sequences_are_read(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    lance_ops.write_dataset(table(10), uri, enable_stable_row_ids=True)
    (tmp_path / "d" / "ids.bin").write_bytes(b"pad" + encode_row_ids([np.arange(40, 50, dtype=np.uint64)]))
    (fragment,) = lance_ops.dataset(uri).manifest.fragments
    size = len(encode_row_ids([np.arange(40, 50, dtype=np.uint64)]))
    moved = replace(fragment, row_ids=ExternalFile("ids.bin", 3, size))
    ds = lance_ops.LanceDataset.commit(uri, LanceOperation.Overwrite(ds_schema(uri), [moved]), read_version=1)
    assert ds.to_table(columns=["id"], with_row_id=True)["_rowid"].to_pylist() == list(range(40, 50))
    assert ds._take_rows([41, 49], columns=["id"])["id"].to_pylist() == [1, 9]
    # pylance 14 refuses external sequences, which is why we never write them
    with pytest.raises(ValueError, match="must have row ids"):
        lance_module.dataset(uri)


def ds_schema(uri: str) -> pa.Schema:
    return lance_ops.dataset(uri).schema


@pytest.mark.interop
def test_row_ids_through_restore_match_pylance(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    lance = lance_module
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for write, uri in ((lance_ops.write_dataset, ours_uri), (lance.write_dataset, theirs_uri)):
        write(table(10), uri, enable_stable_row_ids=True)
        write(table(5, 10), uri, mode="append")
    lance_ops.LanceDataset.commit(ours_uri, LanceOperation.Restore(1))
    lance.dataset(theirs_uri, version=1).restore()
    for write, uri in ((lance_ops.write_dataset, ours_uri), (lance.write_dataset, theirs_uri)):
        write(table(5, 100), uri, mode="append")
    ours = lance_ops.dataset(ours_uri).to_table(with_row_id=True, with_row_address=True)
    theirs = lance.dataset(theirs_uri).to_table(with_row_id=True, with_row_address=True)
    assert ours.equals(theirs)
    assert ours["_rowid"].to_pylist() == [*range(10), *range(15, 20)]
    assert (
        lance.dataset(ours_uri)
        .to_table(with_row_id=True)
        .equals(lance_ops.dataset(ours_uri).to_table(with_row_id=True))
    )


@pytest.mark.interop
def test_row_ids_through_merge_add_column(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    from lance_ops.fragment import WriteOptions, write_data_file

    uri = str(tmp_path / "d")
    ds = lance_ops.write_dataset(table(30), uri, max_rows_per_file=12, enable_stable_row_ids=True)
    ds.delete("id % 5 = 2")
    ds = lance_ops.dataset(uri)
    before = ds.to_table(with_row_id=True)
    schema = ds.manifest.schema.with_new_fields([pa.field("extra", pa.int64())])
    new_field = schema.project(["extra"])
    fragments = []
    for fragment in ds.manifest.fragments:
        values = pa.table({"extra": pa.array(range(fragment.physical_rows), pa.int64())})
        data_file = write_data_file(
            values, uri, new_field, fragment.physical_rows, WriteOptions(data_storage_version="2.2")
        )
        fragments.append(replace(fragment, files=(*fragment.files, data_file)))
    merged = lance_ops.LanceDataset.commit(
        uri, LanceOperation.Merge(fragments, schema), read_version=ds.version
    )
    after = merged.to_table(columns=["id", "s", "st"], with_row_id=True)
    assert after.equals(before)
    theirs = lance_module.dataset(uri).to_table(with_row_id=True)
    assert theirs.equals(merged.to_table(with_row_id=True))
    lance_module.dataset(uri).optimize.compact_files()
    assert (
        lance_ops.dataset(uri)
        .to_table(columns=["id"], with_row_id=True)
        .equals(before.select(["id", "_rowid"]))
    )


@pytest.mark.interop
def test_row_ids_through_add_alter_drop_columns_and_compaction(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """The schema-evolution operations and our compaction keep every row's stable id, as pylance reads it."""
    uri = str(tmp_path / "d")
    ds = lance_ops.write_dataset(table(40), uri, max_rows_per_file=9, enable_stable_row_ids=True)
    ds.delete("id % 6 = 1")
    before = lance_ops.dataset(uri).to_table(columns=["id"], with_row_id=True)
    ds = lance_ops.dataset(uri)
    ds.add_columns({"twice": "id * 2"})
    ds.alter_columns({"path": "twice", "name": "double"})
    ds.drop_columns(["s"])
    ds.optimize.compact_files()
    ours = lance_ops.dataset(uri).to_table(columns=["id", "double"], with_row_id=True)
    assert ours.select(["id", "_rowid"]).equals(before)
    assert ours["double"].to_pylist() == [2 * i for i in ours["id"].to_pylist()]
    theirs = lance_module.dataset(uri).to_table(columns=["id", "double"], with_row_id=True)
    assert theirs.sort_by("_rowid").equals(ours.sort_by("_rowid"))


@pytest.mark.interop
@pytest.mark.parametrize("stable", [True, False])
def test_rowid_rowaddr_with_filter_limit_and_fragments(tmp_path, lance_module, stable: bool) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "d")
    lance_ops.write_dataset(table(40), uri, max_rows_per_file=9, enable_stable_row_ids=stable)
    lance_ops.dataset(uri).delete("id % 3 = 0")
    lance_module.dataset(uri).optimize.compact_files(target_rows_per_fragment=15)
    ours, theirs = lance_ops.dataset(uri), lance_module.dataset(uri)
    kwargs = {"columns": ["id"], "with_row_id": True, "with_row_address": True}
    assert ours.to_table(filter="id > 20", **kwargs).equals(theirs.to_table(filter="id > 20", **kwargs))
    assert ours.to_table(limit=7, offset=5, **kwargs).equals(theirs.to_table(limit=7, offset=5, **kwargs))
    for mine, other in zip(ours.get_fragments(), theirs.get_fragments(), strict=True):
        assert mine.to_table(**kwargs).equals(other.to_table(**kwargs))


def _sequences(uri: str) -> tuple[object, ...]:
    m = lance_ops.dataset(uri).manifest
    return (
        m.next_row_id,
        m.reader_feature_flags,
        m.writer_feature_flags,
        [
            (f.id, f.physical_rows, f.row_ids, f.created_at_versions, f.last_updated_at_versions)
            for f in m.fragments
        ],
    )


def _replace_column_file(mod, uri: str) -> None:  # type: ignore[no-untyped-def]
    """Replace fragment 0's file of column ``x`` (its last file) by a new one (DataReplacement)."""
    import uuid

    from lance.file import LanceFileWriter

    from lance_ops.table.manifest import DataFile

    name = f"{uuid.uuid4().hex}.lance"
    first = lance_ops.dataset(uri).manifest.fragments[0]
    rows, (field,) = first.physical_rows, first.files[-1].fields
    with LanceFileWriter(f"{uri}/data/{name}", version="2.2") as writer:
        writer.write_batch(pa.table({"x": pa.array(range(1000, 1000 + rows), pa.int64())}))
    version = mod.dataset(uri).version
    if mod is lance_ops:
        operation = LanceOperation.DataReplacement([(0, DataFile(name, (field,), (0,), 2, 2))])
    else:
        new_file = mod.fragment.DataFile(name, [field], [0], 2, 2)
        operation = mod.LanceOperation.DataReplacement([mod.LanceOperation.DataReplacementGroup(0, new_file)])
    mod.LanceDataset.commit(uri, operation, read_version=version)


def _update_two_rows(mod, uri: str) -> None:  # type: ignore[no-untyped-def]
    ds = mod.dataset(uri)
    fragment = ds.get_fragments()[1]
    ids = fragment.to_table(columns=["_rowid"])["_rowid"].to_pylist()
    metadata, fields = fragment.update_columns(
        pa.table({"_rowid": pa.array(ids[:2], pa.uint64()), "s": ["new0", "new1"]})
    )
    operation = mod.LanceOperation.Update(updated_fragments=[metadata], fields_modified=fields)
    mod.LanceDataset.commit(uri, operation, read_version=ds.version)


@pytest.mark.interop
@pytest.mark.parametrize("stable", [True, False])
def test_sequences_through_every_operation_match_pylance(tmp_path, lance_module, stable: bool) -> None:  # type: ignore[no-untyped-def]
    """The same operations by us and by pylance leave byte-identical row id and version sequences,
    ``next_row_id`` and feature flags, and the same ``_rowid`` / ``_rowaddr``."""
    lance = lance_module
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    steps = [
        (
            "create",
            lambda m, u: m.write_dataset(table(20), u, max_rows_per_file=7, enable_stable_row_ids=stable),
        ),
        ("append 0 rows", lambda m, u: m.write_dataset(table(1, 20).slice(0, 0), u, mode="append")),
        ("append 1 row", lambda m, u: m.write_dataset(table(1, 20), u, mode="append")),
        ("delete", lambda m, u: m.dataset(u).delete("id % 5 = 1")),
        ("add_columns", lambda m, u: m.dataset(u).add_columns({"x": "id * 2"})),
        ("alter_columns", lambda m, u: m.dataset(u).alter_columns({"path": "x", "data_type": pa.int64()})),
        ("update_columns", _update_two_rows),
        ("DataReplacement", _replace_column_file),
        ("drop_columns", lambda m, u: m.dataset(u).drop_columns(["x"])),
        ("overwrite", lambda m, u: m.write_dataset(table(9, 100), u, mode="overwrite", max_rows_per_file=4)),
        ("restore", lambda m, u: m.dataset(u, version=4).restore()),
        ("append", lambda m, u: m.write_dataset(table(2, 300), u, mode="append")),
    ]
    for name, step in steps:
        step(lance_ops, ours)
        step(lance, theirs)
        assert _sequences(ours) == _sequences(theirs), name
        kwargs = {"with_row_id": True, "with_row_address": True}
        expected = lance.dataset(theirs).to_table(**kwargs)
        assert lance.dataset(ours).to_table(**kwargs).equals(expected), name
        assert lance_ops.dataset(ours).to_table(**kwargs).equals(expected), name


@pytest.mark.interop
@pytest.mark.parametrize("stable", [True, False])
def test_rowid_rowaddr_in_filters_and_takes_match_pylance(tmp_path, lance_module, stable: bool) -> None:  # type: ignore[no-untyped-def]
    """Filters may name ``_rowid`` / ``_rowaddr``; takes may return them, in the order asked."""
    uri = str(tmp_path / "d")
    lance_ops.write_dataset(table(40), uri, max_rows_per_file=9, enable_stable_row_ids=stable)
    lance_ops.write_dataset(table(5, 40), uri, mode="append")
    lance_ops.dataset(uri).delete("id % 4 = 1")
    lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=12)
    ours, theirs = lance_ops.dataset(uri), lance_module.dataset(uri)
    some_ids = theirs.to_table(with_row_id=True)["_rowid"].to_pylist()[::4]
    calls = [
        lambda ds: ds.to_table(columns=["id"], filter="_rowid > 20", with_row_id=True),
        lambda ds: ds.to_table(
            columns=["id"], filter="_rowaddr >= 4294967296 and id % 2 = 0", with_row_address=True
        ),
        lambda ds: ds.scanner(columns=["s"], filter="_rowid in (2, 3, 6, 44)").to_table(),
        lambda ds: ds.get_fragments()[0].to_table(columns=["id"], filter="_rowid > 2"),
        lambda ds: ds.take([0, 5, 3], columns=["id", "_rowid", "_rowaddr"]),
        lambda ds: ds.take([1, 2], columns=["_rowaddr", "s"]),
        lambda ds: ds.take([], columns=["id", "_rowid"]),
        lambda ds: ds._take_rows(some_ids, columns=["_rowid", "id"]),
    ]
    for n, call in enumerate(calls):
        mine, other = call(ours), call(theirs)
        assert mine.schema == other.schema and mine.equals(other), n
    assert ours.count_rows(filter="_rowid < 10") == theirs.count_rows(filter="_rowid < 10")


def test_take_rows_by_address_outside_the_version_raises(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Without stable ids, pylance skips deleted rows but refuses an address past its fragment's
    rows or in a fragment the version does not have (OSError "Invalid user input")."""
    from lance_ops.errors import TakeIndexError

    uri = str(tmp_path / "d")
    lance_ops.write_dataset(table(20), uri, max_rows_per_file=10)
    ds = lance_ops.dataset(uri)
    ds.delete("id = 3")
    assert ds._take_rows([3, (1 << 32) + 9, 1], columns=["id"])["id"].to_pylist() == [19, 1]
    for address in (10, (1 << 32) + 10, 5 << 32):
        with pytest.raises(TakeIndexError, match="not a row of version"):
            ds._take_rows([0, address], columns=["id"])
    with pytest.raises(OSError):
        ds._take_rows([5 << 32])


@pytest.mark.interop
def test_rowid_rowaddr_column_order_matches_pylance(tmp_path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """With ``with_row_id`` / ``with_row_address`` set, ``_rowid`` / ``_rowaddr`` come last (in
    that order) even when ``columns`` names them elsewhere; without, they stay where named."""
    import itertools

    uri = str(tmp_path / "d")
    lance_ops.write_dataset(table(10), uri, max_rows_per_file=4, enable_stable_row_ids=True)
    for columns in (["_rowid", "id"], ["id", "_rowaddr", "s"], ["_rowaddr", "_rowid", "id"], ["_rowid"]):
        for with_id, with_address in itertools.product([False, True], repeat=2):
            kwargs = {"columns": columns, "with_row_id": with_id, "with_row_address": with_address}
            ours = lance_ops.dataset(uri).to_table(**kwargs)
            theirs = lance_module.dataset(uri).to_table(**kwargs)
            assert ours.schema == theirs.schema and ours.equals(theirs), kwargs
