"""The compression strategy: the one place that chooses how a Lance 2.1 / 2.2 page is encoded.

Per leaf page (spec/encodings-2.1.md §8.1), first match wins (the order is
:func:`lance_ops.encoding.field_encoder.encode_leaf_page`'s; the choices are made here):

1. no valid visible value → ``ConstantLayout`` all-null form;
2. 2.2 only: every valid visible value equal → ``ConstantLayout`` with the value
   (:func:`try_constant_value`);
3. dictionary (mini-block, page buffer 2): Arrow dictionary-typed leaves always, with
   their own keys and dictionary (:mod:`.compression.dictionary`, never a 2.2 constant
   page); else string/binary pages, or 128-bit (2.1) /
   64- and 128-bit (2.2) fixed-width pages, with at least :data:`DICT_MIN_VALUES` values,
   fewer distinct values than ``values / dict-divisor`` and an estimated size below
   ``dict-size-ratio`` of the plain size (:func:`try_dictionary`). The distinct count is
   **exact** (Arrow's hash-based ``dictionary_encode``, whose result is reused as the encoding),
   not pylance's 16-register HyperLogLog: decisions agree except close to the threshold,
   where pylance's estimate is noisy. A column of a dataset encoding plan
   (``lance-encoding:dictionary``, :mod:`.plan`) decided once for all its pages by
   :func:`column_wants_dictionary` from a HyperLogLog estimate: ``never`` skips this step,
   ``always`` drops the per-page cardinality test and keeps only the size guard;
4. full-zip when the largest value is at least :data:`FULLZIP_MIN_VALUE_BYTES` bytes
   (``lance-encoding:structural-encoding`` overrides), else mini-block;
5. value compression: :func:`try_fixed_compressor` / :func:`try_variable_compressor`
   (mini-block) and :func:`try_per_value_compressor` (full-zip).

With ``compression="auto"`` (a writer option; a leaf's own ``lance-encoding:compression`` wins)
step 5 and the dictionary buffer try candidates and keep the smallest, see
:func:`auto_compress`; every candidate is an encoding pylance 14 reads.

A leaf marked ``lance-encoding:blob`` skips all of this: every page is a blob page
(:mod:`.structural.blob`), like pylance 14 writes. Options come from :mod:`.options`.
Only writers import this module: reading a file never needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.compression import bitpacking, bss, fsl, fsst, general, rle, variable
from lance_ops.encoding.compression.base import as_u8
from lance_ops.encoding.compression.flat import FlatCompressor
from lance_ops.encoding.data import DataBlock, FixedSizeListBlock, FixedWidthBlock, VariableWidthBlock
from lance_ops.encoding.kernels import murmur3_x64_128, murmur3_x64_128_words
from lance_ops.encoding.options import AUTO, DEFAULT_MINICHUNK_SIZE, EncodingOptions
from lance_ops.encoding.structural import miniblock
from lance_ops.encoding.structural.repdef import ShreddedLeaf
from lance_ops.encoding.structural.values import all_equal, fixed_bits, is_variable_width, to_block
from lance_ops.errors import UnsupportedFeatureError

# --- thresholds (§8.1) ---------------------------------------------------------------------------
FULLZIP_MIN_VALUE_BYTES = 256
CONSTANT_PROBE_VALUES = 256  # leading slots checked before a whole page is tested for one value
DICT_MIN_VALUES = 100
DICT_MAX_CARDINALITY = 100_000
DICT_PROBE_FACTOR = 1.25  # a prefix of limit × this many values is hashed first to rule out high cardinality
DICT_PROBE_HASH_BITS = 20  # hash buckets of the probe's cheap distinct lower bound (2^20)
DICT_PROBE_EXACT_FRACTION = 0.75  # a probe bound this close to the limit is checked by an exact count
DICT_FIXED_ENTRY_COST = 16  # bytes per dictionary entry in the fixed-width size estimate
DICT_INDEX_BYTES = 4
FSST_MIN_PAGE_BYTES = 32 * 1024
FSST_MIN_LONGEST = 5
PER_VALUE_ZSTD_MIN_BYTES = 32 * 1024
GENERAL_MIN_BYTES = 4096
BSS_SAMPLE_VALUES = 64
BSS_MAX_ENTROPY_BITS = 4.0
V21_MAX_MINICHUNK_SIZE = 32768

# --- compression="auto" (auto_compress) ------------------------------------------------------------
AUTO_ZSTD_LEVEL = 3  # level 1 gives the same sizes on the bench tables, higher levels only cost time
AUTO_SAMPLE_BYTES = 256 * 1024  # plain bytes of the sample every candidate compresses
AUTO_SAMPLE_MIN_VALUES = 1024
AUTO_SAMPLE_SLICES = 4  # the sample is this many evenly spaced runs of values
# A slower-to-decode candidate must save this much of the sample's bytes to be chosen: zstd + BSS
# reads a float64 column ~3x slower than flat (bench/RESULTS.md), worth it only for a real gain ...
AUTO_MIN_SAVING = 0.10
AUTO_PER_VALUE_MIN_SAVING = 0.2  # ... and per-value zstd (every value inflated on read, a take too) 20 %


# --- compressor choice (§8.1 steps 6-8) ------------------------------------------------------------


def _byte_entropy(values: np.ndarray) -> float:
    """Mean Shannon entropy (bits) of each byte position over a sample of values."""
    sample = values[:BSS_SAMPLE_VALUES]
    planes = sample.view(np.uint8).reshape(len(sample), -1)
    total = 0.0
    for plane in planes.T:
        counts = np.bincount(plane, minlength=256)
        p = counts[counts > 0] / len(plane)
        total += float(-(p * np.log2(p)).sum())
    return total / planes.shape[1]


def try_bss(block: FixedWidthBlock, options: EncodingOptions) -> bool:
    """Byte stream split: only with a compression set, 32/64-bit values, ``bss`` on or low entropy."""
    if options.compression in (None, "none") or block.bits_per_value not in (32, 64) or options.bss == "off":
        return False
    if options.bss == "on":
        return True
    values = block.view(f"<u{block.bits_per_value // 8}")
    return len(values) > 0 and _byte_entropy(values) < BSS_MAX_ENTROPY_BITS


def _maybe_general(inner: Any, raw_bytes: int, options: EncodingOptions) -> Any:
    scheme = options.general_scheme
    if scheme is None or raw_bytes < GENERAL_MIN_BYTES:
        return inner
    return general.GeneralCompressor(inner, scheme, options.compression_level)


def try_fixed_compressor(block: DataBlock, options: EncodingOptions) -> Any:
    """Mini-block compressor for fixed-width values (and dictionary indices)."""
    if isinstance(block, FixedSizeListBlock):
        return fsl.FixedSizeListCompressor()
    if not isinstance(block, FixedWidthBlock):
        raise UnsupportedFeatureError(f"no mini-block compressor for a {type(block).__name__}")
    bits = block.bits_per_value
    raw = (block.num_values * bits + 7) // 8
    if bits not in (8, 16, 32, 64) or options.compression == "none":
        return FlatCompressor()
    if try_bss(block, options):
        inner = bss.ByteStreamSplitCompressor()
        return inner if options.compression == "fsst" else _maybe_general(inner, raw, options)
    values = block.view(f"<u{bits // 8}")
    packed = bitpacking.estimate_inline_size(values)
    rle_size = rle.estimate_rle_size(values)
    chosen: Any = FlatCompressor()
    if rle_size < raw and rle_size < packed and _rle_allowed(values, options):
        chosen = rle.RleCompressor()
    elif packed < raw:
        chosen = bitpacking.InlineBitpackingCompressor(bits)
    return _maybe_general(chosen, raw, options)


def _rle_allowed(values: np.ndarray, options: EncodingOptions) -> bool:
    if options.rle_threshold is None:
        return True
    runs = 1 + int(np.count_nonzero(values[1:] != values[:-1])) if len(values) else 0
    return runs < options.rle_threshold * len(values)


def _minichunk(options: EncodingOptions, version: FileVersion) -> int:
    if version is FileVersion.V2_1 and options.minichunk_size >= V21_MAX_MINICHUNK_SIZE:
        return DEFAULT_MINICHUNK_SIZE
    return options.minichunk_size


def _variable_sizes(block: VariableWidthBlock) -> tuple[int, int]:
    """``(bytes of data and offsets, longest value)`` of a string / binary block."""
    total = len(block.data) + len(block.offsets) * block.offsets.dtype.itemsize
    return total, int(block.lengths().max()) if block.num_values else 0


def _wants_fsst(block: VariableWidthBlock, dtype: pa.DataType, options: EncodingOptions) -> bool:
    if options.compression == "fsst":
        return True
    if options.compression is not None or pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return False
    total, longest = _variable_sizes(block)
    return total >= FSST_MIN_PAGE_BYTES and longest >= FSST_MIN_LONGEST


def try_variable_compressor(
    block: VariableWidthBlock, dtype: pa.DataType, options: EncodingOptions, version: FileVersion
) -> Any:
    """Mini-block compressor for string / binary values."""
    chunk = _minichunk(options, version)
    if options.compression == "none":
        return variable.VariableCompressor(chunk)
    if options.general_scheme is not None:
        return general.GeneralCompressor(
            variable.VariableCompressor(chunk), options.general_scheme, options.compression_level
        )
    if _wants_fsst(block, dtype, options):
        return fsst.FsstCompressor(chunk)
    return variable.VariableCompressor(chunk)


def try_per_value_compressor(block: DataBlock, dtype: pa.DataType, options: EncodingOptions) -> Any:
    """Full-zip (per-value, transparent) compressor."""
    if isinstance(block, FixedSizeListBlock):
        return fsl.FixedSizeListCompressor()
    if isinstance(block, FixedWidthBlock):
        return FlatCompressor()
    if not isinstance(block, VariableWidthBlock):
        raise UnsupportedFeatureError(f"no per-value compressor for a {type(block).__name__}")
    total, longest = _variable_sizes(block)
    if options.compression != "none" and (
        options.general_scheme is not None
        or (longest > PER_VALUE_ZSTD_MIN_BYTES and total >= PER_VALUE_ZSTD_MIN_BYTES)
    ):
        # pylance always uses zstd per value, even when lz4 is requested.
        return general.GeneralCompressor(variable.VariableCompressor(), "zstd", options.compression_level)
    if options.compression != "none" and _wants_fsst(block, dtype, options):
        return fsst.FsstCompressor()
    return variable.VariableCompressor()


# --- compression="auto" ------------------------------------------------------------------------------


def _sample_slices(num_values: int, wanted: int) -> list[tuple[int, int]]:
    """``AUTO_SAMPLE_SLICES`` evenly spaced, disjoint runs of about ``wanted`` values in all."""
    run = max(1, wanted // AUTO_SAMPLE_SLICES)
    step = num_values // AUTO_SAMPLE_SLICES
    return [(i * step, i * step + run) for i in range(AUTO_SAMPLE_SLICES)]


def _sample_values(block: DataBlock) -> DataBlock | None:
    """A sample of ``block`` for trying candidates; ``None`` when the sample would be the whole
    block (then the candidates compress the block itself)."""
    n = block.num_values
    if isinstance(block, FixedWidthBlock):
        wanted = max(AUTO_SAMPLE_MIN_VALUES, AUTO_SAMPLE_BYTES * 8 // block.bits_per_value)
        if n <= 2 * wanted or block.bits_per_value % 8:
            return None
        values = block.view(f"<u{block.bits_per_value // 8}")
        runs = [values[a:b] for a, b in _sample_slices(n, wanted)]
        return FixedWidthBlock.from_values(np.concatenate(runs))
    if isinstance(block, VariableWidthBlock):
        total = int(block.offsets[-1]) - int(block.offsets[0])
        wanted = max(AUTO_SAMPLE_MIN_VALUES, int(AUTO_SAMPLE_BYTES * n / max(total, 1)))
        if n <= 2 * wanted:
            return None
        offs = block.offsets.astype(np.int64)
        data = as_u8(block.data)
        slices = _sample_slices(n, wanted)
        pieces = [data[offs[a] : offs[b]] for a, b in slices]
        lengths = np.concatenate([np.diff(offs[a : b + 1]) for a, b in slices])
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(block.offsets.dtype)
        return VariableWidthBlock(offsets, np.concatenate(pieces), len(lengths))
    return None


def _stored_bytes(result: Any) -> int:
    """Bytes a compressor's output occupies (mini-block buffers, per-value data, or a block)."""
    out = result[0]
    if isinstance(out, VariableWidthBlock):
        return len(out.data) + len(out.offsets) * out.offsets.dtype.itemsize
    if isinstance(out, bytes | bytearray | memoryview):
        return len(out)
    if isinstance(out, FixedWidthBlock):
        return len(out.data)
    return sum(len(b) for b in out.buffers) + 4 * len(out.chunks)  # + each chunk's header sizes


