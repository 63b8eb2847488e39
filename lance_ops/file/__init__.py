"""Lance v2 data files: the container (footer, offset tables, global buffers), the schema
mapping and the public ``LanceFileReader`` / ``LanceFileWriter`` API (named like pylance's)."""

from __future__ import annotations

from lance_ops.encoding.api import FileVersion
from lance_ops.file.reader import (
    BufferMetadata,
    ColumnMetadata,
    ColumnStatistics,
    FileStatistics,
    LanceFileMetadata,
    LanceFileReader,
    PageMetadata,
    ReaderResults,
)
from lance_ops.file.session import LanceFileSession
from lance_ops.file.writer import LanceFileWriter

__all__ = [
    "BufferMetadata",
    "ColumnMetadata",
    "ColumnStatistics",
    "FileStatistics",
    "LanceFileMetadata",
    "LanceFileReader",
    "LanceFileSession",
    "LanceFileWriter",
    "PageMetadata",
    "ReaderResults",
    "stable_version",
]


def stable_version() -> str:
    """The file version ``"stable"`` names (what new datasets and files get by default), as pylance."""
    return str(FileVersion.parse("stable"))
