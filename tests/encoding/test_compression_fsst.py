"""FSST symbol tables, vectorised decoding and the table-building encoder (spec §7.6)."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding import kernels
from lance_ops.encoding.compression.base import Context, decompressor_for
from lance_ops.encoding.compression.fsst import (
    TABLE_SIZE,
    FsstCompressor,
    SymbolTable,
    _decode_block,
    _encode,
    _HashedLookup,
    build_symbol_table,
    fsst_decode,
    fsst_encode,
)
from lance_ops.encoding.compression.variable import variable_desc
from lance_ops.encoding.data import VariableWidthBlock
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    miniblock_chunks,
    miniblock_roundtrip,
    page_values,
    per_value_roundtrip,
    pylance_reads_our_page,
    read_pages,
    strings_of,
    variable_block,
    write_column,
)


def _table(*symbols: bytes) -> SymbolTable:
    matrix = np.zeros((len(symbols), 8), np.uint8)
    for i, s in enumerate(symbols):
        matrix[i, : len(s)] = np.frombuffer(s, np.uint8)
    return SymbolTable(matrix, np.array([len(s) for s in symbols], np.uint8))


def _decode(values: list[bytes], table: SymbolTable) -> list[bytes]:
    block = variable_block(values)
    data, offs = fsst_decode(block.data, block.offsets, table)
    return [data[offs[i] : offs[i + 1]].tobytes() for i in range(len(values))]


def test_table_header_layout() -> None:
    raw = _table(b"ab", b"c").to_bytes()
    assert len(raw) == TABLE_SIZE == 2312
    assert raw[:8] == bytes.fromhex("02000001 54535346")
    assert raw[8:24] == b"ab\0\0\0\0\0\0c\0\0\0\0\0\0\0"
    assert raw[24:26] == b"\x02\x01" and set(raw[26:]) == {0}
    parsed = SymbolTable.parse(raw)
    assert parsed.coded and parsed.lengths.tolist() == [2, 1]
    empty = SymbolTable(np.zeros((0, 8), np.uint8), np.zeros(0, np.uint8), coded=False).to_bytes()
    assert empty[:8] == bytes.fromhex("00000000 54535346")


def test_decode_example_and_escapes() -> None:
    table = _table(b"ab", b"c")
    assert _decode([bytes.fromhex("00 01 00 ff 7a")], table) == [b"abcabz"]
    # runs of escaped 0xFF bytes, escapes right at string starts, empty strings in between
    coded = [b"\xff\xff\xff\xff", b"", b"\xff\xff\x00", b"\xff\x41\xff\xff\xff\x42", b"\x01"]
    assert _decode(coded, table) == [b"\xff\xff", b"", b"\xffab", b"A\xffB", b"c"]


def test_encode_with_given_table() -> None:
    block, _ = fsst_encode(variable_block([b"abcabz", b"", b"\xff"]), _table(b"ab", b"c"))
    assert strings_of([block]) == [bytes.fromhex("00 01 00 ff 7a"), b"", b"\xff\xff"]


def test_garbled() -> None:
    table = _table(b"ab")
    with pytest.raises(CorruptFileError):
        _decode([b"\x05"], table)  # code beyond the table
    with pytest.raises(CorruptFileError):
        _decode([b"\x00\xff", b"a"], table)  # escape at the end of a string
    with pytest.raises(CorruptFileError):
        SymbolTable.parse(b"\x01\0\0\x01XXXX" + b"\0" * 2304)
    with pytest.raises(CorruptFileError):
        SymbolTable.parse(b"\x01\0\0\x01TSSF")
    bad = pb.CompressiveEncoding(
        fsst=pb.Fsst(
            symbol_table=table.to_bytes(), values=pb.CompressiveEncoding(flat=pb.Flat(bits_per_value=8))
        )
    )
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.MINIBLOCK, bad)
    dec = decompressor_for(
        Context.MINIBLOCK,
        pb.CompressiveEncoding(fsst=pb.Fsst(symbol_table=table.to_bytes(), values=variable_desc(32))),
    )
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(bytes.fromhex("08000000 0a000000 0005"))], 1)


# --- the compiled decoder against a pure reference ---------------------------------------------------


def _reference_decode(codes: bytes, offsets: list[int], symbols: list[bytes]) -> list[bytes]:
    """Byte-at-a-time FSST decoding (the spec's definition); ValueError names the problem (an
    escape ending a string anywhere before a missing symbol anywhere)."""
    out, missing = [], False
    for start, end in zip(offsets[:-1], offsets[1:], strict=True):
        value, i = bytearray(), start - offsets[0]
        while i < end - offsets[0]:
            if codes[i] == 0xFF:
                if i + 1 >= end - offsets[0]:
                    raise ValueError("escape byte at the end")
                value.append(codes[i + 1])
                i += 2
            else:
                missing |= codes[i] >= len(symbols)
                value += symbols[codes[i]] if codes[i] < len(symbols) else b""
                i += 1
        out.append(bytes(value))
    if missing:
        raise ValueError("missing symbol")
    return out


def _garbled_table(symbols: list[bytes], seed: int) -> SymbolTable:
    """A table whose symbol slots hold random bytes past each symbol's length (a writer may
    leave them so; the decoder must not copy them into the output)."""
    matrix = np.random.default_rng(seed).integers(0, 256, (len(symbols), 8), dtype=np.uint8)
    for i, sym in enumerate(symbols):
        matrix[i, : len(sym)] = np.frombuffer(sym, np.uint8)
    return SymbolTable(matrix, np.array([len(sym) for sym in symbols], np.uint8))


def _coded_strings(draw, n_symbols: int) -> list[bytes]:
    token = st.integers(0, n_symbols - 1).map(lambda c: bytes([c])) if n_symbols else st.nothing()
    escaped = st.integers(0, 255).map(lambda b: bytes([0xFF, b]))
    return draw(st.lists(st.lists(token | escaped, max_size=30).map(b"".join), max_size=40))


@st.composite
def coded_pages(draw):
    symbols = draw(st.lists(st.binary(min_size=1, max_size=8), max_size=255))
    return symbols, _coded_strings(draw, len(symbols)), draw(st.integers(0, 2**16))


@given(
    page=coded_pages(),
    dtype=st.sampled_from([np.uint32, np.uint64, np.int64]),
    lead=st.integers(0, 9),
)
def test_decode_matches_reference(page, dtype, lead: int) -> None:
    symbols, coded, seed = page
    table = _garbled_table(symbols, seed)
    # the data starts where offsets[0] points; bytes past the last offset are not part of it
    offs = np.concatenate(([lead], lead + np.cumsum([len(c) for c in coded], dtype=np.int64))).astype(dtype)
    data = np.frombuffer(b"".join(coded) + b"\x00\xff\x07", np.uint8)
    expected = _reference_decode(b"".join(coded), [int(o) for o in offs], symbols)
    out, out_offs = fsst_decode(data, offs, table, offsets_dtype=dtype)
    assert out_offs.dtype == dtype and out_offs[0] == 0 and len(out) == int(out_offs[-1])
    assert [out[out_offs[i] : out_offs[i + 1]].tobytes() for i in range(len(coded))] == expected


def test_decode_long_symbols_up_to_the_last_byte() -> None:
    # every symbol 8 bytes: each 8-byte store fills exactly its own slot, the last one ends
    # exactly where the output does (the slack is not part of the result)
    symbols = [bytes([65 + i] * 8) for i in range(26)] + [b"xyz"]
    table = _garbled_table(symbols, 1)
    coded = [bytes([i % 26 for i in range(k)]) for k in range(6)] + [
        b"\x1a\x19",
        b"\x19\x1a",
        b"\xff\x00\x19",
    ]
    expected = _reference_decode(b"".join(coded), [0, *np.cumsum([len(c) for c in coded])], symbols)
    assert expected[-3:] == [b"xyz" + b"Z" * 8, b"Z" * 8 + b"xyz", b"\x00" + b"Z" * 8]
    got = _decode(coded, table)
    assert got == expected
    out, _ = fsst_decode(np.frombuffer(b"\x19", np.uint8), np.array([0, 1]), table)
    assert out.tobytes() == b"Z" * 8 and out.flags.c_contiguous and out.dtype == np.uint8


def test_decode_empty_pages() -> None:
    table = _table(b"ab", b"c")
    for offs in ([0], [0, 0, 0], [5, 5]):  # no rows, all values empty (e.g. all null)
        out, out_offs = fsst_decode(np.zeros(5, np.uint8), np.array(offs, np.uint32), table, np.uint32)
        assert len(out) == 0 and out_offs.tolist() == [0] * len(offs) and out_offs.dtype == np.uint32
    assert _decode([b"", b"\x00", b"", b"", b"\x01\x01", b""], table) == [b"", b"ab", b"", b"", b"cc", b""]


def test_decode_errors_match_reference() -> None:
    table = _table(b"ab", b"c")
    cases = {
        "escape byte at the end": [
            [b"\x00\xff"],  # escape as the last byte of the buffer
            [b"\x00", b"\x01\xff", b"\x41"],  # escape ends a middle string (the next begins with a byte)
            [b"\xff\xff\xff", b"\x00"],  # the third 0xFF is an escape, not an escaped byte
            [b"\x07\xff", b"\x00"],  # both errors: the escape one wins, as before
        ],
        "missing symbol": [[b"\x02"], [b"\x00", b"\xff\x41\x09"], [b"\xff\xff\xfe"]],
    }
    for message, pages in cases.items():
        for coded in pages:
            with pytest.raises(ValueError, match=message):
                _reference_decode(b"".join(coded), [0, *np.cumsum([len(c) for c in coded])], [b"ab", b"c"])
            with pytest.raises(CorruptFileError, match=message):
                _decode(coded, table)
    for offs in ([0, 3, 2, 4], [0, 9, 4], [3, 1]):  # offsets that go back or past the data
        with pytest.raises(CorruptFileError, match="offsets are not monotonic|shorter than its offsets"):
            fsst_decode(np.zeros(4, np.uint8), np.array(offs), table)


def test_decompress_keeps_the_offset_width() -> None:
    values = [f"row {i} of many".encode() for i in range(3000)] + [b"", b"\xff\xfe"]
    for large in (False, True):
        block = variable_block(values, large)
        blocks, _, _ = miniblock_roundtrip(FsstCompressor(), block)
        assert all(b.offsets.dtype == block.offsets.dtype for b in blocks)
        assert strings_of(blocks) == values


# --- the compiled coder against a pure reference -----------------------------------------------------


def _reference_encode(values: list[bytes], symbols: list[bytes]) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Greedy longest match, one string at a time (symbols distinct): the coded strings and
    every token's (start in the joined values, symbol length or 0 for an escaped byte)."""
    coded, tokens, base = [], [], 0
    for value in values:
        out, i = bytearray(), 0
        while i < len(value):
            fits = [c for c, sym in enumerate(symbols) if value.startswith(sym, i)]
            if fits:
                code = max(fits, key=lambda c: len(symbols[c]))
                out.append(code)
                tokens.append((base + i, len(symbols[code])))
                i += len(symbols[code])
            else:
                out += bytes([0xFF, value[i]])
                tokens.append((base + i, 0))
                i += 1
        coded.append(bytes(out))
        base += len(value)
    return coded, tokens


