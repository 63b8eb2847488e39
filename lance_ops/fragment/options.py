"""Options of fragment reads and writes, as small frozen dataclasses passed down whole."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from lance_ops.encoding.plan import EncodingPlan
from lance_ops.query.predicate import Predicate

DEFAULT_BATCH_SIZE = 8192
DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024
DEFAULT_MAX_ROWS_PER_GROUP = 1024
DEFAULT_MAX_BYTES_PER_FILE = 90 * 1024**3
# Dataset config key: "false" makes every writer of the dataset leave page statistics out of the
# data files it writes (unless a write asks for them); anything else, or no key, writes them.
PAGE_STATISTICS_CONFIG_KEY = "lance-ops.page-statistics"
# Dataset config key: the ``compression`` option (e.g. "auto") a create / overwrite was given,
# which later appends follow unless they name their own.
COMPRESSION_CONFIG_KEY = "lance-ops.compression"


@dataclass(frozen=True)
class ScanOptions:
    """What a scan returns: columns (resolved names), the rows a predicate keeps, extra columns.

    ``batch_size`` bounds the rows of each returned table / batch.
    """

    columns: tuple[str, ...] = ()
    predicate: Predicate | None = None
    with_row_id: bool = False
    with_row_address: bool = False
    batch_size: int = DEFAULT_BATCH_SIZE


@dataclass(frozen=True)
class WriteOptions:
    """How data files are written: file limits, file format version and storage options.

    ``max_rows_per_group`` (rows per batch) only applies to legacy (0.1) files.
    ``encoding_plan`` (the dataset's, :mod:`lance_ops.encoding.plan`) sets per-column encodings.
    ``page_statistics``: whether data files carry page statistics and sketches
    (:mod:`lance_ops.file.page_statistics`); None follows the dataset's
    :data:`PAGE_STATISTICS_CONFIG_KEY` (:meth:`for_dataset`), on by default. ``compression``: the
    data files' value compression default (``LanceFileWriter``'s option, e.g. ``"auto"``); None
    follows the dataset's :data:`COMPRESSION_CONFIG_KEY`, else pylance's choices.
    """

    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE
    data_storage_version: str = "stable"
    storage_options: Mapping[str, str] | None = field(default=None, hash=False)
    encoding_plan: EncodingPlan | None = field(default=None, hash=False)
    page_statistics: bool | None = None
    compression: str | None = None

    def __post_init__(self) -> None:
        if self.max_rows_per_file <= 0 or self.max_rows_per_group <= 0:
            raise ValueError("max_rows_per_file and max_rows_per_group must be positive")

    @property
    def writes_page_statistics(self) -> bool:
        return self.page_statistics is not False

    def for_dataset(self, config: Mapping[str, str]) -> WriteOptions:
        """These options with ``page_statistics`` and ``compression`` decided by the dataset's config
        when not given."""
        out = self
        if out.compression is None and config.get(COMPRESSION_CONFIG_KEY):
            out = replace(out, compression=config[COMPRESSION_CONFIG_KEY])
        if out.page_statistics is not None:
            return out
        return replace(out, page_statistics=config.get(PAGE_STATISTICS_CONFIG_KEY, "").lower() != "false")
