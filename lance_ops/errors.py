"""One exception hierarchy for the whole library.

Every error raised on purpose by lance_ops derives from :class:`LanceOpsError` and
also from the builtin a caller would naturally catch (``ValueError`` for bad
data, ``NotImplementedError`` for unsupported features, ``FileNotFoundError``
for missing datasets), so code written against builtins keeps working.
"""

from __future__ import annotations


class LanceOpsError(Exception):
    """Base class of every error raised by lance_ops."""


class CorruptFileError(LanceOpsError, ValueError):
    """A file's bytes do not form a valid Lance file (truncated, bad magic, bad offsets).

    Codecs know neither the file nor the column they decode: they raise with a placeholder path
    (``"<page>"``), and the page and file readers fill in what they know with :meth:`located`.
    """

    def __init__(self, path: str, reason: str, column: str | None = None, page: str | None = None) -> None:
        where = "".join(f", {part}" for part in (column and f"column {column!r}", page) if part)
        super().__init__(f"{path}{where}: {reason}")
        self.path = path
        self.reason = reason
        self.column = column
        self.page = page

    def __reduce__(self) -> tuple[type, tuple[str, str, str | None, str | None]]:
        return type(self), (self.path, self.reason, self.column, self.page)

    def located(
        self, path: str | None = None, column: str | None = None, page: str | None = None
    ) -> CorruptFileError:
        """This error with the path (if only a placeholder so far), column and page filled in."""
        return type(self)(
            path if path is not None and self.path.startswith("<") else self.path,
            self.reason,
            self.column or column,
            self.page or page,
        )


class UnsupportedEncodingError(LanceOpsError, NotImplementedError):
    """A page or column uses an encoding this implementation cannot decode (or encode)."""


class UnsupportedFeatureError(LanceOpsError, NotImplementedError):
    """A file or dataset needs a feature we do not support (feature flags, versions, types)."""


def _user_input(text: str) -> str:
    """``text`` opening with pylance's "Invalid user input: " (what callers match)."""
    return text if text.startswith("Invalid user input") else f"Invalid user input: {text}"


class UnsupportedSQLError(UnsupportedFeatureError, ValueError, OSError):
    """A filter or expression uses SQL (a construct, a function) that is not supported.

    Also ``ValueError`` and ``OSError``: pylance reports unsupported SQL as "Invalid user input"
    with one or the other depending on the call; the message opens with those words too.
    """

    def __str__(self) -> str:
        return _user_input(super().__str__())


class SchemaError(LanceOpsError, ValueError):
    """Data does not match the schema, or a type cannot be stored in Lance."""


class FieldNotFoundError(SchemaError, OSError):
    """A field path names no field of the schema (pylance raises ``OSError`` here)."""


class SchemaChangeError(SchemaError, OSError):
    """A schema change the dataset refuses: a column that exists already, a name used twice, a cast
    that would lose data or that Lance does not make, nulls in a column made non-nullable, an
    all-null column that is not nullable. Also an ``OSError``: pylance reports these as "Invalid
    user input"."""


class InvalidArgumentError(LanceOpsError, ValueError):
    """An argument has a value the call does not accept (an unknown write mode, a negative limit,
    a count with a limit, a fragment not in the version)."""


class LanguageModelError(InvalidArgumentError, OSError):
    """A tokenizer's language model (a ``jieba/<model>`` directory or one of its dictionaries) is
    missing or cannot be read. Also an ``OSError``: pylance raises that for it."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument is of a type the call does not take (also a ``TypeError``, as pylance raises)."""


class InvalidOptionError(InvalidArgumentError, OSError):
    """An option of an operation has a value it does not accept (a compaction cap of 0, an unknown
    compaction mode). Also an ``OSError``: pylance reports some of these as "Invalid user input"."""


class InvalidJsonError(InvalidArgumentError, OSError):
    """A value written to a JSON column (``arrow.json``) is not a JSON document, or holds an
    object with a key twice. Also an ``OSError``, as pylance raises ("Failed to encode JSON")."""


class RowCountMismatchError(SchemaError, OSError):
    """New column values do not line up with the dataset's rows (too few or too many).

    Also an ``OSError``: pylance reports it as "Invalid user input".
    """