def auto_compress(
    block: DataBlock, candidates: Sequence[tuple[Any, float]], method: str = "compress"
) -> tuple[Any, Any]:
    """Compress ``block`` with the best of ``candidates`` (``compressor.<method>``): ``compression="auto"``.

    Candidates come in order of decode cost, cheapest first, each with the fraction of bytes it
    must save over the choice so far to replace it (e.g. :data:`AUTO_MIN_SAVING`). They are tried on
    a sample of the block (:data:`AUTO_SAMPLE_SLICES` runs of values, about
    :data:`AUTO_SAMPLE_BYTES` plain bytes); a block no larger than twice the sample is compressed
    whole by every candidate and the winner's output kept.
    """
    if len(candidates) == 1:
        return getattr(candidates[0][0], method)(block)  # type: ignore[no-any-return]
    sample = _sample_values(block)
    trial = block if sample is None else sample
    best: tuple[Any, Any, int] | None = None
    for compressor, saving in candidates:
        result = getattr(compressor, method)(trial)
        size = _stored_bytes(result)
        if best is None or size < best[2] * (1 - saving):
            best = (compressor, result, size)
    assert best is not None
    if sample is None:
        return best[1]  # type: ignore[no-any-return]
    return getattr(best[0], method)(block)  # type: ignore[no-any-return]


