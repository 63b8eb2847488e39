"""L18: ``lance_ops.indices`` (pylance's ``lance.indices``): IvfModel / PqModel files and the
IndicesBuilder steps, each checked against pylance 14 both ways.

The model files are read by the other library's ``load``; the transformed / shuffled files pass
between the two libraries' steps; the index ``load_shuffled_vectors`` commits is searched by
pylance (recall against brute force) and the dataset's history continues in pylance.
"""

from __future__ import annotations

from pathlib import Path

import lance
import lance.indices as pl_indices
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import IndexColumnTypeError, InvalidArgumentError, UnsupportedFeatureError
from lance_ops.indices import IndicesBuilder, IvfModel, PqModel

DIM, ROWS, PER_FILE, CLUSTERS = 16, 3000, 1000, 12


def _table(rows: int = ROWS, seed: int = 0, dtype: type = np.float32, null_every: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CLUSTERS, DIM)) * 3
    x = (centres[rng.integers(0, CLUSTERS, rows)] + rng.normal(size=(rows, DIM))).astype(dtype)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), DIM)
    if null_every:
        mask = pa.array(np.arange(rows) % null_every != 0)
        vec = pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), DIM, mask=pa.compute.invert(mask))
    return pa.table({"id": pa.array(np.arange(rows)), "vec": vec})


def _matrix(values: pa.Array) -> np.ndarray:
    return np.asarray(values.flatten().cast(pa.float32())).reshape(len(values), -1)


@pytest.fixture
def ours(tmp_path: Path) -> lance_ops.LanceDataset:
    return lance_ops.write_dataset(_table(), tmp_path / "ds", max_rows_per_file=PER_FILE)


def _recall(ds: lance.LanceDataset, x: np.ndarray, queries: np.ndarray, **nearest: object) -> float:
    hits = 0
    for q in queries:
        got = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, **nearest})
        truth = np.argsort(((x - q) ** 2).sum(1))[:10]
        hits += len(set(got.column("id").to_pylist()) & set(truth.tolist()))
    return hits / (10 * len(queries))


def _steps(ds: lance_ops.LanceDataset, tmp_path: Path) -> tuple[IvfModel, PqModel, list[str]]:
    builder = IndicesBuilder(ds, "vec")
    ivf = builder.train_ivf(num_partitions=8, sample_rate=16)
    pq = builder.train_pq(ivf, 4, sample_rate=4)
    names = []
    for frag in ds.get_fragments():
        name = f"t{frag.fragment_id}"
        builder.transform_vectors(ivf, pq, str(tmp_path / name), fragments=[frag])
        names += builder.shuffle_transformed_vectors([name], str(tmp_path), ivf, f"s{frag.fragment_id}")
    return ivf, pq, names


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_models_round_trip_with_pylance(tmp_path: Path, dtype: type) -> None:
    ds = lance_ops.write_dataset(_table(dtype=dtype), tmp_path / "ds", max_rows_per_file=PER_FILE)
    builder = IndicesBuilder(ds, "vec")
    ivf = builder.train_ivf(num_partitions=6, sample_rate=16, distance_type="cosine")
    pq = builder.train_pq(ivf, 4, sample_rate=2)
    value_type = ds.schema.field("vec").type.value_type
    assert ivf.centroids.type == pa.list_(value_type, DIM) and ivf.num_partitions == 6
    assert pq.codebook.type == pa.list_(value_type, DIM) and len(pq.codebook) == 256
    ivf.save(str(tmp_path / "ivf"))
    pq.save(str(tmp_path / "pq"))
    theirs_ivf = pl_indices.IvfModel.load(str(tmp_path / "ivf"))
    theirs_pq = pl_indices.PqModel.load(str(tmp_path / "pq"))
    assert theirs_ivf.distance_type == "cosine" and theirs_ivf.centroids == ivf.centroids
    assert (theirs_pq.num_subvectors, theirs_pq.num_bits) == (4, 8) and theirs_pq.codebook == pq.codebook
    # and the other way round
    pl_ds = lance.dataset(ds.uri)
    their = pl_indices.IndicesBuilder(pl_ds, "vec").train_ivf(
        num_partitions=5, sample_rate=16, distance_type="dot"
    )
    their.save(str(tmp_path / "ivf2"))
    loaded = IvfModel.load(str(tmp_path / "ivf2"))
    assert (
        loaded.distance_type == "dot" and loaded.centroids == their.centroids and loaded.num_partitions == 5
    )


