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

Decoding is vectorised over a whole block: escapes are found from the parity of positions
inside runs of ``0xFF`` (runs restart at every string start), output lengths per code byte
are cumsummed into positions, and bytes are gathered from a (257 × 8) symbol matrix.

The encoder builds a table from a ~16 KiB sample of whole strings: it starts from the
substrings of length 1..8 with the highest ``count × length`` and refines the table a few
rounds by greedily coding the sample and scoring used symbols and adjacent symbol pairs
(the Boncz–Neumann–Leis scheme in simplified form). Greedy longest-match coding is
vectorised too: the longest symbol matching at every position is found with one sorted
lookup per symbol length, then the parse follows step pointers for all strings at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import (
    Context,
    MiniBlockCompressed,
    MiniBlockCompressor,
    MiniBlockDecompressor,
    PerValueDecompressor,
    as_u8,
    decompressor_for,
    guarded,
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
REFINE_ROUNDS = 4


# --- symbol table ---------------------------------------------------------------------------------


class SymbolTable:
    """A parsed FSST symbol table: ``symbols`` (n × 8 uint8) and ``lengths`` (n,)."""

    def __init__(self, symbols: np.ndarray, lengths: np.ndarray, coded: bool = True) -> None:
        self.symbols = np.asarray(symbols, dtype=np.uint8).reshape(-1, 8)
        self.lengths = np.asarray(lengths, dtype=np.uint8)
        self.coded = coded
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


# --- decoding ---------------------------------------------------------------------------------------


def fsst_decode(data: np.ndarray, offsets: np.ndarray, table: SymbolTable) -> tuple[np.ndarray, np.ndarray]:
    """Decode coded strings (``data`` sliced by Arrow-style ``offsets``) → (bytes, int64 offsets)."""
    offs = np.asarray(offsets, dtype=np.int64)
    offs = offs - offs[0]
    codes = as_u8(data)
    require(len(codes) >= int(offs[-1]), "FSST data is shorter than its offsets")
    codes = codes[: int(offs[-1])]
    if not table.coded:
        return codes, offs
    size = len(codes)
    if size == 0:
        return codes, offs
    idx = np.arange(size, dtype=np.int64)
    starts = np.zeros(size, dtype=bool)
    starts[offs[:-1][offs[:-1] < size]] = True
    is_ff = codes == ESCAPE
    prev_ff = np.concatenate(([False], is_ff[:-1])) & ~starts
    run_start = is_ff & ~prev_ff
    run_origin = np.maximum.accumulate(np.where(run_start, idx, 0))
    escape = is_ff & ((idx - run_origin) % 2 == 0)
    last = np.zeros(size, dtype=bool)
    nonempty = offs[1:] > offs[:-1]
    last[offs[1:][nonempty] - 1] = True
    require(not bool(np.any(escape & last)), "FSST escape byte at the end of a string")
    literal = np.concatenate(([False], escape[:-1]))
    symbol = ~escape & ~literal
    n = len(table.lengths)
    require(not bool(np.any(codes[symbol] >= n)), "FSST code refers to a missing symbol")
    lengths = np.zeros(256, dtype=np.int64)
    lengths[:n] = table.lengths
    out_len = np.where(literal, 1, np.where(symbol, lengths[codes], 0))
    cum = np.concatenate(([0], np.cumsum(out_len)))
    src = np.repeat(idx, out_len)
    within = np.arange(int(cum[-1]), dtype=np.int64) - cum[src]
    matrix = np.zeros((256, 8), dtype=np.uint8)
    matrix[:n] = table.symbols
    out = matrix[codes[src], within]
    out[cum[:-1][literal]] = codes[literal]
    return out, cum[offs]


def _decode_block(block: DataBlock, table: SymbolTable) -> VariableWidthBlock:
    require(isinstance(block, VariableWidthBlock), "FSST values must decode to a variable-width block")
    assert isinstance(block, VariableWidthBlock)
    data, offs = fsst_decode(as_u8(block.data), block.offsets, table)
    return VariableWidthBlock(offs.astype(block.offsets.dtype), data, block.num_values)


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


class _Matcher:
    """Longest-match lookup for a table given as uint64 keys and lengths."""

    def __init__(self, keys: np.ndarray, lengths: np.ndarray) -> None:
        self.by_len: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for k in range(1, MAX_SYMBOL_LEN + 1):
            codes = np.flatnonzero(lengths == k)
            if len(codes):
                order = np.argsort(keys[codes])
                self.by_len[k] = (keys[codes][order], codes[order].astype(np.int64))

    def longest(self, data: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(match length or 0, code) at every position of ``data``."""
        size = len(data)
        padded = np.concatenate((data, np.zeros(MAX_SYMBOL_LEN, np.uint8))).astype(np.uint64)
        idx = np.arange(size, dtype=np.int64)
        best = np.zeros(size, dtype=np.int64)
        code = np.zeros(size, dtype=np.int64)
        for k in sorted(self.by_len, reverse=True):
            keys, codes = self.by_len[k]
            gram = _gram(padded, size, k)
            pos = np.minimum(np.searchsorted(keys, gram), len(keys) - 1)
            hit = (best == 0) & (idx + k <= ends) & (keys[pos] == gram)
            best[hit] = k
            code[hit] = codes[pos[hit]]
        return best, code


def _parse(data: np.ndarray, offs: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Token start positions of a greedy parse (a match, or one escaped byte)."""
    step = np.where(best > 0, best, 1)
    nonempty = offs[1:] > offs[:-1]
    cur = offs[:-1][nonempty]
    end = offs[1:][nonempty]
    token = np.zeros(len(data), dtype=bool)
    while len(cur):
        token[cur] = True
        cur = cur + step[cur]
        keep = cur < end
        cur, end = cur[keep], end[keep]
    return np.flatnonzero(token)


def _encode(
    data: np.ndarray, offs: np.ndarray, keys: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Code every string: (coded bytes, coded offsets, token positions, token match lengths)."""
    best, code = _Matcher(keys, lengths).longest(data, _value_ends(offs, len(data)))
    tokens = _parse(data, offs, best)
    matched = best[tokens] > 0
    out_len = np.where(matched, 1, 2)
    cum = np.concatenate(([0], np.cumsum(out_len)))
    out = np.empty(int(cum[-1]), dtype=np.uint8)
    out[cum[:-1]] = np.where(matched, code[tokens], ESCAPE)
    out[cum[:-1][~matched] + 1] = data[tokens[~matched]]
    return out, cum[np.searchsorted(tokens, offs)], tokens, best[tokens]


def _sample(data: np.ndarray, offs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A deterministic sample of whole strings totalling about 16 KiB."""
    if int(offs[-1]) <= SAMPLE_BYTES:
        return data, offs
    order = np.random.default_rng(0).permutation(len(offs) - 1)
    lengths = np.diff(offs)[order]
    take = np.sort(order[: int(np.searchsorted(np.cumsum(lengths), SAMPLE_BYTES)) + 1])
    lo, hi = offs[take], offs[take + 1]
    piece = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)] or [np.zeros(0, np.int64)])
    return data[piece], np.concatenate(([0], np.cumsum(hi - lo)))


