"""Page statistics follow the format's rules; HLL sketches estimate within bounds and merge exactly."""

from __future__ import annotations

import math
import pickle
import struct

import datasketches
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.encoding.statistics import (
    merge_statistics,
    page_nan_counts,
    page_statistics,
    supports_statistics,
)

NEG_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]


def _negative(value: float) -> bool:
    return struct.pack("<d", value)[0:8] != struct.pack("<d", abs(value))


def _split(n: int, cuts: list[int]) -> list[int]:
    """Page lengths covering ``n`` rows, empty pages included."""
    points = sorted(min(c, n) for c in cuts)
    edges = [0, *points, n]
    return [b - a for a, b in zip(edges, edges[1:], strict=False)]


def _pages(values: list, lengths: list[int]) -> list[list]:
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    return [values[s:e] for s, e in zip(starts, starts[1:], strict=False)]


INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), type_=st.sampled_from(INT_TYPES), cuts=st.lists(st.integers(0, 40), max_size=4))
def test_integer_bounds(data: st.DataObject, type_: pa.DataType, cuts: list[int]) -> None:
    info = np.iinfo(type_.to_pandas_dtype())
    values = data.draw(st.lists(st.none() | st.integers(int(info.min), int(info.max)), max_size=40))
    lengths = _split(len(values), cuts)
    stats = page_statistics(pa.array(values, type_), lengths).to_pylist()
    for page, row in zip(_pages(values, lengths), stats, strict=True):
        present = [v for v in page if v is not None]
        assert row["null_count"] == len(page) - len(present)
        if present:
            assert (row["min_value"], row["max_value"]) == (min(present), max(present))
        else:
            assert (row["min_value"], row["max_value"]) == (int(info.min), int(info.max))


@pytest.mark.parametrize(
    ("type_", "low", "high"),
    [
        (pa.date32(), -(2**31), 2**31 - 1),
        (pa.date64(), -(2**63), 2**63 - 1),
        (pa.time32("ms"), -(2**31), 2**31 - 1),
        (pa.time64("ns"), -(2**63), 2**63 - 1),
        (pa.timestamp("us", "UTC"), -(2**63), 2**63 - 1),
        (pa.duration("s"), -(2**63), 2**63 - 1),
    ],
)
def test_temporal_all_null_uses_representable_extremes(type_: pa.DataType, low: int, high: int) -> None:
    stats = page_statistics(pa.nulls(3, type_), [3])
    storage = pa.int32() if type_.bit_width == 32 else pa.int64()
    assert stats.field("min_value").view(storage).to_pylist() == [low]
    assert stats.field("max_value").view(storage).to_pylist() == [high]
    assert stats.field("min_value").type == type_


def test_temporal_bounds_are_exact() -> None:
    array = pa.array([5, None, -3, 2**62], pa.int64()).view(pa.timestamp("ns"))
    stats = page_statistics(array, [2, 2])
    assert stats.field("min_value").view(pa.int64()).to_pylist() == [5, -3]
    assert stats.field("max_value").view(pa.int64()).to_pylist() == [5, 2**62]


def test_booleans() -> None:
    stats = page_statistics(pa.array([True, None, None, False, True]), [1, 2, 2]).to_pylist()
    assert [(r["min_value"], r["max_value"], r["null_count"]) for r in stats] == [
        (True, True, 0),
        (False, True, 2),
        (False, True, 0),
    ]


FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.none() | FLOATS | st.sampled_from([0.0, -0.0, math.nan, NEG_NAN]), max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=3),
    type_=st.sampled_from([pa.float32(), pa.float64()]),
)
def test_float_bounds(values: list[float | None], cuts: list[int], type_: pa.DataType) -> None:
    if type_ == pa.float32():
        values = [
            None if v is None else float(np.float32(v)) if abs(v) < 3e38 or not math.isfinite(v) else None
            for v in values
        ]
    lengths = _split(len(values), cuts)
    array = pa.array(values, type_)
    stats = page_statistics(array, lengths).to_pylist()
    nans = page_nan_counts(array, lengths)
    for k, (page, row) in enumerate(zip(_pages(values, lengths), stats, strict=True)):
        present = [v for v in page if v is not None and not math.isnan(v)]
        nan = [v for v in page if v is not None and math.isnan(v)]
        assert list(nans[:, k]) == [sum(not _negative(v) for v in nan), sum(_negative(v) for v in nan)]
        assert row["null_count"] == sum(v is None for v in page)
        low, high = row["min_value"], row["max_value"]
        if not present:
            assert (low, high) == (-math.inf, math.inf)
            continue
        # the format's rule: NaN is ignored for min and max
        assert low == min(present) and high == max(present)
        if low == 0:
            assert math.copysign(1, low) == -1
        if high == 0:
            assert math.copysign(1, high) == 1


def test_float16_and_nan_only_page() -> None:
    array = pa.array(np.array([np.nan, 1.5, -0.0], np.float16))
    stats = page_statistics(array, [1, 2]).to_pylist()
    assert (stats[0]["min_value"], stats[0]["max_value"]) == (-math.inf, math.inf)
    assert stats[1]["min_value"] == 0 and math.copysign(1, stats[1]["min_value"]) == -1
    assert stats[1]["max_value"] == 1.5
    # NaN beside numbers is ignored; the NaN counts by sign are kept beside the bounds
    with_nan = page_statistics(array, [3]).to_pylist()[0]
    assert (with_nan["min_value"], with_nan["max_value"]) == (-0.0, 1.5)
    assert page_nan_counts(array, [3]).tolist() == [[1], [0]]
    raw = np.array([np.nan, -np.nan, np.nan, 2.0], np.float16)
    negative = pa.array(raw, mask=np.array([False, False, True, False]))
    assert page_nan_counts(negative, [1, 3]).tolist() == [[1, 0], [0, 1]]


def test_nan_counts_of_sliced_chunked_and_nullable_arrays() -> None:
    values = pa.array([NEG_NAN, None, math.nan, 1.0, math.nan, NEG_NAN], pa.float64())
    chunked = pa.chunked_array([values.slice(0, 2), values.slice(2)])
    assert page_nan_counts(chunked, [3, 3]).tolist() == [[1, 1], [1, 1]]
    assert page_nan_counts(values.slice(1, 4), [4]).tolist() == [[2], [0]]
    assert page_nan_counts(pa.array([], pa.float32()), [0]).tolist() == [[0], [0]]
    with pytest.raises(TypeError):
        page_nan_counts(pa.array([1, 2]), [2])
    with pytest.raises(ValueError):
        page_nan_counts(values, [2])


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.none() | st.text(max_size=12), max_size=20),
    limit=st.integers(1, 8),
    cuts=st.lists(st.integers(0, 20), max_size=3),
)
def test_string_bounds_truncate_and_still_bound(
    values: list[str | None], limit: int, cuts: list[int]
) -> None:
    lengths = _split(len(values), cuts)
    for type_ in (pa.string(), pa.large_string()):
        stats = page_statistics(pa.array(values, type_), lengths, max_bound_bytes=limit).to_pylist()
        for page, row in zip(_pages(values, lengths), stats, strict=True):
            present = [v.encode() for v in page if v is not None]
            assert row["null_count"] == len(page) - len(present)
            if not present:
                assert row["min_value"] is None and row["max_value"] is None
                continue
            low = row["min_value"].encode()
            assert len(low) <= limit and min(present).startswith(low)
            assert all(low <= v for v in present)
            if row["max_value"] is None:
                # only when no prefix of the max, its last character incremented, fits in `limit` bytes
                top = max(present).decode()
                for end in range(len(top)):
                    code = ord(top[end]) + 1
                    code = 0xE000 if 0xD800 <= code < 0xE000 else code
                    assert code > 0x10FFFF or len((top[:end] + chr(code)).encode()) > limit
            else:
                high = row["max_value"].encode()
                assert len(high) <= limit and all(v <= high for v in present)
                if len(max(present)) <= limit:
                    assert high == max(present)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.none() | st.binary(max_size=10) | st.sampled_from([b"\xff" * 6, b"a\xff\xff\xff"]), max_size=20
    ),
    limit=st.integers(1, 6),
)
def test_binary_bounds(values: list[bytes | None], limit: int) -> None:
    row = page_statistics(pa.array(values, pa.binary()), [len(values)], max_bound_bytes=limit).to_pylist()[0]
    present = [v for v in values if v is not None]
    if not present:
        assert row == {"null_count": len(values), "min_value": None, "max_value": None}
        return
    assert row["min_value"] == min(present)[:limit]
    top = max(present)
    if len(top) <= limit:
        assert row["max_value"] == top
    elif top[:limit].rstrip(b"\xff") == b"":
        assert row["max_value"] is None
    else:
        assert row["max_value"] > top and len(row["max_value"]) <= limit


