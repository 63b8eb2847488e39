"""One fragment of a dataset: reading it (:mod:`.reader`), writing new ones or new data files for
an existing one (:mod:`.writer`), scans over a version's fragments (:mod:`.scan`), and the options
of both (:mod:`.options`).

``write_fragments`` is the executor side of a dataset write (pylance's ``lance.fragment.write_fragments``).
``LanceFragment`` is found here too, as in pylance's ``lance.fragment`` (loaded on first use: it is
built on this package).
"""

from __future__ import annotations

from typing import Any

from lance_ops.fragment.options import ScanOptions, WriteOptions
from lance_ops.fragment.reader import FragmentReader, VersionFiles
from lance_ops.fragment.writer import (
    FragmentMetadata,
    write_data_file,
    write_fragments,
    write_new_fragments,
)

__all__ = [
    "FragmentMetadata",
    "FragmentReader",
    "ScanOptions",
    "VersionFiles",
    "WriteOptions",
    "write_data_file",
    "write_fragments",
    "write_new_fragments",
]


def __getattr__(name: str) -> Any:
    if name == "LanceFragment":
        from lance_ops.dataset_fragment import LanceFragment

        return LanceFragment
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
