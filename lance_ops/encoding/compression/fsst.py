"""FSST: string compression with a per-page table of up to 255 symbols (spec §7.6).

Description ``Fsst { symbol_table, values = Variable(Flat 32 | 64) }``. Every string is coded
on its own; in mini-block pages the coded strings are then chunked by the Variable rules, in
full-zip pages each coded string is one per-value item.

Symbol table, always 2 312 bytes (``8 + 256·8 + 256``)::

    byte 0      n, number of symbols (0..255)
    byte 1      encoder terminator byte (ignored when decoding)
    byte 2      encoder suffix limit (ignored when decoding)
    byte 3      bit 0: 1 = data is FSST-coded, 0 = data is stored uncompressed
    bytes 4..7  magic 54 53 53 46 (u32 0x46535354)
    8 .. 8+8n   symbol i as 8 bytes (its bytes first, zero padded)
    8+8n..8+9n  length of symbol i (1..8)
    rest        zero

Coded string: a sequence of code bytes; ``0xFF`` escapes the next byte (copied literally);
any other code c < n stands for the first ``len[c]`` bytes of symbol c. Example with symbols
``0 = "ab"``, ``1 = "c"``: ``"abcabz"`` → ``00 01 00 ff 7a``.

Coding and decoding are byte loops compiled with numba (``_fsst_kernels``): a token's length
decides where the next one starts. Small pages (below :mod:`lance_ops.encoding.kernels`'
thresholds, until a compiled kernel has run in the process) are coded by a numpy form instead
(``_fsst_numpy``: the best match at every position, then the token starts by pointer
doubling), so that a small first write does not load numba; both write the same bytes.
Greedy longest match, four strings coded in turns: a 65 536-entry table gives the best match
of at most two bytes; symbols of 3..8 bytes are found, on text, by probing one collision-free
hash table per length (six independent lookups, no branch on which matches), or, where few
positions can begin one, in a bucket chosen by a hash of their first three bytes (the FSST
paper's scheme, with buckets of up to 8 symbols instead of one, which kept the 4-word text
column's size within 3 %); tables without long symbols skip both and are coded in one pass over
the page's bytes instead, with no branch at the strings' ends. Tables built here keep to
the buckets; a table given by the caller that fits neither goes to the general kernel, which
lists the long symbols by their first two bytes. All kernels write the same bytes.

The encoder builds a table from ~16 KiB samples of strings (each cut to 256 bytes): it starts
from the substrings of length 1..8 with the highest ``count × length`` in one sample, then
each of a few rounds codes a *different* sample with the table and rescores the symbols used,
the escaped bytes and the joins of adjacent tokens (the Boncz–Neumann–Leis scheme in
simplified form). Scoring on unseen strings keeps symbols that generalise: long runs that
only occur in the strings they came from give way to bytes and short joins, so e.g. 2 000
strings ``"{i} " × 90`` code to 60 % of their size instead of falling back to raw. A last
round on a fresh sample keeps only the symbols it used. Candidates are listed by one compiled
pass per round (numpy forms for small pages), merged by a numba hash table, and only the best
~1 000 are sorted.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding import kernels
from lance_ops.encoding.compression import _fsst_numpy
from lance_ops.encoding.compression.base import (
    Context,
    MiniBlockCompressed,
    MiniBlockCompressor,
    MiniBlockDecompressor,
    PerValueDecompressor,
    as_u8,
    decompressor_for,
    guarded,
    ranges,
    register,
    require,
)
from lance_ops.encoding.compression.variable import VariableCompressor
from lance_ops.encoding.data import DataBlock, VariableWidthBlock
from lance_ops.errors import UnsupportedEncodingError

TABLE_SIZE = 8 + 256 * 8 + 256
MAGIC = b"\x54\x53\x53\x46"
ESCAPE = 0xFF
MAX_SYMBOLS = 255
MAX_SYMBOL_LEN = 8
SAMPLE_BYTES = 16 * 1024
SAMPLE_PIECE = 256
REFINE_ROUNDS = 4


# --- symbol table ---------------------------------------------------------------------------------


class SymbolTable:
    """A parsed FSST symbol table: ``symbols`` (n × 8 uint8) and ``lengths`` (n,)."""

    def __init__(self, symbols: np.ndarray, lengths: np.ndarray, coded: bool = True) -> None:
        self.symbols = np.asarray(symbols, dtype=np.uint8).reshape(-1, 8)
        self.lengths = np.asarray(lengths, dtype=np.uint8)
        self.coded = coded
        self._kernel_arrays: tuple[np.ndarray, np.ndarray] | None = None
        if len(self.symbols) > MAX_SYMBOLS or len(self.symbols) != len(self.lengths):
            raise ValueError("an FSST table holds at most 255 symbols, one length each")

    @classmethod
    def parse(cls, table: bytes | memoryview) -> SymbolTable:
        raw = as_u8(table)
        require(len(raw) >= 8, "FSST symbol table is shorter than its header")
        require(raw[4:8].tobytes() == MAGIC, "FSST symbol table has a bad magic")
        n = int(raw[0])
        require(n <= MAX_SYMBOLS, "FSST symbol table holds more than 255 symbols")
        require(len(raw) >= 8 + 9 * n, "FSST symbol table is truncated")
        lengths = raw[8 + 8 * n : 8 + 9 * n]
        require(bool(np.all((lengths >= 1) & (lengths <= MAX_SYMBOL_LEN))), "FSST symbol length out of 1..8")
        return cls(raw[8 : 8 + 8 * n], lengths, coded=bool(raw[3] & 1))

    def to_bytes(self) -> bytes:
        out = np.zeros(TABLE_SIZE, dtype=np.uint8)
        n = len(self.lengths)
        out[0] = n
        out[3] = 1 if self.coded else 0
        out[4:8] = np.frombuffer(MAGIC, dtype=np.uint8)
        out[8 : 8 + 8 * n] = self.symbols.reshape(-1)
        out[8 + 8 * n : 8 + 9 * n] = self.lengths
        return out.tobytes()

    def kernel_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The decoder's view, indexed by code byte: each symbol as a little-endian uint64 and
        its length (uint8; 1 for the escape 0xFF, 0 for codes beyond the table)."""
        if self._kernel_arrays is None:
            n = len(self.lengths)
            words = np.zeros((256, 8), np.uint8)
            words[:n] = self.symbols
            lengths = np.zeros(256, np.uint8)
            lengths[:n] = self.lengths
            lengths[ESCAPE] = 1
            self._kernel_arrays = (words.view("<u8").reshape(-1), lengths)
        return self._kernel_arrays


