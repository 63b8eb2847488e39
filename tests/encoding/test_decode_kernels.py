"""The compiled mini-block decode (:mod:`lance_ops.encoding._decode_kernels`, dispatched by
:func:`lance_ops.encoding.kernels.unpack_chunks` and :func:`~lance_ops.encoding.kernels.cut_spans`)
gives what the numpy forms give and what was written: on the kernels' own inputs (random widths
per chunk, chunks apart in their page, short last chunks) and through files pylance wrote and we
wrote, read with each form and by pylance."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_ops.encoding import _decode_kernels, kernels
from lance_ops.encoding.compression import bitpacking, rle
from lance_ops.encoding.compression.base import ChunkSpans, gather_spans
from lance_ops.encoding.data import FixedWidthBlock
from lance_ops.errors import CorruptFileError
from lance_ops.file import LanceFileReader, LanceFileWriter

REPO = Path(__file__).resolve().parents[2]
COUNTS = st.sampled_from([0, 1, 7, 1023, 1024, 1025, 2047, 2049, 4100])
BITS = st.sampled_from([8, 16, 32, 64])
FORMS = ["numpy", "compiled"]


@contextmanager
def decode_form(form: str) -> Iterator[None]:
    """Decode with the numpy forms or the compiled kernels only, whatever ran before."""
    saved = kernels._compiled_in_use, kernels.DECODE_COMPILED_AFTER, kernels._decoded_values
    kernels._compiled_in_use = form == "compiled"
    kernels.DECODE_COMPILED_AFTER = 0 if form == "compiled" else 1 << 62
    kernels._decoded_values = 0
    try:
        yield
    finally:
        kernels._compiled_in_use, kernels.DECODE_COMPILED_AFTER, kernels._decoded_values = saved


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The chunk count of each call of the compiled InlineBitpacking kernel (which still runs)."""
    calls: list[int] = []
    real = _decode_kernels.unpack_chunks

    def counted(*args: np.ndarray) -> None:
        calls.append(len(args[1]))
        real(*args)

    monkeypatch.setattr(_decode_kernels, "unpack_chunks", counted)
    return calls


def _chunked_values(rng: np.random.Generator, count: int, bits: int) -> np.ndarray:
    """``count`` unsigned ``bits``-bit values whose 1024-value chunks each have a random bit width
    (0 to ``bits``; each chunk's first value has the width's top bit set, so the chunk is packed
    at exactly that width)."""
    dtype = np.dtype(f"<u{bits // 8}")
    values = rng.integers(0, 2**64, count, dtype=np.uint64, endpoint=False)
    for first in range(0, count, 1024):
        width = int(rng.integers(0, bits + 1))
        part = values[first : first + 1024]
        part &= np.uint64((1 << width) - 1) if width < 64 else np.uint64(2**64 - 1)
        if width:
            part[0] |= np.uint64(1 << (width - 1))
    return values.astype(dtype)


