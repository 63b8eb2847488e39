"""Manifest domain objects and the manifest file framing.

A manifest file is a run of length-prefixed protobuf sections followed by a 16-byte footer
(all integers little-endian)::

    0             dictionary values              legacy (0.1) datasets' dictionary columns only
                  [u32 len][IndexSection]        only when the version has indices
                  [u32 len][Transaction]         inline copy of the commit's transaction
    manifest_pos  [u32 len][Manifest]            always last
    size - 16     i64 manifest_pos               offset of the Manifest's length prefix
    size - 8      i16 major = 0, i16 minor = 2
    size - 4      b"LANC"

A section's position (``Manifest.index_section``, the inline transaction position) is the offset
of its length prefix. pylance 14 stores the inline transaction position in field 23 and still reads
the older field 21; we read 23, then 21, and write 23.

A legacy (0.1) dataset's dictionary columns keep their values at the start of every manifest file,
laid out as in a 0.1 data file (a plain page, or var-binary bytes and their absolute positions);
``Field.dictionary`` gives the position (of the positions array for strings) and the number of
values. pylance reads them from there, not from the data files, and rewrites them with each
version. They travel as :attr:`LanceField.dictionary_values`.

Every class here is a frozen dataclass with ``from_pb`` / ``to_pb``: these conversions are the only
code of the table layer that touches the generated protobuf modules (the schema is a
:class:`~lance_ops.table.schema.LanceSchema`, converted from and to ``lance.file.Field`` messages
by its own ``from_pb`` / ``to_pb``).
"""

from __future__ import annotations

import enum
import json
import struct
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, overload

import numpy as np

from lance_ops._proto import table_pb2
from lance_ops.encoding.legacy.v0_1.dictionary import decode_dictionary_values
from lance_ops.encoding.legacy.v0_1.encoder import dictionary_values_bytes
from lance_ops.errors import CorruptFileError, InvalidArgumentError, LanceOpsError, UnsupportedFeatureError
from lance_ops.file.schema import arrow_type
from lance_ops.table.manifest_scan import FragmentsScan, scan_fragments
from lance_ops.table.naming import DATA_DIR, DELETIONS_DIR, deletion_file_name
from lance_ops.table.paths import (
    check_base_path,
    check_relative_path,
    check_relative_paths,
    relative_paths_safe,
)
from lance_ops.table.schema import LanceField, LanceSchema

MAGIC = b"LANC"
FOOTER = struct.Struct("<qhh4s")
FOOTER_VERSION = (0, 2)
_LEN = struct.Struct("<I")

# Feature flags (reader_feature_flags / writer_feature_flags), see the fact sheet section 5.1.
FLAG_DELETION_FILES = 1
FLAG_STABLE_ROW_IDS = 2
FLAG_USE_V2_FORMAT_DEPRECATED = 4
FLAG_TABLE_CONFIG = 8
FLAG_BASE_PATHS = 16
FLAG_DISABLE_TRANSACTION_FILE = 32
FLAG_COVERED_INDEX_METADATA = 128
# Data files of a (V2) version other than the dataset's: set by a compaction with another
# data_storage_version, then kept on every later version (as pylance 14 does).
FLAG_MIXED_DATA_FILE_VERSIONS = 256
SUPPORTED_READER_FLAGS = (
    FLAG_DELETION_FILES
    | FLAG_STABLE_ROW_IDS
    | FLAG_USE_V2_FORMAT_DEPRECATED
    | FLAG_TABLE_CONFIG
    | FLAG_BASE_PATHS
    | FLAG_DISABLE_TRANSACTION_FILE
    | FLAG_COVERED_INDEX_METADATA
    | FLAG_MIXED_DATA_FILE_VERSIONS
)
SUPPORTED_WRITER_FLAGS = (
    FLAG_DELETION_FILES
    | FLAG_STABLE_ROW_IDS
    | FLAG_USE_V2_FORMAT_DEPRECATED
    | FLAG_TABLE_CONFIG
    | FLAG_BASE_PATHS
    | FLAG_DISABLE_TRANSACTION_FILE
    | FLAG_MIXED_DATA_FILE_VERSIONS
)


def check_reader_flags(flags: int, where: str) -> None:
    """Raise :class:`UnsupportedFeatureError` when ``flags`` has a bit we cannot read."""
    unknown = flags & ~SUPPORTED_READER_FLAGS
    if unknown:
        raise UnsupportedFeatureError(f"{where}: dataset needs unsupported reader feature flags {unknown:#x}")


def check_writer_flags(flags: int, where: str) -> None:
    """Raise :class:`UnsupportedFeatureError` when ``flags`` has a bit we cannot honour when writing."""
    unknown = flags & ~SUPPORTED_WRITER_FLAGS
    if unknown:
        raise UnsupportedFeatureError(f"{where}: dataset needs unsupported writer feature flags {unknown:#x}")


@dataclass(frozen=True)
class WriterVersion:
    """The library that wrote a manifest (``Manifest.writer_version``)."""

    library: str
    version: str
    prerelease: str | None = None
    build_metadata: str | None = None

    @classmethod
    def from_pb(cls, pb: table_pb2.Manifest.WriterVersion) -> WriterVersion:
        return cls(
            library=pb.library,
            version=pb.version,
            prerelease=pb.prerelease if pb.HasField("prerelease") else None,
            build_metadata=pb.build_metadata if pb.HasField("build_metadata") else None,
        )

    def to_pb(self) -> table_pb2.Manifest.WriterVersion:
        return table_pb2.Manifest.WriterVersion(
            library=self.library,
            version=self.version,
            prerelease=self.prerelease,
            build_metadata=self.build_metadata,
        )


@dataclass(frozen=True)
class DataStorageFormat:
    """``Manifest.data_format``: the file format version every data file of the version uses."""

    file_format: str = "lance"
    version: str = "2.2"

    @classmethod
    def from_pb(cls, pb: table_pb2.Manifest.DataStorageFormat) -> DataStorageFormat:
        return cls(file_format=pb.file_format, version=pb.version)

    def to_pb(self) -> table_pb2.Manifest.DataStorageFormat:
        return table_pb2.Manifest.DataStorageFormat(file_format=self.file_format, version=self.version)


