"""Storage faults through an fsspec filesystem that injects them (tests/reliability/faulty_fs.py).

Transient failures are retried with bounded backoff; permanent ones surface as StorageError (a
LanceOpsError and an OSError); a failed manifest or tag write leaves nothing visible.
"""

from __future__ import annotations

import errno
import itertools
import time

import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import CommitConflictError, LanceOpsError, RetryableCommitConflictError, StorageError
from lance_ops.io import RetryPolicy, is_transient
from lance_ops.io.retry import ShortReadError
from tests.reliability.faulty_fs import Fault, install

_names = itertools.count()


@pytest.fixture()
def faulty(tmp_path):
    """``(uri, storage_options, plan)`` of a fresh 100-row dataset on the faulty filesystem."""

    def make(*faults: Fault):
        name = f"plan{next(_names)}"
        plan = install(name)
        options = {"plan": name}
        uri = f"faulty://{tmp_path}/ds"
        lance_ops.write_dataset(
            pa.table({"a": pa.array(range(100), pa.int64())}), uri, storage_options=options
        )
        plan.faults.extend(faults)
        return uri, options, plan

    return make


def _versions_on_disk(tmp_path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "ds" / "_versions").iterdir())


@pytest.mark.parametrize(
    "faults",
    [
        [Fault("cat_file", "transient", times=4)],
        [Fault("info", "transient", times=2), Fault("ls", "transient", times=2)],
        [Fault("open_xb", "transient", times=2), Fault("open_wb", "transient", times=2)],
        [Fault("rm_file", "transient", times=1)],
        [Fault("cat_file", "short", times=3, skip=1)],
        [Fault("cat_file", "slow", times=5, delay=0.02), Fault("open_xb", "slow", times=2, delay=0.05)],
        [Fault("open_xb", "lost_ack", path_contains="_versions", times=1)],
    ],
    ids=["reads", "stat-list", "opens", "delete", "short-reads", "slow", "lost-ack"],
)
def test_transient_faults_are_retried(faulty, tmp_path, faults):
    uri, options, plan = faulty(*faults)
    ds = lance_ops.dataset(uri, storage_options=options)
    assert ds.delete("a < 10") == 10
    ds.tags.create("scratch", 1)
    ds.tags.delete("scratch")
    ds.tags.create("t", ds.version)
    got = lance_ops.dataset(uri, storage_options=options)
    assert got.to_table()["a"].to_pylist() == list(range(10, 100))
    assert got.version == 2  # exactly one commit for the delete, even when its acknowledgement was lost
    assert list(got.tags.list()) == ["t"] and got.tags.list()["t"]["version"] == 2
    assert plan.fired >= 1


@pytest.mark.interop
def test_retried_dataset_agrees_with_pylance(faulty, tmp_path):
    lance = pytest.importorskip("lance")
    uri, options, _ = faulty(Fault("cat_file", "transient", times=3), Fault("open_xb", "lost_ack"))
    lance_ops.dataset(uri, storage_options=options).delete("a % 2 = 0")
    assert lance.dataset(str(tmp_path / "ds")).to_table()["a"].to_pylist() == list(range(1, 100, 2))


def test_permanent_read_error_is_typed(faulty):
    uri, options, _ = faulty(Fault("cat_file", "permanent", times=100))
    with pytest.raises(StorageError) as info:
        lance_ops.dataset(uri, storage_options=options).to_table()
    assert isinstance(info.value, OSError) and isinstance(info.value, LanceOpsError)
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.EIO


def test_transient_errors_give_up_after_bounded_attempts(faulty):
    uri, options, plan = faulty(Fault("cat_file", "transient", times=1000))
    started = time.monotonic()
    with pytest.raises(StorageError, match="still failing after 5 attempts"):
        lance_ops.dataset(uri, storage_options=options).to_table()
    assert time.monotonic() - started < 10
    assert plan.faults[0].fired == 5


def test_failed_manifest_write_leaves_no_visible_version(faulty, tmp_path):
    uri, options, _ = faulty(Fault("open_xb", "write_fail", path_contains="_versions", times=1000))
    before = _versions_on_disk(tmp_path)
    with pytest.raises(StorageError):
        lance_ops.dataset(uri, storage_options=options).delete("a < 10")
    assert _versions_on_disk(tmp_path) == before
    ds = lance_ops.dataset(uri, storage_options=options)
    assert ds.version == 1 and ds.count_rows() == 100