def test_truncation_boundaries() -> None:
    text = ["ab\u00e9", "ab\U0010ffff\U0010ffff"]
    stats = page_statistics(pa.array(text), [1, 1], max_bound_bytes=3).to_pylist()
    assert stats[0] == {"null_count": 0, "min_value": "ab", "max_value": "ac"}  # é is 2 bytes: cut before it
    assert stats[1]["max_value"] == "ac"
    assert page_statistics(pa.array(["\ud7ff" + "x" * 5]), [1], 3).to_pylist()[0]["max_value"] == "\ue000"
    assert page_statistics(pa.array(["\U0010ffff" * 2]), [1], 4).to_pylist()[0]["max_value"] is None
    exact = page_statistics(pa.array([b"abc"]), [1], 3).to_pylist()[0]
    assert exact["max_value"] == b"abc"


def test_empty_pages_and_bad_input() -> None:
    assert (
        page_statistics(pa.array([], pa.int32()), [0, 0]).to_pylist()
        == [{"null_count": 0, "min_value": -(2**31), "max_value": 2**31 - 1}] * 2
    )
    assert len(page_statistics(pa.array([], pa.string()), [])) == 0
    with pytest.raises(ValueError):
        page_statistics(pa.array([1, 2]), [1])
    with pytest.raises(TypeError):
        page_statistics(pa.array([[1]]), [1])
    assert not supports_statistics(pa.struct([pa.field("a", pa.int8())]))
    assert not supports_statistics(pa.dictionary(pa.int8(), pa.string()))


@pytest.mark.parametrize("n", [10, 100, 1000, 10_000, 100_000, 1_000_000])
def test_hll_estimate_within_three_sigma(n: int) -> None:
    values = pa.array(np.repeat(np.arange(n, dtype=np.int64), 2))
    sketch = DistinctSketch().update(values)
    low, high = sketch.bounds(3)
    assert low <= n <= high
    assert DistinctSketch.from_bytes(sketch.to_bytes()).estimate() == sketch.estimate()


@settings(max_examples=30, deadline=None)
@given(
    a=st.lists(st.none() | st.text(max_size=4), max_size=300),
    b=st.lists(st.none() | st.text(max_size=4), max_size=300),
)
def test_merged_sketch_equals_sketch_of_union(a: list[str | None], b: list[str | None]) -> None:
    left, right = (
        DistinctSketch().update(pa.array(a, pa.string())),
        DistinctSketch().update(pa.array(b, pa.string())),
    )
    union = DistinctSketch().update(pa.array(a + b, pa.string()))
    assert left.merge(right).estimate() == union.estimate()


def test_merged_large_sketches_equal_sketch_of_union() -> None:
    a, b = np.arange(0, 60_000), np.arange(40_000, 120_000)
    merged = DistinctSketch().update(pa.array(a)).merge(DistinctSketch().update(pa.array(b)))
    assert merged.estimate() == DistinctSketch().update(pa.array(np.concatenate([a, b]))).estimate()
    low, high = merged.bounds(3)
    assert low <= 120_000 <= high


def test_sketch_pickles_as_its_serialised_form() -> None:
    """Sketches travel between Spark executors and the driver by pickle."""
    sketch = DistinctSketch().update(pa.array(np.arange(5_000)))
    copy = pickle.loads(pickle.dumps(sketch))
    assert isinstance(copy, DistinctSketch) and copy.estimate() == sketch.estimate()
    assert copy.merge(sketch).estimate() == sketch.estimate()


