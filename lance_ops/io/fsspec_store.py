"""Any other storage, through an fsspec filesystem (s3://, gs://, az://, hf://, ...).

Store paths are the filesystem's own paths, i.e. URLs with the protocol stripped
(``s3://bucket/ds`` -> ``bucket/ds``). Requests are costly here, so :meth:`read_ranges` bridges holes
of up to :data:`REMOTE_COALESCE_GAP` and hands all spans to ``fs.cat_ranges`` in one call, which
async filesystems (s3fs, gcsfs, adlfs) serve concurrently.

Writes:

* :class:`FsspecOutput` opens the file with ``autocommit=False`` and commits on close. Object stores
  publish an object only when the upload completes anyway; filesystems with real files (fsspec's
  local one) write a temporary file and move it into place on commit.
* :meth:`FsspecStore.put_if_absent` opens with exclusive-create mode ``"xb"``: conditional PUT
  (``If-None-Match: *``) on object stores whose fsspec driver implements it. fsspec's local
  filesystem would create the file empty at open, so a reader listing it meanwhile (a manifest being
  claimed) would see a partial file: there the bytes are written to a temporary sibling first and
  hard-linked into place, as :class:`~lance_ops.io.local.LocalStore` does.
  A driver that rejects ``"xb"`` (``ValueError``/``NotImplementedError``) gets an exists-check
  followed by a write, which is **not atomic**: two racing writers can both believe they won. A
  warning is logged; for concurrent commits on such stores use a store with atomic create.

Failures: every filesystem call goes through the store's :class:`~lance_ops.io.retry.RetryPolicy`,
which retries transient errors with bounded backoff and raises permanent (or exhausted) ones as
:class:`~lance_ops.errors.StorageError`; missing files stay ``FileNotFoundError``. A ranged read
returning fewer bytes than the file holds is a transient short read, retried. Whole writes
(:meth:`FsspecStore.write`, :meth:`FsspecStore.put_if_absent`) are retried whole; a streamed
:class:`FsspecOutput` is not (its bytes are gone), it fails with ``StorageError`` and is discarded.
An exclusive create that fails after creating its file (filesystems where ``"xb"`` creates at open)
removes that partial file before retrying, and a retry finding the file already holding exactly
our bytes (an earlier attempt landed but its answer was lost) reports success.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from lance_ops.errors import StorageError
from lance_ops.io.base import FileInfo, ObjectStore, OutputStream
from lance_ops.io.local import link_exclusive
from lance_ops.io.retry import DEFAULT_RETRY, RetryPolicy, ShortReadError, is_transient

__all__ = ["REMOTE_COALESCE_GAP", "FsspecOutput", "FsspecStore"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

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
        try:
            self._file.write(data)
        except OSError as exc:
            raise StorageError(f"writing {self.path} failed: {exc!r}") from exc

    def _commit(self) -> None:
        try:
            self._file.close()
            self._file.commit()
        except OSError as exc:
            self._file.discard()
            raise StorageError(f"publishing {self.path} failed: {exc!r}") from exc

    def _discard(self) -> None:
        self._file.close()
        self._file.discard()


class FsspecStore(ObjectStore):
    """Adapter from an fsspec filesystem to :class:`~lance_ops.io.base.ObjectStore`."""

    def __init__(
        self,
        fs: AbstractFileSystem,
        coalesce_gap: int = REMOTE_COALESCE_GAP,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.fs = fs
        self.coalesce_gap = coalesce_gap
        self.retry = retry
        self._made_dirs: set[str] = set()

    @classmethod
    def from_uri(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> tuple[FsspecStore, str]:
        """The store for ``uri`` (``storage_options`` go to the fsspec filesystem) and its path."""
        fs, path = fsspec.core.url_to_fs(uri, **dict(storage_options or {}))
        return cls(fs), path

    def read(self, path: str) -> bytes:
        return self.retry.call(f"read {path}", lambda: bytes(self.fs.cat_file(path)))

    def _check_short(self, path: str, spans: Sequence[tuple[int, int]], blobs: Sequence[bytes]) -> None:
        """Raise :class:`ShortReadError` if a span came back shorter than the file allows."""
        short = [(s, n, len(b)) for (s, n), b in zip(spans, blobs, strict=True) if len(b) < n]
        if short:
            size = int(self.fs.info(path)["size"])
            for start, length, got in short:
                if got < min(length, max(0, size - start)):
                    raise ShortReadError(f"short read of {path}: {got} of {length} bytes at {start}")

    def read_range(self, path: str, start: int, length: int) -> memoryview:
        if start < 0 or length < 0:
            raise ValueError(f"byte ranges need start >= 0 and length >= 0: {path}")
        if length == 0:
            return memoryview(b"")
        return self._read_spans(path, [(start, length)])[0]

    def _read_spans(self, path: str, spans: Sequence[tuple[int, int]]) -> list[memoryview]:
        def attempt() -> list[bytes]:
            blobs = self.fs.cat_ranges(
                [path] * len(spans),
                [start for start, _ in spans],
                [start + length for start, length in spans],
                on_error="raise",
            )
            self._check_short(path, spans, blobs)
            return blobs

        return [memoryview(blob) for blob in self.retry.call(f"read {len(spans)} ranges of {path}", attempt)]

    def size(self, path: str) -> int:
        info = self.retry.call(f"stat {path}", lambda: self.fs.info(path))
        if info.get("type") == "directory":
            raise IsADirectoryError(path)
        return int(info["size"])

    def exists(self, path: str) -> bool:
        return self.retry.call(f"stat {path}", lambda: bool(self.fs.isfile(path)))

    def _ensure_parent(self, path: str) -> None:
        """Create the parent directory where the filesystem has directories (object stores ignore this).

        Remembered per directory, so object stores pay the round trip once per directory, not per write.
        """
        parent = self.fs._parent(path)
        if parent not in self._made_dirs:
            self.retry.call(f"mkdir {parent}", lambda: self.fs.makedirs(parent, exist_ok=True))
            self._made_dirs.add(parent)

    def open_output(self, path: str) -> FsspecOutput:
        self._ensure_parent(path)
        return self.retry.call(f"open {path}", lambda: FsspecOutput(self.fs, path))

    def write(self, path: str, data: bytes | bytearray | memoryview) -> None:
        payload = memoryview(data).cast("B")
        self._ensure_parent(path)

        def attempt() -> None:
            with FsspecOutput(self.fs, path) as out:
                out.write(payload)

        self.retry.call(f"write {path}", _unwrapping_storage_errors(attempt))

    def put_if_absent(self, path: str, data: bytes | bytearray | memoryview) -> bool:
        self._ensure_parent(path)
        payload = memoryview(data).cast("B")
        attempts = 0

        def attempt() -> bool:
            nonlocal attempts
            attempts += 1
            try:
                return self._create_exclusive(path, payload)
            except FileExistsError:
                # After a failed attempt, the file may be ours: that attempt landed, its answer was lost.
                return attempts > 1 and bytes(self.fs.cat_file(path)) == bytes(payload)

        return self.retry.call(f"create {path}", attempt)

    def _create_exclusive(self, path: str, payload: memoryview) -> bool:
        """One exclusive-create attempt; raises FileExistsError if the path is taken."""
        if type(self.fs) is LocalFileSystem:  # subclasses may change how files open
            link_exclusive(self.fs._strip_protocol(path), payload)
            return True
        try:
            handle = self.fs.open(path, "xb")
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
            raise
        except OSError:
            # Where "xb" created the file at open, a failed write left a partial one: remove it.
            if self.fs.isfile(path) and bytes(self.fs.cat_file(path)) != bytes(payload):
                self.fs.rm_file(path)
            raise
        return True

    def list(self, dir_path: str) -> list[FileInfo]:
        try:
            entries = self.retry.call(f"list {dir_path}", lambda: self.fs.ls(dir_path, detail=True))
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
            entries = self.retry.call(f"walk {dir_path}", lambda: self.fs.find(dir_path, detail=True))
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
        return _mtime_seconds(self.retry.call(f"stat {path}", lambda: self.fs.modified(path)))

    def delete(self, path: str) -> None:
        try:
            self.retry.call(f"delete {path}", lambda: self.fs.rm_file(path))
        except FileNotFoundError:
            pass


def _unwrapping_storage_errors(fn: Callable[[], T]) -> Callable[[], T]:
    """``fn`` re-raising the transient cause of a :class:`StorageError` (so a retry policy sees it).

    :class:`FsspecOutput` reports failures as StorageError for its streaming users; a whole write
    built on it must still retry the transient ones.
    """

    def run() -> T:
        try:
            return fn()
        except StorageError as exc:
            cause = exc.__cause__
            if isinstance(cause, OSError) and is_transient(cause):
                raise cause from None
            raise

    return run
