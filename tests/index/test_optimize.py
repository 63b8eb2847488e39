"""update_index extends pylance-built indices over appended fragments: a delta segment
(``num_indices_to_merge=0``) or one merged segment (default 1), as pylance's optimize_indices;
pylance then answers from the index, with no unindexed rows, as on a twin it optimized itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap

import lance_ops
from lance_ops.errors import InvalidArgumentError
from lance_ops.index.optimize import update_index
from tests.index.conftest import DIM, build_scalar, build_vector, make_table
from tests.index.helpers import commit_indices, scalar_answers
from tests.index.test_remap_scalar import PREDICATES
from tests.index.test_remap_vector import check_search

APPENDED = 500
EXTENDED = ("id_idx", "cat_idx", "tags_idx")
# one more predicate per index that appended rows answer
APPENDED_PREDICATES = {
    "id_idx": "id >= 3490",
    "cat_idx": "cat = 'c5'",
    "tags_idx": "array_has_all(tags, ['t1', 'u4'])",
}


def append(path: Path, **write: object) -> None:
    lance.write_dataset(make_table(APPENDED, start=3000, seed=7), path, mode="append", **write)


def optimize(path: Path, names: set[str], merge: int) -> lance.LanceDataset:
    """lance_ops' update_index on every index named, committed in one CreateIndex."""
    ours = lance_ops.dataset(str(path))
    manifest = ours.manifest
    new, removed = [], []
    for name in sorted(names):
        segments = [ix for ix in manifest.indices if ix.name == name]
        covered = set().union(*(BitMap.deserialize(s.fragment_bitmap) for s in segments))
        fragments = [f for f in manifest.fragments if f.id not in covered]
        result = update_index(ours.storage, manifest, segments, fragments, merge)
        assert result is not None
        new.extend(result)
        removed.extend(s for s in segments if s not in result)
    return commit_indices(path, new, removed)


@pytest.fixture(scope="module")
def scalar_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("opt_scalar") / "ds"
    ds = build_scalar(path)
    ds.delete("id % 10 = 3")
    ds.drop_index("id_zm")  # else pylance may answer id filters from the zone map
    append(path)
    return path


@pytest.mark.parametrize("merge", [0, 1])
def test_scalar_indices_cover_appended_rows(scalar_base: Path, tmp_path: Path, merge: int) -> None:
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(scalar_base, ours_path)
    shutil.copytree(scalar_base, twin_path)
    ours = optimize(ours_path, set(EXTENDED), merge)
    twin = lance.dataset(str(twin_path))
    twin.optimize.optimize_indices(index_names=list(EXTENDED), num_indices_to_merge=merge)
    twin = lance.dataset(str(twin_path))
    for name in EXTENDED:
        mine, theirs = ours.stats.index_stats(name), twin.stats.index_stats(name)
        assert mine["num_unindexed_rows"] == theirs["num_unindexed_rows"] == 0, name
        assert mine["num_indexed_rows"] == theirs["num_indexed_rows"], name
        assert mine["num_indices"] == theirs["num_indices"] == (2 if merge == 0 else 1), name
        for predicate in [*PREDICATES[name], APPENDED_PREDICATES[name]]:
            indexed, scanned, plan = scalar_answers(ours, predicate)
            assert f"@{name}" in plan, plan
            assert indexed.equals(scanned), predicate
            assert indexed.num_rows == scalar_answers(twin, predicate)[0].num_rows


@pytest.mark.parametrize(
    "kind", ["IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ"]
)
@pytest.mark.parametrize("merge", [0, 1])
def test_vector_index_covers_appended_rows(tmp_path: Path, kind: str, merge: int) -> None:
    base = tmp_path / "base"
    build_vector(base, kind)
    append(base)
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(base, ours_path)
    shutil.copytree(base, twin_path)
    ours = optimize(ours_path, {"vec_idx"}, merge)
    twin = lance.dataset(str(twin_path))
    twin.optimize.optimize_indices(num_indices_to_merge=merge)
    twin = lance.dataset(str(twin_path))
    stats = ours.stats.index_stats("vec_idx")
    assert stats["num_unindexed_rows"] == 0 and stats["num_indexed_rows"] == 3000 + APPENDED
    assert stats["num_indices"] == (2 if merge == 0 else 1)
    check_search(ours, twin, exact=kind == "IVF_FLAT")
    # appended rows are found through the index
    q = np.asarray(lance.dataset(str(ours_path)).to_table(filter="id = 3333")["vec"][0].as_py(), np.float32)
    found = ours.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 3, "nprobes": 4})
    assert 3333 in found["id"].to_pylist()


