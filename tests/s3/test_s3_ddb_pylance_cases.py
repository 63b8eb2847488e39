"""The scenarios of pylance's own S3 / DynamoDB integration tests, run by both libraries (moto).

pylance checks its ``s3+ddb://`` commit path and its storage options in
``python/python/tests/test_s3_ddb.py`` (create and append with options given as a dict or as
environment variables, "already exists", checkout of every version and of one that does not exist,
racing appends from threads, a plain ``s3://`` write, a distributed commit through the table, the
file writer and reader, a fragment created on S3, dropping a dataset) and, in lance's Rust tests of
the DynamoDB store, the repair of a version that was claimed but not finished. Every scenario here
runs once with ``module = lance`` and once with ``module = lance_ops``, against the same moto
server, and lance_ops must come out as pylance does: the same data and history, and on failure an
exception that is an instance of the builtin class pylance raises (and a ``LanceOpsError``).

Where pylance's test relies on a quirk, the scenario keeps its intent: its "more than five" race
sizes its start barrier larger than its thread pool, so every thread fails on the broken barrier;
here every writer starts together and the outcome is checked (versions = successful commits + 1).
Its distributed commit writes fragments under one dataset and commits them to another; here they
are committed where they were written, so the rows can be read back.

pylance 14.0.2's wheel runs every scenario against moto.
"""

from __future__ import annotations

import threading
import types
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import lance
import lance.file
import lance.fragment
import pyarrow as pa
import pytest

import lance_ops
import lance_ops.file
import lance_ops.fragment
from lance_ops.errors import CommitConflictError, LanceOpsError
from lance_ops.table.naming import ManifestNamingScheme
from tests.s3.conftest import DdbLocation, S3Location, _client

pytestmark = [pytest.mark.s3, pytest.mark.interop]

START_SECONDS = 60.0


@pytest.fixture(params=["lance", "lance_ops"])
def module(request: pytest.FixtureRequest) -> types.ModuleType:
    """The library running the scenario."""
    return lance if request.param == "lance" else lance_ops


def _uri(ddb: DdbLocation, name: str | None = None) -> str:
    return ddb.uri(name or uuid.uuid4().hex)


