"""The ``lance`` Spark data source: type mapping, filter translation, and Spark round trips.

Round trips write through Spark (executors write fragments, the driver commits), read back through
Spark, and cross-check the committed dataset with lance_ops and with pylance (interop both ways).
"""

from __future__ import annotations

import datetime
import json
import pickle
from pathlib import Path

import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import datasource as sds
from pyspark.sql import functions as F
from pyspark.sql import types as T

import lance_ops
from jobs import datasource
from jobs.datasource import LanceWriter, filter_to_sql
from jobs.pipeline import demo_frame, write_lance
from jobs.types import conform_batch, spark_arrow_schema, spark_schema, spark_type
from lance_ops.errors import SchemaError, UnsupportedFeatureError

# --- type mapping (no Spark session) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("arrow_type", "expected"),
    [
        (pa.bool_(), T.BooleanType()),
        (pa.int8(), T.ByteType()),
        (pa.int16(), T.ShortType()),
        (pa.int32(), T.IntegerType()),
        (pa.int64(), T.LongType()),
        (pa.uint8(), T.ShortType()),
        (pa.uint16(), T.IntegerType()),
        (pa.uint32(), T.LongType()),
        (pa.uint64(), T.DecimalType(20, 0)),
        (pa.float16(), T.FloatType()),
        (pa.float32(), T.FloatType()),
        (pa.float64(), T.DoubleType()),
        (pa.string(), T.StringType()),
        (pa.large_string(), T.StringType()),
        (pa.binary(), T.BinaryType()),
        (pa.large_binary(), T.BinaryType()),
        (pa.binary(16), T.BinaryType()),
        (pa.date32(), T.DateType()),
        (pa.timestamp("us", tz="UTC"), T.TimestampType()),
        (pa.timestamp("ns"), T.TimestampNTZType()),
        (pa.decimal128(12, 3), T.DecimalType(12, 3)),
        (pa.dictionary(pa.int32(), pa.string()), T.StringType()),
        (pa.list_(pa.int64()), T.ArrayType(T.LongType(), True)),
        (pa.list_(pa.field("x", pa.int64(), nullable=False)), T.ArrayType(T.LongType(), False)),
        (pa.list_(pa.float32(), 8), T.ArrayType(T.FloatType(), True)),
        (pa.large_list(pa.string()), T.ArrayType(T.StringType(), True)),
        (pa.map_(pa.string(), pa.int32()), T.MapType(T.StringType(), T.IntegerType(), True)),
        (
            pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string(), nullable=False)]),
            T.StructType([T.StructField("a", T.IntegerType()), T.StructField("b", T.StringType(), False)]),
        ),
    ],
)
def test_spark_type(arrow_type: pa.DataType, expected: T.DataType) -> None:
    assert spark_type(arrow_type) == expected


@pytest.mark.parametrize("arrow_type", [pa.time64("us"), pa.decimal256(50, 2)])
def test_spark_type_unsupported_names_the_column(arrow_type: pa.DataType) -> None:
    with pytest.raises(UnsupportedFeatureError, match="vec"):
        spark_schema(pa.schema([pa.field("vec", arrow_type)]))


def test_spark_schema_keeps_nullability() -> None:
    schema = spark_schema(pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())]))
    assert [(f.name, f.nullable) for f in schema.fields] == [("id", False), ("s", True)]


def test_conform_batch_casts_and_selects_by_name() -> None:
    batch = pa.record_batch(
        {
            "extra": pa.array([1, 2, 3]),
            "vec": pa.array([[1.0, 2.0], [3.0, 4.0], None], pa.list_(pa.float32(), 2)),
            "tag": pa.array(["a", "b", "a"]).dictionary_encode(),
            "n": pa.array([1, None, 3], pa.uint32()),
        }
    )
    target = spark_arrow_schema(
        T.StructType(
            [
                T.StructField("n", T.LongType()),
                T.StructField("tag", T.StringType()),
                T.StructField("vec", T.ArrayType(T.FloatType())),
            ]
        )
    )
    out = conform_batch(batch, target)
    assert out.schema.equals(target)
    assert out.to_pydict() == {
        "n": [1, None, 3],
        "tag": ["a", "b", "a"],
        "vec": [[1.0, 2.0], [3.0, 4.0], None],
    }