class PredicateError(LanceOpsError, ValueError, OSError):
    """A filter predicate is not valid SQL, or its operands have types that cannot be combined.

    Also an ``OSError``: pylance reports these as "Invalid user input", and so does the message."""

    def __str__(self) -> str:
        return _user_input(super().__str__())


class PredicateTypeError(PredicateError, TypeError):
    """A filter is neither SQL text nor a ``pyarrow.compute.Expression``."""


class DatasetNotFoundError(LanceOpsError, FileNotFoundError, ValueError):
    """No dataset (or no such version / tag) exists at the given location.

    Also a ``ValueError``: pylance raises that for a missing dataset.
    """


class TakeIndexError(LanceOpsError, IndexError, ValueError, OSError):
    """A read or take asked for rows outside a file, fragment or dataset.

    Also the builtins pylance raises for it: ``ValueError`` (file reads) and ``OSError``
    (dataset and fragment takes, "Invalid user input").
    """


class PartitionOutOfRangeError(LanceOpsError, IndexError):
    """A vector index partition number beyond the index's partitions (pylance raises
    ``IndexError``)."""


class DatasetAlreadyExistsError(LanceOpsError, FileExistsError):
    """``mode="create"`` was asked for a location that already holds a dataset."""


class CommitConflictError(LanceOpsError, RuntimeError, OSError):
    """A concurrent commit conflicts with ours and the operation cannot be rebased (an ``OSError``
    too, as pylance's ``lance.commit.CommitConflictError``)."""


class RetryableCommitConflictError(CommitConflictError):
    """Another writer took the version we tried to commit; retrying may succeed."""


class VersionNotFoundError(DatasetNotFoundError, ValueError):
    """A dataset exists but has no such version (pylance raises ``ValueError`` here)."""


class TagNotFoundError(DatasetNotFoundError, ValueError):
    """A dataset exists but has no tag of that name."""


class RefError(LanceOpsError, ValueError):
    """A tag name is invalid, or a tag to be created already exists."""


class InvalidTagNameError(RefError, OSError):
    """A tag name breaks pylance's rules (pylance raises ``OSError`` here)."""


class CleanupError(LanceOpsError, ValueError, OSError):
    """Cleanup was asked to remove what it must not (tagged versions) or given a bad cut-off
    (pylance raises ``OSError`` here)."""


class TaggedVersionsError(CleanupError):
    """Cleanup would remove tagged versions; ``tags`` maps each such tag to its version."""

    def __init__(self, message: str, tags: dict[str, int]) -> None:
        super().__init__(message)
        self.tags = dict(tags)

    def __reduce__(self) -> tuple[type, tuple[str, dict[str, int]]]:
        return type(self), (str(self), self.tags)


class MissingFileError(LanceOpsError, FileNotFoundError):
    """A file the manifest references (data, deletion or row-id file) does not exist.

    The dataset is damaged: the file was removed by hand or by an unsafe cleanup, or the path recorded
    in the manifest was corrupted.
    """


class UnsafePathError(CorruptFileError):
    """A manifest or transaction names a file outside the dataset (``..``, an absolute path, another
    URL scheme); refused before any I/O."""


class StorageError(LanceOpsError, OSError):
    """Storage failed permanently (or kept failing transiently after every retry); see io/retry.py."""


class CommitStoreError(StorageError, ValueError):
    """The external commit store a URI names cannot serve the dataset: its DynamoDB table is missing
    or keyed otherwise than pylance's (pylance raises ``ValueError`` opening such a dataset and
    ``OSError`` writing one)."""


class CommitLockError(StorageError):
    """A ``commit_lock`` raised while guarding a commit (an ``OSError`` naming the lock's own error,
    which is chained, as pylance's "Error from commit handler: ...")."""


class BatchCommitError(InvalidArgumentError, OSError):
    """``LanceDataset.commit_batch`` refuses its transactions: none, or other than appends (an
    ``OSError`` as pylance's)."""


