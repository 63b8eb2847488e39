"""The datasets lance-ops maintains, declared in ``lance_datasets.yaml`` (beside ``workspace.yaml``).

One file, read by both orchestrators: the Dagster definitions (:mod:`assets.config` re-exports this
module) and the Airflow DAG factory (:func:`lance_ops.airflow.dags_from_config`). Nothing here
imports either of them; parsing needs PyYAML and croniter, which the ``dagster`` and ``airflow``
extras bring.

The file's location can be overridden with the environment variable ``LANCE_OPS_DATASETS``. It
holds one list, ``datasets``; each entry names a dataset, where it lives, where its rows come from
(optional) and how it is maintained::

    datasets:
      - name: demo                      # letters, digits, underscores: it names assets and jobs
        uri: data/demo.lance            # relative paths are relative to this file
        storage_options: {}             # object-store options (credentials, endpoint); values may
                                        # name environment variables: "${NAME}" or {env: NAME}
        ingest:                         # optional: a daily-partitioned ingest asset
          kind: demo                    # demo rows, or files: one file per day
          start_date: "2026-11-01"
          rows_per_partition: 1000
          fill_missing: compute         # columns added later: compute | null | error
          mode: replace                 # replace the day's rows, or upsert them by their keys
          keys: null                    # the key columns of mode upsert, e.g. [id]
        maintenance:
          cron: "0 3 * * *"             # the maintenance schedule
          compaction: {target_rows_per_fragment: 1048576, max_fragments: 64, max_small_files: 8,
                       small_file_rows: 1024, max_deleted_ratio: 0.1, commit_every: null}
          cleanup: {older_than_days: 7, retain_versions: null}
          statistics: {columns: null}
        reports_dir: null               # HTML reports; default reports/<name>/ beside a local dataset

A ``storage_options`` value written ``"${NAME}"`` (or ``{env: NAME}``; ``${NAME}`` may also sit
inside a longer string) refers to the environment variable ``NAME``: loading checks that every
variable named is set (an unset one fails the load, naming the variable), but keeps the reference,
not the value -- :func:`resolve_storage_options` substitutes the values where the options are used
(:class:`assets.resources.LanceDatasetResource`), so secrets never reach Dagster's configuration
display, run configuration, logs or metadata.

Parsing builds frozen dataclasses; anything wrong (a missing or unknown field, a wrong type, a
value out of range, a repeated name) raises :class:`DatasetsConfigError` naming the file, the entry
and the field, when the code location (or the Airflow DAG file) loads, before anything runs.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from croniter import croniter

from lance_ops.errors import LanceOpsError, StorageOptionError

ENV_VAR = "LANCE_OPS_DATASETS"
DEFAULT_PATH = Path(__file__).resolve().parent.parent / "lance_datasets.yaml"
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
INGEST_KINDS = ("demo", "files")
INGEST_MODES = ("replace", "upsert")
FILL_MISSING = ("compute", "null", "error")
# An environment-variable reference in a storage option's value.
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A demo day's rows have one timestamp per second of that day.
SECONDS_PER_DAY = 86_400

T = TypeVar("T")


class DatasetsConfigError(LanceOpsError, ValueError):
    """An entry of the datasets file is wrong; ``entry`` and ``field`` say where."""

    def __init__(self, path: str, entry: str, field: str, reason: str) -> None:
        super().__init__(f"{path}: dataset {entry!r}, field {field!r}: {reason}")
        self.path = path
        self.entry = entry
        self.field = field
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[str, str, str, str]]:
        return type(self), (self.path, self.entry, self.field, self.reason)


@dataclass(frozen=True)
class IngestSource:
    """Where a dataset's daily partitions come from.

    ``demo``: ``rows_per_partition`` generated demo rows per day (their ``ts`` falls in that day).
    ``files``: the file ``path`` (with ``{partition}`` replaced by the day, ``YYYY-MM-DD``) read by
    Spark in ``format``; ``partition_column`` (a date, timestamp or string column) says which
    rows of the dataset a day replaces. Partitions run from ``start_date`` to yesterday
    (``end_offset=1``: to today). ``fill_missing`` says what a day's rows get for a column the
    dataset gained after the source was made (e.g. by ``add_columns``): ``compute`` (the column's
    SQL expression, when it was added from one; else nulls if it is nullable), ``null`` (nullable
    columns only) or ``error``; a non-nullable column is never filled with nulls. ``mode``:
    ``replace`` rewrites the day's rows (``replace_where`` on the partition column), ``upsert``
    merges them into the dataset by ``keys`` (late and corrected records: matched rows updated,
    new ones inserted, nothing else touched; :func:`jobs.merge_insert`).
    """

    kind: Literal["demo", "files"]
    start_date: str
    partition_column: str = "ts"
    rows_per_partition: int = 1000
    path: str | None = None
    format: str = "parquet"
    end_offset: int = 0
    fill_missing: Literal["compute", "null", "error"] = "compute"
    mode: Literal["replace", "upsert"] = "replace"
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompactionPolicy:
    """Compaction's target and the thresholds past which the sensor requests it."""

    target_rows_per_fragment: int | None = None
    max_fragments: int = 64
    max_small_files: int = 8
    small_file_rows: int = 1024
    max_deleted_ratio: float = 0.1
    commit_every: int | None = None
    # the sensor requests compaction past this average overlap depth of a clustering key (L20)
    max_overlap_depth: float | None = None


