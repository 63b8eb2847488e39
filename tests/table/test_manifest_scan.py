"""The aggregating manifest scan (table.manifest_scan) against the per-fragment path: same facts,
same errors, same counts as pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops._proto import table_pb2, transaction_pb2
from lance_ops.errors import CorruptFileError, UnsafePathError, UnsupportedFeatureError
from lance_ops.table.manifest import (
    FOOTER,
    SCAN_TOTALS_FROM,
    DataFile,
    DataFragment,
    DeletionFile,
    DeletionFileType,
    ExternalFile,
    FragmentList,
    Manifest,
    decode_manifest_file,
    encode_manifest_file,
    fragment_pb_totals,
    fragment_row_counts,
    manifest_pb_totals,
    read_section,
)
from lance_ops.table.manifest_scan import scan_fragments, transaction_head
from lance_ops.table.schema import LanceSchema
from lance_ops.table.transaction import OPERATIONS, Transaction


def _encoded(fragments: tuple[DataFragment, ...]) -> bytes:
    manifest = Manifest(
        schema=LanceSchema(()), fragments=fragments, version=1, max_fragment_id=len(fragments)
    )
    return encode_manifest_file(manifest)


def _payload(data: bytes) -> bytes:
    position = FOOTER.unpack_from(data, len(data) - FOOTER.size)[0]
    return read_section(data, position, "m.manifest", "manifest")


_external = st.one_of(
    st.none(), st.builds(ExternalFile, st.sampled_from(["_rowids/a", "s/b"]), st.just(0), st.just(4))
)
_fragment = st.builds(
    lambda i, files, rows, deletion, row_ids, created: DataFragment(
        i,
        tuple(DataFile(f"f{i}-{n}.lance", (0,), (0,), 2, 1, size) for n, size in enumerate(files)),
        rows,
        deletion,
        row_ids=row_ids,
        created_at_versions=created,
    ),
    st.integers(0, 1000),
    st.lists(st.integers(0, 99), max_size=3),
    st.integers(0, 5),
    st.one_of(
        st.none(),
        st.builds(
            DeletionFile,
            st.sampled_from(list(DeletionFileType)),
            st.just(1),
            st.integers(0, 3),
            st.integers(0, 2),
        ),
    ),
    _external,
    _external,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_fragment, max_size=8))
def test_scan_facts_equal_the_fragments(fragments: list[DataFragment]) -> None:
    scan = scan_fragments(_payload(_encoded(tuple(fragments))))
    assert scan.data_paths == [f.path for fragment in fragments for f in fragment.files]
    assert scan.data_files == sum(len(fragment.files) for fragment in fragments)
    sequences = [
        s.path
        for fragment in fragments
        for s in (fragment.row_ids, fragment.created_at_versions)
        if isinstance(s, ExternalFile)
    ]
    assert sorted(scan.sequence_paths) == sorted(sequences) and scan.sequences == len(sequences)
    assert scan.deletion_files == sum(f.deletion_file is not None for f in fragments)
    decoded = decode_manifest_file(_encoded(tuple(fragments)), "m.manifest")[0].fragments
    assert isinstance(decoded, FragmentList)
    physical, deleted, has_deletion = fragment_row_counts(tuple(fragments))
    total = decoded.known_live_total()
    if np.all(physical > 0) and not np.any(has_deletion & (deleted == 0)):
        assert total == int((physical - deleted).sum())
    else:
        assert total is None  # unknown counts: the caller opens those fragments


@pytest.mark.parametrize(
    "fragment",
    [
        DataFragment(0, (DataFile("../x.lance", (0,), (0,), 2, 1),), 1),
        DataFragment(0, (DataFile("", (0,), (0,), 2, 1),), 1),
        DataFragment(0, (DataFile("/abs.lance", (0,), (0,), 2, 1),), 1),
        DataFragment(0, (DataFile("a.lance", (0,), (0,), 2, 1),), 1, row_ids=ExternalFile("s3://b/k", 0, 1)),
        DataFragment(
            0, (DataFile("a.lance", (0,), (0,), 2, 1),), 1, created_at_versions=ExternalFile("", 0, 1)
        ),
    ],
)
def test_unsafe_paths_raise_at_decode_as_before(fragment: DataFragment) -> None:
    data = _encoded((DataFragment(1, (DataFile("ok.lance", (0,), (0,), 2, 1),), 1), fragment))
    with pytest.raises(UnsafePathError) as scanned:
        decode_manifest_file(data, "m.manifest")
    parsed = table_pb2.Manifest.FromString(_payload(data))
    with pytest.raises(UnsafePathError) as general:
        FragmentList(parsed.fragments, "m.manifest")
    assert str(scanned.value) == str(general.value)


def test_unknown_deletion_type_raises_at_decode() -> None:
    pb = table_pb2.Manifest.FromString(
        _payload(_encoded((DataFragment(0, (), 3, DeletionFile(DeletionFileType.BITMAP, 1, 1, 1)),)))
    )
    pb.fragments[0].deletion_file.file_type = 7
    with pytest.raises(CorruptFileError):
        FragmentList(pb.fragments, "m.manifest", pb.SerializeToString())


def test_a_field_repeated_on_the_wire_is_judged_by_the_decoded_fragment() -> None:
    """The scan sees every occurrence (here an unsafe path the decoded fragment does not keep):
    it only skips the per-fragment pass, which then accepts the manifest as before."""
    safe = table_pb2.DataFile(path="a.lance").SerializeToString()
    unsafe_then_safe = b"\x0a\x0a../x.lance" + safe  # path field twice: the last one wins
    fragment = (
        b"\x12" + bytes([len(unsafe_then_safe)]) + unsafe_then_safe + b"\x20\x05"
    )  # files, physical_rows
    payload = b"\x12" + bytes([len(fragment)]) + fragment
    pb = table_pb2.Manifest.FromString(payload)
    assert pb.fragments[0].files[0].path == "a.lance"
    assert scan_fragments(payload).data_paths == ["../x.lance", "a.lance"]
    fragments = FragmentList(pb.fragments, "m.manifest", payload)
    assert fragments[0].files[0].path == "a.lance"


def test_count_rows_matches_pylance_with_deletions_and_after_our_commits(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = pa.table({"id": np.arange(3000, dtype=np.int64)})
    lance.write_dataset(table, uri, max_rows_per_file=500)
    lance.dataset(uri).delete("id % 7 = 0")
    assert lance_ops.dataset(uri).count_rows() == lance.dataset(uri).count_rows() == 3000 - 429
    ours = lance_ops.dataset(uri)
    ours.delete("id < 100")
    lance_ops.write_dataset(table.slice(0, 10), uri, mode="append")
    assert lance_ops.dataset(uri).count_rows() == lance.dataset(uri).count_rows() == 3000 - 429 - 85 + 10


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(sorted(OPERATIONS)),
    st.integers(0, 2**64 - 1),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4),
)
def test_transaction_head_equals_the_decoded_transaction(which: str, read_version: int, props: dict) -> None:
    pb = transaction_pb2.Transaction(read_version=read_version, uuid="u", transaction_properties=props)
    getattr(pb, which).SetInParent()
    data = pb.SerializeToString()
    head = transaction_head(data)
    full = Transaction.deserialize(data)
    assert (head.operation, head.read_version, head.properties) == (
        full.operation.oneof,
        full.read_version,
        dict(full.properties),
    )
    assert list(head.properties.items()) == list(full.properties.items()) and not head.merges_mem_wal


def test_transaction_head_marks_what_the_decoder_refuses() -> None:
    pb = transaction_pb2.Transaction(read_version=1)
    pb.update.mem_wal_to_merge.SetInParent()
    assert transaction_head(pb.SerializeToString()).merges_mem_wal
    with pytest.raises(UnsupportedFeatureError):
        Transaction.deserialize(pb.SerializeToString())
    none = transaction_head(transaction_pb2.Transaction(read_version=2).SerializeToString())
    assert none.operation is None and none.read_version == 2


def test_manifest_totals_from_the_scan_equal_the_per_fragment_walk() -> None:
    fragments = tuple(
        DataFragment(
            i,
            tuple(DataFile(f"{i}-{n}.lance", (0,), (0,), 2, 1, 10 * i + n) for n in range(i % 3)),
            i % 5,
            DeletionFile(DeletionFileType.BITMAP, 1, i, i % 2) if i % 4 == 0 else None,
        )
        for i in range(SCAN_TOTALS_FROM + 10)
    )
    data = _encoded(fragments)
    pb = table_pb2.Manifest.FromString(_payload(data))
    assert manifest_pb_totals(pb, data, "m.manifest") == fragment_pb_totals(pb.fragments)
    small = _encoded(fragments[:5])
    pb = table_pb2.Manifest.FromString(_payload(small))
    assert manifest_pb_totals(pb, small, "m.manifest") == fragment_pb_totals(pb.fragments)
