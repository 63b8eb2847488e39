"""Maintenance of datasets carrying pylance-built indices (L15): compaction (remap, stable row ids,
deferred through the Fragment Reuse Index), the index metadata API, drop_index, optimize_indices'
remap of deferred indices, delete / overwrite / restore / drop column / cleanup.

Every case is checked against pylance 14: its indexed answers equal its unindexed answers on our
result, and index coverage equals what pylance's own operation leaves on a twin copy.
"""

from __future__ import annotations

import datetime
import shutil
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap64

import lance_ops
from lance_ops._proto import table_pb2
from lance_ops.errors import (
    DeferredRemapError,
    IndexCorruptError,
    IndexNotFoundError,
    SchemaChangeError,
    UnsupportedIndexTypeError,
)
from lance_ops.ops.commit import commit
from lance_ops.table import frag_reuse
from lance_ops.table.manifest import IndexMetadata
from lance_ops.table.transaction import CreateIndex

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROWS = 600
DIM = 8
FILTERS = ("id = 555", "id = 550", "id > 100 AND id < 130", "cat = 'c1'", "array_has_any(tags, ['t2'])")
SCALARS = {"id_idx": "BTree", "cat_idx": "Bitmap", "tags_idx": "LabelList", "zm": "ZoneMap"}


def _table(start: int, stop: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = stop - start
    return pa.table(
        {
            "id": np.arange(start, stop),
            "cat": pa.array([f"c{i % 5}" for i in range(start, stop)]),
            "tags": pa.array([[f"t{i % 3}", f"t{i % 7}"] for i in range(start, stop)]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * DIM, dtype=np.float32)), DIM),
        }
    )


def _build(lance, uri: str, stable: bool, vector: str = "IVF_PQ") -> None:  # type: ignore[no-untyped-def]
    ds = lance.write_dataset(_table(0, ROWS), uri, max_rows_per_file=100, enable_stable_row_ids=stable)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    ds.create_scalar_index("tags", "LABEL_LIST")
    params = {"num_sub_vectors": 2} if "PQ" in vector else {}
    ds.create_index("vec", vector, num_partitions=2, name="vec_idx", **params)
    ds.create_scalar_index("id", "ZONEMAP", name="zm")
    ds.delete("id % 10 = 0")


@pytest.fixture(scope="module")
def built(tmp_path_factory, lance_module):  # type: ignore[no-untyped-def]
    """One pylance-built dataset per (stable row ids, vector type); tests copy it."""
    cache: dict[tuple[bool, str], Path] = {}

    def get(stable: bool, vector: str = "IVF_PQ") -> Path:
        key = (stable, vector)
        if key not in cache:
            path = tmp_path_factory.mktemp("built") / f"{stable}-{vector}"
            _build(lance_module, str(path), stable, vector)
            cache[key] = path
        return cache[key]

    return get


def _copy(src: Path, dst: Path) -> str:
    shutil.copytree(src, dst)
    return str(dst)


def _answers_agree(ds) -> None:  # type: ignore[no-untyped-def]
    for predicate in FILTERS:
        indexed = ds.to_table(filter=predicate, columns=["id"])["id"].to_pylist()
        scanned = ds.to_table(filter=predicate, columns=["id"], use_scalar_index=False)["id"].to_pylist()
        assert sorted(indexed) == sorted(scanned), predicate


def _coverage(ds) -> dict[str, tuple[int, list[int]]]:  # type: ignore[no-untyped-def]
    return {
        d.name: (d.num_rows_indexed, sorted(i for s in d.segments for i in s.fragment_ids))
        for d in ds.describe_indices()
    }


def _recall(ds, queries: np.ndarray, k: int = 10) -> float:  # type: ignore[no-untyped-def]
    hits = 0
    for q in queries:
        got = ds.to_table(nearest={"column": "vec", "q": q, "k": k, "nprobes": 2}, columns=["id"])["id"]
        exact = ds.to_table(nearest={"column": "vec", "q": q, "k": k, "use_index": False}, columns=["id"])[
            "id"
        ]
        hits += len(set(got.to_pylist()) & set(exact.to_pylist()))
    return hits / (k * len(queries))