def test_update_index_edge_cases(scalar_base: Path) -> None:
    ours = lance_ops.dataset(str(scalar_base))
    manifest = ours.manifest
    appended = [f for f in manifest.fragments if f.id == 3]
    segments = [ix for ix in manifest.indices if ix.name == "txt_idx"]
    # INVERTED is extended (tests/index/test_fts_build.py checks it against pylance)
    extended = update_index(ours.storage, manifest, segments, appended, 1)
    assert extended is not None and len(extended) == 1
    assert 3 in BitMap.deserialize(extended[0].fragment_bitmap)
    btree = [ix for ix in manifest.indices if ix.name == "id_idx"]
    assert update_index(ours.storage, manifest, btree, [], 1) is None
    with pytest.raises(InvalidArgumentError):
        update_index(ours.storage, manifest, btree, appended, -1)


@pytest.mark.parametrize("merge", [0, 1])
def test_zonemap_zones_equal_pylance(tmp_path: Path, merge: int) -> None:
    """Zones of appended rows (nulls, NaNs, rows deleted before the append) equal pylance's."""
    values = [None if i % 1000 == 0 else float("nan") if i % 777 == 0 else float(i) for i in range(25_000)]
    table = pa.table({"id": pa.array(np.arange(25_000)), "f": pa.array(values)})
    base = tmp_path / "base"
    lance.write_dataset(table, base, max_rows_per_file=10_000).create_scalar_index("f", "ZONEMAP", name="zm")
    more = pa.table({"id": pa.array(np.arange(25_000, 45_000)), "f": pa.array(values[:20_000])})
    ds = lance.write_dataset(more, base, mode="append", max_rows_per_file=20_000)
    ds.delete("id >= 25100 and id < 26100")
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(base, ours_path)
    shutil.copytree(base, twin_path)
    ours = optimize(ours_path, {"zm"}, merge)
    lance.dataset(str(twin_path)).optimize.optimize_indices(num_indices_to_merge=merge)
    twin = lance.dataset(str(twin_path))
    mine, theirs = (
        {
            str(sorted(BitMap.deserialize(ix.fragment_bitmap))): _zonemap(ds.uri, ix)
            for ix in lance_ops.dataset(ds.uri).manifest.indices
        }
        for ds in (ours, twin)
    )
    assert mine.keys() == theirs.keys()
    for key, (table, nulls) in mine.items():
        assert _same(table, theirs[key][0]), key
        assert nulls == theirs[key][1]
    for predicate in ["f > 44000", "f IS NULL", "f < 3", "id = 30000"]:
        indexed, scanned, plan = scalar_answers(ours, predicate)
        assert indexed["id"].equals(scanned["id"]), predicate  # NaN rows included: compare ids
        assert "@zm" in plan or predicate.startswith("id")
    assert ours.stats.index_stats("zm")["num_unindexed_rows"] == 0


