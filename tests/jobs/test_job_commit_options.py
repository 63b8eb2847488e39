"""The Spark jobs take ``commit=lance_ops.CommitOptions(...)`` beside their keyword forms (L17)."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import jobs
import lance_ops
from lance_ops.errors import InvalidArgumentError

pytestmark = [pytest.mark.spark, pytest.mark.interop]


def _make(uri: str) -> None:
    ids = np.arange(200, dtype=np.int64)
    lance_ops.write_dataset(pa.table({"id": ids, "day": ids % 5}), uri, max_rows_per_file=20)


def test_commit_object_and_keywords_commit_the_same(spark: SparkSession, tmp_path: Path) -> None:
    by_keywords, by_object = str(tmp_path / "k.lance"), str(tmp_path / "o.lance")
    _make(by_keywords)
    _make(by_object)
    jobs.delete(spark, by_keywords, "day = 1", commit_message="purge", transaction_properties={"run": "r1"})
    commit = lance_ops.CommitOptions(commit_message="purge", transaction_properties={"run": "r1"})
    jobs.delete(spark, by_object, "day = 1", commit=commit)
    jobs.compact(spark, by_keywords, target_rows_per_fragment=100, transaction_properties={"run": "r2"})
    jobs.compact(
        spark,
        by_object,
        commit=lance_ops.CommitOptions(transaction_properties={"run": "r2"}),
        target_rows_per_fragment=100,
    )
    for uri in (by_keywords, by_object):
        ds = lance.dataset(uri)
        assert ds.version == 4 and ds.count_rows() == 160 and len(ds.get_fragments()) == 1
        assert ds.read_transaction(2).transaction_properties == {
            "run": "r1",
            "__lance_commit_message": "purge",
        }
        assert ds.read_transaction(4).transaction_properties["run"] == "r2"


def test_a_commit_option_given_twice_differently_runs_nothing(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "ds.lance")
    _make(uri)
    with pytest.raises(InvalidArgumentError, match="commit_message"):
        jobs.delete(
            spark, uri, "day = 1", commit_message="a", commit=lance_ops.CommitOptions(commit_message="b")
        )
    assert lance.dataset(uri).version == 1