def _auto_level(options: EncodingOptions) -> int:
    return AUTO_ZSTD_LEVEL if options.compression_level is None else options.compression_level


def auto_fixed(block: DataBlock, options: EncodingOptions) -> tuple[Any, Any]:
    """Mini-block fixed-width values / dictionary indices: the default choice (bit-packing, RLE or
    flat), that inside zstd, or byte-stream-split inside zstd (32 / 64-bit values)."""
    base = replace(options, compression=None)
    plain = try_fixed_compressor(block, base)
    candidates: list[tuple[Any, float]] = [(plain, 0.0)]
    if isinstance(block, FixedWidthBlock) and block.bits_per_value in (8, 16, 32, 64):
        raw = block.num_values * block.bits_per_value // 8
        if raw >= GENERAL_MIN_BYTES:
            level = _auto_level(options)
            candidates.append((general.GeneralCompressor(plain, "zstd", level), AUTO_MIN_SAVING))
            if block.bits_per_value in (32, 64) and options.bss != "off":
                split = bss.ByteStreamSplitCompressor()
                candidates.append((general.GeneralCompressor(split, "zstd", level), AUTO_MIN_SAVING))
    return auto_compress(block, candidates)


def auto_variable(
    block: VariableWidthBlock, dtype: pa.DataType, options: EncodingOptions, version: FileVersion
) -> tuple[Any, Any]:
    """Mini-block strings / binary: the default choice (FSST or plain) or plain inside zstd."""
    base = replace(options, compression=None)
    plain = try_variable_compressor(block, dtype, base, version)
    zstd = general.GeneralCompressor(
        variable.VariableCompressor(_minichunk(options, version)), "zstd", _auto_level(options)
    )
    return auto_compress(block, [(plain, 0.0), (zstd, AUTO_MIN_SAVING)])


