"""``spark.read/write.format("lance")``: a Spark 4 Python Data Source over lance_ops.

Reading::

    spark.read.format("lance").option("version", 3).load(uri)

``schema()`` opens the dataset on the driver, pins the version it sees (the latest unless ``version``
names a number or a tag) and maps its Arrow schema to Spark types (:mod:`jobs.types`). The reader
plans one Spark partition per row range of a fragment (``split_rows`` physical rows, default 1Mi, so
one big fragment is read by several tasks); each task opens the pinned version, reads the live rows
of its range and yields Arrow record batches cast to the exact Arrow schema Spark expects. A
DataFrame is therefore a snapshot: later commits do not change what it returns. Read options:
``version``, ``columns`` (may name the metadata columns ``_rowid``, ``_rowaddr``, ``_fragid``, read as
LONG), ``filter`` (a Lance SQL predicate evaluated while scanning), ``split_rows``, ``batch_size``
(rows per Arrow batch, default 8192), ``filter_pushdown`` and ``storage_options``; with
``read_change_feed`` the rows changed by commits ``starting_version``..``ending_version``
(:mod:`jobs.change_feed`). Everything the
reader does is fixed by its options and schema, so the JVM reusing it across queries is harmless.
With a predicate, planning skips the row ranges whose column statistics (``ds.stats.rebuild()``,
:func:`jobs.rebuild_statistics`) show it cannot select a row (:func:`prune_partitions`): a
selective ``filter`` on a column with statistics makes fewer tasks, and the rows are the same.

Pushdown — what Spark 4.3's Python Data Source API allows:

* Filters: ``DataSourceReader.pushFilters`` (Spark >= 4.1) is implemented
  (:class:`LanceFilteringReader`: comparisons, ``IN``, ``IS [NOT] NULL``, ``NOT`` and string
  prefix/suffix/contains on top-level columns become one Lance SQL predicate) but
  ``.option("filter_pushdown", "true")`` is refused (:func:`filter_pushdown`) on every Spark release
  known to keep the planned reader on the DataFrame's source (``PythonDataSourceV2.readInfo``, Spark
  4.1 to 4.3): the JVM reuses it for a later query of the same DataFrame whose filters have no
  Python form (``OR``, arithmetic, no filter at all), without calling Python, so that query would
  silently inherit the earlier pushed predicates, and nothing reaching Python can tell the two
  queries apart. The ``filter`` option is the always-correct way to have Lance evaluate a predicate
  while scanning: it is part of the reader's options, not of Spark's plan.
* Columns: the JVM side (``PythonScanBuilder``) implements only ``SupportsPushDownFilters``, not
  ``SupportsPushDownRequiredColumns``, so ``load().select("a")`` still makes the source produce every
  column and Spark drops the rest. To read fewer columns from storage, name them at the source:
  ``.option("columns", "a,b")`` or a user schema ``.schema("a BIGINT, b STRING")``; the reader reads
  exactly the fields of the schema it is given.

Writing::

    df.write.format("lance").mode("append" | "overwrite").save(uri)
    df.write.format("lance").mode("overwrite").option("replace_where", "day = 3").save(uri)
    jobs.save(df, uri, mode="error" | "ignore")          # Spark only passes append/overwrite
    df.writeStream.format("lance").option("checkpointLocation", ckpt).start(uri)

The writer is planned once on the driver (it records the dataset's version, Arrow schema and, for
an append, its Lance field ids and file format, so tasks never read the manifest), then each Spark
task receives Arrow batches, casts them to the dataset's schema and calls
:func:`lance_ops.fragment.write_fragments`; the task's commit message carries the resulting
``FragmentMetadata``. When every task has succeeded the driver commits ONE transaction: ``Append`` to
an existing dataset, ``Overwrite`` for mode overwrite and for a dataset that does not exist yet (a
create), or, with ``replace_where``, an ``Update`` (:func:`lance_ops.ops.write.replace_rows`: deletion
files for the rows of the read version the predicate selects, the new fragments added) — so a
re-run backfill leaves one copy; a DataFrame row the predicate does not select fails its task.
Options: ``transaction_properties`` (JSON object of strings, stored in the transaction),
``commit_message``, ``fill_missing`` (see below), ``max_rows_per_file``, ``max_rows_per_group``,
``data_storage_version`` (default: the dataset's own, ``stable`` for a new one),
``enable_stable_row_ids`` (on create), ``encoding_plan`` (an
:class:`~lance_ops.encoding.plan.EncodingPlan` as JSON, applied by every task and stored by a create
or overwrite; appends, replace-where and streaming writes otherwise apply the plan stored in the
dataset, read once on the driver — see :mod:`jobs.profile_encodings`), ``save_mode``
(``error``/``ignore``, see :func:`save`) and, for both directions, ``storage_options`` (JSON object)
and ``manifest_store`` (the path of a :class:`~lance_ops.SqliteManifestStore` database: the write
commits through it, a read first repairs a version claimed there but not finished).
Rows written into an existing dataset's schema (append, replace-where, streaming) must fit it
(:mod:`lance_ops.fragment.conform`): the driver checks the DataFrame's schema when the writer is
planned (a column the dataset lacks, a missing column that cannot be filled, a type without a cast
raise :class:`~lance_ops.errors.WriteSchemaError` before any task runs), and each task checks its
rows (nulls in non-nullable columns, values that do not convert). Option ``fill_missing``
(``compute``, ``null``, ``error``; default: nullable columns filled with nulls, others refused)
governs the dataset's columns the DataFrame lacks; ``compute`` computes a column added from a SQL
expression (``jobs.add_columns``) from that expression. The commit refuses fragments holding nulls
in non-nullable columns all the same (:mod:`lance_ops.table.write_guard`).
Streaming writes commit each micro-batch the same way, with the query's identity (option
``stream_id``, else the query id in ``<checkpointLocation>/metadata``) and the batch id in the
transaction properties; a batch id the query already committed (a replay) is skipped.
If a task fails, Spark calls ``abort``: nothing was committed, so the data files written by the
successful tasks are unreachable from every version; they are left for
``cleanup_old_versions(delete_unverified=True)``, exactly as with an interrupted pylance write.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyspark
from pyspark.sql import DataFrame
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
    WriterCommitMessage,
)
from pyspark.sql.types import LongType, StructField, StructType

import lance_ops
from jobs.change_feed import OPTION as CHANGE_FEED_OPTION
from jobs.change_feed import ChangeFeedReader, change_feed_schema, version_range
from jobs.common import profiled, size_to_task
from jobs.session import arrow_batches_cut_by_rows
from jobs.types import conform_batch, spark_arrow_schema, spark_schema
from lance_ops.errors import (
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    SchemaError,
    UnsupportedFeatureError,
)
from lance_ops.ops.compaction import open_version
from lance_ops.ops.engine import ENCODING_PLAN_KEY as PLAN_CONFIG_KEY
from lance_ops.ops.engine import (
    ROW_ADDRESS,
    ROW_ID,
    Conform,
    ConformPlan,
    DataFragment,
    EncodingPlan,
    FragmentMetadata,
    LanceSchema,
    Operation,
    Predicate,
    ScanOptions,
    SqliteManifestStore,
    VersionFiles,
    WriteOptions,
    check_fill_missing,
    parse_predicate,
    row_mask,
    write_fragments,
)
from lance_ops.ops.write import replace_rows

log = logging.getLogger(__name__)

FORMAT_NAME = "lance"
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
DEFAULT_BATCH_SIZE = 8192
# Physical rows per read partition: a larger fragment is read by several tasks.
DEFAULT_SPLIT_ROWS = 1024 * 1024
FRAGMENT_ID = "_fragid"
METADATA_COLUMNS = (ROW_ID, ROW_ADDRESS, FRAGMENT_ID)
# Spark releases checked to keep the reader planned with pushed filters per scan. Spark 4.1 to 4.3
# keep it on the DataFrame's source (``PythonDataSourceV2.readInfo``) and run it again for a later
# query of that DataFrame with no filter Python can take, which then silently misses rows. No
# release is known to scope it per scan yet, so ``filter_pushdown`` is refused on all of them.
PUSHDOWN_SAFE_SPARK_VERSIONS: frozenset[str] = frozenset()


def _json_option(options: Mapping[str, str], key: str) -> dict[str, str]:
    """A JSON-object option as a dict of strings (empty when absent)."""
    raw = options.get(key)
    if not raw:
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"option {key!r} must be a JSON object, got {raw!r}")
    return {str(k): str(v) for k, v in value.items()}


def _manifest_store_option(options: Mapping[str, str]) -> SqliteManifestStore | None:
    """The external manifest store named by option ``manifest_store`` (a SQLite database path)."""
    path = options.get("manifest_store")
    return SqliteManifestStore(path) if path else None


def filter_pushdown(options: Mapping[str, str], spark_version: str = pyspark.__version__) -> bool:
    """Whether the reader takes Spark's filters (option ``filter_pushdown``).

    On a Spark release that reuses a pushed reader across the queries of one DataFrame (every
    release known today, see :data:`PUSHDOWN_SAFE_SPARK_VERSIONS`) the option is refused with an
    :class:`UnsupportedFeatureError`: a wrong row count must not be a possible outcome.
    """
    if not _bool_option(options, "filter_pushdown", False):
        return False
    if spark_version in PUSHDOWN_SAFE_SPARK_VERSIONS:
        return True
    raise UnsupportedFeatureError(
        f"option 'filter_pushdown' is refused on Spark {spark_version}: this Spark keeps the reader "
        "planned for one query's pushed filters on the DataFrame's source and reuses it for later "
        "queries of the same DataFrame, which would then silently miss rows. Give Lance the "
        "predicate with .option('filter', '<Lance SQL predicate>') instead (evaluated and used for "
        "statistics pruning while scanning, always correct); Spark's own filters work as usual"
    )


def _bool_option(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    lowered = str(raw).strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"option {key!r} must be true or false, got {raw!r}")
    return lowered == "true"


def _version_option(raw: str | None) -> int | str | None:
    """``version`` option: an integer version, a tag name, or None for the latest."""
    if raw is None or raw == "":
        return None
    return int(raw) if raw.strip().isdigit() else raw


# --- filter translation -------------------------------------------------------------------------

_COMPARISONS: dict[type[Filter], str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


# Spark's string-match filters as (before, after) LIKE wildcards around the literal text.
_LIKE_WILDCARDS: dict[type[Filter], tuple[str, str]] = {
    StringStartsWith: ("", "%"),
    StringEndsWith: ("%", ""),
    StringContains: ("%", "%"),
}


# Escaping differs between SQL dialects (Spark SQL uses backslashes, DataFusion-style Lance SQL
# doubles quotes), so names and strings that would need escaping are left to Spark.
_NEEDS_ESCAPE = ("'", "\\", "`")


def _sql_identifier(attribute: tuple[str, ...]) -> str | None:
    """A top-level column as a backtick-quoted identifier; nested paths are left to Spark."""
    if len(attribute) != 1 or any(ch in attribute[0] for ch in _NEEDS_ESCAPE):
        return None
    return f"`{attribute[0]}`"


def _sql_literal(value: Any) -> str | None:
    """A scalar literal in SQL; None for values this translation does not handle (Spark keeps those)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else None
    if isinstance(value, str) and not any(ch in value for ch in _NEEDS_ESCAPE):
        return f"'{value}'"
    return None