def _options_in_environment(ddb: DdbLocation, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every option as the environment variable of its upper-cased key, as pylance's tests set them."""
    for key, value in ddb.storage_options.items():
        monkeypatch.setenv(key.upper(), value)


def _raises(module: types.ModuleType, builtin: type[BaseException], call: Callable[[], object]) -> None:
    """``call`` raises ``builtin`` (pylance's class); a lance_ops error is also a ``LanceOpsError``."""
    with pytest.raises(builtin) as caught:
        call()
    if module is lance_ops:
        assert isinstance(caught.value, LanceOpsError), repr(caught.value)


def _is_conflict(module: types.ModuleType, exc: BaseException) -> bool:
    if module is lance_ops:
        return isinstance(exc, CommitConflictError)
    return isinstance(exc, OSError) and "conflict" in str(exc).lower()


@pytest.mark.parametrize("use_env", [True, False])
def test_create_append_and_checkout(
    ddb: DdbLocation,
    module: types.ModuleType,
    use_env: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options: dict[str, str] | None = ddb.storage_options
    if use_env:
        _options_in_environment(ddb, monkeypatch)
        options = None
    uri = _uri(ddb)
    ds = module.write_dataset(pa.table({"a": [1, 10], "b": [2, 20]}), uri, storage_options=options)
    assert len(ds.versions()) == 1

    more = pa.table({"a": [100], "b": [2000]})
    _raises(module, OSError, lambda: module.write_dataset(more, uri, storage_options=options))
    ds = module.write_dataset(more, uri, mode="append", storage_options=options)
    assert (len(ds.versions()), ds.count_rows()) == (2, 3)

    assert ds.checkout_version(1).count_rows() == 2
    assert ds.checkout_version(2).count_rows() == 3
    _raises(module, ValueError, lambda: ds.checkout_version(3))
    # The other library reads the same history.
    other = lance_ops if module is lance else lance
    history = other.dataset(uri, storage_options=ddb.storage_options).versions()
    assert [v["version"] for v in history] == [1, 2]
    assert [int(item["version"]["N"]) for item in ddb.items(uri.split("/", 3)[3].split("?")[0])] == [1, 2]


def _race(writers: int, write: Callable[[int], object]) -> list[BaseException]:
    """Run ``write(i)`` for every writer at once (a barrier); the exceptions of those that failed."""
    barrier = threading.Barrier(writers, timeout=START_SECONDS)

    def started(i: int) -> object:
        barrier.wait()
        return write(i)

    with ThreadPoolExecutor(max_workers=writers) as pool:
        futures = [pool.submit(started, i) for i in range(writers)]
        return [exc for exc in (f.exception(timeout=300) for f in futures) if exc is not None]


def test_concurrent_appends(ddb: DdbLocation, module: types.ModuleType) -> None:
    uri = _uri(ddb)
    options = ddb.storage_options
    module.write_dataset(pa.table({"a": [-1]}), uri, storage_options=options)
    failures = _race(
        5, lambda i: module.write_dataset(pa.table({"a": [i]}), uri, mode="append", storage_options=options)
    )
    assert failures == []
    ds = module.dataset(uri, storage_options=options)
    assert (len(ds.versions()), ds.count_rows()) == (6, 6)
    assert sorted(ds.to_table().column("a").to_pylist()) == [-1, 0, 1, 2, 3, 4]


def test_more_than_five_concurrent_appends(ddb: DdbLocation, module: types.ModuleType) -> None:
    uri = _uri(ddb)
    options = ddb.storage_options
    table = pa.table({"a": [1, 10], "b": [2, 20]})
    module.write_dataset(table, uri, storage_options=options)
    writers = 10
    failures = _race(
        writers, lambda i: module.write_dataset(table, uri, mode="append", storage_options=options)
    )
    assert all(_is_conflict(module, exc) for exc in failures), failures
    versions = writers - len(failures) + 1
    ds = module.dataset(uri, storage_options=options)
    assert (len(ds.versions()), ds.count_rows()) == (versions, 2 * versions)
    history = lance.dataset(uri, storage_options=options).versions()
    assert [v["version"] for v in history] == list(range(1, versions + 1))


def test_plain_s3_without_dynamodb(s3: S3Location, module: types.ModuleType) -> None:
    data = pa.table({"x": [1, 2, 3]})
    ds = module.write_dataset(data, s3.uri("unsafe"), storage_options=s3.storage_options)
    assert (len(ds.versions()), ds.count_rows()) == (1, 3)
    assert ds.to_table() == data


def test_distributed_commit(ddb: DdbLocation, module: types.ModuleType) -> None:
    uri = _uri(ddb)
    schema = pa.schema([pa.field("a", pa.int64())])
    data = pa.table({"a": pa.array(range(1024), pa.int64())})
    fragments = module.fragment.write_fragments(data, uri, storage_options=ddb.storage_options)
    operation = module.LanceOperation.Overwrite(schema, fragments)
    ds = module.LanceDataset.commit(uri, operation, storage_options=ddb.storage_options)
    assert ds.count_rows() == 1024
    assert lance.dataset(uri, storage_options=ddb.storage_options).to_table() == data
    assert [int(item["version"]["N"]) for item in ddb.items(uri.split("/", 3)[3].split("?")[0])] == [1]


def test_file_writer_and_reader(s3: S3Location, module: types.ModuleType) -> None:
    table = pa.table({"a": [1, 2, 3]})
    path = s3.uri("foo.lance")
    text = b"hello"
    with module.file.LanceFileWriter(path, storage_options=s3.storage_options) as writer:
        writer.write_batch(table)
        position = writer.add_global_buffer(text)
    reader = module.file.LanceFileReader(path, storage_options=s3.storage_options)
    assert reader.read_all().to_table() == table
    assert reader.metadata().global_buffers[position].size == len(text)
    assert bytes(reader.read_global_buffer(position)) == text
    other = lance.file if module is lance_ops else lance_ops.file
    assert other.LanceFileReader(path, storage_options=s3.storage_options).read_all().to_table() == table


def test_fragment_created_on_s3(s3: S3Location, module: types.ModuleType) -> None:
    table = pa.table({"a": [1, 2], "b": ["a", "b"]})
    fragment = module.LanceFragment.create(s3.uri("append.lance"), table, storage_options=s3.storage_options)
    assert fragment.physical_rows == 2


def test_drop(s3: S3Location, module: types.ModuleType) -> None:
    uri = s3.uri(f"{uuid.uuid4().hex}.lance")
    module.write_dataset(pa.table({"x": [0]}), uri, storage_options=s3.storage_options).validate()
    module.LanceDataset.drop(uri, storage_options=s3.storage_options)
    _raises(module, ValueError, lambda: module.dataset(uri, storage_options=s3.storage_options))


def _make_latest_dirty(ddb: DdbLocation, key: str, version: int) -> str:
    """Leave ``version`` as a writer killed between claim and copy leaves it: the item names a staged
    copy (``{final}-{uuid}``) and the final manifest is not there. Returns the final key."""
    s3 = _client(ddb.s3, "s3")
    final = f"{key}/_versions/{ManifestNamingScheme.V2.manifest_name(version)}"
    staged = f"{final}-{uuid.uuid4()}"
    s3.copy_object(Bucket=ddb.s3.bucket, Key=staged, CopySource={"Bucket": ddb.s3.bucket, "Key": final})
    s3.delete_object(Bucket=ddb.s3.bucket, Key=final)
    item = ddb.items(key)[version - 1]
    ddb.client.put_item(TableName=ddb.table, Item={**item, "path": {"S": staged}})
    return final


def test_claimed_but_unfinished_version_is_recovered(ddb: DdbLocation, module: types.ModuleType) -> None:
    key = uuid.uuid4().hex
    uri = _uri(ddb, key)
    options = ddb.storage_options
    for start in range(3):
        module.write_dataset(pa.table({"a": [start]}), uri, mode="append", storage_options=options)
    final = _make_latest_dirty(ddb, key, 3)

    ds = module.dataset(uri, storage_options=options)
    assert (ds.version, sorted(ds.to_table().column("a").to_pylist())) == (3, [0, 1, 2])
    assert ddb.items(key)[-1]["path"]["S"] == final
    assert final in ddb.keys(f"{key}/_versions/")
    assert not [k for k in ddb.keys(f"{key}/_versions/") if ".manifest-" in k]
    ds = module.write_dataset(pa.table({"a": [3]}), uri, mode="append", storage_options=options)
    assert ds.version == 4
    assert [int(item["version"]["N"]) for item in ddb.items(key)] == [1, 2, 3, 4]


def _bad_uri(ddb: DdbLocation, case: str) -> str:
    """A URI that cannot be committed through: its query, its table or its table's key schema."""
    bucket = ddb.s3.bucket
    if case == "no table name":
        return f"s3+ddb://{bucket}/ds"
    if case == "empty table name":
        return f"s3+ddb://{bucket}/ds?ddbTableName="
    if case == "missing table":
        return f"s3+ddb://{bucket}/ds?ddbTableName=no-such-table-{uuid.uuid4().hex[:8]}"
    wrong = f"lance-ops-wrong-{uuid.uuid4().hex[:8]}"
    ddb.client.create_table(
        TableName=wrong,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return f"s3+ddb://{bucket}/ds?ddbTableName={wrong}"


# What pylance 14.0.2 raises (checked by the ``lance`` runs): writes report these as I/O errors,
# opening a dataset as a ValueError.
BAD_URI_ERRORS = {
    ("no table name", "write"): OSError,
    ("no table name", "open"): ValueError,
    ("empty table name", "write"): OSError,
    ("empty table name", "open"): ValueError,
    ("missing table", "write"): OSError,
    ("missing table", "open"): ValueError,
    ("wrong key schema", "write"): OSError,
    ("wrong key schema", "open"): ValueError,
}


@pytest.mark.parametrize("case, action", sorted(BAD_URI_ERRORS))
def test_bad_uri_or_table(ddb: DdbLocation, module: types.ModuleType, case: str, action: str) -> None:
    uri = _bad_uri(ddb, case)
    options = ddb.storage_options
    if action == "write":
        _raises(
            module,
            BAD_URI_ERRORS[case, action],
            lambda: module.write_dataset(pa.table({"a": [1]}), uri, storage_options=options),
        )
    else:
        _raises(module, BAD_URI_ERRORS[case, action], lambda: module.dataset(uri, storage_options=options))


def test_missing_dataset(ddb: DdbLocation, module: types.ModuleType) -> None:
    _raises(module, ValueError, lambda: module.dataset(_uri(ddb), storage_options=ddb.storage_options))
