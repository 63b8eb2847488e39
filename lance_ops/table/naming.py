"""File names inside a Lance dataset directory.

::

    {root}/data/{name}.lance                        data files; ``name`` = 24 binary digits of the first
                                                    3 bytes of a UUIDv4 + 26 hex digits of the other 13
    {root}/_versions/{manifest name}                one manifest per version (see ManifestNamingScheme)
    {root}/_versions/latest_version_hint.json       ``{"version":N}``, written after commits, never trusted
    {root}/_transactions/{read_version}-{uuid}.txn  raw Transaction protobuf
    {root}/_deletions/{fragment}-{read_version}-{id}.{arrow|bin}

Manifest names (pylance 14): V1 ``{v}.manifest``; V2 ``{2**64 - 1 - v:020}.manifest`` so the newest
version sorts first (v=1 -> ``18446744073709551614.manifest``); detached ``d{v}.manifest`` with bit 63 of
``v`` set. One ``_versions/`` directory uses one scheme (pylance refuses a mix).
"""

from __future__ import annotations

import enum
import os
import uuid

from lance_ops.io import DDB_SCHEME

DATA_DIR = "data"
VERSIONS_DIR = "_versions"
TRANSACTIONS_DIR = "_transactions"
DELETIONS_DIR = "_deletions"
VERSION_HINT_FILE = "latest_version_hint.json"
MANIFEST_SUFFIX = ".manifest"

U64_MAX = 2**64 - 1
DETACHED_VERSION_BIT = 1 << 63
V2_DIGITS = 20


class ManifestNamingScheme(enum.Enum):
    """How a version number becomes a manifest file name."""

    V1 = "v1"
    V2 = "v2"

    def manifest_name(self, version: int) -> str:
        """File name (inside ``_versions/``) of ``version``'s manifest."""
        if version & DETACHED_VERSION_BIT:
            return f"d{version}{MANIFEST_SUFFIX}"
        if self is ManifestNamingScheme.V1:
            return f"{version}{MANIFEST_SUFFIX}"
        return f"{U64_MAX - version:0{V2_DIGITS}d}{MANIFEST_SUFFIX}"

    @classmethod
    def detect(cls, name: str) -> ManifestNamingScheme | None:
        """Scheme of a file name found in ``_versions/``; None for other files and detached names."""
        if not name.endswith(MANIFEST_SUFFIX) or name.startswith("d"):
            return None
        digits = name[: -len(MANIFEST_SUFFIX)]
        if not digits.isdigit():
            return None
        return cls.V2 if len(name) == V2_DIGITS + len(MANIFEST_SUFFIX) else cls.V1

    @classmethod
    def parse(cls, name: str) -> tuple[ManifestNamingScheme, int] | None:
        """``(scheme, version)`` for a main-line manifest name, None for anything else."""
        scheme = cls.detect(name)
        if scheme is None:
            return None
        number = int(name[: -len(MANIFEST_SUFFIX)])
        return scheme, number if scheme is cls.V1 else U64_MAX - number


def data_file_name(file_uuid: uuid.UUID | None = None) -> str:
    """A new data file name in pylance 14's style (any unique name is valid for readers)."""
    raw = (file_uuid or uuid.uuid4()).bytes
    return "".join(f"{b:08b}" for b in raw[:3]) + raw[3:].hex() + ".lance"


def transaction_file_name(read_version: int, transaction_uuid: str) -> str:
    """``{read_version}-{uuid}.txn`` (relative to ``_transactions/``)."""
    return f"{read_version}-{transaction_uuid}.txn"


def deletion_file_name(fragment_id: int, read_version: int, deletion_id: int, extension: str) -> str:
    """``{fragment_id}-{read_version}-{id}.{arrow|bin}`` (relative to ``_deletions/``)."""
    return f"{fragment_id}-{read_version}-{deletion_id}.{extension}"


def child_uri(uri: str, *parts: str) -> str:
    """The URI of ``parts`` below dataset ``uri`` (a local path or a ``scheme://`` URL).

    An ``s3+ddb://bucket/ds?ddbTableName=T`` child keeps the query after its path.
    """
    query = ""
    if uri.lower().startswith(f"{DDB_SCHEME}://"):
        uri, mark, rest = uri.partition("?")
        query = mark + rest
    base = uri.rstrip("/") if "://" in uri else os.path.abspath(os.path.expanduser(uri))
    return "/".join([base, *(p.strip("/") for p in parts if p.strip("/"))]) + query