def _keys(symbols: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    padded = np.zeros((len(symbols), 8), np.uint8)
    for i, sym in enumerate(symbols):
        padded[i, : len(sym)] = np.frombuffer(sym, np.uint8)
    return padded.view("<u8").reshape(-1), np.array([len(sym) for sym in symbols], np.int64)


small_text = st.binary(max_size=24).map(lambda b: bytes(c % 5 + 0x61 if c < 240 else c for c in b))


@given(
    values=st.lists(small_text, max_size=40),
    symbols=st.lists(small_text.filter(lambda b: 0 < len(b) <= 8), max_size=60, unique=True),
)
def test_encode_matches_reference(values: list[bytes], symbols: list[bytes]) -> None:
    block = variable_block(values)
    data, offs = np.asarray(block.data), block.offsets.astype(np.int64)
    keys, lengths = _keys(symbols)
    expected, tokens = _reference_encode(values, symbols)
    # the four-lane kernels (the pick for the data: probed or hashed) or the one-lane hashed one
    # when the table fits their buckets, and the general kernel (any table) must code alike
    for general in (False, True):
        for lanes in (1, 2, 4, 7):  # lanes split the strings by bytes; some lanes may get none
            coded, coded_offs, _, _ = _encode(
                data, offs, keys, lengths, lanes=lanes, general=general, form="compiled"
            )
            assert strings_of([VariableWidthBlock(coded_offs, coded, len(values))]) == expected
        _, _, pos, match = _encode(data, offs, keys, lengths, record=True, general=general, form="compiled")
        assert list(zip(pos.tolist(), match.tolist(), strict=True)) == tokens
    # four lanes: the probed kernels (all six probes, or the pick by the data) and the hashed one
    for probe in ("all", "auto", "none"):
        coded, coded_offs, _, _ = _encode(data, offs, keys, lengths, probe=probe, form="compiled")
        assert strings_of([VariableWidthBlock(coded_offs, coded, len(values))]) == expected
    _check_numpy_form(values, symbols, expected, tokens)


def _check_numpy_form(
    values: list[bytes], symbols: list[bytes], expected: list[bytes], tokens: list[tuple[int, int]]
) -> None:
    """The numpy form codes as the reference does, with the long symbols found by the probed
    tables (when they place every symbol) and by binary search, the strings starting anywhere."""
    from lance_ops.encoding.compression import _fsst_numpy, fsst

    block = variable_block(values)
    keys, lengths = _keys(symbols)
    lead = 3  # the page's strings start after other bytes of the buffer
    data = np.concatenate((np.full(lead, 0x61, np.uint8), np.asarray(block.data, np.uint8)))
    offs = block.offsets.astype(np.int64) + lead
    coded, coded_offs, pos, match = _encode(data, offs, keys, lengths, record=True, form="numpy")
    assert strings_of([VariableWidthBlock(coded_offs, coded, len(values))]) == expected
    assert list(zip((pos - lead).tolist(), match.tolist(), strict=True)) == tokens
    short = _HashedLookup(keys, lengths).short
    probed = fsst._ProbedLookup(keys, lengths)
    searched = _fsst_numpy.encode(data, offs, short, keys, lengths, None)
    assert np.array_equal(searched[0], coded) and np.array_equal(searched[1], coded_offs)
    if probed.usable:
        hashed = _fsst_numpy.encode(
            data, offs, short, keys, lengths, (probed.pkey, probed.pent, probed.mults)
        )
        assert np.array_equal(hashed[0], coded) and np.array_equal(hashed[1], coded_offs)


zeros_and_escapes = st.binary(max_size=30).map(lambda b: bytes((0x00, 0x01, 0xFF, 0x61)[c % 4] for c in b))


@given(
    values=st.lists(zeros_and_escapes, max_size=40),
    symbols=st.lists(zeros_and_escapes.filter(lambda b: 0 < len(b) <= 8), max_size=60, unique=True),
)
def test_probed_kernel_on_zero_bytes(values: list[bytes], symbols: list[bytes]) -> None:
    # runs of 0x00 look like the zero padding of shorter keys and like the decoys of empty
    # slots (keys 0 and 1): none may match where no symbol is
    block = variable_block(values)
    data, offs = np.asarray(block.data), block.offsets.astype(np.int64)
    keys, lengths = _keys(symbols)
    expected, tokens = _reference_encode(values, symbols)
    for probe in ("all", "auto"):
        coded, coded_offs, _, _ = _encode(data, offs, keys, lengths, probe=probe, form="compiled")
        assert strings_of([VariableWidthBlock(coded_offs, coded, len(values))]) == expected
    _check_numpy_form(values, symbols, expected, tokens)


def test_probed_tables_place_every_symbol() -> None:
    from lance_ops.encoding.compression import _fsst_kernels, _fsst_numpy, fsst

    assert fsst.PROBE_BITS == _fsst_kernels.PROBE_BITS == _fsst_numpy.PROBE_BITS
    rng = np.random.default_rng(3)
    vocabulary = np.array("the of and to in a is that for it as was with be by on not he this are".split())
    values = [" ".join(row).encode() for row in vocabulary[rng.integers(0, 20, (5000, 4))].tolist()]
    block = variable_block(values)
    data, offs = np.asarray(block.data), block.offsets.astype(np.int64)
    keys, lengths = build_symbol_table(data, offs)
    probed = fsst._ProbedLookup(keys, lengths)
    assert probed.usable and (lengths >= 3).sum() > 20
    for code in np.flatnonzero(lengths >= 3):
        n = int(lengths[code])
        slot = ((n - 3) << fsst.PROBE_BITS) + int(
            fsst._probe_slot(keys[code : code + 1], probed.mults[n - 3])[0]
        )
        assert probed.pkey[slot] == keys[code] and probed.pent[slot] == code | n << 8 | 1 << 12
    # words: most tokens are long symbols, so every token probes them
    hashed = _HashedLookup(keys, lengths)
    assert fsst._probed_kernel(data, offs, hashed, lengths) is _fsst_kernels.encode_probed_lanes
    short = lengths < 3
    hashed = _HashedLookup(keys[short], lengths[short])
    assert fsst._probed_kernel(data, offs, hashed, lengths[short]) is _fsst_kernels.encode_short_lanes
    # random strings with a few long symbols: the bucket kernel
    letters = np.frombuffer(b"abcdefghijklmnop", np.uint8)
    data = letters[rng.integers(0, 16, 200_000)]
    offs = np.arange(0, 200_001, 20, dtype=np.int64)
    keys, lengths = _keys([bytes([c]) for c in letters.tolist()] + [b"abc", b"bcd", b"cde"])
    hashed = _HashedLookup(keys, lengths)
    assert fsst._probed_kernel(data, offs, hashed, lengths) is None


def test_hashed_kernel_takes_built_tables() -> None:
    from lance_ops.encoding.compression import _fsst_kernels, fsst

    assert (fsst.HASH_BITS, int(fsst.HASH_MULT), fsst.BUCKET) == (
        _fsst_kernels.HASH_BITS,
        _fsst_kernels.HASH_MULT,
        _fsst_kernels.BUCKET,
    )
    # tables built from data keep at most BUCKET long symbols per hash bucket: the fast kernels
    values = [f"w{i * 7919 % 100003} the of and {i % 17}".encode() for i in range(20_000)]
    block = variable_block(values)
    data, offs = np.asarray(block.data), block.offsets.astype(np.int64)
    keys, lengths = build_symbol_table(data, offs)
    assert _HashedLookup(keys, lengths).usable and len(keys) > 100
    fast = _encode(data, offs, keys, lengths, form="compiled")
    general = _encode(data, offs, keys, lengths, general=True, form="compiled")
    assert np.array_equal(fast[0], general[0]) and np.array_equal(fast[1], general[1])


def test_encode_lanes_on_a_larger_page() -> None:
    rng = np.random.default_rng(7)
    values = [bytes(rng.integers(97, 101, int(k), dtype=np.uint8)) for k in rng.integers(0, 40, 3000)]
    symbols = [b"ab", b"abcd", b"abcdabcd", b"a", b"b", b"dd", b"cab", b"dcba"]
    block = variable_block(values)
    keys, lengths = _keys(symbols)
    expected, tokens = _reference_encode(values, symbols)
    for lanes, probe in [(1, "auto"), (4, "all"), (4, "none"), (4, "auto"), (5000, "auto")]:  # 5000 > strings
        coded, offs, _, _ = _encode(
            np.asarray(block.data),
            block.offsets.astype(np.int64),
            keys,
            lengths,
            lanes=lanes,
            probe=probe,
            form="compiled",
        )
        assert strings_of([VariableWidthBlock(offs, coded, len(values))]) == expected
    _check_numpy_form(values, symbols, expected, tokens)


def test_encode_empty_pages() -> None:
    for values in ([], [b""], [b"", b"", b""]):
        coded, table = fsst_encode(variable_block(values))
        assert strings_of([coded]) == values and not table.coded
        coded, _ = fsst_encode(variable_block(values), _table(b"ab", b"c"))
        assert strings_of([coded]) == values and len(coded.data) == 0


def _pinned_pages() -> dict[str, list[bytes]]:
    rng = np.random.default_rng(11)
    vocab = [bytes(rng.integers(97, 123, int(k), dtype=np.uint8)) for k in rng.integers(2, 9, 300)]

    def text(n: int, words: int) -> list[bytes]:
        return [
            b" ".join(vocab[j] for j in rng.integers(0, len(vocab), int(k)))
            + bytes(rng.integers(128, 256, int(k) % 3, dtype=np.uint8))
            for k in rng.integers(0, words, n)
        ]

    return {"fits": text(200, 6), "sampled": text(20_000, 12), "long": [v * 40 for v in text(2000, 5)]}


def test_encoder_output_is_pinned() -> None:
    # digests of what the encoder wrote before the L10 speed-ups (commit ad8578c): table building
    # (one sample holding every string, sampled rounds) and coding must keep writing these bytes
    pinned = {
        "fits": (1593, "681f321ec8895b273e512a9172f079d5"),
        "sampled": (410148, "730e12774a4e2e14b3375a74d02f5146"),
        "long": (832241, "d27828bf0f9de70d4dd237e863bf3b44"),
    }
    for name, values in _pinned_pages().items():
        coded, table = fsst_encode(variable_block(values))
        raw = np.asarray(coded.data).tobytes() + np.asarray(coded.offsets).tobytes() + table.to_bytes()
        assert (len(coded.data), hashlib.md5(raw).hexdigest()) == pinned[name], name
        assert strings_of([_decode_block(coded, table)]) == values


words = st.sampled_from([b"hello", b"world", b"\xff", b"lance", b" ", b"\x00", b"abc", b"zz"])
texts = st.lists(st.lists(words, max_size=12).map(b"".join), max_size=120) | st.lists(
    st.binary(max_size=30), max_size=60
)


@contextlib.contextmanager
def _kernel_form(compiled: bool) -> Iterator[None]:
    """Pages below the kernels' thresholds coded by the compiled kernels or by the numpy form
    (with none of the numpy form's budget spent)."""
    from lance_ops.encoding.compression import fsst

    saved = kernels._compiled_in_use, fsst._numpy_form_bytes
    kernels._compiled_in_use, fsst._numpy_form_bytes = compiled, 0
    try:
        yield
    finally:
        kernels._compiled_in_use, fsst._numpy_form_bytes = saved


def test_numpy_form_hands_over_to_the_compiled_kernels_past_its_budget() -> None:
    """A process that keeps coding small pages switches to the compiled kernels once the numpy
    form has coded ``NUMPY_FORM_BUDGET`` bytes (the page that passes it is still numpy-coded)."""
    from lance_ops.encoding.compression import fsst

    values = [f"w{i * 7919 % 100003} the of and {i % 17}".encode() for i in range(20_000)]
    block = variable_block(values)  # ~0.5 MB: below the kernels' thresholds
    size = int(block.offsets[-1])
    pages = -(-fsst.NUMPY_FORM_BUDGET // size)  # the page that reaches the budget
    with _kernel_form(False):
        first, _ = fsst_encode(block)
        for _ in range(pages - 2):
            fsst_encode(block)
        assert not kernels._compiled_in_use and fsst._numpy_form_bytes == (pages - 1) * size
        fsst_encode(block)
        assert kernels._compiled_in_use
        last, _ = fsst_encode(block)  # compiled now: the same bytes
    assert np.array_equal(np.asarray(first.data), np.asarray(last.data))
    assert np.array_equal(first.offsets, last.offsets)


@pytest.mark.parametrize("compiled", [False, True])
def test_encoder_output_is_pinned_in_both_forms(compiled: bool) -> None:
    # the pinned pages are below the thresholds: the flag picks the form of every step (sample
    # sizes, candidate merges, training and final coding)
    with _kernel_form(compiled):
        test_encoder_output_is_pinned()


edge_values = st.lists(
    st.one_of(
        st.just(b""),
        st.binary(min_size=1, max_size=1),
        st.binary(max_size=40).map(lambda b: bytes((0x00, 0xFF, 0x61, 0x62)[c % 4] for c in b)),
        st.lists(words, max_size=8).map(b"".join),
    ),
    max_size=60,
)


@settings(max_examples=30, deadline=None)
@given(
    values=edge_values,
    count=st.sampled_from([0, 1, 1023, 1024, 1025]),
    long=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_numpy_form_writes_the_compiled_bytes(values: list[bytes], count: int, long: bool, seed: int) -> None:
    """Whole ``fsst_encode`` (table building and coding) in both forms, on pages of 0/1/1023/
    1024/1025 values drawn from empty strings, single bytes, runs of 0x00/0xFF and words, and
    with a few values over 32 KiB: the same table and the same bytes."""
    rng = np.random.default_rng(seed)
    pool = values or [b""]
    page = [pool[int(i)] for i in rng.integers(0, len(pool), count)]
    if long and count:
        for at in rng.integers(0, count, 2):
            page[int(at)] = b"the lance \x00\xff " * 2600  # 33,800 bytes
    block = variable_block(page)
    with _kernel_form(True):
        compiled = fsst_encode(block)
    with _kernel_form(False):
        numpy_form = fsst_encode(block)
    assert compiled[1].to_bytes() == numpy_form[1].to_bytes()
    assert np.array_equal(np.asarray(compiled[0].data), np.asarray(numpy_form[0].data))
    assert np.array_equal(compiled[0].offsets, numpy_form[0].offsets)
    assert strings_of([_decode_block(numpy_form[0], numpy_form[1])]) == page


@given(values=texts, large=st.booleans())
def test_roundtrip(values: list[bytes], large: bool) -> None:
    block = variable_block(values, large)
    blocks, _, desc = miniblock_roundtrip(FsstCompressor(), block)
    assert strings_of(blocks) == values
    assert len(desc.fsst.symbol_table) == TABLE_SIZE
    assert desc.fsst.values == variable_desc(64 if large else 32)
    decoded, _, _ = per_value_roundtrip(FsstCompressor(), block)
    assert strings_of([decoded]) == values


def test_encoder_compresses_text() -> None:
    values = [f"user-{i % 977}@example.com visited /products/{i % 131}".encode() for i in range(20_000)]
    coded, table = fsst_encode(variable_block(values))
    assert table.coded and 100 <= len(table.lengths) <= 255
    assert len(coded.data) < sum(map(len, values)) / 2
    blocks, compressed, _ = miniblock_roundtrip(FsstCompressor(), variable_block(values))
    assert strings_of(blocks) == values


def test_random_bytes_fall_back_to_uncoded() -> None:
    rng = np.random.default_rng(0)
    values = [rng.integers(0, 256, 20, dtype=np.uint8).tobytes() for _ in range(500)]
    coded, table = fsst_encode(variable_block(values))
    assert not table.coded and strings_of([coded]) == values
    assert table.to_bytes()[:8] == bytes.fromhex("00000000 54535346")


# --- pylance pages -----------------------------------------------------------------------------------

FSST_VALUES = [f"w{i * 7919 % 100003}" for i in range(10_000)]


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("large", [False, True])
def test_pylance_miniblock_fsst(tmp_path, version: str, large: bool) -> None:
    arr = pa.array(FSST_VALUES, pa.large_string() if large else pa.string())
    (page,) = read_pages(write_column(tmp_path / "f.lance", arr, version=version))
    desc = page.layout.mini_block_layout.value_compression
    assert desc.WhichOneof("compression") == "fsst"
    assert desc.fsst.values == variable_desc(64 if large else 32)
    header = desc.fsst.symbol_table[:8]
    assert header[3] & 1 and header[4:8] == b"TSSF"
    assert [s.decode() for s in strings_of(page_values(page))] == FSST_VALUES
    assert max(c.num_values for c in miniblock_chunks(page)) <= 4096


@pytest.mark.interop
def test_pylance_uncoded_table(tmp_path) -> None:
    values = [f"s{i}" for i in range(200)]
    (page,) = read_pages(
        write_column(tmp_path / "f.lance", pa.array(values), {"lance-encoding:compression": "fsst"})
    )
    desc = page.layout.mini_block_layout.value_compression
    assert desc.fsst.symbol_table[:8] == bytes.fromhex("00000000 54535346")
    assert [s.decode() for s in strings_of(page_values(page))] == values


@pytest.mark.interop
def test_pylance_full_zip_fsst(tmp_path) -> None:
    values = [f"{i} " * 90 for i in range(300)]
    (page,) = read_pages(write_column(tmp_path / "fz.lance", pa.array(values)))
    fz = page.layout.full_zip_layout
    assert fz.value_compression.WhichOneof("compression") == "fsst" and fz.bits_per_offset == 32
    buffer, pos, items = page.buffers[0], 0, []
    for _ in range(fz.num_visible_items):
        length = int.from_bytes(buffer[pos : pos + 4], "little")
        items.append(buffer[pos + 4 : pos + 4 + length])
        pos += 4 + length
    decoded = decompressor_for(Context.PER_VALUE, fz.value_compression).decompress(variable_block(items))
    assert [s.decode() for s in strings_of([decoded])] == values


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
def test_pylance_reads_our_fsst(tmp_path, version: str, large: bool, compiled: bool) -> None:
    values = [f"w{i * 7919 % 100003} \xff-é {i % 17}" for i in range(5000)] + ["", "ÿÿÿ"]
    arr = pa.array(values, pa.large_string() if large else pa.string())
    block = variable_block([v.encode() for v in values], large)
    with _kernel_form(compiled):  # the compiled kernels or the numpy form code the page
        got = pylance_reads_our_page(tmp_path, arr, FsstCompressor(), block, version)
    assert got.to_pylist() == values


@pytest.mark.interop
def test_pylance_reads_our_fsst_binary_with_escapes(tmp_path) -> None:
    rng = np.random.default_rng(5)
    values = [
        b"\xff\xff" + bytes(rng.integers(250, 256, int(k), dtype=np.uint8)) + b"common-suffix"
        for k in rng.integers(0, 12, 3000)
    ]
    got = pylance_reads_our_page(
        tmp_path, pa.array(values, pa.binary()), FsstCompressor(), variable_block(values), "2.2"
    )
    assert got.to_pylist() == values


# --- edge shapes through the writer, read by pylance --------------------------------------------------

_EDGE_ROWS = st.sampled_from([0, 1, 1023, 1024, 1025])
_EDGE_KIND = st.sampled_from(["words", "empty", "null", "huge", "mixed"])


def _edge_values(kind: str, rows: int, seed: int) -> list[str | None]:
    rng = np.random.default_rng(seed)
    vocabulary = ["lance", "fsst", "the", "of", "ÿé", ""]
    words = [" ".join(rng.choice(vocabulary, 4)) for _ in range(rows)]
    if kind == "words":
        return list(words)
    if kind == "empty":
        return [""] * rows
    if kind == "null":
        return [None] * rows
    if kind == "huge":  # values past 32 KiB, the rest short
        return [w * (40_000 // max(1, len(w))) if i % 97 == 0 else w for i, w in enumerate(words)]
    return [None if i % 7 == 0 else "" if i % 5 == 0 else w for i, w in enumerate(words)]


@pytest.mark.interop
@settings(max_examples=12)
@given(kind=_EDGE_KIND, rows=_EDGE_ROWS, seed=st.integers(0, 2**16), large=st.booleans())
def test_writer_fsst_edge_shapes_read_by_pylance(
    tmp_path_factory: pytest.TempPathFactory, kind: str, rows: int, seed: int, large: bool
) -> None:
    """Strings the writer codes with FSST (asked for by field metadata) in edge shapes: empty and
    all-null columns, values over 32 KiB, 1023/1024/1025 rows; pylance and we read them back.
    (Pages of only empty strings or nulls, and the pages holding the >32 KiB values, are written
    without FSST by the strategy; they stay in as the writer's edge cases.)"""
    from lance.file import LanceFileReader as PylanceReader

    from lance_ops.file import LanceFileReader, LanceFileWriter

    values = _edge_values(kind, rows, seed)
    field = pa.field(
        "s", pa.large_string() if large else pa.string(), metadata={"lance-encoding:compression": "fsst"}
    )
    table = pa.table({"s": pa.array(values, field.type)}, schema=pa.schema([field]))
    path = str(tmp_path_factory.mktemp("fsst") / "edge.lance")
    with LanceFileWriter(path, table.schema, version="2.2") as writer:
        writer.write_batch(table)
    assert PylanceReader(path).read_all().to_table().column("s").to_pylist() == values
    assert LanceFileReader(path).read_all().to_table().column("s").to_pylist() == values


_EDGE_BYTES = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(min_size=1, max_size=1),
    st.just(bytes(range(256))),
    st.lists(st.sampled_from([b"the ", b"\xff", b"\x00", b"abc", b"thermal"]), max_size=9).map(b"".join),
    st.binary(max_size=24),
)


@pytest.mark.interop
@settings(max_examples=15, deadline=None)
@given(values=st.lists(_EDGE_BYTES, max_size=300), huge=st.booleans(), seed=st.integers(0, 2**16))
def test_our_fsst_bytes_read_by_pylance(
    tmp_path_factory: pytest.TempPathFactory, values: list[bytes | None], huge: bool, seed: int
) -> None:
    """Binary values through our encoder (FSST asked for): empty, one byte, all 256 byte values,
    the escape byte, many nulls, a value over 32 KiB; pylance and we read the same values."""
    from lance.file import LanceFileReader as PylanceReader

    from lance_ops.file import LanceFileReader, LanceFileWriter

    if huge:
        values = [*values, np.random.default_rng(seed).integers(0, 256, 40_000, dtype=np.uint8).tobytes()]
    meta = {"lance-encoding:compression": "fsst", "lance-encoding:dictionary": "never"}
    field = pa.field("b", pa.binary(), metadata=meta)
    table = pa.table({"b": pa.array(values, pa.binary())}, schema=pa.schema([field]))
    path = str(tmp_path_factory.mktemp("fsst") / "bytes.lance")
    with LanceFileWriter(path, table.schema, version="2.2") as writer:
        writer.write_batch(table)
    if not huge and len({v for v in values if v}) > 1:  # strings to code: an FSST page
        (page,) = read_pages(path)
        kind = page.layout.WhichOneof("layout")
        assert getattr(page.layout, kind).value_compression.WhichOneof("compression") == "fsst"
    assert PylanceReader(path).read_all().to_table().column("b").to_pylist() == values
    assert LanceFileReader(path).read_all().to_table().column("b").to_pylist() == values


def _reference_sample(data: np.ndarray, offs: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The sample as drawn before L19's single-pass sizing: every cut length taken first."""
    lengths = np.minimum(np.diff(offs), 256)
    if int(lengths.sum()) <= 16 * 1024:
        take = np.arange(len(lengths))
    else:
        count = min(len(lengths), int(16 * 1024 / max(1.0, float(lengths.mean()))) + 1)
        take = np.sort(np.random.default_rng(seed).choice(len(lengths), count, replace=False))
    starts, piece = offs[:-1][take], lengths[take]
    sample = np.concatenate([data[s : s + p] for s, p in zip(starts, piece, strict=True)] + [data[:0]])
    return sample, np.concatenate(([0], np.cumsum(piece)))


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 600), max_size=400)
    | st.sampled_from([[0] * 3000, [7] * 3000, [300] * 70]),
    large=st.booleans(),
    seed=st.integers(0, 3),
    compiled=st.booleans(),
)
def test_sampler_sizes_the_sample_as_the_full_length_scan(
    lengths: list[int], large: bool, seed: int, compiled: bool
) -> None:
    """Both forms of the sampler (sizing, draws, the cut of the drawn strings) against the
    sample as first drawn."""
    from lance_ops.encoding.compression import _fsst_kernels
    from lance_ops.encoding.compression.fsst import _Sampler

    offs = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))).astype(np.int64 if large else np.int32)
    data = (np.arange(int(offs[-1])) % 251).astype(np.uint8)
    assert _fsst_kernels.capped_length_sum(offs, 256) == int(np.minimum(np.diff(offs), 256).sum())
    with _kernel_form(compiled):
        sampler = _Sampler(data, offs)
        assert sampler.compiled == (compiled and len(lengths) > 0)
        sample, soffs = sampler.draw(seed)
    assert sample.dtype == np.uint8 and soffs.dtype == np.int64
    want, want_offs = _reference_sample(data, offs, seed)
    assert np.array_equal(sample, want)
    assert np.array_equal(soffs, want_offs)


