"""The codec's contract with the file layer.

The file layer owns bytes on disk; the codec owns what a page means. The file writer
hands each top-level field's rows to a :class:`FieldEncoder` (one call per page worth
of rows) and stores the returned :class:`EncodedPage` objects, plus, through a
:data:`WriteExternal` callable, the blob bytes a page addresses by file position; the file
reader describes stored pages as :class:`PageInfo` and asks a :class:`FieldDecoder` for
rows, giving it a :data:`Fetch` callable so the codec reads exactly the byte ranges it needs
(mini-block metadata first, then only the chunks that hold requested rows) without
importing any I/O code.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import pyarrow as pa
from google.protobuf.message import Message

from lance_ops._proto import encodings_v2_0_pb2 as pb20
from lance_ops.errors import UnsupportedFeatureError

# The page description type: ``encodings21.PageLayout`` for 2.1+, ``encodings.ArrayEncoding`` for 2.0.
Layout = TypeVar("Layout", bound=Message)


class FileVersion(enum.Enum):
    """Lance data file versions. ``value`` is the (major, minor) recorded in manifests."""

    V0_1 = (0, 1)  # legacy v1 container
    V2_0 = (2, 0)
    V2_1 = (2, 1)
    V2_2 = (2, 2)

    @property
    def major(self) -> int:
        return self.value[0]

    @property
    def minor(self) -> int:
        return self.value[1]

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str | FileVersion | None) -> FileVersion:
        """Parse a user-facing version string ("2.1", "stable", "legacy", ...)."""
        if isinstance(text, FileVersion):
            return text
        key = "stable" if text is None else str(text).strip().lower()
        aliases = {
            "stable": cls.V2_2,
            "2.2": cls.V2_2,
            "2.1": cls.V2_1,
            "2.0": cls.V2_0,
            "0.3": cls.V2_0,
            "legacy": cls.V0_1,
            "0.1": cls.V0_1,
        }
        if key not in aliases:
            raise UnsupportedFeatureError(f"unknown Lance file version {text!r}")
        return aliases[key]

    @classmethod
    def from_footer(cls, major: int, minor: int) -> FileVersion:
        """Map footer (major, minor) to a version; 2.0 files carry (0, 3)."""
        if (major, minor) in ((0, 3), (2, 0)):
            return cls.V2_0
        if major == 0 and minor < 3:
            return cls.V0_1
        for v in cls:
            if v.value == (major, minor):
                return v
        raise UnsupportedFeatureError(f"unsupported Lance file version {major}.{minor}")

    @property
    def footer(self) -> tuple[int, int]:
        """The (major, minor) pylance writes into a file footer."""
        return (0, 3) if self is FileVersion.V2_0 else self.value


@dataclass(frozen=True)
class EncodedPage(Generic[Layout]):
    """One encoded page of one column, ready to be written by the file layer."""

    buffers: tuple[bytes | memoryview | np.ndarray, ...]  # page buffers in index order
    layout: Layout
    num_rows: int  # top-level rows in the page (2.0: values at the column's level)


@dataclass(frozen=True)
class PageInfo(Generic[Layout]):
    """A stored page as the file reader knows it."""

    layout: Layout
    buffers: tuple[tuple[int, int], ...]  # absolute (position, size) of each page buffer
    num_rows: int  # Page.length (2.0: values at the column's level)
    first_row: int  # number of values in the column's earlier pages


# Read absolute byte ranges (position, size) of the file; returns one buffer per range.
Fetch = Callable[[Sequence[tuple[int, int]]], list[memoryview]]

# Write buffers outside any page (blob bytes), in order, before the page that refers to them;
# returns the absolute file position of each.
WriteExternal = Callable[[Sequence[memoryview]], list[int]]


class FieldEncoder(ABC):
    """Encodes the rows of one top-level field into pages of its column(s)."""

    num_columns: int
    # Set by the file writer when the codec cuts its own pages (2.0): a column's values above
    # this many bytes are split into pages of equal row counts; None = one page per column.
    max_page_bytes: int | None = None
    # Whether ``encode`` may call ``external`` (blob columns). The file writer encodes several
    # fields at once on threads only when none of them does (external buffers land in call order).
    writes_external: bool = True

    @abstractmethod
    def encode(self, array: pa.Array, external: WriteExternal | None = None) -> list[list[EncodedPage]]:
        """Encode ``array`` (rows of this field) into pages; one list per column.

        ``external`` stores the out-of-page buffers of blob columns; without it a blob
        column cannot be encoded.
        """

    def finish(self) -> list[list[EncodedPage]]:
        """Pages produced only when the file is closed (2.0 struct headers); one list per column."""
        return [[] for _ in range(self.num_columns)]

    def column_encoding(self, column: int) -> pb20.ColumnEncoding:
        """The column-level encoding of column ``column``: ``values`` unless the codec says otherwise."""
        encoding = pb20.ColumnEncoding()
        encoding.values.SetInParent()
        return encoding


class FieldDecoder(ABC):
    """Reads rows of one top-level field from its column(s)."""

    @abstractmethod
    def read(self, fetch: Fetch, rows: range | np.ndarray) -> pa.Array:
        """Decode the given rows: a ``range`` or sorted, unique int64 row indices."""