def _page(rng: np.random.Generator, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``values``' InlineBitpacking chunks laid in one word array with random gaps between them
    (as chunk headers and other buffers lie between them in a page): the words, each chunk's
    first word and value count."""
    data, sizes = bitpacking._inline_encode(values)
    words = data.view(values.dtype)
    lens = sizes // values.dtype.itemsize
    firsts = np.cumsum(lens) - lens
    gaps = rng.integers(0, 5, len(lens))
    starts = firsts + np.cumsum(gaps)
    out = np.full(int(lens.sum() + gaps.sum()), values.dtype.type(0xA5))
    for a, s, n in zip(firsts.tolist(), starts.tolist(), lens.tolist(), strict=True):
        out[s : s + n] = words[a : a + n]
    nums = np.minimum(1024, len(values) - np.arange(len(lens)) * 1024)
    return out, starts.astype(np.int64), nums.astype(np.int64)


@settings(max_examples=80, deadline=None)
@given(count=COUNTS, bits=BITS, seed=st.integers(0, 2**16))
def test_compiled_unpack_equals_the_numpy_form_and_the_values(count: int, bits: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = _chunked_values(rng, count, bits)
    words, starts, nums = _page(rng, values)
    widths = words[starts].astype(np.int64)
    compiled = np.empty(count, values.dtype)
    _decode_kernels.unpack_chunks(words, starts, nums, compiled)
    numpy_form = bitpacking.numpy_unpack_chunks(words, starts, widths, nums)
    assert compiled.tolist() == values.tolist()
    assert numpy_form.tolist() == values.tolist()


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
@pytest.mark.parametrize("width", [0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64])
def test_every_width_round_trips(bits: int, width: int) -> None:
    """One chunk of each width (those that fit): every row of the grid, spilling or not."""
    if width > bits:
        return
    rng = np.random.default_rng(width * 100 + bits)
    values = rng.integers(0, 2**64, 3000, dtype=np.uint64)
    values &= np.uint64((1 << width) - 1) if width < 64 else np.uint64(2**64 - 1)
    values = values.astype(f"<u{bits // 8}")
    words, starts, nums = _page(rng, values)
    out = np.empty(len(values), values.dtype)
    _decode_kernels.unpack_chunks(words, starts, nums, out)
    assert out.tolist() == values.tolist()


@settings(max_examples=80, deadline=None)
@given(
    slices=st.lists(st.sampled_from([0, 1, 5, 100, 1000, 1023, 1024, 1025, 2048, 2100]), max_size=6),
    bits=BITS,
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_compiled_level_slices_equal_the_numpy_form(slices: list[int], bits: int, seed: int, data) -> None:  # type: ignore[no-untyped-def]
    """OutOfLineBitpacking slices (def/rep levels of chunks): whole blocks, then tails raw or
    packed (as their size decides), at every width."""
    rng = np.random.default_rng(seed)
    width = data.draw(st.integers(0, bits))
    values = rng.integers(0, 2**64, sum(slices), dtype=np.uint64)
    values &= np.uint64((1 << width) - 1) if width < 64 else np.uint64(2**64 - 1)
    values = values.astype(f"<u{bits // 8}")
    stops = np.cumsum(np.array(slices, np.int64))
    spans, _ = bitpacking.pack_out_of_line_slices(values, stops - np.array(slices, np.int64), stops, width)
    reader = bitpacking.OutOfLineBitpackingDecompressor(bits, width)
    nums = np.array(slices, np.int64)
    words, firsts, raw_tails = reader._slice_words(spans, nums)
    compiled = np.empty(len(values), values.dtype)
    _decode_kernels.unpack_slices(words, firsts, nums, raw_tails, width, compiled)
    assert compiled.tolist() == values.tolist()
    if len(slices):
        numpy_form = bitpacking.numpy_unpack_slices(words, firsts, nums, raw_tails, width)
        assert numpy_form.tolist() == values.tolist()
    for form in FORMS:
        with decode_form(form):
            assert reader.decompress_chunks(spans, slices).data.view(values.dtype).tolist() == values.tolist()


@settings(max_examples=60, deadline=None)
@given(
    slices=st.lists(st.sampled_from([0, 1, 2, 300, 1023, 1024, 1025, 4096]), max_size=6),
    seed=st.integers(0, 2**16),
)
def test_batched_rle_level_slices_equal_one_by_one(slices: list[int], seed: int) -> None:
    """RLE level slices (2.2's def levels of sparse nulls) decoded in one call, as each alone."""
    rng = np.random.default_rng(seed)
    compressor = rle.RleCompressor()
    reader = rle.RleBlockDecompressor(16)
    blobs, expected = [], []
    for n in slices:
        levels = (rng.random(n) < rng.choice([0.0, 0.01, 0.5])).astype(np.uint16)
        data, _ = compressor.compress_block(FixedWidthBlock.from_values(levels))
        assert reader.decompress(memoryview(data), n).data.view(np.uint16).tolist() == levels.tolist()
        blobs.append(data)
        expected.extend(levels.tolist())
    spans = ChunkSpans.of([memoryview(b) for b in blobs])
    assert reader.decompress_chunks(spans, slices).data.view(np.uint16).tolist() == expected
    if slices and sum(slices):  # a wrong count is caught, not decoded
        wrong = [*slices[:-1], slices[-1] + 1]
        with pytest.raises(CorruptFileError):
            reader.decompress_chunks(spans, wrong)


@pytest.mark.parametrize("form", FORMS)
def test_dispatch_uses_the_chosen_form(form: str, kernel_calls: list[int]) -> None:
    rng = np.random.default_rng(5)
    values = _chunked_values(rng, 5000, 32)
    words, starts, nums = _page(rng, values)
    with decode_form(form):
        got = kernels.unpack_chunks(words, starts, words[starts].astype(np.int64), nums)
    assert got.tolist() == values.tolist()
    assert kernel_calls == ([5] if form == "compiled" else [])


def test_decoding_turns_compiled_after_its_budget() -> None:
    rng = np.random.default_rng(6)
    values = _chunked_values(rng, 3000, 16)
    words, starts, nums = _page(rng, values)
    with decode_form("numpy"):
        kernels.DECODE_COMPILED_AFTER = 5000
        kernels.unpack_chunks(words, starts, words[starts].astype(np.int64), nums)
        assert not kernels._compiled_in_use  # 3000 values decoded so far
        kernels.unpack_chunks(words, starts, words[starts].astype(np.int64), nums)
        assert kernels._compiled_in_use  # 6000: numba's start is paid from now on


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 300), max_size=12), seed=st.integers(0, 2**16))
def test_cut_spans_in_both_forms(sizes: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = np.array(sizes, np.int64)
    gaps = rng.integers(0, 20, len(sizes))
    starts = np.cumsum(gaps) + np.cumsum(size) - size
    blob = rng.integers(0, 256, int(starts[-1] + size[-1] + 3) if sizes else 3, dtype=np.uint8)
    expected = gather_spans(blob, starts, size).tolist()
    for form in FORMS:
        with decode_form(form):
            assert kernels.cut_spans(blob, starts, size, int(size.sum())).tolist() == expected


# ---------------------------------------------------------------- through files, with pylance


def _table(rng: np.random.Generator, rows: int) -> pa.Table:
    """Fixed-width columns of every width: negative values, nulls, chunks of random bit widths."""
    chunked = _chunked_values(rng, rows, 64).view(np.int64)
    return pa.table(
        {
            "i8": pa.array(rng.integers(-128, 128, rows, dtype=np.int8)),
            "u16": pa.array(rng.integers(0, 300, rows, dtype=np.uint16)),
            "i32": pa.array(rng.integers(-(2**31), 2**31, rows, dtype=np.int32), mask=rng.random(rows) < 0.2),
            "i64": pa.array(np.arange(rows, dtype=np.int64) - rows // 2),
            "chunked": pa.array(chunked),
            "u64": pa.array(rng.integers(0, 2**64, rows, dtype=np.uint64, endpoint=False)),
            "f64": pa.array(rng.random(rows)),
            "f32": pa.array(rng.random(rows, dtype=np.float32), mask=rng.random(rows) < 0.1),
            # Rare nulls: 2.2 writes the def levels RLE (the batched RLE level decode)
            "sparse": pa.array(rng.integers(0, 1000, rows), mask=rng.random(rows) < 0.005),
        }
    )


def _ours(path: str, form: str, start: int, stop: int) -> tuple[pa.Table, pa.Table]:
    """Our read of the whole file and of rows ``start..stop``, in ``form``."""
    with decode_form(form):
        reader = LanceFileReader(path)
        return reader.read_all().to_table(), reader.read_range(start, stop - start).to_table()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=COUNTS, version=st.sampled_from(["2.1", "2.2"]), seed=st.integers(0, 2**16), data=st.data())
def test_pylance_files_read_alike_in_both_forms(tmp_path, rows, version, seed, data) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    table = _table(rng, rows)
    path = str(tmp_path / f"theirs-{version}-{rows}-{seed}.lance")
    with lance.file.LanceFileWriter(path, table.schema, version=version) as writer:
        writer.write_batch(table)
    start = data.draw(st.integers(0, max(rows - 1, 0)))
    stop = data.draw(st.integers(min(start + 1, rows), rows))
    for form in FORMS:
        whole, part = _ours(path, form, start, stop)
        assert whole.equals(table)
        assert part.equals(table.slice(start, stop - start))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=COUNTS, version=st.sampled_from(["2.1", "2.2"]), seed=st.integers(0, 2**16))