@settings(max_examples=40, deadline=None)
@given(values=edge_values, pairs=st.booleans())
def test_candidate_kernels_list_the_numpy_forms_candidates(values: list[bytes], pairs: bool) -> None:
    """Table building's compiled candidate lists (every substring of 1..8 bytes; the tokens of a
    coded sample and the joins of adjacent ones) hold the same (key, length) pairs as the numpy
    forms, in another order (``_top`` merges and orders them itself)."""
    from lance_ops.encoding.compression import _fsst_kernels, fsst

    block = variable_block(values)
    sample, soffs = np.asarray(block.data, np.uint8), block.offsets.astype(np.int64)
    with _kernel_form(False):
        keys, lengths = fsst._candidates(sample, soffs)
        expected = _all_candidates(sample, soffs, keys, lengths, pairs)
    got = _fsst_kernels.substring_candidates(sample, soffs)
    assert sorted(zip(got[0].tolist(), got[1].tolist(), strict=True)) == expected[0]
    _, _, tokens, match = fsst._encode(sample, soffs, keys, lengths, record=True, form="compiled")
    got = _fsst_kernels.token_candidates(sample, soffs, tokens, match, pairs)
    assert sorted(zip(got[0].tolist(), got[1].tolist(), strict=True)) == expected[1]