def _like_literal(text: str, prefix: str, suffix: str) -> str | None:
    """A LIKE pattern literal; None when ``text`` holds wildcards (escaping them is dialect-specific)."""
    if any(ch in text for ch in "%_"):
        return None
    return _sql_literal(prefix + text + suffix)


def filter_to_sql(flt: Filter) -> str | None:
    """Translate one Spark filter to a Lance SQL predicate, or None when it must stay with Spark."""
    if isinstance(flt, Not):
        inner = filter_to_sql(flt.child)
        return None if inner is None else f"NOT ({inner})"
    column = _sql_identifier(flt.attribute)  # type: ignore[attr-defined]
    if column is None:
        return None
    op = _COMPARISONS.get(type(flt))
    if op is not None:
        literal = _sql_literal(flt.value)  # type: ignore[attr-defined]
        return None if literal is None else f"{column} {op} {literal}"
    if isinstance(flt, EqualNullSafe):
        if flt.value is None:
            return f"{column} IS NULL"
        literal = _sql_literal(flt.value)
        return None if literal is None else f"({column} IS NOT NULL AND {column} = {literal})"
    if isinstance(flt, In):
        literals = [_sql_literal(v) for v in flt.value]
        if not literals or any(lit is None for lit in literals):
            return None
        return f"{column} IN ({', '.join(literals)})"  # type: ignore[arg-type]
    if isinstance(flt, IsNull):
        return f"{column} IS NULL"
    if isinstance(flt, IsNotNull):
        return f"{column} IS NOT NULL"
    wildcards = _LIKE_WILDCARDS.get(type(flt))
    if wildcards is not None:
        pattern = _like_literal(flt.value, *wildcards)  # type: ignore[attr-defined]
        return None if pattern is None else f"{column} LIKE {pattern}"
    return None


