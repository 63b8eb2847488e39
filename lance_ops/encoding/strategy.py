"""The encoding strategy: the one place that chooses how a Lance 2.1 / 2.2 page is encoded.

Per leaf page (spec/encodings-2.1.md §8.1), first match wins:

1. no valid visible value → ``ConstantLayout`` all-null form;
2. 2.2 only: every valid visible value equal → ``ConstantLayout`` with the value;
3. dictionary (mini-block, page buffer 2): Arrow dictionary-typed leaves always, with
   their own keys and dictionary (:mod:`.compression.dictionary`, never a 2.2 constant
   page); else string/binary pages, or 128-bit (2.1) /
   64- and 128-bit (2.2) fixed-width pages, with at least :data:`DICT_MIN_VALUES` values,
   fewer distinct values than ``values / dict-divisor`` and an estimated size below
   ``dict-size-ratio`` of the plain size. The distinct count is **exact** (Arrow's
   hash-based ``dictionary_encode``, whose result is reused as the encoding), not
   pylance's 16-register HyperLogLog: decisions agree except close to the threshold,
   where pylance's estimate is noisy. A column of a dataset encoding plan
   (``lance-encoding:dictionary``, :mod:`.plan`) decided once for all its pages by
   :func:`column_wants_dictionary` from a HyperLogLog estimate: ``never`` skips this step,
   ``always`` drops the per-page cardinality test and keeps only the size guard;
4. full-zip when the largest value is at least :data:`FULLZIP_MIN_VALUE_BYTES` bytes
   (``lance-encoding:structural-encoding`` overrides), else mini-block;
5. value compression: :func:`try_fixed_compressor` / :func:`try_variable_compressor`
   (mini-block) and :func:`try_per_value_compressor` (full-zip).

With ``compression="auto"`` (a writer option, :class:`StructuralFieldEncoder`; a leaf's own
``lance-encoding:compression`` wins) step 5 and the dictionary buffer try candidates and keep the
smallest, see :func:`auto_compress`; every candidate is an encoding pylance 14 reads.

A leaf marked ``lance-encoding:blob`` skips all of this: every page is a blob page
(:mod:`.structural.blob`), like pylance 14 writes.

Options come from the ``lance-encoding:*`` field-metadata keys (§8.3) as a frozen
:class:`EncodingOptions`. :func:`make_field_encoder`, :func:`make_field_decoder` and
:func:`num_columns` are the file layer's entry points.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import (
    EncodedPage,
    Fetch,
    FieldDecoder,
    FieldEncoder,
    FileVersion,
    PageInfo,
    WriteExternal,
)
from lance_ops.encoding.compression import bitpacking, bss, fsl, fsst, general, packed_struct, rle, variable
from lance_ops.encoding.compression.base import as_u8
from lance_ops.encoding.compression.flat import FlatCompressor
from lance_ops.encoding.data import (
    DataBlock,
    FixedSizeListBlock,
    FixedWidthBlock,
    StructBlock,
    VariableWidthBlock,
)
from lance_ops.encoding.structural import blob, constant, fullzip, miniblock
from lance_ops.encoding.structural.page import PageReader, page_reader
from lance_ops.encoding.structural.repdef import (
    FALSE_WORDS,
    DecodedLeaf,
    ShreddedLeaf,
    child_field,
    concat_leaves,
    count_leaves,
    is_leaf_field,
    shred,
    unshred,
)
from lance_ops.encoding.structural.values import all_equal, fixed_bits, is_variable_width, to_block
from lance_ops.errors import (
    CorruptFileError,
    InvalidArgumentError,
    LanceOpsError,
    SchemaError,
    UnsupportedFeatureError,
)

# --- thresholds (§8.1) ---------------------------------------------------------------------------
FULLZIP_MIN_VALUE_BYTES = 256
CONSTANT_PROBE_VALUES = 256  # leading slots checked before a whole page is tested for one value
DICT_MIN_VALUES = 100
DICT_DEFAULT_DIVISOR = 2
DICT_MAX_CARDINALITY = 100_000
DICT_PROBE_FACTOR = 1.25  # a prefix of limit × this many values is hashed first to rule out high cardinality
DICT_DEFAULT_SIZE_RATIO = 0.8
DICT_FIXED_ENTRY_COST = 16  # bytes per dictionary entry in the fixed-width size estimate
DICT_INDEX_BYTES = 4
FSST_MIN_PAGE_BYTES = 32 * 1024
FSST_MIN_LONGEST = 5
PER_VALUE_ZSTD_MIN_BYTES = 32 * 1024
GENERAL_MIN_BYTES = 4096
BSS_SAMPLE_VALUES = 64
BSS_MAX_ENTROPY_BITS = 4.0
DEFAULT_MINICHUNK_SIZE = 4096
V21_MAX_MINICHUNK_SIZE = 32768

# --- compression="auto" (auto_compress) ------------------------------------------------------------
AUTO = "auto"
AUTO_ZSTD_LEVEL = 3  # level 1 gives the same sizes on the bench tables, higher levels only cost time
AUTO_SAMPLE_BYTES = 256 * 1024  # plain bytes of the sample every candidate compresses
AUTO_SAMPLE_MIN_VALUES = 1024
AUTO_SAMPLE_SLICES = 4  # the sample is this many evenly spaced runs of values
# A slower-to-decode candidate must save this much of the sample's bytes to be chosen: zstd + BSS
# reads a float64 column ~3x slower than flat (bench/RESULTS.md), worth it only for a real gain ...
AUTO_MIN_SAVING = 0.10
AUTO_PER_VALUE_MIN_SAVING = 0.2  # ... and per-value zstd (every value inflated on read, a take too) 20 %

KEY_PREFIX = "lance-encoding:"
# ``lance-encoding:dictionary`` (ours; pylance ignores it) also takes the usual boolean words.
CHOICE_ALIASES = {"dictionary": {"true": "always", "on": "always", "false": "never", "off": "never"}}
LOG = logging.getLogger(__name__)
GENERAL_SCHEMES = ("zstd", "lz4")
COMPRESSION_SCHEMES = ("none", "zstd", "lz4", "fsst")
# Values of the writers' ``compression`` option: a default for leaves that set no scheme themselves.
WRITER_COMPRESSION_CHOICES = (AUTO, *COMPRESSION_SCHEMES)


@dataclass(frozen=True)
class EncodingOptions:
    """The ``lance-encoding:*`` keys of a field's metadata (§8.3); ``None`` = not set."""

    compression: str | None = None
    compression_level: int | None = None
    rle_threshold: float | None = None
    bss: str = "auto"
    dict_divisor: int = DICT_DEFAULT_DIVISOR
    dict_size_ratio: float = DICT_DEFAULT_SIZE_RATIO
    dict_values_compression: str = "lz4"
    dict_values_compression_level: int | None = None
    minichunk_size: int = DEFAULT_MINICHUNK_SIZE
    structural_encoding: str | None = None
    packed: bool = False
    blob: bool = False
    dictionary: str = "auto"

    @classmethod
    def from_metadata(
        cls, metadata: Mapping[Any, Any] | None, data_type: pa.DataType | None = None
    ) -> EncodingOptions:
        """The options of a field's metadata; ``data_type`` (the field's type, when known) tells
        a ``lance.blob.v2`` description (a struct marked packed and blob) from a blob leaf."""
        keys: dict[str, str] = {}
        for k, v in (metadata or {}).items():
            key = k.decode() if isinstance(k, bytes) else str(k)
            if key.startswith(KEY_PREFIX):
                keys[key[len(KEY_PREFIX) :]] = v.decode() if isinstance(v, bytes) else str(v)

        def ignored(name: str, default: Any) -> Any:
            # pylance 14 logs a warning and keeps its default for a value it cannot parse.
            LOG.warning("ignoring %s%s=%r (keeping the default %r)", KEY_PREFIX, name, keys[name], default)
            return default

        def num(name: str, kind: type, default: Any) -> Any:
            if name not in keys:
                return default
            try:
                return kind(keys[name])
            except ValueError:
                return ignored(name, default)

        def choice(
            name: str, allowed: Sequence[str], default: str | None, *, strict: bool = False
        ) -> str | None:
            if name not in keys:
                return default
            value = keys[name].strip().lower()
            value = CHOICE_ALIASES.get(name, {}).get(value, value)
            if value not in allowed:
                if not strict:
                    return ignored(name, default)
                raise SchemaError(f"{KEY_PREFIX}{name} must be one of {list(allowed)}, got {keys[name]!r}")
            return value

        divisor = num("dict-divisor", int, DICT_DEFAULT_DIVISOR)
        ratio = num("dict-size-ratio", float, DICT_DEFAULT_SIZE_RATIO)
        if divisor < 1 or not 0 < ratio <= 1:
            raise SchemaError("lance-encoding:dict-divisor must be ≥ 1 and dict-size-ratio in (0, 1]")
        return cls(
            compression=choice("compression", COMPRESSION_SCHEMES, None, strict=True),
            compression_level=num("compression-level", int, None),
            rle_threshold=num("rle-threshold", float, None),
            bss=choice("bss", ("off", "on", "auto"), "auto") or "auto",
            dict_divisor=divisor,
            dict_size_ratio=ratio,
            dict_values_compression=choice("dict-values-compression", ("none", "zstd", "lz4"), "lz4")
            or "lz4",
            dict_values_compression_level=num("dict-values-compression-level", int, None),
            minichunk_size=num("minichunk-size", int, DEFAULT_MINICHUNK_SIZE),
            structural_encoding=choice("structural-encoding", ("miniblock", "fullzip"), None, strict=True),
            packed=_flag(keys, "packed"),
            blob=is_blob_field(metadata, data_type),
            dictionary=choice("dictionary", ("auto", "always", "never"), "auto") or "auto",
        )

    @property
    def general_scheme(self) -> str | None:
        return self.compression if self.compression in GENERAL_SCHEMES else None