@dataclass(frozen=True)
class CleanupPolicy:
    """Which old versions cleanup removes (as ``cleanup_old_versions``); tagged versions stay."""

    older_than_days: float = 7.0
    retain_versions: int | None = None

    @property
    def older_than(self) -> dt.timedelta:
        return dt.timedelta(days=self.older_than_days)


@dataclass(frozen=True)
class StatisticsPolicy:
    """Columns that get statistics (None: every column that can) on each rebuild."""

    columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DeclaredIndex:
    """An index the dataset should have (``maintenance.indices.declare`` entries): built by the
    ``indices`` step when no index of its name (default ``<column>_idx``) exists."""

    column: str
    type: str
    name: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def index_name(self) -> str:
        return self.name or f"{self.column.replace('.', '_')}_idx"


@dataclass(frozen=True)
class IndicesPolicy:
    """The share of live rows an index may leave unindexed before the ``indices_coverage`` check
    fails (the ``indices`` maintenance step adds appended fragments to the indices), and the
    indices declared (built when missing)."""

    max_unindexed_ratio: float = 0.1
    declare: tuple[DeclaredIndex, ...] = ()


@dataclass(frozen=True)
class MaintenancePolicy:
    """When maintenance runs (``cron`` in ``timezone``) and how each operation is configured."""

    cron: str = "0 3 * * *"
    timezone: str = "UTC"
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    cleanup: CleanupPolicy = field(default_factory=CleanupPolicy)
    statistics: StatisticsPolicy = field(default_factory=StatisticsPolicy)
    indices: IndicesPolicy = field(default_factory=IndicesPolicy)


@dataclass(frozen=True)
class DatasetConfig:
    """One declared dataset."""

    name: str
    uri: str
    # As written: ``${NAME}`` references stay unresolved (see :func:`resolve_storage_options`).
    storage_options: Mapping[str, str] = field(default_factory=dict, hash=False)
    description: str = ""
    ingest: IngestSource | None = None
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    reports_dir: str | None = None

    @property
    def reports_path(self) -> Path | None:
        """Where maintenance writes the dataset's HTML reports: ``reports_dir``, else
        ``reports/<name>/`` beside a local dataset; None for a remote dataset without one."""
        if self.reports_dir is not None:
            return Path(self.reports_dir)
        if "://" in self.uri and not self.uri.startswith("file://"):
            return None
        return Path(self.uri.removeprefix("file://")).parent / "reports" / self.name


@dataclass(frozen=True)
class DatasetsConfig:
    """Everything the datasets file declares, and where it was read from."""

    path: str
    datasets: tuple[DatasetConfig, ...]


