"""RLE: run values plus u8 run lengths (spec §7.7).

Description ``Rle { values = Flat(8|16|32|64), run_lengths = Flat(8) }`` — the only form the
2.1/2.2 readers accept. Runs longer than 255 are split into runs of 255 and a remainder
(a run of 1 000 becomes lengths ``255 255 255 235``).

* Mini-block: two buffers per chunk: buffer 0 = the run values (``runs × width`` bytes),
  buffer 1 = one u8 length per run. Runs never cross chunk boundaries. Chunk sizing
  (§3.7): the last chunk takes every remaining value when there are ≤ 4 096 of them and
  their runs fit in 8 186 bytes of values + lengths; otherwise the chunk is the largest
  power of two ≤ 4 096 (and ≤ the values left) whose runs fit. Example: 4 096 int32
  copies of 7 → 17 runs: 68 value bytes + 17 length bytes (``ff`` × 16, ``10``).
* Block (level slices, constant-page levels): ``u64 values_bytes | values | u8 lengths``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import (
    BlockDecompressor,
    ChunkSpans,
    Context,
    MiniBlockCompressed,
    MiniBlockCompressor,
    MiniBlockDecompressor,
    as_u8,
    chunk_descriptors,
    flat_bits,
    flat_desc,
    gather_spans,
    guarded,
    register,
    require,
)
from lance_ops.encoding.data import DataBlock, FixedWidthBlock
from lance_ops.errors import UnsupportedEncodingError

MAX_RUN = 255
MAX_CHUNK_VALUES = 4096
MAX_CHUNK_BYTES = 8186
_WIDTHS = (8, 16, 32, 64)


def _unsigned(block: DataBlock) -> np.ndarray:
    if not isinstance(block, FixedWidthBlock) or block.bits_per_value not in _WIDTHS:
        raise UnsupportedEncodingError("RLE compresses 8/16/32/64-bit fixed-width blocks")
    return block.view(f"<u{block.bits_per_value // 8}")


def _run_bounds(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end index of each maximal run (unsplit)."""
    if len(values) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1)).astype(np.int64)
    ends = np.concatenate((starts[1:], [len(values)])).astype(np.int64)
    return starts, ends


