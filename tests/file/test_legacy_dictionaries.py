"""Dictionary columns of legacy (0.1) datasets, as pylance 14 keeps them.

pylance stores a legacy dataset's dictionary values at the start of every manifest file
(``Field.dictionary`` locating them) and reads them from there; the data files hold the keys.
We write the same manifest bytes, carry the values through every later version, take appends with
the same dictionary and refuse another one as pylance does (an ``OSError``: our
``WriteSchemaError``), both ways with pylance.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops._proto import table_pb2
from lance_ops.errors import UnsupportedFeatureError, WriteSchemaError
from lance_ops.fragment import write_fragments


def _dict(values: list[str | None], index: pa.DataType | None = None) -> pa.DictionaryArray:
    wanted = pa.dictionary(index or pa.int16(), pa.string())
    return pa.array(values, pa.string()).dictionary_encode().cast(wanted)


def _manifest(uri: str, version: int) -> tuple[bytes, table_pb2.Manifest]:
    path = next(p for p in (Path(uri) / "_versions").glob("*.manifest") if _version(p) == version)
    data = path.read_bytes()
    (position,) = struct.unpack("<q", data[-16:-8])
    (size,) = struct.unpack("<I", data[position : position + 4])
    return data, table_pb2.Manifest.FromString(data[position + 4 : position + 4 + size])


def _version(path: Path) -> int:
    data = path.read_bytes()
    (position,) = struct.unpack("<q", data[-16:-8])
    (size,) = struct.unpack("<I", data[position : position + 4])
    return table_pb2.Manifest.FromString(data[position + 4 : position + 4 + size]).version


def _dictionary_bytes(uri: str, version: int) -> tuple[bytes, list[tuple[str, int, int]]]:
    """The bytes before the first section and each dictionary field's (name, offset, length)."""
    data, manifest = _manifest(uri, version)
    fields = [
        (f.name, f.dictionary.offset, f.dictionary.length)
        for f in manifest.fields
        if f.HasField("dictionary")
    ]
    first = min(
        [manifest.index_section] * manifest.HasField("index_section")
        + [manifest.transaction_section_position] * manifest.HasField("transaction_section_position")
        + [struct.unpack("<q", data[-16:-8])[0]]
    )
    return data[:first], fields


TYPES = [
    ("int8", pa.table({"d": _dict(["a", "b", "a"], pa.int8())})),
    ("int16", pa.table({"d": _dict(["x", None, "yy", "x"], pa.int16()), "n": [1, 2, 3, 4]})),
    ("int32", pa.table({"d": _dict(["só", "b"], pa.int32()), "e": _dict(["p", "q"], pa.int8())})),
    ("integers", pa.table({"d": pa.array([5, 6, 5], pa.int64()).dictionary_encode()})),
    (
        "large_string",
        pa.table(
            {
                "d": pa.DictionaryArray.from_arrays(
                    pa.array([0, 1, 1], pa.int8()), pa.array(["f", "b"], pa.large_string())
                )
            }
        ),
    ),
]


@pytest.mark.parametrize(("name", "table"), TYPES, ids=[n for n, _ in TYPES])
def test_manifest_holds_the_values_as_pylance_writes_them(name: str, table: pa.Table, tmp_path: Path) -> None:
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_ops.write_dataset(table, ours, data_storage_version="legacy")
    lance.write_dataset(table, theirs, data_storage_version="legacy")
    assert _dictionary_bytes(ours, 1) == _dictionary_bytes(theirs, 1)
    assert lance.dataset(ours).to_table() == lance.dataset(theirs).to_table()
    assert lance_ops.dataset(theirs).to_table() == lance.dataset(theirs).to_table()
    assert lance_ops.dataset(ours).schema == table.schema


def test_every_version_carries_the_values(tmp_path: Path) -> None:
    """Each commit rewrites the values into its manifest file (appends, deletes, pylance's and
    ours, an index), and every version reads the same in pylance and here."""
    uri = str(tmp_path / "d")
    table = pa.table({"d": _dict(["a", "b", None, "a"]), "x": pa.array([1, 2, 3, 4], pa.int64())})
    lance_ops.write_dataset(table, uri, data_storage_version="legacy")
    lance_ops.write_dataset(table, uri, mode="append")
    lance.write_dataset(table, uri, mode="append")
    lance_ops.write_dataset(table, uri, mode="append")
    lance_ops.dataset(uri).delete("x = 2")
    lance.dataset(uri).create_scalar_index("x", "BTREE")
    lance_ops.write_dataset(table.slice(0, 1), uri, mode="append")
    latest = lance_ops.dataset(uri).version
    assert latest == 7
    for version in range(1, latest + 1):
        assert _dictionary_bytes(uri, version)[1] == [("d", 2, 2)]
        theirs = lance.dataset(uri, version=version).to_table()
        assert lance_ops.dataset(uri, version=version).to_table() == theirs
        assert theirs.column("d").combine_chunks().dictionary.to_pylist() == ["a", "b"]
    assert lance.dataset(uri).to_table().column("x").to_pylist() == [1, 3, 4] * 4 + [1]


