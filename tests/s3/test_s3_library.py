"""lance_ops on a real S3 server (moto, on loopback), checked by pylance reading the same ``s3://`` URI
with the same storage-options dict (pylance's key names, taken as they are by both libraries).

Covers the library's operations, histories continued across the two implementations, freshness
(a long-lived lance_ops process sees commits made by another process and commits after them), the
conditional put (a lost race never deletes the winner's manifest), option errors and redaction.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import (
    ConditionalPutUnsupportedError,
    DatasetNotFoundError,
    InvalidOptionError,
    StorageOptionError,
    VersionNotFoundError,
)
from lance_ops.io import FsspecStore, object_store
from lance_ops.ops import write as write_module
from lance_ops.table import commit as commit_module
from tests.s3.conftest import ACCESS_KEY, SECRET_KEY, S3Location

pytestmark = [pytest.mark.s3, pytest.mark.interop]


def _table(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def _pylance(s3: S3Location, version: int | str | None = None) -> lance.LanceDataset:
    return lance.dataset(s3.uri(), version=version, storage_options=s3.storage_options)


def _ids(ds: Any, **kwargs: Any) -> list[int]:
    return sorted(ds.to_table(**kwargs).column("id").to_pylist())


def _write(s3: S3Location, data: pa.Table, **kwargs: Any) -> lance_ops.LanceDataset:
    return lance_ops.write_dataset(data, s3.uri(), storage_options=s3.storage_options, **kwargs)


def test_write_append_overwrite_read_by_pylance(s3: S3Location) -> None:
    ds = _write(s3, _table(0, 10), max_rows_per_file=4)
    assert (_pylance(s3).version, _ids(_pylance(s3))) == (1, list(range(10)))
    assert len(_pylance(s3).get_fragments()) == 3
    ds = _write(s3, _table(10, 5), mode="append")
    assert _ids(_pylance(s3)) == list(range(15))
    ds = _write(s3, _table(100, 3), mode="overwrite")
    assert ds.version == 3
    assert _ids(_pylance(s3)) == [100, 101, 102]
    assert _ids(_pylance(s3, version=2)) == list(range(15))
    assert _ids(lance_ops.dataset(s3.uri(), version=2, storage_options=s3.storage_options)) == list(range(15))


def test_delete_and_column_changes(s3: S3Location) -> None:
    ds = _write(s3, _table(0, 10))
    assert ds.delete("id < 3") == 3
    assert _ids(_pylance(s3)) == list(range(3, 10))
    ds.add_columns({"double": "id * 2"})
    assert _pylance(s3).to_table(columns=["double"]).column("double").to_pylist() == [
        i * 2 for i in range(3, 10)
    ]
    ds.alter_columns({"path": "name", "name": "label"})
    ds.drop_columns(["double"])
    theirs = _pylance(s3)
    assert theirs.schema.names == ["id", "label"]
    assert theirs.to_table().column("label").to_pylist() == [f"n{i}" for i in range(3, 10)]
    assert theirs.version == ds.version == 5


def test_compaction_with_commit_every(s3: S3Location) -> None:
    ds = _write(s3, _table(0, 12), max_rows_per_file=2)
    ds.delete("id = 5")
    metrics = ds.optimize.compact_files(target_rows_per_fragment=4, commit_every=1)
    assert metrics.fragments_removed == 6
    theirs = _pylance(s3)
    assert theirs.version == ds.version > 3  # one commit per group
    assert _ids(theirs) == [i for i in range(12) if i != 5]
    assert len(theirs.get_fragments()) == len(ds.get_fragments()) < 6


def test_tags_restore_checkout_history(s3: S3Location) -> None:
    ds = _write(s3, _table(0, 4))
    ds = _write(s3, _table(4, 4), mode="append")
    ds.tags.create("first", 1)
    assert _pylance(s3).tags.list()["first"]["version"] == 1
    assert _ids(_pylance(s3, version="first")) == [0, 1, 2, 3]
    old = ds.checkout_version("first")
    assert (old.version, _ids(old)) == (1, [0, 1, 2, 3])
    old.restore()
    assert old.version == 3
    theirs = _pylance(s3)
    assert (theirs.version, _ids(theirs)) == (3, [0, 1, 2, 3])
    assert [v["version"] for v in ds.versions()] == [v["version"] for v in theirs.versions()] == [1, 2, 3]
    assert ds.history().num_rows == 3
    _pylance(s3).tags.create("second", 2)
    assert ds.tags.get_version("second") == 2


def test_statistics_rebuild(s3: S3Location) -> None:
    ds = _write(s3, _table(0, 8), max_rows_per_file=4, page_statistics=False)
    result = ds.stats.rebuild()
    assert result.fragment_ids == (0, 1)
    assert ds.version == 2
    assert _pylance(s3).version == 2
    assert _ids(_pylance(s3)) == list(range(8))
    summary = lance_ops.dataset(s3.uri(), storage_options=s3.storage_options).stats.column_summary("id")
    assert (summary["min_value"], summary["max_value"], summary["fragments_with_statistics"]) == (0, 7, 2)


def test_cleanup_dry_run_and_real(s3: S3Location) -> None:
    ds = _write(s3, _table(0, 4))
    ds = _write(s3, _table(100, 4), mode="overwrite")
    ds = _write(s3, _table(200, 4), mode="overwrite")
    store, root = object_store(s3.uri(), s3.storage_options)
    before = {info.path for info in store.walk(root)}
    dry = ds.cleanup_old_versions(older_than=dt.timedelta(0), dry_run=True)
    assert dry.old_versions == 2 and dry.data_files_removed == 2
    assert {info.path for info in store.walk(root)} == before
    assert _ids(_pylance(s3, version=1)) == [0, 1, 2, 3]
    stats = ds.cleanup_old_versions(older_than=dt.timedelta(0))
    assert (stats.old_versions, stats.data_files_removed) == (2, 2)
    assert [v["version"] for v in _pylance(s3).versions()] == [3]
    with pytest.raises(ValueError):
        _pylance(s3, version=1)
    with pytest.raises(VersionNotFoundError):
        lance_ops.dataset(s3.uri(), version=1, storage_options=s3.storage_options)
    assert _ids(_pylance(s3)) == [200, 201, 202, 203]


def test_pylance_writes_lance_ops_continues(s3: S3Location) -> None:
    so = s3.storage_options
    lance.write_dataset(_table(0, 5), s3.uri(), storage_options=so, max_rows_per_file=2)
    lance.write_dataset(_table(5, 5), s3.uri(), storage_options=so, mode="append")
    ds = lance_ops.dataset(s3.uri(), storage_options=so)
    assert (ds.version, _ids(ds)) == (2, list(range(10)))
    ds.delete("id >= 8")
    ds = lance_ops.write_dataset(_table(20, 2), ds, mode="append")
    theirs = _pylance(s3)
    assert theirs.version == 4
    assert _ids(theirs) == [*range(8), 20, 21]
    lance.write_dataset(_table(30, 1), s3.uri(), storage_options=so, mode="append")
    assert _ids(lance_ops.dataset(s3.uri(), storage_options=so)) == [*range(8), 20, 21, 30]


_PYLANCE_APPEND = textwrap.dedent(
    """
    import json, sys
    import lance, pyarrow as pa
    uri, options, start = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    table = pa.table({"id": pa.array([start, start + 1], pa.int64()), "name": ["p0", "p1"]})
    print(lance.write_dataset(table, uri, mode="append", storage_options=options).version)
    """
)


def _append_in_another_process(s3: S3Location, start: int) -> int:
    """pylance appends two rows from a separate Python process; returns the version it committed."""
    done = subprocess.run(
        [sys.executable, "-c", _PYLANCE_APPEND, s3.uri(), json.dumps(s3.storage_options), str(start)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(done.stdout.strip())


def test_long_lived_process_sees_other_writers_and_commits_after_them(s3: S3Location) -> None:
    so = s3.storage_options
    ds = _write(s3, _table(0, 3))
    # Warm every cache this process could have: listings, the filesystem instance, manifests.
    assert lance_ops.dataset(s3.uri(), storage_options=so).versions()[-1]["version"] == 1
    assert _ids(ds) == [0, 1, 2]
    for expected in (2, 3):
        assert _append_in_another_process(s3, 100 * expected) == expected
        fresh = lance_ops.dataset(s3.uri(), storage_options=so)
        assert fresh.version == expected
        assert ds.latest_version == expected
        assert ds.checkout_version(expected).count_rows() == 3 + 2 * (expected - 1)
    # The old handle (read version 1) appends: its commit lists fresh and lands after theirs.
    ours = lance_ops.write_dataset(_table(50, 1), ds, mode="append")
    assert ours.version == 4
    theirs = _pylance(s3)
    assert theirs.version == 4
    assert _ids(theirs) == [0, 1, 2, 50, 200, 201, 300, 301]


@pytest.fixture
def s3fs_without_condition(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """s3fs seeing a 412 whose body lacks the ``Condition`` element (as several S3 servers answer):
    s3fs then raises a plain ``OSError`` instead of ``FileExistsError``."""
    import s3fs.core

    translate = s3fs.core.translate_boto_error

    def without_condition(error: BaseException, *args: Any, **kwargs: Any) -> BaseException:
        response = getattr(error, "response", None)
        if isinstance(response, dict):
            response.get("Error", {}).pop("Condition", None)
        return translate(error, *args, **kwargs)

    monkeypatch.setattr(s3fs.core, "translate_boto_error", without_condition)
    yield


def test_lost_conditional_put_never_deletes_the_winner(s3: S3Location, s3fs_without_condition: None) -> None:
    store, root = object_store(s3.uri("race"), s3.storage_options)
    assert isinstance(store, FsspecStore)
    path = store.join(root, "_versions", "1.manifest")
    assert store.put_if_absent(path, b"winner's manifest")
    assert not store.put_if_absent(path, b"loser's manifest")
    assert store.read(path) == b"winner's manifest"


def test_commit_losing_a_race_to_pylance_retries_without_deleting(
    s3: S3Location, s3fs_without_condition: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    so = s3.storage_options
    _write(s3, _table(0, 2))
    lance.write_dataset(_table(10, 2), s3.uri(), storage_options=so, mode="append")  # takes version 2
    # Until its first claim, our writer's listings miss pylance's version 2 (as a cached listing
    # did): it builds on version 1, claims version 2 and must lose that claim cleanly.
    claims: list[bool] = []
    list_versions, put_if_absent = commit_module.list_versions, FsspecStore.put_if_absent

    def stale(store: Any, root: str) -> list[commit_module.VersionEntry]:
        entries = list_versions(store, root)
        return entries if claims else entries[:1]

    def claim(self: FsspecStore, path: str, data: Any, **kwargs: Any) -> bool:
        won = put_if_absent(self, path, data, **kwargs)
        if "/_versions/" in path:
            claims.append(won)
        return won

    for module in (commit_module, write_module):
        monkeypatch.setattr(module, "list_versions", stale)
    monkeypatch.setattr(FsspecStore, "put_if_absent", claim)
    ours = lance_ops.write_dataset(_table(20, 1), s3.uri(), mode="append", storage_options=so)
    assert claims == [False, True]
    assert ours.version == 3
    assert _ids(_pylance(s3, version=2)) == [0, 1, 10, 11]  # pylance's manifest is intact
    assert _ids(_pylance(s3)) == [0, 1, 10, 11, 20]


def test_unknown_storage_option_is_a_typed_error_naming_it(s3: S3Location) -> None:
    _write(s3, _table(0, 1))
    options = {**s3.storage_options, "aws_secret_acess_key": SECRET_KEY}
    with pytest.raises(StorageOptionError, match="aws_secret_acess_key") as caught:
        lance_ops.dataset(s3.uri(), storage_options=options)
    assert isinstance(caught.value, InvalidOptionError | OSError | ValueError)
    assert SECRET_KEY not in str(caught.value)


def test_plain_http_endpoint_needs_allow_http(s3: S3Location) -> None:
    options = {k: v for k, v in s3.storage_options.items() if k != "allow_http"}
    with pytest.raises(StorageOptionError, match="allow_http"):
        lance_ops.dataset(s3.uri(), storage_options=options)


def test_pylance_environment_variables_are_fallbacks(s3: S3Location, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(s3, _table(0, 2))
    monkeypatch.setenv("AWS_ENDPOINT", s3.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert _ids(lance_ops.dataset(s3.uri(), storage_options={"aws_region": "us-east-1"})) == [0, 1]


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def test_secrets_never_in_reprs_or_errors(s3: S3Location) -> None:
    ds = _write(s3, _table(0, 2))
    store, _ = object_store(s3.uri(), s3.storage_options)
    reopened = lance_ops.dataset(s3.uri(), storage_options=s3.storage_options)
    shown = [repr(ds), str(ds), repr(store), repr(reopened)]
    failures: list[BaseException] = []
    for options, uri in (
        ({**s3.storage_options, "aws_sekret": SECRET_KEY}, s3.uri()),
        ({k: v for k, v in s3.storage_options.items() if k != "allow_http"}, s3.uri()),
        ({**s3.storage_options, "allow_http": SECRET_KEY}, s3.uri()),
        (s3.storage_options, f"{s3.uri_prefix}-missing/ds.lance"),
        (s3.storage_options, s3.uri("nothing-here.lance")),
    ):
        with pytest.raises((StorageOptionError, DatasetNotFoundError, OSError)) as caught:
            lance_ops.dataset(uri, storage_options=options)
        failures.append(caught.value)
    shown += [text for exc in failures for err in _chain(exc) for text in (str(err), repr(err))]
    assert all(SECRET_KEY not in text for text in shown)
    assert all(ACCESS_KEY not in text for text in shown[:4])


def test_store_without_conditional_put_needs_an_external_manifest_store(
    s3: S3Location, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    import s3fs

    def no_exclusive_create(self: Any, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if "x" in mode:
            raise NotImplementedError("File mode not supported")
        return open_file(self, path, mode, **kwargs)

    open_file = s3fs.S3FileSystem._open
    monkeypatch.setattr(s3fs.S3FileSystem, "_open", no_exclusive_create)
    with pytest.raises(ConditionalPutUnsupportedError, match="SqliteManifestStore"):
        _write(s3, _table(0, 2))
    with pytest.raises(ValueError):
        _pylance(s3)  # nothing was committed
    manifests = lance_ops.SqliteManifestStore(tmp_path / "manifests.db")
    ds = _write(s3, _table(0, 2), mode="overwrite", manifest_store=manifests)
    ds = lance_ops.write_dataset(_table(2, 1), ds, mode="append")
    assert ds.version == 2
    assert _ids(_pylance(s3)) == [0, 1, 2]
