"""One fragment of a dataset: reading it (:mod:`.reader`), writing new ones or new data files for
an existing one (:mod:`.writer`), scans over a version's fragments (:mod:`.scan`), and the options
of both (:mod:`.options`).

``write_fragments`` is the executor side of a dataset write (pylance's ``lance.fragment.write_fragments``).
"""

from __future__ import annotations

from lance_ops.fragment.options import ScanOptions, WriteOptions
from lance_ops.fragment.reader import FragmentReader, VersionFiles
from lance_ops.fragment.writer import (
    FragmentMetadata,
    write_data_file,
    write_fragments,
    write_new_fragments,
)
from lance_ops.table.manifest import DataFile, DeletionFile, RowIdMeta

__all__ = [
    "DataFile",
    "DeletionFile",
    "FragmentMetadata",
    "FragmentReader",
    "RowIdMeta",
    "ScanOptions",
    "VersionFiles",
    "WriteOptions",
    "write_data_file",
    "write_fragments",
    "write_new_fragments",
]
