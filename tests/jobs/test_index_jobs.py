"""Spark jobs on pylance-indexed datasets (L15): the compaction job remaps the indices in its one
Rewrite commit (or records a deferred remap in the Fragment Reuse Index), and
``jobs.optimize_indices`` catches deferred indices up. Local[2] session, answers checked with pylance."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from jobs.optimize_indices import main as optimize_main
from lance_ops.errors import IndexCorruptError
from lance_ops.table import frag_reuse
from lance_ops.table.transaction import Rewrite

pytestmark = [
    pytest.mark.spark,
    pytest.mark.interop,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

FILTERS = ("id = 333", "id = 330", "id > 100 AND id < 150", "cat = 'c2'")


def _indexed(path: Path) -> str:
    rng = np.random.default_rng(0)
    n = 400
    table = pa.table(
        {
            "id": np.arange(n),
            "cat": pa.array([f"c{i % 4}" for i in range(n)]),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8, dtype=np.float32)), 8),
        }
    )
    ds = lance.write_dataset(table, str(path), max_rows_per_file=50)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    ds.create_index("vec", "IVF_FLAT", num_partitions=2)
    ds.delete("id % 10 = 0")
    return str(path)


def _agree(uri: str) -> None:
    ds = lance.dataset(uri)
    for predicate in FILTERS:
        indexed = ds.to_table(filter=predicate, columns=["id"])["id"].to_pylist()
        scanned = ds.to_table(filter=predicate, columns=["id"], use_scalar_index=False)["id"].to_pylist()
        assert sorted(indexed) == sorted(scanned), predicate
    q = np.full(8, 0.5, np.float32)
    near = ds.to_table(nearest={"column": "vec", "q": q, "k": 5, "nprobes": 2}, columns=["id"])["id"]
    assert all(i % 10 for i in near.to_pylist())  # no deleted row comes back


def test_compact_job_remaps_indices_in_one_rewrite(spark: SparkSession, tmp_path: Path) -> None:
    uri = _indexed(tmp_path / "d")
    before = {i.name: i.uuid for i in lance_ops.dataset(uri).manifest.indices}
    metrics = jobs.compact(spark, uri, target_rows_per_fragment=200)
    assert metrics.fragments_removed == 8
    ds = lance_ops.dataset(uri)
    operation = ds.read_transaction().operation
    assert isinstance(operation, Rewrite)
    assert {r.old_id for r in operation.rewritten_indices} == set(before.values())
    assert all(i.uuid != before[i.name] for i in ds.manifest.indices)
    assert all(d.num_rows_indexed == 360 for d in lance.dataset(uri).describe_indices())
    _agree(uri)


def test_deferred_compaction_then_optimize_indices_job(
    spark: SparkSession, tmp_path: Path, main_session: None, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = _indexed(tmp_path / "d")
    jobs.compact(spark, uri, target_rows_per_fragment=200, defer_index_remap=True)
    assert frag_reuse.find(lance_ops.dataset(uri).manifest) is not None
    _agree(uri)
    report = optimize_main(["--uri", uri])
    assert set(report["remapped"]) == {"id_idx", "cat_idx", "vec_idx"}
    assert json.loads(capsys.readouterr().out)["remapped"] == list(report["remapped"])
    assert frag_reuse.find(lance_ops.dataset(uri).manifest) is None
    _agree(uri)
    version = lance_ops.dataset(uri).version
    assert jobs.optimize_indices(spark, uri).remapped == ()  # twice: nothing to do, no commit
    assert lance_ops.dataset(uri).version == version


def _btree_ivf_pq(path: Path) -> str:
    rng = np.random.default_rng(1)
    n = 600
    table = pa.table(
        {
            "id": np.arange(n),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8, dtype=np.float32)), 8),
        }
    )
    ds = lance.write_dataset(table, str(path), max_rows_per_file=60)
    ds.create_scalar_index("id", "BTREE")
    ds.create_index("vec", "IVF_PQ", num_partitions=2, num_sub_vectors=2)
    ds.delete("id % 7 = 0")
    return str(path)


def _index_tables(uri: str) -> dict[str, pa.Table]:
    """Every file of every index, read by pylance's file reader (by index name and file)."""
    from lance.file import LanceFileReader

    tables = {}
    for index in lance_ops.dataset(uri).manifest.indices:
        for f in index.files:
            path = Path(uri) / "_indices" / str(uuid.UUID(bytes=index.uuid)) / f.path
            tables[f"{index.name}/{f.path}"] = LanceFileReader(str(path)).read_all().to_table()
    return tables