def encode_runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(run values, u8 run lengths) of ``values`` with runs split at 255."""
    starts, ends = _run_bounds(values)
    lengths = ends - starts
    pieces = -(-lengths // MAX_RUN)
    run_lengths = np.full(int(pieces.sum()), MAX_RUN, dtype=np.uint8)
    run_lengths[np.cumsum(pieces) - 1] = lengths - MAX_RUN * (pieces - 1)
    return np.repeat(values[starts], pieces), run_lengths


def _split_runs(lengths: np.ndarray) -> int:
    """Runs written for maximal runs of ``lengths`` values once split at 255."""
    return int((-(-lengths // MAX_RUN)).sum())


def run_count(values: np.ndarray) -> int:
    """Number of maximal runs (unsplit) of ``values``, counted without listing them."""
    if len(values) == 0:
        return 0
    return 1 + int(np.count_nonzero(values[1:] != values[:-1]))


def split_run_count(values: np.ndarray) -> int:
    """Number of runs :func:`encode_runs` writes for ``values``."""
    starts, ends = _run_bounds(values)
    return _split_runs(ends - starts)


def estimate_rle_size(values: np.ndarray) -> int:
    """Strategy estimate of the RLE size: ``(runs + n / 255) × (width + 1)`` bytes (§8.1)."""
    values = np.ascontiguousarray(values).reshape(-1)
    runs = run_count(values)
    return (runs + len(values) // MAX_RUN) * (values.dtype.itemsize + 1)


def rle_chunk_counts(values: np.ndarray) -> list[int]:
    """Values per mini-block chunk (module docstring)."""
    width = values.dtype.itemsize
    counts: list[int] = []
    start = 0
    n = len(values)
    while start < n:
        left = n - start
        window = values[start : start + min(left, MAX_CHUNK_VALUES)]
        run_starts, run_ends = _run_bounds(window)

        def fits(m: int, run_starts: np.ndarray = run_starts, run_ends: np.ndarray = run_ends) -> bool:
            inside = run_starts < m
            lengths = np.minimum(run_ends[inside], m) - run_starts[inside]
            return _split_runs(lengths) * (width + 1) <= MAX_CHUNK_BYTES

        if left <= MAX_CHUNK_VALUES and fits(left):
            counts.append(left)
            break
        m = 1 << (min(left, MAX_CHUNK_VALUES).bit_length() - 1)
        while m > 1 and not fits(m):
            m //= 2
        counts.append(m)
        start += m
    return counts


def rle_desc(bits: int) -> pb.CompressiveEncoding:
    return pb.CompressiveEncoding(rle=pb.Rle(values=flat_desc(bits), run_lengths=flat_desc(8)))


class RleCompressor(MiniBlockCompressor):
    """RLE: ``compress`` = mini-block (two buffers per chunk); ``compress_block`` = block form."""

    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        values = _unsigned(block)
        counts = rle_chunk_counts(values)
        bounds = np.cumsum([0, *counts])
        encoded = [encode_runs(values[bounds[i] : bounds[i + 1]]) for i in range(len(counts))]
        width = values.dtype.itemsize
        sizes = np.array([(len(r) * width, len(r)) for _, r in encoded], dtype=np.int64).reshape(-1, 2)
        run_values = np.concatenate([v for v, _ in encoded]) if encoded else values[:0]
        run_lengths = np.concatenate([r for _, r in encoded]) if encoded else np.zeros(0, np.uint8)
        compressed = MiniBlockCompressed(
            (run_values.view(np.uint8), run_lengths), chunk_descriptors(counts, sizes), len(values)
        )
        return compressed, rle_desc(width * 8)

    def compress_block(self, block: DataBlock) -> tuple[bytes, pb.CompressiveEncoding]:
        values = _unsigned(block)
        run_values, run_lengths = encode_runs(values)
        header = np.array([run_values.nbytes], dtype="<u8").tobytes()
        return header + run_values.tobytes() + run_lengths.tobytes(), rle_desc(values.dtype.itemsize * 8)


class _RleReader:
    def __init__(self, bits: int) -> None:
        self.dtype = np.dtype(f"<u{bits // 8}")
        self.bits = bits

    @classmethod
    def from_description(cls, desc: pb.Rle) -> _RleReader:
        try:
            bits = flat_bits(desc.values, _WIDTHS)
            flat_bits(desc.run_lengths, (8,))
        except UnsupportedEncodingError as exc:
            raise UnsupportedEncodingError(
                f"RLE requires flat values and flat u8 run lengths: {exc}"
            ) from exc
        return cls(bits)

    def _expand(self, values: np.ndarray, lengths: np.ndarray, num_values: int) -> FixedWidthBlock:
        require(len(values) % self.dtype.itemsize == 0, "RLE values buffer is not a whole number of values")
        run_values = values.view(self.dtype)
        require(
            len(run_values) == len(lengths), f"RLE has {len(run_values)} values but {len(lengths)} lengths"
        )
        require(
            int(lengths.sum(dtype=np.int64)) == num_values, f"RLE runs do not add up to {num_values} values"
        )
        return FixedWidthBlock.from_values(np.repeat(run_values, lengths))


@register(Context.MINIBLOCK, "rle")
class RleMiniBlockDecompressor(_RleReader, MiniBlockDecompressor):
    @guarded
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        require(len(buffers) == 2, f"RLE expects two mini-block buffers, got {len(buffers)}")
        return self._expand(as_u8(buffers[0]), as_u8(buffers[1]), num_values)


@register(Context.BLOCK, "rle")
class RleBlockDecompressor(_RleReader, BlockDecompressor):
    @guarded
    def decompress(self, data: memoryview, num_values: int) -> DataBlock:
        raw = as_u8(data)
        require(len(raw) >= 8, "RLE block is shorter than its header")
        values_bytes = int(raw[:8].view("<u8")[0])
        require(8 + values_bytes <= len(raw), "RLE block values run past the buffer")
        return self._expand(raw[8 : 8 + values_bytes], raw[8 + values_bytes :], num_values)

    @guarded
    def decompress_chunks(self, buffers: Sequence[memoryview], counts: Sequence[int]) -> DataBlock:
        """Decode many blocks (the level slices of mini-block chunks) at once: every header is
        read, every block's runs cut out and all runs expanded in one pass each, not one call
        per block."""
        spans = ChunkSpans.of(buffers)
        nums = np.asarray(counts, np.int64)
        item = self.dtype.itemsize
        starts, sizes = spans.starts, spans.sizes
        require(bool((sizes >= 8).all()), "RLE block is shorter than its header")
        head = spans.blob[starts[:, None] + np.arange(8)]
        values_bytes = np.ascontiguousarray(head).view("<u8").reshape(-1).astype(np.int64)
        runs = values_bytes // item
        require(
            bool(
                ((values_bytes % item == 0) & (values_bytes >= 0) & (8 + values_bytes + runs == sizes)).all()
            ),
            "RLE block: its values and run lengths do not fill it",
        )
        values = gather_spans(spans.blob, starts + 8, values_bytes)
        lengths = gather_spans(spans.blob, starts + 8 + values_bytes, runs)
        ends = np.cumsum(runs)
        total = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))
        require(
            bool((total[ends] - total[ends - runs] == nums).all()), "RLE runs do not add up to their values"
        )
        return FixedWidthBlock.from_values(np.repeat(np.ascontiguousarray(values).view(self.dtype), lengths))