def test_pq_codes_equal_pylance_transform(ours: lance_ops.LanceDataset, tmp_path: Path) -> None:
    """The same models give the same partitions and PQ codes as pylance's transform_vectors
    (ties aside), so the codebook's row layout is pylance's."""
    builder = IndicesBuilder(ours, "vec")
    ivf = builder.train_ivf(num_partitions=8, sample_rate=16)
    pq = builder.train_pq(ivf, 4, sample_rate=4)
    builder.transform_vectors(ivf, pq, str(tmp_path / "ours"))
    pl_builder = pl_indices.IndicesBuilder(lance.dataset(ours.uri), "vec")
    pl_builder.transform_vectors(ivf, pq, str(tmp_path / "theirs"))
    a = lance.file.LanceFileReader(str(tmp_path / "ours")).read_all().to_table().sort_by("_rowid")
    b = lance.file.LanceFileReader(str(tmp_path / "theirs")).read_all().to_table().sort_by("_rowid")
    assert a.schema.remove_metadata() == b.schema.remove_metadata()
    assert a.column("_rowid") == b.column("_rowid")
    assert np.mean(np.asarray(a.column("__ivf_part_id")) == np.asarray(b.column("__ivf_part_id"))) > 0.99
    codes_a, codes_b = (
        _matrix(a.column("__pq_code").combine_chunks()),
        _matrix(b.column("__pq_code").combine_chunks()),
    )
    assert np.mean(codes_a == codes_b) > 0.97


def test_steps_build_an_index_pylance_searches(ours: lance_ops.LanceDataset, tmp_path: Path) -> None:
    ivf, pq, names = _steps(ours, tmp_path)
    assert names == ["s0_0.lance", "s1_0.lance", "s2_0.lance"]
    shuffled = lance.file.LanceFileReader(str(tmp_path / names[0]))
    assert shuffled.metadata().num_rows == 8  # one row per partition
    IndicesBuilder(ours, "vec").load_shuffled_vectors(names, str(tmp_path), ivf, pq, index_name="v")
    assert ours.has_index and ours.version == 2
    theirs = lance.dataset(ours.uri)
    [index] = theirs.describe_indices()
    assert (index.name, index.field_names, index.num_rows_indexed) == ("v", ["vec"], ROWS)
    stats = theirs.stats.index_stats("v")
    assert (stats["index_type"], stats["num_indexed_fragments"], stats["num_unindexed_rows"]) == (
        "IVF_PQ",
        3,
        0,
    )
    assert stats["indices"][0]["num_partitions"] == 8
    x = _matrix(theirs.to_table().column("vec").combine_chunks())
    queries = x[:20] + 0.01
    assert "ANNSubIndex" in theirs.scanner(nearest={"column": "vec", "q": queries[0], "k": 10}).explain_plan()
    assert _recall(theirs, x, queries, nprobes=8, refine_factor=10) >= 0.95
    assert _recall(lance_ops.dataset(ours.uri), x, queries, nprobes=8, refine_factor=10) >= 0.95
    # pylance continues the history: an append, then its optimize_indices over our index
    theirs = lance.write_dataset(_table(300, seed=1), ours.uri, mode="append")
    theirs.optimize.optimize_indices()
    assert lance.dataset(ours.uri).stats.index_stats("v")["num_unindexed_rows"] == 0