def auto_per_value(block: DataBlock, dtype: pa.DataType, options: EncodingOptions) -> tuple[Any, Any]:
    """Full-zip values: the default choice, or (variable width) each value in its own zstd frame."""
    base = replace(options, compression=None)
    plain = try_per_value_compressor(block, dtype, base)
    candidates: list[tuple[Any, float]] = [(plain, 0.0)]
    if isinstance(block, VariableWidthBlock) and not isinstance(plain, general.GeneralCompressor):
        zstd = general.GeneralCompressor(variable.VariableCompressor(), "zstd", _auto_level(options))
        candidates.append((zstd, AUTO_PER_VALUE_MIN_SAVING))
    return auto_compress(block, candidates, "compress_per_value")


# --- page-level decisions -------------------------------------------------------------------------


def _strip_validity(values: pa.Array) -> pa.Array:
    """The same slots without a validity bitmap (null slots keep whatever bytes they hold)."""
    if values.null_count == 0 or pa.types.is_null(values.type):
        return values
    if pa.types.is_fixed_size_list(values.type):
        return pa.FixedSizeListArray.from_buffers(
            values.type, len(values), [None], offset=values.offset, children=[values.values]
        )
    return pa.Array.from_buffers(
        values.type, len(values), [None, *values.buffers()[1:]], offset=values.offset
    )