def test_conform_batch_missing_column() -> None:
    # a missing nullable column is filled with nulls; a non-nullable one (or fill_missing="error")
    # is refused naming it
    filled = conform_batch(
        pa.record_batch({"a": [1]}), pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.int8())])
    )
    assert filled.to_pydict() == {"a": [1], "b": [None]}
    with pytest.raises(SchemaError, match="lacks column.*'missing'"):
        conform_batch(
            pa.record_batch({"a": [1]}),
            pa.schema([pa.field("a", pa.int64()), pa.field("missing", pa.int64(), False)]),
        )
    with pytest.raises(SchemaError, match="lacks column.*'b'"):
        conform_batch(
            pa.record_batch({"a": [1]}),
            pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.int8())]),
            fill_missing="error",
        )


# --- filter translation (no Spark session) ------------------------------------------------------


@pytest.mark.parametrize(
    ("flt", "sql"),
    [
        (sds.EqualTo(("id",), 3), "`id` = 3"),
        (sds.GreaterThan(("id",), 2.5), "`id` > 2.5"),
        (sds.GreaterThanOrEqual(("id",), -1), "`id` >= -1"),
        (sds.LessThan(("s",), "its"), "`s` < 'its'"),
        (sds.LessThanOrEqual(("b",), True), "`b` <= TRUE"),
        (sds.EqualNullSafe(("id",), None), "`id` IS NULL"),
        (sds.EqualNullSafe(("id",), 4), "(`id` IS NOT NULL AND `id` = 4)"),
        (sds.In(("id",), (1, 2, 3)), "`id` IN (1, 2, 3)"),
        (sds.IsNull(("a b",)), "`a b` IS NULL"),
        (sds.IsNotNull(("select",)), "`select` IS NOT NULL"),
        (sds.StringStartsWith(("s",), "ab"), "`s` LIKE 'ab%'"),
        (sds.StringEndsWith(("s",), "x y"), "`s` LIKE '%x y'"),
        (sds.StringContains(("s",), "mid"), "`s` LIKE '%mid%'"),
        (sds.Not(sds.EqualTo(("id",), 1)), "NOT (`id` = 1)"),
    ],
)
def test_filter_to_sql(flt: sds.Filter, sql: str) -> None:
    assert filter_to_sql(flt) == sql


@pytest.mark.parametrize(
    "flt",
    [
        sds.EqualTo(("s", "nested"), 1),
        sds.EqualTo(("d",), datetime.date(2020, 1, 1)),
        sds.EqualTo(("x",), float("nan")),
        sds.In(("id",), ()),
        sds.In(("id",), (1, [2])),
        sds.Not(sds.EqualTo(("a", "b"), 1)),
        sds.StringStartsWith(("s",), "50%"),
        sds.StringContains(("s",), "a_b"),
        sds.StringEndsWith(("s",), "back\\slash"),
        sds.EqualTo(("s",), "it's"),
        sds.IsNull(("we`ird",)),
    ],
)
def test_filter_to_sql_leaves_the_rest_to_spark(flt: sds.Filter) -> None:
    assert filter_to_sql(flt) is None


_SCALARS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.booleans(),
)


@given(name=st.text(min_size=1, max_size=12), value=_SCALARS)
def test_pushed_predicates_parse_and_keep_their_literal(name: str, value: object) -> None:
    """Whatever is pushed is well-formed SQL naming the column and carrying the value unchanged."""
    sql = filter_to_sql(sds.EqualTo((name,), value))
    if sql is None:
        return
    parsed = sqlglot.parse_one(sql, read="mysql")
    assert isinstance(parsed, sqlglot.exp.EQ)
    assert parsed.this.name == name
    literal = parsed.expression
    if isinstance(value, bool):
        assert isinstance(literal, sqlglot.exp.Boolean) and literal.this is value
    elif isinstance(value, str):
        assert literal.is_string and literal.this == value
    else:
        number = -float(literal.this.this) if isinstance(literal, sqlglot.exp.Neg) else float(literal.this)
        assert number == float(value)


