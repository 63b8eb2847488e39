"""Arrow dictionary-typed columns (``pa.dictionary(K, V)``) in Lance 2.1 / 2.2.

A dictionary-typed leaf is stored the way pylance stores it: always a mini-block page whose
*values* are the Arrow keys at their own width (8/16/32/64 bits, compressed like any
fixed-width values) and whose *dictionary* (page buffer 2, ``MiniBlockLayout.dictionary``)
is the Arrow dictionary itself, unused entries included; only a page without any valid
value becomes an all-null ``ConstantLayout``. Nulls live in the definition levels only:
:func:`normalize_nulls` first turns keys that point at a null dictionary entry into null
keys and drops the null entries (renumbering the keys); keys under null slots are stored
as 0. Worked example (2.1, int8 keys)::

    keys   [0, 1, 3, null, 1]      dictionary ["a", "b", null, "c"]
    ->     keys [0, 1, 2, 0, 1]    def [0, 0, 0, 1, 0]    dictionary ["a", "b", "c"]

Batches written together are combined as pylance combines them: dictionaries
concatenated end to end (not de-duplicated) and keys shifted (:func:`concat`). Reading
gives back a dictionary array over the page's dictionary (:func:`to_dictionary_array`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lance_ops.errors import CorruptFileError, SchemaError


def _keys(array: pa.DictionaryArray) -> np.ndarray:
    """The raw keys (null slots keep whatever they hold) as int64."""
    indices = array.indices
    raw = pa.Array.from_buffers(
        indices.type, len(indices), [None, indices.buffers()[1]], offset=indices.offset
    )
    return np.asarray(raw.to_numpy(zero_copy_only=False), dtype=np.int64)


def normalize_nulls(array: pa.DictionaryArray) -> pa.DictionaryArray:
    """Move nulls from the dictionary into the keys (the dictionary keeps its valid entries)
    and zero the keys of null slots, as pylance does before choosing the keys' compression."""
    dictionary = array.dictionary
    if dictionary.null_count == 0 and array.null_count == 0:
        return array
    keys = _keys(array)
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if dictionary.null_count:
        valid_items = np.asarray(dictionary.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        valid &= valid_items[np.where(valid, keys, 0)]
        keys = (np.cumsum(valid_items) - 1)[np.where(valid, keys, 0)]
        dictionary = dictionary.filter(pa.array(valid_items))
    indices = pa.array(np.where(valid, keys, 0), array.type.index_type, mask=~valid)
    return pa.DictionaryArray.from_arrays(indices, dictionary, ordered=array.type.ordered)


def normalize_nested_nulls(array: pa.Array) -> pa.Array:
    """:func:`normalize_nulls` applied to every dictionary in ``array``, at the top level or nested
    in lists, large lists, fixed-size lists, structs and maps (the nesting is kept as is), so
    that Arrow can unify the dictionaries of several such arrays (it refuses null entries)."""
    dtype = array.type
    if not holds_dictionary(dtype):
        return array
    if pa.types.is_dictionary(dtype):
        return normalize_nulls(array)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(dtype):
        children = [normalize_nested_nulls(array.field(i)) for i in range(dtype.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(dtype), mask=mask)
    if pa.types.is_fixed_size_list(dtype):
        size = dtype.list_size
        values = normalize_nested_nulls(array.values.slice(array.offset * size, len(array) * size))
        return pa.FixedSizeListArray.from_arrays(values, type=dtype, mask=mask)
    # offsets copied: Arrow takes no validity mask with a sliced offsets array
    offsets = pa.array(array.offsets.to_numpy(zero_copy_only=False), array.offsets.type)
    if pa.types.is_map(dtype):
        keys, items = normalize_nested_nulls(array.keys), normalize_nested_nulls(array.items)
        return pa.MapArray.from_arrays(offsets, keys, items, type=dtype, mask=mask)
    kind = pa.LargeListArray if pa.types.is_large_list(dtype) else pa.ListArray
    return kind.from_arrays(offsets, normalize_nested_nulls(array.values), type=dtype, mask=mask)


def nested_dictionaries(array: pa.Array) -> list[pa.Array]:
    """The dictionaries of the dictionary arrays in ``array`` (itself or nested), in pre-order."""
    dtype = array.type
    if not holds_dictionary(dtype):
        return []
    if pa.types.is_dictionary(dtype):
        return [array.dictionary]
    if pa.types.is_struct(dtype):
        return [d for i in range(dtype.num_fields) for d in nested_dictionaries(array.field(i))]
    if pa.types.is_map(dtype):
        return nested_dictionaries(array.keys) + nested_dictionaries(array.items)
    return nested_dictionaries(array.values)


def unifies(chunks: Sequence[pa.Array]) -> bool:
    """Whether Arrow can concatenate ``chunks``: it unifies dictionaries that differ between the
    chunks, and refuses to when one of them holds a null entry."""
    for level in zip(*(nested_dictionaries(c) for c in chunks), strict=True):
        if any(d.null_count for d in level) and not all(d.equals(level[0]) for d in level[1:]):
            return False
    return True


def holds_dictionary(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` is, or nests (list, large list, fixed-size list, struct, map), a dictionary."""
    if pa.types.is_dictionary(dtype):
        return True
    if pa.types.is_map(dtype):
        return holds_dictionary(dtype.key_type) or holds_dictionary(dtype.item_type)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return holds_dictionary(dtype.value_type)
    if pa.types.is_struct(dtype):
        return any(holds_dictionary(dtype.field(i).type) for i in range(dtype.num_fields))
    return False


def concat(chunks: Sequence[pa.Array]) -> pa.Array:
    """Concatenate chunks of one type; dictionary chunks, at the top level or nested in lists,
    fixed-size lists, structs and maps, are joined as pylance joins top-level ones (Arrow's own
    concatenation unifies dictionaries and refuses those holding null entries, which 2.0 files give).

    If the joined dictionary outgrows the key type, the dictionaries are unified instead
    (pylance would write an unreadable file there).
    """
    if len(chunks) == 1:
        return chunks[0]
    dtype = chunks[0].type
    if not holds_dictionary(dtype):
        return pa.concat_arrays(list(chunks))
    if not pa.types.is_dictionary(dtype):
        return _concat_nested(chunks, dtype)
    sizes = np.array([len(c.dictionary) for c in chunks], np.int64)
    if int(sizes.sum()) - 1 > np.iinfo(dtype.index_type.to_pandas_dtype()).max:
        return _unified(chunks, dtype)
    shift = np.cumsum(sizes) - sizes
    keys = np.concatenate([_keys(c) + s for c, s in zip(chunks, shift.tolist(), strict=True)])
    valid = np.concatenate([np.asarray(c.is_valid().to_numpy(zero_copy_only=False), bool) for c in chunks])
    keys[~valid] = 0
    indices = pa.array(keys, dtype.index_type, mask=~valid)
    dictionary = pa.concat_arrays([c.dictionary for c in chunks])
    return pa.DictionaryArray.from_arrays(indices, dictionary, ordered=dtype.ordered)


def _concat_nested(chunks: Sequence[pa.Array], dtype: pa.DataType) -> pa.Array:
    """Concatenate nested chunks layer by layer, joining the dictionaries below with :func:`concat`."""
    valid = np.concatenate([np.asarray(c.is_valid().to_numpy(zero_copy_only=False), bool) for c in chunks])
    mask = None if valid.all() else pa.array(~valid)
    if pa.types.is_struct(dtype):
        children = [concat([c.field(i) for c in chunks]) for i in range(dtype.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(dtype), mask=mask)
    if pa.types.is_fixed_size_list(dtype):
        size = dtype.list_size
        values = concat([c.values.slice(c.offset * size, len(c) * size) for c in chunks])
        return pa.FixedSizeListArray.from_arrays(values, type=dtype, mask=mask)
    # list, large list, map: offsets rebased onto the joined values
    bounds = [np.asarray(c.offsets.to_numpy(zero_copy_only=False), np.int64) for c in chunks]
    starts = np.cumsum([0] + [int(b[-1] - b[0]) for b in bounds[:-1]])
    offsets = np.concatenate(
        [bounds[0][:1] - bounds[0][0]]
        + [b[1:] - b[0] + s for b, s in zip(bounds, starts.tolist(), strict=True)]
    )
    width = pa.int64() if pa.types.is_large_list(dtype) else pa.int32()
    joined = pa.array(offsets, width)
    parts = list(zip(chunks, bounds, strict=True))
    if pa.types.is_map(dtype):
        keys = concat([c.keys.slice(b[0], b[-1] - b[0]) for c, b in parts])
        items = concat([c.items.slice(b[0], b[-1] - b[0]) for c, b in parts])
        return pa.MapArray.from_arrays(joined, keys, items, type=dtype, mask=mask)
    values = concat([c.values.slice(b[0], b[-1] - b[0]) for c, b in parts])
    kind = pa.LargeListArray if pa.types.is_large_list(dtype) else pa.ListArray
    return kind.from_arrays(joined, values, type=dtype, mask=mask)


def _unified(chunks: Sequence[pa.Array], dtype: pa.DictionaryType) -> pa.DictionaryArray:
    """The chunks over one de-duplicated dictionary (Arrow's own unification refuses
    dictionaries holding nulls; a key pointing at a null entry becomes a null key)."""
    values = pa.concat_arrays([c.dictionary.take(c.indices) for c in chunks])
    encoded = values.dictionary_encode()
    if len(encoded.dictionary) - 1 > np.iinfo(dtype.index_type.to_pandas_dtype()).max:
        raise SchemaError(
            f"the batches' {len(encoded.dictionary)} distinct values do not fit {dtype.index_type} keys"
        )
    indices = encoded.indices.cast(dtype.index_type)
    return pa.DictionaryArray.from_arrays(indices, encoded.dictionary, ordered=dtype.ordered)


def to_dictionary_array(
    keys: np.ndarray, dictionary: pa.Array, dtype: pa.DictionaryType, valid: np.ndarray | None
) -> pa.DictionaryArray:
    """A dictionary array of ``dtype`` from decoded keys (any integer width) and items.

    ``valid`` (one flag per key, ``None`` = all valid) only says which keys must be in
    range: keys under null slots are zeroed, the nulls themselves come from the levels.
    """
    keys = np.asarray(keys, dtype=np.int64)
    if valid is not None:
        keys = np.where(valid, keys, 0)
    if len(keys) and (keys.min() < 0 or keys.max() >= len(dictionary)):
        raise CorruptFileError("<page>", "dictionary index out of range")
    indices = pa.array(keys, pa.int64()).cast(dtype.index_type)
    return pa.DictionaryArray.from_arrays(indices, dictionary, ordered=dtype.ordered)


def from_values(values: pa.Array, dtype: pa.DictionaryType) -> pa.DictionaryArray:
    """Dictionary-encode plain decoded values (pages stored without a dictionary)."""
    encoded = values.dictionary_encode()
    indices = encoded.indices.cast(dtype.index_type)
    return pa.DictionaryArray.from_arrays(indices, encoded.dictionary, ordered=dtype.ordered)
