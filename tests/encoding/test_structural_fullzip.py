"""Full-zip pages (spec §4): control words, payloads, repetition index, per-value compression."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.field_decoder import make_field_decoder
from lance_ops.encoding.structural import fullzip
from tests.encoding.harness import encode_to_memory, round_trip

V21, V22 = FileVersion.V2_1, FileVersion.V2_2
FORCE = {"lance-encoding:structural-encoding": "fullzip", "lance-encoding:compression": "none"}


def _forced(dtype: pa.DataType) -> pa.Field:
    """A field whose innermost leaf carries the full-zip override (leaves read their own metadata)."""
    if pa.types.is_list(dtype):
        return pa.field("c", pa.list_(_forced(dtype.value_type).with_name("item")))
    return pa.field("c", dtype, metadata=FORCE)


def test_list_metadata_does_not_reach_the_leaf() -> None:
    arr = pa.array([[1, 2]] * 10, pa.list_(pa.int32()))
    round_trip(arr, V22, metadata=FORCE, expect="mini_block_layout")
    round_trip(arr, V22, field=_forced(arr.type), expect="full_zip_layout")


def _buffers(rt) -> list[bytes]:  # type: ignore[no-untyped-def]
    page = rt.memory.columns[0][0]
    return [bytes(rt.memory.data[p : p + s]) for p, s in page.buffers]


def test_control_width() -> None:
    assert fullzip.control_width(0, 0) == 0
    assert fullzip.control_width(0, 1) == 1
    assert fullzip.control_width(4, 4) == 1
    assert fullzip.control_width(4, 5) == 2
    assert fullzip.control_width(9, 8) == 4
    assert [fullzip.index_width(x) for x in (255, 256, 65535, 65536, 2**32)] == [1, 2, 2, 4, 8]


def test_nullable_int_fixed_payload_without_index() -> None:
    arr = pa.array([None if i % 3 == 0 else i for i in range(2000)], pa.int32())
    rt = round_trip(arr, V22, metadata=FORCE, expect="full_zip_layout/flat", takes=[[0, 1, 1999]])
    (zipped,) = _buffers(rt)
    assert len(zipped) == 2000 * 5
    assert zipped[:10] == bytes.fromhex("01000000 00 00010000 00".replace(" ", ""))


def test_nullable_large_string_example() -> None:
    arr = pa.array([None, "x" * 81], pa.large_string())
    rt = round_trip(arr, V21, metadata=FORCE, expect="full_zip_layout/variable")
    zipped, index = _buffers(rt)
    assert zipped[:10] == bytes.fromhex("01005100000000000000")
    assert index == bytes([0, 1, len(zipped)])
    assert rt.layouts[0][0].full_zip_layout.bits_per_offset == 64


def test_list_index_example() -> None:
    rows = [None, [0], [0, 1], [0, 1, 2], [], None]
    arr = pa.array(rows * 60, pa.list_(pa.int32()))
    rt = round_trip(arr, V22, field=_forced(arr.type), takes=[[0, 1, 3, 4, 359]])
    _, index = _buffers(rt)
    offsets = np.frombuffer(index, "<u2")
    assert offsets[:6].tolist() == [0, 1, 6, 16, 31, 32]
    layout = rt.layouts[0][0].full_zip_layout
    assert (layout.bits_rep, layout.bits_def) == (1, 2)
    assert layout.num_items == 60 * (1 + 1 + 2 + 3 + 1 + 1)  # one level per item and per null / empty list
    assert layout.num_visible_items == 60 * 6


def test_huge_values_use_per_value_zstd() -> None:
    arr = pa.array([b"a" * 40_000, None, b"b" * 50_000, b""], pa.large_binary())
    rt = round_trip(arr, V22, expect="full_zip_layout/general/variable", takes=[[1, 2, 3]])
    zipped, _ = _buffers(rt)
    assert len(zipped) < 1000
    assert rt.layouts[0][0].full_zip_layout.value_compression.general.compression.level == 0


@pytest.mark.parametrize("version", [V21, V22], ids=str)
def test_fsl_vectors(version: FileVersion) -> None:
    rng = np.random.default_rng(0)
    values = pa.array(rng.random(300 * 128).astype(np.float32))
    arr = pa.FixedSizeListArray.from_arrays(values, 128, mask=pa.array(rng.random(300) < 0.2))
    rt = round_trip(arr, version, expect="full_zip_layout/fixed_size_list", takes=[[0, 150, 299]])
    assert rt.layouts[0][0].full_zip_layout.bits_per_value == 4096


def test_reads_only_requested_rows() -> None:
    arr = pa.array([f"{i:05d}" * 60 for i in range(2000)])
    field = pa.field("c", arr.type, metadata=FORCE)
    mem, _ = encode_to_memory(field, [arr], V22)
    decoder = make_field_decoder(field, mem.columns, V22)
    mem.fetched.clear()
    assert decoder.read(mem.fetch, np.array([3, 1500])).to_pylist() == [arr[3].as_py(), arr[1500].as_py()]
    index_read, *row_reads = mem.fetched
    assert index_read == mem.columns[0][0].buffers[1]
    assert [size for _, size in row_reads] == [4 + 300, 4 + 300]


def test_deep_lists_two_byte_control_words() -> None:
    t = pa.int32()
    for _ in range(8):
        t = pa.list_(t)

    def nest(value: object, depth: int) -> object:
        if depth == 1:
            return [value, None]
        return [nest(value, depth - 1), None, []]

    arr = pa.array([nest(i, 8) if i % 4 else None for i in range(12)], t)
    rt = round_trip(arr, V22, field=_forced(t), takes=[[0, 5, 11]])
    layout = rt.layouts[0][0].full_zip_layout
    assert layout.bits_rep == 4 and fullzip.control_width(layout.bits_rep, layout.bits_def) == 2