@dataclass(frozen=True)
class ExternalFile:
    """A byte range of a file below the dataset root (external row-id / version sequences)."""

    path: str
    offset: int
    size: int

    @classmethod
    def from_pb(cls, pb: table_pb2.ExternalFile) -> ExternalFile:
        return cls(path=check_relative_path(pb.path, "row-id sequence"), offset=pb.offset, size=pb.size)

    def to_pb(self) -> table_pb2.ExternalFile:
        return table_pb2.ExternalFile(path=self.path, offset=self.offset, size=self.size)


class _CallablePath(str):
    """A data file's path: a plain string that still answers pylance's deprecated ``path()``."""

    __slots__ = ()

    def __call__(self) -> str:
        warnings.warn(
            "DataFile.path() is deprecated, use DataFile.path instead", DeprecationWarning, stacklevel=2
        )
        return str(self)


_T = TypeVar("_T")


class ListTuple(tuple[_T, ...]):
    """A tuple (hashable, as the frozen dataclasses holding it) that, like a ``List`` of pylance's,
    prints as a list and equals the list of the same items (``data_file.fields == [0]``)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return repr(list(self))


class IdList(ListTuple[int]):
    """Field ids or column indices of a data file (a :class:`ListTuple`)."""

    __slots__ = ()


@dataclass(frozen=True)
class DataFile:
    """One data file of a fragment: which field ids it stores and in which top-level column.

    ``null_counts`` (top-level field id -> nulls in the file) is known only to the writer that just
    wrote the file; it is not stored in the manifest. The commit guard
    (:mod:`lance_ops.table.write_guard`) reads it instead of the file's page statistics.
    """

    path: str
    fields: tuple[int, ...]
    column_indices: tuple[int, ...] = ()
    file_major_version: int = 0
    file_minor_version: int = 0
    file_size_bytes: int = 0
    base_id: int | None = None
    null_counts: Mapping[int, int] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _CallablePath(self.path))
        object.__setattr__(self, "fields", IdList(self.fields))
        object.__setattr__(self, "column_indices", IdList(self.column_indices or ()))

    def __repr__(self) -> str:
        # pylance's text: no base_id, an unknown size (0 in the manifest) as None
        return (
            f"DataFile(path={str(self.path)!r}, fields={self.fields!r}, "
            f"column_indices={self.column_indices!r}, file_major_version={self.file_major_version}, "
            f"file_minor_version={self.file_minor_version}, file_size_bytes={self.file_size_bytes or None})"
        )

    @property
    def file_version(self) -> str:
        """``"major.minor"`` as used by ``data_storage_version`` (legacy files: ``"0.1"``)."""
        if self.file_major_version == 0:
            return "0.1"
        return f"{self.file_major_version}.{self.file_minor_version}"

    @classmethod
    def from_pb(cls, pb: table_pb2.DataFile) -> DataFile:
        return cls(
            path=check_relative_path(pb.path, "data file"),
            fields=tuple(pb.fields),
            column_indices=tuple(pb.column_indices),
            file_major_version=pb.file_major_version,
            file_minor_version=pb.file_minor_version,
            file_size_bytes=pb.file_size_bytes,
            base_id=pb.base_id if pb.HasField("base_id") else None,
        )

    def to_pb(self) -> table_pb2.DataFile:
        return table_pb2.DataFile(
            path=self.path,
            fields=self.fields,
            column_indices=self.column_indices,
            file_major_version=self.file_major_version,
            file_minor_version=self.file_minor_version,
            file_size_bytes=self.file_size_bytes,
            base_id=self.base_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "fields": list(self.fields),
            "column_indices": list(self.column_indices),
            "file_major_version": self.file_major_version,
            "file_minor_version": self.file_minor_version,
            "file_size_bytes": self.file_size_bytes,
            "base_id": self.base_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DataFile:
        return cls(
            path=check_relative_path(data["path"], "data file"),
            fields=tuple(data["fields"]),
            column_indices=tuple(data.get("column_indices", ())),
            file_major_version=data.get("file_major_version", 0),
            file_minor_version=data.get("file_minor_version", 0),
            file_size_bytes=data.get("file_size_bytes") or 0,
            base_id=data.get("base_id"),
        )


class DeletionFileType(enum.IntEnum):
    """``DeletionFile.file_type``: Arrow IPC file of offsets or portable Roaring bitmap."""

    ARROW_ARRAY = 0
    BITMAP = 1

    @property
    def extension(self) -> str:
        return "arrow" if self is DeletionFileType.ARROW_ARRAY else "bin"


_DELETION_KINDS = {"array": "ARROW_ARRAY", "bitmap": "BITMAP"}
_DELETION_FILE_TYPES = frozenset(int(t) for t in DeletionFileType)


@dataclass(frozen=True)
class DeletionFile:
    """The deletion vector of a fragment (``_deletions/{fragment}-{read_version}-{id}.{ext}``)."""

    file_type: DeletionFileType
    read_version: int
    id: int
    num_deleted_rows: int = 0
    base_id: int | None = None

    def __post_init__(self) -> None:
        # pylance's lance.fragment.DeletionFile(read_version=, id=, file_type="array" | "bitmap", ...)
        if isinstance(self.file_type, str):
            kind = _DELETION_KINDS.get(self.file_type.lower(), self.file_type.upper())
            if kind not in DeletionFileType.__members__:
                raise InvalidArgumentError(
                    f"deletion file type must be 'array' or 'bitmap', not {self.file_type!r}"
                )
            object.__setattr__(self, "file_type", DeletionFileType[kind])

    def __repr__(self) -> str:
        kind = "array" if self.file_type is DeletionFileType.ARROW_ARRAY else "bitmap"
        return f"DeletionFile(type={kind!r}, num_deleted_rows={self.num_deleted_rows})"

    def file_name(self, fragment_id: int) -> str:
        return deletion_file_name(fragment_id, self.read_version, self.id, self.file_type.extension)

    def path(self, fragment_id: int, base_uri: str | None = None) -> str:
        """``_deletions/{file_name}``, below ``base_uri`` when given (pylance's ``path``)."""
        relative = f"{DELETIONS_DIR}/{self.file_name(fragment_id)}"
        return relative if base_uri is None else f"{base_uri.strip('/')}/{relative}"

    def asdict(self) -> dict[str, Any]:
        """pylance's ``asdict``: the JSON form."""
        return self.to_dict()

    @classmethod
    def from_pb(cls, pb: table_pb2.DeletionFile) -> DeletionFile:
        return cls(
            file_type=DeletionFileType(pb.file_type),
            read_version=pb.read_version,
            id=pb.id,
            num_deleted_rows=pb.num_deleted_rows,
            base_id=pb.base_id if pb.HasField("base_id") else None,
        )

    def to_pb(self) -> table_pb2.DeletionFile:
        return table_pb2.DeletionFile(
            file_type=table_pb2.DeletionFile.DeletionFileType.ValueType(self.file_type),
            read_version=self.read_version,
            id=self.id,
            num_deleted_rows=self.num_deleted_rows,
            base_id=self.base_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "file_type": "array" if self.file_type is DeletionFileType.ARROW_ARRAY else "bitmap",
            "read_version": self.read_version,
            "id": self.id,
            "num_deleted_rows": self.num_deleted_rows,
            "base_id": self.base_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeletionFile:
        kind = data["file_type"]
        if isinstance(kind, str):
            kind = _DELETION_KINDS.get(kind.lower(), kind.upper())
        return cls(
            file_type=DeletionFileType[kind] if isinstance(kind, str) else DeletionFileType(kind),
            read_version=data["read_version"],
            id=data["id"],
            num_deleted_rows=data.get("num_deleted_rows") or 0,
            base_id=data.get("base_id"),
        )


# A row-id / version sequence is stored inline (serialized protobuf bytes) or in an external file.
RowSequence = bytes | ExternalFile | None

# (DataFragment attribute, protobuf oneof, its inline field, its external field)
_SEQUENCES = (
    ("row_ids", "row_id_sequence", "inline_row_ids", "external_row_ids"),
    (
        "last_updated_at_versions",
        "last_updated_at_version_sequence",
        "inline_last_updated_at_versions",
        "external_last_updated_at_versions",
    ),
    (
        "created_at_versions",
        "created_at_version_sequence",
        "inline_created_at_versions",
        "external_created_at_versions",
    ),
)


@dataclass(frozen=True)
class DataFragment:
    """A set of data files holding the columns of the same rows.

    ``physical_rows`` counts deleted rows too. ``id`` 0 inside Append/Overwrite transactions means
    "assigned at commit". Also the ``FragmentMetadata`` that executors hand to the committing driver
    (:meth:`to_json` / :meth:`from_json`, picklable).
    """

    id: int
    files: tuple[DataFile, ...]
    physical_rows: int
    deletion_file: DeletionFile | None = None
    row_ids: RowSequence = None
    last_updated_at_versions: RowSequence = None
    created_at_versions: RowSequence = None

    @property
    def num_deleted_rows(self) -> int:
        return self.deletion_file.num_deleted_rows if self.deletion_file else 0

    @property
    def num_deletions(self) -> int:
        """pylance's name for :attr:`num_deleted_rows`."""
        return self.num_deleted_rows

    @property
    def num_rows(self) -> int:
        """Live rows (physical rows minus deleted rows)."""
        return self.physical_rows - self.num_deleted_rows

    def __repr__(self) -> str:
        # pylance's FragmentMetadata text (its public name), field for field
        return (
            f"FragmentMetadata(id={self.id}, files={list(self.files)!r}, "
            f"physical_rows={self.physical_rows}, deletion_file={self.deletion_file!r}, "
            f"row_id_meta={self.row_id_meta!r}, "
            f"created_at_version_meta={_sequence_repr(self.created_at_versions)}, "
            f"last_updated_at_version_meta={_sequence_repr(self.last_updated_at_versions)}, overlays=[])"
        )

    def with_id(self, fragment_id: int) -> DataFragment:
        return replace(self, id=fragment_id)

    @property
    def row_id_meta(self) -> RowIdMeta | None:
        """pylance's view of the stable row-id sequence (:attr:`row_ids`); None without stable row ids."""
        return None if self.row_ids is None else RowIdMeta(self.row_ids)

    @classmethod
    def from_pb(cls, pb: table_pb2.DataFragment) -> DataFragment:
        sequences: dict[str, RowSequence] = {}
        for attr, oneof, inline, external in _SEQUENCES:
            which = pb.WhichOneof(oneof)
            if which == inline:
                sequences[attr] = bytes(getattr(pb, inline))
            elif which == external:
                sequences[attr] = ExternalFile.from_pb(getattr(pb, external))
        return cls(
            id=pb.id,
            files=tuple(DataFile.from_pb(f) for f in pb.files),
            physical_rows=pb.physical_rows,
            deletion_file=DeletionFile.from_pb(pb.deletion_file) if pb.HasField("deletion_file") else None,
            **sequences,
        )

    def to_pb(self) -> table_pb2.DataFragment:
        pb = table_pb2.DataFragment()
        self.fill_pb(pb)
        return pb

    def fill_pb(self, pb: table_pb2.DataFragment) -> None:
        """Write the fragment into the empty message ``pb`` in place (``parent.fragments.add()``):
        a message built apart and then added is copied, inline sequences and all."""
        pb.id = self.id
        pb.files.extend(f.to_pb() for f in self.files)
        pb.physical_rows = self.physical_rows
        if self.deletion_file is not None:
            pb.deletion_file.CopyFrom(self.deletion_file.to_pb())
        for attr, _, inline, external in _SEQUENCES:
            value = getattr(self, attr)
            if isinstance(value, bytes):
                setattr(pb, inline, value)
            elif isinstance(value, ExternalFile):
                getattr(pb, external).CopyFrom(value.to_pb())

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict in the shape pylance's ``FragmentMetadata.to_json`` uses."""
        return {
            "id": self.id,
            "files": [f.to_dict() for f in self.files],
            "overlays": [],
            "physical_rows": self.physical_rows,
            "deletion_file": self.deletion_file.to_dict() if self.deletion_file else None,
            "row_id_meta": _sequence_to_json(self.row_ids, True),
            "last_updated_at_version_meta": _sequence_to_json(self.last_updated_at_versions, False),
            "created_at_version_meta": _sequence_to_json(self.created_at_versions, False),
        }

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, Any]) -> DataFragment:
        """The fragment of :meth:`to_json`'s dict or of its JSON text (pylance's ``from_json`` takes text)."""
        if isinstance(data, str | bytes):
            return cls.from_json(json.loads(data))
        deletion = data.get("deletion_file")
        return cls(
            id=data.get("id", 0),
            files=tuple(DataFile.from_dict(f) for f in data["files"]),
            physical_rows=data["physical_rows"],
            deletion_file=DeletionFile.from_dict(deletion) if deletion else None,
            row_ids=_sequence_from_json(data.get("row_id_meta")),
            last_updated_at_versions=_sequence_from_json(data.get("last_updated_at_version_meta")),
            created_at_versions=_sequence_from_json(data.get("created_at_version_meta")),
        )


