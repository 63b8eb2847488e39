"""Spark writes refuse what the dataset cannot hold (issue L13): a DataFrame lacking a non-nullable
column is refused on the driver with one clear error, ``fill_missing="compute"`` computes a column
added by SQL, in batch appends, replace-where backfills and streaming writes; nothing is committed
by a refused write and pylance still scans the dataset."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

import jobs
import lance_ops
from jobs.datasource import LanceWriter
from lance_ops.errors import WriteSchemaError
from lance_ops.fragment import write_fragments

pytestmark = [pytest.mark.spark, pytest.mark.interop]

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("day", pa.int64(), nullable=False),
        pa.field("score", pa.float64(), nullable=False),
    ]
)


def _frame(spark: SparkSession, days: range, per_day: int = 5) -> DataFrame:
    rows = [(d * 100 + i, d, float(i)) for d in days for i in range(per_day)]
    return spark.createDataFrame(rows, "id LONG, day LONG, score DOUBLE").repartition(2)


def _dataset(spark: SparkSession, tmp_path: Path) -> str:
    """Two days of rows, then the non-nullable ``score_x10_v5`` added by the Spark job from SQL."""
    uri = str(tmp_path / "scores.lance")
    rows = [(d * 100 + i, d, float(i)) for d in range(2) for i in range(5)]
    columns = dict(zip(SCHEMA.names, zip(*rows, strict=True), strict=True))
    lance_ops.write_dataset(pa.table({k: list(v) for k, v in columns.items()}, schema=SCHEMA), uri)
    jobs.add_columns(spark, uri, {"score_x10_v5": "score * 10"})
    assert not lance.dataset(uri).schema.field("score_x10_v5").nullable
    return uri


def _unchanged(uri: str, version: int) -> None:
    ds = lance.dataset(uri)
    assert ds.version == version
    assert ds.to_table().column("score_x10_v5").null_count == 0


def _expected(table: pa.Table) -> None:
    assert table.column("score_x10_v5").to_pylist() == [s * 10 for s in table.column("score").to_pylist()]


def test_append_lacking_a_non_nullable_column_fails_on_the_driver(
    spark: SparkSession, tmp_path: Path
) -> None:
    uri = _dataset(spark, tmp_path)
    version = lance.dataset(uri).version
    df = _frame(spark, range(2, 3))
    with pytest.raises(WriteSchemaError, match="lacks column.*'score_x10_v5'.*fill_missing='compute'"):
        jobs.save(df, uri)
    # Spark's own writer API plans the same writer on the driver: one error, no task run
    with pytest.raises(Exception, match="lacks column") as caught:
        df.write.format("lance").mode("append").save(uri)
    assert "Value at index" not in str(caught.value)
    # the writer refuses it when Spark plans it (what the driver-side Python worker runs)
    with pytest.raises(WriteSchemaError):
        LanceWriter(uri, df.schema, False, {})
    _unchanged(uri, version)


def test_append_with_nulls_or_bad_values_fails_and_commits_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    uri = _dataset(spark, tmp_path)
    version = lance.dataset(uri).version
    nulls = _frame(spark, range(2, 3)).selectExpr("*", "CAST(NULL AS DOUBLE) AS score_x10_v5")
    with pytest.raises(Exception, match="'score_x10_v5' is not nullable but holds .* null"):
        jobs.save(nulls, uri)
    bad = _frame(spark, range(2, 3)).selectExpr(
        "CAST(id AS STRING) || 'x' AS id", "day", "score", "score * 10 AS score_x10_v5"
    )
    with pytest.raises(Exception, match="column 'id' is int64.*string value"):
        jobs.save(bad, uri)
    extra = _frame(spark, range(2, 3)).selectExpr("*", "score * 10 AS score_x10_v5", "1 AS other")
    with pytest.raises(WriteSchemaError, match=r"\['other'\] that the dataset does not have"):
        jobs.save(extra, uri)
    _unchanged(uri, version)


def test_fill_missing_compute_append_and_rerun(spark: SparkSession, tmp_path: Path) -> None:
    uri = _dataset(spark, tmp_path)
    version = lance.dataset(uri).version
    for run in (1, 2):
        jobs.save(_frame(spark, range(2, 3)), uri, fill_missing="compute")
        ds = lance.dataset(uri)
        assert (ds.version, ds.count_rows()) == (version + run, 10 + 5 * run)
        _expected(ds.to_table())
    # the Spark option works on the plain writer API too
    _frame(spark, range(3, 4)).write.format("lance").mode("append").option("fill_missing", "compute").save(
        uri
    )
    _expected(lance.dataset(uri).to_table())
    assert lance.dataset(uri).count_rows() == 25


def test_missing_nullable_column_gets_nulls(spark: SparkSession, tmp_path: Path) -> None:
    uri = _dataset(spark, tmp_path)
    lance_ops.dataset(uri).add_columns(pa.field("label", pa.string()))
    jobs.save(_frame(spark, range(2, 3)), uri, fill_missing="compute")
    table = lance.dataset(uri).to_table()
    assert table.column("label").to_pylist()[-5:] == [None] * 5
    _expected(table)
    version = lance.dataset(uri).version
    with pytest.raises(WriteSchemaError, match="fill_missing='error'"):
        jobs.save(_frame(spark, range(2, 3)), uri, fill_missing="error")
    _unchanged(uri, version)


def test_replace_where_with_fill_missing_compute(spark: SparkSession, tmp_path: Path) -> None:
    uri = _dataset(spark, tmp_path)
    version = lance.dataset(uri).version
    with pytest.raises(WriteSchemaError, match="lacks column"):
        jobs.save(_frame(spark, range(1, 2), per_day=3), uri, mode="overwrite", replace_where="day = 1")
    _unchanged(uri, version)
    for _ in range(2):  # a re-run backfill leaves one copy
        jobs.save(
            _frame(spark, range(1, 2), per_day=3),
            uri,
            mode="overwrite",
            replace_where="day = 1",
            fill_missing="compute",
        )
    ds = lance.dataset(uri)
    assert ds.version == version + 2
    table = ds.to_table()
    assert sorted(table.column("day").to_pylist()) == [0] * 5 + [1] * 3
    _expected(table)


def test_streaming_write_with_fill_missing_compute(spark: SparkSession, tmp_path: Path) -> None:
    uri = _dataset(spark, tmp_path)
    version = lance.dataset(uri).version
    source = tmp_path / "incoming"
    source.mkdir()
    (source / "a.json").write_text(
        '{"id": 500, "day": 5, "score": 1.5}\n{"id": 501, "day": 5, "score": 2.5}\n'
    )
    stream = spark.readStream.schema("id LONG, day LONG, score DOUBLE").json(str(source))
    query = (
        stream.writeStream.format("lance")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .option("fill_missing", "compute")
        .trigger(availableNow=True)
        .start(uri)
    )
    query.awaitTermination()
    ds = lance.dataset(uri)
    assert ds.version == version + 1
    table = ds.to_table()
    assert table.num_rows == 12
    _expected(table)


def test_commit_refuses_executor_fragments_with_nulls(spark: SparkSession, tmp_path: Path) -> None:
    """The last guard: fragments written with a relaxed schema are refused at the commit."""
    uri = _dataset(spark, tmp_path)
    ds = lance_ops.dataset(uri)
    relaxed = pa.schema([f.with_nullable(True) for f in ds.schema])
    data = pa.table(
        {"id": [1, 2], "day": [9, 9], "score": [1.0, 2.0], "score_x10_v5": [None, 20.0]}, schema=relaxed
    )
    fragments = write_fragments(data, uri, schema=relaxed, fields=ds.manifest.schema)
    with pytest.raises(WriteSchemaError, match="holds 1 null"):
        lance_ops.LanceDataset.commit(
            uri, lance_ops.LanceOperation.Append(fragments), read_version=ds.version
        )
    _unchanged(uri, ds.version)