# --- Spark round trips --------------------------------------------------------------------------


def _sorted_table(df: DataFrame) -> pa.Table:
    return df.orderBy("id").toArrow()


def _sorted_rows(df: DataFrame) -> dict[str, list]:
    """Values by column, ordered by id (nullability flags and chunking do not matter)."""
    return _sorted_table(df).to_pydict()


def _lance_table(uri: str, version: int | None = None) -> pa.Table:
    return lance_ops.dataset(uri, version=version).to_table().sort_by("id")


@pytest.mark.spark
def test_append_append_overwrite_round_trip(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "rt.lance")
    first = demo_frame(spark, 1025, partitions=3)
    second = demo_frame(spark, 1, start=1025, partitions=1)

    write_lance(first, uri)  # creates
    ds = lance_ops.dataset(uri)
    assert (ds.version, ds.count_rows(), len(ds.get_fragments())) == (1, 1025, 3)

    write_lance(second, uri)  # appends: one more version, one more fragment
    ds = lance_ops.dataset(uri)
    assert (ds.version, ds.count_rows(), len(ds.get_fragments())) == (2, 1026, 4)

    read = spark.read.format("lance").load(uri)
    assert read.count() == 1026
    expected = pa.concat_tables([_sorted_table(first), _sorted_table(second)]).to_pydict()
    assert _sorted_rows(read) == expected
    assert _lance_table(uri).to_pydict() == expected

    third = demo_frame(spark, 10, start=5000, partitions=2)
    write_lance(third, uri, mode="overwrite")
    ds = lance_ops.dataset(uri)
    assert (ds.version, ds.count_rows()) == (3, 10)
    assert _sorted_rows(spark.read.format("lance").load(uri)) == _sorted_rows(third)
    assert spark.read.format("lance").option("version", 2).load(uri).count() == 1026
    assert spark.read.format("lance").option("version", 1).load(uri).count() == 1025


@pytest.mark.spark
def test_column_pruning(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "prune.lance")
    source = demo_frame(spark, 100, partitions=2)
    write_lance(source, uri)

    by_option = spark.read.format("lance").option("columns", "note, id").load(uri)
    assert by_option.columns == ["note", "id"]
    assert _sorted_rows(by_option) == _sorted_rows(source.select("note", "id"))

    by_schema = spark.read.format("lance").schema("id BIGINT, score DOUBLE").load(uri)
    assert _sorted_rows(by_schema) == _sorted_rows(source.select("id", "score"))

    by_select = spark.read.format("lance").load(uri).select("id", "category")
    assert _sorted_rows(by_select) == _sorted_rows(source.select("id", "category"))

    with pytest.raises(Exception, match="unknown column"):
        spark.read.format("lance").option("columns", "id,nope").load(uri)


FILTER_CONDITIONS = [
    "id >= 100 AND category = 'beta' AND note IS NOT NULL",
    "note LIKE 'note-1%' OR id < 3",
    "note IS NULL",
    "category IN ('alpha', 'delta') AND NOT (id = 4)",
    "id % 5 = 0",
]


@pytest.mark.spark
def test_filters(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "filter.lance")
    source = demo_frame(spark, 300, partitions=2)
    write_lance(source, uri)
    for condition in FILTER_CONDITIONS:
        read = spark.read.format("lance").load(uri)
        got = _sorted_rows(read.filter(condition))
        assert got == _sorted_rows(source.filter(condition)), condition
        assert got["id"], condition


