"""Empty struct columns (``struct<>``) in 2.1 / 2.2 files: a leaf column without values.

pylance 14 gives an empty struct a column of its own, like any leaf: each page is a
``constant_layout`` with the single layer ``REPDEF_NULLABLE_ITEM``, no buffers and no inline
value, whatever the field's nesting or nullability; its length is the page's rows. Read back,
every row is a valid ``{}``. pylance refuses to write an empty struct that has rep/def
information -- a null row (of the struct or of a struct above it) or a list above it -- so such
arrays are refused here too, and a reader gives every row of the column as valid.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.api import EncodedPage
from lance_ops.encoding.structural.repdef import (
    ALL_VALID_ITEM,
    NULLABLE_ITEM,
    DecodedLeaf,
    Levels,
    ShreddedLeaf,
)
from lance_ops.errors import UnsupportedFeatureError


def is_empty_struct(data_type: pa.DataType) -> bool:
    return pa.types.is_struct(data_type) and data_type.num_fields == 0


def empty_structs(length: int) -> pa.Array:
    """``length`` valid rows of ``struct<>``."""
    return pa.StructArray.from_buffers(pa.struct([]), length, [None], children=[])


def encode_page(leaf: ShreddedLeaf, name: str) -> EncodedPage:
    """The page of an empty struct leaf: its rows, nothing stored."""
    levels = leaf.levels
    if levels.rep is not None or (levels.defs is not None and bool(np.any(levels.defs))):
        raise UnsupportedFeatureError(
            f"the empty struct field {name!r} has nulls or is in a list: empty structs with "
            "rep/def information cannot be stored (as in pylance 14)"
        )
    layout = pb.PageLayout(constant_layout=pb.ConstantLayout(layers=[NULLABLE_ITEM]))
    return EncodedPage((), layout, leaf.num_rows)


def decoded(num_rows: int, depth: int) -> DecodedLeaf:
    """``num_rows`` valid rows of an empty struct ``depth`` structs deep (0: top level)."""
    levels = Levels((ALL_VALID_ITEM,) * (depth + 1), None, None, num_rows)
    return DecodedLeaf(levels, empty_structs(num_rows))
