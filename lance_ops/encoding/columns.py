"""The columns of a 2.1 / 2.2 field: one per leaf, in pre-order (file-container.md §2.2).

Shared by the field encoder and decoder (and the file layer's :func:`num_columns`), so a reader
needs nothing of the writing side to lay a file's columns over its schema::

    struct<a: int32, b: list<string>>  ->  leaves a, b.item  ->  2 columns
"""

from __future__ import annotations

import pyarrow as pa

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.options import is_blob_field
from lance_ops.encoding.structural.repdef import child_field, is_leaf_field
from lance_ops.errors import UnsupportedFeatureError


def leaf_fields(field: pa.Field) -> list[pa.Field]:
    """The leaf fields under ``field`` in pre-order (one column each in 2.1 / 2.2)."""
    dtype = field.type
    if is_leaf_field(field):
        return [field]
    if pa.types.is_struct(dtype):
        return [leaf for i in range(dtype.num_fields) for leaf in leaf_fields(dtype.field(i))]
    if pa.types.is_map(dtype):
        return leaf_fields(dtype.key_field) + leaf_fields(dtype.item_field)
    return leaf_fields(dtype.value_field)


def num_columns(field: pa.Field, version: FileVersion) -> int:
    """Columns a top-level field occupies in 2.1 / 2.2: one per leaf (file-container.md §2.2),
    except that a (not packed) struct marked ``lance-encoding:blob`` takes one column.

    pylance 14 treats such a struct, wherever it sits, as one blob column: it writes a 2.2 file
    without rows holding one (empty) column for it and refuses rows for it ("Blob v2 encoder
    expected prepared array layout"), so only files without rows carry it.
    """
    check_structural(version)
    return column_count(field)


def column_count(field: pa.Field) -> int:
    """:func:`num_columns` of a field at any depth."""
    if is_leaf_field(field) or (pa.types.is_struct(field.type) and is_blob_field(field.metadata, field.type)):
        return 1
    return sum(column_count(child) for child in field_children(field))


def field_children(field: pa.Field) -> list[pa.Field]:
    """The child fields of a struct, or the one item field of a list-like layer (a map: its entries)."""
    dtype = field.type
    return (
        [dtype.field(i) for i in range(dtype.num_fields)]
        if pa.types.is_struct(dtype)
        else [child_field(field)]
    )


def check_structural(version: FileVersion) -> None:
    """Refuse versions the structural (2.1 / 2.2) codec does not handle."""
    if version not in (FileVersion.V2_1, FileVersion.V2_2):
        raise UnsupportedFeatureError(f"the structural codec handles Lance 2.1 / 2.2, not {version}")
