"""``memory://`` store: files held in this process's memory, shared by every store instance.

One process-global namespace guarded by one lock, so tests, threads and Spark local mode (executors
are threads of the same process) all see the same files. Store paths are '/'-separated and relative
(``memory://bucket/ds/a.lance`` -> ``bucket/ds/a.lance``); leading/trailing slashes and ``.``/``..``
segments are normalised away. Contents are kept as immutable ``bytes``, so ranged reads are
zero-copy slices and a file being replaced never changes under a reader's feet.
"""

from __future__ import annotations

import builtins
import io
import posixpath
import threading
import time
from dataclasses import dataclass

from lance_ops.io.base import FileInfo, ObjectStore, OutputStream

__all__ = ["MemoryOutput", "MemoryStore", "normalize_memory_path"]


@dataclass(frozen=True)
class _Entry:
    data: bytes
    mtime: float


_LOCK = threading.Lock()
# directory -> file name -> entry; a directory exists while it holds files.
_TREE: dict[str, dict[str, _Entry]] = {}


def normalize_memory_path(path: str) -> str:
    """Canonical store path: no leading/trailing '/', no '.' or '..' segments; the root is ''."""
    return posixpath.normpath("/" + path).lstrip("/")


def _split(path: str) -> tuple[str, str]:
    directory, name = posixpath.split(normalize_memory_path(path))
    if not name:
        raise IsADirectoryError(f"memory://{path} names a directory, not a file")
    return directory, name


def _get(path: str) -> _Entry:
    directory, name = _split(path)
    with _LOCK:
        entry = _TREE.get(directory, {}).get(name)
    if entry is None:
        raise FileNotFoundError(f"memory://{normalize_memory_path(path)}")
    return entry


def _put(path: str, data: bytes, *, overwrite: bool) -> bool:
    directory, name = _split(path)
    with _LOCK:
        files = _TREE.setdefault(directory, {})
        if not overwrite and name in files:
            return False
        files[name] = _Entry(data, time.time())
        return True


class MemoryOutput(OutputStream):
    """Buffers writes; the file is stored on close."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        _split(path)
        self._buffer = io.BytesIO()

    def _write(self, data: memoryview) -> None:
        self._buffer.write(data)

    def _commit(self) -> None:
        _put(self.path, self._buffer.getvalue(), overwrite=True)
        self._buffer = io.BytesIO()

    def _discard(self) -> None:
        self._buffer = io.BytesIO()


class MemoryStore(ObjectStore):
    """Process-global in-memory files. Instances are interchangeable views of the same namespace."""

    coalesce_gap = 0

    def read(self, path: str) -> bytes:
        return _get(path).data

    def read_range(self, path: str, start: int, length: int) -> memoryview:
        if start < 0 or length < 0:
            raise ValueError(f"byte ranges need start >= 0 and length >= 0: {path}")
        return memoryview(_get(path).data)[start : start + length]

    def size(self, path: str) -> int:
        return len(_get(path).data)

    def exists(self, path: str) -> bool:
        try:
            _get(path)
        except (FileNotFoundError, IsADirectoryError):
            return False
        return True

    def open_output(self, path: str) -> MemoryOutput:
        return MemoryOutput(path)

    def write(self, path: str, data: bytes | bytearray | memoryview) -> None:
        _put(path, bytes(data), overwrite=True)

    def put_if_absent(
        self, path: str, data: bytes | bytearray | memoryview, *, require_atomic: bool = True
    ) -> bool:
        return _put(path, bytes(data), overwrite=False)

    def list(self, dir_path: str) -> list[FileInfo]:
        directory = normalize_memory_path(dir_path)
        with _LOCK:
            files = sorted(_TREE.get(directory, {}).items())
        return [FileInfo(posixpath.join(directory, name), len(e.data), e.mtime) for name, e in files]

    def walk(self, dir_path: str) -> builtins.list[FileInfo]:
        top = normalize_memory_path(dir_path)
        with _LOCK:
            found = [
                FileInfo(posixpath.join(directory, name), len(entry.data), entry.mtime)
                for directory, files in _TREE.items()
                if directory == top or directory.startswith(f"{top}/") or not top
                for name, entry in files.items()
            ]
        return sorted(found, key=lambda info: info.path)

    def delete(self, path: str) -> None:
        directory, name = _split(path)
        with _LOCK:
            files = _TREE.get(directory)
            if files is not None:
                files.pop(name, None)
                if not files:
                    del _TREE[directory]

    def join(self, base: str, *parts: str) -> str:
        return normalize_memory_path(super().join(base, *parts))
