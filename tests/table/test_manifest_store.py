"""The external manifest store protocol with the SQLite store: commits, repair, many processes."""

from __future__ import annotations

import contextlib
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import lance_ops
from lance_ops import SqliteManifestStore
from lance_ops.errors import StorageError
from lance_ops.io import object_store
from lance_ops.table.commit import (
    ExternalManifestCommitHandler,
    LockCommitHandler,
    PutIfAbsentCommitHandler,
    commit_handler,
)
from lance_ops.table.manifest_store import ManifestRecord, stage_and_claim
from lance_ops.table.naming import ManifestNamingScheme

REPO = Path(__file__).resolve().parents[2]


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def _records(db: Path, base_uri: str) -> list[tuple[int, str]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT version, path FROM lance_manifests WHERE base_uri = ? ORDER BY version", (base_uri,)
        )
        return [(int(v), str(p)) for v, p in rows]


def _final(version: int) -> str:
    return f"_versions/{ManifestNamingScheme.V2.manifest_name(version)}"


def _versions_dir(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "_versions").iterdir() if p.name != "latest_version_hint.json")


def test_store_semantics(tmp_path: Path) -> None:
    store = SqliteManifestStore(tmp_path / "m.db")
    assert store.get_latest("a") is None and store.get("a", 1) is None
    assert store.put_if_not_exists("a", 1, "_versions/x.manifest-1", 10)
    assert not store.put_if_not_exists("a", 1, "_versions/x.manifest-2", 10)
    assert store.put_if_not_exists("b", 1, "_versions/y.manifest", 5)
    assert not store.put_if_exists("a", 2, "_versions/z.manifest", 1)
    assert store.get("a", 1) == ManifestRecord(1, "_versions/x.manifest-1", 10)
    assert store.get("a", 1).is_staged and store.get("a", 1).final_path == "_versions/x.manifest"  # type: ignore[union-attr]
    assert store.put_if_exists("a", 1, "_versions/x.manifest", 11)
    assert store.get_latest("a") == ManifestRecord(1, "_versions/x.manifest", 11)
    with sqlite3.connect(tmp_path / "m.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    copy = pickle.loads(pickle.dumps(store))
    assert copy.get_latest("b") == ManifestRecord(1, "_versions/y.manifest", 5)


def test_unusable_database_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="missing/m.db"):
        SqliteManifestStore(tmp_path / "missing" / "m.db")
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    with pytest.raises(StorageError, match="junk.db.*not a database"):
        SqliteManifestStore(tmp_path / "junk.db")
    uri = tmp_path / "ds"
    lance_ops.write_dataset(_table(3), uri)
    store = SqliteManifestStore(tmp_path / "m.db")
    (tmp_path / "m.db").write_bytes(b"not a database" * 100)
    with pytest.raises(StorageError, match="m.db"):
        lance_ops.write_dataset(_table(3), uri, mode="append", manifest_store=store)
    assert lance_ops.dataset(uri).versions()[-1]["version"] == 1


def test_handler_choice(tmp_path: Path) -> None:
    store = SqliteManifestStore(tmp_path / "m.db")
    assert isinstance(commit_handler(store, None), ExternalManifestCommitHandler)
    assert isinstance(commit_handler(None, lambda v: contextlib.nullcontext()), LockCommitHandler)
    assert isinstance(commit_handler(), PutIfAbsentCommitHandler)


def test_commits_through_the_store(tmp_path: Path) -> None:
    uri, db = tmp_path / "ds", tmp_path / "m.db"
    store = SqliteManifestStore(db)
    lance_ops.write_dataset(_table(10), uri, manifest_store=store)
    lance_ops.write_dataset(_table(5, 10), uri, mode="append", manifest_store=store)
    ds = lance_ops.dataset(uri, manifest_store=store)
    assert ds.delete("id < 2") == 2
    ds.checkout_version(1).restore()
    ds = lance_ops.dataset(uri, manifest_store=store)
    ds.tags.create("three", 3)
    assert _records(db, str(uri)) == [(v, _final(v)) for v in (1, 2, 3, 4)]
    assert _versions_dir(uri) == sorted(ManifestNamingScheme.V2.manifest_name(v) for v in (1, 2, 3, 4))
    direct = lance_ops.dataset(uri)
    assert direct.versions() == ds.versions()
    assert direct.to_table() == ds.to_table() == _table(10)
    assert lance_ops.dataset(uri, version="three", manifest_store=store).count_rows() == 13
    commit = lance_ops.LanceDataset.commit(
        uri, lance_ops.LanceOperation.ReserveFragments(2), read_version=4, manifest_store=store
    )
    assert commit.version == 5 and _records(db, str(uri))[-1] == (5, _final(5))