# --- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LanceInputPartition(InputPartition):
    """One Spark partition: the physical rows ``start .. stop - 1`` of one fragment of the pinned
    version (fragment None: the version has no fragments; Spark still runs one task, which yields
    nothing). Large fragments are split into several partitions by row range."""

    fragment_id: int | None
    start: int = 0
    stop: int = 0


def split_fragment(fragment_id: int, physical_rows: int, split_rows: int) -> list[LanceInputPartition]:
    """The partitions of one fragment: row ranges of at most ``split_rows`` physical rows."""
    return [
        LanceInputPartition(fragment_id, start, min(start + split_rows, physical_rows))
        for start in range(0, max(physical_rows, 1), split_rows)
    ]


def prune_partitions(
    files: VersionFiles,
    fragment: DataFragment,
    parts: list[LanceInputPartition],
    predicate: Predicate | None,
) -> list[LanceInputPartition]:
    """The row ranges of one fragment that ``predicate`` may select rows from.

    A range is dropped, at planning time, when the fragment's column statistics (the page
    statistics of its data files, or a statistics file's zones; :mod:`lance_ops.fragment.pruning`)
    show that no row in it can match; fragments without usable statistics keep every range.
    Scanning still evaluates the predicate, so pruning only saves tasks and I/O and never changes
    the rows read.
    """
    if predicate is None or not predicate.bounds:
        return parts
    stats = files.fragment(fragment).statistics()
    if stats is None:
        return parts
    lance = files.lance_schema
    bounds = [b for b in predicate.bounds if files.schema.get_field_index(b.column) >= 0]
    ids = {b.column: lance.field(b.column).id for b in bounds}
    mask = row_mask(stats, bounds, ids, np.arange(fragment.physical_rows, dtype=np.int64))
    if mask is None:
        return parts
    return [p for p in parts if mask[p.start : p.stop].any()]


