"""versions(), history() and restore(), two-way with pylance."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import VersionNotFoundError
from lance_ops.ops import history as history_op
from lance_ops.ops.commit import CommitOptions
from lance_ops.table.transaction import Restore


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def _build(uri: str) -> lance_ops.LanceDataset:
    lance_ops.write_dataset(_table(10), uri, commit_message="create", transaction_properties={"job": "a"})
    lance_ops.write_dataset(_table(5, 10), uri, mode="append")
    ds = lance_ops.dataset(uri)
    ds.delete("id < 3")
    return ds


def test_history_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = _build(uri)
    table = ds.history()
    assert table.schema == history_op.HISTORY_SCHEMA
    rows = table.to_pylist()
    assert [r["version"] for r in rows] == [1, 2, 3]
    assert [r["operation"] for r in rows] == ["Overwrite", "Append", "Delete"]
    assert [r["read_version"] for r in rows] == [0, 1, 2]
    assert rows[0]["commit_message"] == "create" and rows[1]["commit_message"] is None
    assert dict(rows[0]["transaction_properties"])["job"] == "a"
    assert [r["rows"] for r in rows] == [10, 15, 12]
    assert [r["deleted_rows"] for r in rows] == [0, 0, 3]
    assert [r["fragments"] for r in rows] == [1, 2, 2]
    assert [r["data_files"] for r in rows] == [1, 2, 2]
    assert [r["deletion_files"] for r in rows] == [0, 0, 1]
    sizes = [
        sum(d.file_size_bytes for f in ds.checkout_version(v).manifest.fragments for d in f.files)
        for v in (1, 2, 3)
    ]
    assert [r["bytes"] for r in rows] == sizes
    stamps = [r["timestamp"] for r in rows]
    assert stamps == sorted(stamps) and stamps[0].tzinfo is not None


def test_restore_keeps_history(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    old = lance_ops.dataset(uri, version=1)
    old.restore()
    assert old.version == 4
    latest = lance_ops.dataset(uri)
    assert latest.version == 4 and latest.to_table() == lance_ops.dataset(uri, version=1).to_table()
    transaction = latest.read_transaction()
    assert transaction is not None and transaction.operation == Restore(1) and transaction.read_version == 3
    assert [v["version"] for v in latest.versions()] == [1, 2, 3, 4]
    assert latest.history().column("operation").to_pylist()[-1] == "Restore"
    # New fragments after a restore never reuse ids of the versions in between.
    lance_ops.write_dataset(_table(2, 100), uri, mode="append")
    ids = [f.fragment_id for f in lance_ops.dataset(uri).get_fragments()]
    assert ids == [0, 2]


def test_restore_unknown_version_writes_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _build(uri)
    before = sorted(p.name for p in (tmp_path / "ds").rglob("*"))
    with pytest.raises(VersionNotFoundError):
        history_op.restore(uri, 99, CommitOptions())
    assert sorted(p.name for p in (tmp_path / "ds").rglob("*")) == before


@pytest.mark.interop
def test_versions_match_pylance(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    ds = _build(uri)
    assert ds.versions() == lance_module.dataset(uri).versions()


@pytest.mark.interop
def test_pylance_reads_our_restore(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    _build(uri)
    lance_ops.dataset(uri, version=2).restore()
    theirs = lance_module.dataset(uri)
    assert theirs.version == 4
    assert theirs.to_table() == lance_module.dataset(uri, version=2).to_table()
    transaction = theirs.read_transaction(4)
    assert transaction.read_version == 3 and transaction.operation.version == 2
    assert [v["version"] for v in theirs.versions()] == [1, 2, 3, 4]
    lance_module.write_dataset(_table(3, 50), uri, mode="append")
    assert lance_ops.dataset(uri).count_rows() == 18


@pytest.mark.interop
def test_we_read_pylance_restore(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = str(tmp_path / "ds")
    lance_module.write_dataset(_table(10), uri)
    lance_module.write_dataset(_table(5, 10), uri, mode="append")
    lance_module.dataset(uri, version=1).restore()
    ds = lance_ops.dataset(uri)
    assert ds.to_table() == _table(10)
    assert ds.history().column("operation").to_pylist() == ["Overwrite", "Append", "Restore"]
    assert ds.versions() == lance_module.dataset(uri).versions()


def test_version_timestamps_round_as_pylance() -> None:
    """pylance builds the datetime from the nanoseconds as a float; 1795475716660170029 ns gave
    ...16.660169 there (exact truncation would give 660170): the flaky case behind a versions() mismatch."""
    from lance_ops.ops.history import _local_datetime

    assert _local_datetime(1_795_475_716_660_170_029).microsecond == 660_169
    assert _local_datetime(1_795_475_716_000_000_000).microsecond == 0


@pytest.mark.interop
def test_maintenance_methods_record_transaction_properties(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """restore, compact_files and stats.rebuild stamp the given properties (Dagster's run ids)."""
    uri = str(tmp_path / "ds")
    _build(uri)
    lance_ops.dataset(uri, 2).restore(transaction_properties={"run": "restore"})
    ds = lance_ops.dataset(uri)
    ds.optimize.compact_files(transaction_properties={"run": "compact"})
    ds.stats.rebuild(force=True, transaction_properties={"run": "stats"})
    properties = [dict(r["transaction_properties"] or {}).get("run") for r in ds.history().to_pylist()]
    assert properties[-4:] == ["restore", "compact", "compact", "stats"]  # compaction: reserve + rewrite
    theirs = lance_module.dataset(uri)
    assert theirs.version == ds.version
    assert theirs.read_transaction(theirs.version).transaction_properties["run"] == "stats"


@pytest.mark.interop
def test_asof_opens_the_version_pylance_opens(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """dataset(uri, asof=...): the newest version committed strictly before the cut-off, as pylance."""
    import datetime as dt  # noqa: PLC0415

    from lance_ops.errors import InvalidArgumentError  # noqa: PLC0415

    uri = str(tmp_path / "ds")
    _build(uri)
    stamps = [v["timestamp"] for v in lance_ops.dataset(uri).versions()]
    probes = [stamps[1], stamps[1] + dt.timedelta(microseconds=1), stamps[2] + dt.timedelta(seconds=5)]
    for cutoff in probes:
        assert lance_ops.dataset(uri, asof=cutoff).version == lance_module.dataset(uri, asof=cutoff).version
    assert lance_ops.dataset(uri, asof=stamps[1]).version == 1
    assert lance_ops.dataset(uri, version=3, asof=stamps[1]).version == 3  # a version wins
    aware = (stamps[1] + dt.timedelta(microseconds=1)).astimezone(dt.UTC)
    assert lance_ops.dataset(uri, asof=aware).version == 2
    assert lance_ops.dataset(uri, asof=(stamps[2] + dt.timedelta(seconds=1)).isoformat()).version == 3
    with pytest.raises(VersionNotFoundError, match="earlier than the first version"):
        lance_ops.dataset(uri, asof=dt.datetime(2000, 1, 1))
    with pytest.raises(ValueError, match="earlier than the first version"):
        lance_module.dataset(uri, asof=dt.datetime(2000, 1, 1))
    with pytest.raises(InvalidArgumentError, match="parse"):
        lance_ops.dataset(uri, asof="yesterday")


def test_versions_from_the_protobuf_equal_the_decoded_manifests(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """versions() and history() read counts and transactions from each manifest's protobuf: the
    same answers as the decoded manifests (fragments converted) give, on versions written by both
    libraries (deletions, several files, a transaction file of pylance's)."""
    from dataclasses import replace

    from lance_ops.table.commit import load_manifests, load_transaction

    uri = str(tmp_path / "ds")
    ds = _build(uri)
    lance_module.write_dataset(_table(4, 100), uri, mode="append", max_rows_per_file=2)
    lance_module.dataset(uri).delete("id = 101")
    ds = lance_ops.dataset(uri)
    loaded = list(load_manifests(ds._storage.store, ds._storage.root))
    general = [replace(entry.manifest, fragments=tuple(entry.manifest.fragments)) for entry in loaded]
    assert [v["metadata"] for v in ds.versions()] == [history_op.summary(m) for m in general]
    assert ds.versions() == lance_module.dataset(uri).versions()
    rows = ds.history().to_pylist()
    store, root = ds._storage.store, ds._storage.root
    for row, entry, manifest in zip(rows, loaded, general, strict=True):
        transaction = load_transaction(store, root, entry)
        assert transaction is not None
        assert (row["operation"], row["read_version"]) == (
            transaction.operation.name,
            transaction.read_version,
        )
        counts = history_op.summary(manifest)
        assert (row["rows"], row["deleted_rows"], row["bytes"]) == (
            manifest.num_rows,
            int(counts["total_deletion_file_rows"]),
            int(counts["total_files_size"]),
        )
    assert [r["deleted_rows"] for r in rows][-1] == 4