def test_every_committing_operation_goes_through_the_store(tmp_path: Path) -> None:
    """Each operation that commits, called on a dataset opened through the store (or given it),
    claims its version in the store: the store's records equal the versions a direct listing sees."""
    from lance_ops.ops import encodings  # noqa: PLC0415
    from lance_ops.optimize import Compaction, CompactionOptions  # noqa: PLC0415

    uri, db = tmp_path / "ds", tmp_path / "m.db"
    store = SqliteManifestStore(db)
    rows = pa.table({"a": pa.array(range(40), pa.int64()), "b": [str(i) for i in range(40)]})
    lance_ops.write_dataset(rows, uri, manifest_store=store, max_rows_per_file=10)
    ds = lance_ops.dataset(uri, manifest_store=store)
    assert ds.manifest_store is store
    steps = {
        "append to an open dataset": lambda: lance_ops.write_dataset(rows, ds, mode="append"),
        "append": lambda: lance_ops.write_dataset(rows, uri, mode="append", manifest_store=store),
        "delete": lambda: ds.delete("a < 5"),
        "add_columns": lambda: ds.add_columns({"c": "a * 2"}),
        "drop_columns": lambda: ds.drop_columns(["c"]),
        "alter_columns": lambda: ds.alter_columns({"path": "b", "name": "bb"}),
        "update_config": lambda: ds.update_config({"k": "v"}),
        "delete_config_keys": lambda: ds.delete_config_keys(["k"]),
        "update_metadata": lambda: ds.update_metadata({"m": "1"}),
        "update_schema_metadata": lambda: ds.update_schema_metadata({"m": "1"}),
        "update_field_metadata": lambda: ds.update_field_metadata({"a": {"x": "y"}}),
        "compact_files": lambda: ds.optimize.compact_files(target_rows_per_fragment=1000),
        "stats.rebuild": lambda: ds.stats.rebuild(force=True),
        "restore": lambda: ds.checkout_version(2).restore(),
        "commit on an open dataset": lambda: lance_ops.LanceDataset.commit(
            ds, lance_ops.LanceOperation.ReserveFragments(1), read_version=ds.latest_version
        ),
        "append 2": lambda: lance_ops.write_dataset(rows, ds, mode="append", max_rows_per_file=10),
        "distributed compaction": lambda: Compaction.commit(
            ds, [task.execute(ds) for task in Compaction.plan(ds, CompactionOptions(999)).tasks]
        ),
        "encoding plan": lambda: encodings.store_plan(
            ds._files, encodings.profile(ds._files), ds._commit_options()
        ),
        "overwrite": lambda: lance_ops.write_dataset(rows, uri, mode="overwrite", manifest_store=store),
    }
    for name, step in steps.items():
        before = lance_ops.dataset(uri).latest_version
        step()
        direct = [v["version"] for v in lance_ops.dataset(uri).versions()]
        assert direct[-1] > before, name
        assert _records(db, str(uri)) == [(v, _final(v)) for v in direct], name
        ds = lance_ops.dataset(uri, manifest_store=store)