def add_fragments(repeated: Any, fragments: Iterable[DataFragment]) -> None:
    """Append ``fragments`` to the repeated ``DataFragment`` field ``repeated``, each built in place."""
    for fragment in fragments:
        fragment.fill_pb(repeated.add())


def _sequence_to_json(value: RowSequence, capitalized: bool) -> dict[str, Any] | None:
    """pylance's JSON: ``{"Inline": [bytes]}`` for row ids, ``{"inline": ...}`` for version metas."""
    inline, external = ("Inline", "External") if capitalized else ("inline", "external")
    if isinstance(value, bytes):
        return {inline: list(value)}
    if isinstance(value, ExternalFile):
        return {external: {"path": value.path, "offset": value.offset, "size": value.size}}
    return None


def _sequence_repr(value: RowSequence) -> str:
    """A row-version sequence as pylance's repr names it (pylance prints the object's address)."""
    if value is None:
        return "None"
    kind = "external" if isinstance(value, ExternalFile) else f"inline, {len(value)} bytes"
    return f"<RowDatasetVersionMeta {kind}>"


def _sequence_from_json(value: Mapping[str, Any] | None) -> RowSequence:
    if not value:
        return None
    kind, body = next(iter(value.items()))
    if kind.lower() == "inline":
        return bytes(body)
    return ExternalFile(
        path=check_relative_path(body["path"], "row-id sequence"), offset=body["offset"], size=body["size"]
    )