def _all_candidates(
    sample: np.ndarray, soffs: np.ndarray, keys: np.ndarray, lengths: np.ndarray, pairs: bool
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The numpy forms' candidate lists, captured from their calls to ``_top``, sorted."""
    from lance_ops.encoding.compression import fsst

    seen: list[list[tuple[int, int]]] = []
    real_top = fsst._top

    def capture(k: np.ndarray, n: np.ndarray, gains: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert np.array_equal(gains, n.astype(np.float64))
        seen.append(sorted(zip(np.asarray(k).tolist(), np.asarray(n).tolist(), strict=True)))
        return real_top(k, n, gains)

    fsst._top = capture  # type: ignore[assignment]
    try:
        fsst._candidates(sample, soffs)
        fsst._refine(sample, soffs, keys, lengths, pairs)
    finally:
        fsst._top = real_top  # type: ignore[assignment]
    return seen[0], seen[1]


@settings(max_examples=25, deadline=None)
@given(values=edge_values, skip=st.integers(0, 3), compiled=st.booleans())
def test_int64_offsets_are_read_not_written(values: list[bytes], skip: int, compiled: bool) -> None:
    """int64 offsets (taken without a copy) of a whole or sliced page are left as they were, and
    the page codes to the bytes its uint32 form codes to (lanes joined in place)."""
    block = variable_block(values)
    offs = block.offsets.astype(np.int64)
    skip = min(skip, len(values))
    sliced = VariableWidthBlock(offs[skip:].copy(), block.data, len(values) - skip)
    kept = sliced.offsets.copy()
    reference = variable_block(values[skip:])
    with _kernel_form(compiled):
        coded, table = fsst_encode(sliced)
        expected, expected_table = fsst_encode(reference)
    assert np.array_equal(sliced.offsets, kept)
    assert table.to_bytes() == expected_table.to_bytes()
    assert np.array_equal(np.asarray(coded.data), np.asarray(expected.data))
    assert np.array_equal(coded.offsets, expected.offsets)
    assert strings_of([_decode_block(coded, table)]) == values[skip:]


EDGE_SYMBOLS = [
    b"\x00" * 8,
    b"\x00\x00",
    b"\xff\xff\xff",
    b"the ",
    b"lance",
    b"a",
    b"\x00",
    b"ab",
    b"hello wo",
]


@settings(max_examples=25, deadline=None)
@given(
    values=edge_values,
    count=st.sampled_from([0, 1, 7, 9, 1023, 1025]),
    long=st.booleans(),
    symbols=st.sets(st.sampled_from(EDGE_SYMBOLS)).map(sorted),
    seed=st.integers(0, 2**16),
)
def test_lane_kernels_match_reference_on_edge_pages(
    values: list[bytes], count: int, long: bool, symbols: list[bytes], seed: int
) -> None:
    """Every compiled coder (four lanes: six probes, the pick for the data, buckets; the general
    kernel; one recorded lane) against the byte-at-a-time reference on pages of empty strings
    only or mixed with single bytes, runs of 0x00 / 0xFF, words and values over 32 KiB."""
    rng = np.random.default_rng(seed)
    pool = values or [b""]
    page = [pool[int(i)] for i in rng.integers(0, len(pool), count)]
    if long and count:
        page[int(rng.integers(0, count))] = b"the lance \x00\xff\xff\xff " * 2000  # 34,000 bytes
    block = variable_block(page)
    data, offs = np.asarray(block.data), block.offsets.astype(np.int64)
    keys, lengths = _keys(symbols)
    expected, tokens = _reference_encode(page, symbols)
    for probe, general in [("all", False), ("auto", False), ("none", False), ("auto", True)]:
        coded, coded_offs, _, _ = _encode(
            data, offs, keys, lengths, probe=probe, general=general, form="compiled"
        )
        assert strings_of([VariableWidthBlock(coded_offs, coded, len(page))]) == expected, (probe, general)
    _, _, pos, match = _encode(data, offs, keys, lengths, record=True, form="compiled")
    assert list(zip(pos.tolist(), match.tolist(), strict=True)) == tokens


# --- the one-pass coder of tables without long symbols (L19, encode IV) ---------------------------

_SHORT_ALPHABET = [0x00, 0x61, 0x62, 0xC3, 0xA9, 0xFF]  # zero, ASCII, "é" in UTF-8, the escape byte
_short_bytes = st.binary(max_size=30).map(lambda b: bytes(_SHORT_ALPHABET[c % 6] for c in b))
_short_values = st.lists(
    st.one_of(st.just(b""), st.binary(min_size=1, max_size=1), _short_bytes, st.just("ÿé ab".encode())),
    max_size=50,
)
_short_symbols = st.lists(
    st.lists(st.sampled_from(_SHORT_ALPHABET), min_size=1, max_size=2).map(bytes), max_size=40, unique=True
)


@settings(max_examples=60, deadline=None)
@given(
    values=_short_values,
    count=st.sampled_from([0, 1, 7, 1023, 1025]),
    huge=st.booleans(),
    same=st.booleans(),
    symbols=_short_symbols,
    lead=st.sampled_from([0, 3, 64]),
    seed=st.integers(0, 2**16),
)
def test_short_kernel_matches_reference(
    values: list[bytes], count: int, huge: bool, same: bool, symbols: list[bytes], lead: int, seed: int
) -> None:
    """Tables of one- and two-byte symbols are coded in one pass across the string ends
    (``encode_short_lanes``): the same strings as the byte-at-a-time reference, in one lane (as
    ``_encode`` calls it) or several, on pages of empty strings, single bytes, all-equal values,
    0x00 / 0xFF runs, non-ASCII bytes, a value over 32 KiB, starting after other bytes."""
    from lance_ops.encoding.compression import _fsst_kernels, fsst

    rng = np.random.default_rng(seed)
    pool = values or [b""]
    page = [pool[0]] * count if same else [pool[int(i)] for i in rng.integers(0, len(pool), count)]
    if huge and count:
        page[int(rng.integers(0, count))] = bytes(rng.choice(_SHORT_ALPHABET, 34_000).astype(np.uint8))
    block = variable_block(page)
    data = np.concatenate((np.full(lead, 0x61, np.uint8), np.asarray(block.data, np.uint8)))
    offs = block.offsets.astype(np.int64) + lead
    keys, lengths = _keys(symbols)
    expected, _ = _reference_encode(page, symbols)
    hashed = _HashedLookup(keys, lengths)
    if len(offs) > 1:
        assert fsst._probed_kernel(data, offs, hashed, lengths) is _fsst_kernels.encode_short_lanes
    coded, coded_offs, _, _ = _encode(data, offs, keys, lengths, form="compiled")
    assert strings_of([VariableWidthBlock(coded_offs, coded, len(page))]) == expected
    unused = np.zeros(1, np.uint64), np.zeros(1, np.uint16), np.zeros(6, np.uint64)
    for n_lanes in (2, 4, 7):  # lanes split the strings by bytes; some may get none
        splits = fsst._lanes(offs, n_lanes)
        out = np.empty(2 * len(data) + 1, np.uint8)
        out_offs = np.empty(len(offs), np.int64)
        lane_ends = np.empty(len(splits) - 1, np.int64)
        _fsst_kernels.encode_short_lanes(data, offs, splits, hashed.short, *unused, out, out_offs, lane_ends)
        joined = fsst._join_lanes(out, out_offs, offs, splits, lane_ends)
        assert strings_of([VariableWidthBlock(out_offs, joined, len(page))]) == expected, n_lanes


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.sampled_from([0, 0, 1, 2, 7, 63, 64, 65, 200]), max_size=80),
    lead=st.integers(0, 70),
)
def test_string_end_bits_mark_each_last_byte(lengths: list[int], lead: int) -> None:
    from lance_ops.encoding.compression import _fsst_kernels

    offs = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))) + lead
    bits, empty = _fsst_kernels.string_end_bits(offs)
    size = int(offs[-1] - offs[0])
    marked = np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little"))
    ends = offs[1:][np.diff(offs) > 0] - 1 - offs[0]
    assert marked.tolist() == ends.tolist() and empty == lengths.count(0)
    assert len(bits) * 64 >= size


