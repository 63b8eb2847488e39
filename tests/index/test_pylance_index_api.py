"""L18: pylance's vector-index API shapes on lance_ops, each against pylance 14.

``create_index`` with given ``ivf_centroids`` / ``pq_codebook`` (the files keep them, pylance
searches them), ``VectorIndexReader`` partitions equal to pylance's on the same index (ours and
pylance's), ``nearest`` details (``k`` from ``limit``, ``fast_search``, nprobes in the plan, the
errors), ``validate_vector_index`` and ``list_indices()``' fragment ids equal to sets.
"""

from __future__ import annotations

from pathlib import Path

import lance
import lance.util as pl_util
import numpy as np
import pyarrow as pa
import pytest
from lance.dataset import VectorIndexReader as PylanceReader

import lance_ops
from lance_ops.errors import (
    IndexColumnTypeError,
    InvalidArgumentError,
    PartitionOutOfRangeError,
)
from lance_ops.indices import IndexFileVersion, IndicesBuilder, VectorIndexReader
from lance_ops.vector import validate_vector_index

DIM, ROWS, PER_FILE = 16, 2000, 500


def _table(rows: int = ROWS, seed: int = 0, start: int = 0) -> pa.Table:
    x = np.random.default_rng(seed).normal(size=(rows, DIM)).astype(np.float32)
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + rows)),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), DIM),
        }
    )


@pytest.fixture
def path(tmp_path: Path) -> Path:
    lance_ops.write_dataset(_table(), tmp_path / "ds", max_rows_per_file=PER_FILE)
    return tmp_path / "ds"


