"""Remap invariants: the identity mapping rewrites every remappable index into files pylance reads
identically; damaged or missing files are typed errors naming the index; the mapping and the
row-set codecs agree with plain Python references on every shape."""

from __future__ import annotations

import dataclasses
import shutil
import uuid
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64

import lance_ops
from lance_ops.errors import IndexCorruptError, InvalidArgumentError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.index.files import IndexWriter, new_index_directory
from lance_ops.index.mapping import RowAddressMapping
from lance_ops.index.remap import remap_index
from lance_ops.index.treemap import (
    decode_bitmap64,
    decode_row_address_map,
    encode_bitmap64,
    encode_row_address_map,
)
from lance_ops.index.types import uuid_text
from lance_ops.io.context import StorageContext
from tests.index.conftest import build_all
from tests.index.helpers import commit_indices, scalar_answers

REMAPPABLE = [
    "id_idx",
    "cat_idx",
    "tags_idx",
    "txt_ng",
    *(f"v_{k}" for k in ("ivf_flat", "ivf_pq", "ivf_sq")),
]
REMAPPABLE += ["v_ivf_hnsw_flat", "v_ivf_hnsw_pq", "v_ivf_hnsw_sq", "txt_idx"]


@pytest.fixture(scope="module")
def every_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("identity") / "ds"
    build_all(path)
    return path


def _files(path: Path, index: lance_ops.table.manifest.IndexMetadata) -> dict[str, tuple]:
    out = {}
    for f in index.files:
        reader = LanceFileReader(str(path / "_indices" / uuid_text(index) / f.path))
        buffers = tuple(reader.read_global_buffer(i) for i in range(1, len(reader.metadata().global_buffers)))
        out[f.path] = (reader.read_all().to_table(), buffers, str(reader.version))
    return out


def test_identity_remap_reads_identically(every_index: Path, tmp_path: Path) -> None:
    path = tmp_path / "ds"
    shutil.copytree(every_index, path)
    ours = lance_ops.dataset(str(path))
    before = lance.dataset(str(path))
    predicates = ["id = 1500", "id < 7", "cat = 'c2'", "cat IS NULL", "array_has_any(tags, ['u4'])"]
    predicates.append("contains(txt, 'world 3')")
    expected = {p: scalar_answers(before, p)[0] for p in predicates}
    q = np.random.default_rng(3).standard_normal(8).astype(np.float32)
    new, old = [], []
    for index in ours.manifest.indices:
        if index.name not in REMAPPABLE:
            continue
        result = remap_index(ours.storage, index, RowAddressMapping.identity())
        assert result is not None and result.uuid != index.uuid
        assert result.index_details == index.details and result.index_version == index.index_version
        assert [f.path for f in result.files] == [f.path for f in index.files]
        remapped = result.metadata_for(index, index.fragment_bitmap)
        for f in result.files:
            assert (path / "_indices" / result.uuid_text / f.path).stat().st_size == f.size_bytes
        old_files, new_files = _files(path, index), _files(path, remapped)
        for name, (table, buffers, version) in old_files.items():
            new_table, new_buffers, new_version = new_files[name]
            assert new_table.equals(table, check_metadata=True), (index.name, name)
            assert new_buffers == buffers and new_version == version, (index.name, name)
        new.append(remapped)
        old.append(index)
    assert len(new) == len(REMAPPABLE)
    after = commit_indices(path, new, old)
    for predicate, table in expected.items():
        answer, _, plan = scalar_answers(after, predicate)
        assert answer.equals(table), predicate
        assert "ScalarIndexQuery" in plan
    for query in ("world", "7"):
        mine = after.to_table(full_text_query=query, columns=["id"]).sort_by("id")
        assert mine.equals(before.to_table(full_text_query=query, columns=["id"]).sort_by("id"))
    nearest = {"column": "vec", "q": q, "k": 10, "nprobes": 4}
    assert "ANNSubIndex" in after.scanner(nearest=nearest).explain_plan(True)
    assert after.to_table(columns=["id"], nearest=nearest).equals(
        before.to_table(columns=["id"], nearest=nearest)
    )