# --- decoding ---------------------------------------------------------------------------------------


def fsst_decode(
    data: np.ndarray, offsets: np.ndarray, table: SymbolTable, offsets_dtype: npt.DTypeLike = np.int64
) -> tuple[np.ndarray, np.ndarray]:
    """Decode coded strings (``data`` sliced by Arrow-style ``offsets``) → (bytes, offsets of
    ``offsets_dtype`` starting at 0). ``data`` starts where ``offsets[0]`` points."""
    offs = np.asarray(offsets)
    codes = as_u8(data)
    size = int(offs[-1]) - int(offs[0])
    require(size >= 0, "FSST offsets are not monotonic")
    require(size <= len(codes), "FSST data is shorter than its offsets")
    codes = np.ascontiguousarray(codes[:size])
    if not table.coded or size == 0:
        return codes, (offs.astype(np.int64) - int(offs[0])).astype(offsets_dtype, copy=False)
    from lance_ops.encoding.compression import _fsst_kernels

    symbols, lengths = table.kernel_arrays()
    total, missing = _fsst_kernels.decoded_size(codes, lengths)
    out = np.empty(total + 8, dtype=np.uint8)  # slack for the 8-byte symbol stores
    out_offs = np.empty(len(offs), dtype=offsets_dtype)
    status = _fsst_kernels.decode(codes, offs, symbols, lengths, out, out_offs)
    require(status != -1, "FSST escape byte at the end of a string")
    require(status != -3, "FSST offsets are not monotonic")
    require(not missing, "FSST code refers to a missing symbol")
    return out[:total], out_offs


def _decode_block(block: DataBlock, table: SymbolTable) -> VariableWidthBlock:
    require(isinstance(block, VariableWidthBlock), "FSST values must decode to a variable-width block")
    assert isinstance(block, VariableWidthBlock)
    data, offs = fsst_decode(as_u8(block.data), block.offsets, table, block.offsets.dtype)
    return VariableWidthBlock(offs, data, block.num_values)


class _FsstReader:
    context: Context

    def __init__(self, table: SymbolTable, inner: object) -> None:
        self.table = table
        self.inner = inner

    @classmethod
    def from_description(cls, desc: pb.Fsst) -> _FsstReader:
        if desc.values.WhichOneof("compression") != "variable":
            raise UnsupportedEncodingError("FSST values must be Variable")
        if len(desc.symbol_table) < 8 or desc.symbol_table[4:8] != MAGIC:
            raise UnsupportedEncodingError("FSST symbol table has a bad header")
        return cls(SymbolTable.parse(desc.symbol_table), decompressor_for(cls.context, desc.values))


@register(Context.MINIBLOCK, "fsst")
class FsstMiniBlockDecompressor(_FsstReader, MiniBlockDecompressor):
    context = Context.MINIBLOCK

    @guarded
    def decompress(self, buffers: Sequence[memoryview], num_values: int) -> DataBlock:
        return _decode_block(self.inner.decompress(buffers, num_values), self.table)  # type: ignore[attr-defined]

    @guarded
    def decompress_chunks(self, buffers: Sequence[memoryview], counts: Sequence[int]) -> DataBlock:
        """Many chunks at once: the Variable chunks are joined, then decoded in one pass."""
        return _decode_block(self.inner.decompress_chunks(buffers, counts), self.table)  # type: ignore[attr-defined]


@register(Context.PER_VALUE, "fsst")
class FsstPerValueDecompressor(_FsstReader, PerValueDecompressor):
    context = Context.PER_VALUE

    @guarded
    def decompress(self, block: DataBlock) -> DataBlock:
        return _decode_block(self.inner.decompress(block), self.table)  # type: ignore[attr-defined]


# --- encoding ---------------------------------------------------------------------------------------


