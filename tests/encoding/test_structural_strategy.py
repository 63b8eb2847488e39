"""Encoding strategy: choices per data shape (spec §8) and round trips of every supported type."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.columns import num_columns
from lance_ops.encoding.field_decoder import make_field_decoder
from lance_ops.encoding.field_encoder import make_field_encoder
from lance_ops.encoding.options import EncodingOptions
from lance_ops.errors import SchemaError, UnsupportedFeatureError
from tests.encoding.harness import (
    FIXED_TYPES,
    VARIABLE_TYPES,
    flat_arrays,
    make_array,
    nested_arrays,
    round_trip,
)

V21, V22 = FileVersion.V2_1, FileVersion.V2_2
VERSIONS = [V21, V22]
EDGE_LENGTHS = [0, 1, 1023, 1024, 1025]


@pytest.mark.parametrize("version", VERSIONS, ids=str)
@pytest.mark.parametrize("dtype", FIXED_TYPES + VARIABLE_TYPES + [pa.null()], ids=str)
def test_every_type_round_trips(dtype: pa.DataType, version: FileVersion) -> None:
    rng = np.random.default_rng(7)
    for n in EDGE_LENGTHS:
        for null_rate in (0.0, 0.3, 1.0):
            if pa.types.is_null(dtype):
                arr = pa.nulls(n)
            else:
                arr = make_array(dtype, n, null_rate, rng)
            round_trip(arr, version, slices=[(0, 1), (n // 3, n - 1)], takes=[[0, n // 2, n - 1]])


@pytest.mark.parametrize("version", VERSIONS, ids=str)
@pytest.mark.parametrize(
    "dtype", [pa.int32(), pa.int64(), pa.decimal128(20, 0), pa.string(), pa.large_binary()], ids=str
)
def test_low_cardinality_multi_page(dtype: pa.DataType, version: FileVersion) -> None:
    rng = np.random.default_rng(3)
    arr = make_array(dtype, 5000, 0.1, rng, distinct=20)
    round_trip(
        arr, version, page_sizes=[1, 1024, 1025, 999], slices=[(1000, 3100)], takes=[[0, 1, 2049, 4999]]
    )


@given(flat_arrays(), st.sampled_from(VERSIONS), st.data())
def test_round_trip_property(arr: pa.Array, version: FileVersion, data: st.DataObject) -> None:
    n = len(arr)
    cut = data.draw(st.integers(0, n))
    takes = [data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=20))]
    round_trip(arr, version, page_sizes=[cut], slices=[(cut // 2, n - cut // 3)], takes=takes)


# --- choices (spec §8.2) ------------------------------------------------------------------------

N = 10_000


def _seq(dtype: str = "int32") -> pa.Array:
    return pa.array(np.arange(N, dtype=dtype))


CHOICES = [
    (
        "int32 0..9999",
        _seq(),
        None,
        "mini_block_layout/inline_bitpacking",
        "mini_block_layout/inline_bitpacking",
    ),
    (
        "int32 full range",
        pa.array(np.random.default_rng(0).integers(-(2**31), 2**31 - 1, N, dtype=np.int32)),
        None,
        "mini_block_layout/flat",
        "mini_block_layout/flat",
    ),
    (
        "compression none",
        _seq(),
        {"lance-encoding:compression": "none"},
        "mini_block_layout/flat",
        "mini_block_layout/flat",
    ),
    (
        "runs of 100",
        pa.array(np.repeat(np.arange(N // 100, dtype=np.int32), 100)),
        None,
        "mini_block_layout/rle",
        "mini_block_layout/rle",
    ),
    (
        "one repeated int",
        pa.array([7] * N, pa.int64()),
        None,
        "mini_block_layout/rle",
        "constant_layout/inline",
    ),
    (
        "one repeated string",
        pa.array(["hello"] * N),
        None,
        "mini_block_layout/dictionary",
        "constant_layout/no-inline",
    ),
    (
        "int64 100 distinct",
        pa.array(np.arange(N) % 100, pa.int64()),
        None,
        "mini_block_layout/inline_bitpacking",
        "mini_block_layout/dictionary/inline_bitpacking",
    ),
    (
        "3 strings",
        pa.array([["apple", "banana", "cherry"][i % 3] for i in range(N)]),
        None,
        "mini_block_layout/dictionary/inline_bitpacking",
        "mini_block_layout/dictionary/inline_bitpacking",
    ),
    (
        "a/b/c",
        pa.array([["a", "b", "c"][i % 3] for i in range(N)]),
        None,
        "mini_block_layout/variable",
        "mini_block_layout/variable",
    ),
    ("all null", pa.nulls(N, pa.int32()), None, "constant_layout/no-inline", "constant_layout/no-inline"),
    (
        "long strings",
        pa.array([f"{i} " * 90 for i in range(500)]),
        {"lance-encoding:compression": "none"},
        "full_zip_layout/variable",
        "full_zip_layout/variable",
    ),
    (
        "huge values",
        pa.array([b"x" * 40_000, b"y" * 50_000, None], pa.large_binary()),
        None,
        "full_zip_layout/general/variable",
        "full_zip_layout/general/variable",
    ),
    (
        "forced fullzip",
        _seq(),
        {"lance-encoding:structural-encoding": "fullzip"},
        "full_zip_layout/flat",
        "full_zip_layout/flat",
    ),
    (
        "forced miniblock",
        pa.array([f"{i} " * 90 for i in range(50)]),
        {"lance-encoding:structural-encoding": "miniblock", "lance-encoding:compression": "none"},
        "mini_block_layout/variable",
        "mini_block_layout/variable",
    ),
    (
        "zstd + bss",
        pa.array(np.random.default_rng(0).random(N)),
        {"lance-encoding:compression": "zstd", "lance-encoding:bss": "on"},
        "mini_block_layout/general/byte_stream_split",
        "mini_block_layout/general/byte_stream_split",
    ),
    (
        "lz4 strings",
        pa.array([f"s{i}" for i in range(N)]),
        {"lance-encoding:compression": "lz4"},
        "mini_block_layout/general/variable",
        "mini_block_layout/general/variable",
    ),
    (
        "fsl 128",
        pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(200 * 128, np.float32) + 1.5), 128),
        None,
        "full_zip_layout/fixed_size_list",
        "full_zip_layout/fixed_size_list",
    ),
]


@pytest.mark.parametrize(("name", "array", "meta", "v21", "v22"), CHOICES, ids=[c[0] for c in CHOICES])
def test_strategy_choices(name: str, array: pa.Array, meta: dict | None, v21: str, v22: str) -> None:
    round_trip(array, V21, metadata=meta, expect=v21, takes=[[0, 5, len(array) - 1]])
    round_trip(array, V22, metadata=meta, expect=v22, takes=[[0, 5, len(array) - 1]])


def test_dictionary_threshold_needs_100_values() -> None:
    few = pa.array([["apple", "banana"][i % 2] for i in range(99)])
    round_trip(few, V22, expect="mini_block_layout/variable")
    round_trip(
        pa.array([["apple", "banana"][i % 2] for i in range(100)]), V22, expect="mini_block_layout/dictionary"
    )


def test_dictionary_on_2_1_only_for_128_bit() -> None:
    arr = pa.array(np.arange(N) % 10, pa.int64())
    round_trip(arr, V21, expect="mini_block_layout/inline_bitpacking")
    round_trip(arr, V22, expect="mini_block_layout/dictionary")


def test_dict_values_compression_none() -> None:
    arr = pa.array([["apple", "banana", "cherry"][i % 3] for i in range(N)])
    rt = round_trip(arr, V22, metadata={"lance-encoding:dict-values-compression": "none"})
    layout = rt.layouts[0][0].mini_block_layout
    assert layout.dictionary.WhichOneof("compression") == "variable"
    rt = round_trip(arr, V22)
    assert rt.layouts[0][0].mini_block_layout.dictionary.WhichOneof("compression") == "general"


def test_rle_threshold_is_an_extra_gate() -> None:
    arr = pa.array(np.repeat(np.arange(N // 100, dtype=np.int32), 100))
    round_trip(
        arr,
        V22,
        metadata={"lance-encoding:rle-threshold": "0.001"},
        expect="mini_block_layout/inline_bitpacking",
    )


def test_options_parsing() -> None:
    opts = EncodingOptions.from_metadata(
        {b"lance-encoding:compression": b"zstd", "lance-encoding:compression-level": "5", "other": "x"}
    )
    assert opts.compression == "zstd" and opts.compression_level == 5 and opts.general_scheme == "zstd"
    assert EncodingOptions.from_metadata(None) == EncodingOptions()
    with pytest.raises(SchemaError):
        EncodingOptions.from_metadata({"lance-encoding:compression": "snappy"})
    with pytest.raises(SchemaError):
        EncodingOptions.from_metadata({"lance-encoding:structural-encoding": "columnar"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("dict-divisor", "two"),
        ("dict-size-ratio", "most"),
        ("rle-threshold", "x"),
        ("compression-level", "high"),
        ("minichunk-size", "big"),
        ("bss", "maybe"),
        ("dict-values-compression", "snappy"),
        ("dictionary", "sometimes"),
    ],
)
def test_unparsable_options_keep_the_default(key: str, value: str, caplog: pytest.LogCaptureFixture) -> None:
    """pylance 14 writes such a field with its default (logging a warning); so do we."""
    with caplog.at_level("WARNING", logger="lance_ops.encoding.options"):
        opts = EncodingOptions.from_metadata({f"lance-encoding:{key}": value})
    assert opts == EncodingOptions()
    assert f"lance-encoding:{key}" in caplog.text


def test_dictionary_option_takes_boolean_words() -> None:
    assert EncodingOptions.from_metadata({"lance-encoding:dictionary": "true"}).dictionary == "always"
    assert EncodingOptions.from_metadata({"lance-encoding:dictionary": "off"}).dictionary == "never"


def test_num_columns() -> None:
    t = pa.struct([("x", pa.int32()), ("y", pa.list_(pa.struct([("a", pa.string()), ("b", pa.float64())])))])
    assert num_columns(pa.field("s", t), V22) == 3
    with pytest.raises(UnsupportedFeatureError):
        num_columns(pa.field("s", t), FileVersion.V2_0)
    assert num_columns(pa.field("l", pa.list_(pa.int32())), V21) == 1
    assert num_columns(pa.field("f", pa.list_(pa.float32(), 4)), V22) == 1
    packed = pa.field(
        "p", pa.struct([("a", pa.int32()), ("b", pa.float64())]), metadata={"lance-encoding:packed": "true"}
    )
    assert num_columns(packed, V22) == 1


def test_unsupported_requests_raise() -> None:
    with pytest.raises(SchemaError):
        make_field_encoder(pa.field("b", pa.string(), metadata={"lance-encoding:blob": "true"}), V22)
    with pytest.raises(UnsupportedFeatureError):
        make_field_encoder(pa.field("x", pa.int32()), FileVersion.V2_0)
    with pytest.raises(UnsupportedFeatureError):
        make_field_decoder(pa.field("x", pa.int32()), [[]], FileVersion.V0_1)
    enc = make_field_encoder(pa.field("x", pa.int32()), V22)
    with pytest.raises(SchemaError):
        enc.encode(pa.array(["a"]))


def test_empty_array_encodes_no_pages() -> None:
    enc = make_field_encoder(pa.field("x", pa.struct([("a", pa.int32()), ("b", pa.string())])), V22)
    assert enc.encode(pa.array([], enc.field.type)) == [[], []]


# --- nested types through the whole codec ----------------------------------------------------


NESTED = [
    pa.array([None if i % 7 == 0 else list(range(i % 5)) for i in range(3000)], pa.list_(pa.int32())),
    pa.array(
        [[f"s{j}" for j in range(i % 4)] if i % 9 else None for i in range(2000)], pa.large_list(pa.string())
    ),
    pa.array([[[i], [], None] if i % 3 else [] for i in range(1500)], pa.list_(pa.list_(pa.int64()))),
    pa.array([{"x": i, "y": None if i % 3 else str(i)} if i % 11 else None for i in range(2000)]),
    pa.array(
        [[{"a": i, "b": [f"{i}"] * (i % 3)}] * (i % 4) if i % 5 else None for i in range(2500)],
        pa.list_(pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))])),
    ),
    pa.array([[float(i)] * 4 if i % 6 else None for i in range(2000)], pa.list_(pa.float32(), 4)),
    pa.array([[[1.0] * 4] * (i % 3) for i in range(1000)], pa.list_(pa.list_(pa.float32(), 4))),
    pa.array([[f"{i} " * 80] * (i % 3) if i % 4 else None for i in range(600)], pa.list_(pa.string())),
    pa.array([[i] * 3000 for i in range(8)], pa.list_(pa.int32())),
    pa.array([[None, None], None, []] * 10, pa.list_(pa.null())),
    pa.array(
        [{"n": None, "b": True}, None, {"n": None, "b": None}] * 10,
        pa.struct([("n", pa.null()), ("b", pa.bool_())]),
    ),
    pa.array([[True, None, False]] * 700 + [None], pa.list_(pa.bool_())),
    pa.array([{"a": None}] * 50, pa.struct([("a", pa.int32())])),
    pa.array([[[1, None], None]] * 100 + [None], pa.list_(pa.list_(pa.int8(), 2))),
]

MAP = pa.array(
    [[(f"k{i}", i), ("b", None)] if i % 3 else (None if i % 2 else []) for i in range(3000)],
    pa.map_(pa.string(), pa.int32()),
)


@pytest.mark.parametrize("version", VERSIONS, ids=str)
@pytest.mark.parametrize("array", NESTED, ids=lambda a: str(a.type))
def test_nested_round_trip(array: pa.Array, version: FileVersion) -> None:
    _nested(array, version)


def test_map_2_2_only() -> None:
    _nested(MAP, V22)
    assert num_columns(pa.field("m", MAP.type), V22) == 2
    with pytest.raises(UnsupportedFeatureError):
        make_field_encoder(pa.field("m", pa.struct([("inner", MAP.type)])), V21)


def test_fsl_of_strings_is_rejected() -> None:
    # (empty structs are stored: tests/file/test_empty_struct.py)
    with pytest.raises(UnsupportedFeatureError):
        make_field_encoder(pa.field("f", pa.list_(pa.string(), 2)), V22)


def _nested(array: pa.Array, version: FileVersion) -> None:
    n = len(array)
    round_trip(
        array,
        version,
        page_sizes=[n // 3],
        slices=[(0, 1), (n // 2, n // 2 + 7), (1, n)],
        takes=[[0, 1, n // 2, n - 2, n - 1], list(range(0, n, 97))],
    )


@given(nested_arrays(), st.sampled_from(VERSIONS), st.data())
def test_nested_round_trip_property(arr: pa.Array, version: FileVersion, data: st.DataObject) -> None:
    n = len(arr)
    cut = data.draw(st.integers(0, n))
    takes = [data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=8))]
    round_trip(arr, version, page_sizes=[cut], slices=[(1, n - 1)], takes=takes)


def test_decoder_accepts_unsorted_and_repeated_rows() -> None:
    from tests.encoding.harness import encode_to_memory

    arr = pa.array([[i] * (i % 3) if i % 4 else None for i in range(3000)], pa.list_(pa.int32()))
    field = pa.field("c", arr.type)
    mem, _ = encode_to_memory(field, [arr[:1000], arr[1000:]], V22)
    decoder = make_field_decoder(field, mem.columns, V22)
    rows = np.array([2999, 5, 5, 1000, 0])
    assert decoder.read(mem.fetch, rows).to_pylist() == arr.take(pa.array(rows)).to_pylist()


CORRUPTIBLE = [
    pa.array([None if i % 7 == 0 else i for i in range(3000)], pa.int32()),
    pa.array([["apple", "banana", "cherry"][i % 3] for i in range(500)]),
    pa.array([None if i % 5 == 0 else f"{i} " * 90 for i in range(50)]),
    pa.array([[i] * (i % 4) if i % 3 else None for i in range(800)], pa.list_(pa.int64())),
]


@given(st.sampled_from(CORRUPTIBLE), st.sampled_from(VERSIONS), st.data())
def test_corrupt_pages_raise_typed_errors(arr: pa.Array, version: FileVersion, data: st.DataObject) -> None:
    """Garbled page bytes decode to something or raise a lance_ops error, never a raw numpy one."""
    from lance_ops.errors import LanceOpsError
    from tests.encoding.harness import encode_to_memory

    field = pa.field("c", arr.type)
    mem, _ = encode_to_memory(field, [arr], version)
    flips = data.draw(st.lists(st.integers(0, len(mem.data) - 1), min_size=1, max_size=8))
    for pos in flips:
        mem.data[pos] ^= data.draw(st.integers(1, 255))
    decoder = make_field_decoder(field, mem.columns, version)
    try:
        decoder.read(mem.fetch, range(len(arr)))
    except LanceOpsError:
        pass


def _exact_distinct(array: pa.Array) -> int:
    return len(array.unique())


@given(
    values=st.lists(st.integers(0, 50), max_size=300) | st.lists(st.integers(0, 2**64 - 1), max_size=300),
    cut=st.integers(0, 5),
)
def test_distinct_lower_bound_of_u64_never_exceeds_the_count(values: list[int], cut: int) -> None:
    from lance_ops.encoding.compression_strategy import _distinct_lower_bound

    array = pa.array(values, pa.uint64()).slice(min(cut, len(values)))
    bound = _distinct_lower_bound(array)
    assert bound is not None and bound <= _exact_distinct(array)
    assert bound >= 1 or len(array) == 0


@given(
    values=st.lists(st.binary(max_size=40), max_size=300),
    dtype=st.sampled_from([pa.binary(), pa.large_binary(), pa.string(), pa.large_string()]),
    cut=st.integers(0, 5),
)
def test_distinct_lower_bound_of_strings_never_exceeds_the_count(
    values: list[bytes], dtype: pa.DataType, cut: int
) -> None:
    from lance_ops.encoding.compression_strategy import _distinct_lower_bound

    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        values = [v.hex().encode() for v in values]
    array = pa.array(values, dtype).slice(min(cut, len(values)))
    bound = _distinct_lower_bound(array)
    assert bound is not None and bound <= _exact_distinct(array)


def test_dictionary_probe_decides_as_the_exact_count() -> None:
    # 1M-value pages: the probe (the first 125,001 values) rules out high cardinality by its hash
    # bound for sequential ids, random doubles and distinct strings, as the exact count does; a
    # low-cardinality page still gets its dictionary; a short low-cardinality prefix is not
    # ruled out (the whole page is then counted exactly by the dictionary encode).
    from lance_ops.encoding.compression_strategy import _too_many_distinct, try_dictionary
    from lance_ops.encoding.structural.repdef import shred

    rng = np.random.default_rng(7)
    n = 1_000_000
    limit = 100_001
    high = {
        "ids": pa.array(np.arange(n, dtype=np.int64)).view(pa.uint64()),
        "doubles": pa.array(rng.random(n)).view(pa.uint64()),
        "strings": pa.array([f"row {i} of many" for i in range(n)]),
    }
    for name, array in high.items():
        prefix = array[: int(limit * 1.25)]
        assert _too_many_distinct(prefix, limit), name
        assert _exact_distinct(prefix) >= limit, name
    # Just over the limit (a cycle of 100,003 values): colliding hash prefixes put the bound under
    # it, so the prefix is counted exactly and the page ruled out without encoding it whole.
    cycle = pa.array((np.arange(n) % 100_003).astype(np.float64)).view(pa.uint64())
    assert _too_many_distinct(cycle[: int(limit * 1.25)], limit)
    # Just under it: the exact count of the prefix keeps the page a candidate.
    assert not _too_many_distinct(pa.array(np.arange(int(limit * 1.25)) % 99_000, pa.uint64()), limit)
    repeated = pa.array(np.tile(np.arange(200_000, dtype=np.int64), 5))  # 200k distinct, none in a row
    assert not _too_many_distinct(pa.array(np.arange(1000, dtype=np.uint64)), limit)
    options = EncodingOptions()
    for array, wants in (
        (repeated, False),
        (pa.array((np.arange(n) % 100_003).astype(np.float64)), False),
        (pa.array((np.arange(n) % 1_000).astype(np.float64)), True),
        (pa.array(["red apple", "green pear", "plum"] * (n // 3)), True),
        (high["strings"], False),
    ):
        (leaf,) = shred(array)
        assert (try_dictionary(leaf, options, V22) is not None) is wants