class _Section:
    """One mapping of the file, read field by field with errors that say where."""

    def __init__(self, path: str, entry: str, prefix: str, raw: Any) -> None:
        self.path, self.entry, self.prefix = path, entry, prefix
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise self.error("", f"must be a mapping, got {type(raw).__name__}")
        self.raw: Mapping[str, Any] = raw

    def error(self, name: str, reason: str) -> DatasetsConfigError:
        where = ".".join(p for p in (self.prefix, name) if p) or "<entry>"
        return DatasetsConfigError(self.path, self.entry, where, reason)

    def check_known(self, known: tuple[str, ...]) -> None:
        for key in self.raw:
            if key not in known:
                raise self.error(str(key), f"unknown field; expected one of {', '.join(known)}")

    def get(
        self,
        name: str,
        kind: type[T] | tuple[type, ...],
        default: Any = ...,
        *,
        check: Callable[[Any], str | None] | None = None,
    ) -> Any:
        """The value of ``name`` (of ``kind``; ``default`` when absent, required when no default)."""
        if name not in self.raw or self.raw[name] is None and default is not ...:
            if default is ...:
                raise self.error(name, "is required")
            return default
        value = self.raw[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # YAML ints are valid floats; bools are not numbers.
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            if not (float in kinds and isinstance(value, int) and not isinstance(value, bool)):
                names = " or ".join(k.__name__ for k in kinds)
                raise self.error(name, f"must be {names}, got {value!r}")
            value = float(value)
        problem = check(value) if check is not None else None
        if problem:
            raise self.error(name, problem)
        return value

    def section(self, name: str) -> _Section:
        return _Section(
            self.path, self.entry, f"{self.prefix}.{name}" if self.prefix else name, self.raw.get(name)
        )


def _positive(value: float) -> str | None:
    return None if value > 0 else f"must be positive, got {value!r}"


def _non_negative(value: float) -> str | None:
    return None if value >= 0 else f"must not be negative, got {value!r}"


def _ratio(value: float) -> str | None:
    return None if 0 <= value <= 1 else f"must be between 0 and 1, got {value!r}"


def _iso_date(value: str) -> str | None:
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return f"must be a date YYYY-MM-DD, got {value!r}"
    return None


def is_valid_cron_string(value: str) -> bool:
    """Whether ``value`` is a cron schedule both orchestrators accept: croniter parses it into five
    fields (no seconds) and it is not the 30th or 31st of February only. This is the rule of
    Dagster's ``is_valid_cron_string`` (which ``ScheduleDefinition`` applies), on croniter itself,
    the library Airflow's cron timetables use."""
    if not croniter.is_valid(value):
        return False
    fields, *_ = croniter.expand(value)
    if len(fields) != 5:
        return False
    day, month = fields[2], fields[3]
    return not (month == [2] and len(day) == 1 and day[0] in (30, 31))


def _cron(value: str) -> str | None:
    return None if is_valid_cron_string(value) else f"is not a valid cron expression: {value!r}"


def _timezone(value: str) -> str | None:
    try:
        zoneinfo.ZoneInfo(value)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return f"is not a known time zone: {value!r}"
    return None


def _name(value: str) -> str | None:
    if NAME_PATTERN.match(value):
        return None
    return f"must start with a letter and hold only letters, digits and underscores, got {value!r}"


def environment_references(value: str) -> list[str]:
    """The environment variables ``value`` refers to as ``${NAME}``, in order."""
    return ENV_REFERENCE.findall(value)


def resolve_storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with every ``${NAME}`` replaced by the environment variable's value.

    An unset variable raises :class:`~lance_ops.errors.StorageOptionError` naming the option and
    the variable (never a value)."""

    def resolve(key: str, value: str) -> str:
        def lookup(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise StorageOptionError(
                    f"storage option {key!r} refers to the environment variable {name!r}, which is not set"
                )
            return os.environ[name]

        return ENV_REFERENCE.sub(lookup, value)

    return {key: resolve(key, value) for key, value in options.items()}


def _storage_options(s: _Section) -> dict[str, str]:
    """The ``storage_options`` mapping: ``{env: NAME}`` written as ``${NAME}``; every variable named
    must be set now (only its presence is checked; the value is read where the option is used)."""
    raw = s.get("storage_options", dict, {})
    options: dict[str, str] = {}
    for key, value in raw.items():
        if isinstance(value, Mapping) and set(value) == {"env"} and isinstance(value["env"], str):
            value = f"${{{value['env']}}}"
            if not ENV_REFERENCE.fullmatch(value):
                raise s.error("storage_options", f"{key!r}: env must name an environment variable")
        if not isinstance(key, str) or not isinstance(value, str):
            raise s.error(
                "storage_options", f"{key!r}: keys and values must be strings (or {{env: NAME}} for a value)"
            )
        for name in environment_references(value):
            if name not in os.environ:
                raise s.error("storage_options", f"{key!r}: the environment variable {name!r} is not set")
        options[key] = value
    return options


def _resolve_uri(uri: str, base: Path) -> str:
    """Relative local paths are relative to the datasets file; URLs and absolute paths are kept."""
    if "://" in uri or Path(uri).is_absolute():
        return uri
    return str((base / uri).resolve())


def _ingest(s: _Section, base: Path) -> IngestSource:
    s.check_known(
        (
            "kind",
            "start_date",
            "partition_column",
            "rows_per_partition",
            "path",
            "format",
            "end_offset",
            "fill_missing",
            "mode",
            "keys",
        )
    )
    kind = s.get(
        "kind",
        str,
        check=lambda v: None if v in INGEST_KINDS else f"must be one of {INGEST_KINDS}, got {v!r}",
    )
    source = IngestSource(
        kind=kind,
        start_date=s.get("start_date", str, check=_iso_date),
        partition_column=s.get("partition_column", str, "ts"),
        rows_per_partition=s.get(
            "rows_per_partition",
            int,
            1000,
            check=lambda v: (
                None if 0 < v <= SECONDS_PER_DAY else f"must be in 1..{SECONDS_PER_DAY}, got {v!r}"
            ),
        ),
        path=None if s.raw.get("path") is None else _resolve_uri(s.get("path", str), base),
        format=s.get("format", str, "parquet"),
        end_offset=s.get("end_offset", int, 0, check=_non_negative),
        fill_missing=s.get(
            "fill_missing",
            str,
            "compute",
            check=lambda v: None if v in FILL_MISSING else f"must be one of {FILL_MISSING}, got {v!r}",
        ),
        mode=s.get(
            "mode",
            str,
            "replace",
            check=lambda v: None if v in INGEST_MODES else f"must be one of {INGEST_MODES}, got {v!r}",
        ),
        keys=tuple(
            s.get(
                "keys",
                list,
                [],
                check=lambda v: (
                    None if v and all(isinstance(x, str) for x in v) else "must be a list of column names"
                ),
            )
        ),
    )
    if source.mode == "upsert" and not source.keys:
        raise s.error("keys", "an upsert ingest needs its key columns, e.g. keys: [id]")
    if source.mode == "replace" and source.keys:
        raise s.error("keys", "keys only apply to mode upsert")
    if kind == "files" and (source.path is None or "{partition}" not in source.path):
        raise s.error("path", "a files source needs a path containing '{partition}'")
    if kind == "demo" and source.partition_column != "ts":
        raise s.error("partition_column", "demo rows are partitioned by their 'ts' column")
    return source


def _maintenance(s: _Section) -> MaintenancePolicy:
    s.check_known(("cron", "timezone", "compaction", "cleanup", "statistics", "indices"))
    c = s.section("compaction")
    c.check_known(tuple(CompactionPolicy.__dataclass_fields__))
    compaction = CompactionPolicy(
        target_rows_per_fragment=c.get("target_rows_per_fragment", int, None, check=_positive),
        max_fragments=c.get("max_fragments", int, 64, check=_positive),
        max_small_files=c.get("max_small_files", int, 8, check=_non_negative),
        small_file_rows=c.get("small_file_rows", int, 1024, check=_positive),
        max_deleted_ratio=c.get("max_deleted_ratio", float, 0.1, check=_ratio),
        commit_every=c.get("commit_every", int, None, check=_positive),
        max_overlap_depth=c.get("max_overlap_depth", float, None, check=_positive),
    )
    k = s.section("cleanup")
    k.check_known(tuple(CleanupPolicy.__dataclass_fields__))
    cleanup = CleanupPolicy(
        older_than_days=k.get("older_than_days", float, 7.0, check=_non_negative),
        retain_versions=k.get("retain_versions", int, None, check=_positive),
    )
    t = s.section("statistics")
    t.check_known(("columns",))
    columns = t.get(
        "columns",
        list,
        None,
        check=lambda v: None if all(isinstance(x, str) for x in v) else "must be a list of column names",
    )
    return MaintenancePolicy(
        cron=s.get("cron", str, "0 3 * * *", check=_cron),
        timezone=s.get("timezone", str, "UTC", check=_timezone),
        compaction=compaction,
        cleanup=cleanup,
        statistics=StatisticsPolicy(None if columns is None else tuple(columns)),
        indices=_indices(s.section("indices")),
    )


def _indices(s: _Section) -> IndicesPolicy:
    s.check_known(tuple(IndicesPolicy.__dataclass_fields__))
    raw = s.get("declare", list, [])
    declared = []
    for i, item in enumerate(raw):
        entry = _Section(s.path, s.entry, f"{s.prefix}.declare[{i}]", item)
        entry.check_known(("column", "type", "name", "params"))
        kind = entry.get("type", str).upper()
        if kind not in _INDEX_TYPES:
            raise entry.error("type", f"must be one of {', '.join(_INDEX_TYPES)}, got {kind!r}")
        params = entry.get("params", dict, {})
        declared.append(
            DeclaredIndex(entry.get("column", str), kind, entry.get("name", str, None), dict(params))
        )
    names = [d.index_name for d in declared]
    if len(set(names)) != len(names):
        raise s.error("declare", f"declares the index names {names} more than once")
    return IndicesPolicy(
        max_unindexed_ratio=s.get("max_unindexed_ratio", float, 0.1, check=_ratio), declare=tuple(declared)
    )


_INDEX_TYPES = (
    "BTREE",
    "BITMAP",
    "LABEL_LIST",
    "ZONEMAP",
    "BLOOMFILTER",
    "NGRAM",
    "INVERTED",
    "IVF_FLAT",
    "IVF_PQ",
    "IVF_SQ",
    "IVF_HNSW_FLAT",
    "IVF_HNSW_PQ",
    "IVF_HNSW_SQ",
)


def _dataset(path: str, index: int, raw: Any, base: Path) -> DatasetConfig:
    name = raw.get("name") if isinstance(raw, Mapping) else None
    label = name if isinstance(name, str) else f"#{index}"
    s = _Section(path, label, "", raw)
    s.check_known(("name", "uri", "storage_options", "description", "ingest", "maintenance", "reports_dir"))
    return DatasetConfig(
        name=s.get("name", str, check=_name),
        uri=_resolve_uri(s.get("uri", str, check=lambda v: None if v else "must not be empty"), base),
        storage_options=_storage_options(s),
        description=s.get("description", str, ""),
        ingest=_ingest(s.section("ingest"), base) if s.raw.get("ingest") is not None else None,
        maintenance=_maintenance(s.section("maintenance")),
        reports_dir=None
        if s.raw.get("reports_dir") is None
        else _resolve_uri(s.get("reports_dir", str), base),
    )


def parse_datasets(text: str, path: str, base: Path | None = None) -> DatasetsConfig:
    """The datasets declared by ``text`` (the contents of ``path``); relative URIs resolve from ``base``."""
    base = base if base is not None else Path(path).resolve().parent
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DatasetsConfigError(path, "<file>", "<yaml>", f"not valid YAML: {exc}") from exc
    if not isinstance(document, Mapping) or set(document) != {"datasets"}:
        raise DatasetsConfigError(
            path, "<file>", "datasets", "the file must be a mapping with one key, 'datasets'"
        )
    entries = document["datasets"]
    if not isinstance(entries, list) or not entries:
        raise DatasetsConfigError(path, "<file>", "datasets", "must be a non-empty list of datasets")
    datasets = tuple(_dataset(path, n, raw, base) for n, raw in enumerate(entries))
    seen: set[str] = set()
    for ds in datasets:
        if ds.name in seen:
            raise DatasetsConfigError(path, ds.name, "name", "is declared twice")
        seen.add(ds.name)
    return DatasetsConfig(path=path, datasets=datasets)


def datasets_path() -> Path:
    """``$LANCE_OPS_DATASETS`` if set, else ``lance_datasets.yaml`` in the repository root."""
    return Path(os.environ.get(ENV_VAR) or DEFAULT_PATH)


def load_datasets(path: str | os.PathLike[str] | None = None) -> DatasetsConfig:
    """Read and check the datasets file (default: :func:`datasets_path`)."""
    resolved = Path(path) if path is not None else datasets_path()
    try:
        text = resolved.read_text()
    except OSError as exc:
        raise DatasetsConfigError(str(resolved), "<file>", "<file>", f"cannot be read: {exc}") from exc
    return parse_datasets(text, str(resolved))