def valid_visible(leaf: ShreddedLeaf) -> np.ndarray | None:
    """Bool per visible value: valid at every layer? ``None`` = all valid."""
    levels = leaf.levels
    if levels.defs is None:
        return None
    visible = levels.visible_mask()
    defs = levels.defs if visible is None else levels.defs[visible]
    valid = defs == 0
    return None if valid.all() else valid


def try_constant_value(leaf: ShreddedLeaf, valid: np.ndarray | None) -> pa.Array | None:
    """The single value shared by every valid visible slot (2.2 constant pages), else ``None``."""
    dtype = leaf.values.type
    if pa.types.is_fixed_size_list(dtype) or pa.types.is_null(dtype) or pa.types.is_struct(dtype):
        return None
    values = _strip_validity(leaf.values)
    # Most pages differ within their first values: rule those out before filtering the whole page.
    head = values[:CONSTANT_PROBE_VALUES]
    if valid is not None:
        head = head.filter(pa.array(valid[:CONSTANT_PROBE_VALUES]))
    if len(head) > 1 and not all_equal(to_block(head)):
        return None
    if valid is not None:
        values = values.filter(pa.array(valid))
    if len(values) == 0:
        return None
    if not all_equal(to_block(values)):
        return None
    return values.take(pa.array([0]))


@dataclass(frozen=True)
class DictionaryChoice:
    indices: FixedWidthBlock
    items: DataBlock