def _value_ends(offs: np.ndarray, size: int) -> np.ndarray:
    """For every byte position, the end offset of the string holding it."""
    lengths = np.diff(offs)
    return np.repeat(offs[1:], lengths) if size else np.zeros(0, np.int64)


def _gram(padded: np.ndarray, size: int, k: int) -> np.ndarray:
    """Little-endian uint64 key of the k bytes starting at each position."""
    key = np.zeros(size, dtype=np.uint64)
    for j in range(k):
        key |= padded[j : j + size] << np.uint64(8 * j)
    return key


LANES = 4  # strings coded in turns by the coding kernels (their lookups are latency bound)
HASHED_LANES = 4  # fixed in _fsst_kernels.encode_hashed_lanes


class _Lookup:
    """The coding kernel's view of a table given as uint64 keys and lengths: symbols of three or
    more bytes grouped by their first two bytes (longest first), the best match of at most two
    bytes for every two-byte value, both in one uint32 per two-byte value (``info``: bits 0..15
    the ``cand_*`` range, bits 16..31 the short match's code and length), and the one-byte
    symbols by byte (``byte_code``, -1 when none)."""

    def __init__(self, keys: np.ndarray, lengths: np.ndarray) -> None:
        keys = np.asarray(keys, np.uint64)
        lengths = np.asarray(lengths, np.int64)
        codes = np.arange(len(keys), dtype=np.int64)
        long = lengths >= 3
        prefix = (keys[long] & np.uint64(0xFFFF)).astype(np.int64)
        order = np.lexsort((-lengths[long], prefix))
        long_start = np.searchsorted(prefix[order], np.arange(0x10001)).astype(np.uint32)
        self.cand_key = np.ascontiguousarray(keys[long][order])
        self.cand_len = np.ascontiguousarray(lengths[long][order])
        self.cand_code = np.ascontiguousarray(codes[long][order])
        self.byte_code = np.full(256, -1, np.int32)
        single = lengths == 1
        self.byte_code[keys[single].astype(np.int64)] = codes[single]
        pair_values = np.arange(0x10000)
        first_byte = self.byte_code[pair_values & 0xFF]
        short = np.where(first_byte >= 0, first_byte | (1 << 8), 0).astype(np.uint32)  # code | length << 8
        double = lengths == 2
        short[keys[double].astype(np.int64)] = codes[double] | (2 << 8)
        self.info = long_start[:-1] | long_start[1:] << np.uint32(8) | short << np.uint32(16)


# the hashed kernels' compile-time constants, repeated so that importing this module does not load
# numba (tests/encoding/test_compression_fsst.py checks they agree)
HASH_BITS = 9
HASH_MULT = np.uint64(0x9E3779B1)
BUCKET = 8


def _slot(keys: np.ndarray) -> np.ndarray:
    """Hash bucket of each symbol's first three bytes (as the hashed kernels compute it)."""
    low = np.asarray(keys, np.uint64) & np.uint64(0xFFFFFF)
    return ((low * HASH_MULT) >> np.uint64(24)) & np.uint64((1 << HASH_BITS) - 1)


def _rank(grouped: np.ndarray) -> np.ndarray:
    """For sorted values, each one's place among its equals (0, 1, ...)."""
    if len(grouped) == 0:
        return np.zeros(0, np.int64)
    start = np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1])))
    return np.arange(len(grouped)) - np.repeat(start, np.diff(np.append(start, len(grouped))))


def _pack(codes: np.ndarray, taken: np.ndarray | int, written: np.ndarray | int) -> np.ndarray:
    """Kernel entries: code | input bytes << 8 | output bytes << 12."""
    return (
        np.asarray(codes, np.int64) | np.asarray(taken, np.int64) << 8 | np.asarray(written, np.int64) << 12
    )


class _HashedLookup:
    """The hashed kernels' view of a table holding at most ``BUCKET`` symbols of 3..8 bytes per
    hash bucket (``usable`` says whether it does): ``slots``, ``BUCKET`` (key, entry) pairs per
    bucket, longest symbol first (entry 0 after the last); ``short`` the best match of at most
    two bytes for every two-byte value, then of one byte for every byte, an escape (code 255,
    one byte in, two out) when none. Entries as ``_pack`` makes them."""

    def __init__(self, keys: np.ndarray, lengths: np.ndarray) -> None:
        keys = np.asarray(keys, np.uint64)
        lengths = np.asarray(lengths, np.int64)
        if kernels._compiled(False):  # one compiled call once numba runs (every round of a build)
            from lance_ops.encoding.compression import _fsst_kernels

            self.short, self.slots, self.usable = _fsst_kernels.hashed_lookup(keys, lengths)
            return
        codes = np.arange(len(keys), dtype=np.int64)
        long = np.flatnonzero(lengths >= 3)
        slot = _slot(keys[long]).astype(np.int64)
        long, slot = long[np.lexsort((-lengths[long], slot))], np.sort(slot)  # longest first
        place = slot * BUCKET + _rank(slot)
        self.usable = len(slot) == 0 or int(_rank(slot).max()) < BUCKET
        self.slots = np.zeros(2 * BUCKET << HASH_BITS, np.uint64)
        if self.usable:
            self.slots[2 * place] = keys[long]
            self.slots[2 * place + 1] = _pack(codes[long], lengths[long], 1).astype(np.uint64)
        single = np.full(256, ESCAPE | 1 << 8 | 2 << 12, np.int64)
        one = lengths == 1
        single[keys[one].astype(np.int64)] = _pack(codes[one], 1, 1)
        self.short = np.tile(single.astype(np.uint16), 257)  # by the low byte of two, then by one
        two = lengths == 2
        self.short[keys[two].astype(np.int64)] = _pack(codes[two], 2, 1)