def _frag_reuse(uri: str) -> frag_reuse.FragReuseDetails:
    index = frag_reuse.find(lance_ops.dataset(uri).manifest)
    assert index is not None
    return frag_reuse.details_of(index)


@pytest.mark.parametrize(
    ("stable", "defer"), [(False, False), (False, True), (True, False)], ids=["remap", "deferred", "stable"]
)
def test_compaction_keeps_indices_right(tmp_path, built, lance_module, stable, defer) -> None:  # type: ignore[no-untyped-def]
    ours = _copy(built(stable), tmp_path / "ours")
    twin = _copy(built(stable), tmp_path / "twin")
    metrics = lance_ops.dataset(ours).optimize.compact_files(
        target_rows_per_fragment=250, defer_index_remap=defer
    )
    lance_module.dataset(twin).optimize.compact_files(target_rows_per_fragment=250, defer_index_remap=defer)
    assert metrics.fragments_removed == 6
    ds, expected = lance_module.dataset(ours), lance_module.dataset(twin)
    assert ds.count_rows() == 540
    _answers_agree(ds)
    assert _coverage(ds) == _coverage(expected)
    queries = np.random.default_rng(1).random((8, DIM), dtype=np.float32)
    assert _recall(ds, queries) >= _recall(expected, queries) - 0.05
    ours_indices = {i.name: i for i in lance_ops.dataset(ours).manifest.indices}
    twin_indices = {i.name: i for i in lance_ops.dataset(twin).manifest.indices}
    # as pylance: the same indices keep their uuid (files untouched) or get a new one
    before = {i.name: i.uuid for i in lance_ops.dataset(str(built(stable))).manifest.indices}
    for name, index in twin_indices.items():
        if name in before:
            assert (ours_indices[name].uuid == before[name]) == (index.uuid == before[name]), name
    if defer:
        ours_fri, twin_fri = _frag_reuse(ours), _frag_reuse(twin)
        assert [v.dataset_version for v in ours_fri.versions] == [
            v.dataset_version for v in twin_fri.versions
        ]
        for mine, theirs in zip(ours_fri.versions[0].groups, twin_fri.versions[0].groups, strict=True):
            assert np.array_equal(mine.changed_row_addrs, theirs.changed_row_addrs)
            assert (mine.old_fragments, mine.new_fragments) == (theirs.old_fragments, theirs.new_fragments)
        assert ours_indices[frag_reuse.FRAG_REUSE_INDEX_NAME].files == ()
        assert not (
            Path(ours) / "_indices" / str(uuid.UUID(bytes=ours_indices["__lance_frag_reuse"].uuid))
        ).exists()