def test_our_files_read_alike_in_both_forms_and_by_pylance(tmp_path, rows, version, seed) -> None:  # type: ignore[no-untyped-def]
    table = _table(np.random.default_rng(seed), rows)
    path = str(tmp_path / f"ours-{version}-{rows}-{seed}.lance")
    with LanceFileWriter(path, table.schema, version=version) as writer:
        writer.write_batch(table)
    assert lance.file.LanceFileReader(path).read_all().to_table().equals(table)
    for form in FORMS:
        whole, part = _ours(path, form, rows // 3, max(rows // 3, rows - 5))
        assert whole.equals(table)
        assert part.equals(table.slice(rows // 3, max(rows // 3, rows - 5) - rows // 3))


def test_a_pylance_file_is_decoded_by_the_compiled_kernel(tmp_path, kernel_calls: list[int]) -> None:  # type: ignore[no-untyped-def]
    """The file tests above go through the kernel: pylance's int pages are InlineBitpacking."""
    table = _table(np.random.default_rng(3), 5000)
    for version in ("2.1", "2.2"):
        path = str(tmp_path / f"{version}.lance")
        with lance.file.LanceFileWriter(path, table.schema, version=version) as writer:
            writer.write_batch(table)
        kernel_calls.clear()
        whole, _ = _ours(path, "compiled", 0, 1)
        assert whole.equals(table)
        assert sum(kernel_calls) >= 5  # the 1024-value chunks of 5000 rows, for some column


def test_a_read_below_the_budget_loads_no_numba(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A fresh process reading 2M values (pylance's bit-packed ints and flat doubles) decodes
    them with the numpy forms: numba's start is left to processes that read more (a check of
    ``sys.modules``, not a timing)."""
    rows = 1_000_000
    table = pa.table({"i": np.arange(rows, dtype=np.int64) % 5000, "f": np.linspace(0, 1, rows)})
    uri = str(tmp_path / "ds")
    lance.write_dataset(table, uri)
    script = (
        "import sys, lance_ops\n"
        f"assert lance_ops.dataset({uri!r}).to_table().num_rows == {rows}\n"
        "print('numba' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True, timeout=300
    )
    assert done.stdout.strip().splitlines()[-1] == "False"
