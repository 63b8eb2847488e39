"""``merge_insert``'s key lookups against each other and pylance: the bitmap lookup of integer
keys (:class:`IntegerKeyLookup`), the hash lookup (``index_in``) and the join; fragments joined
two at a time on the worker pool against one at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.ops import merge_insert as merge_op
from lance_ops.ops import update as update_op
from lance_ops.ops.merge_insert import IntegerKeyLookup
from tests.table.twins import make_twins

TYPES = {"int64": pa.int64(), "int32": pa.int32(), "uint64": pa.uint64(), "int8": pa.int8()}
BOUNDS = {
    "int64": (-(2**63), 2**63 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint64": (0, 2**64 - 1),
    "int8": (-128, 127),
}


def _hash_pairs(source: pa.Array, target: pa.Array) -> tuple[list[int], list[int]]:
    found = pc.index_in(target, value_set=source, skip_nulls=True)
    t_index = np.flatnonzero(found.is_valid().to_numpy(zero_copy_only=False))
    return t_index.tolist(), found.drop_null().to_numpy().tolist()


@st.composite
def keys(draw: Any) -> tuple[str, list[int], list[int | None]]:
    name = draw(st.sampled_from(sorted(TYPES)))
    low, high = BOUNDS[name]
    width = min(2000, high - low)
    start = draw(st.sampled_from([low, high - width, 0, -5 if low < 0 else 5, 2**40 if high > 2**41 else 0]))
    start = max(low, min(start, high - width))
    offsets = draw(st.lists(st.integers(0, width), min_size=1, max_size=60, unique=True))
    source = [start + o for o in offsets]
    near = st.integers(max(low, start - 3), min(high, start + width + 3))
    anywhere = st.sampled_from([low, high, 0])
    target = draw(st.lists(st.one_of(st.sampled_from(source), near, anywhere, st.none()), max_size=80))
    return name, source, target


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=keys())
def test_bitmap_lookup_equals_the_hash_lookup(case: tuple[str, list[int], list[int | None]]) -> None:
    name, source_keys, target_keys = case
    source = pa.array(source_keys, TYPES[name])
    target = pa.array(target_keys, TYPES[name])
    lookup = IntegerKeyLookup.build(source)
    assert lookup is not None
    t_index, s_index = lookup.pairs(target)
    assert (t_index.tolist(), s_index.tolist()) == _hash_pairs(source, target)
    chunked = pa.chunked_array([target.slice(0, len(target) // 2), target.slice(len(target) // 2)])
    saved = merge_op.LOOKUP_ROWS
    merge_op.LOOKUP_ROWS = 7  # several slices of target keys
    try:
        in_slices = lookup.pairs(chunked)
    finally:
        merge_op.LOOKUP_ROWS = saved
    assert (in_slices[0].tolist(), in_slices[1].tolist()) == (t_index.tolist(), s_index.tolist())


def test_lookup_is_only_built_for_small_ranges_of_unique_integers() -> None:
    assert IntegerKeyLookup.build(pa.array([0, merge_op.BITMAP_MAX_SPAN - 1])) is not None
    assert IntegerKeyLookup.build(pa.array([0, merge_op.BITMAP_MAX_SPAN])) is None
    assert IntegerKeyLookup.build(pa.array([-(2**63), 2**63 - 1])) is None
    assert IntegerKeyLookup.build(pa.array([1, None])) is None
    assert IntegerKeyLookup.build(pa.array([], pa.int64())) is None
    assert IntegerKeyLookup.build(pa.array(["a", "b"])) is None


def _table(ids: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": rng.random(len(ids)), "s": [f"s{i}" for i in ids]})


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable"])
@pytest.mark.parametrize("lookup", ["bitmap", "hash"])
@pytest.mark.parametrize("n", [1023, 1025])
def test_upsert_by_each_lookup_matches_pylance(
    lance_module: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, lookup: str, stable: bool
) -> None:
    if lookup == "hash":
        monkeypatch.setattr(merge_op, "BITMAP_MAX_SPAN", 0)
    ids = np.arange(n, dtype=np.int64) * 3 - n  # negative keys too
    twins = make_twins(lance_module, tmp_path, _table(ids, 1), stable, max_rows_per_file=256)
    twins.run(lambda ds, module: ds.delete("id % 7 = 0"))  # deleted keys come back as inserts
    rng = np.random.default_rng(5)
    incoming = np.concatenate([rng.choice(ids, n // 4, replace=False), np.arange(3 * n, 3 * n + 40)])
    source = _table(incoming, 2)

    def upsert(ds: Any, module: Any) -> Any:
        return ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)

    theirs, ours = twins.run(upsert)
    assert ours == theirs
    twins.assert_same()
    twins.assert_same_transaction()


def test_fragments_joined_in_parallel_write_what_serial_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = []
    source = _table(np.arange(-50, 2000, 7), 3)
    for window in (1, 2):
        monkeypatch.setattr(update_op, "WORKER_THREADS", window)
        uri = str(tmp_path / f"w{window}")
        lance_ops.write_dataset(_table(np.arange(1000), 1), uri, max_rows_per_file=100)
        ds = lance_ops.dataset(uri)
        result = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
        results.append((result, ds.to_table().to_pylist()))
    assert results[0] == results[1]
    assert results[0][0] == {"num_inserted_rows": 151, "num_updated_rows": 142, "num_deleted_rows": 0}
