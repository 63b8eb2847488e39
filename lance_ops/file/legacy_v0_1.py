"""``LegacyFileReader``: read rows of a legacy Lance 0.1 (v1) file.

The container (footer, metadata, embedded schema, page table, statistics) is parsed by
:mod:`lance_ops.encoding.legacy.v0_1.container` and its pages are decoded by
:mod:`lance_ops.encoding.legacy.v0_1`; this module maps them onto the file layer's reader:
the schema (:func:`~lance_ops.file.schema.fields_to_schema`), the row reads shared with v2
files (:class:`~lance_ops.file.reader.LanceFileReader`), metadata and page statistics.
:func:`lance_ops.file.reader.open_file` returns one for a file whose footer says 0.1 or 0.2.
Legacy files are read-only here.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import FieldDecoder, FileVersion
from lance_ops.encoding.legacy.v0_1 import LegacyField, LegacyFieldDecoder, layout_of
from lance_ops.encoding.legacy.v0_1.container import (
    FieldNode,
    FileBytes,
    LegacyTail,
    legacy_field,
    read_legacy_tail,
    statistics_tail,
)
from lance_ops.encoding.sketch import DistinctSketch
from lance_ops.errors import UnsupportedFeatureError
from lance_ops.file.page_statistics import PageStatistics, column_statistics
from lance_ops.file.reader import (
    ColumnMetadata,
    FileStatistics,
    LanceFileMetadata,
    LanceFileReader,
    PageMetadata,
    RowCount,
)
from lance_ops.file.schema import field_tree, fields_to_schema, storage_field


def _decoder(node: FieldNode, field: pa.Field, tail: LegacyTail) -> LegacyFieldDecoder:
    return LegacyFieldDecoder(legacy_field(node, storage_field(field)), tail.pages, tail.batch_offsets)


class LegacyFileReader(LanceFileReader):
    """A :class:`LanceFileReader` over a legacy (0.1) file; ``LanceFileReader(path)`` returns one
    when the footer says 0.1 or 0.2. Same reads (``read_all``, ``read_range``, ``take_rows``).

    ``size`` is accepted as :class:`LanceFileReader` takes it (it saves asking the store)."""

    def _open(self, tail_bytes: tuple[int, memoryview]) -> None:
        self._ranges = self._store.open_ranges(self.path)
        size, tail = tail_bytes
        self._file = FileBytes(self.path, size, tail, self._fetch)
        self._legacy = read_legacy_tail(self._file)
        self.version = FileVersion.V0_1
        self.schema = fields_to_schema(self._legacy.fields, self._legacy.schema_metadata)
        self._nodes = field_tree(self._legacy.fields)

    @property
    def num_rows(self) -> RowCount:
        return RowCount(self._legacy.num_rows)

    def _all_fields(self) -> list[LegacyField]:
        """Every field of the file, nested ones included."""
        out: list[LegacyField] = []
        pending = [
            legacy_field(node, storage_field(field))
            for node, field in zip(self._nodes, self.schema, strict=True)
        ]
        while pending:
            node = pending.pop()
            out.append(node)
            pending.extend(node.children)
        return out

    def _decoder(self, field_index: int) -> FieldDecoder:
        decoder = self._decoders.get(field_index)
        if decoder is None:
            decoder = _decoder(self._nodes[field_index], self.schema.field(field_index), self._legacy)
            self._decoders[field_index] = decoder
        return decoder

    def _field_bytes(self, index: int) -> int:
        """Every field weighs the same in a parallel read (legacy pages are not sized per field here)."""
        return 1

    def read_global_buffer(self, index: int) -> bytes:
        """Legacy files have no global buffers."""
        raise IndexError(f"{self.path}: legacy (0.1) files have no global buffers")

    def metadata(self) -> LanceFileMetadata:
        """Version, rows, schema and one column per field id with one page per batch.

        Legacy pages record a value count, not a byte size: pages list no buffers, their
        ``encoding`` is the layout name (``plain``, ``var_binary``, ``dictionary``, ``list``,
        ``struct``, ``null``) and ``length`` the page table's count.
        """
        tail = self._legacy
        layouts = {node.id: layout_of(node.data_type) for node in self._all_fields()}
        columns = []
        for index, runs in enumerate(tail.pages.entries):
            layout = layouts.get(tail.pages.min_field_id + index, "none")
            pages = [PageMetadata([], layout, int(length), 0) for _, length in runs]
            columns.append(ColumnMetadata(column_buffers=[], pages=pages))
        data_bytes = int(tail.metadata.page_table_position)
        return LanceFileMetadata(
            major_version=tail.major,
            minor_version=tail.minor,
            num_rows=self.num_rows,
            schema=self.schema,
            num_data_bytes=data_bytes,
            num_column_metadata_bytes=tail.size - data_bytes,
            num_global_buffer_bytes=0,
            global_buffers=[],
            columns=columns,
        )

    def page_statistics(self) -> tuple[pa.Table, np.ndarray] | None:
        """The page statistics pylance wrote (None when there are none) and the rows of each page:
        one row per data page (:func:`~lance_ops.encoding.legacy.v0_1.container.statistics_tail`)."""
        stats = statistics_tail(self._file, self._legacy)
        if stats is None:
            return None
        schema = fields_to_schema(stats.fields, {})
        rows = range(stats.num_rows)
        columns = [
            self._decode_field(field, _decoder(node, field, stats), rows)
            if len(rows)
            else pa.array([], field.type)
            for node, field in zip(field_tree(stats.fields), schema, strict=True)
        ]
        return pa.Table.from_arrays(columns, schema=schema), np.diff(self._legacy.batch_offsets)

    def column_statistics(self) -> PageStatistics | None:
        """:meth:`page_statistics` by top-level column name; pylance's float maxima ignore NaN."""
        found = self.page_statistics()
        if found is None:
            return None
        table, page_rows = found
        ids = {f.id: f.name for f in self._legacy.fields if f.parent_id == -1}
        columns = column_statistics(self.path, table, ids, dict.fromkeys(ids.values(), page_rows))
        return PageStatistics(columns, float_max_covers_nan=False)

    def column_sketches(self) -> dict[str, DistinctSketch]:
        """None: pylance keeps no sketches in 0.1 files."""
        return {}

    def file_statistics(self) -> FileStatistics:
        """Not available: legacy page tables hold value counts, not byte sizes."""
        raise UnsupportedFeatureError(f"{self.path}: legacy (0.1) files do not record page sizes")