# the probed kernels' constant (as for the hashed ones, checked against _fsst_kernels by a test)
PROBE_BITS = 11
PROBE_SAMPLE = 4096  # bytes of strings coded to choose the coding kernel ...
PROBE_MIN_SHARE = 0.4  # ... the share of their tokens that are long symbols to probe for all


def _multipliers() -> np.ndarray:
    """Odd 64-bit multipliers tried in turn for each length's perfect hash (fixed, so that the
    kernels' tables depend only on the symbol table)."""
    rng = np.random.default_rng(0x46535354)
    return rng.integers(0, 1 << 62, 64, dtype=np.uint64) * np.uint64(4) + np.uint64(1)


_MULTIPLIERS = _multipliers()


class _ProbedLookup:
    """The probed kernels' view of a table (``_fsst_kernels.encode_probed``): for each length
    3..8, the first multiplier of ``_MULTIPLIERS`` that hashes that length's symbols to distinct
    slots (``usable`` is False when none does), the symbols' keys and entries in their slots,
    and decoy keys in the empty ones."""

    def __init__(self, keys: np.ndarray, lengths: np.ndarray) -> None:
        keys = np.asarray(keys, np.uint64)
        lengths = np.asarray(lengths, np.int64)
        if kernels._compiled(False):  # one compiled call once numba runs (as _HashedLookup)
            from lance_ops.encoding.compression import _fsst_kernels

            self.pkey, self.pent, self.mults, self.usable = _fsst_kernels.probed_lookup(
                keys, lengths, _MULTIPLIERS, PROBE_BITS
            )
            return
        self.pkey = np.zeros(6 << PROBE_BITS, np.uint64)
        self.pent = np.zeros(6 << PROBE_BITS, np.uint16)
        self.mults = np.zeros(6, np.uint64)
        self.usable = all(
            self._place(keys[codes], codes, n, (n - 3) << PROBE_BITS)
            for n in range(3, MAX_SYMBOL_LEN + 1)
            for codes in [np.flatnonzero(lengths == n)]
        )

    def _place(self, keys: np.ndarray, codes: np.ndarray, n: int, base: int) -> bool:
        for mult in _MULTIPLIERS:
            slot = _probe_slot(keys, mult)
            # empty slots hold a decoy key that hashes to another slot, so it never matches
            decoys = np.array([keys[0] if len(keys) else 0, 0, 1], np.uint64)
            decoy_slots = _probe_slot(decoys, mult)
            if len(np.unique(slot)) < len(slot) or decoy_slots[1] == decoy_slots[2]:
                continue
            self.mults[n - 3] = mult
            segment = self.pkey[base : base + (1 << PROBE_BITS)]
            segment[:] = decoys[0]
            segment[decoy_slots[0]] = decoys[2] if decoy_slots[0] == decoy_slots[1] else decoys[1]
            segment[slot] = keys
            self.pent[base + slot] = _pack(codes, n, 1).astype(np.uint16)
            return True
        return False


def _probe_slot(keys: np.ndarray, mult: np.uint64) -> np.ndarray:
    """Slot of each key in its length's table (``_fsst_kernels.encode_probed``)."""
    return ((keys * mult) >> np.uint64(64 - PROBE_BITS)).astype(np.int64)


def _probed_kernel(
    data: np.ndarray, offs: np.ndarray, hashed: _HashedLookup, lengths: np.ndarray, probe: str = "auto"
) -> Any:
    """The probed kernel for coding the strings with the table, or None for the hashed one:
    the short-only kernel without symbols of 3..8 bytes; the six probes per token when at
    least ``PROBE_MIN_SHARE`` of the tokens of the first ``PROBE_SAMPLE`` bytes are long
    symbols (text; the hashed kernel codes those bytes, as one string, to tell); else None:
    where few tokens are long, the hashed kernel's bucket scan, skipped at once when empty,
    costs less than six probes for every token. ``probe`` "all" or "none" forces the six
    probes or the hashed kernel (tests)."""
    from lance_ops.encoding.compression import _fsst_kernels

    if probe != "auto":
        return _fsst_kernels.encode_probed_lanes if probe == "all" else None
    if not (np.asarray(lengths) >= 3).any():
        return _fsst_kernels.encode_short_lanes
    if not hashed.usable:
        return _fsst_kernels.encode_probed_lanes
    head = np.array([offs[0], min(offs[-1], offs[0] + PROBE_SAMPLE)], np.int64)  # as one string
    size = int(head[1] - head[0])
    out = np.empty(2 * size + 1, np.uint8)
    tok_pos, tok_len = np.empty(size, np.int64), np.empty(size, np.int64)
    count = _fsst_kernels.encode_hashed(
        data, head, hashed.short, hashed.slots, out, np.empty(len(head), np.int64), tok_pos, tok_len
    )
    if count and (tok_len[:count] >= 3).mean() >= PROBE_MIN_SHARE:
        return _fsst_kernels.encode_probed_lanes
    return None