def test_files_pass_between_the_libraries(tmp_path: Path) -> None:
    """pylance writes the dataset and the transformed file; lance_ops shuffles and loads; pylance
    loads lance_ops' shuffled file into its own index too."""
    theirs = lance.write_dataset(_table(), tmp_path / "ds", max_rows_per_file=PER_FILE)
    pl_builder = pl_indices.IndicesBuilder(theirs, "vec")
    ivf = pl_builder.train_ivf(num_partitions=8, sample_rate=16)
    pq = pl_builder.train_pq(ivf, 4, sample_rate=4)
    pl_builder.transform_vectors(ivf, pq, str(tmp_path / "t"))
    ours = lance_ops.dataset(str(tmp_path / "ds"))
    builder = IndicesBuilder(ours, "vec")
    names = builder.shuffle_transformed_vectors(["t"], str(tmp_path), IvfModel(ivf.centroids, "l2"), "mine")
    pl_builder.load_shuffled_vectors(names, str(tmp_path), ivf, pq, index_name="theirs")
    model_pq = PqModel(pq.num_subvectors, pq.codebook)
    builder = IndicesBuilder(lance_ops.dataset(str(tmp_path / "ds")), "vec")
    builder.load_shuffled_vectors(names, str(tmp_path), IvfModel(ivf.centroids, "l2"), model_pq, "ours")
    ds = lance.dataset(str(tmp_path / "ds"))
    assert sorted(i.name for i in ds.describe_indices()) == ["ours", "theirs"]
    x = _matrix(ds.to_table().column("vec").combine_chunks())
    queries = x[:20] + 0.01
    for name in ("ours", "theirs"):
        assert ds.stats.index_stats(name)["num_indexed_rows"] == ROWS
    assert _recall(ds, x, queries, nprobes=8, refine_factor=10) >= 0.95


def test_nulls_are_left_out_and_precomputed_partitions(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(_table(null_every=10), tmp_path / "ds", max_rows_per_file=PER_FILE)
    builder = IndicesBuilder(ds, "vec")
    ivf = builder.train_ivf(num_partitions=8, sample_rate=16)
    pq = builder.train_pq(ivf, 4, sample_rate=2)
    parts = builder.assign_ivf_partitions(ivf, output_uri=str(tmp_path / "parts"))
    assigned = lance.dataset(parts).to_table()
    assert assigned.num_rows == ROWS - ROWS // 10
    assert assigned.schema == pa.schema([("row_id", pa.uint64()), ("partition", pa.uint32())])
    builder.transform_vectors(ivf, pq, str(tmp_path / "a"), partition_ds_uri=parts)
    builder.transform_vectors(ivf, pq, str(tmp_path / "b"))
    a = lance.file.LanceFileReader(str(tmp_path / "a")).read_all().to_table()
    b = lance.file.LanceFileReader(str(tmp_path / "b")).read_all().to_table()
    assert a.equals(b) and a.num_rows == ROWS - ROWS // 10


def test_bad_input(ours: lance_ops.LanceDataset, tmp_path: Path) -> None:
    with pytest.raises(IndexColumnTypeError, match="id"):
        IndicesBuilder(ours, "id")
    builder = IndicesBuilder(ours, "vec")
    with pytest.raises(InvalidArgumentError, match="not supported"):
        builder.train_ivf(4, distance_type="hamming2", sample_rate=16)
    with pytest.raises(InvalidArgumentError, match="not enough rows"):
        builder.train_ivf(200, sample_rate=16)
    with pytest.raises(UnsupportedFeatureError, match="accelerator"):
        builder.train_ivf(4, sample_rate=16, accelerator="cuda")
    ivf = builder.train_ivf(4, sample_rate=16)
    with pytest.raises(ValueError, match="must be divisible by num_subvectors .* without remainder"):
        builder.train_pq(ivf, 5, sample_rate=2)
    with pytest.raises(InvalidArgumentError, match="not enough rows"):
        builder.train_pq(ivf, 4, sample_rate=16)
    with pytest.raises(InvalidArgumentError, match="Fragment id does not exist"):
        builder.train_ivf(4, sample_rate=16, fragment_ids=[7])
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        builder.transform_vectors(
            ivf, builder.train_pq(ivf, 4, sample_rate=2), str(tmp_path / "t"), fragments=[]
        )
    # too few non-null vectors: the rows are there, the vectors are not
    nulls = lance_ops.write_dataset(_table(null_every=1), tmp_path / "nulls")
    with pytest.raises(InvalidArgumentError, match="too few"):
        IndicesBuilder(nulls, "vec").train_ivf(4, sample_rate=16)
    assert ours.version == 1 and lance.dataset(ours.uri).describe_indices() == []
