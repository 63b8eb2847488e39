"""Encoding one batch of a field into legacy (0.1) pages: the inverse of :mod:`.decoder`.

Each field of the batch (nested ones included) becomes at most one page, written through a
:data:`Write` in pre-order (a list's offsets before its item's values, a struct's children in
order), and its page-table entry ``(position, length)`` is recorded by field id:

=================  ======================================================================
layout             what is written (pylance 14's bytes for pyarrow-built arrays)
=================  ======================================================================
``plain``          the values buffer as it is, ``n * width`` bytes (booleans: ``ceil(n / 8)``
                   bytes of bits from the array's first bit; fixed-size lists: their child
                   values); nulls are not marked, their slots keep the bytes under them
``var_binary``     the values' bytes, then ``n + 1`` int64 absolute positions; the entry
                   points at the positions. Nulls are written empty (they read as null in a
                   nullable field)
``dictionary``     the keys, plain, in the index type, against the file's dictionary
                   (:class:`DictionaryCollector`: batches with another dictionary are remapped
                   onto one growing dictionary, written once at the end of the file)
``list``           ``n + 1`` offsets (int32; int64 for large lists) from 0 into the item's
                   page of the same batch; null lists are written empty
``struct``         nothing (entry ``(0, 0)``); no validity
``null``           nothing (entry ``(current position, n)``)
=================  ======================================================================

Types a 0.1 file cannot hold (maps, empty structs, fixed-size lists of variable-width values)
raise :class:`~lance_ops.errors.UnsupportedFeatureError` (:func:`check_legacy_type`), as
pylance refuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.encoding.legacy.v0_1.binary import is_var_binary
from lance_ops.encoding.legacy.v0_1.decoder import LegacyField, layout_of
from lance_ops.errors import UnsupportedFeatureError, WriteSchemaError

# Writes bytes at the end of the file; returns the position they start at.
Write = Callable[[bytes | memoryview], int]
# field id -> (position, length) of its page in the batch being written.
Entries = dict[int, tuple[int, int]]


def check_legacy_type(name: str, data_type: pa.DataType) -> None:
    """Raise :class:`UnsupportedFeatureError` when a 0.1 file cannot store ``data_type``."""
    if pa.types.is_struct(data_type):
        if data_type.num_fields == 0:
            raise UnsupportedFeatureError(f"field {name!r}: legacy (0.1) files cannot hold an empty struct")
        for child in data_type:
            check_legacy_type(f"{name}.{child.name}", child.type)
        return
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        check_legacy_type(f"{name}.{data_type.value_field.name}", data_type.value_type)
        return
    if pa.types.is_fixed_size_list(data_type):
        inner = data_type.value_type
        while pa.types.is_fixed_size_list(inner):
            inner = inner.value_type
        if layout_of(inner) != "plain":
            raise UnsupportedFeatureError(
                f"field {name!r}: legacy (0.1) files hold fixed-size lists of fixed-width values only, "
                f"not {data_type}"
            )
        return
    if pa.types.is_dictionary(data_type):
        if layout_of(data_type.value_type) not in ("plain", "var_binary"):
            raise UnsupportedFeatureError(
                f"field {name!r}: legacy (0.1) dictionaries hold fixed-width or binary values, "
                f"not {data_type.value_type}"
            )
        return
    try:
        layout_of(data_type)
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"field {name!r}: legacy (0.1) files cannot hold {data_type}") from exc


class DictionaryCollector:
    """The dictionary of each dictionary field of a file: the first batch's, grown by later
    batches that bring other values (their keys are remapped onto it).

    ``fixed`` holds a legacy dataset's dictionaries by field id (with the field's name): batches of
    those fields must bring the same values (or the first of them, whose keys stay valid), else
    :class:`WriteSchemaError`, as pylance refuses an append with another dictionary. One collector
    may serve every file of a write, so that they share one dictionary."""

    def __init__(self, fixed: Mapping[int, tuple[str, pa.Array]] | None = None) -> None:
        self.fixed = dict(fixed or {})
        self.values: dict[int, pa.Array] = {fid: values for fid, (_, values) in self.fixed.items()}

    def keys(self, field_id: int, array: pa.DictionaryArray) -> pa.Array:
        """``array``'s keys against the file's dictionary of ``field_id`` (nulls keep key 0)."""
        known = self.values.get(field_id)
        dictionary = array.dictionary
        if known is None:
            self.values[field_id] = dictionary
            return array.indices
        if known.equals(dictionary):
            return array.indices
        if field_id in self.fixed:
            if len(dictionary) <= len(known) and known.slice(0, len(dictionary)).equals(dictionary):
                return array.indices
            name = self.fixed[field_id][0]
            raise WriteSchemaError(
                f"Append with different schema: dictionary for `{name}` did not match expected dictionary",
                (name,),
            )
        found = pc.index_in(dictionary, value_set=known)
        missing = dictionary.filter(pc.is_null(found))
        if len(missing):
            known = pa.concat_arrays([known, missing.cast(known.type)])
            self.values[field_id] = known
            found = pc.index_in(dictionary, value_set=known)
        index_type = array.type.index_type
        if len(known) - 1 > np.iinfo(index_type.to_pandas_dtype()).max:
            raise UnsupportedFeatureError(
                f"field {field_id}: the file's dictionary has {len(known)} values, more than "
                f"{index_type} keys address"
            )
        return found.take(array.indices.fill_null(0)).cast(index_type)


def encode_field(
    node: LegacyField, array: pa.Array, write: Write, entries: Entries, dictionaries: DictionaryCollector
) -> None:
    """Write the pages of ``array`` (one batch of field ``node``, storage type) and record them."""
    layout = layout_of(node.data_type)
    if layout == "null":
        entries[node.id] = (write(b""), len(array))
    elif layout == "struct":
        entries[node.id] = (0, 0)
        for index, child in enumerate(node.children):
            encode_field(child, array.field(index), write, entries, dictionaries)
    elif layout == "list":
        (child,) = node.children
        large = pa.types.is_large_list(node.data_type)
        lengths = pc.list_value_length(array).fill_null(0).to_numpy(zero_copy_only=False)
        offsets = np.zeros(len(array) + 1, dtype=np.int64 if large else np.int32)
        np.cumsum(lengths, out=offsets[1:])
        entries[node.id] = (write(offsets.tobytes()), len(offsets))
        encode_field(child, array.flatten(), write, entries, dictionaries)
    elif layout == "dictionary":
        keys = dictionaries.keys(node.id, array)
        entries[node.id] = (write(plain_bytes(keys)), len(array))
    elif layout == "var_binary":
        entries[node.id] = (write_var_binary(array, write), len(array))
    else:
        entries[node.id] = (write(plain_bytes(array)), len(array))


def write_var_binary(array: pa.Array, write: Write) -> int:
    """Write string / binary values and their absolute positions; returns the positions' position."""
    if array.null_count:
        array = pc.if_else(pc.is_null(array), pa.scalar(b"", array.type), array)
    _, offset_buffer, data = array.buffers()
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    all_offsets = np.frombuffer(offset_buffer, dtype="<i8" if large else "<i4")
    offsets = all_offsets[array.offset : array.offset + len(array) + 1].astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    start = write(b"" if data is None else memoryview(data)[first:last])
    positions = offsets - first + start
    return write(positions.tobytes())


def plain_bytes(array: pa.Array) -> bytes | memoryview:
    """The bytes of a plain page of ``array``: its fixed-width values from its first one."""
    data_type = array.type
    if pa.types.is_fixed_size_list(data_type):
        size = data_type.list_size
        return plain_bytes(array.values.slice(array.offset * size, len(array) * size))
    buffer = array.buffers()[1]
    if pa.types.is_boolean(data_type):
        if buffer is None:
            return memoryview(b"")
        bits = np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), bitorder="little")
        return np.packbits(bits[array.offset : array.offset + len(array)], bitorder="little").tobytes()
    width = data_type.bit_width // 8
    if buffer is None:
        return memoryview(b"")
    return memoryview(buffer)[array.offset * width : (array.offset + len(array)) * width]


def dictionary_values_bytes(values: pa.Array, write: Write) -> int:
    """Write a file's dictionary values at the end of the file; returns ``Field.dictionary.offset``
    (a plain page, or a var-binary positions array)."""
    if is_var_binary(values.type):
        return write_var_binary(values, write)
    return write(plain_bytes(values))