#: Bytes of pages the numpy form codes in a process before FSST switches to the compiled kernels
#: for good: the numpy form costs ~0.1 s a MB more (4-12 MB/s against ~300), numba's start ~0.7 s,
#: so a process that keeps writing small pages pays at most about the start twice over
#: (ski-rental), and a single small write none of it.
NUMPY_FORM_BUDGET = 4 << 20
_numpy_form_bytes = 0


def _count_numpy_form(size: int) -> None:
    """Add a page coded by the numpy form to the process's total; past the budget, every later
    page (and every kernel of :mod:`lance_ops.encoding.kernels`) is compiled."""
    global _numpy_form_bytes  # noqa: PLW0603 - one total per process, as kernels' flag
    _numpy_form_bytes += size
    if _numpy_form_bytes >= NUMPY_FORM_BUDGET:
        kernels._compiled(True)


def _use_compiled(offs: np.ndarray, form: str = "auto") -> bool:
    """Whether to code (or sample) the strings ``offs`` with the compiled kernels: ``form``
    "compiled" or "numpy" forces it (tests); "auto" follows :func:`kernels._compiled` for a page
    of ``len(offs) - 1`` values and ``offs[-1] - offs[0]`` bytes (large pages load numba, small
    ones do not until a compiled kernel has run in the process)."""
    if form != "auto":
        return form == "compiled"
    large = len(offs) > kernels.COMPILED_FROM or int(offs[-1]) - int(offs[0]) >= kernels.COMPILED_FROM_BYTES
    return kernels._compiled(large)