@pytest.mark.interop
def test_pylance_reads_random_strings_coded_in_one_pass(tmp_path) -> None:
    """A page of random 4-24 character strings (with empty ones) large enough for the compiled
    path: its table has no long symbols, so the one-pass coder writes it; pylance reads it."""
    rng = np.random.default_rng(19)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", np.uint8)
    values = [
        "" if i % 11 == 0 else bytes(letters[rng.integers(0, 62, int(n))]).decode()
        for i, n in enumerate(rng.integers(4, 25, 70_000))
    ]
    block = variable_block([v.encode() for v in values])
    data, offs = np.asarray(block.data), block.offsets.astype(np.int64)
    keys, lengths = build_symbol_table(data, offs)
    assert len(keys) and (lengths <= 2).all()
    got = pylance_reads_our_page(tmp_path, pa.array(values), FsstCompressor(), block, "2.2")
    assert got.to_pylist() == values


# --- table building: the compiled steps against the numpy forms and pinned tables --------------------


def _large_pages() -> dict[str, list[bytes]]:
    """Pages past the compiled kernels' thresholds (65,536 values or 1 MiB), so that every step of
    table building is compiled: random strings, 4-word text, short binary values with 0x00 and
    0xFF, a one-byte alphabet, values of up to 32 KiB, random strings with one in 7 empty, and
    empty strings only."""
    rng = np.random.default_rng(5)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", np.uint8)
    n = 70_000
    rand = [alphabet[rng.integers(0, len(alphabet), k)].tobytes() for k in rng.integers(4, 25, n)]
    words = b"the of and to in a is that for it as was with be by on".split()
    text = [b" ".join(words[j] for j in rng.integers(0, len(words), 4)) for _ in range(n)]
    binary = [
        rng.integers(0, 256, k, dtype=np.uint8).tobytes().replace(b"\x01", b"\x00").replace(b"\x02", b"\xff")
        for k in rng.integers(0, 9, n)
    ]
    return {
        "random": rand,
        "text": text,
        "binary": binary,
        "single": [b"a" * int(k) for k in rng.integers(0, 40, n)],
        "long": [b"lance \x00\xff " * int(k) for k in rng.integers(0, 4000, 300)],
        "mixed_empty": [b"" if i % 7 == 0 else v for i, v in enumerate(rand)],
        "empty": [b""] * n,
    }