@dataclass(frozen=True)
class RowIdMeta:
    """pylance's ``lance.fragment.RowIdMeta``: a fragment's row-id sequence (inline protobuf bytes or
    an external file), with pylance's JSON form ``{"Inline": [bytes]}`` / ``{"External": {...}}``."""

    sequence: bytes | ExternalFile

    def asdict(self) -> dict[str, Any]:
        return _sequence_to_json(self.sequence, True) or {}

    def json(self) -> str:
        return json.dumps(self.asdict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RowIdMeta:
        sequence = _sequence_from_json(data)
        if sequence is None:
            raise InvalidArgumentError(f"a row id meta needs 'Inline' or 'External', not {dict(data)!r}")
        return cls(sequence)

    @classmethod
    def from_json(cls, text: str) -> RowIdMeta:
        return cls.from_dict(json.loads(text))


class FragmentList(Sequence[DataFragment]):
    """The fragments of a decoded manifest, each converted to a :class:`DataFragment` on first access.

    Converting a fragment costs ~25 µs, so a manifest of 10,000 fragments took ~250 ms to open when
    all were converted up front; most operations touch a few of them (a take, a fragment's scan) or
    only their row counts (:func:`fragment_row_counts`, read straight from the protobuf). A converted
    fragment is kept, so every access returns the same object. It behaves as the tuple it stands for:
    equal to a tuple of the same fragments, concatenates to a tuple, pickles as a tuple. A fragment
    that fails to convert raises the :class:`CorruptFileError` opening the manifest used to raise
    (located at the manifest file); what conversion refuses (unsafe paths of data files and
    external row-id / version sequences, unknown deletion file types) is checked for all fragments
    up front, in one pass, so a decoded manifest's fragments all convert.
    """

    __slots__ = ("_pbs", "_items", "_source", "_live_total", "_physical")

    def __init__(
        self, pbs: Sequence[table_pb2.DataFragment], source: str = "<manifest>", payload: bytes | None = None
    ) -> None:
        """``payload``, the manifest protobuf's bytes ``pbs`` were parsed from, lets the up-front
        check run on :func:`~lance_ops.table.manifest_scan.scan_fragments`' flat lists (the
        per-fragment pass runs only when they show something it could refuse)."""
        self._pbs = pbs
        self._items: list[DataFragment | None] = [None] * len(pbs)
        self._source = source
        scan = _scan_or_none(payload)
        if scan is None or not _scan_is_safe(scan):
            self._check()
        self._live_total = None if scan is None else _known_live_total(scan, len(pbs))
        # Every fragment's physical_rows from the scan, when no fragment has a deletion file (the
        # counts are then these alone, with no per-fragment Python in :meth:`row_counts`).
        self._physical = None
        if scan is not None and not scan.deletion_files and len(scan.physical_rows) == len(pbs):
            self._physical = np.array(scan.physical_rows, np.int64)

    def _check(self) -> None:
        """Refuse, up front, what converting every fragment would refuse: unsafe relative paths
        (data files, external sequences) and unknown deletion file types."""
        sequences = []
        for index, p in enumerate(self._pbs):
            for _, oneof, _, external in _SEQUENCES:
                if p.WhichOneof(oneof) == external:
                    sequences.append(getattr(p, external).path)
            if p.HasField("deletion_file") and p.deletion_file.file_type not in _DELETION_FILE_TYPES:
                self._convert(index)  # raises the conversion's error
        try:
            check_relative_paths([f.path for p in self._pbs for f in p.files], "data file")
            check_relative_paths(sequences, "row-id sequence")
        except CorruptFileError as exc:
            raise exc.located(self._source) from exc

    def _convert(self, index: int) -> DataFragment:
        try:
            item = DataFragment.from_pb(self._pbs[index])
        except CorruptFileError as exc:
            raise exc.located(self._source) from exc
        except LanceOpsError:
            raise
        except Exception as exc:  # unknown enum values (ValueError), ...: damaged bytes
            raise CorruptFileError(self._source, f"invalid manifest: {exc}") from exc
        self._items[index] = item
        return item

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> DataFragment: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[DataFragment, ...]: ...

    def __getitem__(self, index: int | slice) -> DataFragment | tuple[DataFragment, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(len(self._items))[index])
        item = self._items[index]
        if item is None:
            item = self._convert(index if index >= 0 else index + len(self._items))
        return item

    def __iter__(self) -> Iterator[DataFragment]:
        items = self._items
        for index, item in enumerate(items):
            yield item if item is not None else self._convert(index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FragmentList | tuple):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Iterable[DataFragment]) -> tuple[DataFragment, ...]:
        return (*self, *other)

    def __radd__(self, other: Iterable[DataFragment]) -> tuple[DataFragment, ...]:
        return (*other, *self)

    def __reduce__(self) -> tuple[type, tuple[tuple[DataFragment, ...]]]:
        return tuple, (tuple(self),)

    def __repr__(self) -> str:
        return repr(tuple(self))

    def ids(self) -> np.ndarray:
        """See :func:`fragment_id_array` (read from the protobuf; nothing is converted)."""
        return np.fromiter((p.id for p in self._pbs), np.int64, len(self._items))

    def known_live_total(self) -> int | None:
        """Live rows of all fragments from the manifest's counts, when the manifest was scanned and
        every fragment's counts are known (``physical_rows`` and each deletion file's
        ``num_deleted_rows`` non-zero); else None (no per-fragment Python either way)."""
        return self._live_total

    def row_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """See :func:`fragment_row_counts` (read from the protobuf; nothing is converted)."""
        pbs, n = self._pbs, len(self._items)
        if self._physical is not None:
            return self._physical.copy(), np.zeros(n, np.int64), np.zeros(n, bool)
        physical = np.fromiter((p.physical_rows for p in pbs), np.int64, n)
        has_deletion = np.fromiter((p.HasField("deletion_file") for p in pbs), bool, n)
        deleted = np.zeros(n, np.int64)
        for index in np.flatnonzero(has_deletion).tolist():
            deleted[index] = pbs[index].deletion_file.num_deleted_rows
        return physical, deleted, has_deletion

    def root_files(self) -> list[str]:
        """See :func:`fragment_root_files` (read from the protobuf; nothing is converted)."""
        return fragment_pb_root_files(self._pbs)

    def file_totals(self) -> tuple[int, int]:
        """See :func:`fragment_file_totals` (read from the protobuf; nothing is converted)."""
        return fragment_pb_totals(self._pbs)[3:]