def test_compact_job_remaps_on_executors_as_in_process(spark: SparkSession, tmp_path: Path) -> None:
    """BTREE + IVF_PQ without stable row ids: the Spark job rewrites each index in an executor task
    and commits one Rewrite; its index files and pylance's indexed answers equal those of the
    in-process compaction of a twin."""
    uri = _btree_ivf_pq(tmp_path / "spark")
    twin = str(tmp_path / "local")
    shutil.copytree(uri, twin)
    status = spark.sparkContext.statusTracker()
    jobs_before = len(status.getJobIdsForGroup(None))
    jobs.compact(spark, uri, target_rows_per_fragment=250)
    assert len(status.getJobIdsForGroup(None)) > jobs_before  # the remap ran as a Spark job
    lance_ops.dataset(twin).optimize.compact_files(target_rows_per_fragment=250)
    operation = lance_ops.dataset(uri).read_transaction().operation
    assert isinstance(operation, Rewrite) and len(operation.rewritten_indices) == 2
    assert _index_tables(uri) == _index_tables(twin)
    ds, expected = lance.dataset(uri), lance.dataset(twin)
    for predicate in ("id = 343", "id = 344", "id >= 100 AND id < 180"):
        got = ds.to_table(filter=predicate, columns=["id"])["id"].to_pylist()
        assert got == expected.to_table(filter=predicate, columns=["id"])["id"].to_pylist()
        scanned = ds.to_table(filter=predicate, columns=["id"], use_scalar_index=False)["id"]
        assert sorted(got) == sorted(scanned.to_pylist()), predicate
    for q in np.random.default_rng(3).random((5, 8), dtype=np.float32):
        nearest = {"column": "vec", "q": q, "k": 10, "nprobes": 2}
        assert "ANNSubIndex" in ds.scanner(nearest=nearest).explain_plan(True)
        found = ds.to_table(nearest=nearest, columns=["id"])["id"].to_pylist()
        assert found == expected.to_table(nearest=nearest, columns=["id"])["id"].to_pylist()
        assert len(found) == 10 and all(i % 7 for i in found)
    assert ds.stats.index_stats("vec_idx")["num_unindexed_rows"] == 0
    assert ds.stats.index_stats("id_idx")["num_indexed_rows"] == 600 - 86


def test_compact_job_with_a_corrupt_index_leaves_nothing_behind(spark: SparkSession, tmp_path: Path) -> None:
    uri = _btree_ivf_pq(tmp_path / "d")
    ds = lance_ops.dataset(uri)
    vec = next(i for i in ds.manifest.indices if i.name == "vec_idx")
    aux = Path(uri) / "_indices" / str(uuid.UUID(bytes=vec.uuid)) / "auxiliary.idx"
    aux.write_bytes(aux.read_bytes()[:-64] + b"\x07" * 64)
    directories = sorted((Path(uri) / "_indices").iterdir())
    with pytest.raises(IndexCorruptError, match="vec_idx"):
        jobs.compact(spark, uri, target_rows_per_fragment=250)
    assert lance_ops.dataset(uri).version == ds.version
    assert sorted((Path(uri) / "_indices").iterdir()) == directories  # the BTREE's new one removed too
    assert lance.dataset(uri).to_table(filter="id = 344", columns=["id"])["id"].to_pylist() == [344]
