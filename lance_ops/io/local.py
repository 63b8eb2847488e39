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
import os
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from lance_ops.errors import StorageError
from lance_ops.io.base import FileInfo, ObjectStore, OutputStream

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["LOCAL_COALESCE_GAP", "TEMP_SUFFIX", "LocalOutput", "LocalStore", "link_exclusive"]

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
    """Up to ``length`` bytes at ``start``; shorter only at end of file."""
    buffer = bytearray(length)
    view = memoryview(buffer)
    filled = 0
    while filled < length:
        got = os.preadv(fd, [view[filled:]], start + filled)
        if got == 0:
            break
        filled += got
    return view[:filled]


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
            return f.read()

    def read_range(self, path: str, start: int, length: int) -> memoryview:
        return self._read_spans(path, [(start, length)])[0]

    @_typed
    def _read_spans(self, path: str, spans: Sequence[tuple[int, int]]) -> list[memoryview]:
        if any(start < 0 or length < 0 for start, length in spans):
            raise ValueError(f"byte ranges need start >= 0 and length >= 0: {path}")
        fd = os.open(path, os.O_RDONLY)
        try:
            return [_pread(fd, start, length) for start, length in spans]
        finally:
            os.close(fd)

    @_typed
    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def exists(self, path: str) -> bool:
        return os.path.isfile(path)

    def open_output(self, path: str) -> LocalOutput:
        return LocalOutput(path)

    @_typed
    def put_if_absent(self, path: str, data: bytes | bytearray | memoryview) -> bool:
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

    def join(self, base: str, *parts: str) -> str:
        return os.path.join(base, *(part.strip("/") for part in parts if part.strip("/")))