class WriteSchemaError(SchemaError, OSError):
    """Data to be written (or a fragment to be committed) does not fit the dataset's schema: a
    column it lacks and cannot be filled, a column the dataset does not have, nulls in a
    non-nullable column, a value that does not convert to the column's type. ``columns`` names the
    columns concerned. Also an ``OSError``: pylance reports an append with a different schema as
    one."""

    def __init__(self, message: str, columns: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.columns = tuple(columns)

    def __reduce__(self) -> tuple[type, tuple[str, tuple[str, ...]]]:
        return type(self), (str(self), self.columns)


class StorageOptionError(InvalidOptionError):
    """A storage option is unknown to the store, given twice under two names, or has a value the
    store does not accept. The message names the key, never the value (values may be secrets)."""


class ConditionalPutUnsupportedError(StorageError, UnsupportedFeatureError):
    """The store cannot create an object atomically (no exclusive create / conditional put), so two
    writers committing at once could both believe they won. Commit through an external manifest
    store (``manifest_store=lance_ops.SqliteManifestStore(path)``) instead."""


class UnsupportedIndexTypeError(UnsupportedFeatureError):
    """An index is of a type lance_ops cannot maintain (remap, extend) yet, or of a type it does
    not know at all. ``index`` names the index; callers keep the index and fall back to the
    Fragment Reuse Index instead of dropping it."""

    def __init__(self, message: str, index: str = "") -> None:
        super().__init__(message)
        self.index = index

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (str(self), self.index)


class IndexColumnTypeError(InvalidArgumentError, TypeError):
    """An index type that does not fit the column's type (pylance raises ``TypeError``);
    ``column`` names the column. Nothing is committed."""

    def __init__(self, message: str, column: str = "") -> None:
        super().__init__(message)
        self.column = column

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (str(self), self.column)


class IndexExistsError(LanceOpsError, ValueError, RuntimeError):
    """``replace=False`` and an index of that name exists (pylance raises ``RuntimeError``)."""


class IndexCorruptError(CorruptFileError):
    """An index's files are missing, truncated or do not hold what its type needs (a column, a
    metadata key). ``path`` is the index file, the message names the index."""


class IndexNotFoundError(LanceOpsError, KeyError, RuntimeError):
    """No index of that name (pylance raises ``KeyError`` from ``index_stats`` and
    ``RuntimeError`` from ``drop_index``); ``index`` is the name asked for."""

    def __init__(self, message: str, index: str = "") -> None:
        super().__init__(message)
        self.index = index

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (str(self), self.index)


class IndexSegmentError(InvalidArgumentError, RuntimeError):
    """A set of index segments that cannot be merged or committed as one index: none, unknown
    uuids, overlapping fragments, other columns, types or models (pylance raises ``ValueError``,
    ``RuntimeError`` for a model mismatch). Nothing is committed."""


class DetachedCommitError(UnsupportedFeatureError, OSError):
    """A detached commit the dataset cannot take (one named with V1 manifest paths). Also an
    ``OSError``, as pylance's "Not supported" error."""


class DeferredRemapError(UnsupportedFeatureError, OSError):
    """``defer_index_remap=True`` on a dataset with stable row ids: pylance 14 refuses it
    (``OSError``), since a Fragment Reuse Index records row addresses, not row ids."""


class MergeInsertError(LanceOpsError, ValueError, OSError):
    """A merge insert refused on its data: a target row matched by several source rows, or a
    matched row under ``when_matched_fail``. Also an ``OSError``, as pylance raises it."""


class ClusterKeyError(SchemaError, OSError):
    """A clustering key (``cluster_by`` or the ``lance-ops.cluster-by`` config) names a column that
    does not exist, or one whose values cannot be ordered (lists, structs, maps, blobs)."""


class ClusterIndexError(UnsupportedFeatureError, OSError):
    """A clustering compaction refused because an index over the fragments to cluster could not be
    kept right: its type cannot be remapped, it covers only some of those fragments, or it waits
    for a deferred remap (a Fragment Reuse Index cannot express a permutation). ``index`` names it.
    Nothing is committed."""

    def __init__(self, message: str, index: str = "") -> None:
        super().__init__(message)
        self.index = index

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (str(self), self.index)


class ResourcesExhaustedError(LanceOpsError, OSError):
    """An operation needs more memory than ``LANCE_MEM_POOL_SIZE`` allows (pylance raises an
    ``OSError`` "Resources exhausted" from its memory pool)."""
