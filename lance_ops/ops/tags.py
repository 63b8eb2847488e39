"""Tags: named pointers to versions, stored as pylance 14 stores them.

A tag is the file ``_refs/tags/{name}.json`` (pretty-printed, two-space indent, camelCase keys)::

    {
      "branch": null,
      "version": 3,
      "createdAt": "2026-11-21T20:49:46.052726342Z",
      "updatedAt": "2026-11-21T20:49:46.052726342Z",
      "manifestSize": 1064,
      "metadata": {}
    }

``branch`` null is the main line; ``manifestSize`` is the byte size of the tagged version's manifest
file; timestamps are RFC 3339 UTC with nanoseconds (``updatedAt`` changes on update, ``createdAt``
never). Only ``version`` is required when reading (older writers omit the rest).

Names follow pylance's rules, checked in its order and with its messages: non-empty; only
alphanumerics (Rust's definition, :mod:`lance_ops.ops._ref_chars`), ``.``, ``-``, ``_`` (so no
``/``); not starting or ending with ``.``; not ending with ``.lock``; no ``..``. A tagged version is
kept by cleanup. ``metadata`` (string to string) is set by :meth:`Tags.replace_metadata` and kept
by updates; the JSON is written as serde does (UTF-8 text, not ASCII escapes).
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from lance_ops.errors import (
    CorruptFileError,
    InvalidArgumentError,
    InvalidTagNameError,
    RefError,
    TagNotFoundError,
    UnsupportedFeatureError,
)
from lance_ops.io import ObjectStore
from lance_ops.ops._ref_chars import is_alphanumeric
from lance_ops.table.commit import load_manifest

__all__ = ["TagContents", "Tags", "validate_tag_name"]

TAGS_DIR = "_refs/tags"
TAG_SUFFIX = ".json"
MAIN_BRANCH = "main"

# A version number, a tag name, or ``(branch, version)`` with None/"main" for the main line and
# None for its latest version (pylance's reference forms); None alone is the latest version.
Reference: TypeAlias = "int | str | tuple[str | None, int | None] | None"

_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$")


def validate_tag_name(name: str) -> None:
    """Raise :class:`InvalidTagNameError` with pylance's message unless ``name`` is a valid tag name."""
    if not isinstance(name, str):
        raise InvalidArgumentError(f"a tag name is a string, not {name!r}")
    if not name:
        reason = "Ref cannot be empty"
    elif not all(c in ".-_" or is_alphanumeric(c) for c in name):
        reason = "Ref characters must be either alphanumeric, '.', '-' or '_'"
    elif name.startswith("."):
        reason = "Ref cannot begin with a dot"
    elif name.endswith("."):
        reason = "Ref cannot end with a dot"
    elif name.endswith(".lock"):
        reason = "Ref cannot end with .lock"
    elif ".." in name:
        reason = "Ref cannot have two consecutive dots"
    else:
        return
    raise InvalidTagNameError(f"Ref is invalid: {reason} (tag name {name!r})")


def format_timestamp(ns: int) -> str:
    """``ns`` since the epoch as pylance writes it: ``YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ``."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    whole = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{fraction:09d}Z"


def parse_timestamp(text: str) -> dt.datetime:
    """An RFC 3339 timestamp as an aware UTC datetime (sub-microsecond digits are dropped)."""
    match = _RFC3339.match(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    whole, fraction, zone = match.groups()
    micros = (fraction or "").ljust(6, "0")[:6]
    offset = "+00:00" if zone == "Z" else zone
    return dt.datetime.fromisoformat(f"{whole}.{micros}{offset}").astimezone(dt.UTC)


@dataclass(frozen=True)
class TagContents:
    """One tag file's content; timestamps are kept as written (nanosecond RFC 3339 text)."""

    version: int
    manifest_size: int | None = None
    branch: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: bytes, path: str) -> TagContents:
        """Parse a tag file; anything malformed raises :class:`CorruptFileError` naming ``path``."""
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict):
                raise ValueError("a tag file holds a JSON object")
            version = doc["version"]
            if not isinstance(version, int) or isinstance(version, bool) or version < 0:
                raise ValueError(f"version must be a non-negative integer, got {version!r}")
            size = doc.get("manifestSize")
            if size is not None and (not isinstance(size, int) or isinstance(size, bool)):
                raise ValueError(f"manifestSize must be an integer, got {size!r}")
            branch, metadata = doc.get("branch"), doc.get("metadata") or {}
            if branch is not None and not isinstance(branch, str):
                raise ValueError(f"branch must be a string or null, got {branch!r}")
            if not isinstance(metadata, dict):
                raise ValueError(f"metadata must be an object, got {metadata!r}")
            created, updated = doc.get("createdAt"), doc.get("updatedAt")
            for stamp in (created, updated):
                if stamp is not None:
                    parse_timestamp(stamp)
        except (ValueError, KeyError, TypeError) as exc:
            reason = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise CorruptFileError(path, f"invalid tag file: {reason}") from exc
        return cls(version, size, branch, created, updated, {str(k): str(v) for k, v in metadata.items()})

    def to_json(self) -> bytes:
        doc = {
            "branch": self.branch,
            "version": self.version,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "manifestSize": self.manifest_size,
            "metadata": dict(self.metadata),
        }
        return json.dumps(doc, indent=2, ensure_ascii=False).encode()

    def to_dict(self) -> dict[str, Any]:
        """pylance's ``Tag`` shape (``tags.list()`` values): datetimes in UTC, snake_case keys."""
        return {
            "branch": self.branch,
            "version": self.version,
            "created_at": None if self.created_at is None else parse_timestamp(self.created_at),
            "updated_at": None if self.updated_at is None else parse_timestamp(self.updated_at),
            "manifest_size": self.manifest_size,
            "metadata": dict(self.metadata),
        }


