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


def concat(chunks: Sequence[pa.Array]) -> pa.Array:
    """Concatenate chunks of one type; top-level dictionary chunks are joined as pylance does.

    If the joined dictionary outgrows the key type, the dictionaries are unified instead
    (pylance would write an unreadable file there).
    """
    if len(chunks) == 1:
        return chunks[0]
    dtype = chunks[0].type
    if not pa.types.is_dictionary(dtype):
        return pa.concat_arrays(list(chunks))
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