def test_sketch_types() -> None:
    for array in (
        pa.array([1.5, 1.5, None, float("nan")]),
        pa.array([b"x", b"\xff", b"x"]),
        pa.array([True, False, None]),
        pa.array([1, 2, 1], pa.timestamp("s")),
        pa.array(["a", "b", "a"]).dictionary_encode(),
    ):
        assert round(DistinctSketch().update(array).estimate()) == 2


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.none() | st.integers(-(2**31), 2**31 - 1), max_size=40),
    texts=st.lists(st.none() | st.text(max_size=6), max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=4),
)
def test_merged_pages_bound_the_whole(
    values: list[int | None], texts: list[str | None], cuts: list[int]
) -> None:
    ints = pa.array(values, pa.int32())
    lengths = _split(len(values), cuts)
    merged = merge_statistics(page_statistics(ints, lengths), lengths).to_pylist()
    assert merged == page_statistics(ints, [len(values)]).to_pylist()
    strings = pa.array(texts, pa.string())
    lengths = _split(len(texts), cuts)
    merged = merge_statistics(page_statistics(strings, lengths, 3), lengths).to_pylist()[0]
    present = [t.encode() for t in texts if t is not None]
    assert merged["null_count"] == len(texts) - len(present)
    if present:
        assert all(merged["min_value"].encode() <= v for v in present)
        assert merged["max_value"] is None or all(v <= merged["max_value"].encode() for v in present)
    else:
        assert merged["min_value"] is None and merged["max_value"] is None


def _fed_one_by_one(array: pa.Array) -> DistinctSketch:
    """A sketch fed every non-null value through the library itself, as its Python API takes them."""
    sketch = datasketches.hll_sketch(DistinctSketch().lg_k, datasketches.tgt_hll_type.HLL_8)
    values = array.drop_null()
    if pa.types.is_floating(values.type):
        items = [float(v) for v in values.to_numpy(zero_copy_only=False).astype(np.float64)]
    elif pa.types.is_temporal(values.type):
        items = values.view(pa.int64()).to_pylist()
    elif values.type == pa.uint64():
        items = values.view(pa.int64()).to_pylist()
    else:
        items = values.to_pylist()
    for item in items:
        sketch.update(item)
    return DistinctSketch.from_bytes(sketch.serialize_compact())


@pytest.mark.parametrize("n", [10, 383, 385, 1_100, 5_000, 120_000])
def test_vectorised_sketch_updates_equal_the_library(n: int) -> None:
    """Values are hashed with numpy and reduced before they reach the library: same registers."""
    rng = np.random.default_rng(n)
    ints = rng.choice(2**40, n, replace=False).astype(np.int64) - 2**39
    floats = np.concatenate([rng.normal(size=n) * 1e3, [0.0, -0.0, np.nan, np.inf, -np.inf]])
    for array in (
        pa.array(ints),
        pa.array(ints.astype(np.int32)),
        pa.array(ints.astype(np.uint64) * np.uint64(3)),
        pa.array(floats),
        pa.array(floats.astype(np.float32)),
        pa.array(["é" * (i % 23) + str(v) for i, v in enumerate(ints)] + ["", None]),
        pa.array([str(v) * 3 for v in ints], pa.large_string()).slice(1),
        pa.array(ints).view(pa.timestamp("us")),
    ):
        assert DistinctSketch().update(array).estimate() == _fed_one_by_one(array).estimate(), array.type


