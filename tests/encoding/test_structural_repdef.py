"""Repetition / definition levels: shredding, rebuilding and level compression (spec §2)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lance_ops.encoding import FileVersion
from lance_ops.encoding.structural.repdef import (
    ALL_VALID_ITEM,
    EMPTYABLE_LIST,
    NULL_AND_EMPTY_LIST,
    NULLABLE_ITEM,
    NULLABLE_LIST,
    DecodedLeaf,
    Levels,
    canonicalize,
    choose_level_codec,
    concat_leaves,
    decode_levels,
    layer_codes,
    max_visible_def,
    select_rows,
    shred,
    unshred,
)
from tests.encoding.harness import nested_arrays

I32 = pa.int32()


def levels_of(leaf) -> tuple[list[int] | None, list[int] | None]:
    lv = leaf.levels
    return (None if lv.rep is None else lv.rep.tolist(), None if lv.defs is None else lv.defs.tolist())


# Worked examples of spec §2.5 (levels read back from pylance 14 pages).
SPEC_EXAMPLES = [
    (
        pa.array([[1, 2], None, [], [3], [None, 4]], pa.list_(I32)),
        (NULLABLE_ITEM, NULL_AND_EMPTY_LIST),
        [1, 0, 1, 1, 1, 1, 0],
        [0, 0, 2, 3, 0, 1, 0],
    ),
    (
        pa.array([{"x": 1}, None, {"x": None}, {"x": 4}], pa.struct([("x", I32)])),
        (NULLABLE_ITEM, NULLABLE_ITEM),
        None,
        [0, 2, 1, 0],
    ),
    (
        pa.array([[[1, 2], [], [3]], [[4]], [], None, [None, [5]]], pa.list_(pa.list_(I32))),
        (ALL_VALID_ITEM, NULL_AND_EMPTY_LIST, NULL_AND_EMPTY_LIST),
        [2, 0, 1, 1, 2, 2, 2, 2, 1],
        [0, 0, 2, 0, 0, 4, 3, 1, 0],
    ),
    (
        pa.array(
            [{"l": [1, 2]}, None, {"l": None}, {"l": []}, {"l": [3]}], pa.struct([("l", pa.list_(I32))])
        ),
        (ALL_VALID_ITEM, NULL_AND_EMPTY_LIST, NULLABLE_ITEM),
        [1, 0, 1, 1, 1, 1],
        [0, 0, 3, 1, 2, 0],
    ),
    (
        pa.array([[{"a": 1}, None], [], None, [{"a": None}, {"a": 2}]], pa.list_(pa.struct([("a", I32)]))),
        (NULLABLE_ITEM, NULLABLE_ITEM, NULL_AND_EMPTY_LIST),
        [1, 0, 1, 1, 1, 0],
        [0, 2, 4, 3, 1, 0],
    ),
]


@pytest.mark.parametrize(("array", "layers", "rep", "defs"), SPEC_EXAMPLES)
def test_spec_examples(
    array: pa.Array, layers: tuple[int, ...], rep: list[int] | None, defs: list[int]
) -> None:
    (leaf,) = shred(array)
    assert leaf.levels.layers == layers
    assert levels_of(leaf) == (rep, defs)
    rebuilt = unshred(array.type, [DecodedLeaf(leaf.levels, _plain(leaf.values))])
    assert rebuilt.to_pylist() == array.to_pylist()


def _plain(values: pa.Array) -> pa.Array:
    """Decoded values carry no validity of their own (nulls come from the levels)."""
    from lance_ops.encoding.structural.values import from_block, to_block

    return from_block(to_block(values), values.type)


def test_layer_codes_outer_layers_get_larger_codes() -> None:
    codes = layer_codes([NULLABLE_ITEM, NULL_AND_EMPTY_LIST, EMPTYABLE_LIST, NULLABLE_LIST])
    assert [(c.null, c.empty) for c in codes] == [(1, 0), (2, 3), (0, 4), (5, 0)]
    assert max_visible_def([NULLABLE_ITEM, NULL_AND_EMPTY_LIST]) == 1
    assert max_visible_def([NULLABLE_ITEM, NULLABLE_ITEM]) == 2


def test_struct_null_makes_child_layer_nullable() -> None:
    # pylance marks the child nullable when a null struct hides one of its slots.
    x = pa.array(np.arange(6, dtype=np.int32))
    arr = pa.StructArray.from_arrays([x], names=["x"], mask=pa.array([False, True] * 3))
    (leaf,) = shred(arr)
    assert leaf.levels.layers == (NULLABLE_ITEM, NULLABLE_ITEM)
    assert leaf.levels.defs.tolist() == [0, 2, 0, 2, 0, 2]


def test_sliced_nested_input() -> None:
    arr = pa.array([[1], None, [2, 3], [], [None], [4, 5, 6]], pa.list_(I32)).slice(2, 3)
    (leaf,) = shred(arr)
    assert leaf.num_rows == 3
    assert unshred(arr.type, [DecodedLeaf(leaf.levels, _plain(leaf.values))]).to_pylist() == arr.to_pylist()


def test_multi_leaf_struct_round_trip() -> None:
    t = pa.struct([("a", I32), ("b", pa.list_(pa.string())), ("c", pa.struct([("d", pa.float64())]))])
    arr = pa.array(
        [
            {"a": 1, "b": ["x"], "c": {"d": 1.5}},
            None,
            {"a": None, "b": None, "c": None},
            {"a": 4, "b": [], "c": {"d": None}},
            {"a": 5, "b": ["y", None, "zz"], "c": {"d": 2.0}},
        ],
        t,
    )
    leaves = shred(arr)
    assert len(leaves) == 3
    decoded = [DecodedLeaf(leaf.levels, _plain(leaf.values)) for leaf in leaves]
    assert unshred(t, decoded).to_pylist() == arr.to_pylist()


# --- hypothesis: nested round trips -----------------------------------------------------------


@given(nested_arrays())
def test_shred_unshred_round_trip(arr: pa.Array) -> None:
    leaves = shred(arr)
    decoded = [DecodedLeaf(leaf.levels, _plain(leaf.values)) for leaf in leaves]
    for leaf in leaves:
        visible = leaf.levels.visible_mask()
        assert len(leaf.values) == (leaf.levels.num_levels if visible is None else int(visible.sum()))
    rebuilt = unshred(arr.type, decoded)
    rebuilt.validate(full=True)
    assert rebuilt.to_pylist() == arr.to_pylist()


@given(nested_arrays(), st.data())
def test_select_rows_and_canonical_concat(arr: pa.Array, data: st.DataObject) -> None:
    n = len(arr)
    rows = (
        np.array(sorted(data.draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=n))), np.int64) if n else []
    )
    leaves = [DecodedLeaf(leaf.levels, _plain(leaf.values)) for leaf in shred(arr)]
    picked = [select_rows(leaf, np.asarray(rows, np.int64)) for leaf in leaves]
    assert unshred(arr.type, picked).to_pylist() == arr.take(pa.array(rows, pa.int64())).to_pylist()
    # Two pages with different layer meanings concatenate after canonicalisation.
    halves = [arr.slice(0, n // 2), arr.slice(n // 2)]
    shredded = [shred(h) for h in halves]
    joined = [
        concat_leaves([DecodedLeaf(s[i].levels, _plain(s[i].values)) for s in shredded])
        for i in range(len(leaves))
    ]
    assert unshred(arr.type, joined).to_pylist() == arr.to_pylist()


def test_canonicalize_recodes_defs() -> None:
    lv = Levels(
        (ALL_VALID_ITEM, NULLABLE_LIST), np.array([1, 1, 0], np.uint16), np.array([0, 1, 0], np.uint16), 3
    )
    canon = canonicalize(lv)
    assert canon.layers == (NULLABLE_ITEM, NULL_AND_EMPTY_LIST)
    assert canon.defs.tolist() == [0, 2, 0]


# --- level compression (§2.8) -------------------------------------------------------------------


def _every_seventh(n: int) -> np.ndarray:
    return (np.arange(n) % 7 == 0).astype(np.uint16)


@pytest.mark.parametrize(
    ("n", "v21", "v22"),
    [
        (5, "flat", "flat"),
        (10, "flat", "flat"),
        (30, "flat", "rle"),
        (64, "flat", "rle"),
        (65, "inline", "rle"),
        (200, "inline", "inline"),
        (1024, "inline", "inline"),
        (1025, "out_of_line", "out_of_line"),
        (3000, "out_of_line", "out_of_line"),
    ],
)
def test_level_codec_matches_pylance(n: int, v21: str, v22: str) -> None:
    """Choices observed in pylance 14 for def levels with every 7th row null."""
    levels = _every_seventh(n)
    assert choose_level_codec(levels, FileVersion.V2_1).kind == v21
    assert choose_level_codec(levels, FileVersion.V2_2).kind == v22


def test_level_codec_rle_for_rare_nulls_in_22() -> None:
    levels = (np.arange(10_000) % 1000 == 0).astype(np.uint16)
    assert choose_level_codec(levels, FileVersion.V2_2).kind == "rle"
    assert choose_level_codec(levels, FileVersion.V2_1).kind == "out_of_line"


@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=3000),
    st.sampled_from([FileVersion.V2_1, FileVersion.V2_2]),
)
def test_level_codec_round_trip(values: list[int], version: FileVersion) -> None:
    levels = np.array(values, np.uint16)
    codec = choose_level_codec(levels, version)
    data, desc = codec.compress(levels)
    assert decode_levels(memoryview(data), desc, len(levels)).tolist() == values


def _walked(array: pa.Array) -> list:  # type: ignore[type-arg]
    """shred's general path (every slot walked), for comparing with the top-level leaf path."""
    from lance_ops.encoding.structural import repdef

    n = len(array)
    start = repdef._Walk(np.ones(n, np.uint16), np.full(n, -1, np.int32), np.arange(n, dtype=np.int64))
    out: list = []  # type: ignore[type-arg]
    repdef._shred_node(array, pa.field("", array.type), start, [], n, out)
    return out


