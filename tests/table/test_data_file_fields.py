"""The Lance field messages inside a dataset's data files are the dataset's own (its field ids,
the empty ``dictionary`` marker of dictionary fields), as in the data files pylance writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.file.format import read_tail
from lance_ops.io import object_store

lance = pytest.importorskip("lance")

TABLE = pa.table(
    {
        "a": pa.array([1, 2, 3], pa.int64()),
        "s": pa.array([{"x": 1, "y": "a"}, {"x": None, "y": "b"}, {"x": 3, "y": None}]),
        "d": pa.array(["a", "b", "a"]).dictionary_encode(),
        "l": pa.array([[1], [], None], pa.list_(pa.int32())),
    }
)


def _file_fields(path: Path) -> list[bytes]:
    store, where = object_store(str(path), None)
    return [f.SerializeToString() for f in read_tail(store, where).descriptor.schema.fields]


def _data_files(root: Path) -> list[list[bytes]]:
    """Each data file's field messages, in the order the fragments list them."""
    ds = lance_ops.dataset(str(root))
    return [
        _file_fields(root / "data" / data_file.path)
        for fragment in ds.get_fragments()
        for data_file in fragment.metadata.files
    ]


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_data_files_hold_the_datasets_fields_as_pylance(tmp_path: Path, version: str) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    lance_ops.write_dataset(TABLE, str(ours), data_storage_version=version, page_statistics=False)
    lance.write_dataset(TABLE, str(theirs), data_storage_version=version)
    for root, module in ((ours, lance_ops), (theirs, lance)):
        module.write_dataset(TABLE, str(root), mode="append")
        module.dataset(str(root)).add_columns({"b": "a * 2"})
    assert _data_files(ours) == _data_files(theirs)
    added = [fields for fields in _data_files(ours) if len(fields) == 1]
    assert len(added) == 2  # one new file per fragment, numbered after the dataset's fields
    assert lance.dataset(str(ours)).to_table().equals(lance_ops.dataset(str(theirs)).to_table())
