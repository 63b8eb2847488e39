"""Reading one index's Lance files and writing the files of its successor.

An index lives in ``<root>/_indices/<uuid>/``; every file pylance 14 puts there is a Lance 2.2 file
whose schema metadata and global buffers (index 1, 2, ...; 0 is the file's own schema) hold the
index's parameters. A rewritten index keeps those byte for byte unless its codec says otherwise, so
:class:`IndexFileData` carries them from the old file to the new one.

Errors name the index: a file that is missing or does not decode raises
:class:`~lance_ops.errors.IndexCorruptError`.

A remap that fails half way leaves nothing behind: inside :func:`new_index_directory` every
directory an :class:`IndexWriter` starts is removed again when the block raises (and the first
writer takes the uuid the caller chose, so a caller that loses the whole block, e.g. a failed
Spark task, still knows which directory to remove with :func:`remove_index_directory`).
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

import pyarrow as pa

from lance_ops.errors import CorruptFileError, IndexCorruptError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.io.context import StorageContext
from lance_ops.table.manifest import IndexFile, IndexMetadata

__all__ = [
    "IndexFileData",
    "IndexWriter",
    "RemapResult",
    "cached_index_file",
    "index_file_names",
    "new_index_directory",
    "read_index_file",
    "remove_index_directory",
]


@dataclass(frozen=True)
class RemapResult:
    """A rewritten index: its new uuid (16 bytes), files (with sizes), details and version.

    ``details`` is the ``index_details`` Any as ``(type_url, value)``, like
    :attr:`IndexMetadata.details`. :meth:`metadata_for` builds the manifest entry that replaces
    the old index (same name, fields and ``dataset_version``, as pylance keeps them).
    """

    uuid: bytes
    files: tuple[IndexFile, ...]
    index_details: tuple[str, bytes] | None
    index_version: int | None

    @property
    def uuid_text(self) -> str:
        return str(uuid_module.UUID(bytes=self.uuid))

    def metadata_for(self, index: IndexMetadata, fragment_bitmap: bytes) -> IndexMetadata:
        return replace(
            index,
            uuid=self.uuid,
            files=self.files,
            details=self.index_details,
            index_version=self.index_version,
            fragment_bitmap=fragment_bitmap,
        )


@dataclass(frozen=True)
class IndexFileData:
    """One index file read whole: its rows, schema (with metadata), version and global buffers."""

    table: pa.Table
    version: str
    global_buffers: tuple[bytes, ...]

    @property
    def schema(self) -> pa.Schema:
        return self.table.schema

    @property
    def metadata(self) -> Mapping[bytes, bytes]:
        return self.table.schema.metadata or {}

    def meta(self, key: str, index: IndexMetadata, path: str) -> bytes:
        """Schema-metadata value ``key``; missing: IndexCorruptError naming the index."""
        value = self.metadata.get(key.encode())
        if value is None:
            raise IndexCorruptError(path, f"index {index.name!r}: metadata key {key!r} is missing")
        return value

    def column(self, name: str, index: IndexMetadata, path: str) -> pa.ChunkedArray:
        if name not in self.table.column_names:
            raise IndexCorruptError(path, f"index {index.name!r}: column {name!r} is missing")
        return self.table.column(name)


def _file_path(ctx: StorageContext, index: IndexMetadata, name: str) -> str:
    return ctx.path("_indices", str(uuid_module.UUID(bytes=index.uuid)), name)


def index_file_names(ctx: StorageContext, index: IndexMetadata) -> list[str]:
    """The index's file names: from the manifest (pylance 14 lists them), else its directory."""
    if index.files:
        return [f.path for f in index.files]
    directory = ctx.path("_indices", str(uuid_module.UUID(bytes=index.uuid)))
    return [info.path.rsplit("/", 1)[-1] for info in ctx.store.list(directory)]


def read_index_file(ctx: StorageContext, index: IndexMetadata, name: str) -> IndexFileData:
    """Read ``name`` of ``index`` whole (index files are read whole by their remap anyway)."""
    path = _file_path(ctx, index, name)
    size = next((f.size_bytes for f in index.files if f.path == name), None)
    try:
        reader = LanceFileReader(path, store=ctx.store, size=size or None)
        table = reader.read_all().to_table()
        buffers = tuple(reader.read_global_buffer(i) for i in range(1, len(reader.metadata().global_buffers)))
    except FileNotFoundError as exc:
        raise IndexCorruptError(path, f"index {index.name!r}: file {name} is missing") from exc
    except CorruptFileError as exc:
        raise IndexCorruptError(path, f"index {index.name!r}: {exc.reason}") from exc
    return IndexFileData(table, str(reader.version), buffers)


