"""Variable in the mini-block, block and per-value contexts (spec §3.6, §3.7, §7.2)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops._proto import encodings_v2_1_pb2 as pb
from lance_ops.encoding.compression.base import Context, decompressor_for
from lance_ops.encoding.compression.variable import VariableCompressor, variable_chunk_counts, variable_desc
from lance_ops.encoding.data import FixedWidthBlock
from lance_ops.errors import CorruptFileError, UnsupportedEncodingError

from .compression_helpers import (
    block_roundtrip,
    miniblock_chunks,
    miniblock_roundtrip,
    page_values,
    per_value_roundtrip,
    read_pages,
    strings_of,
    variable_block,
    write_column,
)

binaries = st.lists(st.binary(max_size=40), max_size=300) | st.lists(
    st.binary(min_size=300, max_size=5000), max_size=6
)


@given(values=binaries, large=st.booleans(), minichunk=st.sampled_from([4096, 1024, 65536]))
def test_roundtrip_all_contexts(values: list[bytes], large: bool, minichunk: int) -> None:
    block = variable_block(values, large)
    blocks, compressed, desc = miniblock_roundtrip(VariableCompressor(minichunk), block)
    assert strings_of(blocks) == values
    width = 8 if large else 4
    assert desc.variable.offsets.flat.bits_per_value == 8 * width
    assert all(s % width == 0 for c in compressed.chunks for s in c.buffer_sizes)
    decoded, _, _ = block_roundtrip(VariableCompressor(), block)
    assert strings_of([decoded]) == values
    same, _, _ = per_value_roundtrip(VariableCompressor(), block)
    assert strings_of([same]) == values


def test_edge_counts() -> None:
    for n in (0, 1, 1023, 1024, 1025):
        values = [bytes([i % 251]) * (i % 3) for i in range(n)]
        blocks, _, _ = miniblock_roundtrip(VariableCompressor(), variable_block(values))
        assert strings_of(blocks) == values


def test_chunk_layout_bytes() -> None:
    compressed, _ = VariableCompressor().compress(variable_block([b"ab", b"c"]))
    assert compressed.buffers[0].tobytes() == bytes.fromhex("0c000000 0e000000 0f000000 616263 48")
    compressed, _ = VariableCompressor().compress(variable_block([b"ab", b"c"], large=True))
    assert compressed.buffers[0].tobytes() == bytes.fromhex(
        "1800000000000000 1a00000000000000 1b00000000000000 616263 4848484848"
    )


def test_oversized_values_still_fill_two_per_chunk() -> None:
    """A non-last chunk of one value would record log2 = 0, which marks the last chunk and
    which pylance rejects; so chunks keep two values even past ``minichunk_size``."""
    values = [b"x" * 5000, b"y", b"z" * 5000, b"w"]
    assert variable_chunk_counts(np.cumsum([0] + [len(v) for v in values]), 4) == [2, 2]
    assert variable_chunk_counts(np.cumsum([0] + [5000] * 5), 4) == [2, 2, 1]


def test_block_form_dictionary_example() -> None:
    data, desc = VariableCompressor().compress_block(variable_block([b"apple", b"banana", b"cherry"]))
    assert (
        data == bytes.fromhex("20000000 18000000 00000000 05000000 0b000000 11000000") + b"applebananacherry"
    )
    assert len(data) == 41
    assert desc == variable_desc(32)
    large, _ = VariableCompressor().compress_block(variable_block([b"a"], large=True))
    assert large[:16] == bytes.fromhex("4000000000000000 2000000000000000")


def test_garbled() -> None:
    dec = decompressor_for(Context.MINIBLOCK, variable_desc(32))
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(bytes.fromhex("0c000000 ff000000 0f000000 616263 48"))], 2)
    with pytest.raises(CorruptFileError):
        dec.decompress([memoryview(b"\x0c\x00")], 2)
    block = decompressor_for(Context.BLOCK, variable_desc(32))
    with pytest.raises(CorruptFileError):
        block.decompress(memoryview(bytes.fromhex("20000000 18000000 00000000")), 3)
    with pytest.raises(CorruptFileError):
        block.decompress(memoryview(bytes.fromhex("4000000000000000 2000000000000000")), 1)
    with pytest.raises(UnsupportedEncodingError):
        decompressor_for(Context.BLOCK, variable_desc(16))
    with pytest.raises(CorruptFileError):
        decompressor_for(Context.PER_VALUE, variable_desc(32)).decompress(
            FixedWidthBlock.from_values(np.zeros(2))
        )


# --- pylance pages -----------------------------------------------------------------------------------


def _strings(lengths: np.ndarray) -> list[str]:
    return [(f"{i}-" * 200)[:k] for i, k in enumerate(lengths)]


_rng = np.random.default_rng(3)
DISTRIBUTIONS = {
    "short": _strings(_rng.integers(0, 20, 5000)),
    "wide": _strings(_rng.integers(0, 200, 3000)),
    "fixed5": _strings(np.full(3000, 5)),
    "half-empty": [f"{i}" if i % 2 else "" for i in range(3000)],
    "mixed": _strings(np.where(_rng.random(2000) < 0.05, 250, _rng.integers(0, 8, 2000))),
    "tiny-page": ["abc", "", "defgh"],
}


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("large", [False, True])
def test_pylance_variable_pages(tmp_path, version: str, dist: str, large: bool) -> None:
    values = DISTRIBUTIONS[dist]
    arr = pa.array(values, pa.large_string() if large else pa.string())
    (page,) = read_pages(
        write_column(tmp_path / "v.lance", arr, {"lance-encoding:compression": "none"}, version)
    )
    mb = page.layout.mini_block_layout
    assert mb.value_compression == variable_desc(64 if large else 32)
    assert [s.decode() for s in strings_of(page_values(page))] == values
    block = variable_block([v.encode() for v in values], large)
    ours, _ = VariableCompressor().compress(block)
    chunks = miniblock_chunks(page)
    assert [c.num_values for c in chunks][:-1] == [1 << c.log_num_values for c in ours.chunks[:-1]]
    assert ours.buffers[0].tobytes() == b"".join(bytes(c.values[0]) for c in chunks)


@pytest.mark.interop
def test_pylance_minichunk_size(tmp_path) -> None:
    values = DISTRIBUTIONS["wide"]
    meta = {"lance-encoding:compression": "none", "lance-encoding:minichunk-size": "16384"}
    (page,) = read_pages(write_column(tmp_path / "v.lance", pa.array(values), meta, "2.2"))
    ours, _ = VariableCompressor(16384).compress(variable_block([v.encode() for v in values]))
    assert ours.buffers[0].tobytes() == b"".join(bytes(c.values[0]) for c in miniblock_chunks(page))


@pytest.mark.interop
def test_pylance_dictionary_buffer_2_1(tmp_path) -> None:
    values = [["apple", "banana", "cherry"][i % 3] for i in range(1000)]
    (page,) = read_pages(write_column(tmp_path / "d.lance", pa.array(values), version="2.1"))
    mb = page.layout.mini_block_layout
    assert mb.dictionary == variable_desc(32) and mb.num_dictionary_items == 3
    dictionary = page.buffers[2]
    assert (
        dictionary
        == bytes.fromhex("20000000 18000000 00000000 05000000 0b000000 11000000") + b"applebananacherry"
    )
    decoded = decompressor_for(Context.BLOCK, mb.dictionary).decompress(memoryview(dictionary), 3)
    assert strings_of([decoded]) == [b"apple", b"banana", b"cherry"]
    assert pb.CompressiveEncoding.FromString(mb.dictionary.SerializeToString()) == variable_desc(32)


def _chunk_counts_by_doubling(offsets: np.ndarray, width: int, size: int, max_values: int) -> list[int]:
    """§3.7 as written: take the rest if it fits, else start at two and double while it fits."""
    n, counts, start = len(offsets) - 1, [], 0
    fits = lambda k: (k + 1) * width + int(offsets[start + k] - offsets[start]) <= size  # noqa: E731
    while start < n:
        left = n - start
        if left <= max_values and fits(left):
            counts.append(left)
            break
        k = min(2, left)
        while 2 * k <= left and 2 * k <= max_values and fits(2 * k):
            k *= 2
        counts.append(k)
        start += k
    return counts


@given(
    lengths=st.lists(st.integers(0, 3000), max_size=400),
    width=st.sampled_from([4, 8]),
    size=st.sampled_from([64, 1024, 4096]),
    max_values=st.sampled_from([4, 64, 4096]),
)
def test_chunk_counts_match_doubling_rule(lengths: list[int], width: int, size: int, max_values: int) -> None:
    offsets = np.cumsum([0, *lengths])
    expected = _chunk_counts_by_doubling(offsets, width, size, max_values)
    assert variable_chunk_counts(offsets, width, size, max_values) == expected


def _chunk_counts_one_by_one(offsets: np.ndarray, width: int, minichunk: int, max_values: int) -> list[int]:
    """The chunking rule applied one chunk at a time (the reference for the run-at-once version)."""
    cost = (np.asarray(offsets, np.int64) + width * np.arange(len(offsets))).tolist()
    n, counts, start = len(offsets) - 1, [], 0
    while start < n:
        left = n - start
        fitting = next(
            (k for k in range(left, 0, -1) if cost[start + k] - cost[start] <= minichunk - width), 0
        )
        if left <= max_values and fitting >= left:
            return [*counts, left]
        bound = min(fitting, left, max_values)
        k = 1 << (bound.bit_length() - 1) if bound >= 2 else min(2, left)
        counts.append(k)
        start += k
    return counts


@given(
    lengths=st.one_of(
        st.lists(st.integers(0, 40), max_size=600),
        st.lists(st.sampled_from([0, 1, 2, 3, 500, 5000]), max_size=300),
    ),
    width=st.sampled_from([4, 8]),
    minichunk=st.sampled_from([64, 256, 4096]),
    max_values=st.sampled_from([4, 64, 4096]),
)
def test_chunk_counts_match_the_rule_applied_chunk_by_chunk(
    lengths: list[int], width: int, minichunk: int, max_values: int
) -> None:
    offsets = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))
    expected = _chunk_counts_one_by_one(offsets, width, minichunk, max_values)
    assert variable_chunk_counts(offsets, width, minichunk, max_values) == expected
    assert sum(expected) == len(lengths)