def test_given_centroids_and_codebook_are_the_index_model(path: Path) -> None:
    rng = np.random.default_rng(1)
    centroids = rng.normal(size=(4, DIM)).astype(np.float32)
    codebook = rng.normal(size=(4, 256, DIM // 4)).astype(np.float32)
    ds = lance_ops.dataset(str(path))
    ds.create_index(
        ["vec"],
        "IVF_PQ",
        num_partitions=4,
        num_sub_vectors=4,
        ivf_centroids=centroids,
        pq_codebook=pa.FixedShapeTensorArray.from_numpy_ndarray(codebook),
        index_file_version=IndexFileVersion.V3,
    )
    theirs = lance.dataset(str(path))
    stats = theirs.stats.index_stats("vec_idx")["indices"][0]
    assert np.allclose(np.asarray(stats["centroids"], np.float32), centroids)
    assert stats["index_file_version"] == "V3" and stats["sub_index"]["num_sub_vectors"] == 4
    # pylance's own check of an index: every vector finds itself with refine
    pl_util.validate_vector_index(theirs, "vec", refine_factor=10, sample_size=100)
    validate_vector_index(lance_ops.dataset(str(path)), "vec", refine_factor=10, sample_size=100)
    # the codes are the given codebook's: pylance's transform with that model agrees
    model = IndicesBuilder(ds, "vec")
    ivf = lance.indices.IvfModel(
        pa.FixedSizeListArray.from_arrays(pa.array(centroids.reshape(-1)), DIM), "l2"
    )
    pq = lance.indices.PqModel(4, pa.FixedSizeListArray.from_arrays(pa.array(codebook.reshape(-1)), DIM))
    lance.indices.IndicesBuilder(theirs, "vec").transform_vectors(ivf, pq, str(path.parent / "t"))
    assert model.dimension == DIM
    expected = lance.file.LanceFileReader(str(path.parent / "t")).read_all().to_table().sort_by("_rowid")
    reader = PylanceReader(theirs, "vec_idx")
    for p in range(4):
        mine = expected.filter(pa.compute.equal(expected.column("__ivf_part_id"), p))
        stored = reader.read_partition(p, with_vector=True)  # rows by row id, codes transposed
        assert stored.column("_rowid").to_pylist() == mine.column("_rowid").to_pylist()
        codes = np.asarray(mine.column("__pq_code").combine_chunks().flatten()).reshape(-1, 4)
        assert np.array_equal(
            np.asarray(stored.column("__pq_code").combine_chunks().flatten()), codes.T.reshape(-1)
        )


def test_pylance_trained_centroids_on_a_pylance_dataset(tmp_path: Path) -> None:
    theirs = lance.write_dataset(_table(), tmp_path / "ds", max_rows_per_file=PER_FILE)
    ivf = lance.indices.IndicesBuilder(theirs, "vec").train_ivf(
        num_partitions=6, sample_rate=16, distance_type="cosine"
    )
    ours = lance_ops.dataset(str(tmp_path / "ds"))
    ours.create_index("vec", "IVF_FLAT", metric="cosine", num_partitions=6, ivf_centroids=ivf.centroids)
    theirs = lance.dataset(str(tmp_path / "ds"))
    stats = theirs.stats.index_stats("vec_idx")["indices"][0]
    assert np.allclose(
        np.asarray(stats["centroids"], np.float32), np.stack(ivf.centroids.to_numpy(zero_copy_only=False))
    )
    q = _table(1, seed=9).column("vec")[0].values.to_numpy()
    nearest = {"column": "vec", "q": q, "k": 10, "nprobes": 6}
    assert theirs.to_table(nearest=nearest).column("id") == ours.to_table(nearest=nearest).column("id")


@pytest.mark.parametrize("builder", ["lance_ops", "pylance"])
def test_vector_index_reader_as_pylance(path: Path, builder: str) -> None:
    if builder == "pylance":
        lance.dataset(str(path)).create_index("vec", "IVF_PQ", num_partitions=5, num_sub_vectors=4)
    else:
        lance_ops.dataset(str(path)).create_index("vec", "IVF_PQ", num_partitions=5, num_sub_vectors=4)
    ours = VectorIndexReader(lance_ops.dataset(str(path)), "vec_idx")
    theirs = PylanceReader(lance.dataset(str(path)), "vec_idx")
    assert ours.num_partitions() == theirs.num_partitions() == 5
    for p in range(5):
        mine, want = ours.read_partition(p, with_vector=True), theirs.read_partition(p, with_vector=True)
        assert mine.column_names == want.column_names == ["_rowid", "__pq_code"]
        assert mine.schema.field("__pq_code").type == want.schema.field("__pq_code").type
        assert mine.sort_by("_rowid").to_pylist() == want.sort_by("_rowid").to_pylist()
        assert ours.read_partition(p).column_names == ["_rowid"]
    with pytest.raises(PartitionOutOfRangeError, match="out of range"):
        ours.read_partition(6)
    lance_ops.dataset(str(path)).create_scalar_index("id", "BTREE")
    with pytest.raises(ValueError, match="not vector index"):
        VectorIndexReader(lance_ops.dataset(str(path)), "id_idx")


def test_nearest_shapes_as_pylance(path: Path) -> None:
    ours = lance_ops.dataset(str(path))
    ours.create_index("vec", "IVF_PQ", num_partitions=4, num_sub_vectors=4)
    ours = lance_ops.write_dataset(_table(300, seed=2, start=ROWS), str(path), mode="append")
    theirs = lance.dataset(str(path))
    q = _table(1, seed=5).column("vec")[0].values.to_numpy()
    for nearest, extra in [
        ({"column": "vec", "q": q, "use_index": False}, {"limit": 12}),
        ({"column": "vec", "q": q, "k": 3000, "nprobes": 1}, {"fast_search": True}),
    ]:
        mine = ours.to_table(columns=["id"], nearest=nearest, **extra)
        want = theirs.to_table(columns=["id"], nearest=nearest, **extra)
        assert mine.num_rows == want.num_rows
        if "limit" in extra:
            assert mine.column("id") == want.column("id")
    assert lance_ops.dataset(str(path)).list_indices()[0]["fragment_ids"] == {0, 1, 2, 3}
    plan = ours.scanner(
        nearest={"column": "vec", "q": q, "minimum_nprobes": 3, "maximum_nprobes": 5}
    ).explain_plan()
    assert "minimum_nprobes=3, maximum_nprobes=Some(5)" in plan and "KNNVectorDistance" in plan
    fast = ours.scanner(nearest={"column": "vec", "q": q}, fast_search=True).explain_plan()
    assert "KNNVectorDistance" not in fast
    with pytest.raises(InvalidArgumentError, match="does not match index column size"):
        ours.to_table(nearest={"column": "vec", "q": q[:-1]})
    with pytest.raises(IndexColumnTypeError, match="must be a vector"):
        ours.to_table(nearest={"column": "id", "q": q})
    with pytest.raises(InvalidArgumentError, match="not supported for fragment scan"):
        ours.scanner(nearest={"column": "vec", "q": q}, fragments=[ours.get_fragment(0)])
    with pytest.raises(InvalidArgumentError, match="Cannot include deleted rows"):
        ours.to_table(nearest={"column": "vec", "q": q}, include_deleted_rows=True)


def test_bad_model_input_commits_nothing(path: Path) -> None:
    ds = lance_ops.dataset(str(path))
    with pytest.raises(InvalidArgumentError, match="index_file_version"):
        ds.create_index("vec", "IVF_PQ", num_partitions=4, num_sub_vectors=4, index_file_version="V2")
    with pytest.raises(InvalidArgumentError, match="ivf_centroids of shape"):
        ds.create_index("vec", "IVF_FLAT", num_partitions=4, ivf_centroids=np.zeros((3, DIM)))
    with pytest.raises(InvalidArgumentError, match="pq_codebook of"):
        ds.create_index(
            "vec", "IVF_PQ", num_partitions=2, num_sub_vectors=4, pq_codebook=np.zeros((4, 16, 4))
        )
    with pytest.raises(InvalidArgumentError, match="one column"):
        ds.create_index(["vec", "id"], "IVF_FLAT")
    assert ds.version == 1 and lance.dataset(str(path)).describe_indices() == []


@pytest.mark.parametrize(
    "flt",
    [
        "i = 5",
        "i > 5",
        "i >= 5 and i <= 9",
        "i between 3 and 8",
        "s = 'v1'",
        "i is null",
        "f < 2.5",
        "b = true",
        "c = 'v2'",
        "z > 7",
        "i = 5 and s = 'v1'",
        "array_has_any(l, ['t1'])",
    ],
)
def test_scalar_index_query_in_the_plan_as_pylance(tmp_path: Path, flt: str) -> None:
    n = 300
    table = pa.table(
        {
            "i": pa.array(np.arange(n)),
            "s": pa.array([f"v{i % 5}" for i in range(n)]),
            "f": pa.array(np.arange(n) / 3.0),
            "b": pa.array([i % 2 == 0 for i in range(n)]),
            "c": pa.array([f"v{i % 3}" for i in range(n)]),
            "z": pa.array(np.arange(n)),
            "l": pa.array([[f"t{i % 3}"] for i in range(n)]),
        }
    )
    ours = lance_ops.write_dataset(table, tmp_path / "ds")
    for column in "isfb":
        ours.create_scalar_index(column, "BTREE")
    ours.create_scalar_index("c", "BITMAP")
    ours.create_scalar_index("z", "ZONEMAP")
    ours.create_scalar_index("l", "LABEL_LIST")

    def query(plan: str) -> str:
        line = next(x for x in plan.splitlines() if "ScalarIndexQuery" in x)
        return line.split("query=", 1)[1].split(", fragments=")[0].strip()

    theirs = lance.dataset(str(tmp_path / "ds"))
    assert query(ours.scanner(filter=flt).explain_plan()) == query(theirs.scanner(filter=flt).explain_plan())
    assert ours.to_table(filter=flt) == theirs.to_table(filter=flt)


def test_struct_field_indices_as_pylance(tmp_path: Path) -> None:
    """Indices on struct fields: named as pylance names them, and pylance answers from them."""
    n = 600
    x = np.random.default_rng(3).normal(size=(n, 8)).astype(np.float32)
    meta = pa.StructArray.from_arrays(
        [
            pa.array([["en", "fr", "es"][i % 3] for i in range(n)]),
            pa.array(np.arange(n) % 10),
            pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), 8),
        ],
        ["lang", "v", "emb"],
        mask=pa.array(np.arange(n) % 7 == 0),
    )
    ours = lance_ops.write_dataset(pa.table({"id": np.arange(n), "meta": meta}), tmp_path / "ds")
    ours.create_scalar_index("meta.lang", "BTREE")
    ours.create_scalar_index("meta.v", "BITMAP")
    ours.create_index("meta.emb", "IVF_PQ", num_partitions=2, num_sub_vectors=2)
    theirs = lance.dataset(str(tmp_path / "ds"))
    assert sorted(i.name for i in theirs.describe_indices()) == [
        "meta.emb_idx",
        "meta.lang_idx",
        "meta.v_idx",
    ]
    for flt in ["meta.lang = 'en'", "meta.v = 5", "meta.lang is null"]:
        assert "ScalarIndexQuery" in theirs.scanner(filter=flt).explain_plan()
        want = theirs.to_table(columns=["id"], filter=flt, use_scalar_index=False)
        assert (
            theirs.to_table(columns=["id"], filter=flt) == want == ours.to_table(columns=["id"], filter=flt)
        )
    nearest = {"column": "meta.emb", "q": x[1], "k": 5, "nprobes": 2, "refine_factor": 10}
    assert theirs.to_table(columns=["id"], nearest=nearest).column("id").to_pylist()[0] == 1
    assert ours.to_table(columns=["id"], nearest=nearest).column("id").to_pylist()[0] == 1


