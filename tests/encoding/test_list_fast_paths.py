"""The vectorised list paths of L10: FastLanes unpacking in output order, level slices and
bit-packed / variable chunks read in place, range scans and scattered takes of list pages,
and offsets / validity rebuilt from levels. Every result is compared with pyarrow (and, in
the interop tests, with pylance)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.compression import bitpacking, variable
from lance_ops.encoding.compression.base import ChunkSpans, gather_spans, ranges, span_mask
from lance_ops.encoding.data import FixedWidthBlock
from lance_ops.encoding.field_decoder import make_field_decoder
from lance_ops.encoding.structural.miniblock import MiniBlockReader
from lance_ops.encoding.structural.repdef import DecodedLeaf, Levels, shred, unshred
from lance_ops.errors import CorruptFileError
from tests.encoding.harness import encode_to_memory, pylance_read, pylance_write, round_trip

V21, V22 = FileVersion.V2_1, FileVersion.V2_2
VERSIONS = [V21, V22]


# --- kernels --------------------------------------------------------------------------------------


def _unpack_by_definition(words: np.ndarray, width: int) -> np.ndarray:
    """FastLanes unpacking straight from the layout definition (module docstring of bitpacking):
    lane l's stream is its words LSB-first; row r is stream bits [r W, (r + 1) W); cell (r, l) is
    value 128 (r mod 8) + 16 ORDER[r div 8] + l."""
    bits = words.dtype.itemsize * 8
    lanes = 1024 // bits
    order = [0, 4, 2, 6, 1, 5, 3, 7]
    out = np.zeros((words.shape[0], 1024), np.uint64)
    grid = words.reshape(words.shape[0], width, lanes).astype(np.uint64)
    for r in range(bits):
        value = np.zeros((words.shape[0], lanes), np.uint64)
        for j in range(width):
            bit = r * width + j
            value |= ((grid[:, bit // bits, :] >> np.uint64(bit % bits)) & np.uint64(1)) << np.uint64(j)
        first = 128 * (r % 8) + 16 * order[r // 8]
        out[:, first : first + lanes] = value
    return out.astype(words.dtype)


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_fastlanes_unpack_every_width_matches_the_definition(bits: int) -> None:
    rng = np.random.default_rng(bits)
    dtype = np.dtype(f"<u{bits // 8}")
    for width in range(bits + 1):
        words = rng.integers(0, 1 << 62, (3, width * 1024 // bits), dtype=np.uint64).astype(dtype)
        got = bitpacking.fastlanes_unpack(words, width)
        assert got.shape == (3, 1024) and got.flags.c_contiguous
        if width == 0:
            assert not got.any()
            continue
        np.testing.assert_array_equal(got, _unpack_by_definition(words, width), err_msg=f"{bits}/{width}")
        values = got & dtype.type((1 << width) - 1 if width < bits else np.iinfo(dtype).max)
        np.testing.assert_array_equal(
            bitpacking.fastlanes_unpack(bitpacking.fastlanes_pack(values, width), width), values
        )


def test_span_mask_and_gather_spans_shapes() -> None:
    blob = np.arange(100, dtype=np.uint16)
    np.testing.assert_array_equal(
        span_mask(np.array([2, 10]), np.array([3, 0]), 12), np.isin(np.arange(12), [2, 3, 4])
    )
    assert gather_spans(blob, np.array([0, 40]), np.array([40, 60])) is blob  # tiles the array
    assert len(gather_spans(blob, np.zeros(0, np.int64), np.zeros(0, np.int64))) == 0
    rng = np.random.default_rng(0)
    for avg in (3, 700):  # short spans (mask) and long ones (slice by slice)
        big = np.arange(20 * avg * 3, dtype=np.int64)
        sizes = rng.integers(0, 2 * avg, 20)
        starts = np.cumsum(sizes + rng.integers(0, avg, 20)) - sizes
        expected = np.concatenate([big[a : a + n] for a, n in zip(starts, sizes, strict=True)])
        np.testing.assert_array_equal(gather_spans(big, starts, sizes), expected)
        order = rng.permutation(20)  # unsorted spans use an index gather
        expected = np.concatenate([big[a : a + n] for a, n in zip(starts[order], sizes[order], strict=True)])
        np.testing.assert_array_equal(gather_spans(big, starts[order], sizes[order]), expected)
        np.testing.assert_array_equal(big[ranges(starts, sizes)], gather_spans(big, starts, sizes))


def test_chunk_spans_words_in_place_or_joined() -> None:
    blob = np.arange(64, dtype=np.uint8)
    aligned = ChunkSpans(blob, np.array([0, 8, 24]), np.array([4, 8, 16]))
    words, first = aligned.words(np.dtype("<u4"))
    assert np.shares_memory(words, blob)
    np.testing.assert_array_equal(first, [0, 2, 6])
    odd = ChunkSpans(blob, np.array([1, 9]), np.array([4, 8]))
    words, first = odd.words(np.dtype("<u4"))
    np.testing.assert_array_equal(first, [0, 1])
    np.testing.assert_array_equal(words, np.concatenate([blob[1:5], blob[9:17]]).view("<u4"))


def _ool_slices(rng: np.random.Generator, nums: list[int], width: int) -> tuple[ChunkSpans, np.ndarray]:
    values = rng.integers(0, 1 << width, sum(nums)).astype(np.uint16)
    starts = np.cumsum([0, *nums[:-1]])
    data, _ = bitpacking.pack_out_of_line_slices(values, starts, starts + np.array(nums), width)
    return ChunkSpans.of([np.frombuffer(d, np.uint8) for d in data]), values


@pytest.mark.parametrize("width", [1, 2, 3, 9, 16])
def test_out_of_line_level_slices_with_raw_and_packed_tails(width: int) -> None:
    """Slices of 0, 1, 1023, 1024, 1025 and odd level counts: raw and packed tails side by side
    decode through the tail mask exactly as each slice alone."""
    rng = np.random.default_rng(width)
    nums = [1, 1023, 1024, 1025, 0, 5, 2048, 3000, 1100, 7]
    spans, values = _ool_slices(rng, nums, width)
    dec = bitpacking.OutOfLineBitpackingDecompressor(16, width)
    got = dec.decompress_chunks(spans, nums)
    np.testing.assert_array_equal(got.view("<u2"), values)
    for i, n in enumerate(nums):
        one = dec.decompress(spans[i], n)
        assert isinstance(one, FixedWidthBlock)
        np.testing.assert_array_equal(one.view("<u2"), values[sum(nums[:i]) : sum(nums[: i + 1])])
    positions = np.sort(rng.choice(len(values), 50, replace=False))
    np.testing.assert_array_equal(
        dec.decompress_chunks_at(spans, nums, positions).view("<u2"), values[positions]
    )


@pytest.mark.parametrize("counts", [[1024, 1024, 7], [1024, 300, 1024, 1], [1], [1024], [5, 2, 3]], ids=str)
def test_inline_chunks_one_or_many_widths(counts: list[int]) -> None:
    """Chunks of one width (unpacked as a whole) and of several widths (the first is zero
    wide), short chunks in the middle (padding dropped through the span mask)."""
    rng = np.random.default_rng(len(counts))
    comp = bitpacking.InlineBitpackingCompressor(32)
    bufs, parts = [], []
    for i, n in enumerate(counts):
        high = 1 << (3 * i) if len(counts) > 3 else 1 << 12
        part = rng.integers(0, high, n).astype(np.uint32)
        data, _ = comp.compress_block(FixedWidthBlock.from_values(part))
        bufs.append(np.frombuffer(data, np.uint8))
        parts.append(part)
    dec = bitpacking.InlineBitpackingMiniBlockDecompressor(32)
    got = dec.decompress_chunks(ChunkSpans.of(bufs), counts)
    np.testing.assert_array_equal(got.view("<u4"), np.concatenate(parts))


def _variable_chunks(strings: list[list[bytes]]) -> ChunkSpans:
    bufs = []
    for chunk in strings:
        header = 4 * (len(chunk) + 1)
        offs = header + np.concatenate(([0], np.cumsum([len(s) for s in chunk]))).astype("<u4")
        raw = offs.tobytes() + b"".join(chunk)
        bufs.append(np.frombuffer(raw + b"\xfe" * (-len(raw) % 8), np.uint8))
    return ChunkSpans.of(bufs)


def test_variable_chunks_rebased_in_place() -> None:
    chunks = [[b"ab", b"", b"cde"], [], [b"x" * 300], [b"", b""], [b"q", b"rr"]]
    spans = _variable_chunks(chunks)
    dec = variable.VariableMiniBlockDecompressor(32)
    got = dec.decompress_chunks(spans, [len(c) for c in chunks])
    flat = [s for c in chunks for s in c]
    arr = pa.Array.from_buffers(
        pa.binary(), len(flat), [None, pa.py_buffer(got.offsets.astype(np.int32)), pa.py_buffer(got.data)]
    )
    assert arr.to_pylist() == flat
    # Garbled offsets inside a chunk, at its start and past its end are rejected.
    for chunk, pos, value in ((0, 2, 30), (0, 0, 3), (4, 2, 200)):
        bad = _variable_chunks(chunks)
        words = bad.blob.view("<u4")
        words[int(bad.starts[chunk]) // 4 + pos] = value
        with pytest.raises(CorruptFileError):
            dec.decompress_chunks(bad, [len(c) for c in chunks])


# --- levels -> arrays -------------------------------------------------------------------------------


def test_row_starts_are_kept_through_slices() -> None:
    rep = np.array([1, 0, 1, 1, 0, 0, 1], np.uint16)
    lv = Levels(shred(pa.array([[1, 2], [3], [4, 5, 6], [7]]))[0].levels.layers, rep, None, 7)
    np.testing.assert_array_equal(lv.row_starts(), [0, 2, 3, 6])
    assert lv.row_starts() is lv.row_starts()
    part = lv.slice(1, 6)
    np.testing.assert_array_equal(part.row_starts(), [1, 2])
    np.testing.assert_array_equal(Levels(lv.layers, part.rep, None, 5).row_starts(), [1, 2])
    assert lv.slice(0, 7) is lv


def _edge_lists(rng: np.random.Generator) -> dict[str, pa.Array]:
    """Empty, null and long lists (1 023 / 1 024 / 1 025 items, across chunk boundaries)."""
    lengths = [0, 1, 1023, 1024, 1025, 0, 3, 2048, 0, 1, 5000, 2]
    lengths = lengths + rng.integers(0, 6, 300).tolist() + [1025, 1024, 1023]
    n = len(lengths)
    offsets = pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32))
    total = int(sum(lengths))
    values = pa.array(rng.integers(-(1 << 20), 1 << 20, total, dtype=np.int32))
    nulls = pa.array(rng.random(n) < 0.15)
    item_nulls = rng.random(total) < 0.1
    strings = pa.array([f"s{i % 97}" * (i % 4) for i in range(total)], mask=item_nulls)
    ints = pa.ListArray.from_arrays(offsets, values, mask=nulls)
    return {
        "list<int32>": ints,
        "list<int32 nullable items>": pa.ListArray.from_arrays(
            offsets, pa.array(values.to_numpy(), mask=item_nulls)
        ),
        "large_list<int32>": pa.LargeListArray.from_arrays(offsets.cast(pa.int64()), values, mask=nulls),
        "list<string>": pa.ListArray.from_arrays(offsets, strings, mask=nulls),
        "list<list<int32>>": pa.ListArray.from_arrays(
            pa.array(np.arange(0, n + 1, 3, dtype=np.int32)),
            ints,
            mask=pa.array(rng.random(n // 3 + 1) < 0.1),
        )
        if n % 3 == 0
        else pa.ListArray.from_arrays(pa.array(np.append(np.arange(0, n, 3), n).astype(np.int32)), ints),
        "struct<list<int32>>": pa.StructArray.from_arrays(
            [ints, pa.array(np.arange(n, dtype=np.int64))],
            names=["l", "i"],
            mask=pa.array(rng.random(n) < 0.1),
        ),
        "list<struct<int32, string>>": pa.ListArray.from_arrays(
            offsets,
            pa.StructArray.from_arrays(
                [values, strings], names=["a", "b"], mask=pa.array(rng.random(total) < 0.05)
            ),
            mask=nulls,
        ),
        "map<int32, string>": pa.MapArray.from_arrays(offsets, values, strings, mask=nulls),
    }


@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_edge_shaped_lists_scan_slice_and_take(version: FileVersion) -> None:
    rng = np.random.default_rng(11)
    for name, arr in _edge_lists(rng).items():
        if name.startswith("map") and version is V21:
            continue  # maps need 2.2
        n = len(arr)
        picks = np.sort(rng.choice(n, 40, replace=False)).tolist()
        round_trip(
            arr,
            version,
            slices=[(0, 1), (1, 2), (2, 5), (3, 4), (0, n), (n - 1, n), (n // 2, n - 3), (4, 12)],
            takes=[[0], [n - 1], [2, 3, 4], [0, 4, 7, n - 1], picks, list(range(0, n, 2))],
        )
        # Page boundaries cut lists between pages (rows never split): the range path per page.
        round_trip(arr, version, page_sizes=[5, 1, n - 6], slices=[(3, 9), (0, n)], takes=[[4, 5, 6], picks])


@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_zero_and_one_row_list_pages(version: FileVersion) -> None:
    for arr in (
        pa.array([], pa.list_(pa.int32())),
        pa.array([None], pa.list_(pa.int32())),
        pa.array([[]], pa.list_(pa.int32())),
        pa.array([[1, None, 3]], pa.list_(pa.int32())),
        pa.array([[[1], [], None]], pa.list_(pa.list_(pa.int64()))),
        pa.array([["a", None, ""]], pa.list_(pa.string())),
    ):
        round_trip(arr, version, takes=[[0]], slices=[(0, 1)])  # compares with pyarrow


@pytest.mark.parametrize("version", VERSIONS, ids=str)
def test_range_reads_match_per_row_chunk_search(version: FileVersion) -> None:
    """The range path of ``chunks_for_rows`` picks the same chunks as the per-row search."""
    rng = np.random.default_rng(3)
    arr = _edge_lists(rng)["list<int32>"]
    field = pa.field("c", arr.type)
    mem, _ = encode_to_memory(field, [arr], version)
    (info,) = mem.columns[0]
    reader = MiniBlockReader(info, arr.type, version)
    page = reader._load(mem.fetch)
    assert page.num_chunks > 5
    n = len(arr)
    for a, b in [(0, n), (0, 2), (3, 5), (4, 6), (n - 4, n), (10, 200)]:
        rows = np.arange(a, b, dtype=np.int64)
        fast, first = page.chunks_for_rows(rows)
        split = np.concatenate([rows[:1], rows[2:]]) if len(rows) > 2 else rows  # not a range
        slow_a, _ = page.chunks_for_rows(rows[:1])
        slow_b, _ = page.chunks_for_rows(split)
        slow = np.union1d(slow_a, slow_b)
        np.testing.assert_array_equal(fast, slow, err_msg=f"rows {a}:{b}")
        decoder = make_field_decoder(field, mem.columns, version)
        assert decoder.read(mem.fetch, range(a, b)).equals(arr.slice(a, b - a))
    with pytest.raises(CorruptFileError):
        page.chunks_for_rows(np.arange(n - 2, n + 3, dtype=np.int64))


# --- pylance as the oracle ----------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_lists_read_by_range_and_take(tmp_path: Path, version: str) -> None:
    """Edge-shaped list pages written by pylance: our full, range and scattered reads equal
    pyarrow's; pylance reads the same shapes we write."""
    from lance.file import LanceFileReader as PylanceReader

    from lance_ops.file import LanceFileReader, LanceFileWriter

    rng = np.random.default_rng(5)
    for name, arr in _edge_lists(rng).items():
        if name.startswith("map"):
            continue  # maps are 2.2-only and covered by the map interop tests
        theirs = str(tmp_path / f"theirs-{version}.lance")
        pylance_write(theirs, arr, version)
        n = len(arr)
        reader = LanceFileReader(theirs)
        assert reader.read_all().to_table().column("c").combine_chunks().equals(arr), name
        assert reader.read_range(7, n - 9).to_table().column("c").combine_chunks().equals(arr.slice(7, n - 9))
        rows = np.sort(rng.choice(n, 60, replace=False))
        assert reader.take_rows(rows).to_table().column("c").combine_chunks().equals(arr.take(rows)), name
        ours = str(tmp_path / f"ours-{version}.lance")
        with LanceFileWriter(ours, pa.schema([pa.field("c", arr.type)]), version=version) as writer:
            writer.write_batch(pa.table({"c": arr}))
        assert pylance_read(ours).equals(arr), name
        got = PylanceReader(ours).take_rows(rows.tolist()).to_table().column("c").combine_chunks()
        assert got.equals(arr.take(rows)), name


@pytest.mark.parametrize(
    "arr",
    [
        pa.array(
            [[1, 2], None, [], [3]], pa.list_(pa.int32())
        ),  # list of leaf items (running count over rows)
        pa.array([[[1, 2]], None, [[], None, [3]]], pa.list_(pa.list_(pa.int32()))),  # general path
        pa.array([{"l": [1, 2]}, None, {"l": None}], pa.struct([("l", pa.list_(pa.int32()))])),
    ],
    ids=["list", "list<list>", "struct<list>"],
)
def test_unshred_rebuilds_and_rejects_a_value_count_mismatch(arr: pa.Array) -> None:
    (leaf,) = shred(arr)
    values = pa.array(leaf.values.to_numpy(zero_copy_only=False), leaf.values.type)  # no nulls of its own
    assert unshred(arr.type, [DecodedLeaf(leaf.levels, values)]).equals(arr)
    with pytest.raises(CorruptFileError, match="visible levels"):
        unshred(arr.type, [DecodedLeaf(leaf.levels, values.slice(1))])