def test_appends_with_another_dictionary_are_refused_as_pylance_refuses_them(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    lance.write_dataset(pa.table({"d": _dict(["a", "b"])}), uri, data_storage_version="legacy")
    other = pa.table({"d": _dict(["z", "a"])})
    with pytest.raises(OSError, match="dictionary for `d` did not match expected dictionary"):
        lance.write_dataset(other, uri, mode="append")
    with pytest.raises(WriteSchemaError, match="dictionary for `d` did not match expected dictionary"):
        lance_ops.write_dataset(other, uri, mode="append")
    assert lance.dataset(uri).version == 1
    assert not list((Path(uri) / "data").glob("*.lance"))[1:]  # the refused write left no file
    # the same dictionary, and the first values of it, are taken
    same = pa.DictionaryArray.from_arrays(pa.array([1, 0], pa.int16()), pa.array(["a", "b"]))
    first = pa.DictionaryArray.from_arrays(pa.array([0], pa.int16()), pa.array(["a"]))
    lance_ops.write_dataset(pa.table({"d": same}), uri, mode="append")
    lance_ops.write_dataset(pa.table({"d": first}), uri, mode="append")
    assert lance.dataset(uri).to_table().column("d").to_pylist() == ["a", "b", "b", "a", "a"]


def test_first_write_shares_one_dictionary_across_batches_and_files(tmp_path: Path) -> None:
    """Batches with other dictionaries are remapped onto one growing dictionary, which every
    file and the manifest hold (pylance would keep the first batch's and misread the others)."""
    uri = str(tmp_path / "d")
    column = pa.chunked_array([_dict(["a", "b"] * 600), _dict(["c", "a"] * 600), _dict(["b"])])
    lance_ops.write_dataset(
        pa.table({"d": column}), uri, data_storage_version="legacy", max_rows_per_file=1000
    )
    expected = column.to_pylist()
    assert len(lance.dataset(uri).get_fragments()) == 3
    assert lance.dataset(uri).to_table().column("d").to_pylist() == expected
    assert lance_ops.dataset(uri).to_table().column("d").to_pylist() == expected
    lance_ops.dataset(uri).optimize.compact_files()
    assert len(lance.dataset(uri).get_fragments()) == 1
    assert lance.dataset(uri).to_table().column("d").to_pylist() == expected


def test_an_empty_first_write_is_refused_and_commits_nothing(tmp_path: Path) -> None:
    """Without rows, or with only nulls, there is no dictionary: pylance refuses, so do we."""
    empty = pa.table({"d": _dict([])})
    with pytest.raises(OSError, match="dictionary"):
        lance.write_dataset(empty, str(tmp_path / "theirs"), data_storage_version="legacy")
    uri = str(tmp_path / "ours")
    with pytest.raises(UnsupportedFeatureError, match=r"\['d'\] have no dictionary values"):
        lance_ops.write_dataset(empty, uri, data_storage_version="legacy")
    nulls = pa.table({"d": _dict([None, None])})
    with pytest.raises(pa.ArrowInvalid, match="dictionary key"):  # pylance writes it, unreadable
        lance.write_dataset(nulls, str(tmp_path / "theirs"), data_storage_version="legacy").to_table()
    with pytest.raises(UnsupportedFeatureError, match="only nulls"):
        lance_ops.write_dataset(nulls, uri, data_storage_version="legacy")
    with pytest.raises(ValueError):
        lance.dataset(uri)
    # an empty append to an existing dataset keeps its dictionary
    lance_ops.write_dataset(pa.table({"d": _dict(["q"])}), uri, data_storage_version="legacy")
    lance_ops.write_dataset(empty, uri, mode="append")
    assert lance.dataset(uri).to_table().column("d").to_pylist() == ["q"]


def test_fragments_written_apart_and_committed_as_an_overwrite(tmp_path: Path) -> None:
    """A driver commits executors' fragments: the manifest takes the values from the data files."""
    uri = str(tmp_path / "d")
    table = pa.table({"d": _dict(["k", "l", "k"])})
    fragments = write_fragments(table, uri, mode="create", data_storage_version="legacy")
    operation = lance_ops.LanceOperation.Overwrite(table.schema, fragments)
    lance_ops.LanceDataset.commit(uri, operation)
    assert lance.dataset(uri).to_table().column("d").to_pylist() == ["k", "l", "k"]
    assert _dictionary_bytes(uri, 1)[1] == [("d", 2, 2)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.sampled_from([1, 2, 1023, 1024, 1025]),
    values=st.lists(st.sampled_from(["a", "bb", "", "ççç", None]), min_size=1, max_size=5).filter(
        lambda v: v[0] is not None
    ),
)
def test_shapes_read_the_same_in_pylance(
    tmp_path_factory: pytest.TempPathFactory, rows: int, values: list[str | None]
) -> None:
    uri = str(tmp_path_factory.mktemp("d") / "d")
    column = _dict((values * rows)[:rows])
    lance_ops.write_dataset(pa.table({"d": column}), uri, data_storage_version="legacy")
    # pylance reads an empty string of a legacy dictionary as null, and then refuses appends of
    # the dictionary holding it, as we do
    appended = pa.table({"d": column})
    refused = []
    for write in (lance.write_dataset, lance_ops.write_dataset):
        try:
            write(appended, uri, mode="append")
        except OSError as exc:
            assert "dictionary for `d` did not match expected dictionary" in str(exc)
            refused.append(write)
    assert len(refused) == (2 if "" in column.to_pylist() else 0)
    copies = 3 if not refused else 1
    theirs = lance.dataset(uri).to_table().column("d").to_pylist()
    assert lance_ops.dataset(uri).to_table().column("d").to_pylist() == theirs
    # pylance reads legacy dictionary keys without validity: a null reads as the key under it
    original = [v if v != "" else None for v in column.to_pylist()] * copies
    assert [v for v, o in zip(theirs, original, strict=True) if o is not None] == [
        v for v in original if v is not None
    ]


def test_commits_mixing_legacy_and_v2_files_are_refused_as_pylance_refuses_them(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    data = pa.table({"a": pa.array(range(8), pa.int64())})
    lance_ops.write_dataset(data, uri)
    legacy = write_fragments(data, uri, mode="create", data_storage_version="legacy")
    stable = write_fragments(data, uri, mode="create")
    assert [f.files[0].file_version for f in legacy + stable] == ["0.1", "2.2"]
    mixed = lance_ops.LanceOperation.Overwrite(data.schema, legacy + stable)
    theirs = [lance.fragment.FragmentMetadata.from_json(json.dumps(f.to_json())) for f in legacy + stable]
    with pytest.raises(OSError, match="Dataset snapshot mixes V1 and V2 data files"):
        lance.LanceDataset.commit(uri, lance.LanceOperation.Overwrite(data.schema, theirs))
    with pytest.raises(
        WriteSchemaError, match="^Invalid user input: Dataset snapshot mixes V1 and V2 data files$"
    ):
        lance_ops.LanceDataset.commit(uri, mixed)
    with pytest.raises(OSError, match="Dataset snapshot mixes V1 and V2 data files"):
        lance.LanceDataset.commit(uri, lance.LanceOperation.Append(theirs[:1]), read_version=1)
    with pytest.raises(WriteSchemaError, match="Dataset snapshot mixes V1 and V2 data files"):
        lance_ops.LanceDataset.commit(uri, lance_ops.LanceOperation.Append(legacy), read_version=1)
    words = r"has version 0.1, but the manifest default is 2.2; V1 and V2 storage versions cannot be mixed"
    with pytest.raises(OSError, match=words):
        lance.LanceDataset.commit(uri, lance.LanceOperation.Overwrite(data.schema, theirs[:1]))
    with pytest.raises(WriteSchemaError, match=words):
        lance_ops.LanceDataset.commit(uri, lance_ops.LanceOperation.Overwrite(data.schema, legacy))
    assert lance.dataset(uri).version == 1
    # the first commit's and pylance's three refused ones (it writes them first); ours leave none
    assert len(list((Path(uri) / "_transactions").iterdir())) == 4
    # an overwrite that asks for legacy files takes them
    lance_ops.LanceDataset.commit(
        uri, lance_ops.LanceOperation.Overwrite(data.schema, legacy), data_storage_version="legacy"
    )
    assert lance.dataset(uri).data_storage_version == "0.1"
    assert lance.dataset(uri).to_table() == data


def test_a_dictionary_column_added_fragment_by_fragment(tmp_path: Path) -> None:
    """``add_columns`` writes each fragment's file apart: the same dictionary everywhere is taken,
    unrelated dictionaries (which one manifest cannot hold) are refused and nothing is committed."""
    uri = str(tmp_path / "d")
    data = pa.table({"x": pa.array(range(6), pa.int64())})
    lance_ops.write_dataset(data, uri, data_storage_version="legacy", max_rows_per_file=3)

    def same(batch: pa.RecordBatch) -> pa.RecordBatch:
        keys = pa.compute.cast(pa.compute.bit_wise_and(batch["x"], 1), pa.int8())
        return pa.record_batch({"e": pa.DictionaryArray.from_arrays(keys, pa.array(["u", "v"]))})

    def unrelated(batch: pa.RecordBatch) -> pa.RecordBatch:
        values = pa.array([f"n{v}" for v in batch["x"].to_pylist()])
        return pa.record_batch({"f": values.dictionary_encode()})

    ds = lance_ops.dataset(uri)
    with pytest.raises(UnsupportedFeatureError, match="different dictionaries"):
        ds.add_columns(unrelated)
    assert lance.dataset(uri).version == 1
    lance_ops.dataset(uri).add_columns(same)
    assert lance.dataset(uri).to_table().column("e").to_pylist() == ["u", "v"] * 3
    assert _dictionary_bytes(uri, 2)[1] == [("e", 2, 2)]