def test_fragment_reuse_bytes_as_pylance_writes_them(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    ours = _copy(built(False), tmp_path / "ours")
    twin = _copy(built(False), tmp_path / "twin")
    lance_ops.dataset(ours).optimize.compact_files(target_rows_per_fragment=250, defer_index_remap=True)
    lance_module.dataset(twin).optimize.compact_files(target_rows_per_fragment=250, defer_index_remap=True)
    mine = frag_reuse.find(lance_ops.dataset(ours).manifest)
    theirs = frag_reuse.find(lance_ops.dataset(twin).manifest)
    assert mine is not None and theirs is not None
    assert mine.details == theirs.details
    assert (mine.fragment_bitmap, mine.dataset_version, mine.fields) == (
        theirs.fragment_bitmap,
        theirs.dataset_version,
        theirs.fields,
    )
    pb = table_pb2.FragmentReuseIndexDetails.FromString(mine.details[1])
    assert (
        BitMap64.deserialize(pb.inline.versions[0].groups[0].changed_row_addrs)[0] == 1
    )  # row 0 was deleted


def test_two_deferred_compactions_then_optimize_catches_up(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _copy(built(False), tmp_path / "d")
    ds = lance_ops.dataset(uri)
    ds.optimize.compact_files(target_rows_per_fragment=250, defer_index_remap=True)
    ds.delete("id % 7 = 0")
    ds.optimize.compact_files(target_rows_per_fragment=600, defer_index_remap=True)
    assert len(_frag_reuse(uri).versions) == 2
    _answers_agree(lance_module.dataset(uri))
    report = ds.optimize.optimize_indices()
    assert set(report.remapped) == {"id_idx", "cat_idx", "tags_idx", "vec_idx"}
    assert frag_reuse.find(lance_ops.dataset(uri).manifest) is None  # trimmed away: nothing needs it
    after = lance_module.dataset(uri)
    _answers_agree(after)
    assert all(s["num_unindexed_rows"] == 0 for s in (after.stats.index_stats(n) for n in report.remapped))
    assert ds.optimize.optimize_indices().remapped == ()  # run twice: nothing to do, no commit
    assert lance_ops.dataset(uri).version == ds.version


def test_deferred_with_stable_row_ids_is_refused_as_pylance(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _copy(built(True), tmp_path / "d")
    version = lance_ops.dataset(uri).version
    with pytest.raises(DeferredRemapError) as ours:
        lance_ops.dataset(uri).optimize.compact_files(target_rows_per_fragment=250, defer_index_remap=True)
    with pytest.raises(OSError):
        lance_module.dataset(uri).optimize.compact_files(target_rows_per_fragment=250, defer_index_remap=True)
    assert isinstance(ours.value, OSError)
    assert lance_ops.dataset(uri).version == version


@pytest.mark.parametrize("vector", ["IVF_FLAT", "IVF_SQ", "IVF_HNSW_SQ"])
def test_vector_types_after_compaction(tmp_path, built, lance_module, vector) -> None:  # type: ignore[no-untyped-def]
    ours = _copy(built(False, vector), tmp_path / "ours")
    twin = _copy(built(False, vector), tmp_path / "twin")
    lance_ops.dataset(ours).optimize.compact_files(target_rows_per_fragment=250)
    lance_module.dataset(twin).optimize.compact_files(target_rows_per_fragment=250)
    queries = np.random.default_rng(2).random((8, DIM), dtype=np.float32)
    ds, expected = lance_module.dataset(ours), lance_module.dataset(twin)
    assert _recall(ds, queries) >= _recall(expected, queries) - 0.05
    assert _coverage(ds) == _coverage(expected)
    assert next(d for d in ds.describe_indices() if d.name == "vec_idx").index_type == vector


def test_metadata_api_as_pylance(built, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(built(False))
    ours, theirs = lance_ops.dataset(uri), lance_module.dataset(uri)
    assert ours.list_indices() == theirs.list_indices()
    for mine, pylance_d in zip(ours.describe_indices(), theirs.describe_indices(), strict=True):
        for key in (
            "name",
            "type_url",
            "index_type",
            "num_rows_indexed",
            "fields",
            "field_names",
            "total_size_bytes",
        ):
            assert getattr(mine, key) == getattr(pylance_d, key), key
        assert mine.num_segments == len(pylance_d.segments)
        for a, b in zip(mine.segments, pylance_d.segments, strict=True):
            assert (
                a.uuid,
                a.dataset_version_at_last_update,
                a.index_version,
                a.size_bytes,
                a.created_at,
            ) == (
                b.uuid,
                b.dataset_version_at_last_update,
                b.index_version,
                b.size_bytes,
                b.created_at,
            )
    for name, kind in {**SCALARS, "vec_idx": "IVF_PQ"}.items():
        mine_stats, pylance_stats = ours.stats.index_stats(name), theirs.stats.index_stats(name)
        assert mine_stats["index_type"] == kind
        assert mine_stats == {k: pylance_stats[k] for k in mine_stats}, name


def test_unindexed_rows_after_append(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _copy(built(False), tmp_path / "d")
    lance_ops.write_dataset(_table(ROWS, ROWS + 150), uri, mode="append")
    ours, theirs = (
        lance_ops.dataset(uri).stats.index_stats("id_idx"),
        lance_module.dataset(uri).stats.index_stats("id_idx"),
    )
    assert ours == {k: theirs[k] for k in ours}
    assert ours["num_unindexed_rows"] == 150


def test_drop_index_as_pylance(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    ours = _copy(built(False), tmp_path / "ours")
    twin = _copy(built(False), tmp_path / "twin")
    ds = lance_ops.dataset(ours)
    version = ds.version
    with pytest.raises(IndexNotFoundError) as missing:
        ds.drop_index("nope")
    assert isinstance(missing.value, KeyError) and isinstance(missing.value, RuntimeError)
    assert "Lance index not found: name=nope" in str(missing.value)
    assert lance_ops.dataset(ours).version == version
    ds.drop_index("id_idx")
    lance_module.dataset(twin).drop_index("id_idx")
    mine, theirs = ds.read_transaction(), lance_ops.dataset(twin).read_transaction()
    assert mine.operation == theirs.operation
    assert [i["name"] for i in lance_module.dataset(ours).list_indices()] == [
        "cat_idx",
        "tags_idx",
        "vec_idx",
        "zm",
    ]
    _answers_agree(lance_module.dataset(ours))
    with pytest.raises(IndexNotFoundError, match='Index "id_idx" not found'):  # pylance's words here
        ds.stats.index_stats("id_idx")
    with pytest.raises(KeyError):
        ds.optimize.optimize_indices(index_names=["id_idx"])


@pytest.mark.parametrize(
    ("name", "file", "damage"),
    [
        ("id_idx", "page_data.lance", "missing"),
        ("id_idx", "page_data.lance", "truncated"),
        # remapped after the scalar indices: their new directories are removed again
        ("vec_idx", "auxiliary.idx", "truncated"),
        ("vec_idx", "auxiliary.idx", "garbage"),
    ],
)
def test_damaged_index_file_is_a_typed_error_and_nothing_is_committed(  # type: ignore[no-untyped-def]
    tmp_path, built, lance_module, name, file, damage
) -> None:
    uri = _copy(built(False), tmp_path / "d")
    ds = lance_ops.dataset(uri)
    index = next(i for i in ds.manifest.indices if i.name == name)
    page = Path(uri) / "_indices" / str(uuid.UUID(bytes=index.uuid)) / file
    if damage == "missing":
        page.unlink()
    elif damage == "truncated":
        page.write_bytes(page.read_bytes()[:100])
    else:
        page.write_bytes(page.read_bytes()[:-64] + b"\x07" * 64)
    version = ds.version
    directories = sorted((Path(uri) / "_indices").iterdir())
    with pytest.raises(IndexCorruptError, match=name):
        ds.optimize.compact_files(target_rows_per_fragment=250)
    assert lance_ops.dataset(uri).version == version
    assert sorted((Path(uri) / "_indices").iterdir()) == directories  # nothing half written is left
    assert lance_module.dataset(uri).count_rows() == ROWS - ROWS // 10


def test_other_operations_keep_indices_right(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _copy(built(False), tmp_path / "d")
    ds = lance_ops.dataset(uri)
    before = {i.name: i.fragment_bitmap for i in ds.manifest.indices}
    ds.delete("id < 50")  # bitmaps unchanged, rows filtered at query time
    assert {i.name: i.fragment_bitmap for i in ds.manifest.indices} == before
    _answers_agree(lance_module.dataset(uri))
    indexed_version = ds.version
    ds.drop_columns(["cat"])  # its index goes with it, as pylance
    assert "cat_idx" not in {i["name"] for i in lance_module.dataset(uri).list_indices()}
    lance_ops.write_dataset(_table(0, 10), uri, mode="overwrite")
    assert lance_module.dataset(uri).list_indices() == []
    old = lance_ops.dataset(uri, version=indexed_version)
    old.restore()
    assert {i["name"] for i in lance_module.dataset(uri).list_indices()} == set(before)
    _answers_agree(lance_module.dataset(uri))


def _index_dirs_with_files(uri: str) -> set[str]:
    return {p.parent.name for p in (Path(uri) / "_indices").rglob("*") if p.is_file()}


def test_cleanup_keeps_referenced_index_dirs(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _copy(built(False), tmp_path / "d")
    ds = lance_ops.dataset(uri)
    ds.optimize.compact_files(target_rows_per_fragment=250)
    live = {str(uuid.UUID(bytes=i.uuid)) for i in ds.manifest.indices}
    before = _index_dirs_with_files(uri)
    assert live < before  # the remapped indices' old directories are still there
    plan = ds.cleanup_old_versions(older_than=datetime.timedelta(0), dry_run=True)
    assert _index_dirs_with_files(uri) == before
    assert plan.index_files_removed > 0
    ds.cleanup_old_versions(older_than=datetime.timedelta(0))
    assert _index_dirs_with_files(uri) == live
    _answers_agree(lance_module.dataset(uri))


@pytest.mark.parametrize("merge", [1, 0])
def test_optimize_indices_after_append_as_pylance(tmp_path, built, lance_module, merge) -> None:  # type: ignore[no-untyped-def]
    ours = _copy(built(False), tmp_path / "ours")
    twin = _copy(built(False), tmp_path / "twin")
    for uri in (ours, twin):
        lance_module.write_dataset(
            _table(ROWS, ROWS + 200, seed=5), uri, mode="append", max_rows_per_file=100
        )
    ds = lance_ops.dataset(ours)
    report = ds.optimize.optimize_indices(num_indices_to_merge=merge)
    lance_module.dataset(twin).optimize.optimize_indices(num_indices_to_merge=merge)
    assert set(report.extended) == {"id_idx", "cat_idx", "tags_idx", "vec_idx", "zm"}
    assert report.unindexed_rows_before == dict.fromkeys(report.extended, 200)
    got, expected = lance_module.dataset(ours), lance_module.dataset(twin)
    _answers_agree(got)
    assert _coverage(got) == _coverage(expected)
    for name in report.extended:
        assert got.stats.index_stats(name)["num_unindexed_rows"] == 0
        mine, theirs = got.stats.index_stats(name), expected.stats.index_stats(name)
        assert (mine["num_segments"], mine["num_indexed_rows_per_delta"]) == (
            theirs["num_segments"],
            theirs["num_indexed_rows_per_delta"],
        )
    queries = np.random.default_rng(3).random((8, DIM), dtype=np.float32)
    assert _recall(got, queries) >= _recall(expected, queries) - 0.05
    version = ds.version
    assert ds.optimize.optimize_indices().extended == ()  # run twice: nothing to do, no commit
    assert lance_ops.dataset(ours).version == version


def test_optimize_indices_with_a_corrupt_index_leaves_nothing_behind(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    """The vector index is extended after the scalar ones: its failure removes their new segments
    too, commits nothing, and names it."""
    uri = _copy(built(False), tmp_path / "d")
    lance_module.write_dataset(_table(ROWS, ROWS + 200, seed=5), uri, mode="append", max_rows_per_file=100)
    ds = lance_ops.dataset(uri)
    vec = next(i for i in ds.manifest.indices if i.name == "vec_idx")
    aux = Path(uri) / "_indices" / str(uuid.UUID(bytes=vec.uuid)) / "auxiliary.idx"
    aux.write_bytes(aux.read_bytes()[:-64] + b"\x07" * 64)
    directories = sorted((Path(uri) / "_indices").iterdir())
    with pytest.raises(IndexCorruptError, match="vec_idx"):
        ds.optimize.optimize_indices()
    assert lance_ops.dataset(uri).version == ds.version
    assert sorted((Path(uri) / "_indices").iterdir()) == directories
    assert lance_module.dataset(uri).stats.index_stats("id_idx")["num_unindexed_rows"] == 200


def test_optimize_indices_names_the_index_it_cannot_extend(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _copy(built(False), tmp_path / "d")
    _add_unknown_index(uri)
    lance_ops.write_dataset(_table(ROWS, ROWS + 50), uri, mode="append")
    version = lance_ops.dataset(uri).version
    with pytest.raises(UnsupportedIndexTypeError, match="future_idx") as raised:
        lance_ops.dataset(uri).optimize.optimize_indices()
    assert raised.value.index == "future_idx"
    assert lance_ops.dataset(uri).version == version  # nothing committed
    lance_ops.dataset(uri).optimize.optimize_indices(index_names=["id_idx"])  # the others still work
    assert lance_ops.dataset(uri).stats.index_stats("id_idx")["num_unindexed_rows"] == 0


def _add_unknown_index(uri: str) -> IndexMetadata:
    """A copy of the BTREE under a type URL no library knows, committed as index ``future_idx``."""
    ds = lance_ops.dataset(uri)
    btree = next(i for i in ds.manifest.indices if i.name == "id_idx")
    stranger = replace(
        btree, uuid=uuid.uuid4().bytes, name="future_idx", details=("/lance.table.FutureIndexDetails", b"")
    )
    (Path(uri) / "_indices" / str(uuid.UUID(bytes=stranger.uuid))).mkdir()
    for f in btree.files:
        src = Path(uri) / "_indices" / str(uuid.UUID(bytes=btree.uuid)) / f.path
        shutil.copy(src, Path(uri) / "_indices" / str(uuid.UUID(bytes=stranger.uuid)) / f.path)
    commit(ds.storage, CreateIndex((stranger,), ()), ds.handle.commit_options(None))
    return stranger


def test_unknown_index_type_is_kept_and_deferred(tmp_path, built, lance_module, caplog) -> None:  # type: ignore[no-untyped-def]
    uri = _copy(built(False), tmp_path / "d")
    stranger = _add_unknown_index(uri)
    ds = lance_ops.dataset(uri)
    assert "future_idx" in {d.name for d in ds.describe_indices()}
    with caplog.at_level("INFO", logger="lance_ops.ops.index_remap"):
        ds.optimize.compact_files(target_rows_per_fragment=250)
    kept = next(i for i in ds.manifest.indices if i.name == "future_idx")
    assert kept.uuid == stranger.uuid and kept.fragment_bitmap == stranger.fragment_bitmap
    assert frag_reuse.find(ds.manifest) is not None  # the compaction is recorded for it
    assert "future_idx" in caplog.text
    assert lance_ops.dataset(uri).count_rows() == 540


def test_casting_an_indexed_column_is_refused_as_pylance(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _copy(built(False), tmp_path / "d")
    version = lance_ops.dataset(uri).version
    with pytest.raises(SchemaChangeError, match="id_idx") as ours:
        lance_ops.dataset(uri).alter_columns({"path": "id", "data_type": pa.int32()})
    with pytest.raises(OSError, match="id_idx"):
        lance_module.dataset(uri).alter_columns({"path": "id", "data_type": pa.int32()})
    assert isinstance(ours.value, OSError) and lance_ops.dataset(uri).version == version
    lance_ops.dataset(uri).alter_columns({"path": "id", "name": "key"})  # a rename keeps the index
    assert lance_module.dataset(uri).list_indices()[1]["fields"] == ["key"]
    renamed = lance_module.dataset(uri)
    indexed = renamed.to_table(filter="key > 100 AND key < 130", columns=["key"])
    assert indexed.equals(
        renamed.to_table(filter="key > 100 AND key < 130", columns=["key"], use_scalar_index=False)
    )


def test_cleanup_keeps_the_index_dirs_of_tagged_versions(tmp_path, built, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = _copy(built(False), tmp_path / "d")
    ds = lance_ops.dataset(uri)
    ds.tags.create("before", ds.version)
    tagged = {str(uuid.UUID(bytes=i.uuid)) for i in ds.manifest.indices}
    ds.optimize.compact_files(target_rows_per_fragment=250)
    ds.cleanup_old_versions(older_than=datetime.timedelta(0), error_if_tagged_old_versions=False)
    kept = _index_dirs_with_files(uri)
    assert tagged <= kept and {str(uuid.UUID(bytes=i.uuid)) for i in ds.manifest.indices} <= kept
    _answers_agree(lance_module.dataset(uri, version="before"))
    _answers_agree(lance_module.dataset(uri))