def _zonemap(uri: str, index: object) -> tuple[pa.Table, bytes]:
    from lance_ops.file import LanceFileReader
    from lance_ops.index.types import uuid_text

    reader = LanceFileReader(str(Path(uri) / "_indices" / uuid_text(index) / "zonemap.lance"))
    return reader.read_all().to_table(), reader.read_global_buffer(1)


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables, a NaN equal to a NaN (pyarrow's equals says NaN != NaN)."""

    def plain(t: pa.Table) -> list:
        return [[("nan" if isinstance(v, float) and v != v else v) for v in c.to_pylist()] for c in t.columns]

    return a.schema.equals(b.schema, check_metadata=True) and plain(a) == plain(b)


@pytest.mark.parametrize("merge", [0, 1])
def test_segment_metadata_as_pylance(scalar_base: Path, tmp_path: Path, merge: int) -> None:
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(scalar_base, ours_path)
    shutil.copytree(scalar_base, twin_path)
    optimize(ours_path, {"id_idx"}, merge)
    lance.dataset(str(twin_path)).optimize.optimize_indices(
        index_names=["id_idx"], num_indices_to_merge=merge
    )
    mine, theirs = (
        [
            (ix.dataset_version, sorted(BitMap.deserialize(ix.fragment_bitmap)), ix.details, ix.index_version)
            for ix in lance_ops.dataset(str(path)).manifest.indices
            if ix.name == "id_idx"
        ]
        for path in (ours_path, twin_path)
    )
    assert mine == theirs


def test_stable_row_ids(tmp_path: Path) -> None:
    """With stable row ids (and ids that differ from addresses after a compaction), the extended
    BTREE holds row addresses and BITMAP / LABEL_LIST / IVF hold row ids, as pylance's own."""
    base = tmp_path / "base"
    ds = lance.write_dataset(make_table(), base, max_rows_per_file=1000, enable_stable_row_ids=True)
    ds.delete("id < 500")
    ds.optimize.compact_files(target_rows_per_fragment=1 << 20)
    ds = lance.dataset(str(base))
    for name in EXTENDED:
        column = {"id_idx": "id", "cat_idx": "cat", "tags_idx": "tags"}[name]
        ds.create_scalar_index(
            column, {"id_idx": "BTREE", "cat_idx": "BITMAP", "tags_idx": "LABEL_LIST"}[name], name=name
        )
    ds.create_index("vec", "IVF_FLAT", name="vec_idx", num_partitions=4)
    append(base)
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(base, ours_path)
    shutil.copytree(base, twin_path)
    ours = optimize(ours_path, {*EXTENDED, "vec_idx"}, 1)
    lance.dataset(str(twin_path)).optimize.optimize_indices(num_indices_to_merge=1)
    twin = lance.dataset(str(twin_path))
    for name in EXTENDED:
        assert ours.stats.index_stats(name)["num_unindexed_rows"] == 0
        for predicate in [*PREDICATES[name], APPENDED_PREDICATES[name]]:
            indexed, scanned, plan = scalar_answers(ours, predicate)
            assert f"@{name}" in plan
            assert indexed.equals(scanned), predicate
            assert indexed.equals(scalar_answers(twin, predicate)[0]), predicate
    check_search(ours, twin, exact=True)


@pytest.mark.parametrize("kind", ["IVF_FLAT", "IVF_PQ", "IVF_SQ"])
@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_delta_storage_equals_pylance(tmp_path: Path, kind: str, metric: str) -> None:
    """The delta segment's storage (partition of every appended vector, its stored vector or codes)
    equals the one pylance's optimize_indices(num_indices_to_merge=0) writes with the same model.
    The model is given (seeded), not trained by pylance: with some of pylance's unseeded models an
    appended vector lies within float rounding of two centroids, and the libraries round apart."""
    from lance_ops.file import LanceFileReader
    from lance_ops.index.types import uuid_text

    base = tmp_path / "base"
    rng = np.random.default_rng(23)
    model: dict = {"ivf_centroids": rng.standard_normal((4, DIM)).astype(np.float32)}
    if kind == "IVF_PQ":
        model["pq_codebook"] = rng.standard_normal((2, 256, DIM // 2)).astype(np.float32)
    build_vector(base, kind, metric, model=model)
    append(base)
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(base, ours_path)
    shutil.copytree(base, twin_path)
    optimize(ours_path, {"vec_idx"}, 0)
    lance.dataset(str(twin_path)).optimize.optimize_indices(num_indices_to_merge=0)
    storages = []
    for path in (ours_path, twin_path):
        delta = next(
            ix
            for ix in lance_ops.dataset(str(path)).manifest.indices
            if 3 in BitMap.deserialize(ix.fragment_bitmap)
        )
        reader = LanceFileReader(str(path / "_indices" / uuid_text(delta) / "auxiliary.idx"))
        storages.append((reader.read_all().to_table(), reader.read_global_buffer(1)))
    (mine, my_ivf), (theirs, their_ivf) = storages
    assert my_ivf == their_ivf  # same partition sizes
    assert mine.column("_rowid").equals(theirs.column("_rowid"))
    code = mine.column_names[1]
    if kind == "IVF_FLAT":
        a = np.asarray(mine.column(code).combine_chunks().flatten())
        b = np.asarray(theirs.column(code).combine_chunks().flatten())
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    else:
        assert mine.column(code).equals(theirs.column(code))
    ours = lance.dataset(str(ours_path))
    q = np.asarray(ours.to_table(filter="id = 3333")["vec"][0].as_py(), np.float32)
    nearest = {"column": "vec", "q": q, "k": 5, "nprobes": 4}
    found = ours.to_table(columns=["id"], nearest=nearest)["id"].to_pylist()
    assert found == lance.dataset(str(twin_path)).to_table(columns=["id"], nearest=nearest)["id"].to_pylist()
    if metric != "dot":  # a vector is its own nearest neighbour (not so in inner product)
        assert 3333 in found


@pytest.mark.parametrize("merge", [0, 1])
def test_string_and_float_btrees(tmp_path: Path, merge: int) -> None:
    """BTREEs over strings (nulls) and floats (nulls, NaN) extended: pages equal pylance's own."""

    def rows(start: int, n: int) -> pa.Table:
        i = np.arange(start, start + n)
        return pa.table(
            {
                "id": pa.array(i),
                "s": pa.array([None if k % 11 == 0 else f"k{k % 97:03d}" for k in i]),
                "f": pa.array([None if k % 13 == 0 else float("nan") if k % 17 == 0 else k * 0.5 for k in i]),
            }
        )

    base = tmp_path / "base"
    ds = lance.write_dataset(rows(0, 5000), base, max_rows_per_file=2000)
    ds.create_scalar_index("s", "BTREE", name="s_idx")
    ds.create_scalar_index("f", "BTREE", name="f_idx")
    lance.write_dataset(rows(5000, 3000), base, mode="append")
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(base, ours_path)
    shutil.copytree(base, twin_path)
    ours = optimize(ours_path, {"s_idx", "f_idx"}, merge)
    lance.dataset(str(twin_path)).optimize.optimize_indices(num_indices_to_merge=merge)
    from lance_ops.file import LanceFileReader
    from lance_ops.index.types import uuid_text

    for name in ("s_idx", "f_idx"):
        pages = []
        for path in (ours_path, twin_path):
            newest = max(
                (ix for ix in lance_ops.dataset(str(path)).manifest.indices if ix.name == name),
                key=lambda ix: (ix.dataset_version, 3 in BitMap.deserialize(ix.fragment_bitmap)),
            )
            root = path / "_indices" / uuid_text(newest)
            pages.append(
                [
                    LanceFileReader(str(root / f)).read_all().to_table()
                    for f in ("page_data.lance", "page_lookup.lance")
                ]
            )
        assert _same(pages[0][1], pages[1][1]), name
        assert _same(pages[0][0].select(["values"]), pages[1][0].select(["values"])), name
    for predicate in [
        "s = 'k042'",
        "s IS NULL",
        "s > 'k090'",
        "f < 10",
        "f IS NULL",
        "f = 3000.5",
        "f > 3900",
    ]:
        indexed, scanned, plan = scalar_answers(ours, predicate)
        assert "ScalarIndexQuery" in plan, predicate
        assert indexed["id"].equals(scanned["id"]), predicate


def _metric_recall(ds: lance.LanceDataset, metric: str, queries: np.ndarray, k: int = 10) -> float:
    hits = 0
    for q in queries:
        nearest = {"column": "vec", "q": q, "k": k, "nprobes": 4, "metric": metric}
        found = ds.to_table(columns=["id"], nearest=nearest)["id"].to_pylist()
        exact = ds.to_table(columns=["id"], nearest={**nearest, "use_index": False})["id"].to_pylist()
        hits += len(set(found) & set(exact))
    return hits / (k * len(queries))


@pytest.mark.parametrize("kind", ["IVF_HNSW_SQ", "IVF_HNSW_PQ"])
@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_hnsw_cosine_and_dot_cover_appended_rows(tmp_path: Path, kind: str, metric: str) -> None:
    """The delta segment's graphs are built in the index's metric (distances stored as pylance
    stores them: ``1 - cos``, ``1 - x.y``): recall within 0.05 of pylance's own optimize of a twin,
    searched over appended rows too (queries near them)."""
    base = tmp_path / "base"
    build_vector(base, kind, metric)
    append(base)
    ours_path, twin_path = tmp_path / "ours", tmp_path / "twin"
    shutil.copytree(base, ours_path)
    shutil.copytree(base, twin_path)
    ours = optimize(ours_path, {"vec_idx"}, 0)
    lance.dataset(str(twin_path)).optimize.optimize_indices(num_indices_to_merge=0)
    twin = lance.dataset(str(twin_path))
    stats = ours.stats.index_stats("vec_idx")
    assert stats["num_unindexed_rows"] == 0 and stats["num_indices"] == 2
    appended = ours.to_table(filter="id >= 3000", columns=["vec"])["vec"].combine_chunks()
    queries = np.asarray(appended.flatten(), np.float32).reshape(-1, DIM)[:30] + 0.01
    mine, theirs = _metric_recall(ours, metric, queries), _metric_recall(twin, metric, queries)
    # PQ in dot recalls little (pylance's own twin around 0.1): the floor only checks that the
    # comparison means something
    assert mine >= theirs - 0.05 and theirs > 0.05, (mine, theirs)
