"""``FragmentMetadata`` / ``DataFile`` / ``DeletionFile`` as pylance 14 shows them (reprs, list-like
field ids, positional ``DataFile``), and ``LanceFragment.create`` / ``write_fragments`` with a
``data_storage_version`` on an existing dataset, each checked against pylance 14 itself."""

from __future__ import annotations

import json
import pickle
import re
import warnings
from pathlib import Path

import lance
import lance.fragment
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import WriteSchemaError
from lance_ops.fragment import DataFile, FragmentMetadata, write_fragments

_OLD_JSON = {
    "id": 0,
    "files": [
        {"path": "0.lance", "fields": [0], "file_size_bytes": 100},
        {"path": "1.lance", "fields": [1]},
    ],
    "deletion_file": None,
    "physical_rows": 100,
}


def _versions(fragment: FragmentMetadata) -> tuple[int, int]:
    (data_file,) = fragment.files
    return data_file.file_major_version, data_file.file_minor_version


def test_repr_of_fragment_metadata_from_json_is_pylances() -> None:
    ours = FragmentMetadata.from_json(json.dumps(_OLD_JSON))
    theirs = lance.fragment.FragmentMetadata.from_json(json.dumps(_OLD_JSON))
    assert repr(ours) == repr(theirs)
    assert repr(ours.files[1]) == repr(theirs.files[1]) and "file_size_bytes=None" in repr(ours.files[1])


@pytest.mark.parametrize("stable_row_ids", [False, True])
def test_repr_of_a_written_fragment_is_pylances(tmp_path: Path, stable_row_ids: bool) -> None:
    table = pa.table({"a": range(100), "s": pa.array([{"x": i} for i in range(100)])})
    reprs = []
    for module, name in ((lance_ops, "ours"), (lance, "theirs")):
        ds = module.write_dataset(table, str(tmp_path / name), enable_stable_row_ids=stable_row_ids)
        ds.delete("a < 10")
        text = repr(ds.get_fragments()[0].metadata)
        text = re.sub(r"path='[0-9a-f]+\.lance'", "path=P", text)
        text = re.sub(r"file_size_bytes=\d+", "file_size_bytes=N", text)
        # pylance prints these objects by address
        reprs.append(re.sub(r"_meta=<[^>]+>|_meta=RowIdMeta\([^)]*\)", "_meta=M", text))
    assert reprs[0] == reprs[1]
    assert "deletion_file=DeletionFile(type='array', num_deleted_rows=10)" in reprs[0]


def test_data_file_fields_are_lists_to_pylance_and_hashable(tmp_path: Path) -> None:
    frag = lance_ops.LanceFragment.create(str(tmp_path / "ours"), pa.table({"a": [1, 2, 3], "b": [4, 5, 6]}))
    their = lance.fragment.LanceFragment.create(
        str(tmp_path / "theirs"), pa.table({"a": [1, 2, 3], "b": [4, 5, 6]})
    )
    (data_file,) = frag.files
    assert data_file.fields == [0, 1] == their.files[0].fields
    assert data_file.fields == (0, 1) and data_file.fields != [0] and data_file.fields != [1, 0]
    assert data_file.column_indices == their.files[0].column_indices == [0, 1]
    assert repr(data_file.fields) == "[0, 1]"
    assert hash(data_file) == hash(pickle.loads(pickle.dumps(data_file)))
    assert pickle.loads(pickle.dumps(frag)) == frag
    assert frag.to_json()["files"][0]["fields"] == [0, 1]


def test_data_file_positional_as_pylance() -> None:
    ours, theirs = DataFile("a.lance", [0]), lance.fragment.DataFile("a.lance", [0])
    assert repr(ours) == repr(theirs)
    assert repr(DataFile("a.lance", [0], [0], 2, 0)) == repr(
        lance.fragment.DataFile("a.lance", [0], [0], 2, 0)
    )


@pytest.mark.parametrize(
    ("dataset_version", "asked"), [("stable", "legacy"), ("2.0", "2.1"), ("legacy", "2.1")]
)
def test_fragment_create_writes_the_asked_version(tmp_path: Path, dataset_version: str, asked: str) -> None:
    data = pa.table({"a": range(800), "b": range(800)})
    created = []
    for module, name in ((lance_ops, "ours"), (lance, "theirs")):
        ds = module.write_dataset(data, str(tmp_path / name), data_storage_version=dataset_version)
        created.append(module.LanceFragment.create(ds.uri, data, data_storage_version=asked))
    assert _versions(created[0]) == _versions(created[1])
    assert created[0].files[0].fields == created[1].files[0].fields == [0, 1]