def test_index_config_as_the_index_type(path: Path) -> None:
    from lance_ops.indices import IndexConfig

    ds = lance_ops.dataset(str(path))
    ds.create_scalar_index("id", IndexConfig(index_type="zonemap", parameters={"rows_per_zone": 64}))
    stats = lance.dataset(str(path)).stats.index_stats("id_idx")
    assert stats["index_type"] == "ZoneMap" and stats["indices"][0]["rows_per_zone"] == 64


def test_index_statistics_is_deprecated_as_in_pylance(path: Path) -> None:
    ds = lance_ops.dataset(str(path))
    ds.create_scalar_index("id", "BTREE")
    with pytest.warns(DeprecationWarning, match="index_stats"):
        ours = ds.index_statistics("id_idx")
    with pytest.warns(DeprecationWarning, match="index_stats"):
        theirs = lance.dataset(str(path)).index_statistics("id_idx")
    assert ours["index_type"] == theirs["index_type"] == "BTree"
    assert ours["num_indexed_rows"] == theirs["num_indexed_rows"] == ROWS


def test_prefiltered_nearest_plan_names_the_scalar_index(path: Path) -> None:
    ours = lance_ops.dataset(str(path))
    ours.create_scalar_index("id", "BTREE")
    theirs = lance.dataset(str(path))
    q = _table(1, seed=5).column("vec")[0].values.to_numpy()
    args = {"nearest": {"column": "vec", "q": q, "k": 5}, "filter": "id < 100", "prefilter": True}
    for ds in (ours, theirs):
        assert "ScalarIndexQuery: query=[id < 100]@id_idx(BTree)" in ds.scanner(**args).explain_plan()
    assert ours.to_table(columns=["id"], **args).column("id") == theirs.to_table(
        columns=["id"], **args
    ).column("id")
    assert (
        "ScalarIndexQuery" not in ours.scanner(nearest=args["nearest"], filter="vec is null").explain_plan()
    )