def test_built_tables_of_large_pages_are_pinned() -> None:
    """Symbol tables built (compiled) for large pages: (symbols, md5 of keys and lengths) as the
    builder made them before L19's compiled table steps (main at 455cd3e)."""
    pinned = {
        "random": (251, "8bd1c7a5f1b32ab884556b06227ab243"),
        "text": (240, "d4d4f0a46c627a2716caaae52e870998"),
        "binary": (254, "8f3452fc656ee1972b32baddcde6e50b"),
        "single": (8, "66ec9dbbcd17a5b5996e4480bee2b049"),
        "long": (9, "e57c811ab07585cb2be99b6a0488a75a"),
        "mixed_empty": (251, "9b5b47bdf0fc94071204538b7df76829"),
        "empty": (0, "d41d8cd98f00b204e9800998ecf8427e"),
    }
    for name, values in _large_pages().items():
        block = variable_block(values)
        keys, lengths = build_symbol_table(np.asarray(block.data, np.uint8), block.offsets.astype(np.int64))
        digest = hashlib.md5(keys.astype("<u8").tobytes() + lengths.astype(np.int64).tobytes()).hexdigest()
        assert (len(keys), digest) == pinned[name], name


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", ["random", "text", "binary", "mixed_empty"])
def test_pylance_reads_large_pages_with_built_tables(tmp_path, version: str, name: str) -> None:
    """Large pages coded with the tables built for them, as mini-block pages (the ``long`` page's
    values over 32 KiB are the writer's full-zip case: this page assembly does not take them)."""
    values = _large_pages()[name]
    got = pylance_reads_our_page(
        tmp_path, pa.array(values, pa.binary()), FsstCompressor(), variable_block(values), version
    )
    assert got.to_pylist() == values