def cached_index_file(ctx: StorageContext, index: IndexMetadata, name: str) -> IndexFileData:
    """:func:`read_index_file` through the opened dataset's index cache (index files never change
    under a uuid)."""
    return ctx.index_cache.get(
        ("file", index.uuid, name), lambda: read_index_file(ctx, index, name), _file_bytes, kind="index"
    )


def _file_bytes(data: IndexFileData) -> int:
    return int(data.table.nbytes) + sum(len(b) for b in data.global_buffers)


@dataclass
class _Claim:
    """The directories writers started inside one :func:`new_index_directory` block."""

    preset: bytes | None
    started: list[bytes] = field(default_factory=list)


_CLAIM: ContextVar[_Claim | None] = ContextVar("lance_ops_index_claim", default=None)


def remove_index_directory(ctx: StorageContext, uuid: bytes) -> None:
    """Delete ``_indices/<uuid>`` and its files (nothing to do when it does not exist)."""
    directory = ctx.path("_indices", str(uuid_module.UUID(bytes=uuid)))
    for info in ctx.store.walk(directory):
        ctx.store.delete(info.path)
    ctx.store.remove_directories(directory)


@contextmanager
def new_index_directory(ctx: StorageContext, uuid: bytes | None = None) -> Iterator[None]:
    """Index writers created in this block (this thread) are tracked: the first takes ``uuid``
    when given, and if the block raises, every directory they started is removed before the
    error goes on (blocks nest: an inner block that succeeds hands its directories to the outer)."""
    outer = _CLAIM.get()
    claim = _Claim(uuid)
    token = _CLAIM.set(claim)
    try:
        yield
    except BaseException:
        for started in claim.started:
            remove_index_directory(ctx, started)
        raise
    else:
        if outer is not None:  # an enclosing block answers for them from now on
            outer.started.extend(claim.started)
    finally:
        _CLAIM.reset(token)


class IndexWriter:
    """Writes the files of a new index directory (a fresh uuid4, or the one
    :func:`new_index_directory` chose) and collects their sizes."""

    def __init__(self, ctx: StorageContext) -> None:
        self._ctx = ctx
        claim = _CLAIM.get()
        if claim is not None and claim.preset is not None and not claim.started:
            self.uuid = claim.preset
        else:
            self.uuid = uuid_module.uuid4().bytes
        if claim is not None:
            claim.started.append(self.uuid)
        self._files: list[IndexFile] = []

    def path(self, name: str) -> str:
        return self._ctx.path("_indices", str(uuid_module.UUID(bytes=self.uuid)), name)

    def write(
        self,
        name: str,
        table: pa.Table,
        *,
        version: str = "2.2",
        global_buffers: Sequence[bytes] = (),
    ) -> None:
        """Write ``table`` (its schema metadata included) as ``name`` with ``global_buffers`` as
        buffers 1, 2, ... in order."""
        writer = LanceFileWriter(
            self.path(name), table.schema, version=version, page_statistics=False, store=self._ctx.store
        )
        with writer:
            for buffer in global_buffers:
                writer.add_global_buffer(buffer)
            if table.num_rows:
                writer.write_batch(table)
        self._files.append(IndexFile(name, writer.bytes_written))

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write ``data`` as ``name`` (a file that is not a Lance 2.x file: pylance's legacy index)."""
        self._ctx.store.write(self.path(name), data)
        self._files.append(IndexFile(name, len(data)))

    def copy(self, ctx: StorageContext, index: IndexMetadata, name: str) -> None:
        """Copy ``name`` of ``index`` unchanged."""
        source = _file_path(ctx, index, name)
        try:
            data = ctx.store.read(source)
        except FileNotFoundError as exc:
            raise IndexCorruptError(source, f"index {index.name!r}: file {name} is missing") from exc
        self._ctx.store.write(self.path(name), data)
        self._files.append(IndexFile(name, len(data)))

    def result(self, index: IndexMetadata) -> RemapResult:
        """The new index, with ``index``'s details and version (the codecs here never change them)."""
        order = {f.path: i for i, f in enumerate(index.files)}
        files = sorted(self._files, key=lambda f: (order.get(f.path, len(order)), f.path))
        return RemapResult(self.uuid, tuple(files), index.details, index.index_version)
