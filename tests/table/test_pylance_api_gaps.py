"""Calls pylance's own tests use that lance_ops lacked (L17): each against pylance, two-way where
data is written."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.dataset import AutoCleanupConfig
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


# --- auto cleanup on / off, transactions, sample, default scan options ----------------------------


@pytest.mark.interop
def test_enable_disable_auto_cleanup_as_pylance(tmp_path: Path) -> None:
    data = pa.table({"a": range(10)})
    config = AutoCleanupConfig(interval=2, older_than_seconds=60)
    seen = {}
    for module in (lance_ops, lance):
        ds = module.write_dataset(data, str(tmp_path / module.__name__))
        ds.optimize.enable_auto_cleanup(config)
        enabled = dict(ds.config())
        ds.optimize.disable_auto_cleanup()
        seen[module.__name__] = (enabled, dict(ds.config()), ds.version)
    assert seen["lance_ops"] == seen["lance"]
    assert seen["lance"][0] == {"lance.auto_cleanup.interval": "2", "lance.auto_cleanup.older_than": "60s"}
    assert lance.dataset(str(tmp_path / "lance_ops")).config() == {}


@pytest.mark.interop
def test_get_transactions_as_pylance(tmp_path: Path) -> None:
    data = pa.table({"a": [1]})
    for module in (lance_ops, lance):
        uri = str(tmp_path / module.__name__)
        module.write_dataset(data, uri, commit_message="first")
        module.write_dataset(data, uri, mode="append", transaction_properties={"k": "v"})
        module.dataset(uri).delete("a > 100")
    ours, theirs = lance_ops.dataset(str(tmp_path / "lance_ops")), lance.dataset(str(tmp_path / "lance"))
    for recent in (10, 2):
        got = [t.transaction_properties for t in ours.get_transactions(recent)]
        assert got == [t.transaction_properties for t in theirs.get_transactions(recent)]
    assert [t.transaction_properties for t in ours.get_transactions()] == [
        {},
        {"k": "v"},
        {"__lance_commit_message": "first"},
    ]
    # pylance reads the transactions lance_ops wrote
    assert lance.dataset(str(tmp_path / "lance_ops")).read_transaction(1).transaction_properties == {
        "__lance_commit_message": "first"
    }


def test_sample(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(pa.table({"x": range(0, 60, 10), "y": range(6)}), str(tmp_path / "d"))
    ds.delete("y = 2")
    sampled = ds.sample(3)
    assert (sampled.num_rows, sampled.num_columns) == (3, 2)
    assert set(sampled["y"].to_pylist()) <= {0, 1, 3, 4, 5}
    ordered = ds.sample(5, columns=["x"], randomize_order=False, seed=1)
    assert ordered["x"].to_pylist() == [0, 10, 30, 40, 50]
    assert ds.sample(2, seed=7).equals(ds.sample(2, seed=7))
    with pytest.raises(ValueError, match="cannot sample 6 rows"):
        ds.sample(6)


@pytest.mark.interop
def test_default_scan_options_as_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    lance.write_dataset(pa.table({"a": range(10), "b": range(10)}), uri, max_rows_per_file=4)
    for options in ({"with_row_id": True}, {"with_row_address": True}, {"columns": ["b"], "filter": "a > 6"}):
        ours = lance_ops.dataset(
            uri, default_scan_options=options, read_params={"cache_repetition_index": True}
        )
        theirs = lance.dataset(uri, default_scan_options=options)
        assert ours.schema == theirs.schema
        assert ours.to_table().equals(theirs.to_table())
        # explicit arguments win over the defaults
        assert ours.to_table(columns=["a"], filter="a < 2").equals(
            theirs.to_table(columns=["a"], filter="a < 2")
        )
        assert ours.checkout_version(1).schema == theirs.schema
    assert lance_ops.dataset(uri).schema.names == ["a", "b"]
