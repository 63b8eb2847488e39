"""Storage access for the file and table layers: ``object_store(uri) -> (store, path)``.

Scheme map (the way pyiceberg's ``io/fsspec.py`` picks a filesystem by URL scheme):

=====================================  ==========================================================
``/abs/path``, ``rel/path``, ``C:\\x``  :class:`LocalStore`, path made absolute
``file:///abs/path``                   :class:`LocalStore`
``memory://bucket/ds``                 a new, empty :class:`MemoryStore` (as pylance), path ``bucket/ds``
``s3+ddb://bucket/ds?ddbTableName=T``  as ``s3://bucket/ds`` (commits go through DynamoDB table
                                       ``T``: :mod:`lance_ops.table.dynamodb_store`)
anything else (``s3://``, ``gs://``)    :class:`FsspecStore` with ``storage_options``
=====================================  ==========================================================

See :mod:`lance_ops.io.base` for the interface and its read/write guarantees.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from lance_ops.errors import InvalidOptionError, UnsupportedFeatureError
from lance_ops.io.base import FileInfo, ObjectStore, OutputStream
from lance_ops.io.local import LocalStore
from lance_ops.io.memory import MemoryStore, normalize_memory_path
from lance_ops.io.retry import DEFAULT_RETRY, RetryPolicy, is_transient

if TYPE_CHECKING:
    from lance_ops.io.fsspec_store import FsspecStore

__all__ = [
    "DDB_SCHEME",
    "FileInfo",
    "FsspecStore",
    "LocalStore",
    "MemoryStore",
    "ObjectStore",
    "OutputStream",
    "RetryPolicy",
    "DEFAULT_RETRY",
    "is_transient",
    "object_store",
    "split_ddb_uri",
]

DDB_SCHEME = "s3+ddb"
DDB_TABLE_QUERY_KEY = "ddbTableName"

_LOCAL = LocalStore()


def object_store(
    uri: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> tuple[ObjectStore, str]:
    """The store serving ``uri`` and the store path of ``uri`` within it.

    ``storage_options`` configure fsspec filesystems (credentials, endpoints, ...); the local and
    memory stores need none and ignore them. Local paths may be relative (to the working
    directory) or start with ``~`` (the user's home), as in pylance.
    """
    text = os.fspath(uri)
    if "://" not in text:
        return _LOCAL, os.path.abspath(os.path.expanduser(text))
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise UnsupportedFeatureError(f"file URLs naming a remote host are not supported: {text}")
        return _LOCAL, os.path.abspath(unquote(parts.path))
    if scheme == "memory":
        return MemoryStore(), normalize_memory_path(parts.netloc + parts.path)
    if scheme == DDB_SCHEME:
        text = split_ddb_uri(text)[0]
    from lance_ops.io.fsspec_store import FsspecStore  # noqa: PLC0415 - fsspec, for remote URIs only

    return FsspecStore.from_uri(text, storage_options)


def split_ddb_uri(uri: str) -> tuple[str, str]:
    """``s3+ddb://bucket/ds?ddbTableName=T`` -> (``s3://bucket/ds``, ``T``).

    As pylance, the query must be exactly one non-empty ``ddbTableName``.
    """
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if parts.scheme.lower() != DDB_SCHEME or len(query) != 1 or query[0][0] != DDB_TABLE_QUERY_KEY:
        raise InvalidOptionError(
            f"{DDB_SCHEME}:// URIs take exactly one query parameter, {DDB_TABLE_QUERY_KEY}: {uri}"
        )
    if not query[0][1]:
        raise InvalidOptionError(f"{DDB_SCHEME}:// URIs need a non-empty {DDB_TABLE_QUERY_KEY}: {uri}")
    return f"s3://{parts.netloc}{parts.path}", query[0][1]


def __getattr__(name: str) -> Any:
    """``FsspecStore`` on first use (PEP 562): fsspec (with asyncio, ssl, http) loads only for a
    remote store, not for every local write."""
    if name == "FsspecStore":
        from lance_ops.io.fsspec_store import FsspecStore  # noqa: PLC0415

        return FsspecStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