def _lanes(offs: np.ndarray, lanes: int) -> np.ndarray:
    """String indices splitting the strings into ``lanes`` runs of about equal bytes."""
    cuts = np.searchsorted(offs, np.arange(1, lanes) * int(offs[-1]) // lanes)
    return np.concatenate(([0], np.minimum(cuts, len(offs) - 1), [len(offs) - 1])).astype(np.int64)


def _encode(
    data: np.ndarray,
    offs: np.ndarray,
    keys: np.ndarray,
    lengths: np.ndarray,
    record: bool = False,
    lanes: int = LANES,
    general: bool = False,
    probe: str = "auto",
    form: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Greedy longest-match coding of every string (``lanes``: see ``_fsst_kernels.encode``).

    Small pages (``_use_compiled`` by ``form``) go to the numpy form (:mod:`_fsst_numpy`),
    whatever the other arguments, which choose among the compiled kernels:

    Four lanes without ``record`` go to the probed kernel ``_probed_kernel`` picks (by
    ``probe``) when the table's long symbols hash without collisions (``_ProbedLookup``).
    Otherwise tables with at most ``BUCKET`` symbols of 3..8 bytes per hash bucket (as
    :func:`build_symbol_table` makes them) go to the hashed kernels (four lanes, or one with
    ``record`` or ``lanes != 4``); others, or any with ``general``, to the general kernel,
    which lists the long symbols by their first two bytes. All of them code every string the
    same way.

    Returns (coded bytes, coded offsets, token start positions, token match lengths with 0 for
    an escaped byte); the token arrays are filled only when ``record`` is set.
    """
    data = np.ascontiguousarray(data, dtype=np.uint8)
    offs = np.ascontiguousarray(offs, dtype=np.int64)
    hashed = _HashedLookup(keys, lengths)
    if not _use_compiled(offs, form):
        table = _ProbedLookup(keys, lengths)
        probes = (table.pkey, table.pent, table.mults) if table.usable else None
        coded, coded_offs, tok_pos, tok_len = _fsst_numpy.encode(
            data, offs, hashed.short, keys, lengths, probes
        )
        if not record:  # a page (training codes samples, with ``record``)
            _count_numpy_form(int(offs[-1]) - int(offs[0]) if form == "auto" else 0)
            return coded, coded_offs, tok_pos[:0], tok_len[:0]
        return coded, coded_offs, tok_pos, tok_len
    from lance_ops.encoding.compression import _fsst_kernels

    four_lanes = not record and lanes == HASHED_LANES and not general
    kernel = _probed_kernel(data, offs, hashed, lengths, probe) if four_lanes and len(offs) > 1 else None
    short_only = kernel is _fsst_kernels.encode_short_lanes  # it reads no probe tables
    probed = _ProbedLookup(keys, lengths) if kernel is not None and not short_only else None
    if kernel is not None and (short_only or (probed is not None and probed.usable)):
        out = np.empty(2 * len(data) + 1, dtype=np.uint8)
        out_offs = np.empty(len(offs), dtype=np.int64)
        # the short kernel codes its lanes one after another: one lane leaves nothing to join
        splits = _lanes(offs, 1 if short_only else HASHED_LANES)
        lane_ends = np.empty(len(splits) - 1, dtype=np.int64)
        pkey, pent, mults = (
            (probed.pkey, probed.pent, probed.mults)
            if probed is not None
            else (np.zeros(0, np.uint64), np.zeros(0, np.uint16), np.zeros(0, np.uint64))
        )
        kernel(data, offs, splits, hashed.short, pkey, pent, mults, out, out_offs, lane_ends)
        coded = _join_lanes(out, out_offs, offs, splits, lane_ends)
        return coded, out_offs, np.zeros(0, np.int64), np.zeros(0, np.int64)
    if hashed.usable and not general:
        out = np.empty(2 * len(data) + 1, dtype=np.uint8)
        out_offs = np.empty(len(offs), dtype=np.int64)
        if not four_lanes:
            tok_pos = np.empty(len(data) if record else 0, dtype=np.int64)
            tok_len = np.empty(len(data) if record else 0, dtype=np.int64)
            count = _fsst_kernels.encode_hashed(
                data, offs, hashed.short, hashed.slots, out, out_offs, tok_pos, tok_len
            )
            size = int(out_offs[-1])
            return (
                out[:size].copy(),
                out_offs,
                tok_pos[: count if record else 0],
                tok_len[: count if record else 0],
            )
        splits = _lanes(offs, HASHED_LANES)
        lane_ends = np.empty(HASHED_LANES, dtype=np.int64)
        _fsst_kernels.encode_hashed_lanes(
            data, offs, splits, hashed.short, hashed.slots, out, out_offs, lane_ends
        )
        coded = _join_lanes(out, out_offs, offs, splits, lane_ends)
        return coded, out_offs, np.zeros(0, np.int64), np.zeros(0, np.int64)
    lookup = _Lookup(keys, lengths)
    out = np.empty(2 * len(data), dtype=np.uint8)
    out_offs = np.empty(len(offs), dtype=np.int64)
    tok_pos = np.empty(len(data) if record else 0, dtype=np.int64)
    tok_len = np.empty(len(data) if record else 0, dtype=np.int64)
    splits = _lanes(offs, 1 if record else lanes)  # tokens are recorded in order from one lane
    lane_ends = np.empty(len(splits) - 1, dtype=np.int64)
    count = _fsst_kernels.encode(
        data,
        offs,
        splits,
        lookup.info,
        lookup.cand_key,
        lookup.cand_len,
        lookup.cand_code,
        lookup.byte_code,
        out,
        out_offs,
        lane_ends,
        tok_pos,
        tok_len,
    )
    coded = _join_lanes(out, out_offs, offs, splits, lane_ends)
    return coded, out_offs, tok_pos[: count if record else 0], tok_len[: count if record else 0]


def _join_lanes(
    out: np.ndarray, out_offs: np.ndarray, offs: np.ndarray, splits: np.ndarray, lane_ends: np.ndarray
) -> np.ndarray:
    """The lanes' outputs joined (lane k wrote ``2 × offs[splits[k]] .. lane_ends[k]`` of
    ``out``), with ``out_offs`` moved to match and its last entry set. The lanes are moved down
    in ``out`` itself (each starts at or after where it goes), which is then shrunk in place to
    the coded size: no second buffer, no copy of the first lane."""
    lane_starts = 2 * offs[splits[:-1]]
    sizes = lane_ends - lane_starts
    at = 0
    for first, stop, start, size in zip(splits[:-1], splits[1:], lane_starts, sizes, strict=True):
        if start != at:
            ctypes.memmove(out.ctypes.data + at, out.ctypes.data + int(start), int(size))
            out_offs[first:stop] += at - start
        at += int(size)
    out_offs[-1] = at
    out.resize(at, refcheck=False)  # realloc: the kernels' 2 × input bytes down to the coded ones
    return out


class _Sampler:
    """The samples of :func:`build_symbol_table`: about 16 KiB of randomly chosen strings, each
    cut to its first 256 bytes (every string when they all fit). The total of the cut lengths
    and the sample size are worked out once for all rounds, in one compiled pass over the
    offsets; the cut lengths themselves only for the strings drawn."""

    def __init__(self, data: np.ndarray, offs: np.ndarray) -> None:
        self.data = data
        self.offs = offs
        self.size = len(offs) - 1
        self.count = self.size
        self.everything: tuple[np.ndarray, np.ndarray] | None = None
        total = 0
        self.compiled = bool(self.size) and _use_compiled(offs)
        if self.compiled:
            from lance_ops.encoding.compression import _fsst_kernels

            total = int(_fsst_kernels.capped_length_sum(offs, SAMPLE_PIECE))
        elif self.size:
            total = _fsst_numpy.capped_length_sum(offs, SAMPLE_PIECE)
        if total <= SAMPLE_BYTES:
            self.everything = self._cut(np.arange(self.size))
        else:
            mean = max(1.0, total / self.size)  # the mean cut length
            self.count = min(self.size, int(SAMPLE_BYTES / mean) + 1)

    def draw(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """The sample ``seed`` picks, so that rounds score a table on unseen strings."""
        if self.everything is not None:
            return self.everything
        rng = np.random.default_rng(seed)
        return self._cut(np.sort(rng.choice(self.size, self.count, replace=False)))

    def _cut(self, take: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.compiled:
            from lance_ops.encoding.compression import _fsst_kernels

            return _fsst_kernels.cut_sample(self.data, self.offs, take, SAMPLE_PIECE)
        starts = self.offs[take]
        piece = np.minimum(self.offs[take + 1] - starts, SAMPLE_PIECE)
        return self.data[ranges(starts, piece)], np.concatenate(([0], np.cumsum(piece)))


def _top(keys: np.ndarray, lengths: np.ndarray, gains: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge duplicate (key, length) candidates, keep the 255 with the largest total gain (ties
    by key, then length), at most ``BUCKET`` of 3..8 bytes per hash bucket (the best), so that the
    hashed coding kernels apply."""
    if len(keys) == 0:
        return keys, lengths
    merge = _fsst_numpy.merge_gains
    if kernels._compiled(False):  # the candidates come from a sample: small, unless numba runs anyway
        from lance_ops.encoding.compression import _fsst_kernels

        merge = _fsst_kernels.merge_gains
    return _choose(
        *merge(
            np.ascontiguousarray(keys, np.uint64),
            np.ascontiguousarray(lengths, np.int64),
            np.ascontiguousarray(gains, np.float64),
        )
    )


def _choose(keys: np.ndarray, lengths: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_top` for distinct (key, length) candidates with their total gains."""
    if len(keys) == 0:
        return keys, lengths
    positive = total > 0
    if not positive.all():  # gains are lengths (all positive) where the encoder calls this
        keys, lengths, total = keys[positive], lengths[positive], total[positive]
    limit = 4 * MAX_SYMBOLS  # only the best few are sorted; more when the bucket limit drops many
    while True:
        pick = np.arange(len(total))
        if len(total) > limit:
            bar = _gain_bar(total, limit)
            pick = np.flatnonzero(total >= bar)  # every tie at the bar
        order = pick[np.lexsort((lengths[pick], keys[pick], -total[pick]))]
        keep = _bucket_keep(keys, lengths, order)
        if len(keep) == MAX_SYMBOLS or len(pick) == len(total):
            return keys[keep], lengths[keep]
        limit *= 4


def _bucket_keep(keys: np.ndarray, lengths: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The first ``MAX_SYMBOLS`` of the candidates ``order`` (best first) within ``BUCKET``
    symbols of 3..8 bytes per hash bucket (one compiled scan once numba runs)."""
    if kernels._compiled(False):
        from lance_ops.encoding.compression import _fsst_kernels

        return _fsst_kernels.bucket_keep(keys, lengths, order, MAX_SYMBOLS)
    slot = np.where(lengths[order] >= 3, _slot(keys[order]).astype(np.int64), -1 - np.arange(len(order)))
    by_slot = np.argsort(slot, kind="stable")
    rank = np.empty(len(slot), np.int64)
    rank[by_slot] = _rank(slot[by_slot])
    return order[rank < BUCKET][:MAX_SYMBOLS]


def _gain_bar(total: np.ndarray, limit: int) -> float:
    """The ``limit``-th largest total: counted by a compiled pass once numba runs (the
    partition of the first table's ~70k candidates is most of choosing among them)."""
    if kernels._compiled(False):
        from lance_ops.encoding.compression import _fsst_kernels

        bar = _fsst_kernels.gain_bar(total, limit)
        if not np.isnan(bar):
            return float(bar)
    return float(np.partition(total, len(total) - limit)[len(total) - limit])


def _candidates(sample: np.ndarray, soffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first table: the substrings of 1..8 bytes with the largest ``count × length``."""
    if kernels._compiled(False):  # one compiled pass (a sample is small: only when numba runs anyway)
        from lance_ops.encoding.compression import _fsst_kernels

        all_keys, all_lens = _fsst_kernels.substring_candidates(sample, np.asarray(soffs, np.int64))
        return _top(all_keys, all_lens, all_lens.astype(np.float64))
    size = len(sample)
    ends = _value_ends(soffs, size)
    padded = np.concatenate((sample, np.zeros(MAX_SYMBOL_LEN, np.uint8))).astype(np.uint64)
    idx = np.arange(size)
    cand_keys, cand_lens = [], []
    key = np.zeros(size, dtype=np.uint64)
    for k in range(1, MAX_SYMBOL_LEN + 1):
        valid = idx + k <= ends
        key |= padded[k - 1 : k - 1 + size] << np.uint64(8 * (k - 1))  # one byte more than k - 1
        cand_keys.append(key[valid])
        cand_lens.append(np.full(int(valid.sum()), k, dtype=np.int64))
    all_keys, all_lens = np.concatenate(cand_keys), np.concatenate(cand_lens)
    return _top(all_keys, all_lens, all_lens.astype(np.float64))


def _refine(
    sample: np.ndarray, soffs: np.ndarray, keys: np.ndarray, lengths: np.ndarray, pairs: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Code ``sample`` with the table; rescore by ``count × length`` the symbols used, the
    escaped bytes and (with ``pairs``) the joins of adjacent tokens of one string."""
    size = len(sample)
    _, _, tokens, match = _encode(sample, soffs, keys, lengths, record=True)
    if kernels._compiled(False):  # as in _candidates
        from lance_ops.encoding.compression import _fsst_kernels

        all_keys, all_lens = _fsst_kernels.token_candidates(
            sample, np.asarray(soffs, np.int64), tokens, match, pairs
        )
        return _top(all_keys, all_lens, all_lens.astype(np.float64))
    ends = _value_ends(soffs, size)
    padded = np.concatenate((sample, np.zeros(MAX_SYMBOL_LEN, np.uint8))).astype(np.uint64)
    word = _gram(padded, size, MAX_SYMBOL_LEN)
    tok_len = np.where(match > 0, match, 1)
    new_keys = [word[tokens] & _low_mask(tok_len)]
    new_lens = [tok_len]
    if pairs:
        nxt = np.concatenate((tokens[1:], [size]))
        same_value = np.concatenate((ends[tokens[:-1]] == ends[tokens[1:]], [False])) & (nxt < size)
        pair = same_value & (tok_len + np.concatenate((tok_len[1:], [0])) <= MAX_SYMBOL_LEN)
        pair_len = tok_len[pair] + tok_len[1:][pair[:-1]]
        new_keys.append(word[tokens[pair]] & _low_mask(pair_len))
        new_lens.append(pair_len)
    all_keys, all_lens = np.concatenate(new_keys), np.concatenate(new_lens)
    return _top(all_keys, all_lens, all_lens.astype(np.float64))


def build_symbol_table(data: np.ndarray, offs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symbol keys (little-endian uint64) and lengths chosen for the strings ``data``/``offs``.

    The first table is scored on one sample; each refinement round codes a different sample
    with it, so symbols that only fit the strings they came from lose their place to bytes and
    joins that recur across strings. The last round keeps only what a fresh sample used.
    """
    sampler = _Sampler(data, offs)
    sample, soffs = sampler.draw(0)
    if len(sample) == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    keys, lengths = _candidates(sample, soffs)
    for round_ in range(1, REFINE_ROUNDS + 2):
        sample, soffs = sampler.draw(round_)
        keys, lengths = _refine(sample, soffs, keys, lengths, pairs=round_ <= REFINE_ROUNDS)
    return keys, lengths


def _low_mask(lengths: np.ndarray) -> np.ndarray:
    """uint64 masks keeping the low ``lengths`` bytes."""
    shift = (8 * np.minimum(lengths, 7)).astype(np.uint64)
    return np.where(lengths >= 8, np.uint64(0xFFFFFFFFFFFFFFFF), (np.uint64(1) << shift) - np.uint64(1))


def fsst_encode(
    block: VariableWidthBlock, table: SymbolTable | None = None
) -> tuple[VariableWidthBlock, SymbolTable]:
    """Code every value of ``block`` with ``table`` (built from the data when not given).

    With a built table, falls back to an uncoded table when coding does not shrink the data.
    """
    dtype = block.offsets.dtype
    offs = block.offsets.astype(np.int64, copy=False)  # read only: no copy of int64 offsets
    data = as_u8(block.data)[int(offs[0]) : int(offs[-1])]
    if offs[0]:
        offs = offs - offs[0]
    if table is not None and not table.coded:
        return VariableWidthBlock(offs.astype(dtype, copy=False), data, block.num_values), table
    if table is not None:
        keys = np.zeros((len(table.lengths), 8), np.uint8)
        keys[:] = table.symbols
        keys_u64 = keys.view("<u8").reshape(-1) & _low_mask(table.lengths.astype(np.int64))
        coded, coded_offs, _, _ = _encode(data, offs, keys_u64, table.lengths.astype(np.int64))
        return VariableWidthBlock(coded_offs.astype(dtype, copy=False), coded, block.num_values), table
    keys, lengths = build_symbol_table(data, offs)
    coded, coded_offs, _, _ = _encode(data, offs, keys, lengths)
    if len(coded) >= len(data):
        return VariableWidthBlock(offs.astype(dtype, copy=False), data, block.num_values), SymbolTable(
            np.zeros((0, 8), np.uint8), np.zeros(0, np.uint8), coded=False
        )
    table = SymbolTable(keys.astype("<u8").view(np.uint8).reshape(-1, 8), lengths.astype(np.uint8))
    return VariableWidthBlock(coded_offs.astype(dtype, copy=False), coded, block.num_values), table


class FsstCompressor(MiniBlockCompressor):
    """FSST over Variable: ``compress`` = mini-block (coded strings chunked by
    :class:`VariableCompressor`), ``compress_per_value`` = full-zip."""

    def __init__(self, minichunk_size: int = 4096) -> None:
        self.variable = VariableCompressor(minichunk_size)

    def _coded(self, block: DataBlock) -> tuple[VariableWidthBlock, SymbolTable]:
        if not isinstance(block, VariableWidthBlock):
            raise UnsupportedEncodingError(
                f"FSST compresses variable-width blocks, not {type(block).__name__}"
            )
        return fsst_encode(block)

    def compress(self, block: DataBlock) -> tuple[MiniBlockCompressed, pb.CompressiveEncoding]:
        coded, table = self._coded(block)
        compressed, inner = self.variable.compress(coded)
        return compressed, _fsst_desc(table, inner)

    def compress_per_value(self, block: DataBlock) -> tuple[DataBlock, pb.CompressiveEncoding]:
        coded, table = self._coded(block)
        values, inner = self.variable.compress_per_value(coded)
        return values, _fsst_desc(table, inner)


def _fsst_desc(table: SymbolTable, inner: pb.CompressiveEncoding) -> pb.CompressiveEncoding:
    return pb.CompressiveEncoding(fsst=pb.Fsst(symbol_table=table.to_bytes(), values=inner))