def _top(keys: np.ndarray, lengths: np.ndarray, gains: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge duplicate (key, length) candidates, keep the 255 with the largest total gain."""
    if len(keys) == 0:
        return keys, lengths
    pairs = np.stack([keys, lengths.astype(np.uint64)], axis=1)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
    total = np.bincount(inverse.reshape(-1), weights=gains)
    keep = np.argsort(-total, kind="stable")[:MAX_SYMBOLS]
    keep = keep[total[keep] > 0]
    return uniq[keep, 0], uniq[keep, 1].astype(np.int64)


def build_symbol_table(data: np.ndarray, offs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symbol keys (little-endian uint64) and lengths chosen for the strings ``data``/``offs``."""
    sample, soffs = _sample(data, offs)
    size = len(sample)
    if size == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    ends = _value_ends(soffs, size)
    padded = np.concatenate((sample, np.zeros(MAX_SYMBOL_LEN, np.uint8))).astype(np.uint64)
    idx = np.arange(size)
    cand_keys, cand_lens = [], []
    for k in range(1, MAX_SYMBOL_LEN + 1):
        valid = idx + k <= ends
        cand_keys.append(_gram(padded, size, k)[valid])
        cand_lens.append(np.full(int(valid.sum()), k, dtype=np.int64))
    all_keys, all_lens = np.concatenate(cand_keys), np.concatenate(cand_lens)
    keys, lengths = _top(all_keys, all_lens, all_lens.astype(np.float64))
    for _ in range(REFINE_ROUNDS):
        _, _, tokens, match = _encode(sample, soffs, keys, lengths)
        tok_len = np.where(match > 0, match, 1)
        tok_key = _gram(padded, size, MAX_SYMBOL_LEN)[tokens] & _low_mask(tok_len)
        nxt = np.concatenate((tokens[1:], [size]))
        same_value = np.concatenate((ends[tokens[:-1]] == ends[tokens[1:]], [False])) & (nxt < size)
        pair = same_value & (tok_len + np.concatenate((tok_len[1:], [0])) <= MAX_SYMBOL_LEN)
        pair_len = tok_len[pair] + tok_len[1:][pair[:-1]]
        pair_key = _gram(padded, size, MAX_SYMBOL_LEN)[tokens[pair]] & _low_mask(pair_len)
        new_keys = np.concatenate((tok_key, pair_key))
        new_lens = np.concatenate((tok_len, pair_len))
        keys, lengths = _top(new_keys, new_lens, new_lens.astype(np.float64))
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
    offs = block.offsets.astype(np.int64)
    data = as_u8(block.data)[int(offs[0]) : int(offs[-1])]
    offs = offs - offs[0]
    if table is not None and not table.coded:
        return VariableWidthBlock(offs.astype(block.offsets.dtype), data, block.num_values), table
    if table is not None:
        keys = np.zeros((len(table.lengths), 8), np.uint8)
        keys[:] = table.symbols
        keys_u64 = keys.view("<u8").reshape(-1) & _low_mask(table.lengths.astype(np.int64))
        coded, coded_offs, _, _ = _encode(data, offs, keys_u64, table.lengths.astype(np.int64))
        return VariableWidthBlock(coded_offs.astype(block.offsets.dtype), coded, block.num_values), table
    keys, lengths = build_symbol_table(data, offs)
    coded, coded_offs, _, _ = _encode(data, offs, keys, lengths)
    if len(coded) >= len(data):
        return VariableWidthBlock(offs.astype(block.offsets.dtype), data, block.num_values), SymbolTable(
            np.zeros((0, 8), np.uint8), np.zeros(0, np.uint8), coded=False
        )
    table = SymbolTable(keys.astype("<u8").view(np.uint8).reshape(-1, 8), lengths.astype(np.uint8))
    return VariableWidthBlock(coded_offs.astype(block.offsets.dtype), coded, block.num_values), table


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
