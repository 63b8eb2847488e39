"""Local filesystem store: store paths are absolute OS paths.

Reads use positioned reads (``os.preadv`` into a preallocated buffer), so one descriptor serves all
the spans of a :meth:`~lance_ops.io.base.ObjectStore.read_ranges` call without seeking.

Writes never expose partial files. Both write paths first fill a temporary file *in the target's
directory* (same filesystem, so the final step is a metadata operation), named
``.<target-name>.<random>.lance-ops-partial`` and hidden from :meth:`LocalStore.list`:

* :class:`LocalOutput` (``open_output``/``write``) renames it over the target on close: replace;
* :meth:`LocalStore.put_if_absent` hard-links it to the target. ``link`` refuses an existing
  target (``FileExistsError`` -> return False), so among racing writers exactly one wins, and the
  winner's file appears complete. The temporary name is removed either way. This is how pylance
  commits manifests on local disks. Filesystems without hard links make it raise ``OSError``.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import os
import shutil
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from lance_ops.errors import StorageError
from lance_ops.io.base import FileInfo, ObjectStore, OutputStream, RangeReader, serve_ranges
from lance_ops.io.metrics import record

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "LOCAL_COALESCE_GAP",
    "MAX_OPEN_READERS",
    "TEMP_SUFFIX",
    "LocalOutput",
    "LocalRangeReader",
    "LocalStore",
    "link_exclusive",
]

# Holes up to one page-cache page are cheaper to read through than to skip with another syscall.
LOCAL_COALESCE_GAP = 4 * 1024
TEMP_SUFFIX = ".lance-ops-partial"


def _typed(method: F) -> F:
    """Report the disk's failures (full, read-only, permission, I/O error) as :class:`StorageError`;
    a missing or existing file keeps its builtin error, which callers use as an answer."""

    @functools.wraps(method)
    def call(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, path, *args, **kwargs)
        except (FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError):
            raise
        except OSError as exc:
            if isinstance(exc, StorageError):
                raise
            raise StorageError(f"{method.__name__.strip('_')} {path} failed: {exc}") from exc

    return call  # type: ignore[return-value]


def _temp_sibling(path: str) -> tuple[str, int]:
    """Create an empty, exclusive temporary file next to ``path``; return its name and descriptor."""
    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")
    return temp, os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)


def link_exclusive(path: str, data: bytes | bytearray | memoryview) -> None:
    """Create ``path`` holding ``data`` atomically: written in full to a temporary sibling, then
    hard-linked to ``path`` (``FileExistsError`` if it exists). Readers never see a partial file."""
    temp, fd = _temp_sibling(path)
    try:
        try:
            _write_all(fd, memoryview(data).cast("B"))
        finally:
            os.close(fd)
        os.link(temp, path)
    finally:
        os.unlink(temp)


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _pread(fd: int, start: int, length: int) -> memoryview:
    """Up to ``length`` bytes at ``start``; shorter only at end of file. (``os.pread`` allocates
    the result without zero-filling it first, and in one call for small reads.)"""
    data = os.pread(fd, length, start)
    if len(data) == length or not data:
        return memoryview(data)
    parts = [data]
    filled = len(data)
    while filled < length:
        more = os.pread(fd, length - filled, start + filled)
        if not more:
            break
        parts.append(more)
        filled += len(more)
    return memoryview(b"".join(parts))


class LocalOutput(OutputStream):
    """Writes a temporary sibling file and renames it onto the target on close."""

    @_typed
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._temp, self._fd = _temp_sibling(path)

    def _write(self, data: memoryview) -> None:
        try:
            _write_all(self._fd, data)
        except OSError as exc:
            raise StorageError(f"writing {self.path} failed: {exc}") from exc

    def _commit(self) -> None:
        try:
            os.close(self._fd)
            os.replace(self._temp, self.path)
        except BaseException as exc:
            self._remove_temp()
            if isinstance(exc, OSError) and not isinstance(exc, StorageError):
                raise StorageError(f"publishing {self.path} failed: {exc}") from exc
            raise

    def _discard(self) -> None:
        os.close(self._fd)
        self._remove_temp()

    def _remove_temp(self) -> None:
        try:
            os.unlink(self._temp)
        except FileNotFoundError:
            pass


class LocalStore(ObjectStore):
    """Files on a locally mounted filesystem."""

    coalesce_gap = LOCAL_COALESCE_GAP

    @_typed
    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            data = f.read()
        record((data,))
        return data

    def read_range(self, path: str, start: int, length: int) -> memoryview:
        return self._read_spans(path, [(start, length)])[0]

    @_typed
    def _read_spans(self, path: str, spans: Sequence[tuple[int, int]]) -> list[memoryview]:
        if any(start < 0 or length < 0 for start, length in spans):
            raise ValueError(f"byte ranges need start >= 0 and length >= 0: {path}")
        fd = os.open(path, os.O_RDONLY)
        try:
            out = [_pread(fd, start, length) for start, length in spans]
        finally:
            os.close(fd)
        record(out)
        return out

    def open_ranges(self, path: str) -> RangeReader:
        """A reader of ``path`` keeping one descriptor open between calls (:class:`LocalRangeReader`),
        unless a subclass or a patch changed how ranges are read (then every call goes through it)."""
        kind = type(self)
        if kind.read_ranges is ObjectStore.read_ranges and kind._read_spans is _PLAIN_READ_SPANS:
            return LocalRangeReader(self, path)
        return RangeReader(self, path)

    @_typed
    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def exists(self, path: str) -> bool:
        return os.path.isfile(path)

    def open_output(self, path: str) -> LocalOutput:
        return LocalOutput(path)

    @_typed
    def put_if_absent(
        self, path: str, data: bytes | bytearray | memoryview, *, require_atomic: bool = True
    ) -> bool:
        try:
            link_exclusive(path, data)
            return True
        except FileExistsError:
            return False

    @_typed
    def list(self, dir_path: str) -> list[FileInfo]:
        try:
            entries = list(os.scandir(dir_path))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for entry in entries:
            if entry.name.endswith(TEMP_SUFFIX) or not entry.is_file():
                continue
            try:
                stat = entry.stat()
            except FileNotFoundError:
                continue
            found.append(FileInfo(entry.path, stat.st_size, stat.st_mtime))
        return sorted(found, key=lambda info: info.path)

    @_typed
    def list_names(self, dir_path: str) -> builtins.list[str]:
        # No stat per file: the directory entries' types are enough (a listing of 50,000 manifests).
        try:
            with os.scandir(dir_path) as entries:
                return [e.name for e in entries if not e.name.endswith(TEMP_SUFFIX) and e.is_file()]
        except (FileNotFoundError, NotADirectoryError):
            return []

    @_typed
    def walk(self, dir_path: str) -> builtins.list[FileInfo]:
        found = []
        for directory, _, names in os.walk(dir_path):
            for name in names:
                path = os.path.join(directory, name)
                try:
                    stat = os.stat(path, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                found.append(FileInfo(path, stat.st_size, stat.st_mtime))
        return sorted(found, key=lambda info: info.path)

    @_typed
    def delete(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def remove_directories(self, dir_path: str) -> None:
        shutil.rmtree(dir_path, ignore_errors=True)

    def join(self, base: str, *parts: str) -> str:
        return os.path.join(base, *(part.strip("/") for part in parts if part.strip("/")))


# How LocalStore reads spans as defined here; a subclass or a patch (tests counting bytes) that
# replaces it gets forwarding range readers, so every read still goes through the replacement.
_PLAIN_READ_SPANS = LocalStore._read_spans

# At most this many LocalRangeReaders hold a descriptor at once (process-wide): the oldest opened
# gives its descriptor back when another opens, so caches of many file readers (a dataset keeps up
# to 512 per version) never run the process out of descriptors.
MAX_OPEN_READERS = 128

# Re-entrant locks throughout: a garbage collection may run a reader's finalizer (which takes its
# lock and this one) in a thread already holding them.
_pool_lock = threading.RLock()
# key -> (descriptor box, the reader's lock), oldest opened first.
_pool: OrderedDict[int, tuple[list[int | None], threading.RLock]] = OrderedDict()
_keys = itertools.count()


def _after_fork_in_child() -> None:
    global _pool_lock
    _pool_lock = threading.RLock()  # another thread of the parent may have held it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_box(key: int, box: list[int | None]) -> None:
    """Close the descriptor in ``box`` (the caller holds the reader's lock) and forget it."""
    fd, box[0] = box[0], None
    with _pool_lock:
        _pool.pop(key, None)
    if fd is not None:
        os.close(fd)


def _release(key: int, box: list[int | None], lock: threading.RLock) -> None:
    with lock:
        _close_box(key, box)


def _admit(key: int, box: list[int | None], lock: threading.RLock) -> None:
    """Register a newly opened descriptor, closing the oldest others' beyond the limit. A reader busy
    reading (its lock held) is skipped, so no descriptor is closed under a read."""
    victims = []
    with _pool_lock:
        _pool[key] = (box, lock)
        for other in list(_pool)[: max(0, len(_pool) - MAX_OPEN_READERS)]:
            entry = _pool.get(other)  # a finalizer run meanwhile may have removed it
            if entry is None:
                continue
            other_box, other_lock = entry
            if other != key and other_lock.acquire(blocking=False):
                victims.append((other, other_box, other_lock))
                _pool.pop(other, None)
    for _, other_box, other_lock in victims:
        try:
            fd, other_box[0] = other_box[0], None
            if fd is not None:
                os.close(fd)
        finally:
            other_lock.release()


class LocalRangeReader(RangeReader):
    """Ranged reads of one local file through one descriptor kept open between calls (opened on the
    first read, so a missing file raises ``FileNotFoundError`` then, as :meth:`LocalStore.read_ranges`
    does). Closed by :meth:`close`, when the reader is garbage-collected, when
    :data:`MAX_OPEN_READERS` newer readers are open, or at exit; a closed reader reopens on demand.

    Pickles as its store and path (no descriptor); a forked child shares the descriptor, which is
    safe because every read is positioned (``preadv``), never seeking.
    """

    def __init__(self, store: LocalStore, path: str) -> None:
        super().__init__(store, path)
        self._key = next(_keys)
        self._box: list[int | None] = [None]
        self._lock = threading.RLock()
        self._finalizer = weakref.finalize(self, _release, self._key, self._box, self._lock)

    def __getstate__(self) -> tuple[ObjectStore, str]:
        return self.store, self.path

    def __setstate__(self, state: tuple[LocalStore, str]) -> None:
        self.__init__(*state)  # type: ignore[misc]

    def read_ranges(self, ranges: Sequence[tuple[int, int]] | np.ndarray) -> builtins.list[memoryview]:
        return serve_ranges(ranges, self.store.coalesce_gap, self._read_spans)

    def _read_spans(self, spans: Sequence[tuple[int, int]]) -> builtins.list[memoryview]:
        if any(start < 0 or length < 0 for start, length in spans):
            raise ValueError(f"byte ranges need start >= 0 and length >= 0: {self.path}")
        try:
            with self._lock:
                fd = self._box[0]
                if fd is None:
                    fd = self._box[0] = os.open(self.path, os.O_RDONLY)
                    _admit(self._key, self._box, self._lock)
                out = [_pread(fd, start, length) for start, length in spans]
            record(out)
            return out
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise
        except OSError as exc:
            if isinstance(exc, StorageError):
                raise
            raise StorageError(f"read_spans {self.path} failed: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            _close_box(self._key, self._box)
