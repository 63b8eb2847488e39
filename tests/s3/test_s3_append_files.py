"""``jobs.append_files`` with its Parquet source and its dataset on ``s3://`` (moto on loopback):
Spark's Python workers reach both with the storage options the tasks carry; pylance reads the
result with the same options."""

from __future__ import annotations

import lance
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import jobs
from lance_ops.ops.engine import source_filesystem
from tests.s3.conftest import S3Location

pytestmark = [pytest.mark.s3, pytest.mark.spark, pytest.mark.interop]


def test_append_files_from_and_to_s3(spark: SparkSession, s3: S3Location) -> None:
    fs, root = source_filesystem(s3.uri("source"), s3.storage_options)
    arrow_fs = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    for n in range(3):
        ids = pa.array(range(n * 100, n * 100 + 100 - n), pa.int64())
        table = pa.table({"id": ids, "half": pa.compute.divide(ids, 2)})
        pq.write_table(table, f"{root}/part-{n}.parquet", filesystem=arrow_fs, row_group_size=40)
    uri = s3.uri()
    first = jobs.append_files(spark, uri, s3.uri("source"), storage_options=s3.storage_options)
    again = jobs.append_files(spark, uri, s3.uri("source"), storage_options=s3.storage_options)
    ds = lance.dataset(uri, storage_options=s3.storage_options)
    assert (first.version, again.version, ds.version) == (1, 2, 2)
    source = pads.dataset(root, filesystem=arrow_fs).to_table()
    assert ds.to_table().equals(pa.concat_tables([source, source]))
