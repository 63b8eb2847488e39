"""Arrow <-> Spark type mapping for the Lance data source.

Lance stores Arrow schemas; Spark's Python Data Source API speaks ``StructType`` on the planning side
and Arrow record batches on the data side. Three conversions are needed:

* :func:`spark_schema` maps a dataset's Arrow schema to the ``StructType`` Spark plans with
  (``DataSource.schema``).
* :func:`spark_arrow_schema` is the exact Arrow schema Spark's read worker expects from
  ``DataSourceReader.read`` (it compares schemas with ``pa.Schema.equals``, so list item names,
  timestamp units and string widths must match what pyspark derives from the ``StructType``).
* :func:`conform_batch` casts a batch read from Lance (or received from Spark for writing) to a target
  Arrow schema, selecting columns by name (the library's conform step: missing columns filled or
  refused, nulls in non-nullable fields refused).

The mapping keeps values lossless: unsigned integers widen to the next signed type (``uint64`` becomes
``DECIMAL(20, 0)``), ``float16`` widens to ``FLOAT``, dictionaries decode to their value type and
fixed-size lists (vectors) become ``ARRAY``. Types Spark cannot represent (time of day, unions, ...)
raise :class:`~lance_ops.errors.UnsupportedFeatureError` naming the column. Going back (Spark data
appended to an existing dataset) the batch is cast to the dataset's own Arrow schema, so a vector column
stays ``fixed_size_list`` and an ``uint32`` column stays ``uint32``.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lance_ops.errors import UnsupportedFeatureError
from lance_ops.ops.engine import Conform

# Spark's widest decimal; wider Arrow decimals cannot be planned.
MAX_SPARK_DECIMAL_PRECISION = 38

_SIMPLE: dict[pa.DataType, DataType] = {
    pa.bool_(): BooleanType(),
    pa.int8(): ByteType(),
    pa.int16(): ShortType(),
    pa.int32(): IntegerType(),
    pa.int64(): LongType(),
    pa.uint8(): ShortType(),
    pa.uint16(): IntegerType(),
    pa.uint32(): LongType(),
    pa.uint64(): DecimalType(20, 0),
    pa.float16(): FloatType(),
    pa.float32(): FloatType(),
    pa.float64(): DoubleType(),
    pa.string(): StringType(),
    pa.large_string(): StringType(),
    pa.string_view(): StringType(),
    pa.binary(): BinaryType(),
    pa.large_binary(): BinaryType(),
    pa.binary_view(): BinaryType(),
    pa.date32(): DateType(),
    pa.date64(): DateType(),
    pa.null(): NullType(),
}


def spark_type(arrow_type: pa.DataType, name: str = "<value>") -> DataType:
    """The Spark type holding every value of ``arrow_type`` (``name`` is used in error messages)."""
    simple = _SIMPLE.get(arrow_type)
    if simple is not None:
        return simple
    if pa.types.is_fixed_size_binary(arrow_type):
        return BinaryType()
    if pa.types.is_timestamp(arrow_type):
        return TimestampType() if arrow_type.tz is not None else TimestampNTZType()
    if pa.types.is_duration(arrow_type):
        return DayTimeIntervalType()
    if pa.types.is_decimal(arrow_type):
        if arrow_type.precision > MAX_SPARK_DECIMAL_PRECISION:
            raise UnsupportedFeatureError(
                f"column {name!r}: decimal precision {arrow_type.precision} exceeds Spark's 38"
            )
        return DecimalType(arrow_type.precision, arrow_type.scale)
    if pa.types.is_dictionary(arrow_type):
        return spark_type(arrow_type.value_type, name)
    if (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
        or pa.types.is_list_view(arrow_type)
        or pa.types.is_large_list_view(arrow_type)
    ):
        item = arrow_type.value_field
        return ArrayType(spark_type(item.type, f"{name}.{item.name}"), containsNull=item.nullable)
    if pa.types.is_map(arrow_type):
        return MapType(
            spark_type(arrow_type.key_type, f"{name}.key"),
            spark_type(arrow_type.item_type, f"{name}.value"),
            valueContainsNull=arrow_type.item_field.nullable,
        )
    if pa.types.is_struct(arrow_type):
        return StructType([spark_field(arrow_type.field(i), name) for i in range(arrow_type.num_fields)])
    raise UnsupportedFeatureError(f"column {name!r}: Arrow type {arrow_type} has no Spark equivalent")


def spark_field(field: pa.Field, parent: str | None = None) -> StructField:
    """One Arrow field as a Spark ``StructField`` (nullability kept)."""
    path = field.name if parent is None else f"{parent}.{field.name}"
    return StructField(field.name, spark_type(field.type, path), nullable=field.nullable)


def spark_schema(schema: pa.Schema) -> StructType:
    """A dataset's Arrow schema as the ``StructType`` Spark plans with."""
    return StructType([spark_field(field) for field in schema])


def spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema pyspark derives from ``schema``: what read() must yield, and what write() gets."""
    return to_arrow_schema(schema, timezone="UTC")


def conform_batch(
    batch: pa.RecordBatch, target: pa.Schema, fill_missing: str | None = None
) -> pa.RecordBatch:
    """``batch`` with exactly ``target``'s columns (selected by name, in order; others dropped), cast
    to its types.

    The library's conform step (:class:`lance_ops.fragment.conform.Conform`): columns ``batch``
    lacks are filled as ``fill_missing`` says (nullable ones with nulls by default); values that do
    not convert and nulls in non-nullable fields raise :class:`~lance_ops.errors.WriteSchemaError`
    naming the column. (The Spark writer conforms with :class:`Conform` itself, which refuses
    extra columns.)
    """
    wanted = [name for name in batch.schema.names if target.get_field_index(name) >= 0]
    if len(wanted) != batch.num_columns:
        batch = batch.select(wanted)
    return Conform(target, fill_missing).batch(batch)