def _scan_is_safe(scan: FragmentsScan) -> bool:
    """The scan shows nothing :meth:`FragmentList._check` could refuse (it lists a superset of the
    paths and deletion file types the fragments hold, so this is conservative)."""
    return (
        scan.paths_complete
        and scan.deletion_types <= _DELETION_FILE_TYPES
        and relative_paths_safe(scan.data_paths)
        and relative_paths_safe(scan.sequence_paths)
    )


def _known_live_total(scan: FragmentsScan, fragments: int) -> int | None:
    """See :meth:`FragmentList.known_live_total`: one non-zero ``physical_rows`` per fragment and
    one non-zero ``num_deleted_rows`` per deletion file. (A manifest repeating such a field inside
    one fragment, which no writer produces, could pass these counts with a wrong sum; it can only
    skew the count, not make anything read or deleted.)"""
    if len(scan.physical_rows) != fragments or len(scan.deleted_rows) != scan.deletion_files:
        return None
    return sum(scan.physical_rows) - sum(scan.deleted_rows)


def _scan_or_none(payload: bytes | None) -> FragmentsScan | None:
    if payload is None:
        return None
    try:
        return scan_fragments(payload)
    except Exception:  # protobuf's DecodeError: left to the per-fragment pass to report
        return None


def fragment_pb_root_files(pbs: Iterable[table_pb2.DataFragment]) -> list[str]:
    """:func:`fragment_root_files` of fragment protobufs."""
    paths: list[str] = []
    for p in pbs:
        paths.extend(f"{DATA_DIR}/{f.path}" for f in p.files if not f.HasField("base_id"))
        if p.HasField("deletion_file"):
            d = p.deletion_file
            if not d.HasField("base_id"):
                kind = DeletionFileType(d.file_type)
                paths.append(
                    f"{DELETIONS_DIR}/{deletion_file_name(p.id, d.read_version, d.id, kind.extension)}"
                )
        for _, oneof, _, external in _SEQUENCES:
            if p.WhichOneof(oneof) == external:
                paths.append(getattr(p, external).path)
    return paths


def index_uuids_pb(pb: table_pb2.Manifest, data: bytes, path: str) -> list[bytes]:
    """The uuids of the indices of the manifest protobuf ``pb`` read from the file bytes ``data``
    (its index section), without decoding the rest of the indices' metadata."""
    if not pb.HasField("index_section"):
        return []
    section = table_pb2.IndexSection()
    try:
        section.ParseFromString(read_section(data, pb.index_section, path, "index section"))
    except CorruptFileError:
        raise
    except Exception as exc:  # protobuf's DecodeError: damaged bytes
        raise CorruptFileError(path, f"invalid manifest: {exc}") from exc
    return [index.uuid.uuid for index in section.indices]


def fragment_pb_totals(pbs: Iterable[table_pb2.DataFragment]) -> tuple[int, int, int, int, int]:
    """Totals over fragment protobufs: physical rows, deleted rows (deletion files'
    ``num_deleted_rows``), deletion files, data files, data files' ``file_size_bytes``."""
    rows = deleted = deletions = files = size = 0
    for p in pbs:
        rows += p.physical_rows
        if p.HasField("deletion_file"):
            deletions += 1
            deleted += p.deletion_file.num_deleted_rows
        for f in p.files:
            files += 1
            size += f.file_size_bytes
    return rows, deleted, deletions, files, size


# From this many fragments on, manifest_pb_totals sums the scan's flat lists (two C parses)
# rather than walking the fragments in Python.
SCAN_TOTALS_FROM = 256


