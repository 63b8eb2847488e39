"""``LanceFileSession``: readers, writers and plain file operations below one base path.

pylance's session shares one object store (and its credentials) among the readers and writers it
opens; here the store is resolved once from ``base_path`` and ``storage_options`` and every path
given to the session is relative to that base (``"a/b.lance"``). Missing files raise
:class:`~lance_ops.errors.DatasetNotFoundError` (a ``FileNotFoundError``, so an ``OSError`` as
pylance raises).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from lance_ops.errors import DatasetNotFoundError
from lance_ops.file.reader import FileReader, open_file
from lance_ops.file.writer import LanceFileWriter
from lance_ops.io.context import StorageContext

__all__ = ["LanceFileSession"]


class LanceFileSession:
    """Lance files below ``base_path`` (a local path or a URI), opened with shared storage options."""

    def __init__(
        self, base_path: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
    ) -> None:
        text = os.fspath(base_path)
        self._base = text.rstrip("/") if "://" in text else os.path.abspath(os.path.expanduser(text))
        self._storage = StorageContext.open(self._base, storage_options)
        self._store, self._root = self._storage.store, self._storage.root

    def _path(self, path: str) -> str:
        return self._storage.path(path)

    def open_reader(self, path: str, columns: Sequence[str] | None = None) -> FileReader:
        return open_file(self._path(path), store=self._store, columns=columns)

    def open_writer(
        self,
        path: str,
        *,
        schema: pa.Schema | None = None,
        data_cache_bytes: int | None = None,
        version: str | None = None,
        keep_original_array: bool | None = None,
        max_page_bytes: int | None = None,
    ) -> LanceFileWriter:
        """A writer of ``path`` (``keep_original_array`` is a pylance memory knob with no use here)."""
        return LanceFileWriter(
            self._path(path),
            schema,
            version=version or "stable",
            store=self._store,
            max_page_bytes=max_page_bytes,
            data_cache_bytes=data_cache_bytes,
        )

    def contains(self, path: str) -> bool:
        return self._store.exists(self._path(path))

    def list(self, path: str | None = None) -> list[str]:
        """Every file below ``path`` (default: the base), as paths relative to the base."""
        prefix = self._root.rstrip("/") + "/"
        below = self._path(path) if path else self._root
        return [info.path[len(prefix) :] for info in self._store.walk(below) if info.path.startswith(prefix)]

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        self._require(path)
        return bytes(self._store.read_range(self._path(path), offset, length))

    def delete_file(self, path: str) -> None:
        self._require(path)
        self._store.delete(self._path(path))

    def upload_file(self, local_path: str | os.PathLike[str], remote_path: str) -> None:
        with open(local_path, "rb") as source, self._store.open_output(self._path(remote_path)) as out:
            while chunk := source.read(1 << 22):
                out.write(chunk)

    def download_file(self, remote_path: str, local_path: str | os.PathLike[str]) -> None:
        self._require(remote_path)
        Path(local_path).parent.mkdir(parents=True, exist_ok=True)
        with open(local_path, "wb") as out:
            out.write(self._store.read(self._path(remote_path)))

    def _require(self, path: str) -> None:
        if not self._store.exists(self._path(path)):
            raise DatasetNotFoundError(f"no file {path!r} below {self._base}")