def metadata_field(name: str) -> StructField:
    """The Spark field of a metadata column (``_rowid``, ``_rowaddr``, ``_fragid``)."""
    return StructField(name, LongType(), nullable=False)


class LanceReader(DataSourceReader):
    """Reads the pinned version of a dataset as Arrow batches, one row range of a fragment per
    partition. Data columns, metadata columns and the ``filter`` option's predicate are all fixed
    when the reader is made (from the schema and options Spark passes), so a reader that Spark
    reuses for another query of the same DataFrame still returns the right rows."""

    def __init__(
        self,
        uri: str,
        version: int,
        schema: StructType,
        storage_options: dict[str, str],
        batch_size: int,
        split_rows: int = DEFAULT_SPLIT_ROWS,
        filter: str | None = None,
    ) -> None:
        self.uri = uri
        self.version = version
        names = schema.fieldNames()
        self.columns = [n for n in names if n not in METADATA_COLUMNS]
        self.metadata = [n for n in names if n in METADATA_COLUMNS]
        self.arrow_schema = spark_arrow_schema(schema)
        self.storage_options = storage_options
        self.batch_size = batch_size
        self.split_rows = split_rows
        self.predicates: list[str] = [] if filter is None else [filter]

    @property
    def filter(self) -> str | None:
        """The predicates as one SQL conjunction (None when there are none)."""
        if not self.predicates:
            return None
        return " AND ".join(f"({p})" for p in self.predicates)

    def _open(self) -> VersionFiles:
        return open_version(self.uri, self.version, self.storage_options)

    def partitions(self) -> Sequence[InputPartition]:
        files = self._open()
        predicate = None if self.filter is None else parse_predicate(self.filter, files.schema)
        parts = [
            part
            for f in files.manifest.fragments
            for part in prune_partitions(
                files, f, split_fragment(f.id, f.physical_rows, self.split_rows), predicate
            )
        ]
        return parts or [LanceInputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, LanceInputPartition):
            raise TypeError(f"not a Lance partition: {partition!r}")
        if partition.fragment_id is None:
            return
        size_to_task()  # the decoders' threads: this task's cores, not the executor's
        files = self._open()
        metadata = next((f for f in files.manifest.fragments if f.id == partition.fragment_id), None)
        if metadata is None:
            raise DatasetNotFoundError(
                f"{self.uri}: fragment {partition.fragment_id} is not in version {self.version}"
            )
        fragment = files.fragment(metadata)
        live = fragment.live_offsets()
        live = live[(live >= partition.start) & (live < partition.stop)]
        predicate = None if self.filter is None else parse_predicate(self.filter, files.schema)
        options = ScanOptions(
            columns=tuple(self.columns),
            predicate=predicate,
            with_row_id=ROW_ID in self.metadata,
            with_row_address=ROW_ADDRESS in self.metadata or FRAGMENT_ID in self.metadata,
            batch_size=self.batch_size,
        )
        for table in fragment.scan(options, live):
            if table.num_rows:
                yield conform_batch(self._with_metadata(table, fragment.id), self.arrow_schema)

    def _with_metadata(self, table: pa.Table, fragment_id: int) -> pa.RecordBatch:
        """``table`` as one batch, metadata columns as int64 (Spark's LONG)."""
        columns = {name: table.column(name) for name in self.columns}
        if ROW_ID in self.metadata:
            columns[ROW_ID] = table.column(ROW_ID).cast(pa.int64())
        if ROW_ADDRESS in self.metadata:
            columns[ROW_ADDRESS] = table.column(ROW_ADDRESS).cast(pa.int64())
        if FRAGMENT_ID in self.metadata:
            columns[FRAGMENT_ID] = pa.array(np.full(table.num_rows, fragment_id, dtype=np.int64))
        arrays = [
            pa.chunked_array(c).combine_chunks() if isinstance(c, pa.ChunkedArray) else c
            for c in columns.values()
        ]
        return pa.RecordBatch.from_arrays(arrays, names=list(columns))


