"""Any other storage, through an fsspec filesystem (s3://, gs://, az://, hf://, ...).

Store paths are the filesystem's own paths, i.e. URLs with the protocol stripped
(``s3://bucket/ds`` -> ``bucket/ds``). Requests are costly here, so :meth:`read_ranges` bridges holes
of up to :data:`REMOTE_COALESCE_GAP` and hands all spans to ``fs.cat_ranges`` in one call, which
async filesystems (s3fs, gcsfs, adlfs) serve concurrently.

Writes:

* :class:`FsspecOutput` opens the file with ``autocommit=False`` and commits on close. Object stores
  publish an object only when the upload completes anyway; filesystems with real files (fsspec's
  local one) write a temporary file and move it into place on commit.
* :meth:`FsspecStore.put_if_absent` opens with exclusive-create mode ``"xb"``: ``O_EXCL`` on local
  files, conditional PUT (``If-None-Match: *``) on object stores whose fsspec driver implements it.
  A driver that rejects ``"xb"`` (``ValueError``/``NotImplementedError``) gets an exists-check
  followed by a write, which is **not atomic**: two racing writers can both believe they won. A
  warning is logged; for concurrent commits on such stores use a store with atomic create.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import fsspec
from fsspec import AbstractFileSystem

from lance_ops.io.base import FileInfo, ObjectStore, OutputStream

__all__ = ["REMOTE_COALESCE_GAP", "FsspecOutput", "FsspecStore"]

logger = logging.getLogger(__name__)

# A round trip to an object store costs about as much as transferring ~1 MiB.
REMOTE_COALESCE_GAP = 1024 * 1024

# Keys fsspec drivers use for modification times, in order of preference.
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created")


def _mtime_seconds(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return float(value)


class FsspecOutput(OutputStream):
    """A non-autocommitting fsspec file, committed on close and discarded on abort."""

    def __init__(self, fs: AbstractFileSystem, path: str) -> None:
        super().__init__(path)
        # _open is fsspec's per-driver hook; fs.open would also enlist the file in fs.transaction,
        # which keeps every file ever opened this way alive.
        self._file = fs._open(path, mode="wb", autocommit=False)

    def _write(self, data: memoryview) -> None:
        self._file.write(data)

    def _commit(self) -> None:
        self._file.close()
        self._file.commit()

    def _discard(self) -> None:
        self._file.close()
        self._file.discard()


class FsspecStore(ObjectStore):
    """Adapter from an fsspec filesystem to :class:`~lance_ops.io.base.ObjectStore`."""

    def __init__(self, fs: AbstractFileSystem, coalesce_gap: int = REMOTE_COALESCE_GAP) -> None:
        self.fs = fs
        self.coalesce_gap = coalesce_gap
        self._made_dirs: set[str] = set()

    @classmethod
    def from_uri(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> tuple[FsspecStore, str]:
        """The store for ``uri`` (``storage_options`` go to the fsspec filesystem) and its path."""
        fs, path = fsspec.core.url_to_fs(uri, **dict(storage_options or {}))
        return cls(fs), path

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def read_range(self, path: str, start: int, length: int) -> memoryview:
        if start < 0 or length < 0:
            raise ValueError(f"byte ranges need start >= 0 and length >= 0: {path}")
        if length == 0:
            return memoryview(b"")
        return memoryview(self.fs.cat_file(path, start=start, end=start + length))

    def _read_spans(self, path: str, spans: Sequence[tuple[int, int]]) -> list[memoryview]:
        blobs = self.fs.cat_ranges(
            [path] * len(spans),
            [start for start, _ in spans],
            [start + length for start, length in spans],
            on_error="raise",
        )
        return [memoryview(blob) for blob in blobs]

    def size(self, path: str) -> int:
        info = self.fs.info(path)
        if info.get("type") == "directory":
            raise IsADirectoryError(path)
        return int(info["size"])

    def exists(self, path: str) -> bool:
        return bool(self.fs.isfile(path))

    def _ensure_parent(self, path: str) -> None:
        """Create the parent directory where the filesystem has directories (object stores ignore this).

        Remembered per directory, so object stores pay the round trip once per directory, not per write.
        """
        parent = self.fs._parent(path)
        if parent not in self._made_dirs:
            self.fs.makedirs(parent, exist_ok=True)
            self._made_dirs.add(parent)

    def open_output(self, path: str) -> FsspecOutput:
        self._ensure_parent(path)
        return FsspecOutput(self.fs, path)

    def put_if_absent(self, path: str, data: bytes | bytearray | memoryview) -> bool:
        self._ensure_parent(path)
        payload = memoryview(data).cast("B")
        try:
            handle = self.fs.open(path, "xb")
        except FileExistsError:
            return False
        except (ValueError, NotImplementedError):
            logger.warning(
                "%s does not support exclusive create; put_if_absent(%s) is not atomic",
                type(self.fs).__name__,
                path,
            )
            if self.fs.exists(path):
                return False
            self.write(path, payload)
            return True
        try:
            with handle:
                handle.write(payload)
        except FileExistsError:
            return False
        return True

    def list(self, dir_path: str) -> list[FileInfo]:
        try:
            entries = self.fs.ls(dir_path, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            return []
        parent = self.fs._strip_protocol(dir_path).rstrip("/")
        found = []
        for entry in entries:
            name = self.fs._strip_protocol(entry["name"])
            if entry.get("type") != "file" or self.fs._parent(name).rstrip("/") != parent:
                continue
            found.append(FileInfo(name, int(entry["size"]), self._mtime(name, entry)))
        return sorted(found, key=lambda info: info.path)

    def walk(self, dir_path: str) -> builtins.list[FileInfo]:
        try:
            entries = self.fs.find(dir_path, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = [
            FileInfo(self.fs._strip_protocol(name), int(entry["size"]), self._mtime(name, entry))
            for name, entry in entries.items()
            if entry.get("type") == "file"
        ]
        return sorted(found, key=lambda info: info.path)

    def _mtime(self, path: str, entry: Mapping[str, Any]) -> float:
        for key in _MTIME_KEYS:
            if entry.get(key) is not None:
                return _mtime_seconds(entry[key])
        return _mtime_seconds(self.fs.modified(path))

    def delete(self, path: str) -> None:
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass
