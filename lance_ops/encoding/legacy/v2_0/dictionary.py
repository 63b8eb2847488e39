"""Dictionary: indices into a page-local dictionary.

``Dictionary{indices: Nullable{no_nulls{Flat}}, items: <encoding of the entries>,
num_dictionary_items: D}``. Two producers share the message:

* **automatic, Utf8 only**: pages of at least :data:`DICT_THRESHOLD` strings with fewer than
  that many distinct values. Indices are u8, 0 = null, ``k`` = item ``k - 1``; items are the
  distinct values in first-appearance order as Binary (an all-null page has one null item).
  Example 1000 rows cycling ``a, b, c, null``: indices ``01 02 03 00 …``, items ``abc``, D = 3.
* **Arrow dictionary columns**: the Arrow keys as ``Flat{8·width}``; a null row points at a
  null dictionary entry (the first one, or one appended), so indices have no validity; items
  use the value type's usual encoding. Example ``dict<int32, string>`` ``['a','b',null,'a','b']``:
  indices ``0 1 2 0 1``, items ``["a", "b", null]``, D = 3.

The requested type tells the two apart: a dictionary type gets a ``DictionaryArray`` back, a
string type the plain values.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops._proto import encodings_v2_0_pb2 as pb
from lance_ops.encoding.legacy.v2_0.binary import encode_binary
from lance_ops.encoding.legacy.v2_0.flat import encode_flat
from lance_ops.encoding.legacy.v2_0.nullable import ValuesEncoder, encode_nullable
from lance_ops.encoding.legacy.v2_0.page import BufferSink, PageBuffers, corrupt, decode, register, validity
from lance_ops.errors import UnsupportedFeatureError

DICT_THRESHOLD = 100  # pylance's LANCE_DICT_ENCODING_THRESHOLD default


def _index_type(encoding: pb.ArrayEncoding) -> pa.DataType:
    """The unsigned type of the Flat under an indices encoding (through no_nulls)."""
    while encoding.WhichOneof("array_encoding") == "nullable" and encoding.nullable.HasField("no_nulls"):
        encoding = encoding.nullable.no_nulls.values
    if encoding.WhichOneof("array_encoding") != "flat":
        raise corrupt("dictionary indices are not a plain Flat")
    bits = int(encoding.flat.bits_per_value)
    if bits not in (8, 16, 32, 64):
        raise corrupt(f"dictionary indices of {bits} bits")
    return pa.from_numpy_dtype(np.dtype(f"uint{bits}"))


@register("dictionary")
def decode_dictionary(
    dictionary: pb.Dictionary, page: PageBuffers, num_values: int, dtype: pa.DataType
) -> pa.Array:
    items_count = int(dictionary.num_dictionary_items)
    raw = decode(dictionary.indices, page, num_values, _index_type(dictionary.indices))
    indices = raw.to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_dictionary(dtype):
        if len(indices) and (indices.max() >= items_count):
            raise corrupt(f"dictionary index beyond the {items_count} items")
        items = decode(dictionary.items, page, items_count, dtype.value_type)
        # Like pylance, a key pointing at a null entry reads back as a null key.
        mask = ~validity(items)[indices] if items.null_count else None
        keys = pa.array(indices, mask=mask).cast(dtype.index_type)
        return pa.DictionaryArray.from_arrays(keys, items)
    if len(indices) and indices.max() > items_count:
        raise corrupt(f"dictionary index beyond the {items_count} items")
    items = decode(dictionary.items, page, items_count, dtype)
    return items.take(pa.array(indices - 1, mask=indices == 0))


def auto_dictionary_eligible(array: pa.Array) -> pa.DictionaryArray | None:
    """The Arrow dictionary of a Utf8 page that pylance would dictionary-encode, else None."""
    if not pa.types.is_string(array.type) or len(array) < DICT_THRESHOLD:
        return None
    encoded = pc.dictionary_encode(array)
    return encoded if len(encoded.dictionary) < DICT_THRESHOLD else None


def _indices_encoding(indices: np.ndarray, sink: BufferSink) -> pb.ArrayEncoding:
    return encode_nullable(pa.array(indices), sink, encode_flat)


def encode_auto_dictionary(encoded: pa.DictionaryArray, sink: BufferSink) -> pb.ArrayEncoding:
    """The automatic Utf8 dictionary of a page (from :func:`auto_dictionary_eligible`)."""
    keys = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    items = encoded.dictionary if len(encoded.dictionary) else pa.nulls(1, encoded.type.value_type)
    out = pb.ArrayEncoding()
    out.dictionary.indices.CopyFrom(_indices_encoding((keys + 1).astype(np.uint8), sink))
    out.dictionary.items.CopyFrom(encode_binary(items, sink))
    out.dictionary.num_dictionary_items = len(items)
    return out


def encode_arrow_dictionary(
    array: pa.DictionaryArray, sink: BufferSink, items: ValuesEncoder
) -> pb.ArrayEncoding:
    """An Arrow dictionary page; null rows are pointed at a null entry of the dictionary."""
    dictionary = array.dictionary
    keys = array.indices
    if keys.null_count:
        null_entries = np.flatnonzero(~validity(dictionary))
        if len(null_entries):
            target = int(null_entries[0])
        else:
            target = len(dictionary)
            dictionary = pa.concat_arrays([dictionary, pa.nulls(1, dictionary.type)])
        if target > np.iinfo(keys.type.to_pandas_dtype()).max:
            # pylance refuses this too: it would need wider keys than the declared type.
            raise UnsupportedFeatureError(f"a null dictionary entry does not fit {keys.type} indices")
        keys = keys.fill_null(pa.scalar(target).cast(keys.type))
    out = pb.ArrayEncoding()
    out.dictionary.indices.CopyFrom(_indices_encoding(keys.to_numpy(zero_copy_only=False), sink))
    out.dictionary.items.CopyFrom(items(dictionary, sink))
    out.dictionary.num_dictionary_items = len(dictionary)
    return out
