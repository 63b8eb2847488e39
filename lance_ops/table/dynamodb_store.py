"""pylance's DynamoDB manifest store: the commit point of ``s3+ddb://bucket/ds?ddbTableName=T`` datasets.

Data files and manifests live in the S3 bucket exactly as for ``s3://bucket/ds``; the commit point is
a conditional put into DynamoDB table ``T`` (the protocol is in
:mod:`lance_ops.table.manifest_store`). lance_ops and pylance commit through the same table without
clobbering each other because both write the layout pylance 14 writes (lance's
``rust/lance-table/src/io/commit/dynamodb.rs``, checked against pylance 14.0.2 on moto):

==============  ====  ===========================================================================
attribute       type  value
==============  ====  ===========================================================================
``base_uri``    S     hash key: the dataset's key inside its bucket (``s3://bkt/a/ds`` -> ``a/ds``)
``version``     N     range key: the version number
``path``        S     the manifest's key inside the bucket: ``a/ds/_versions/{name}`` once final,
                      ``a/ds/_versions/{name}-{uuid}`` while staged
``committer``   S     who wrote the item last (claim, or finalising a claim, its own or another's):
                      pylance writes ``lancedb``, lance_ops ``lance-ops``
``size``        N     the manifest's size in bytes (pylance reads the manifest by it: exact)
``e_tag``       S     optional, written by lance only when its upload returned one (pylance 14
                      writes none to S3); lance_ops never writes it and ignores it
==============  ====  ===========================================================================

Claiming is ``PutItem`` with ``attribute_not_exists(base_uri) AND attribute_not_exists(version)``;
finalising is ``PutItem`` with ``attribute_exists(...)`` of both; reads are consistent (``GetItem``,
and ``Query`` newest-first with limit 1 for the latest). The table must exist with that key schema
(checked once per process and table, as pylance does); neither library creates it.

Configuration comes from the same storage options as the bucket, as pylance takes them:
``dynamodb_endpoint`` (else the environment variable ``DYNAMODB_ENDPOINT``, else AWS's own endpoint;
pylance does *not* fall back to ``aws_endpoint``), the credentials and region of
:mod:`lance_ops.io.options` (with the same environment fallbacks; else boto3's default chain).
boto3 comes with the ``s3`` extra. Credentials never appear in a repr or an error message; a store
pickles (to Spark executors) as its configuration and reconnects lazily.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from lance_ops.errors import CommitStoreError, CorruptFileError, StorageError, UnsupportedFeatureError
from lance_ops.io import DDB_SCHEME, split_ddb_uri
from lance_ops.io.options import fsspec_options
from lance_ops.table.manifest_store import ExternalManifestStore, ManifestRecord

__all__ = ["COMMITTER", "DynamoDBManifestStore", "manifest_store_for_uri"]

COMMITTER = "lance-ops"
ENDPOINT_OPTION = "dynamodb_endpoint"
ENDPOINT_ENV = "DYNAMODB_ENDPOINT"

_HASH_KEY = "base_uri"
_RANGE_KEY = "version"
# Placeholders, so that no attribute name can collide with a DynamoDB reserved word.
_NAMES = {"#b": _HASH_KEY, "#v": _RANGE_KEY}
_CONDITION_FAILED = "ConditionalCheckFailedException"


@dataclass(frozen=True)
class Connection:
    """Where and as whom to reach DynamoDB. Secrets are left out of the repr."""

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_storage_options(cls, storage_options: Mapping[str, Any] | None) -> Connection:
        """The connection pylance would use for these options (see the module docstring)."""
        s3 = fsspec_options("s3", storage_options)
        region = (s3.get("client_kwargs") or {}).get("region_name")
        endpoint = (storage_options or {}).get(ENDPOINT_OPTION) or os.environ.get(ENDPOINT_ENV) or None
        return cls(
            endpoint=None if endpoint is None else str(endpoint),
            region=None if region is None else str(region),
            access_key_id=s3.get("key"),
            secret_access_key=s3.get("secret"),
            session_token=s3.get("token"),
        )


_clients: dict[Connection, Any] = {}
_checked_tables: set[tuple[Connection, str]] = set()
_lock = threading.Lock()


def _client(connection: Connection) -> Any:
    """One boto3 DynamoDB client per connection and process (clients are thread-safe)."""
    with _lock:
        client = _clients.get(connection)
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError as exc:
                raise UnsupportedFeatureError(
                    f"{DDB_SCHEME}:// needs boto3: pip install 'lance-ops[s3]'"
                ) from exc
            session = boto3.session.Session(
                aws_access_key_id=connection.access_key_id,
                aws_secret_access_key=connection.secret_access_key,
                aws_session_token=connection.session_token,
                region_name=connection.region,
            )
            try:
                client = session.client(
                    "dynamodb",
                    endpoint_url=connection.endpoint,
                    config=Config(retries={"mode": "standard", "max_attempts": 5}),
                )
            except Exception as exc:  # botocore's NoRegionError, invalid endpoint, ...
                raise StorageError(f"cannot connect to DynamoDB ({type(exc).__name__}: {exc})") from None
            _clients[connection] = client
        return client


class DynamoDBManifestStore(ExternalManifestStore):
    """The external manifest store in DynamoDB table ``table_name``, in pylance's layout.

    ``base_uri`` arguments are store paths of dataset roots (``bucket/key``); items are keyed by the
    key inside the bucket, as pylance keys them. Record paths are relative to the root.
    """

    def __init__(
        self, table_name: str, connection: Connection | None = None, committer: str = COMMITTER
    ) -> None:
        self.table_name = table_name
        self.connection = connection or Connection()
        self.committer = committer
        self._check_table()

    def __repr__(self) -> str:
        return f"DynamoDBManifestStore({self.table_name!r}, endpoint={self.connection.endpoint!r})"

    def _call(self, action: str, **kwargs: Any) -> Any:
        """``client.action(TableName=..., **kwargs)``; failures become StorageError naming the table."""
        from botocore.exceptions import BotoCoreError, ClientError

        client = _client(self.connection)
        try:
            return getattr(client, action)(TableName=self.table_name, **kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == _CONDITION_FAILED:
                raise
            error = exc.response.get("Error", {})
            if error.get("Code") == "ResourceNotFoundException":
                raise CommitStoreError(f"DynamoDB table {self.table_name!r} does not exist") from None
            raise StorageError(
                f"DynamoDB table {self.table_name!r}: {action} failed: "
                f"{error.get('Code', 'error')}: {error.get('Message', '')}"
            ) from None
        except BotoCoreError as exc:
            raise StorageError(f"DynamoDB table {self.table_name!r}: {action} failed: {exc}") from None

    def _check_table(self) -> None:
        """Refuse a table whose key schema is not pylance's (once per process, connection and table)."""
        marker = (self.connection, self.table_name)
        if marker in _checked_tables:
            return
        keys = {
            (k["AttributeName"], k["KeyType"])
            for k in self._call("describe_table")["Table"].get("KeySchema", [])
        }
        if keys != {(_HASH_KEY, "HASH"), (_RANGE_KEY, "RANGE")}:
            raise CommitStoreError(
                f"DynamoDB table {self.table_name!r} must have the hash key {_HASH_KEY!r} and the range "
                f"key {_RANGE_KEY!r} (found {sorted(keys)})"
            )
        with _lock:
            _checked_tables.add(marker)

    # ------------------------------------------------------------------ keys and items

    @staticmethod
    def _dataset_key(root: str) -> str:
        """The dataset's key inside its bucket (pylance's ``base_uri``)."""
        return root.strip("/").partition("/")[2]

    def _key(self, root: str, version: int) -> dict[str, dict[str, str]]:
        return {_HASH_KEY: {"S": self._dataset_key(root)}, _RANGE_KEY: {"N": str(version)}}

    def _record(self, root: str, item: Mapping[str, Any]) -> ManifestRecord:
        dataset_key = self._dataset_key(root)
        try:
            version = int(item[_RANGE_KEY]["N"])
            path = str(item["path"]["S"])
        except (KeyError, TypeError, ValueError):
            raise CorruptFileError(
                f"dynamodb://{self.table_name}/{dataset_key}", "item without a numeric version and a path"
            ) from None
        prefix = f"{dataset_key}/" if dataset_key else ""
        if not path.startswith(prefix):
            raise CorruptFileError(path, f"version {version} of {dataset_key!r} names a manifest elsewhere")
        size = item.get("size", {}).get("N")
        return ManifestRecord(version, path[len(prefix) :], int(size) if size is not None else 0)

    def _item(self, root: str, version: int, path: str, size: int) -> dict[str, dict[str, str]]:
        dataset_key = self._dataset_key(root)
        return {
            **self._key(root, version),
            "path": {"S": f"{dataset_key}/{path}" if dataset_key else path},
            "committer": {"S": self.committer},
            "size": {"N": str(size)},
        }

    def _put(self, item: dict[str, dict[str, str]], condition: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._call("put_item", Item=item, ConditionExpression=condition, ExpressionAttributeNames=_NAMES)
        except ClientError:  # only the failed condition is re-raised by _call
            return False
        return True

    # ------------------------------------------------------------------ ExternalManifestStore

    def get(self, base_uri: str, version: int) -> ManifestRecord | None:
        answer = self._call("get_item", Key=self._key(base_uri, version), ConsistentRead=True)
        item = answer.get("Item")
        return None if item is None else self._record(base_uri, item)

    def get_latest(self, base_uri: str) -> ManifestRecord | None:
        answer = self._call(
            "query",
            KeyConditionExpression="#b = :b",
            ExpressionAttributeNames={"#b": _HASH_KEY},
            ExpressionAttributeValues={":b": {"S": self._dataset_key(base_uri)}},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = answer.get("Items") or []
        return self._record(base_uri, items[0]) if items else None

    def put_if_not_exists(self, base_uri: str, version: int, path: str, size: int) -> bool:
        return self._put(
            self._item(base_uri, version, path, size), "attribute_not_exists(#b) AND attribute_not_exists(#v)"
        )

    def put_if_exists(self, base_uri: str, version: int, path: str, size: int) -> bool:
        return self._put(
            self._item(base_uri, version, path, size), "attribute_exists(#b) AND attribute_exists(#v)"
        )


def manifest_store_for_uri(
    uri: str | os.PathLike[str], storage_options: Mapping[str, Any] | None
) -> DynamoDBManifestStore | None:
    """The store an ``s3+ddb://`` URI commits through (None for every other URI)."""
    text = os.fspath(uri)
    if "://" not in text or urlsplit(text).scheme.lower() != DDB_SCHEME:
        return None
    return DynamoDBManifestStore(split_ddb_uri(text)[1], Connection.from_storage_options(storage_options))
