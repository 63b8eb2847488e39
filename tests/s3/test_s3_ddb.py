"""``s3+ddb://`` datasets: lance_ops and pylance committing through the same DynamoDB table (moto).

moto's server answers DynamoDB on the same loopback endpoint as S3; every test creates its own table
with pylance's key schema and passes the endpoint as pylance takes it (``dynamodb_endpoint``).
Covers histories continued across the two libraries, the table's items against pylance's own, a
version claimed but not finished (repaired by either library), commits racing from both libraries,
and errors (URI, missing table, wrong key schema) that never show credentials.
"""

from __future__ import annotations

import pickle
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import InvalidArgumentError, StorageError
from lance_ops.table import manifest_store as manifest_store_module
from lance_ops.table.dynamodb_store import Connection, DynamoDBManifestStore
from lance_ops.table.naming import ManifestNamingScheme
from tests.s3.conftest import ACCESS_KEY, SECRET_KEY, DdbLocation

pytestmark = [pytest.mark.s3, pytest.mark.interop]


def _table(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def _ids(ds: Any) -> list[int]:
    return sorted(ds.to_table().column("id").to_pylist())


def _pylance(ddb: DdbLocation, version: int | None = None) -> lance.LanceDataset:
    return lance.dataset(ddb.uri(), version=version, storage_options=ddb.storage_options)


def test_history_continued_across_libraries(ddb: DdbLocation) -> None:
    ours = lance_ops.write_dataset(_table(0, 5), ddb.uri(), storage_options=ddb.storage_options)
    assert isinstance(ours.manifest_store, DynamoDBManifestStore)
    assert (_pylance(ddb).version, _ids(_pylance(ddb))) == (1, list(range(5)))

    theirs = lance.write_dataset(_table(5, 3), ddb.uri(), mode="append", storage_options=ddb.storage_options)
    assert theirs.version == 2
    ours = lance_ops.dataset(ddb.uri(), storage_options=ddb.storage_options)
    assert (ours.version, _ids(ours)) == (2, list(range(8)))

    ours = lance_ops.write_dataset(_table(8, 2), ours, mode="append")
    ours.delete("id = 0")
    theirs = _pylance(ddb)
    assert (theirs.version, _ids(theirs)) == (4, list(range(1, 10)))
    assert _ids(_pylance(ddb, version=2)) == list(range(8))
    assert [v["version"] for v in theirs.versions()] == [1, 2, 3, 4]
    assert [int(item["version"]["N"]) for item in ddb.items()] == [1, 2, 3, 4]


def test_items_have_pylance_layout(ddb: DdbLocation) -> None:
    lance_ops.write_dataset(_table(0, 3), ddb.uri(), storage_options=ddb.storage_options)
    lance.write_dataset(_table(3, 3), ddb.uri(), mode="append", storage_options=ddb.storage_options)
    ours, theirs = ddb.items()
    assert set(ours) == set(theirs) == {"base_uri", "version", "path", "committer", "size"}
    for item, version, committer in ((ours, 1, "lance-ops"), (theirs, 2, "lancedb")):
        assert {name: next(iter(value)) for name, value in item.items()} == {
            "base_uri": "S",
            "version": "N",
            "path": "S",
            "committer": "S",
            "size": "N",
        }
        path = f"sub/ds.lance/_versions/{ManifestNamingScheme.V2.manifest_name(version)}"
        assert item["base_uri"]["S"] == "sub/ds.lance"
        assert item["path"]["S"] == path
        assert item["committer"]["S"] == committer
        assert int(item["size"]["N"]) == ddb.object_size(path)
    # No staging copies are left behind.
    assert not [key for key in ddb.keys() if ".manifest-" in key]


def _claim_without_finishing(ddb: DdbLocation, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commit version 2 with lance_ops, stopping (as if killed) right after the claim in DynamoDB."""

    def killed(*args: Any) -> bool:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(manifest_store_module, "_finalise", killed)
        with pytest.raises(KeyboardInterrupt):
            lance_ops.write_dataset(
                _table(3, 2), ddb.uri(), mode="append", storage_options=ddb.storage_options
            )
    latest = ddb.items()[-1]
    assert latest["version"]["N"] == "2" and not latest["path"]["S"].endswith(".manifest")
    assert latest["path"]["S"] in ddb.keys()


@pytest.mark.parametrize("reader", ["pylance", "lance_ops"])
def test_claimed_but_unfinished_version_is_repaired(
    ddb: DdbLocation, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    lance_ops.write_dataset(_table(0, 3), ddb.uri(), storage_options=ddb.storage_options)
    _claim_without_finishing(ddb, monkeypatch)
    if reader == "pylance":
        ds: Any = _pylance(ddb)
    else:
        ds = lance_ops.dataset(ddb.uri(), storage_options=ddb.storage_options)
    assert (ds.version, _ids(ds)) == (2, list(range(5)))
    final = f"sub/ds.lance/_versions/{ManifestNamingScheme.V2.manifest_name(2)}"
    assert ddb.items()[-1]["path"]["S"] == final
    assert not [key for key in ddb.keys() if ".manifest-" in key]
    assert final in ddb.keys()
    # The other library continues the history.
    lance.write_dataset(_table(5, 1), ddb.uri(), mode="append", storage_options=ddb.storage_options)
    ours = lance_ops.write_dataset(
        _table(6, 1), ddb.uri(), mode="append", storage_options=ddb.storage_options
    )
    assert (ours.version, _ids(_pylance(ddb))) == (4, list(range(7)))


def test_concurrent_commits_from_both_libraries_lose_nothing(ddb: DdbLocation) -> None:
    lance_ops.write_dataset(_table(0, 1), ddb.uri(), storage_options=ddb.storage_options)
    writers = 3
    barrier = threading.Barrier(2 * writers)

    def ours(i: int) -> None:
        barrier.wait(timeout=60)
        lance_ops.write_dataset(
            _table(100 + i, 1), ddb.uri(), mode="append", storage_options=ddb.storage_options
        )

    def theirs(i: int) -> None:
        barrier.wait(timeout=60)
        lance.write_dataset(_table(200 + i, 1), ddb.uri(), mode="append", storage_options=ddb.storage_options)

    jobs: list[tuple[Callable[[int], None], int]] = [(f, i) for i in range(writers) for f in (ours, theirs)]
    with ThreadPoolExecutor(max_workers=2 * writers) as pool:
        for future in [pool.submit(f, i) for f, i in jobs]:
            future.result(timeout=300)

    expected = [0, *range(100, 100 + writers), *range(200, 200 + writers)]
    assert _ids(_pylance(ddb)) == expected
    assert _ids(lance_ops.dataset(ddb.uri(), storage_options=ddb.storage_options)) == expected
    items = ddb.items()
    assert [int(item["version"]["N"]) for item in items] == list(range(1, 2 + 2 * writers))
    assert all(item["path"]["S"].endswith(".manifest") for item in items)
    # The committer is whoever wrote the item last: a reader finishing another's claim rewrites it.
    assert {item["committer"]["S"] for item in items} <= {"lance-ops", "lancedb"}


def test_uri_and_table_errors_never_show_credentials(ddb: DdbLocation) -> None:
    options = ddb.storage_options
    with pytest.raises(InvalidArgumentError, match="ddbTableName"):
        lance_ops.dataset(f"s3+ddb://{ddb.s3.bucket}/ds", storage_options=options)
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        lance_ops.dataset(f"s3+ddb://{ddb.s3.bucket}/ds?ddbTableName=", storage_options=options)
    missing = f"s3+ddb://{ddb.s3.bucket}/ds?ddbTableName=no-such-table"
    with pytest.raises(StorageError, match="no-such-table") as caught:
        lance_ops.write_dataset(_table(0, 1), missing, storage_options=options)
    assert SECRET_KEY not in str(caught.value) and ACCESS_KEY not in str(caught.value)

    wrong = f"lance-ops-wrong-{uuid.uuid4().hex[:8]}"
    ddb.client.create_table(
        TableName=wrong,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    with pytest.raises(StorageError, match="hash key 'base_uri'"):
        lance_ops.dataset(ddb.uri().replace(ddb.table, wrong), storage_options=options)

    store = DynamoDBManifestStore(ddb.table, Connection.from_storage_options(options))
    assert SECRET_KEY not in repr(store) and ACCESS_KEY not in repr(store)
    assert SECRET_KEY not in repr(store.connection)
    copy = pickle.loads(pickle.dumps(store))
    assert copy.get_latest(f"{ddb.s3.bucket}/sub/ds.lance") is None


def test_settings_from_the_environment(ddb: DdbLocation, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every option given as the environment variable both libraries read instead (no options dict)."""
    for key, value in ddb.storage_options.items():
        monkeypatch.setenv("AWS_ALLOW_HTTP" if key == "allow_http" else key.upper(), value)
    ours = lance_ops.write_dataset(_table(0, 2), ddb.uri())
    assert isinstance(ours.manifest_store, DynamoDBManifestStore)
    assert ours.manifest_store.connection.endpoint == ddb.s3.endpoint
    theirs = lance.write_dataset(_table(2, 2), ddb.uri(), mode="append")
    assert (theirs.version, _ids(lance_ops.dataset(ddb.uri()))) == (2, [0, 1, 2, 3])
    assert [item["committer"]["S"] for item in ddb.items()] == ["lance-ops", "lancedb"]
