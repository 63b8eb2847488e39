"""Spark jobs on pylance-indexed datasets (L15): the compaction job remaps the indices in its one
Rewrite commit (or records a deferred remap in the Fragment Reuse Index), and
``jobs.optimize_indices`` catches deferred indices up. Local[2] session, answers checked with pylance."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from jobs.optimize_indices import main as optimize_main
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