def _sketch_state(data: bytes) -> tuple[int, bytes | tuple[int, ...]]:
    """A serialised HLL_8 sketch's mode and what its estimate reads: the registers in HLL mode,
    the set of coupons in list or set mode (whose order depends on the order of the updates)."""
    mode = data[7] & 3
    if mode == 2:
        return mode, data[40 : 40 + (1 << data[3])]
    start = 8 if mode == 0 else 12
    return mode, tuple(sorted(np.frombuffer(data[start:], dtype=np.uint32).tolist()))


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["int64", "int32", "float64", "string", "large_string"]),
    distinct=st.sampled_from([1, 5, 300, 385, 1023, 1024, 1025, 3000, 20_000]),
    rows=st.integers(0, 30_000),
    chunks=st.lists(st.integers(0, 30_000), max_size=4),
    null_every=st.sampled_from([0, 2, 7]),
    seed=st.integers(0, 2**16),
)
def test_sketch_state_equals_the_library_fed_every_value(
    kind: str, distinct: int, rows: int, chunks: list[int], null_every: int, seed: int
) -> None:
    """Reduced, kept and fed late, the values leave the library's sketch in exactly the state (mode,
    registers or coupons) feeding it every value leaves it in, whatever the updates' sizes."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, distinct, rows) * 7919 - 2**35
    mask = None if not null_every else (np.arange(rows) % null_every == 1)
    if kind == "float64":
        array = pa.array(picks / 3.0, mask=mask)
    elif kind in ("int64", "int32"):
        array = pa.array(picks.astype(kind), mask=mask)
    else:
        texts = [("" if v % 11 == 0 else "é" * int(v % 19) + str(v)) for v in picks.tolist()]
        array = pa.array(texts, getattr(pa, kind)(), mask=mask)
    sketch = DistinctSketch()
    for start, end in zip([0, *sorted(chunks)], [*sorted(chunks), rows + 30_001], strict=True):
        sketch.update(array.slice(start, max(end - start, 0)))
    expected = _fed_one_by_one(array)
    assert _sketch_state(sketch.to_bytes()) == _sketch_state(expected.to_bytes())
    assert sketch.estimate() == expected.estimate() and sketch.bounds() == expected.bounds()
    assert sketch.merge(DistinctSketch()).estimate() == expected.estimate()


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.none() | st.binary(max_size=12) | st.sampled_from([b"", b"\x00", b"\xff", b"ab", b"ab\x00"])
    ),
    type_=st.sampled_from([pa.binary(), pa.large_binary(), pa.string(), pa.large_string()]),
    cut=st.integers(0, 4),
)
def test_compiled_string_min_max_matches_arrow(
    values: list[bytes | None], type_: pa.DataType, cut: int
) -> None:
    from lance_ops.encoding.statistics import _binary_min_max

    if pa.types.is_string(type_) or pa.types.is_large_string(type_):  # UTF-8 beyond ASCII too
        values = [
            None if v is None else "".join(chr(0x60 + b % 5 if b < 200 else 0x400 + b) for b in v)
            for v in values
        ]
    page = pa.array(values, type_).slice(min(cut, len(values)))
    if page.null_count == len(page):
        return
    want = pc.min_max(page)
    assert _binary_min_max(page) == (want["min"].as_py(), want["max"].as_py())


@pytest.mark.parametrize("distinct", [3, 300, 2_000, 50_000])
@pytest.mark.parametrize("kind", ["int64", "string"])
def test_long_arrays_sketched_a_slice_at_a_time_serialise_alike(
    distinct: int, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An array longer than ``UPDATE_SLICE_ROWS`` is sketched slice by slice; the serialised
    sketch (list, set and HLL mode: coupon order and HIP state included) is byte for byte the
    one of the whole array in one piece."""
    from lance_ops.encoding import sketch as sketch_module

    rng = np.random.default_rng(distinct)
    values = rng.integers(0, distinct, 60_000) * 7919 - 2**35
    array = pa.array(values) if kind == "int64" else pa.array([str(v) for v in values.tolist()])
    array = pc.if_else(pa.array(np.arange(len(values)) % 11 == 0), pa.nulls(len(values), array.type), array)
    whole = DistinctSketch().update(array).to_bytes()
    monkeypatch.setattr(sketch_module, "UPDATE_SLICE_ROWS", 7_000)
    sliced = DistinctSketch().update(array).to_bytes()
    assert sliced == whole
    assert _sketch_state(sliced) == _sketch_state(_fed_one_by_one(array).to_bytes())