@pytest.mark.spark
def test_filter_pushdown_is_refused_where_spark_reuses_pushed_readers(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``filter_pushdown`` would let a second query of one DataFrame run the first one's pushed
    reader (Spark 4.3, ``PythonDataSourceV2.readInfo``): it fails with a clear error instead, at
    ``load()`` or, with a user schema, at the first query; ``filter`` is the safe path."""
    uri = str(tmp_path / "pushdown.lance")
    source = demo_frame(spark, 300, partitions=2)
    write_lance(source, uri)
    reader = spark.read.format("lance").option("filter_pushdown", "true")
    with pytest.raises(Exception, match=r"filter_pushdown' is refused on Spark .*option\('filter'"):
        reader.load(uri)
    typed = reader.schema("id BIGINT, category STRING").load(uri)
    with pytest.raises(Exception, match=r"filter_pushdown' is refused"):
        typed.filter("id < 10").count()
    # The case that went wrong with pushdown: one DataFrame, a filtered query, then an unfiltered one.
    safe = spark.read.format("lance").option("filter", "id >= 100").load(uri)
    assert safe.filter("id < 150").count() == 50
    assert safe.count() == 200
    assert spark.read.format("lance").option("filter_pushdown", "false").load(uri).count() == 300


@pytest.mark.spark
def test_spark_still_keeps_pushed_readers_on_the_source(spark: SparkSession) -> None:
    """The premise of the refusal, checked on the installed jar: the provider holds the read info.
    When this fails, Spark scopes it per scan: add the version to PUSHDOWN_SAFE_SPARK_VERSIONS after
    checking reuse with pushdown on (test above)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    cls = jvm.java.lang.Class.forName(
        "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2"
    )
    assert "readInfo" in {f.getName() for f in cls.getDeclaredFields()}
    assert spark.version not in datasource.PUSHDOWN_SAFE_SPARK_VERSIONS


def test_filtering_reader_where_pushdown_is_safe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a Spark release listed as safe the option gives the filtering reader, whose pushed
    predicate Lance evaluates (planned and read here in-process, as a Spark worker would)."""
    uri = str(tmp_path / "pushed.lance")
    table = pa.table({"id": range(100), "category": ["alpha", "beta"] * 50})
    lance_ops.write_dataset(table, uri, max_rows_per_file=30)
    with pytest.raises(UnsupportedFeatureError, match="filter_pushdown"):
        datasource.filter_pushdown({"filter_pushdown": "true"}, "4.3.0")
    monkeypatch.setattr(datasource, "PUSHDOWN_SAFE_SPARK_VERSIONS", frozenset({"9.9.9"}))
    assert datasource.filter_pushdown({"filter_pushdown": "true"}, "9.9.9")
    assert not datasource.filter_pushdown({}, "4.3.0")
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("category", T.StringType())])
    reader = datasource.LanceFilteringReader(uri, 1, schema, {}, 16)
    kept = list(reader.pushFilters([sds.GreaterThanOrEqual(("id",), 40), sds.EqualTo(("category",), "beta")]))
    assert kept == []
    got = pa.Table.from_batches([b for p in reader.partitions() for b in reader.read(p)]).to_pydict()
    assert got["id"] == [i for i in range(40, 100) if i % 2 == 1]


@pytest.mark.spark
def test_default_reader_is_safe_to_reuse(spark: SparkSession, tmp_path: Path) -> None:
    """One DataFrame, several differently filtered queries (the case pushdown cannot handle)."""
    uri = str(tmp_path / "reuse.lance")
    source = demo_frame(spark, 300, partitions=2)
    write_lance(source, uri)
    read = spark.read.format("lance").load(uri)
    for condition in FILTER_CONDITIONS:
        assert read.filter(condition).count() == source.filter(condition).count(), condition
    assert read.count() == 300


@pytest.mark.spark
def test_read_is_a_snapshot(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "snap.lance")
    write_lance(demo_frame(spark, 5, partitions=1), uri)
    snapshot = spark.read.format("lance").load(uri)
    assert snapshot.count() == 5
    write_lance(demo_frame(spark, 7, start=5, partitions=1), uri)
    assert snapshot.count() == 5
    assert spark.read.format("lance").load(uri).count() == 12


@pytest.mark.spark
def test_empty_write_creates_readable_dataset(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "empty.lance")
    write_lance(demo_frame(spark, 0, partitions=2), uri)
    ds = lance_ops.dataset(uri)
    assert (ds.version, ds.count_rows(), len(ds.get_fragments())) == (1, 0, 0)
    read = spark.read.format("lance").load(uri)
    assert read.columns == ["id", "category", "score", "note", "ts", "vector"]
    assert read.count() == 0


@pytest.mark.spark
def test_transaction_properties_and_commit_message(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "props.lance")
    options = {"transaction_properties": json.dumps({"run": "r-1", "n": 3}), "commit_message": "hello"}
    write_lance(demo_frame(spark, 3, partitions=1), uri, options=options)
    ds = lance_ops.dataset(uri)
    properties = ds.read_transaction(ds.version).properties
    assert properties["run"] == "r-1"
    assert properties["n"] == "3"
    assert properties["__lance_commit_message"] == "hello"


@pytest.mark.spark
def test_append_keeps_dataset_types(spark: SparkSession, tmp_path: Path) -> None:
    """Spark has no fixed-size lists or unsigned ints: appends are cast back to the dataset's schema."""
    uri = str(tmp_path / "typed.lance")
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("n", pa.uint32()),
            pa.field("vec", pa.list_(pa.float32(), 2)),
        ]
    )
    table = pa.table({"id": [0, 1], "n": [7, 8], "vec": [[0.0, 1.0], [2.0, 3.0]]}, schema=schema)
    lance_ops.write_dataset(table, uri)
    read = spark.read.format("lance").load(uri)
    assert read.schema["vec"].dataType == T.ArrayType(T.FloatType(), True)
    write_lance(read.selectExpr("id + 2 AS id", "n", "vec"), uri)
    ds = lance_ops.dataset(uri)
    assert ds.schema.equals(schema)
    assert ds.to_table().sort_by("id").to_pydict() == {
        "id": [0, 1, 2, 3],
        "n": [7, 8, 7, 8],
        "vec": [[0.0, 1.0], [2.0, 3.0], [0.0, 1.0], [2.0, 3.0]],
    }


