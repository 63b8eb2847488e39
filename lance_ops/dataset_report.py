"""What the dataset report (:mod:`lance_ops.report`, ``lance-ops report``) shows, as plain data.

:func:`collect` gathers, for one dataset version, its history over versions, per top-level column
the bytes on disk by encoding next to the raw Arrow size of the same rows, and per fragment its
rows and bytes: a :class:`ReportData` that any front end can render or attach.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from lance_ops.dataset import LanceDataset
from lance_ops.file import open_file as open_lance_file
from lance_ops.file.describe import file_report
from lance_ops.table.naming import DATA_DIR, child_uri

__all__ = ["ReportData", "collect", "column_storage", "data_file_uri"]


@dataclass(frozen=True)
class ReportData:
    """What the plots show: history rows (``ds.history()``), per-column storage
    (:func:`column_storage`) and per-fragment ``(rows, bytes)``."""

    uri: str
    version: int
    history: list[dict[str, Any]]
    columns: list[dict[str, Any]]
    fragments: list[tuple[int, int]]


def collect(ds: LanceDataset) -> ReportData:
    """Gather everything the report plots from one dataset version (reads every data file once)."""
    fragments = [
        (f.metadata.physical_rows, sum(d.file_size_bytes or 0 for d in f.data_files()))
        for f in ds.get_fragments()
    ]
    return ReportData(ds.uri, ds.version, ds.history().to_pylist(), column_storage(ds), fragments)


def data_file_uri(ds: LanceDataset, path: str) -> str:
    """The URI of the data file ``path`` (as a fragment names it) of ``ds``."""
    return child_uri(ds.uri, DATA_DIR, path)


def _top_level(name: str) -> str:
    return name.split(".")[0].split("[")[0]


def column_storage(ds: LanceDataset) -> list[dict[str, Any]]:
    """Per top-level column of this version: bytes on disk, bytes by encoding name, and the raw
    Arrow size of the same (physical) rows, read back from every data file."""
    on_disk: dict[str, Counter[str]] = {name: Counter() for name in ds.schema.names}
    raw: Counter[str] = Counter()
    for fragment in ds.get_fragments():
        for data_file in fragment.data_files():
            uri = data_file_uri(ds, data_file.path)
            reader = open_lance_file(uri, storage_options=ds.storage_options)
            for column in file_report(uri, reader, pages=False)["columns"]:
                name = _top_level(column["name"])
                if name in on_disk:
                    on_disk[name].update(column["encodings"])
            table = reader.read_all().to_table()
            for name in table.column_names:
                if name in on_disk:
                    raw[name] += table.column(name).nbytes
    return [
        {
            "column": name,
            "type": str(ds.schema.field(name).type),
            "bytes": sum(encodings.values()),
            "encodings": dict(encodings),
            "raw_bytes": raw[name],
            "compression_ratio": raw[name] / sum(encodings.values()) if sum(encodings.values()) else None,
        }
        for name, encodings in on_disk.items()
    ]