@pytest.mark.interop
def test_pylance_reads_a_dataset_committed_through_the_store(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    uri = tmp_path / "ds"
    store = SqliteManifestStore(tmp_path / "m.db")
    lance_ops.write_dataset(_table(10), uri, manifest_store=store)
    lance_ops.write_dataset(_table(5, 10), uri, mode="append", manifest_store=store)
    theirs = lance_module.dataset(str(uri))
    assert (
        theirs.version == 2 and theirs.to_table() == lance_ops.dataset(uri, manifest_store=store).to_table()
    )
    # A dataset pylance wrote can be continued through the store (it starts out empty for it).
    lance_module.write_dataset(_table(1, 99), str(uri), mode="append")
    ds = lance_ops.write_dataset(_table(1, 100), uri, mode="append", manifest_store=store)
    assert ds.version == 4 and lance_module.dataset(str(uri)).count_rows() == 17


_KILLED_WRITER = """
import os, signal, sys
import pyarrow as pa
import lance_ops
from lance_ops.table import manifest_store

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

manifest_store._finalise = die
store = lance_ops.SqliteManifestStore(sys.argv[2])
lance_ops.write_dataset(pa.table({"id": pa.array([7, 8, 9], pa.int64())}), sys.argv[1], mode="append",
                        manifest_store=store)
"""


def _run(script: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env)


def test_writer_killed_between_claim_and_copy_is_repaired(tmp_path: Path) -> None:
    uri, db = tmp_path / "ds", tmp_path / "m.db"
    store = SqliteManifestStore(db)
    lance_ops.write_dataset(_table(10), uri, manifest_store=store)
    assert _run(_KILLED_WRITER, str(uri), str(db)).wait() == -9
    records = _records(db, str(uri))
    assert records[-1][0] == 2 and records[-1][1].startswith(_final(2) + "-")
    # Readers that bypass the store lag by the claimed version ...
    assert lance_ops.dataset(uri).version == 1
    # ... the next reader through the store finishes the commit.
    ds = lance_ops.dataset(uri, manifest_store=store)
    assert ds.version == 2 and ds.count_rows() == 13
    assert _records(db, str(uri))[-1] == (2, _final(2))
    assert _versions_dir(uri) == sorted(ManifestNamingScheme.V2.manifest_name(v) for v in (1, 2))
    assert lance_ops.dataset(uri).version == 2


def test_cleanup_keeps_a_claim_awaiting_repair(tmp_path: Path) -> None:
    """A cleanup that bypasses the store (delete_unverified, everything old) leaves the staging
    manifest of a claimed version alone, so the next reader through the store can finish it."""
    uri, db = tmp_path / "ds", tmp_path / "m.db"
    store = SqliteManifestStore(db)
    lance_ops.write_dataset(_table(10), uri, manifest_store=store)
    lance_ops.write_dataset(_table(5, 10), uri, mode="append", manifest_store=store)
    assert _run(_KILLED_WRITER, str(uri), str(db)).wait() == -9
    staged = _records(db, str(uri))[-1][1]
    stats = lance_ops.dataset(uri).cleanup_old_versions(retain_versions=1, delete_unverified=True)
    assert stats.old_versions == 1 and staged not in stats.paths
    assert (uri / staged).exists()
    ds = lance_ops.dataset(uri, manifest_store=store)
    assert ds.version == 3 and ds.count_rows() == 18
    assert _versions_dir(uri) == sorted(ManifestNamingScheme.V2.manifest_name(v) for v in (2, 3))


@pytest.mark.interop
def test_a_version_taken_by_a_writer_bypassing_the_store_is_not_claimed(tmp_path: Path, lance_module) -> None:  # type: ignore[no-untyped-def]
    """pylance (no store) writes version 2 while our claim of 2 in the store is in flight: our copy
    finds another manifest at the final name, so the claim reports a loss (the commit retries on top)
    and the store's record names the manifest on disk."""
    uri, db = tmp_path / "ds", tmp_path / "m.db"
    store = SqliteManifestStore(db)
    lance_ops.write_dataset(_table(10), uri, manifest_store=store)
    ours = lance_ops.dataset(uri)
    lance_module.write_dataset(_table(1, 50), str(uri), mode="append")  # version 2, unknown to the store
    objects, root = object_store(str(uri))
    final = (uri / _final(2)).read_bytes()
    assert not stage_and_claim(objects, root, store, ManifestNamingScheme.V2.manifest_name(2), b"ours", 2)
    assert (uri / _final(2)).read_bytes() == final
    assert _records(db, str(uri))[-1] == (2, _final(2)) and store.get(str(uri), 2).size == len(final)  # type: ignore[union-attr]
    assert _versions_dir(uri) == sorted(ManifestNamingScheme.V2.manifest_name(v) for v in (1, 2))
    # A whole commit in that position lands as version 3 instead.
    appended = lance_ops.write_dataset(_table(2, 60), ours, mode="append", manifest_store=store)
    assert appended.version == 3 and lance_module.dataset(str(uri)).count_rows() == 13


def test_committer_repairs_before_claiming(tmp_path: Path) -> None:
    uri, db = tmp_path / "ds", tmp_path / "m.db"
    store = SqliteManifestStore(db)
    lance_ops.write_dataset(_table(10), uri, manifest_store=store)
    assert _run(_KILLED_WRITER, str(uri), str(db)).wait() == -9
    ds = lance_ops.LanceDataset.commit(
        uri, lance_ops.LanceOperation.ReserveFragments(1), read_version=1, manifest_store=store
    )
    assert ds.version == 3
    assert _records(db, str(uri)) == [(v, _final(v)) for v in (1, 2, 3)]
    assert lance_ops.dataset(uri).count_rows() == 13


_APPENDER = """
import sys
import pyarrow as pa
import lance_ops
uri, db, worker, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
store = lance_ops.SqliteManifestStore(db)
for i in range(n):
    start = worker * 1000 + i * 10
    rows = pa.table({"id": pa.array(range(start, start + 10), pa.int64())})
    lance_ops.write_dataset(rows, uri, mode="append", manifest_store=store)
"""


def test_concurrent_appenders_lose_no_commit(tmp_path: Path) -> None:
    uri, db = tmp_path / "ds", tmp_path / "m.db"
    store = SqliteManifestStore(db)
    lance_ops.write_dataset(_table(10), uri, manifest_store=store)
    workers, appends = 3, 6
    procs = [_run(_APPENDER, str(uri), str(db), str(w + 1), str(appends)) for w in range(workers)]
    assert [p.wait() for p in procs] == [0] * workers
    total = 1 + workers * appends
    assert _records(db, str(uri)) == [(v, _final(v)) for v in range(1, total + 1)]
    assert _versions_dir(uri) == sorted(ManifestNamingScheme.V2.manifest_name(v) for v in range(1, total + 1))
    ds = lance_ops.dataset(uri, manifest_store=store)
    ids = sorted(ds.to_table().column("id").to_pylist())
    expected = list(range(10)) + [w * 1000 + k for w in range(1, workers + 1) for k in range(appends * 10)]
    assert ids == sorted(expected)
    assert lance_ops.dataset(uri).versions() == ds.versions()


@pytest.mark.parametrize("kind", ["memory", "fsspec"])
def test_conditional_put_stores_lose_no_commit(tmp_path: Path, kind: str) -> None:
    """Object stores without a manifest store commit by conditional put (PutIfAbsentCommitHandler):
    racing appenders (threads) all land, each version exactly once."""
    uri = f"memory://commit-race/{tmp_path.name}" if kind == "memory" else f"local://{tmp_path / 'ds'}"
    # a memory:// dataset lives in the store of the handle that created it: the threads share it
    created = lance_ops.write_dataset(_table(10), uri)
    workers, appends = 4, 4
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def append(worker: int) -> None:
        barrier.wait()
        try:
            for i in range(appends):
                lance_ops.write_dataset(_table(10, worker * 1000 + i * 10), created, mode="append")
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(w + 1,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    ds = created.checkout_version(1 + workers * appends)
    assert [v["version"] for v in ds.versions()] == list(range(1, 2 + workers * appends))
    expected = list(range(10)) + [w * 1000 + k for w in range(1, workers + 1) for k in range(appends * 10)]
    assert sorted(ds.to_table().column("id").to_pylist()) == sorted(expected)
