"""L18: ``jobs.create_index`` — the index built on Spark (local[2]) equals the in-process build file
for file (same data, same parameters and seed), pylance uses it as its own (plan and rows), bad
input fails before anything is committed, and ``python -m jobs.create_index`` runs."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from jobs.create_index import main as create_index_main
from lance_ops.errors import IndexColumnTypeError, IndexExistsError, InvalidArgumentError

pytestmark = [
    pytest.mark.spark,
    pytest.mark.interop,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

N, DIM = 3000, 16


def _dataset(path: Path) -> str:
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(8, DIM))[rng.integers(0, 8, N)] * 3 + rng.normal(size=(N, DIM))).astype(np.float32)
    vec_mask = np.zeros(N, bool)
    vec_mask[[5, 700]] = True
    x[900, 3] = np.nan
    ids = np.arange(N)
    table = pa.table(
        {
            "id": pa.array(np.where(ids % 97 == 0, None, ids // 3), pa.int64()),
            "cat": pa.array([f"c{i % 7}" for i in ids]),
            "tags": pa.array([[f"t{i % 5}", f"t{i % 3}"] if i % 11 else None for i in ids]),
            "score": pa.array(np.where(ids % 50 == 1, np.nan, rng.random(N))),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM, mask=pa.array(vec_mask)),
        }
    )
    lance.write_dataset(table, str(path), max_rows_per_file=700)
    ds = lance.dataset(str(path))
    ds.delete("id % 13 = 4")
    return str(path)


def _twins(tmp_path: Path) -> tuple[str, str]:
    """Two copies of one dataset: one for the in-process build, one for the Spark build."""
    local = _dataset(tmp_path / "local")
    spark_uri = str(tmp_path / "spark")
    shutil.copytree(local, spark_uri)
    return local, spark_uri


def _index_files(uri: str, name: str) -> dict[str, bytes]:
    ds = lance_ops.dataset(uri)
    (index,) = [i for i in ds.manifest.indices if i.name == name]
    root = Path(uri) / "_indices" / str(uuid.UUID(bytes=index.uuid))
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


SCALAR = [
    ("id", "BTREE", {}, ["id = 5", "id > 100 AND id < 180", "id IS NULL", "id IN (1, 2, 900)"]),
    ("cat", "BITMAP", {}, ["cat = 'c3'", "cat IN ('c1', 'c6')"]),
    ("tags", "LABEL_LIST", {}, ["array_has_any(tags, ['t4'])", "array_has_all(tags, ['t1', 't2'])"]),
    ("score", "ZONEMAP", {"rows_per_zone": 256}, ["score > 0.9", "score < 0.01"]),
    ("id", "BLOOMFILTER", {"number_of_items": 300, "probability": 0.01}, ["id = 5", "id IN (1, 2, 900)"]),
]


@pytest.mark.parametrize(("column", "kind", "params", "filters"), SCALAR, ids=[s[1] for s in SCALAR])
def test_scalar_spark_build_equals_in_process_and_pylance_uses_it(
    spark: SparkSession,
    tmp_path: Path,
    column: str,
    kind: str,
    params: dict[str, Any],
    filters: list[str],
) -> None:
    local, spark_uri = _twins(tmp_path)
    lance_ops.dataset(local).create_scalar_index(column, kind, **params)
    result = jobs.create_index(spark, spark_uri, column, kind, **params)
    assert (result.name, result.index_type, result.tasks) == (f"{column}_idx", kind, 5)
    assert _index_files(spark_uri, result.name) == _index_files(local, result.name)
    ds = lance.dataset(spark_uri)
    assert ds.version == result.version
    assert [d.name for d in ds.describe_indices()] == [f"{column}_idx"]
    for predicate in filters:
        plan = ds.scanner(filter=predicate, columns=["id"]).explain_plan()
        assert "ScalarIndexQuery" in plan or "MaterializeIndex" in plan or f"{column}_idx" in plan, plan
        got = ds.to_table(filter=predicate, columns=["id"], with_row_id=True)["_rowid"].to_pylist()
        full = ds.to_table(filter=predicate, columns=["id"], with_row_id=True, use_scalar_index=False)
        assert sorted(got) == sorted(full["_rowid"].to_pylist()), predicate


VECTOR = [
    ("IVF_FLAT", "l2", {}),
    ("IVF_SQ", "cosine", {}),
    ("IVF_PQ", "l2", {"num_sub_vectors": 4}),
    ("IVF_PQ", "dot", {"num_sub_vectors": 8}),
    ("IVF_PQ", "cosine", {"num_sub_vectors": 8, "num_bits": 4}),  # two codes a byte
    ("IVF_HNSW_PQ", "l2", {"num_sub_vectors": 4}),  # seeded graphs: equal files too
]


@pytest.mark.parametrize(("kind", "metric", "params"), VECTOR, ids=[f"{k}-{m}" for k, m, _ in VECTOR])
def test_vector_spark_build_equals_in_process_and_pylance_searches_it(
    spark: SparkSession, tmp_path: Path, kind: str, metric: str, params: dict[str, Any]
) -> None:
    local, spark_uri = _twins(tmp_path)
    build = {"metric": metric, "num_partitions": 6, "seed": 3, "sample_rate": 64, **params}
    lance_ops.dataset(local).create_index("vec", kind, **build)
    result = jobs.create_index(spark, spark_uri, "vec", kind, **build)
    assert _index_files(spark_uri, "vec_idx") == _index_files(local, "vec_idx")
    ds = lance.dataset(spark_uri)
    q = np.asarray(ds.take([10], columns=["vec"])["vec"][0].as_py(), np.float32)
    plan = ds.scanner(nearest={"column": "vec", "q": q, "k": 5}).explain_plan()
    assert "ANNSubIndex" in plan and "vec_idx" in plan
    got = ds.to_table(
        nearest={"column": "vec", "q": q, "k": 5, "nprobes": 6, "refine_factor": 5}, columns=["id"]
    )
    if metric == "dot":  # a row is not its own nearest neighbour by inner product
        assert len(got) == 5
    else:
        assert ds.take([10], columns=["id"])["id"][0].as_py() in got["id"].to_pylist()
    assert result.version == ds.version


def test_multivector_spark_build_equals_in_process(spark: SparkSession, tmp_path: Path) -> None:
    """A multivector column (null and empty lists among its rows): the Spark driver samples rows as
    the in-process build does, executors index each vector with its row's id: equal files."""
    rng = np.random.default_rng(5)
    rows = [rng.normal(size=(i % 4, DIM)).astype(np.float32).tolist() if i % 9 else None for i in range(900)]
    table = pa.table({"id": np.arange(900), "mv": pa.array(rows, pa.list_(pa.list_(pa.float32(), DIM)))})
    local, spark_uri = str(tmp_path / "local"), str(tmp_path / "spark")
    lance.write_dataset(table, local, max_rows_per_file=300)
    lance.dataset(local).delete("id % 10 = 3")
    shutil.copytree(local, spark_uri)
    build = {"metric": "cosine", "num_partitions": 3, "seed": 2, "num_sub_vectors": 4, "sample_rate": 16}
    lance_ops.dataset(local).create_index("mv", "IVF_PQ", **build)
    jobs.create_index(spark, spark_uri, "mv", "IVF_PQ", **build)
    assert _index_files(spark_uri, "mv_idx") == _index_files(local, "mv_idx")
    ds = lance.dataset(spark_uri)
    q = np.asarray(rows[10], np.float32)
    got = ds.to_table(
        nearest={"column": "mv", "q": q, "k": 3, "nprobes": 3, "refine_factor": 5}, columns=["id"]
    )
    assert got["id"][0].as_py() == 10 and abs(got["_distance"][0].as_py()) < 1e-5