class Tags:
    """The tags of the dataset at ``root`` (pylance's ``ds.tags``)."""

    def __init__(self, store: ObjectStore, root: str) -> None:
        self._store = store
        self._root = root

    def _path(self, name: str) -> str:
        return self._store.join(self._root, TAGS_DIR, f"{name}{TAG_SUFFIX}")

    def contents(self) -> dict[str, TagContents]:
        """Every tag's parsed file, by name (sorted)."""
        found = {}
        for info in self._store.list(self._store.join(self._root, TAGS_DIR)):
            file_name = info.path.rsplit("/", 1)[-1]
            if file_name.endswith(TAG_SUFFIX):
                found[file_name[: -len(TAG_SUFFIX)]] = TagContents.from_json(
                    self._store.read(info.path), info.path
                )
        return found

    def get(self, tag: str) -> TagContents:
        """One tag (by name, as pylance calls the parameter ``tag``); :class:`TagNotFoundError` if it
        does not exist."""
        validate_tag_name(tag)
        path = self._path(tag)
        try:
            data = self._store.read(path)
        except FileNotFoundError as exc:
            raise TagNotFoundError(f"Ref not found error: tag {tag} does not exist") from exc
        return TagContents.from_json(data, path)

    def list(self) -> dict[str, dict[str, Any]]:
        """``{name: {"branch", "version", "created_at", "updated_at", "manifest_size", "metadata"}}``."""
        return {name: tag.to_dict() for name, tag in self.contents().items()}

    def list_ordered(
        self, order: Literal["asc", "desc"] | None = None
    ) -> builtins.list[tuple[str, dict[str, Any]]]:
        """Tags by version (``"desc"`` by default), ties by name, as pylance orders them."""
        if order not in (None, "asc", "desc"):
            raise ValueError(f"order must be 'asc' or 'desc', got {order!r}")
        sign = 1 if order == "asc" else -1
        tags = sorted(self.contents().items(), key=lambda item: (sign * item[1].version, item[0]))
        return [(name, tag.to_dict()) for name, tag in tags]

    def get_version(self, tag: str) -> int:
        return self.get(tag).version

    def _target(self, reference: Reference) -> tuple[int, int]:
        """``(version, manifest size)`` of a reference; unknown versions raise VersionNotFoundError."""
        if reference is None:
            version: int | None = None
        elif isinstance(reference, str):
            version = self.get_version(reference)
        elif isinstance(reference, tuple):
            branch, version = reference
            if branch not in (None, MAIN_BRANCH):
                raise UnsupportedFeatureError(f"branches are not supported (reference {reference!r})")
        elif isinstance(reference, int) and not isinstance(reference, bool):
            version = reference
        else:
            raise TypeError(f"a tag refers to a version, a tag name or (branch, version), not {reference!r}")
        loaded = load_manifest(self._store, self._root, version)
        return loaded.manifest.version, loaded.size

    def create(self, tag: str, reference: Reference = None) -> None:
        """Tag a version (the latest by default); RefError if the tag exists, VersionNotFoundError
        if the version does not."""
        validate_tag_name(tag)
        version, size = self._target(reference)  # an unknown version is reported first, as pylance does
        if self._store.exists(self._path(tag)):
            raise RefError(f"Ref conflict error: tag {tag} already exists")
        now = format_timestamp(time.time_ns())
        contents = TagContents(version, size, None, now, now)
        if not self._store.put_if_absent(self._path(tag), contents.to_json()):
            raise RefError(f"Ref conflict error: tag {tag} already exists")

    def update(self, tag: str, reference: Reference = None) -> None:
        """Point an existing tag at another version, the latest by default (``createdAt`` and
        ``metadata`` kept, ``updatedAt`` renewed)."""
        current = self.get(tag)
        version, size = self._target(reference)
        now = format_timestamp(time.time_ns())
        updated = TagContents(version, size, current.branch, current.created_at or now, now, current.metadata)
        self._store.write(self._path(tag), updated.to_json())

    def replace_metadata(self, tag: str, metadata: Mapping[str, str]) -> None:
        """Replace a tag's ``metadata`` (string keys and values); its timestamps stay, as in pylance."""
        if not isinstance(metadata, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise InvalidArgumentError(f"tag metadata maps strings to strings, got {metadata!r}")
        current = self.get(tag)
        self._store.write(self._path(tag), replace(current, metadata=dict(metadata)).to_json())

    def delete(self, tag: str) -> None:
        """Remove a tag (even one whose file is corrupt); :class:`TagNotFoundError` if it does not exist."""
        validate_tag_name(tag)
        if not self._store.exists(self._path(tag)):
            raise TagNotFoundError(f"Ref not found error: tag {tag} does not exist")
        self._store.delete(self._path(tag))