@pytest.mark.parametrize(
    "array",
    [
        pa.array([], pa.int32()),
        pa.array([1, 2, 3], pa.int64()),
        pa.array([1, None, 3, None], pa.int32()),
        pa.array([None, None], pa.int16()),
        pa.nulls(5),
        pa.nulls(0),
        pa.array(["a", None, "ccc"]),
        pa.array([True, None, False]),
        pa.array(["x", None, "y", "x"]).dictionary_encode(),
        pa.DictionaryArray.from_arrays(pa.array([0, 1, 0]), pa.array(["a", None])),
        pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6, dtype=np.float32)), 2),
        pa.array([[1.0, 2.0], None], pa.list_(pa.float32(), 2)),
    ],
    ids=lambda a: str(a.type),
)
def test_top_level_leaves_shred_as_the_general_walk_does(array: pa.Array) -> None:
    from lance_ops.encoding.structural.repdef import shred

    (fast,) = shred(array)
    (walked,) = _walked(array)
    assert fast.levels.layers == walked.levels.layers
    assert fast.levels.num_levels == walked.levels.num_levels
    assert fast.levels.rep is None and walked.levels.rep is None
    if walked.levels.defs is None:
        assert fast.levels.defs is None
    else:
        assert fast.levels.defs is not None
        assert fast.levels.defs.dtype == walked.levels.defs.dtype
        assert fast.levels.defs.tolist() == walked.levels.defs.tolist()
    assert fast.values.equals(walked.values) and fast.num_rows == walked.num_rows