def test_missing_and_corrupt_files(every_index: Path, tmp_path: Path) -> None:
    path = tmp_path / "ds"
    shutil.copytree(every_index, path)
    ours = lance_ops.dataset(str(path))
    by_name = {ix.name: ix for ix in ours.manifest.indices}
    index_dirs = sorted(p.name for p in (path / "_indices").iterdir())
    (path / "_indices" / uuid_text(by_name["id_idx"]) / "page_lookup.lance").unlink()
    with pytest.raises(IndexCorruptError, match="id_idx.*missing"):
        remap_index(ours.storage, by_name["id_idx"], RowAddressMapping.identity())
    aux = path / "_indices" / uuid_text(by_name["v_ivf_pq"]) / "auxiliary.idx"
    aux.write_bytes(aux.read_bytes()[:-7])
    with pytest.raises(IndexCorruptError, match="v_ivf_pq"):
        remap_index(ours.storage, by_name["v_ivf_pq"], RowAddressMapping.identity())
    bitmaps = path / "_indices" / uuid_text(by_name["cat_idx"]) / "bitmap_page_lookup.lance"
    bitmaps.write_bytes(b"garbage" * 10)
    with pytest.raises(IndexCorruptError, match="cat_idx"):
        remap_index(ours.storage, by_name["cat_idx"], RowAddressMapping.identity())
    # a failed remap leaves no directory of its own behind and never touches the old ones
    assert index_dirs == sorted(p.name for p in (path / "_indices").iterdir())
    # a valid Lance file whose row sets are cut short
    tags = path / "_indices" / uuid_text(by_name["tags_idx"]) / "bitmap_page_lookup.lance"
    reader = LanceFileReader(str(tags))
    table = reader.read_all().to_table()
    cut = pa.array([b[:9] for b in table.column("bitmaps").to_pylist()], pa.binary())
    with LanceFileWriter(str(tags), table.schema) as writer:
        writer.add_global_buffer(reader.read_global_buffer(1))
        writer.write_batch(table.set_column(1, table.schema.field(1), cut))
    with pytest.raises(IndexCorruptError, match="tags_idx"):
        remap_index(ours.storage, by_name["tags_idx"], RowAddressMapping.identity())
    stale = dataclasses.replace(by_name["tags_idx"], uuid=bytes(16))
    with pytest.raises(IndexCorruptError, match="tags_idx"):
        remap_index(ours.storage, stale, RowAddressMapping.identity())


addresses = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 70_000)).map(lambda t: (t[0] << 32) | t[1]),
    max_size=300,
    unique=True,
)


@given(addresses, st.data())
def test_mapping_apply_matches_reference(addrs: list[int], data: st.DataObject) -> None:
    ordered = sorted(addrs)
    moved = data.draw(st.lists(st.sampled_from(ordered), unique=True) if ordered else st.just([]))
    rest = [a for a in ordered if a not in set(moved)]
    removed = data.draw(st.lists(st.sampled_from(rest), unique=True) if rest else st.just([]))
    targets = {a: (9 << 32) | i for i, a in enumerate(sorted(moved))}
    mapping = RowAddressMapping(
        np.array(sorted(moved), np.uint64),
        np.array([targets[a] for a in sorted(moved)], np.uint64),
        np.array(removed, np.uint64),
    )
    queries = ordered + ordered[:5]
    new, kept = mapping.apply(np.array(queries, np.uint64))
    reference = [targets.get(a, a) for a in queries if a not in set(removed)]
    assert new.tolist() == reference
    assert kept.tolist() == [a not in set(removed) for a in queries]


def test_mapping_rejects_bad_input() -> None:
    with pytest.raises(InvalidArgumentError):
        RowAddressMapping(np.array([2, 1], np.uint64), np.array([5, 6], np.uint64))
    with pytest.raises(InvalidArgumentError):
        RowAddressMapping(np.array([1], np.uint64), np.array([5, 6], np.uint64))
    with pytest.raises(InvalidArgumentError):
        RowAddressMapping(np.array([1], np.uint64), np.array([5], np.uint64), np.array([1], np.uint64))


@given(addresses)
def test_row_set_codecs_round_trip(addrs: list[int]) -> None:
    values = np.array(sorted(addrs), np.uint64)
    assert np.array_equal(decode_row_address_map(encode_row_address_map(values)), values)
    assert np.array_equal(decode_bitmap64(encode_bitmap64(values)), values)
    assert encode_bitmap64(values) == BitMap64(values.tolist(), optimize=False).serialize()
    # the row-address map: u32 count, then (fragment, size, 32-bit portable roaring) per fragment
    data = encode_row_address_map(values)
    fragments = sorted({a >> 32 for a in addrs})
    assert int.from_bytes(data[:4], "little") == len(fragments)
    if fragments:
        size = int.from_bytes(data[8:12], "little")
        first = [a & 0xFFFFFFFF for a in sorted(addrs) if a >> 32 == fragments[0]]
        assert BitMap.deserialize(data[12 : 12 + size]) == BitMap(first)


def test_new_index_directories_removed_when_a_block_fails(tmp_path: Path) -> None:
    """Directories started in a failed block go, nested blocks' too; a block that succeeds keeps
    them (and its first writer takes the uuid asked for)."""
    ctx = StorageContext.of(str(tmp_path))
    table = pa.table({"a": [1, 2]})
    chosen = bytes(range(16))
    with new_index_directory(ctx, chosen):
        IndexWriter(ctx).write("kept.lance", table)
    kept = sorted(p.name for p in (tmp_path / "_indices").iterdir())
    assert kept == [str(uuid.UUID(bytes=chosen))]
    with pytest.raises(RuntimeError, match="boom"):
        with new_index_directory(ctx):
            with new_index_directory(ctx):
                IndexWriter(ctx).write("inner.lance", table)
            IndexWriter(ctx).write("outer.lance", table)
            raise RuntimeError("boom")
    assert sorted(p.name for p in (tmp_path / "_indices").iterdir()) == kept
