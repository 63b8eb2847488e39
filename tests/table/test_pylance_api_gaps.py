"""Calls pylance's own tests use that lance_ops lacked (L17): each against pylance, two-way where
data is written."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.progress import FileSystemFragmentWriteProgress

# --- LanceFragment.create(progress=) -------------------------------------------------------------


@pytest.mark.interop
def test_fragment_create_progress_files_as_pylance(tmp_path: Path) -> None:
    """``begin`` names the fragment's id and data file (the ``fragment_{id}.json`` pylance writes)."""
    data = pa.table({"a": range(100)})
    written = {}
    for name, module, tracker in (
        ("ours", lance_ops, FileSystemFragmentWriteProgress),
        ("theirs", lance, lance.progress.FileSystemFragmentWriteProgress),
    ):
        progress = tracker(str(tmp_path / f"{name}-progress"), metadata={"k": "v"})
        fragment = module.LanceFragment.create(str(tmp_path / name), data, fragment_id=3, progress=progress)
        assert not (tmp_path / f"{name}-progress" / "fragment_3.in_progress").exists()
        recorded = json.loads((tmp_path / f"{name}-progress" / "fragment_3.json").read_text())
        assert recorded["id"] == 3
        assert [f["path"] for f in recorded["files"]] == [f.path for f in fragment.files]
        written[name] = fragment
    lance_ops.LanceDataset.commit(
        str(tmp_path / "ours"), lance_ops.LanceOperation.Overwrite(data.schema, [written["ours"]])
    )
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(data)


# --- update_columns errors ------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize(
    ("column", "words"),
    [
        ("nonexistent_column", "does not exist"),
        ("_rowaddr", "reserved metadata column and cannot be updated"),
    ],
)
def test_update_columns_errors_as_pylance(tmp_path: Path, column: str, words: str) -> None:
    data = pa.table({"id": [1, 2, 3], "value": [10, 20, 30]})
    update = pa.table({"_rowid": pa.array([0, 1], pa.uint64()), column: pa.array([9, 8], pa.uint64())})
    for module in (lance_ops, lance):
        fragment = module.write_dataset(data, str(tmp_path / module.__name__)).get_fragment(0)
        with pytest.raises(ValueError, match=words):
            fragment.update_columns(update)