@st.composite
def _top_lists(draw: st.DrawFn) -> pa.Array:
    """A top-level list (or large list) of leaf items: empty, null and hidden-item lists, item
    nulls, sliced, 0 to ~1,100 rows."""
    item = draw(st.sampled_from([pa.int32(), pa.float64(), pa.string(), pa.bool_(), pa.list_(pa.int16(), 2)]))
    rows = draw(st.sampled_from([0, 1, 2, 7, 1023, 1024, 1025]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lengths = rng.integers(draw(st.sampled_from([0, 1])), draw(st.sampled_from([2, 3, 7])), rows)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    item_null_rate = draw(st.sampled_from([0.0, 0.3]))
    total = int(offsets[-1])
    if pa.types.is_fixed_size_list(item):
        flat = pa.array(rng.integers(0, 100, 2 * total).astype(np.int16))
        items = pa.FixedSizeListArray.from_arrays(flat, 2, mask=pa.array(rng.random(total) < item_null_rate))
    else:
        raw = rng.integers(0, 1000, total)
        py = [str(v) if item == pa.string() else bool(v % 2) if item == pa.bool_() else int(v) for v in raw]
        items = pa.array(py, item, mask=rng.random(total) < item_null_rate)
    list_nulls = rng.random(rows) < draw(st.sampled_from([0.0, 0.2]))
    if not draw(st.booleans()):  # null lists cover no items (as pyarrow builds them)
        list_nulls &= lengths == 0
    large = draw(st.booleans())
    cls = pa.LargeListArray if large else pa.ListArray
    arr = cls.from_arrays(
        pa.array(offsets.astype(np.int64 if large else np.int32)), items, mask=pa.array(list_nulls)
    )
    start = draw(st.integers(0, len(arr)))
    return arr.slice(start, draw(st.integers(0, len(arr) - start)))


@given(_top_lists())
def test_top_level_lists_shred_as_the_general_walk_does(array: pa.Array) -> None:
    from lance_ops.encoding.structural.repdef import shred

    (fast,) = shred(array)
    (walked,) = _walked(array)
    assert fast.levels.layers == walked.levels.layers
    assert fast.levels.num_levels == walked.levels.num_levels
    for got, want in ((fast.levels.rep, walked.levels.rep), (fast.levels.defs, walked.levels.defs)):
        assert (got is None) == (want is None)
        if want is not None:
            assert got is not None and got.dtype == want.dtype and got.tolist() == want.tolist()
    assert fast.values.equals(walked.values) and fast.num_rows == walked.num_rows


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_top_level_lists_with_hidden_items_read_by_pylance(tmp_path, version: str) -> None:  # type: ignore[no-untyped-def]
    """Null lists covering items (as ``from_buffers`` builds them), item nulls and empty lists,
    1,025 rows sliced: pylance reads what the top-level list path writes, and it reads
    pylance's file of the same rows."""
    from lance.file import LanceFileReader
    from lance.file import LanceFileWriter as PylanceWriter

    from lance_ops.file import LanceFileReader as OpsReader
    from lance_ops.file import LanceFileWriter

    rng = np.random.default_rng(7)
    offsets = np.concatenate(([0], np.cumsum(rng.integers(0, 4, 1025)))).astype(np.int32)
    items = pa.array(
        rng.integers(0, 99, int(offsets[-1])).astype(np.int32), mask=rng.random(offsets[-1]) < 0.2
    )
    lists = pa.ListArray.from_arrays(pa.array(offsets), items, mask=pa.array(rng.random(1025) < 0.2))
    table = pa.table({"c": lists.slice(3, 1020)})
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    with LanceFileWriter(ours, table.schema, version=version) as writer:
        writer.write_batch(table)
    with PylanceWriter(theirs, table.schema, version=version) as writer:
        writer.write_batch(table)
    assert LanceFileReader(ours).read_all().to_table().equals(table)
    assert OpsReader(theirs).read_all().to_table().equals(table)