def _flag(keys: Mapping[str, str], name: str) -> bool:
    return name in keys and keys[name].strip().lower() not in FALSE_WORDS


def flag_set(metadata: Mapping[Any, Any] | None, name: str) -> bool:
    """Whether the boolean key ``lance-encoding:<name>`` is set, checking no other key."""
    keys = {
        (k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
        for k, v in (metadata or {}).items()
    }
    return _flag(keys, KEY_PREFIX + name)


def is_blob_field(metadata: Mapping[Any, Any] | None, data_type: pa.DataType | None = None) -> bool:
    """``lance-encoding:blob`` set, checking no other key (readers ask only this, so a file whose
    other encoding keys hold values pylance ignores still reads). A struct (or, type unknown,
    any field) also marked ``packed`` is a ``lance.blob.v2`` description: a plain packed struct;
    on a ``large_binary`` field pylance ignores ``packed`` and stores blobs."""
    if not flag_set(metadata, "blob"):
        return False
    described = data_type is None or pa.types.is_struct(data_type)
    return not (described and flag_set(metadata, "packed"))


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


def check_writer_compression(compression: str | None) -> str | None:
    """A writer's ``compression`` option, normalised; anything unknown is an ``InvalidArgumentError``."""
    if compression is None:
        return None
    value = compression.strip().lower() if isinstance(compression, str) else compression
    if value not in WRITER_COMPRESSION_CHOICES:
        raise InvalidArgumentError(
            f"compression must be one of {list(WRITER_COMPRESSION_CHOICES)} or None, got {compression!r}"
        )
    return str(value)


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


def _valid_visible(leaf: ShreddedLeaf) -> np.ndarray | None:
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
    if n > probe and len(raw_values[:probe].unique()) >= limit:
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


def _dictionary_buffer(
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


def _dictionary_page(
    leaf: ShreddedLeaf, indices: DataBlock, items: DataBlock, options: EncodingOptions, version: FileVersion
) -> EncodedPage:
    """Mini-block page of dictionary indices, with the dictionary in page buffer 2."""
    compressed, desc = _fixed_values(indices, options)
    buffers, layout = miniblock.encode_page(
        leaf.levels, compressed, desc, version, _dictionary_buffer(items, options, version)
    )
    return EncodedPage(tuple(buffers), layout, leaf.num_rows)


def _fixed_values(block: DataBlock, options: EncodingOptions) -> tuple[Any, Any]:
    if options.compression == AUTO:
        return auto_fixed(block, options)
    return try_fixed_compressor(block, options).compress(block)  # type: ignore[no-any-return]


def _largest_value_bytes(block: DataBlock) -> int:
    if isinstance(block, VariableWidthBlock):
        return _variable_sizes(block)[1]
    if isinstance(block, FixedSizeListBlock):
        return block.dimension * _largest_value_bytes(block.child)
    if isinstance(block, FixedWidthBlock):
        return block.bits_per_value // 8
    raise UnsupportedFeatureError(f"cannot size a {type(block).__name__}")


def _null_items(block: DataBlock) -> bool:
    """An FSL block whose leaf items are of the null type (0 bits wide)."""
    while isinstance(block, FixedSizeListBlock):
        block = block.child
    return isinstance(block, FixedWidthBlock) and block.bits_per_value == 0


def encode_leaf_page(leaf: ShreddedLeaf, options: EncodingOptions, version: FileVersion) -> EncodedPage:
    """Encode one leaf column's page (steps 1-5 of the module docstring)."""
    levels = leaf.levels
    valid = _valid_visible(leaf)
    no_values = (
        len(leaf.values) == 0 or pa.types.is_null(leaf.values.type) or (valid is not None and not valid.any())
    )
    if no_values:
        buffers, layout = constant.encode_all_null(levels, version)
        return EncodedPage(tuple(buffers), layout, leaf.num_rows)
    if pa.types.is_dictionary(leaf.values.type):
        keys = leaf.values.indices
        return _dictionary_page(leaf, to_block(keys), to_block(leaf.values.dictionary), options, version)
    if version is not FileVersion.V2_1:
        value = try_constant_value(leaf, valid)
        if value is not None:
            buffers, layout = constant.encode_constant(levels, value, version)
            return EncodedPage(tuple(buffers), layout, leaf.num_rows)
    dtype = leaf.values.type
    if pa.types.is_struct(dtype):
        return _packed_struct_page(leaf, options, version)
    dictionary = try_dictionary(leaf, options, version)
    if dictionary is not None:
        return _dictionary_page(leaf, dictionary.indices, dictionary.items, options, version)
    block = to_block(leaf.values)
    full_zip = _largest_value_bytes(block) >= FULLZIP_MIN_VALUE_BYTES
    if options.structural_encoding is not None:
        full_zip = options.structural_encoding == "fullzip"
    if _null_items(block):
        if options.structural_encoding == "miniblock":  # pylance 14 panics on it
            raise UnsupportedFeatureError("a fixed_size_list of nulls cannot be stored in mini-block")
        full_zip = True  # FSL<null> rows are validity bytes only: pylance always writes them full-zip
    if full_zip:
        block = fullzip.byte_aligned(block)
        if options.compression == AUTO:
            stored, desc = auto_per_value(block, dtype, options)
        else:
            stored, desc = try_per_value_compressor(block, dtype, options).compress_per_value(block)
        buffers, layout = fullzip.encode_page(levels, stored, desc, version)
        return EncodedPage(tuple(buffers), layout, leaf.num_rows)
    if isinstance(block, VariableWidthBlock):
        if options.compression == AUTO:
            compressed, desc = auto_variable(block, dtype, options, version)
        else:
            compressed, desc = try_variable_compressor(block, dtype, options, version).compress(block)
    else:
        compressed, desc = _fixed_values(block, options)
    buffers, layout = miniblock.encode_page(levels, compressed, desc, version)
    return EncodedPage(tuple(buffers), layout, leaf.num_rows)


def _has_child_nulls(leaf: ShreddedLeaf) -> bool:
    """Whether a child of the struct leaf is null in a slot where the struct itself is valid."""
    values = leaf.values
    valid = _valid_visible(leaf)
    for i in range(values.type.num_fields):
        child = values.field(i)
        if child.null_count == 0:
            continue
        nulls = child.is_null().to_numpy(zero_copy_only=False)
        if bool(np.any(nulls if valid is None else nulls & valid)):
            return True
    return False


def _packed_struct_page(leaf: ShreddedLeaf, options: EncodingOptions, version: FileVersion) -> EncodedPage:
    """Packed struct: mini-block ``PackedStruct`` for fixed-width children, else (2.2 only)
    full-zip ``VariablePackedStruct``. Packed rows have no room for a child's validity, so a
    child null inside a valid struct is refused (as pylance refuses it) rather than lost."""
    if _has_child_nulls(leaf):
        raise UnsupportedFeatureError("a packed struct's children cannot be null where the struct is valid")
    if any(pa.types.is_dictionary(child.type) for child in leaf.values.type):
        # pylance 14 refuses these too (its packing has no place for a child's dictionary).
        raise UnsupportedFeatureError("a packed struct cannot hold dictionary-typed children")
    block = to_block(leaf.values)
    if not isinstance(block, StructBlock):
        raise UnsupportedFeatureError("packed struct values did not form a struct block")
    fixed = all(isinstance(c, FixedWidthBlock) and c.bits_per_value % 8 == 0 for c in block.children)
    if fixed and options.structural_encoding != "fullzip":
        compressed, desc = packed_struct.PackedStructCompressor().compress(block)
        buffers, layout = miniblock.encode_page(leaf.levels, compressed, desc, version)
        return EncodedPage(tuple(buffers), layout, leaf.num_rows)
    if fixed:
        stored, desc = packed_struct.PackedStructCompressor().compress_per_value(block)
    elif version is FileVersion.V2_1:
        raise UnsupportedFeatureError("packed structs with variable-width children need Lance 2.2")
    else:
        stored, desc = packed_struct.VariablePackedStructCompressor().compress(block)
    buffers, layout = fullzip.encode_page(leaf.levels, stored, desc, version)
    return EncodedPage(tuple(buffers), layout, leaf.num_rows)


# --- field-level entry points ---------------------------------------------------------------------


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
    _check_structural(version)
    return _column_count(field)


def _column_count(field: pa.Field) -> int:
    if is_leaf_field(field) or (pa.types.is_struct(field.type) and is_blob_field(field.metadata, field.type)):
        return 1
    return sum(_column_count(child) for child in _children(field))


def _contains_map(dtype: pa.DataType) -> bool:
    if pa.types.is_map(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(_contains_map(dtype.field(i).type) for i in range(dtype.num_fields))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        return _contains_map(dtype.value_type)
    return False


def _children(field: pa.Field) -> list[pa.Field]:
    dtype = field.type
    return (
        [dtype.field(i) for i in range(dtype.num_fields)]
        if pa.types.is_struct(dtype)
        else [child_field(field)]
    )


def _holds_plain_struct(field: pa.Field) -> bool:
    """A (not packed) struct of more than one leaf column at or below ``field``."""
    if is_leaf_field(field):
        return False
    if pa.types.is_struct(field.type) and count_leaves(field) > 1:
        return True
    return any(_holds_plain_struct(c) for c in _children(field))


def _marker_refusal(field: pa.Field, version: FileVersion, *, eager: bool) -> LanceOpsError | None:
    """Markers on a non-leaf field that make a file pylance 14 rejects, refused as pylance's
    writer refuses them or, where it writes them, because its reader cannot read them back:

    * ``lance-encoding:blob`` on a list, struct or map (pylance: "Blob encoding is not available";
      its reader would take the field for one blob column);
    * ``lance-encoding:packed`` on a list or map holding a (not packed) struct of several leaf
      columns (pylance writes a column per struct child, its reader expects one column).

    ``eager``: the refusals pylance makes when the schema is given (a blob list or map; a blob
    struct in 2.1); the others only once rows arrive (pylance writes and reads back such a
    field in a file without rows).
    """
    if is_leaf_field(field):
        return None
    is_struct = pa.types.is_struct(field.type)
    if is_blob_field(field.metadata, field.type) and eager == (not is_struct or version is FileVersion.V2_1):
        return SchemaError(f"blob field {field.name!r} must be large_binary, not {field.type}")
    if not eager and not is_struct and flag_set(field.metadata, "packed") and _holds_plain_struct(field):
        return UnsupportedFeatureError(
            f"field {field.name!r} ({field.type}) marked lance-encoding:packed holds a struct: "
            "pylance 14 cannot read such a file back"
        )
    for child in _children(field):
        refusal = _marker_refusal(child, version, eager=eager)
        if refusal is not None:
            return refusal
    return None


def _check_structural(version: FileVersion) -> None:
    if version not in (FileVersion.V2_1, FileVersion.V2_2):
        raise UnsupportedFeatureError(f"the structural codec handles Lance 2.1 / 2.2, not {version}")


class StructuralFieldEncoder(FieldEncoder):
    """Encodes one top-level field: one page per leaf column per :meth:`encode` call."""

    def __init__(self, field: pa.Field, version: FileVersion, compression: str | None = None) -> None:
        _check_structural(version)
        self.field = field
        self.version = version
        if version is FileVersion.V2_1 and _contains_map(field.type):
            raise UnsupportedFeatureError("Map data type is not enabled in Lance 2.1")
        self.leaves = leaf_fields(field)
        # Like pylance, a leaf follows its own field's metadata (a list's or struct's keys do not
        # reach the leaves below it). ``compression`` (the writer's option) is the scheme of every
        # leaf that sets none itself.
        default = check_writer_compression(compression)
        self.options = [EncodingOptions.from_metadata(leaf.metadata, leaf.type) for leaf in self.leaves]
        if default is not None:
            self.options = [
                o if o.compression is not None else replace(o, compression=default) for o in self.options
            ]
        self._refusal: LanceOpsError | None = None
        for leaf, options in zip(self.leaves, self.options, strict=True):
            if options.blob and pa.types.is_binary(leaf.type):
                # pylance takes a binary blob field and refuses it once values arrive (a file
                # without rows is written and read back).
                self._refusal = SchemaError(f"blob field {leaf.name!r} must be large_binary, not binary")
            elif options.blob:
                blob.check_blob_type(leaf.name, leaf.type)
        refusal = _marker_refusal(field, version, eager=True)
        if refusal is not None:
            raise refusal
        self._refusal = _marker_refusal(field, version, eager=False) or self._refusal
        self.writes_external = any(options.blob for options in self.options)
        self.num_columns = _column_count(field)  # a blob struct (never given rows) takes one column

    def encode(self, array: pa.Array, external: WriteExternal | None = None) -> list[list[EncodedPage]]:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if not array.type.equals(self.field.type):
            raise SchemaError(f"field {self.field.name!r}: expected {self.field.type}, got {array.type}")
        if len(array) == 0:
            return [[] for _ in range(self.num_columns)]
        if self._refusal is not None:
            raise self._refusal
        leaves = shred(array, self.field)
        return [
            [
                blob.encode_page(leaf, self.version, external)
                if options.blob
                else encode_leaf_page(leaf, options, self.version)
            ]
            for leaf, options in zip(leaves, self.options, strict=True)
        ]


class StructuralFieldDecoder(FieldDecoder):
    """Reads rows of one top-level field from its leaf columns' pages."""

    def __init__(self, field: pa.Field, columns: Sequence[Sequence[PageInfo]], version: FileVersion) -> None:
        _check_structural(version)
        self.field = field
        self.version = version
        self.leaves = leaf_fields(field)
        if len(columns) != len(self.leaves):
            raise CorruptFileError(
                "<file>", f"field {field.name!r} needs {len(self.leaves)} columns, got {len(columns)}"
            )
        self.columns = [list(pages) for pages in columns]
        # Per column: first row and end row of every page, for locating requested rows.
        self._bounds = [
            (
                np.array([p.first_row for p in pages], np.int64),
                np.array([p.first_row + p.num_rows for p in pages], np.int64),
            )
            for pages in self.columns
        ]
        self._readers: dict[tuple[int, int], PageReader] = {}

    def _reader(self, col: int, page: int) -> PageReader:
        key = (col, page)
        if key not in self._readers:
            info = self.columns[col][page]
            self._readers[key] = page_reader(info, self.leaves[col].type, self.version)
        return self._readers[key]

    def _read_column(self, fetch: Fetch, col: int, rows: np.ndarray) -> DecodedLeaf:
        firsts, ends = self._bounds[col]
        if len(firsts) == 1:
            # One page (small files): no page lookup; rows are sorted, so the ends bound them all.
            if len(rows) and (int(rows[0]) < int(firsts[0]) or int(rows[-1]) >= int(ends[0])):
                raise CorruptFileError(
                    "<file>", f"rows of field {self.field.name!r} are not covered by its pages"
                )
            return self._reader(col, 0).read(fetch, rows - firsts[0])
        which = np.searchsorted(firsts, rows, side="right") - 1
        if len(rows) and (which.min() < 0 or (rows >= ends[which]).any()):
            raise CorruptFileError(
                "<file>", f"rows of field {self.field.name!r} are not covered by its pages"
            )
        parts = []
        cuts = (np.flatnonzero(np.diff(which)) + 1).tolist()  # rows are sorted: one slice per page
        for lo, hi in zip([0, *cuts], [*cuts, len(rows)], strict=True):
            page = int(which[lo])
            parts.append(self._reader(col, page).read(fetch, rows[lo:hi] - firsts[page]))
        return concat_leaves(parts)

    def read(self, fetch: Fetch, rows: range | np.ndarray) -> pa.Array:
        """Rows in the order given; unsorted or repeated indices are read once and reordered."""
        if isinstance(rows, range):
            idx = np.arange(rows.start, rows.stop, rows.step or 1, dtype=np.int64)
        else:
            idx = np.asarray(rows, dtype=np.int64)
        if len(idx) == 0:
            return pa.array([], self.field.type)
        order = None
        if len(idx) > 1 and bool((idx[1:] <= idx[:-1]).any()):
            idx, order = np.unique(idx, return_inverse=True)
        leaves = [self._read_column(fetch, col, idx) for col in range(len(self.leaves))]
        try:
            out = unshred(self.field, leaves)
        except LanceOpsError:
            raise
        except (IndexError, ValueError, pa.ArrowException) as exc:
            raise CorruptFileError(
                "<file>", f"field {self.field.name!r}: levels do not rebuild: {exc}"
            ) from exc
        return out if order is None else out.take(pa.array(order.reshape(-1)))


def make_field_encoder(field: pa.Field, version: FileVersion, compression: str | None = None) -> FieldEncoder:
    return StructuralFieldEncoder(field, version, compression)


def make_field_decoder(
    field: pa.Field, columns: Sequence[Sequence[PageInfo]], version: FileVersion
) -> FieldDecoder:
    return StructuralFieldDecoder(field, columns, version)