def try_dictionary(
    leaf: ShreddedLeaf, options: EncodingOptions, version: FileVersion
) -> DictionaryChoice | None:
    """Dictionary-encode the page's visible values when it pays off (module docstring, step 3)."""
    values = leaf.values
    dtype = values.type
    n = len(values)
    if n < DICT_MIN_VALUES or options.dictionary == "never":
        return None
    raw_values = _strip_validity(values)
    if not is_variable_width(dtype):
        if not _dictionary_candidate(dtype):
            return None
        bits = fixed_bits(dtype)
        if bits not in ((128,) if version is FileVersion.V2_1 else (64, 128)):
            return None
        # Hash the raw bytes: Arrow cannot dictionary-encode every fixed-width type (e.g. decimals).
        # 64-bit values hash as uint64 (the same bytes, much faster than binary(8)).
        raw_values = raw_values.view(pa.uint64() if bits == 64 else pa.binary(bits // 8))
    limit: float = DICT_MAX_CARDINALITY + 1
    if options.dictionary == "auto":
        limit = min(n / options.dict_divisor, limit)
    probe = int(limit * DICT_PROBE_FACTOR)
    if n > probe and _too_many_distinct(raw_values[:probe], limit):
        return None  # a prefix already has too many distinct values: skip hashing the whole page
    encoded = raw_values.dictionary_encode()
    distinct = len(encoded.dictionary)
    if distinct >= limit:
        return None
    items = to_block(encoded.dictionary)
    if isinstance(items, VariableWidthBlock):
        w = items.offsets.dtype.itemsize
        total = len(to_block(raw_values).data)  # type: ignore[union-attr]
        avg = total / n if n else 0
        estimate = distinct * (avg + w) + n * w
        plain = total + (n + 1) * w
    else:
        estimate = distinct * DICT_FIXED_ENTRY_COST + n * DICT_INDEX_BYTES
        plain = n * fixed_bits(dtype) // 8
    if plain == 0 or estimate / plain >= options.dict_size_ratio:
        return None
    indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.uint32)
    return DictionaryChoice(FixedWidthBlock.from_values(indices), items)


def _too_many_distinct(prefix: pa.Array, limit: float) -> bool:
    """Whether ``prefix`` surely holds at least ``limit`` distinct values: an early way out
    before the whole page is dictionary-encoded (which counts exactly, so a ``False`` here never
    changes the choice, only its cost).

    A lower bound, cheaper than hashing the values into a table: the number of distinct top
    :data:`DICT_PROBE_HASH_BITS` bits of a 64-bit hash of each value (equal values hash alike, so
    there are never fewer distinct values than distinct hash prefixes). Random and sequential
    values of a high-cardinality prefix pass it with a wide margin. A prefix whose bound falls
    just short of ``limit`` (at least :data:`DICT_PROBE_EXACT_FRACTION` of it) is counted again
    by its distinct whole 64-bit hashes (sorted): colliding hash prefixes hide a few percent of
    the values near the limit, whole hashes next to none (still a lower bound: a collision only
    leaves the choice to the whole page's exact count). Types not hashed here are counted
    exactly with Arrow's ``unique``.
    """
    hashes = _prefix_hashes(prefix)
    if hashes is None:
        return len(prefix.unique()) >= limit
    bound = _distinct_hash_prefixes(hashes)
    if limit > bound >= limit * DICT_PROBE_EXACT_FRACTION:
        bound = _distinct_hashes(hashes)
    return bound >= limit


def _distinct_lower_bound(values: pa.Array) -> int | None:
    """At most the number of distinct values of ``values`` (no validity bitmap): their distinct
    hash prefixes; ``None`` for types not hashed here."""
    hashes = _prefix_hashes(values)
    return None if hashes is None else _distinct_hash_prefixes(hashes)


def _distinct_hash_prefixes(hashes: np.ndarray) -> int:
    seen = np.zeros(1 << DICT_PROBE_HASH_BITS, dtype=np.bool_)
    seen[hashes >> np.uint64(64 - DICT_PROBE_HASH_BITS)] = True
    return int(np.count_nonzero(seen))


def _distinct_hashes(hashes: np.ndarray) -> int:
    ordered = np.sort(hashes)
    return int(np.count_nonzero(ordered[1:] != ordered[:-1])) + min(1, len(ordered))


def _prefix_hashes(values: pa.Array) -> np.ndarray | None:
    """A 64-bit hash of each value of ``values`` (no validity bitmap; equal values hash alike);
    ``None`` for types not hashed here (the caller counts exactly)."""
    dtype = values.type
    h1 = np.empty(len(values), dtype=np.uint64)
    h2 = np.empty(len(values), dtype=np.uint64)
    if pa.types.is_uint64(dtype):
        words = np.frombuffer(values.buffers()[1], np.uint64, len(values), values.offset * 8)
        murmur3_x64_128_words(words, 0, h1, h2)
    elif dtype in (pa.string(), pa.binary(), pa.large_string(), pa.large_binary()):
        width = np.int64 if dtype in (pa.large_string(), pa.large_binary()) else np.int32
        offs = np.frombuffer(values.buffers()[1], width, len(values) + 1, values.offset * width().itemsize)
        data = values.buffers()[2]
        raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        murmur3_x64_128(raw, offs.astype(np.int64), 0, h1, h2)
    else:
        return None
    return h1


def _dictionary_size_pays(
    distinct: float, n: int, value_bytes: float, fixed_width: bool, options: EncodingOptions
) -> bool:
    """The size guard: dictionary + indices smaller than ``dict-size-ratio`` of the plain values."""
    if fixed_width:
        estimate = distinct * DICT_FIXED_ENTRY_COST + n * DICT_INDEX_BYTES
        plain = n * value_bytes
    else:
        estimate = distinct * (value_bytes + DICT_INDEX_BYTES) + n * DICT_INDEX_BYTES
        plain = n * (value_bytes + DICT_INDEX_BYTES)
    return plain > 0 and estimate / plain < options.dict_size_ratio


def column_wants_dictionary(
    dtype: pa.DataType,
    distinct_estimate: float,
    num_values: int,
    value_bytes: float,
    options: EncodingOptions,
) -> bool:
    """Whether a whole column should be dictionary-encoded (the plan's decision, once per column).

    The format's rule on the column's distinct-value estimate (``estimate < values / dict-divisor``,
    at most :data:`DICT_MAX_CARDINALITY` entries), then the size guard on the average value size.
    ``num_values`` counts the non-null values the estimate saw, ``value_bytes`` their mean size.
    """
    if pa.types.is_dictionary(dtype) or not _dictionary_candidate(dtype) or num_values < DICT_MIN_VALUES:
        return False
    if distinct_estimate >= min(num_values / options.dict_divisor, DICT_MAX_CARDINALITY + 1):
        return False
    fixed = not is_variable_width(dtype)
    return _dictionary_size_pays(distinct_estimate, num_values, value_bytes, fixed, options)


def _dictionary_candidate(dtype: pa.DataType) -> bool:
    return not (
        pa.types.is_fixed_size_list(dtype)
        or pa.types.is_boolean(dtype)
        or pa.types.is_null(dtype)
        or pa.types.is_struct(dtype)
    )


def dictionary_buffer(
    items: DataBlock, options: EncodingOptions, version: FileVersion
) -> miniblock.Dictionary:
    plain: Any = variable.VariableCompressor() if isinstance(items, VariableWidthBlock) else FlatCompressor()
    inner = plain
    if version is not FileVersion.V2_1 and options.dict_values_compression != "none":
        inner = general.GeneralCompressor(
            plain, options.dict_values_compression, options.dict_values_compression_level
        )
    if options.compression == AUTO and version is not FileVersion.V2_1:
        # 2.1 dictionaries are never wrapped: the configured wrapper, or zstd when smaller
        zstd = general.GeneralCompressor(plain, "zstd", _auto_level(options))
        data, desc = min((inner.compress_block(items), zstd.compress_block(items)), key=lambda r: len(r[0]))
    else:
        data, desc = inner.compress_block(items)
    return miniblock.Dictionary(bytes(data), desc, items.num_values)


def compress_fixed(block: DataBlock, options: EncodingOptions) -> tuple[Any, Any]:
    if options.compression == AUTO:
        return auto_fixed(block, options)
    return try_fixed_compressor(block, options).compress(block)  # type: ignore[no-any-return]


def largest_value_bytes(block: DataBlock) -> int:
    if isinstance(block, VariableWidthBlock):
        return _variable_sizes(block)[1]
    if isinstance(block, FixedSizeListBlock):
        return block.dimension * largest_value_bytes(block.child)
    if isinstance(block, FixedWidthBlock):
        return block.bits_per_value // 8
    raise UnsupportedFeatureError(f"cannot size a {type(block).__name__}")
