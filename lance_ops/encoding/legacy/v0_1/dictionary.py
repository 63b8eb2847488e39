"""Dictionary encoding of legacy (0.1) pages.

The page holds the keys, plain-encoded in the dictionary's index type (see :mod:`.plain`). The
values are stored once per file, where the schema's ``Field.dictionary`` says: ``offset`` is the
position of a plain page (integer values) or of a var-binary positions array (string / binary
values, empty ones read as null), ``length`` the number of values. Keys of null rows are not
marked: they read as whatever key was written under them.

Example: ``dictionary<int8, string>`` ``["b", "a", "b"]`` is keys ``01 00 01`` in each batch's
page, and values ``"a", "b"`` stored once after the data.
"""

from __future__ import annotations

import pyarrow as pa

from lance_ops.encoding.api import Fetch
from lance_ops.encoding.legacy.v0_1.binary import decode_binary
from lance_ops.encoding.legacy.v0_1.plain import decode_plain
from lance_ops.errors import UnsupportedFeatureError


def decode_dictionary_values(value_type: pa.DataType, offset: int, length: int, fetch: Fetch) -> pa.Array:
    """The dictionary of a field, stored at ``offset`` with ``length`` values."""
    if pa.types.is_integer(value_type):
        return decode_plain(value_type, offset, 0, length, fetch)
    if (
        pa.types.is_string(value_type)
        or pa.types.is_binary(value_type)
        or pa.types.is_large_string(value_type)
        or pa.types.is_large_binary(value_type)
    ):
        return decode_binary(value_type, True, offset, 0, length, fetch)
    raise UnsupportedFeatureError(f"legacy dictionaries of {value_type} are not supported")


def decode_dictionary(
    data_type: pa.DictionaryType, values: pa.Array, position: int, start: int, stop: int, fetch: Fetch
) -> pa.Array:
    """Rows ``start..stop`` of a dictionary page: plain keys at ``position`` over ``values``."""
    keys = decode_plain(data_type.index_type, position, start, stop, fetch)
    return pa.DictionaryArray.from_arrays(keys, values, ordered=data_type.ordered)