def manifest_pb_totals(pb: table_pb2.Manifest, data: bytes, path: str) -> tuple[int, int, int, int, int]:
    """:func:`fragment_pb_totals` of the manifest protobuf ``pb`` decoded from the manifest file
    bytes ``data``; for many fragments summed from :func:`scan_fragments`' flat lists (the same
    totals for any manifest a writer produces: see its superset caveat)."""
    if len(pb.fragments) < SCAN_TOTALS_FROM:
        return fragment_pb_totals(pb.fragments)
    scan = scan_fragments(_manifest_payload(data, path))
    return (
        sum(scan.physical_rows),
        sum(scan.deleted_rows),
        scan.deletion_files,
        scan.data_files,
        scan.data_bytes,
    )


def fragment_root_files(fragments: Sequence[DataFragment]) -> list[str]:
    """Paths relative to the dataset root of the files ``fragments`` keep there (not under another
    base): ``data/{file}``, ``_deletions/{deletion file}`` and external row-id / version sequences,
    without converting a :class:`FragmentList`'s fragments."""
    if isinstance(fragments, FragmentList):
        return fragments.root_files()
    paths: list[str] = []
    for fragment in fragments:
        paths.extend(f"{DATA_DIR}/{d.path}" for d in fragment.files if d.base_id is None)
        deletion = fragment.deletion_file
        if deletion is not None and deletion.base_id is None:
            paths.append(f"{DELETIONS_DIR}/{deletion.file_name(fragment.id)}")
        paths.extend(
            seq.path
            for seq in (fragment.row_ids, fragment.last_updated_at_versions, fragment.created_at_versions)
            if isinstance(seq, ExternalFile)
        )
    return paths


def fragment_file_totals(fragments: Sequence[DataFragment]) -> tuple[int, int]:
    """The number of data files of ``fragments`` and the sum of their ``file_size_bytes``, without
    converting a :class:`FragmentList`'s fragments."""
    if isinstance(fragments, FragmentList):
        return fragments.file_totals()
    files = [d for f in fragments for d in f.files]
    return len(files), sum(d.file_size_bytes for d in files)


def fragment_id_array(fragments: Sequence[DataFragment]) -> np.ndarray:
    """The fragments' ids (int64), without converting a :class:`FragmentList`'s fragments."""
    if isinstance(fragments, FragmentList):
        return fragments.ids()
    return np.fromiter((f.id for f in fragments), np.int64, len(fragments))