_tables = st.lists(
    st.tuples(st.integers(1, 8), st.binary(min_size=8, max_size=8), st.booleans()), max_size=255
)


@settings(max_examples=60, deadline=None)
@given(table=_tables)
def test_lookup_forms_agree(table: list[tuple[int, bytes, bool]]) -> None:
    """The coding kernels' lookups (``_HashedLookup``, ``_ProbedLookup``) built by one compiled
    call and by numpy: the same arrays and verdict, for tables with duplicates, a few bytes only
    (crowded buckets, colliding probes: unusable tables) or any bytes."""
    from lance_ops.encoding.compression.fsst import _low_mask, _ProbedLookup

    lengths = np.array([n for n, _, _ in table], np.int64)
    raw = np.frombuffer(b"".join(b if wide else bytes(c % 3 for c in b) for _, b, wide in table), np.uint8)
    keys = raw.view("<u8").reshape(-1) & _low_mask(lengths) if len(table) else np.zeros(0, np.uint64)
    for lookup, fields in ((_HashedLookup, ("short", "slots")), (_ProbedLookup, ("pkey", "pent", "mults"))):
        with _kernel_form(False):
            numpy_form = lookup(keys, lengths)
        with _kernel_form(True):
            compiled = lookup(keys, lengths)
        assert compiled.usable == numpy_form.usable
        for field in fields:
            got, want = getattr(compiled, field), getattr(numpy_form, field)
            assert got.dtype == want.dtype and np.array_equal(got, want), field


