"""The Spark jobs (delete, add_columns, compact) against a local[2] session, checked with pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from lance_ops.errors import PredicateError, SchemaError

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def _table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "day": ids % 5, "name": [f"n{i}" for i in ids]})


def _make(tmp_path: Path, rows: int = 300, per_file: int = 60, stable: bool = False) -> str:
    uri = str(tmp_path / "ds.lance")
    lance_ops.write_dataset(_table(rows), uri, max_rows_per_file=per_file, enable_stable_row_ids=stable)
    return uri


# ------------------------------------------------------------------------------------------ delete


def test_delete_commits_one_delete(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path)
    result = jobs.delete(spark, uri, "day = 2 OR id >= 240")
    assert result.num_deleted_rows == 60 + 48
    ds = lance.dataset(uri)
    assert ds.version == 2
    assert ds.read_transaction(2).operation.__class__.__name__ == "Delete"
    ids = ds.to_table().column("id").to_pylist()
    assert ids == [i for i in range(300) if i % 5 != 2 and i < 240]
    assert len(ds.get_fragments()) == 4  # the last fragment lost every row and was removed


def test_delete_matches_the_library(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path / "a")
    other = _make(tmp_path / "b")
    jobs.delete(spark, uri, "id % 7 = 0")
    lance_ops.dataset(other).delete("id % 7 = 0")
    assert lance.dataset(uri).to_table() == lance.dataset(other).to_table()


def test_delete_bad_predicate_runs_nothing(spark: SparkSession, tmp_path: Path) -> None:
    uri = _make(tmp_path)
    with pytest.raises((PredicateError, SchemaError)):
        jobs.delete(spark, uri, "nope = 1")
    assert lance.dataset(uri).version == 1
