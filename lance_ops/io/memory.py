"""``memory://`` store: files held in this process's memory, by one store instance.

As in pylance, every opening of a ``memory://`` URI is a new, empty store: a dataset written there
lives in the store its handle holds (and in whatever reaches it through that handle: checkouts,
appends through ``write_dataset(data, ds)``, commits), and a second ``write_dataset`` or
``dataset`` call with the same URI starts from nothing. Each store guards its files with its own
lock, so threads sharing a handle see the same files. Store paths are '/'-separated and relative
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
from lance_ops.io.metrics import record

__all__ = ["MemoryOutput", "MemoryStore", "normalize_memory_path"]


@dataclass(frozen=True)
class _Entry:
    data: bytes
    mtime: float


def normalize_memory_path(path: str) -> str:
    """Canonical store path: no leading/trailing '/', no '.' or '..' segments; the root is ''."""
    return posixpath.normpath("/" + path).lstrip("/")


def _split(path: str) -> tuple[str, str]:
    directory, name = posixpath.split(normalize_memory_path(path))
    if not name:
        raise IsADirectoryError(f"memory://{path} names a directory, not a file")
    return directory, name


class MemoryOutput(OutputStream):
    """Buffers writes; the file is stored (in ``store``) on close."""

    def __init__(self, store: MemoryStore, path: str) -> None:
        super().__init__(path)
        _split(path)
        self._store = store
        self._buffer = io.BytesIO()

    def _write(self, data: memoryview) -> None:
        self._buffer.write(data)

    def _commit(self) -> None:
        self._store._put(self.path, self._buffer.getvalue(), overwrite=True)
        self._buffer = io.BytesIO()

    def _discard(self) -> None:
        self._buffer = io.BytesIO()


class MemoryStore(ObjectStore):
    """In-memory files; each instance is a namespace of its own, empty when created."""

    coalesce_gap = 0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # directory -> file name -> entry; a directory exists while it holds files.
        self._tree: dict[str, dict[str, _Entry]] = {}

    def __getstate__(self) -> dict[str, dict[str, _Entry]]:
        """Pickled (e.g. inside a reader sent to another process), a store is a copy of its files."""
        with self._lock:
            return {directory: dict(files) for directory, files in self._tree.items()}

    def __setstate__(self, tree: dict[str, dict[str, _Entry]]) -> None:
        self._lock = threading.Lock()
        self._tree = tree

    def _get(self, path: str) -> _Entry:
        directory, name = _split(path)
        with self._lock:
            entry = self._tree.get(directory, {}).get(name)
        if entry is None:
            raise FileNotFoundError(f"memory://{normalize_memory_path(path)}")
        return entry

    def _put(self, path: str, data: bytes, *, overwrite: bool) -> bool:
        directory, name = _split(path)
        with self._lock:
            files = self._tree.setdefault(directory, {})
            if not overwrite and name in files:
                return False
            files[name] = _Entry(data, time.time())
            return True

    def read(self, path: str) -> bytes:
        data = self._get(path).data
        record((data,))
        return data

    def read_range(self, path: str, start: int, length: int) -> memoryview:
        if start < 0 or length < 0:
            raise ValueError(f"byte ranges need start >= 0 and length >= 0: {path}")
        data = memoryview(self._get(path).data)[start : start + length]
        record((data,))
        return data

    def size(self, path: str) -> int:
        return len(self._get(path).data)

    def exists(self, path: str) -> bool:
        try:
            self._get(path)
        except (FileNotFoundError, IsADirectoryError):
            return False
        return True

    def open_output(self, path: str) -> MemoryOutput:
        return MemoryOutput(self, path)

    def write(self, path: str, data: bytes | bytearray | memoryview) -> None:
        self._put(path, bytes(data), overwrite=True)

    def put_if_absent(
        self, path: str, data: bytes | bytearray | memoryview, *, require_atomic: bool = True
    ) -> bool:
        return self._put(path, bytes(data), overwrite=False)

    def list(self, dir_path: str) -> list[FileInfo]:
        directory = normalize_memory_path(dir_path)
        with self._lock:
            files = sorted(self._tree.get(directory, {}).items())
        return [FileInfo(posixpath.join(directory, name), len(e.data), e.mtime) for name, e in files]

    def walk(self, dir_path: str) -> builtins.list[FileInfo]:
        top = normalize_memory_path(dir_path)
        with self._lock:
            found = [
                FileInfo(posixpath.join(directory, name), len(entry.data), entry.mtime)
                for directory, files in self._tree.items()
                if directory == top or directory.startswith(f"{top}/") or not top
                for name, entry in files.items()
            ]
        return sorted(found, key=lambda info: info.path)

    def delete(self, path: str) -> None:
        directory, name = _split(path)
        with self._lock:
            files = self._tree.get(directory)
            if files is not None:
                files.pop(name, None)
                if not files:
                    del self._tree[directory]

    def join(self, base: str, *parts: str) -> str:
        return normalize_memory_path(super().join(base, *parts))