def test_fragment_create_mixed_families_are_refused_at_commit(tmp_path: Path) -> None:
    data = pa.table({"a": range(800), "b": range(800)})
    ds = lance_ops.write_dataset([], str(tmp_path / "d"), schema=data.schema, data_storage_version="stable")
    legacy = lance_ops.LanceFragment.create(ds.uri, data, data_storage_version="legacy")
    stable = lance_ops.LanceFragment.create(ds.uri, data, data_storage_version="stable")
    assert (_versions(legacy)[0], _versions(stable)) == (0, (2, 2))
    with pytest.raises(OSError, match="Dataset snapshot mixes V1 and V2 data files"):
        lance_ops.LanceDataset.commit(ds.uri, lance_ops.LanceOperation.Overwrite(ds.schema, [legacy, stable]))
    assert lance_ops.dataset(ds.uri).version == 1


def test_fragment_create_of_another_2x_version_commits_and_pylance_reads(tmp_path: Path) -> None:
    data = pa.table({"a": range(800), "b": range(800)})
    uri = str(tmp_path / "d")
    ds = lance_ops.write_dataset(data, uri, data_storage_version="2.0")
    fragment = lance_ops.LanceFragment.create(uri, data, data_storage_version="2.1")
    assert _versions(fragment) == (2, 1)
    lance_ops.LanceDataset.commit(uri, lance_ops.LanceOperation.Append([fragment]), read_version=ds.version)
    expected = pa.concat_tables([data, data])
    assert lance.dataset(uri).to_table().equals(expected)
    assert lance_ops.dataset(uri).to_table().equals(expected)


@pytest.mark.parametrize(("dataset_version", "asked"), [("2.0", "legacy"), ("legacy", "2.1")])
def test_write_fragments_refuses_the_other_family_as_pylance(
    tmp_path: Path, dataset_version: str, asked: str
) -> None:
    data = pa.table({"a": range(10)})
    theirs = lance.write_dataset(data, str(tmp_path / "theirs"), data_storage_version=dataset_version)
    ours = lance_ops.write_dataset(data, str(tmp_path / "ours"), data_storage_version=dataset_version)
    with pytest.raises(OSError, match="V1 and V2 storage versions cannot be mixed") as their_error:
        lance.fragment.write_fragments(data, theirs.uri, data_storage_version=asked)
    with pytest.raises(WriteSchemaError, match="V1 and V2 storage versions cannot be mixed") as our_error:
        write_fragments(data, ours.uri, data_storage_version=asked)
    assert str(their_error.value).split(",")[0] == str(our_error.value)
    assert not list((tmp_path / "ours" / "data").glob("*.lance"))[1:]  # nothing written beyond the first file


def test_write_fragments_default_and_same_family_versions_as_pylance(tmp_path: Path) -> None:
    data = pa.table({"a": range(10)})
    theirs = lance.write_dataset(data, str(tmp_path / "theirs"), data_storage_version="2.0")
    ours = lance_ops.write_dataset(data, str(tmp_path / "ours"), data_storage_version="2.0")
    for asked in (None, "2.1", "stable"):
        kwargs = {} if asked is None else {"data_storage_version": asked}
        (mine,) = write_fragments(data, ours.uri, **kwargs)
        (their,) = lance.fragment.write_fragments(data, theirs.uri, **kwargs)
        assert _versions(mine) == _versions(their)


def test_merge_with_a_pyarrow_schema_warns_as_pylance(tmp_path: Path) -> None:
    table = pa.table({"a": range(10)})
    expected = pa.table({"a": range(10), "c": range(10)})
    for module, name in ((lance_ops, "ours"), (lance, "theirs")):
        uri = str(tmp_path / name)
        module.write_dataset(table, uri)
        fragment = module.dataset(uri).get_fragments()[0]
        merged, lance_schema = fragment.merge_columns(lambda _: pa.RecordBatch.from_pydict({"c": range(10)}))
        with pytest.warns(DeprecationWarning, match="Passing a pyarrow.Schema to Merge is deprecated"):
            operation = module.LanceOperation.Merge([merged], expected.schema)
        assert module.LanceDataset.commit(uri, operation, read_version=1).to_table() == expected
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            module.LanceOperation.Merge([merged], lance_schema)  # the preferred form: no warning
    assert lance.dataset(str(tmp_path / "ours")).to_table() == expected


@pytest.mark.parametrize("in_memory", [False, True])
def test_write_fragments_to_an_opened_dataset(tmp_path: Path, in_memory: bool) -> None:
    first, second = pa.table({"a": range(5)}), pa.table({"a": range(5, 9)})
    uri = "memory://write-fragments-to-dataset" if in_memory else str(tmp_path / "d")
    ds = lance_ops.write_dataset(first, uri, mode="overwrite")
    fragments = write_fragments(second, ds)
    committed = lance_ops.LanceDataset.commit(ds, lance_ops.LanceOperation.Append(fragments), read_version=1)
    expected = pa.concat_tables([first, second])
    assert committed.to_table() == expected
    if not in_memory:
        assert lance.dataset(uri).to_table() == expected
        their = lance.dataset(uri)
        theirs = lance.fragment.write_fragments(second, their)
        assert [f.physical_rows for f in theirs] == [f.physical_rows for f in fragments] == [4]