@pytest.mark.spark
def test_failed_task_commits_nothing(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "abort.lance")
    # The failing frame matches the dataset's schema, so the only task error is the raised one.
    write_lance(spark.range(0, 4, numPartitions=1), uri)
    failing = spark.range(0, 10, numPartitions=2).select(
        F.when(F.col("id") == 7, F.raise_error(F.lit("boom"))).otherwise(F.col("id")).alias("id")
    )
    with pytest.raises(Exception, match="boom"):
        write_lance(failing, uri)
    ds = lance_ops.dataset(uri)
    assert (ds.version, ds.count_rows()) == (1, 4)


@pytest.mark.spark
def test_overwrite_replaces_schema(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "reshape.lance")
    write_lance(demo_frame(spark, 20, partitions=2), uri)
    write_lance(spark.range(3).selectExpr("CAST(id AS STRING) AS key", "id * 2 AS doubled"), uri, "overwrite")
    ds = lance_ops.dataset(uri)
    assert ds.schema.names == ["key", "doubled"]
    got = _sorted_rows(spark.read.format("lance").load(uri).withColumnRenamed("doubled", "id"))
    assert got == {"key": ["0", "1", "2"], "id": [0, 2, 4]}


@pytest.mark.spark
def test_append_keeps_storage_version(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "v21.lance")
    lance_ops.write_dataset(pa.table({"id": pa.array([0, 1], pa.int64())}), uri, data_storage_version="2.1")
    write_lance(spark.range(2, 5), uri)
    ds = lance_ops.dataset(uri)
    versions = {
        (f.file_major_version, f.file_minor_version) for fr in ds.get_fragments() for f in fr.data_files()
    }
    assert versions == {(2, 1)}
    assert sorted(ds.to_table().column("id").to_pylist()) == [0, 1, 2, 3, 4]


