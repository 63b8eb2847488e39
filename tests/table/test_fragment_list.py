"""Decoded manifests convert their fragments on first access (FragmentList); counts, takes and
path checks do not need the conversion, and answers equal pylance's."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lance_ops
from lance_ops.errors import CorruptFileError, UnsafePathError
from lance_ops.table.manifest import (
    FOOTER,
    MAGIC,
    DataFile,
    DataFragment,
    DeletionFile,
    DeletionFileType,
    ExternalFile,
    FragmentList,
    Manifest,
    decode_manifest_file,
    encode_manifest_file,
    fragment_file_totals,
    fragment_id_array,
    fragment_root_files,
    fragment_row_counts,
)
from lance_ops.table.paths import check_relative_path, check_relative_paths
from lance_ops.table.schema import LanceSchema


def _fragments() -> tuple[DataFragment, ...]:
    return (
        DataFragment(3, (DataFile("a.lance", (0,), (0,), 2, 1, 10),), 5),
        DataFragment(
            7,
            (DataFile("b.lance", (0,), (0,), 2, 1, 10),),
            9,
            DeletionFile(DeletionFileType.ARROW_ARRAY, 2, 1, 4),
            row_ids=b"\x01",
            created_at_versions=ExternalFile("_rowids/x", 10, 20),
        ),
        DataFragment(8, (DataFile("c.lance", (0,), (0,), 2, 1, 10),), 0),
        DataFragment(9, (), 6, DeletionFile(DeletionFileType.BITMAP, 2, 2, 0)),
    )


def _decoded(fragments: tuple[DataFragment, ...]) -> Manifest:
    manifest = Manifest(schema=LanceSchema(()), fragments=fragments, version=1, max_fragment_id=9)
    return decode_manifest_file(encode_manifest_file(manifest), "m.manifest")[0]


def test_fragment_list_behaves_as_the_tuple_it_stands_for() -> None:
    fragments = _fragments()
    decoded = _decoded(fragments).fragments
    assert isinstance(decoded, FragmentList)
    assert len(decoded) == 4 and decoded._items == [None] * 4
    assert decoded[1] == fragments[1] and decoded[1] is decoded[1]
    assert decoded._items.count(None) == 3  # only the fragment asked for was converted
    assert decoded[-1] == fragments[-1] and decoded[1:3] == fragments[1:3]
    assert list(decoded) == list(fragments) and decoded == fragments and fragments == decoded
    assert decoded != fragments[:3] and decoded + fragments[:1] == (*fragments, fragments[0])
    assert fragments[:1] + decoded == (fragments[0], *fragments)
    assert hash(decoded) == hash(fragments)
    assert pickle.loads(pickle.dumps(decoded)) == fragments
    expected = Manifest(schema=LanceSchema(()), fragments=fragments, version=1, max_fragment_id=9)
    assert _decoded(fragments) == expected
    with pytest.raises(IndexError):
        decoded[4]


def test_counts_and_ids_without_conversion_equal_the_dataclasses() -> None:
    fragments = _fragments()
    decoded = _decoded(fragments).fragments
    counts = fragment_row_counts(decoded)
    assert decoded._items == [None] * 4  # type: ignore[attr-defined]
    for got, want in zip(counts, fragment_row_counts(fragments), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(counts[0], [5, 9, 0, 6])
    np.testing.assert_array_equal(counts[1], [0, 4, 0, 0])
    np.testing.assert_array_equal(counts[2], [False, True, False, True])
    np.testing.assert_array_equal(fragment_id_array(decoded), [3, 7, 8, 9])
    np.testing.assert_array_equal(fragment_id_array(fragments), [3, 7, 8, 9])
    assert _decoded(fragments).num_rows == 5 + 9 - 4 + 6


def test_root_files_and_file_totals_without_conversion_equal_the_dataclasses() -> None:
    fragments = (
        *_fragments(),
        DataFragment(
            10,
            (DataFile("d.lance", (0,), (0,), 2, 1, 7), DataFile("e.lance", (1,), (0,), 2, 1, 5, base_id=2)),
            3,
            DeletionFile(DeletionFileType.BITMAP, 4, 5, 1, base_id=2),
            row_ids=ExternalFile("_rowids/r", 0, 8),
            last_updated_at_versions=ExternalFile("_rowids/u", 8, 4),
        ),
    )
    decoded = _decoded(fragments).fragments
    files, totals = fragment_root_files(decoded), fragment_file_totals(decoded)
    assert decoded._items == [None] * 5  # type: ignore[attr-defined]
    assert files == fragment_root_files(fragments) and totals == fragment_file_totals(fragments)
    assert files == [
        "data/a.lance",
        "data/b.lance",
        "_deletions/7-2-1.arrow",
        "_rowids/x",
        "data/c.lance",
        "_deletions/9-2-2.bin",
        "data/d.lance",  # e.lance and the deletion file live under base 2
        "_rowids/r",
        "_rowids/u",
    ]
    assert totals == (5, 10 + 10 + 10 + 7 + 5)


def test_an_unknown_deletion_file_type_in_any_fragment_is_refused_on_decode() -> None:
    manifest = Manifest(schema=LanceSchema(()), fragments=_fragments(), version=1)
    pb = manifest.to_pb()
    pb.fragments[2].deletion_file.file_type = 7  # an enum value no reader knows
    body = pb.SerializeToString()
    payload = len(body).to_bytes(4, "little") + body  # the section's length prefix
    with pytest.raises(CorruptFileError, match="invalid manifest") as info:
        decode_manifest_file(payload + FOOTER.pack(0, 0, 2, MAGIC), "v.manifest")
    assert info.value.path == "v.manifest"


@pytest.mark.parametrize("where", ["files", "external"])
def test_unsafe_paths_of_any_fragment_are_refused_on_decode(where: str) -> None:
    fragments = list(_fragments())
    if where == "files":
        fragments[3] = replace(fragments[3], files=(DataFile("../x.lance", (0,), (0,), 2, 1, 1),))
    else:
        fragments[2] = replace(fragments[2], last_updated_at_versions=ExternalFile("/etc/x", 0, 1))
    with pytest.raises(UnsafePathError) as info:
        _decoded(tuple(fragments))
    assert info.value.path == "m.manifest"
    assert ("data file" if where == "files" else "row-id sequence") in str(info.value)


_SEGMENTS = st.sampled_from(
    ["a", "b.lance", ".", "..", "", "x:y", "c:", "/", "\\", "\x00", "\n", "d.e", "f.", ".g"]
)


@given(st.lists(st.lists(_SEGMENTS, max_size=4).map("/".join), max_size=5))
def test_check_relative_paths_agrees_with_one_path_at_a_time(paths: list[str]) -> None:
    def one_by_one() -> str | None:
        for path in paths:
            try:
                check_relative_path(path, "data file")
            except UnsafePathError as exc:
                return str(exc)
        return None

    try:
        check_relative_paths(paths, "data file")
        got = None
    except UnsafePathError as exc:
        got = str(exc)
    assert got == one_by_one()


def test_count_and_take_touch_only_what_they_need(tmp_path: Path, lance_module, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    for start in range(0, 60, 10):
        data = pa.table({"id": pa.array(range(start, start + 10), pa.int64())})
        lance_ops.write_dataset(data, uri, mode="append" if start else "create")
    lance_ops.dataset(uri).delete("id % 7 = 3")
    ds = lance_ops.dataset(uri)
    theirs = lance_module.dataset(uri)
    assert ds.count_rows() == theirs.count_rows() == 60 - 9
    assert ds.manifest.fragments._items == [None] * 6  # type: ignore[attr-defined]
    positions = [50, 0, 11, 11, 49, 27]
    assert ds.take(positions) == theirs.take(positions)
    assert sum(f is not None for f in ds.manifest.fragments._items) == 4  # type: ignore[attr-defined]
    addresses = [(5 << 32) | 2, (1 << 32) | 4, (2 << 32) | 3]
    assert ds._take_rows(addresses) == theirs._take_rows(addresses)
    with pytest.raises(lance_ops.errors.TakeIndexError):  # pylance: "non-existent fragment: 9"
        ds._take_rows([(9 << 32) | 1])
    with pytest.raises(lance_ops.errors.TakeIndexError):
        ds.take([51])


def test_get_fragment_converts_only_that_fragment(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    data = pa.table({"id": pa.array(range(40), pa.int64())})
    lance_ops.write_dataset(data, uri, max_rows_per_file=10)
    ds, theirs = lance_ops.dataset(uri), lance_module.dataset(uri)
    fragment = ds.get_fragment(np.int64(2))
    assert fragment is not None and fragment.fragment_id == 2
    assert sum(f is not None for f in ds.manifest.fragments._items) == 1  # type: ignore[attr-defined]
    assert fragment.to_table() == theirs.get_fragment(2).to_table()
    assert ds.get_fragment(7) is None and theirs.get_fragment(7) is None
    assert ds.get_fragment("2") is None  # type: ignore[arg-type]