@settings(max_examples=60, deadline=None)
@given(table=_tables, seed=st.integers(0, 2**16))
def test_bucket_limit_forms_agree(table: list[tuple[int, bytes, bool]], seed: int) -> None:
    """The best 255 candidates within 8 symbols of 3..8 bytes per hash bucket: the compiled scan
    and the numpy ranks keep the same ones, in order (crowded buckets from few distinct bytes)."""
    from lance_ops.encoding.compression.fsst import _bucket_keep, _low_mask

    table = table * 3  # up to 765 candidates: past the 255 kept
    lengths = np.array([n for n, _, _ in table], np.int64)
    raw = np.frombuffer(b"".join(b if wide else bytes(c % 3 for c in b) for _, b, wide in table), np.uint8)
    keys = raw.view("<u8").reshape(-1) & _low_mask(lengths) if len(table) else np.zeros(0, np.uint64)
    order = np.random.default_rng(seed).permutation(len(keys)).astype(np.int64)
    with _kernel_form(False):
        numpy_form = _bucket_keep(keys, lengths, order)
    with _kernel_form(True):
        compiled = _bucket_keep(keys, lengths, order)
    assert np.array_equal(compiled, numpy_form)


@settings(max_examples=80, deadline=None)
@given(
    totals=st.lists(st.integers(1, 70_000), min_size=1, max_size=400)
    | st.lists(st.integers(1, 12), min_size=1, max_size=400)
    | st.lists(st.floats(0.5, 100.0), min_size=1, max_size=50),
    data=st.data(),
)
def test_gain_bar_is_the_partition(totals: list[float], data: st.DataObject) -> None:
    """The compiled count of the ``limit``-th largest total gives ``np.partition``'s element (or
    NaN, for the partition, when a total is not a whole number below 65,536)."""
    from lance_ops.encoding.compression import _fsst_kernels

    total = np.array(totals, np.float64)
    limit = data.draw(st.integers(1, len(total)))
    want = np.partition(total, len(total) - limit)[len(total) - limit]
    got = _fsst_kernels.gain_bar(total, limit)
    whole = bool(np.all(total == np.floor(total)) and total.max() < 65536)
    assert (got == want) if whole else (np.isnan(got) or got == want)


@settings(max_examples=40, deadline=None)
@given(values=edge_values, pairs=st.booleans())
def test_compiled_merge_matches_the_numpy_merge(values: list[bytes], pairs: bool) -> None:
    """The compiled candidate lists merged by the compiled hash table give the candidates and
    gains the numpy forms list and merge (by a sort), for the first table and a round."""
    from lance_ops.encoding.compression import _fsst_kernels, _fsst_numpy, fsst

    block = variable_block(values)
    sample, soffs = np.asarray(block.data, np.uint8), block.offsets.astype(np.int64)

    def merged(found: tuple[np.ndarray, ...]) -> list[tuple[int, int, float]]:
        return sorted(zip(*(np.asarray(a).tolist() for a in found), strict=True))

    def compiled_merge(found: tuple[np.ndarray, np.ndarray]) -> list[tuple[int, int, float]]:
        return merged(_fsst_kernels.merge_gains(found[0], found[1], found[1].astype(np.float64)))

    def numpy_merge(pairs_found: list[tuple[int, int]]) -> list[tuple[int, int, float]]:
        k = np.array([p[0] for p in pairs_found], np.uint64)
        n = np.array([p[1] for p in pairs_found], np.int64)
        return merged(_fsst_numpy.merge_gains(k, n, n.astype(np.float64)))

    with _kernel_form(False):
        keys, lengths = fsst._candidates(sample, soffs)
        first, rounds = _all_candidates(sample, soffs, keys, lengths, pairs)
    assert compiled_merge(_fsst_kernels.substring_candidates(sample, soffs)) == numpy_merge(first)
    _, _, tokens, match = fsst._encode(sample, soffs, keys, lengths, record=True, form="compiled")
    found = _fsst_kernels.token_candidates(sample, soffs, tokens, match, pairs)
    assert compiled_merge(found) == numpy_merge(rounds)