def test_append_tasks_use_the_drivers_fields_not_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Spark session: plan the writer as the driver does, ship it, run a task, commit."""
    uri = str(tmp_path / "planned.lance")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("n", pa.uint32())])
    lance_ops.write_dataset(pa.table({"id": [0], "n": [1]}, schema=schema), uri, data_storage_version="2.1")
    spark_input = T.StructType([T.StructField("id", T.LongType()), T.StructField("n", T.LongType())])
    driver = LanceWriter(uri, spark_input, False, {"data_storage_version": "2.2"})
    assert [f.id for f in driver.append_fields() or []] == [0, 1]
    task = pickle.loads(pickle.dumps(driver))

    def no_manifest(*args: object) -> None:
        raise AssertionError("a write task read the manifest")

    monkeypatch.setattr(lance_ops.fragment.writer, "_dataset_schema", no_manifest)
    batch = pa.record_batch({"n": pa.array([5, 6], pa.int64()), "id": pa.array([1, 2], pa.int64())})
    message = task.write(iter([batch]))
    assert message.num_rows == 2
    (fragment,) = message.fragments
    (data_file,) = fragment.files
    assert data_file.fields == (0, 1)
    assert (data_file.file_major_version, data_file.file_minor_version) == (2, 1)  # the dataset's
    driver.commit([message])
    ds = lance_ops.dataset(uri)
    assert ds.schema.equals(schema)
    assert ds.to_table().sort_by("id").to_pydict() == {"id": [0, 1, 2], "n": [1, 5, 6]}
    overwrite = LanceWriter(uri, spark_input, True, {})
    assert overwrite.append_fields() is None


# --- interop with pylance (test-only dependency) ------------------------------------------------


@pytest.mark.spark
@pytest.mark.interop
def test_pylance_reads_spark_written_dataset(spark: SparkSession, tmp_path: Path) -> None:
    import lance

    uri = str(tmp_path / "to_pylance.lance")
    source = demo_frame(spark, 1024, partitions=2)
    write_lance(source, uri)
    options = {"transaction_properties": json.dumps({"who": "spark"})}
    write_lance(demo_frame(spark, 3, start=1024, partitions=1), uri, options=options)
    ds = lance.dataset(uri)
    assert ds.read_transaction(2).transaction_properties["who"] == "spark"
    assert (ds.version, ds.count_rows(), len(ds.get_fragments())) == (2, 1027, 3)
    got = ds.to_table().sort_by("id").slice(0, 1024)
    expected = _sorted_table(source)
    for name in ["id", "category", "score", "note", "ts", "vector"]:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name


@pytest.mark.spark
@pytest.mark.interop
def test_spark_reads_pylance_written_dataset(spark: SparkSession, tmp_path: Path) -> None:
    import lance

    uri = str(tmp_path / "from_pylance.lance")
    table = pa.table(
        {
            "id": pa.array(range(1025), pa.int64()),
            "small": pa.array([i % 200 for i in range(1025)], pa.uint8()),
            "text": pa.array([None if i % 3 == 0 else f"t{i}" for i in range(1025)], pa.string()),
            "vec": pa.array([[float(i), float(-i)] for i in range(1025)], pa.list_(pa.float32(), 2)),
        }
    )
    lance.write_dataset(table, uri, max_rows_per_file=400)
    read = spark.read.format("lance").load(uri)
    assert read.rdd.getNumPartitions() == 3
    got = _sorted_table(read)
    assert got.column("small").to_pylist() == table.column("small").to_pylist()
    assert got.column("text").to_pylist() == table.column("text").to_pylist()
    assert got.column("vec").to_pylist() == table.column("vec").to_pylist()
