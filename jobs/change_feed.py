"""The change data feed as a read of the data source::

    (spark.read.format("lance").option("read_change_feed", "true")
        .option("starting_version", 3).option("ending_version", 7).load(uri))

The rows :meth:`lance_ops.LanceDataset.changes` returns for the commits ``starting_version`` (default
1) to ``ending_version`` (default: the latest version, pinned when the DataFrame is made), with the
columns of the ending version plus ``_change_type`` (STRING) and ``_commit_version`` (LONG). One Spark
partition per commit: each task reads only what that commit changed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

import lance_ops
from jobs.types import conform_batch, spark_arrow_schema
from lance_ops.errors import InvalidArgumentError
from lance_ops.ops.changes import CHANGE_TYPE, COMMIT_VERSION

OPTION = "read_change_feed"


def change_feed_schema(schema: pa.Schema) -> pa.Schema:
    """The feed's Arrow schema over a dataset schema."""
    return pa.schema([*schema, pa.field(CHANGE_TYPE, pa.string()), pa.field(COMMIT_VERSION, pa.int64())])


def version_range(options: Mapping[str, str], latest: int) -> tuple[int, int]:
    """``(starting_version, ending_version)`` of the options (1 and ``latest`` by default)."""
    try:
        start = int(options.get("starting_version", 1))
        end = int(options.get("ending_version", latest))
    except ValueError as exc:
        raise InvalidArgumentError(f"starting_version / ending_version must be integers: {exc}") from exc
    if not 1 <= start <= end:
        raise InvalidArgumentError(
            f"the change feed needs 1 <= starting_version <= ending_version, not {start}..{end}"
        )
    return start, end


@dataclass(frozen=True)
class CommitPartition(InputPartition):
    """One commit's changes."""

    version: int


class ChangeFeedReader(DataSourceReader):
    """Reads the changes of commits ``start .. end`` of the dataset at ``uri``."""

    def __init__(
        self, uri: str, start: int, end: int, schema: StructType, storage_options: dict[str, str]
    ) -> None:
        self.uri, self.start, self.end = uri, start, end
        self.arrow_schema = spark_arrow_schema(schema)
        self.storage_options = storage_options

    def partitions(self) -> Sequence[InputPartition]:
        return [CommitPartition(v) for v in range(self.start, self.end + 1)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, CommitPartition):
            raise TypeError(f"not a change feed partition: {partition!r}")
        ds = lance_ops.dataset(self.uri, version=self.end, storage_options=self.storage_options)
        for batch in ds.changes(partition.version, partition.version).to_batches():
            yield conform_batch(batch, self.arrow_schema)
