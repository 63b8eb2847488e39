"""Lance data files: the container (footer, offset tables, global buffers), the schema
mapping and the public ``LanceFileReader`` / ``LanceFileWriter`` API (named like pylance's).

:func:`open_file` opens a file of any version (``LanceFileReader(path)`` calls it) and returns
a :class:`FileReader`, the type callers hold."""

from __future__ import annotations

from lance_ops.encoding.api import FileVersion
from lance_ops.file.reader import (
    BufferMetadata,
    ColumnMetadata,
    ColumnStatistics,
    FileReader,
    FileStatistics,
    LanceFileMetadata,
    LanceFileReader,
    PageMetadata,
    ReaderResults,
    open_file,
)
from lance_ops.file.session import LanceFileSession
from lance_ops.file.writer import LanceFileWriter

__all__ = [
    "BufferMetadata",
    "ColumnMetadata",
    "ColumnStatistics",
    "FileReader",
    "FileStatistics",
    "LanceFileMetadata",
    "LanceFileReader",
    "LanceFileSession",
    "LanceFileWriter",
    "PageMetadata",
    "ReaderResults",
    "open_file",
    "stable_version",
]


def stable_version() -> str:
    """The file version ``"stable"`` names (what new datasets and files get by default), as pylance."""
    return str(FileVersion.parse("stable"))