def fragment_row_counts(fragments: Sequence[DataFragment]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per fragment, as int64 / bool arrays: ``physical_rows``, the deletion file's
    ``num_deleted_rows`` (0 without one) and whether it has a deletion file.

    The manifest's own counts, without reading any file; 0 in the first two means "unknown" for
    fragments written by old versions (see ``FragmentReader.live_count``).
    """
    if isinstance(fragments, FragmentList):
        return fragments.row_counts()
    n = len(fragments)
    physical = np.fromiter((f.physical_rows for f in fragments), np.int64, n)
    deleted = np.fromiter((f.num_deleted_rows for f in fragments), np.int64, n)
    has_deletion = np.fromiter((f.deletion_file is not None for f in fragments), bool, n)
    return physical, deleted, has_deletion


@dataclass(frozen=True)
class BasePath:
    """An extra storage root (``Manifest.base_paths``), referenced by ``base_id``."""

    id: int
    path: str
    is_dataset_root: bool = False
    name: str | None = None

    @classmethod
    def from_pb(cls, pb: table_pb2.BasePath) -> BasePath:
        return cls(
            id=pb.id,
            path=check_base_path(pb.path),
            is_dataset_root=pb.is_dataset_root,
            name=pb.name if pb.HasField("name") else None,
        )

    def to_pb(self) -> table_pb2.BasePath:
        return table_pb2.BasePath(
            id=self.id, path=self.path, is_dataset_root=self.is_dataset_root, name=self.name
        )


@dataclass(frozen=True)
class IndexFile:
    path: str
    size_bytes: int


@dataclass(frozen=True)
class IndexMetadata:
    """One index of a version (``IndexSection.indices``). ``details`` is the Any's (type_url, value)."""

    uuid: bytes
    fields: tuple[int, ...]
    name: str
    dataset_version: int
    fragment_bitmap: bytes = b""
    details: tuple[str, bytes] | None = None
    index_version: int | None = None
    created_at: int | None = None
    base_id: int | None = None
    files: tuple[IndexFile, ...] = ()

    @classmethod
    def from_pb(cls, pb: table_pb2.IndexMetadata) -> IndexMetadata:
        return cls(
            uuid=pb.uuid.uuid,
            fields=tuple(pb.fields),
            name=pb.name,
            dataset_version=pb.dataset_version,
            fragment_bitmap=pb.fragment_bitmap,
            details=(pb.index_details.type_url, pb.index_details.value)
            if pb.HasField("index_details")
            else None,
            index_version=pb.index_version if pb.HasField("index_version") else None,
            created_at=pb.created_at if pb.HasField("created_at") else None,
            base_id=pb.base_id if pb.HasField("base_id") else None,
            files=tuple(IndexFile(f.path, f.size_bytes) for f in pb.files),
        )

    def to_pb(self) -> table_pb2.IndexMetadata:
        pb = table_pb2.IndexMetadata(
            uuid=table_pb2.UUID(uuid=self.uuid),
            fields=self.fields,
            name=self.name,
            dataset_version=self.dataset_version,
            fragment_bitmap=self.fragment_bitmap,
            index_version=self.index_version,
            created_at=self.created_at,
            base_id=self.base_id,
            files=[table_pb2.IndexFile(path=f.path, size_bytes=f.size_bytes) for f in self.files],
        )
        if self.details is not None:
            pb.index_details.type_url, pb.index_details.value = self.details
        return pb


@dataclass(frozen=True)
class Manifest:
    """One version of a dataset.

    ``schema`` is the Lance schema (fields in pre-order, plus the schema metadata).
    ``timestamp_ns`` is the commit time in nanoseconds since the epoch (UTC).
    ``transaction_section`` / ``index_section`` are positions inside the manifest file, filled in
    when the file is framed. ``indices`` come from the file's IndexSection.
    """

    schema: LanceSchema
    fragments: Sequence[DataFragment]  # a tuple, or a FragmentList when decoded from a file
    version: int
    timestamp_ns: int = 0
    writer_version: WriterVersion | None = None
    reader_feature_flags: int = 0
    writer_feature_flags: int = 0
    max_fragment_id: int | None = None
    transaction_file: str = ""
    transaction_section: int | None = None
    index_section: int | None = None
    next_row_id: int = 0
    data_format: DataStorageFormat | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    table_metadata: Mapping[str, str] = field(default_factory=dict)
    base_paths: tuple[BasePath, ...] = ()
    branch: str | None = None
    tag: str = ""
    version_aux_data: int = 0
    indices: tuple[IndexMetadata, ...] = ()

    @property
    def schema_metadata(self) -> Mapping[str, bytes]:
        """The schema's metadata (``Manifest.schema_metadata`` in the message)."""
        return self.schema.metadata

    @property
    def uses_stable_row_ids(self) -> bool:
        return bool(self.reader_feature_flags & FLAG_STABLE_ROW_IDS)

    @property
    def num_rows(self) -> int:
        physical, deleted, _ = fragment_row_counts(self.fragments)
        return int(physical.sum() - deleted.sum())

    @property
    def data_storage_version(self) -> str:
        """The data file version, from ``data_format`` or else from the data files."""
        if self.data_format is not None and self.data_format.version:
            return self.data_format.version
        for fragment in self.fragments:
            for data_file in fragment.files:
                return data_file.file_version
        return "2.0" if self.reader_feature_flags & FLAG_USE_V2_FORMAT_DEPRECATED else "0.1"

    def _mixes_file_versions(self) -> bool:
        """Whether a V2 data file has another version than the dataset's ``data_format``."""
        if self.data_format is None or not self.data_format.version.startswith("2."):
            return False
        own = self.data_format.version
        return any(
            d.file_major_version == 2 and d.file_version != own for f in self.fragments for d in f.files
        )

    def feature_flags(self) -> tuple[int, int]:
        """``(reader, writer)`` flags this manifest's content requires (recomputed on every write)."""
        reader = 0
        if any(f.deletion_file is not None for f in self.fragments):
            reader |= FLAG_DELETION_FILES
        if self.reader_feature_flags & FLAG_STABLE_ROW_IDS:
            reader |= FLAG_STABLE_ROW_IDS
        if self.base_paths:
            reader |= FLAG_BASE_PATHS
        if self.reader_feature_flags & FLAG_MIXED_DATA_FILE_VERSIONS or self._mixes_file_versions():
            reader |= FLAG_MIXED_DATA_FILE_VERSIONS
        writer = reader | (FLAG_TABLE_CONFIG if self.config else 0)
        return reader, writer

    @classmethod
    def from_pb(
        cls,
        pb: table_pb2.Manifest,
        indices: tuple[IndexMetadata, ...] = (),
        source: str = "<manifest>",
        payload: bytes | None = None,
    ) -> Manifest:
        """The manifest ``pb`` (its fragments are converted on first access, see :class:`FragmentList`;
        ``source`` names the file in their errors; ``payload``, the bytes ``pb`` was parsed from,
        makes the fragments' up-front check cheaper)."""
        if pb.HasField("transaction_section_position"):
            transaction_section: int | None = pb.transaction_section_position
        elif pb.HasField("transaction_section"):
            transaction_section = pb.transaction_section
        else:
            transaction_section = None
        return cls(
            schema=LanceSchema.from_pb(pb.fields, pb.schema_metadata),
            fragments=FragmentList(pb.fragments, source, payload),
            version=pb.version,
            timestamp_ns=pb.timestamp.seconds * 1_000_000_000 + pb.timestamp.nanos,
            writer_version=WriterVersion.from_pb(pb.writer_version)
            if pb.HasField("writer_version")
            else None,
            reader_feature_flags=pb.reader_feature_flags,
            writer_feature_flags=pb.writer_feature_flags,
            max_fragment_id=pb.max_fragment_id if pb.HasField("max_fragment_id") else None,
            transaction_file=pb.transaction_file and check_relative_path(pb.transaction_file, "transaction"),
            transaction_section=transaction_section,
            index_section=pb.index_section if pb.HasField("index_section") else None,
            next_row_id=pb.next_row_id,
            data_format=DataStorageFormat.from_pb(pb.data_format) if pb.HasField("data_format") else None,
            config=dict(pb.config),
            table_metadata=dict(pb.table_metadata),
            base_paths=tuple(BasePath.from_pb(b) for b in pb.base_paths),
            branch=pb.branch if pb.HasField("branch") else None,
            tag=pb.tag,
            version_aux_data=pb.version_aux_data,
            indices=indices,
        )

    def to_pb(self) -> table_pb2.Manifest:
        pb = table_pb2.Manifest(
            fields=self.schema.to_pb(),
            schema_metadata=dict(self.schema.metadata),
            version=self.version,
            version_aux_data=self.version_aux_data,
            index_section=self.index_section,
            tag=self.tag,
            reader_feature_flags=self.reader_feature_flags,
            writer_feature_flags=self.writer_feature_flags,
            max_fragment_id=self.max_fragment_id,
            transaction_file=self.transaction_file,
            transaction_section_position=self.transaction_section,
            next_row_id=self.next_row_id,
            config=dict(self.config),
            table_metadata=dict(self.table_metadata),
            base_paths=[b.to_pb() for b in self.base_paths],
            branch=self.branch,
        )
        add_fragments(pb.fragments, self.fragments)
        seconds, nanos = divmod(self.timestamp_ns, 1_000_000_000)
        pb.timestamp.seconds, pb.timestamp.nanos = seconds, nanos
        if self.writer_version is not None:
            pb.writer_version.CopyFrom(self.writer_version.to_pb())
        if self.data_format is not None:
            pb.data_format.CopyFrom(self.data_format.to_pb())
        return pb


def _with_dictionary_positions(manifest: Manifest, parts: list[bytes]) -> tuple[Manifest, int]:
    """Append the bytes of ``manifest``'s dictionary values to ``parts`` (from position 0) and
    return it with ``Field.dictionary`` locating them, and the position after them."""
    if not any(f.dictionary_values is not None for f in manifest.schema.fields):
        return manifest, 0
    written: list[bytes] = []
    position = 0

    def write(data: bytes | memoryview) -> int:
        nonlocal position
        start = position
        written.append(bytes(data))
        position += len(data)
        return start

    fields = []
    for f in manifest.schema.fields:
        if f.dictionary_values is not None:
            f = replace(
                f, dictionary=(dictionary_values_bytes(f.dictionary_values, write), len(f.dictionary_values))
            )
        fields.append(f)
    parts.extend(written)
    return replace(manifest, schema=replace(manifest.schema, fields=tuple(fields))), position


def _read_dictionaries(manifest: Manifest, data: bytes, path: str) -> Manifest:
    """``manifest`` with the dictionary values of a legacy dataset's fields read from ``data``."""
    # the schema first: the storage version may look at the first fragment, decoding it
    if not any(f.dictionary for f in manifest.schema.fields) or manifest.data_storage_version != "0.1":
        return manifest
    view = memoryview(data)

    def fetch(ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        for start, size in ranges:
            if start < 0 or start + size > len(data):
                raise CorruptFileError(path, f"dictionary values at {start} run past the manifest file")
        return [view[start : start + size] for start, size in ranges]

    def with_values(f: LanceField) -> LanceField:
        if not f.dictionary or not f.logical_type.startswith("dict:"):
            return f
        offset, length = f.dictionary
        value_type = arrow_type(f.logical_type).value_type
        return replace(f, dictionary_values=decode_dictionary_values(value_type, offset, length, fetch))

    fields = tuple(with_values(f) for f in manifest.schema.fields)
    return replace(manifest, schema=replace(manifest.schema, fields=fields))


def _add_section(parts: list[bytes], payload: bytes) -> int:
    """Append the length-prefixed ``payload`` to ``parts`` as two pieces (the payload itself is not
    copied: a manifest's sections can be tens of MB); returns the section's size."""
    parts.append(_LEN.pack(len(payload)))
    parts.append(payload)
    return _LEN.size + len(payload)


def encode_manifest_file(manifest: Manifest, transaction: bytes | None = None) -> bytes:
    """Frame ``manifest`` (its indices and the inline ``transaction`` bytes) as pylance 14 does.

    The section positions of the returned file are written into the manifest; the caller's
    ``index_section`` / ``transaction_section`` values are ignored.
    """
    return frame_manifest(manifest, transaction)[1]


def frame_manifest(manifest: Manifest, transaction: bytes | None = None) -> tuple[Manifest, bytes]:
    """:func:`encode_manifest_file`, also returning the manifest as the file holds it (section and
    dictionary positions filled in), equal to what :func:`decode_manifest_file` would read back
    without parsing the file again (with inline row-id sequences it can be tens of MB).

    The sections are joined once, at the end, each held once until then.
    """
    parts: list[bytes] = []
    position = 0
    manifest, position = _with_dictionary_positions(manifest, parts)
    index_section = None
    if manifest.indices:
        index_section = position
        indices = table_pb2.IndexSection(indices=[i.to_pb() for i in manifest.indices])
        position += _add_section(parts, indices.SerializeToString())
    transaction_section = None
    if transaction is not None:
        transaction_section = position
        position += _add_section(parts, transaction)
    framed = replace(manifest, index_section=index_section, transaction_section=transaction_section)
    _add_section(parts, framed.to_pb().SerializeToString())
    parts.append(FOOTER.pack(position, *FOOTER_VERSION, MAGIC))
    return framed, b"".join(parts)


def read_section(data: bytes, position: int, path: str, what: str) -> bytes:
    if position < 0 or position + 4 > len(data) - FOOTER.size:
        raise CorruptFileError(path, f"{what} position {position} is outside the manifest file")
    (length,) = _LEN.unpack_from(data, position)
    end = position + 4 + length
    if end > len(data) - FOOTER.size:
        raise CorruptFileError(path, f"{what} of {length} bytes at {position} runs past the footer")
    return data[position + 4 : end]


# The decoded manifest protobuf, for modules above this layer that read a few of its fields.
ManifestPb = table_pb2.Manifest


def decode_manifest_pb(data: bytes, path: str) -> table_pb2.Manifest:
    """The manifest protobuf of a manifest file, its framing checked (nothing else is decoded: for
    readers that need a few fields of many versions, such as ``versions()``)."""
    return _decode_manifest_payload(data, path)[0]


def _manifest_payload(data: bytes, path: str) -> bytes:
    """The manifest protobuf's bytes in the manifest file ``data``, its framing checked."""
    if len(data) < FOOTER.size + 4:
        raise CorruptFileError(path, f"manifest file of {len(data)} bytes is too short")
    manifest_pos, _major, _minor, magic = FOOTER.unpack_from(data, len(data) - FOOTER.size)
    if magic != MAGIC:
        raise CorruptFileError(path, f"bad manifest magic {magic!r}")
    payload = read_section(data, manifest_pos, path, "manifest")
    if manifest_pos + 4 + len(payload) != len(data) - FOOTER.size:
        raise CorruptFileError(path, "manifest section does not end at the footer")
    return payload


def _decode_manifest_payload(data: bytes, path: str) -> tuple[table_pb2.Manifest, bytes]:
    payload = _manifest_payload(data, path)
    pb = table_pb2.Manifest()
    try:
        pb.ParseFromString(payload)
    except Exception as exc:  # protobuf raises its own DecodeError
        raise CorruptFileError(path, f"undecodable manifest: {exc}") from exc
    return pb, payload


def decode_manifest_file(data: bytes, path: str) -> tuple[Manifest, bytes | None]:
    """Parse a manifest file; returns the manifest (with indices) and the inline transaction bytes."""
    pb, payload = _decode_manifest_payload(data, path)
    indices: tuple[IndexMetadata, ...] = ()
    try:
        if pb.HasField("index_section"):
            section = table_pb2.IndexSection()
            section.ParseFromString(read_section(data, pb.index_section, path, "index section"))
            indices = tuple(IndexMetadata.from_pb(i) for i in section.indices)
        manifest = _read_dictionaries(Manifest.from_pb(pb, indices, path, payload), data, path)
    except CorruptFileError as exc:
        raise exc.located(path) from exc
    except LanceOpsError:
        raise
    except Exception as exc:  # DecodeError, unknown enum values (ValueError), ...: damaged bytes
        raise CorruptFileError(path, f"invalid manifest: {exc}") from exc
    transaction = None
    if manifest.transaction_section is not None:
        transaction = read_section(data, manifest.transaction_section, path, "transaction section")
    return manifest, transaction
