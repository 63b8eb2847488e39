"""Dataset take across fragments whose columns nest dictionaries (each fragment has its own
dictionary, with a null entry), against pylance 14 in 2.0 / 2.1 / 2.2, with a deletion.

Arrow's own unification (in ``Table.take`` over several chunks) refuses dictionaries holding
nulls; the fragments' chunks are joined first, at every nesting level.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.encoding.compression import dictionary

pytestmark = pytest.mark.interop
lance = pytest.importorskip("lance")


def _dict(i: int) -> pa.DictionaryArray:
    return pa.array([f"v{i}", None, f"w{i}", f"v{i}"]).dictionary_encode()


def _list(i: int) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array([0, 2, 2, 3, 4], pa.int32()), _dict(i))


def _large_list(i: int) -> pa.Array:
    offsets = pa.array([0, 1, 1, 3, 4], pa.int64())
    return pa.LargeListArray.from_arrays(offsets, _dict(i), mask=pa.array([False, True, False, False]))


def _struct(i: int) -> pa.Array:
    return pa.StructArray.from_arrays([_dict(i), pa.array([i, i + 1, i + 2, i + 3])], ["d", "n"])


def _list_of_struct(i: int) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array([0, 1, 3, 3, 4], pa.int32()), _struct(i))


SHAPES: dict[str, Callable[[int], pa.Array]] = {
    "list": _list,
    "large_list": _large_list,
    "struct": _struct,
    "list_of_struct": _list_of_struct,
}  # fixed_size_list<dictionary>: pylance 14 refuses it in 2.1 / 2.2 and panics taking it in 2.0


def _dataset(tmp_path: Path, shape: str, version: str) -> str:
    uri = str(tmp_path / "ds")
    for i in range(3):
        table = pa.table({"id": pa.array(range(4 * i, 4 * i + 4), pa.int64()), "c": SHAPES[shape](i)})
        lance.write_dataset(table, uri, mode="append" if i else "create", data_storage_version=version)
    lance.dataset(uri).delete("id = 5")
    return uri


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize("shape", SHAPES)
def test_take_across_fragments_of_nested_dictionaries(tmp_path: Path, shape: str, version: str) -> None:
    uri = _dataset(tmp_path, shape, version)
    theirs, ours = lance.dataset(uri), lance_ops.dataset(uri)
    for rows in ([9, 0, 5, 3], [10, 1, 10, 6, 2, 0]):
        expected = theirs.take(rows)
        got = ours.take(rows)
        assert got.schema == expected.schema
        assert got.to_pylist() == expected.to_pylist()
    ids = [(2 << 32) + 1, 0, (1 << 32) + 3, 3]
    expected = theirs._take_rows(ids)
    assert ours._take_rows(ids).to_pylist() == expected.to_pylist()
    assert ours.to_table().to_pylist() == theirs.to_table().to_pylist()


def test_take_of_the_repro_dataset(tmp_path: Path) -> None:
    """The report's case: list<dictionary<int32, string>> in 2.0, three fragments, id 5 deleted."""
    uri = _dataset(tmp_path, "list", "2.0")
    got = lance_ops.dataset(uri).take([9, 0, 5, 3]).to_pylist()
    assert got == lance.dataset(uri).take([9, 0, 5, 3]).to_pylist()
    assert got == [
        {"id": 10, "c": ["w2"]},
        {"id": 0, "c": ["v0", None]},
        {"id": 6, "c": ["w1"]},
        {"id": 3, "c": ["v0"]},
    ]


def _combines(table: pa.Table) -> bool:
    try:
        table.combine_chunks()
    except pa.ArrowInvalid:
        return False
    return True


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_to_table_combines_as_pylance_output_does(tmp_path: Path, version: str) -> None:
    """``to_table`` keeps one chunk per fragment, each over its fragment's dictionary, as
    pylance's does: in 2.0 (null dictionary entries) neither output combines, in 2.2 both do."""
    uri = _dataset(tmp_path, "list", version)
    ours, theirs = lance_ops.dataset(uri).to_table(), lance.dataset(uri).to_table()
    assert ours.to_pylist() == theirs.to_pylist()
    assert _combines(ours) == _combines(theirs) == (version != "2.0")


def _with_null_entry(i: int) -> pa.DictionaryArray:
    """A dictionary holding a null entry, as pylance's 2.0 reader gives back."""
    return pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 2, 0], pa.int32()), pa.array([f"v{i}", None, f"w{i}"])
    )