def test_operation_after_a_failed_manifest_write_commits_once(faulty, tmp_path):
    """write_fail raises EIO (permanent) once: the half-written manifest is gone, a rerun lands."""
    uri, options, _ = faulty(Fault("open_xb", "write_fail", path_contains="_versions", times=1))
    with pytest.raises(StorageError):
        lance_ops.dataset(uri, storage_options=options).delete("a < 10")
    ds = lance_ops.dataset(uri, storage_options=options)
    assert ds.version == 1
    assert ds.delete("a < 10") == 10
    assert lance_ops.dataset(uri, storage_options=options).version == 2


def test_failed_tag_writes_leave_old_state(faulty, tmp_path):
    uri, options, _ = faulty()
    ds = lance_ops.dataset(uri, storage_options=options)
    ds.delete("a < 5")
    ds.tags.create("keep", 1)
    install_faults = ds.tags._store.fs.plan.faults  # the store's filesystem shares the plan
    install_faults.append(Fault("open_xb", "write_fail", path_contains="_refs", times=1000))
    install_faults.append(Fault("open_wb", "write_fail", path_contains="_refs", times=1000))
    with pytest.raises(StorageError):
        ds.tags.create("new", 2)
    with pytest.raises(StorageError):
        ds.tags.update("keep", 2)
    assert sorted(p.name for p in (tmp_path / "ds" / "_refs" / "tags").iterdir()) == ["keep.json"]
    assert ds.tags.list()["keep"]["version"] == 1


def test_conflicts_are_not_storage_errors():
    # A conflict is an OSError as pylance raises it, but never a storage failure nor retried as one.
    assert not issubclass(CommitConflictError, StorageError)
    assert not is_transient(CommitConflictError("Commit conflict for version 3"))
    assert not is_transient(RetryableCommitConflictError("Commit conflict for version 3"))


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (OSError(errno.EAGAIN, "again"), True),
        (OSError(errno.ETIMEDOUT, "timeout"), True),
        (ShortReadError("short"), True),
        (OSError(errno.EIO, "io"), False),
        (OSError(errno.ENOSPC, "full"), False),
        (PermissionError(errno.EACCES, "denied"), False),
        (FileNotFoundError(errno.ENOENT, "gone"), False),
        (StorageError("gave up"), False),
        (ValueError("bad"), False),
    ],
)
def test_transient_classification(exc, transient):
    assert is_transient(exc) is transient


def test_retry_policy_backoff_is_bounded():
    policy = RetryPolicy(max_attempts=6, initial_backoff=0.1, multiplier=3, max_backoff=0.5)
    assert all(0 <= policy.backoff(n) <= min(0.5, 0.1 * 3 ** (n - 1)) for n in range(1, 7) for _ in range(20))
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError("reset")
        return "done"

    assert RetryPolicy(initial_backoff=0.001).call("op", flaky) == "done" and len(calls) == 3
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(StorageError, match="failed"):
        RetryPolicy().call("op", lambda: (_ for _ in ()).throw(OSError(errno.EIO, "io")))


@pytest.mark.interop
@pytest.mark.parametrize("failing", ["write", "link", "replace"])
def test_local_disk_failures_are_typed_and_leave_nothing(tmp_path, monkeypatch, failing) -> None:  # type: ignore[no-untyped-def]
    """A full (or failing) local disk surfaces as StorageError wherever the write fails: data file,
    manifest claim or hint; the dataset stays at its last version, readable by pylance."""
    import os as real_os

    import lance as lance_module

    from lance_ops.io import local

    uri = str(tmp_path / "ds")
    lance_ops.write_dataset(pa.table({"a": pa.array(range(10), pa.int64())}), uri)

    def full(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device")

    class FailingOs:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return full if name == failing else getattr(real_os, name)

    monkeypatch.setattr(local, "os", FailingOs())
    with pytest.raises(StorageError) as raised:
        lance_ops.write_dataset(pa.table({"a": pa.array(range(5), pa.int64())}), uri, mode="append")
    assert isinstance(raised.value, OSError) and "No space left" in str(raised.value)
    monkeypatch.undo()
    assert lance_ops.dataset(uri).count_rows() == lance_module.dataset(uri).count_rows() in (10, 15)
    partial = [p for p in tmp_path.rglob("*") if p.name.endswith(local.TEMP_SUFFIX)]
    assert partial == []