class LanceFilteringReader(LanceReader):
    """:class:`LanceReader` that also takes the filters Lance can evaluate while scanning."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for flt in filters:
            target = flt.child if isinstance(flt, Not) else flt
            predicate = None if target.attribute[0] in METADATA_COLUMNS else filter_to_sql(flt)  # type: ignore[attr-defined]
            if predicate is None:
                yield flt
            else:
                self.predicates.append(predicate)


# --- writing ------------------------------------------------------------------------------------


@dataclass
class LanceCommitMessage(WriterCommitMessage):
    """What one Spark task wrote: the fragments to add (ids are assigned at commit)."""

    fragments: list[FragmentMetadata] = field(default_factory=list)
    num_rows: int = 0


SAVE_MODES = ("append", "overwrite", "error", "errorifexists", "ignore")
# Transaction properties of a streaming commit: which query and micro-batch it holds.
STREAM_ID_KEY = "lance-ops.stream.id"
STREAM_BATCH_KEY = "lance-ops.stream.batch_id"


class LanceWriter(DataSourceArrowWriter):
    """Executors write fragments; the driver commits them as one Append, Overwrite or (replace-where)
    Update."""

    def __init__(
        self,
        uri: str,
        spark_input_schema: StructType | pa.Schema,
        overwrite: bool,
        options: Mapping[str, str],
    ):
        # Spark hands the DataFrame's schema; ``jobs.append_files`` the Arrow schema of its files.
        source_schema = (
            spark_input_schema
            if isinstance(spark_input_schema, pa.Schema)
            else spark_arrow_schema(spark_input_schema)
        )
        self.uri = uri
        self.storage_options = _json_option(options, "storage_options")
        self.manifest_store = _manifest_store_option(options)
        self.transaction_properties = _json_option(options, "transaction_properties")
        self.commit_message = options.get("commit_message")
        self.max_rows_per_file = int(options.get("max_rows_per_file", 1024 * 1024))
        self.max_rows_per_group = int(options.get("max_rows_per_group", 1024))
        self.enable_stable_row_ids = _bool_option(options, "enable_stable_row_ids", False)
        self.replace_where = options.get("replace_where") or None
        self.fill_missing = options.get("fill_missing") or None
        check_fill_missing(self.fill_missing)
        given_plan = options.get("encoding_plan")
        self.given_plan = None if not given_plan else EncodingPlan.from_json(given_plan)
        if self.replace_where is not None and not overwrite:
            raise ValueError("option 'replace_where' needs mode('overwrite')")
        existing = self._existing()
        save_mode = (options.get("save_mode") or ("overwrite" if overwrite else "append")).lower()
        if save_mode not in SAVE_MODES:
            raise ValueError(f"option 'save_mode' must be one of {SAVE_MODES}, got {save_mode!r}")
        if existing is not None and save_mode in ("error", "errorifexists"):
            raise DatasetAlreadyExistsError(f"a dataset already exists at {uri} (save mode {save_mode!r})")
        # Save mode ignore with an existing dataset: the tasks write nothing and nothing is committed.
        self.skip = existing is not None and save_mode == "ignore"
        self.read_version = None if existing is None else existing.version
        replacing = overwrite and self.replace_where is None
        self.overwrite = replacing or existing is None
        self.schema = existing.schema if existing is not None and not replacing else source_schema
        # New files match the dataset's format unless the caller names one.
        self.data_storage_version = options.get("data_storage_version") or (
            "stable" if existing is None else existing.data_storage_version
        )
        # An append writes files with the dataset's field ids and format, read here once so the tasks
        # never load the manifest.
        append_to = None if self.overwrite else existing
        self._append_fields = None if append_to is None else append_to.manifest.schema
        self._file_version = (
            self.data_storage_version if append_to is None else append_to.data_storage_version
        )
        # The dataset's encoding plan, read once here and handed to every task, so all fragments of
        # a column are encoded alike whichever partition wrote them (a given plan wins).
        stored_plan = None if append_to is None else EncodingPlan.from_config(append_to.manifest.config)
        self.encoding_plan = self.given_plan or stored_plan
        # Page statistics unless the dataset's config turns them off (lance-ops.page-statistics).
        config = {} if append_to is None else append_to.manifest.config
        self.page_statistics = bool(WriteOptions().for_dataset(config).page_statistics)
        # Rows written into the dataset's schema are conformed to it; what the DataFrame's schema
        # alone decides (missing, extra, uncastable columns) is refused here, on the driver, before
        # any task runs. Null checks happen in the tasks.
        self.conform = Conform(self.schema, self.fill_missing)
        if not self.skip and append_to is not None:
            self.conform.plan(source_schema)

    def _existing(self) -> lance_ops.LanceDataset | None:
        """The latest version of the dataset at ``uri``, or None if there is none yet."""
        try:
            return lance_ops.dataset(
                self.uri, storage_options=self.storage_options, manifest_store=self.manifest_store
            )
        except DatasetNotFoundError:
            return None

    def append_fields(self) -> LanceSchema | None:
        """The dataset's Lance schema an append writes with; None when the tasks number a new schema."""
        return self._append_fields

    def _check(self) -> Callable[[pa.RecordBatch], None] | None:
        """A replace-where write's check that every row matches the predicate (None otherwise)."""
        if self.replace_where is None:
            return None
        predicate = parse_predicate(self.replace_where, self.schema)

        def check(batch: pa.RecordBatch) -> None:
            kept = predicate.filter(pa.Table.from_batches([batch])).num_rows
            if kept != batch.num_rows:
                raise SchemaError(
                    f"{batch.num_rows - kept} row(s) of the DataFrame do not match "
                    f"replace_where {self.replace_where!r}"
                )

        return check

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:
        if self.skip:
            return LanceCommitMessage()
        size_to_task()  # the encoders' threads: this task's cores, not the executor's
        return profiled(self.write_batches, iterator)

    def write_batches(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:
        """Write one task's batches as fragments (what :meth:`write` does, without sizing the task's
        threads or profiling it: for callers that run it in a task of their own)."""
        counted = _CountingBatches(iterator, self.conform, self._check())
        head = counted.peek()
        if head is None:
            return LanceCommitMessage()
        reader = pa.RecordBatchReader.from_batches(head.schema, counted)
        fragments = write_fragments(
            reader,
            self.uri,
            schema=self.schema,
            mode="overwrite" if self.overwrite else "append",
            max_rows_per_file=self.max_rows_per_file,
            max_rows_per_group=self.max_rows_per_group,
            data_storage_version=self._file_version,
            storage_options=self.storage_options,
            fields=self.append_fields(),
            encoding_plan=self.encoding_plan,
            page_statistics=self.page_statistics,
        )
        return LanceCommitMessage(fragments=list(fragments), num_rows=counted.num_rows)

    def operation(self, fragments: list[FragmentMetadata]) -> Operation:
        """The single operation committing ``fragments`` on ``read_version``."""
        if self.overwrite:
            config = {} if self.given_plan is None else {PLAN_CONFIG_KEY: self.given_plan.to_json()}
            return lance_ops.LanceOperation.Overwrite(self.schema, fragments, config)
        if self.replace_where is not None:
            assert self.read_version is not None
            files = open_version(self.uri, self.read_version, self.storage_options)
            return replace_rows(files, parse_predicate(self.replace_where, files.schema), fragments)
        return lance_ops.LanceOperation.Append(fragments)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if not self.skip:
            self.commit_messages(messages)

    def commit_messages(self, messages: Sequence[WriterCommitMessage | None]) -> lance_ops.LanceDataset:
        """Commit the tasks' fragments as one transaction on ``read_version``; the version committed."""
        return self._commit(messages, self.read_version, self.transaction_properties)

    def _commit(
        self,
        messages: Sequence[WriterCommitMessage | None],
        read_version: int | None,
        properties: Mapping[str, str],
    ) -> lance_ops.LanceDataset:
        fragments = [
            frag for msg in messages if isinstance(msg, LanceCommitMessage) for frag in msg.fragments
        ]
        committed = lance_ops.LanceDataset.commit(
            self.uri,
            self.operation(fragments),
            read_version=read_version or 0,
            storage_options=self.storage_options,
            commit_message=self.commit_message,
            transaction_properties=dict(properties),
            enable_stable_row_ids=self.enable_stable_row_ids,
            data_storage_version=self.data_storage_version,
            manifest_store=self.manifest_store,
        )
        rows = sum(msg.num_rows for msg in messages if isinstance(msg, LanceCommitMessage))
        log.info(
            "committed %d rows in %d fragments as version %d of %s",
            rows,
            len(fragments),
            committed.version,
            self.uri,
        )
        return committed

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        orphans = sum(len(m.fragments) for m in messages if isinstance(m, LanceCommitMessage))
        log.warning(
            "Lance write to %s aborted: nothing committed; %d written fragment(s) are unreferenced and "
            "will be removed by cleanup_old_versions(delete_unverified=True)",
            self.uri,
            orphans,
        )


def stream_id(options: Mapping[str, str]) -> str:
    """What identifies a streaming query across restarts: option ``stream_id``, else the query id
    Spark keeps in ``<checkpointLocation>/metadata``."""
    explicit = options.get("stream_id")
    if explicit:
        return explicit
    checkpoint = options.get("checkpointLocation") or options.get("checkpointlocation")
    if checkpoint:
        metadata = Path(checkpoint.removeprefix("file:")) / "metadata"
        if metadata.exists():
            return str(json.loads(metadata.read_text().splitlines()[0])["id"])
    raise ValueError(
        "a streaming Lance write needs option 'stream_id' or a local 'checkpointLocation' "
        "(it identifies the query so a replayed micro-batch is not committed twice)"
    )


def last_stream_batch(uri: str, stream: str, storage_options: Mapping[str, str]) -> int | None:
    """The last micro-batch of ``stream`` committed to ``uri`` (None: none), newest version first."""
    try:
        ds = lance_ops.dataset(uri, storage_options=dict(storage_options))
    except DatasetNotFoundError:
        return None
    for entry in reversed(ds.versions()):
        transaction = ds.read_transaction(entry["version"])
        if transaction is not None and transaction.properties.get(STREAM_ID_KEY) == stream:
            return int(transaction.properties[STREAM_BATCH_KEY])
    return None


class LanceStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("lance")``: each micro-batch is written like a batch write and committed
    once: the query's id and the batch id go into the transaction properties, and a batch id not
    newer than the last one committed for the query (a replay after a restart) is skipped."""

    def __init__(self, uri: str, schema: StructType, overwrite: bool, options: Mapping[str, str]):
        self.batch = LanceWriter(uri, schema, overwrite, options)
        self.stream = stream_id(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:
        return self.batch.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        batch = self.batch
        last = last_stream_batch(batch.uri, self.stream, batch.storage_options)
        if last is not None and batchId <= last:
            log.warning("micro-batch %d of stream %s is already committed; skipped", batchId, self.stream)
            return
        existing = batch._existing()
        if existing is not None and batch.overwrite and batch.read_version is None:
            # The query's first micro-batch created the dataset; later ones append to it.
            batch.overwrite = False
        properties = {
            **batch.transaction_properties,
            STREAM_ID_KEY: self.stream,
            STREAM_BATCH_KEY: str(batchId),
        }
        batch._commit(messages, None if existing is None else existing.version, properties)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self.batch.abort(messages)


class _CountingBatches:
    """Iterator over Spark's batches, conformed to the dataset schema, counting rows and allowing a
    peek."""

    def __init__(
        self,
        batches: Iterator[pa.RecordBatch],
        conform: Conform,
        check: Callable[[pa.RecordBatch], None] | None = None,
    ) -> None:
        self._conform = conform
        self._plan: ConformPlan | None = None
        self._batches = (self._conformed(b) for b in batches if b.num_rows)
        self._check = check
        self._head: pa.RecordBatch | None = None
        self.num_rows = 0

    def _conformed(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` conformed, with the plan of the first batch while the schema stays the same."""
        if self._plan is None or not self._plan.source.equals(batch.schema):
            self._plan = self._conform.plan(batch.schema)
        return self._plan.apply(batch)

    def peek(self) -> pa.RecordBatch | None:
        if self._head is None:
            self._head = next(self._batches, None)
        return self._head

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self

    def __next__(self) -> pa.RecordBatch:
        batch = self._head if self._head is not None else next(self._batches)
        self._head = None
        if self._check is not None:
            self._check(batch)
        self.num_rows += batch.num_rows
        return batch


# --- the data source ----------------------------------------------------------------------------


class LanceDataSource(DataSource):
    """``format("lance")``: batch reads and writes of Lance datasets through lance_ops."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    @property
    def uri(self) -> str:
        path = self.options.get("path")
        if not path:
            raise ValueError("the Lance data source needs a dataset URI: load(uri) / save(uri)")
        return path

    @property
    def storage_options(self) -> dict[str, str]:
        return _json_option(self.options, "storage_options")

    def _pinned_version(self) -> int:
        """The dataset version this DataFrame reads, resolved once and kept with the source."""
        pinned = getattr(self, "_version", None)
        if pinned is None:
            ds = lance_ops.dataset(
                self.uri,
                version=_version_option(self.options.get("version") or self.options.get("ending_version")),
                storage_options=self.storage_options,
                manifest_store=_manifest_store_option(self.options),
            )
            pinned = self._version = ds.version
            self._arrow_schema = ds.schema
        return pinned

    def schema(self) -> StructType:
        filter_pushdown(self.options)  # refused at load(), before any query can run
        self._pinned_version()
        if _bool_option(self.options, CHANGE_FEED_OPTION, False):
            return spark_schema(change_feed_schema(self._arrow_schema))
        full = spark_schema(self._arrow_schema)
        wanted = self.options.get("columns")
        if not wanted:
            return full
        names = [name.strip() for name in wanted.split(",") if name.strip()]
        missing = [n for n in names if n not in full.fieldNames() and n not in METADATA_COLUMNS]
        if missing:
            raise ValueError(
                f"option 'columns' names unknown column(s) {missing}; schema has {full.fieldNames()}"
                f" and the metadata columns {list(METADATA_COLUMNS)}"
            )
        return StructType([full[n] if n in full.fieldNames() else metadata_field(n) for n in names])

    def reader(self, schema: StructType) -> LanceReader | ChangeFeedReader:
        if _bool_option(self.options, CHANGE_FEED_OPTION, False):
            start, end = version_range(self.options, self._pinned_version())
            return ChangeFeedReader(self.uri, start, end, schema, self.storage_options)
        cls = LanceFilteringReader if filter_pushdown(self.options) else LanceReader
        return cls(
            self.uri,
            self._pinned_version(),
            schema,
            self.storage_options,
            int(self.options.get("batch_size", DEFAULT_BATCH_SIZE)),
            int(self.options.get("split_rows", DEFAULT_SPLIT_ROWS)),
            self.options.get("filter") or None,
        )

    def writer(self, schema: StructType, overwrite: bool) -> LanceWriter:
        return LanceWriter(self.uri, schema, overwrite, self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> LanceStreamWriter:  # noqa: N802
        return LanceStreamWriter(self.uri, schema, overwrite, self.options)


def save(
    df: DataFrame, uri: str, mode: str = "append", *, fill_missing: str | None = None, **options: str
) -> None:
    """``df.write.format("lance")`` in any save mode: Spark's Python data sources only take append
    and overwrite, so ``error``/``errorifexists`` and ``ignore`` travel as option ``save_mode``
    (``error`` raises :class:`DatasetAlreadyExistsError` if a dataset exists; ``ignore`` then writes
    nothing). ``fill_missing`` (option ``fill_missing``: ``"compute"``, ``"null"`` or ``"error"``)
    says what becomes of dataset columns the DataFrame lacks (:mod:`lance_ops.fragment.conform`).

    The writer is planned here first, in this process: a DataFrame that does not fit the dataset
    raises :class:`~lance_ops.errors.WriteSchemaError` before Spark runs anything."""
    lowered = mode.lower()
    if lowered not in SAVE_MODES:
        raise ValueError(f"mode must be one of {SAVE_MODES}, got {mode!r}")
    if fill_missing is not None:
        options = {**options, "fill_missing": fill_missing}
    all_options = {**options, "save_mode": lowered}
    LanceWriter(uri, df.schema, lowered == "overwrite", all_options)
    writer = df.write.format(FORMAT_NAME).mode("overwrite" if lowered == "overwrite" else "append")
    for key, value in all_options.items():
        writer = writer.option(key, value)
    with arrow_batches_cut_by_rows(df):
        writer.save(uri)