def test_concat_joins_nested_dictionaries_with_null_entries() -> None:
    """Chunks (sliced, with null lists) join to one array of the same values, dictionaries
    end to end; Arrow's concatenation refuses them."""
    offsets = pa.array([0, 1, 1, 3, 4], pa.int64())
    mask = pa.array([False, True, False, False])
    lists = [pa.LargeListArray.from_arrays(offsets, _with_null_entry(i), mask=mask) for i in range(3)]
    chunks = [lists[0].slice(1, 3), lists[1], lists[2].slice(0, 2)]
    with pytest.raises(pa.ArrowInvalid, match="unify dictionaries with nulls"):
        pa.concat_arrays(chunks)
    joined = dictionary.concat(chunks)
    assert joined.type == chunks[0].type
    assert joined.to_pylist() == [v for c in chunks for v in c.to_pylist()]
    assert len(joined.values.dictionary) == 9
    items = [
        pa.StructArray.from_arrays([_with_null_entry(i), pa.array([1, 2, 3, 4])], ["d", "n"])
        for i in range(3)
    ]
    structs = [
        pa.ListArray.from_arrays(pa.array([0, 1, 3, 3, 4], pa.int32()), s).slice(i % 2, 3)
        for i, s in enumerate(items)
    ]
    with pytest.raises(pa.ArrowInvalid, match="unify dictionaries with nulls"):
        pa.concat_arrays(structs)
    assert dictionary.concat(structs).to_pylist() == [v for c in structs for v in c.to_pylist()]
    fsls = [pa.FixedSizeListArray.from_arrays(_with_null_entry(i), 2).slice(i % 2) for i in range(3)]
    with pytest.raises(pa.ArrowInvalid, match="unify dictionaries with nulls"):
        pa.concat_arrays(fsls)
    assert dictionary.concat(fsls).to_pylist() == [v for c in fsls for v in c.to_pylist()]
    assert not dictionary.holds_dictionary(pa.list_(pa.string()))
    assert dictionary.holds_dictionary(pa.map_(pa.string(), pa.dictionary(pa.int8(), pa.string())))
    assert np.array_equal(joined.offsets.to_numpy(), [0, 0, 2, 3, 4, 4, 6, 7, 8, 8])


def _nested_with_null_entries(i: int = 0) -> dict[str, pa.Array]:
    words = pa.array([f"v{i}", None, f"w{i}"])
    d = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 0, 2, 1], pa.int32()), words)
    offsets = pa.array([0, 2, 3, 3, 6], pa.int32())
    mask = pa.array([False, False, True, False])
    return {
        "list": pa.ListArray.from_arrays(offsets, d, mask=mask),
        "large_list": pa.LargeListArray.from_arrays(offsets.cast(pa.int64()), d, mask=mask),
        "fixed_size_list": pa.FixedSizeListArray.from_arrays(d, 2, mask=pa.array([False, True, False])),
        "struct": pa.StructArray.from_arrays(
            [d, pa.array(range(6))], ["d", "n"], mask=pa.array([False] * 5 + [True])
        ),
        "map": pa.MapArray.from_arrays(offsets, pa.array(list("abcdef")), d, mask=mask),
    }


def _dictionaries(array: pa.Array) -> list[pa.Array]:
    dtype = array.type
    if pa.types.is_dictionary(dtype):
        return [array.dictionary]
    if pa.types.is_struct(dtype):
        return [x for i in range(dtype.num_fields) for x in _dictionaries(array.field(i))]
    if pa.types.is_map(dtype):
        return _dictionaries(array.items)
    if hasattr(array, "values"):
        return _dictionaries(array.values)
    return []


@pytest.mark.parametrize("kind", _nested_with_null_entries())
def test_normalize_nested_nulls_keeps_values_and_lets_arrow_unify(kind: str) -> None:
    arrays = [_nested_with_null_entries(i)[kind] for i in range(3)]
    chunks = [arrays[0], arrays[1].slice(1, 2), arrays[2].slice(2)]
    normalized = [dictionary.normalize_nested_nulls(c) for c in chunks]
    for before, after in zip(chunks, normalized, strict=True):
        assert after.type == before.type
        assert after.to_pylist() == before.to_pylist()
        assert [d.null_count for d in _dictionaries(after)] == [0]
    column = pa.chunked_array(normalized)
    rows = pa.array([5, 0, 3, 1])
    expected = [v for c in chunks for v in c.to_pylist()]
    assert column.take(rows).to_pylist() == [expected[i] for i in rows.to_pylist()]
    with pytest.raises(pa.ArrowInvalid, match="unify dictionaries with nulls"):
        pa.chunked_array(chunks).take(rows)


def test_shared_dictionary_with_null_entry_kept_as_pylance_take_keeps_it(tmp_path: Path) -> None:
    """Fragments sharing one dictionary (a null entry included, as 0.1 reads "" back): Arrow
    needs no unification, and the take's dictionary and keys are exactly pylance's."""
    uri = str(tmp_path / "ds")
    keys = pa.array(np.arange(40) % 3, pa.int16())
    table = pa.table({"d": pa.DictionaryArray.from_arrays(keys, pa.array(["", "yy", "zzz"]))})
    lance.write_dataset(table, uri, data_storage_version="legacy", max_rows_per_file=15)
    rows = [39, 0, 20, 16]
    expected = lance.dataset(uri).take(rows).column("d")
    got = lance_ops.dataset(uri).take(rows).column("d")
    assert expected.chunk(0).dictionary.null_count == 1
    assert got.combine_chunks().equals(expected.combine_chunks())


def test_unifies_only_refuses_differing_dictionaries_with_null_entries() -> None:
    with_null = [_with_null_entry(i) for i in range(2)]
    plain = [_dict(i) for i in range(2)]
    assert not dictionary.unifies(with_null)
    assert dictionary.unifies([with_null[0], with_null[0].slice(1)])
    assert dictionary.unifies(plain)
    nested = [_nested_with_null_entries(i)["struct"] for i in range(2)]
    assert not dictionary.unifies(nested)
    assert dictionary.unifies([nested[0], nested[0]])