def test_bad_input_commits_nothing(spark: SparkSession, tmp_path: Path) -> None:
    uri = _dataset(tmp_path / "d")
    version = lance.dataset(uri).version
    with pytest.raises(InvalidArgumentError, match="vec"):
        jobs.create_index(spark, uri, "vec", "IVF_PQ", num_partitions=2, num_sub_vectors=5)
    with pytest.raises(InvalidArgumentError, match="too few"):
        jobs.create_index(spark, uri, "vec", "IVF_FLAT", num_partitions=5000)
    with pytest.raises(IndexColumnTypeError, match="cat"):
        jobs.create_index(spark, uri, "cat", "IVF_FLAT")
    with pytest.raises(IndexColumnTypeError, match="tags"):
        jobs.create_index(spark, uri, "tags", "BTREE")
    jobs.create_index(spark, uri, "vec", "IVF_FLAT", num_partitions=2)
    with pytest.raises(IndexExistsError):
        jobs.create_index(spark, uri, "vec", "IVF_FLAT", num_partitions=2)
    assert lance.dataset(uri).version == version + 1
    assert [i["name"] for i in lance.dataset(uri).list_indices()] == ["vec_idx"]


def test_main_builds_twice_and_replaces(
    spark: SparkSession, tmp_path: Path, main_session: None, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = _dataset(tmp_path / "d")
    out = create_index_main(["--uri", uri, "--column", "id", "--index-type", "btree"])
    assert json.loads(capsys.readouterr().out)["name"] == "id_idx"
    again = create_index_main(
        [
            "--uri",
            uri,
            "--column",
            "vec",
            "--index-type",
            "IVF_PQ",
            "--param",
            "num_partitions=2",
            "--param",
            "num_sub_vectors=4",
            "--param",
            "metric=cosine",
        ]
    )
    assert again["version"] == out["version"] + 1
    third = create_index_main(["--uri", uri, "--column", "id", "--index-type", "BTREE"])  # replaces
    ds = lance.dataset(uri)
    assert sorted(d.name for d in ds.describe_indices()) == ["id_idx", "vec_idx"]
    assert third["uuid"] != out["uuid"]
    assert ds.to_table(filter="id = 7", columns=["id"])["id"].to_pylist() == [7, 7, 7]
    assert "cosine" in json.dumps(ds.stats.index_stats("vec_idx"), default=str).lower()
