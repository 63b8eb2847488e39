"""Dictionary encoding of legacy (0.1) pages.

The page holds the keys, plain-encoded in the dictionary's index type (see :mod:`.plain`). The
values are stored once per file, where the schema's ``Field.dictionary`` says: ``offset`` is the
position of a plain page (fixed-width values: integers, floats, ...) or of a var-binary positions
array (string / binary values, empty ones read as null), ``length`` the number of values. Keys
of null rows are not marked: they read as whatever key was written under them.

Example: ``dictionary<int8, string>`` ``["b", "a", "b"]`` is keys ``01 00 01`` in each batch's
page, and values ``"a", "b"`` stored once after the data.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lance_ops.encoding.api import Fetch
from lance_ops.encoding.legacy.v0_1.binary import decode_binary, is_var_binary
from lance_ops.encoding.legacy.v0_1.plain import Span, decode_plain
from lance_ops.errors import UnsupportedFeatureError


def decode_dictionary_values(value_type: pa.DataType, offset: int, length: int, fetch: Fetch) -> pa.Array:
    """The dictionary of a field, stored at ``offset`` with ``length`` values."""
    if is_var_binary(value_type):
        (values,) = decode_binary(value_type, True, [(offset, 0, length)], fetch)
        return values
    try:
        (values,) = decode_plain(value_type, [(offset, 0, length)], fetch)
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"legacy dictionaries of {value_type} are not supported") from exc
    return values


def decode_dictionary(
    data_type: pa.DictionaryType, values: pa.Array, spans: Sequence[Span], fetch: Fetch
) -> list[pa.Array]:
    """Rows ``start..stop`` of the dictionary page at ``position`` (plain keys), for each span."""
    return [
        pa.DictionaryArray.from_arrays(keys, values, ordered=data_type.ordered)
        for keys in decode_plain(data_type.index_type, spans, fetch)
    ]
