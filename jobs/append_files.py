"""Append files that pyarrow reads (Parquet, Arrow IPC) to a Lance dataset: executors read their
share of the files with pyarrow and write fragments, the driver commits one transaction.

    python -m jobs.append_files --uri DIR --source FILE_OR_DIR [--source ...] [--format parquet]

The rows never pass through Spark's JVM (a DataFrame write turns JVM rows into Arrow batches, which
alone costs several times pylance's whole write; bench/RESULTS.md, "L19 Spark jobs on big
inputs"): Spark only schedules the tasks. On the driver the source is listed as a
``pyarrow.dataset`` (a directory's files in the order pyarrow lists them) and its schema (the
first file's, as ``pyarrow.dataset.dataset`` infers it) is checked against the dataset: a column
the dataset lacks, a type that does not convert, a file whose column has another type raise a
:class:`~lance_ops.errors.WriteSchemaError` before any task runs. The files' row groups (an Arrow
IPC file is one piece) are then cut into contiguous splits balanced by bytes, one per slot of the
session. Each task reads its splits with pyarrow, in order, and writes fragments with the data
source's writer (:class:`jobs.datasource.LanceWriter`: the dataset's field ids, file format,
encoding plan and page statistics); the driver commits them in split order as ONE ``Append``
(``mode="overwrite"``: ``Overwrite``, or with ``replace_where`` an ``Update`` replacing the rows
a predicate selects; ``mode="create"``: a new dataset, refused if one exists),
so the dataset's rows are the files' rows in the files' order, as an in-process
``write_dataset(pyarrow.dataset.dataset(source))`` leaves them.

An append commits on the version it planned against; a commit another writer made meanwhile is
resolved as for any append. A failed task fails the job before the commit: the data files the other
tasks wrote are referenced by no version and are removed by
``cleanup_old_versions(delete_unverified=True)``. An append of no rows (no files, or files with no
rows) commits nothing.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
from pyspark.sql import SparkSession

import lance_ops
from jobs.common import driver_log, on_executors, run_main, task_slots
from jobs.datasource import LanceCommitMessage, LanceWriter
from lance_ops.errors import DatasetNotFoundError, InvalidArgumentError, WriteSchemaError
from lance_ops.ops.engine import source_filesystem
from lance_ops.progress import WRITE, ProgressCallback, Tracker

__all__ = ["FORMATS", "MODES", "AppendFilesResult", "FileSplit", "append_files", "plan_splits"]

#: The source formats, by the name ``format=`` takes.
FORMATS = {"parquet": "parquet", "arrow": "ipc", "ipc": "ipc", "feather": "ipc"}
MODES = ("append", "create", "overwrite")
#: Rows per batch read from a source file.
READ_BATCH_ROWS = 128 * 1024


@dataclass(frozen=True)
class FileSplit:
    """Part of a source file one task reads: some of its row groups (``None``: the whole file)."""

    path: str
    row_groups: tuple[int, ...] | None
    num_rows: int
    num_bytes: int


@dataclass(frozen=True)
class AppendFilesResult:
    """What :func:`append_files` did: the version committed (None: nothing was), the rows and
    fragments it added, the source files it read and the Spark tasks that read them."""

    version: int | None
    num_rows: int
    num_fragments: int
    num_files: int
    num_tasks: int


def plan_splits(pieces: Sequence[FileSplit], tasks: int) -> list[list[FileSplit]]:
    """``pieces`` (in source order) in at most ``tasks`` contiguous groups of about equal bytes, a
    piece going to the group its middle byte falls in; adjacent row groups of one file in a group
    joined into one split. Pieces without rows are left out; no group is empty."""
    pieces = [p for p in pieces if p.num_rows]
    total = sum(max(p.num_bytes, 1) for p in pieces)
    out: list[list[FileSplit]] = []
    last_group, start = -1, 0
    for piece in pieces:
        size = max(piece.num_bytes, 1)
        group = min(tasks - 1, (2 * start + size) * tasks // (2 * total))
        start += size
        if group != last_group:
            out.append([])
            last_group = group
        current = out[-1]
        previous = current[-1] if current else None
        if (
            previous is not None
            and previous.path == piece.path
            and previous.row_groups is not None
            and piece.row_groups is not None
        ):
            current[-1] = FileSplit(
                piece.path,
                previous.row_groups + piece.row_groups,
                previous.num_rows + piece.num_rows,
                previous.num_bytes + piece.num_bytes,
            )
        else:
            current.append(piece)
    return out


def _file_format(name: str) -> pads.FileFormat:
    kind = FORMATS.get(name.lower())
    if kind is None:
        raise InvalidArgumentError(f"format must be one of {sorted(FORMATS)}, got {name!r}")
    return pads.ParquetFileFormat() if kind == "parquet" else pads.IpcFileFormat()


def _source(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    file_format: pads.FileFormat,
    storage_options: Mapping[str, str] | None,
) -> tuple[str | None, pads.FileSystemDataset | None]:
    """The URI the source's filesystem is opened from on the executors and the source as a
    pyarrow dataset (None, None: an empty list)."""
    uris = [os.fspath(source)] if isinstance(source, str | os.PathLike) else [os.fspath(s) for s in source]
    if not uris:
        return None, None
    filesystem, first = source_filesystem(uris[0], storage_options)
    if len(uris) == 1:
        dataset = pads.dataset(first, format=file_format, filesystem=filesystem)
    else:  # each a file or a directory (its files listed as pyarrow lists them), in the order given
        paths = [first, *(source_filesystem(u, storage_options)[1] for u in uris[1:])]
        files = [f for p in paths for f in pads.dataset(p, format=file_format, filesystem=filesystem).files]
        dataset = pads.dataset(files, format=file_format, filesystem=filesystem)
    return uris[0], dataset


def _pieces(dataset: pads.FileSystemDataset, schema: pa.Schema) -> list[FileSplit]:
    """Each Parquet row group (each Arrow IPC file) of ``dataset`` in order; a file whose column
    has another type than the source's schema gives it is refused here."""
    pieces: list[FileSplit] = []
    for fragment in dataset.get_fragments():
        physical = fragment.physical_schema
        wrong = [
            f.name
            for f in physical
            if schema.get_field_index(f.name) >= 0 and not schema.field(f.name).type.equals(f.type)
        ]
        if wrong:
            raise WriteSchemaError(
                f"source file {fragment.path} has column(s) {wrong} of other types than the "
                f"source's schema ({schema})",
                tuple(wrong),
            )
        if isinstance(fragment, pads.ParquetFileFragment):
            metadata = fragment.metadata
            for index in range(metadata.num_row_groups):
                group = metadata.row_group(index)
                pieces.append(FileSplit(fragment.path, (index,), group.num_rows, group.total_byte_size))
        else:
            size = dataset.filesystem.get_file_info(fragment.path).size or 0
            pieces.append(FileSplit(fragment.path, None, fragment.count_rows(), size))
    return pieces


def _arrow_filesystem(uri: str, storage_options: Mapping[str, str]) -> pafs.FileSystem:
    """The pyarrow filesystem the source at ``uri`` is read with."""
    filesystem = source_filesystem(uri, storage_options)[0]
    if filesystem is None:
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))


def _read(
    splits: Sequence[FileSplit], file_format: pads.FileFormat, filesystem: pafs.FileSystem, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of ``splits`` in order, as batches of the source's schema."""
    for split in splits:
        if split.row_groups is None:
            fragment = file_format.make_fragment(split.path, filesystem=filesystem)
        else:
            fragment = file_format.make_fragment(
                split.path, filesystem=filesystem, row_groups=split.row_groups
            )
        yield from fragment.to_batches(schema=schema, batch_size=READ_BATCH_ROWS)


def append_files(
    spark: SparkSession,
    uri: str,
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    format: str = "parquet",  # noqa: A002 (Spark's and pyarrow's name)
    mode: str = "append",
    storage_options: Mapping[str, str] | None = None,
    source_storage_options: Mapping[str, str] | None = None,
    max_rows_per_file: int | None = None,
    max_rows_per_group: int | None = None,
    replace_where: str | None = None,
    fill_missing: str | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
    tasks: int | None = None,
) -> AppendFilesResult:
    """Write the rows of the ``format`` files at ``source`` (a file, a directory or a list of files,
    local or remote: ``source_storage_options``, else ``storage_options``, reach them) to the
    dataset at ``uri`` in ONE commit (``mode``: ``append``, ``create`` or ``overwrite``; module
    docstring). With ``replace_where`` (a Lance SQL predicate, ``mode="overwrite"`` only) the rows
    the predicate selects are replaced by the files' rows in one ``Update``; a file row it does not
    select fails the job (nothing committed). ``fill_missing`` (``compute``, ``null``, ``error``)
    says what rows get for dataset columns the files lack, as for the data source. ``tasks`` caps
    the Spark tasks (default: the session's slots); ``progress`` hears of every finished task
    (:mod:`lance_ops.progress`)."""
    lowered = mode.lower()
    if lowered not in MODES:
        raise InvalidArgumentError(f"mode must be one of {MODES}, got {mode!r}")
    if tasks is not None and tasks < 1:
        raise InvalidArgumentError(f"tasks must be at least 1, got {tasks}")
    file_format = _file_format(format)
    read_options = (
        dict(storage_options or {}) if source_storage_options is None else dict(source_storage_options)
    )
    root, dataset = _source(source, file_format, read_options)
    options = {"save_mode": "error" if lowered == "create" else lowered}
    if storage_options:
        options["storage_options"] = json.dumps(dict(storage_options))
    if transaction_properties:
        options["transaction_properties"] = json.dumps(dict(transaction_properties))
    if commit_message is not None:
        options["commit_message"] = commit_message
    if max_rows_per_file is not None:
        options["max_rows_per_file"] = str(max_rows_per_file)
    if max_rows_per_group is not None:
        options["max_rows_per_group"] = str(max_rows_per_group)
    if replace_where is not None:
        if lowered != "overwrite":
            raise InvalidArgumentError("replace_where needs mode='overwrite'")
        options["replace_where"] = replace_where
    if fill_missing is not None:
        options["fill_missing"] = fill_missing
    if dataset is None or not dataset.files:
        if lowered == "append":
            try:
                lance_ops.dataset(uri, storage_options=dict(storage_options or {}))
            except DatasetNotFoundError:
                pass
            else:  # nothing to add
                return AppendFilesResult(None, 0, 0, 0, 0)
        raise InvalidArgumentError(
            f"no source files at {source!r}: no schema to {lowered} a dataset with (an append of "
            "no files to an existing dataset commits nothing)"
        )
    schema = dataset.schema
    # Planned here: a schema that does not fit the dataset raises before anything is read.
    writer = LanceWriter(uri, schema, lowered == "overwrite", options)
    splits = plan_splits(_pieces(dataset, schema), tasks or task_slots(spark))
    num_files = len(dataset.files)
    if not splits and lowered == "append":
        return AppendFilesResult(None, 0, 0, num_files, 0)

    assert root is not None

    def task(group: list[FileSplit]) -> LanceCommitMessage:
        return writer.write_batches(_read(group, file_format, _arrow_filesystem(root, read_options), schema))

    tracker = Tracker.start(progress, WRITE, len(splits), "tasks")
    messages = on_executors(spark, splits, task, tracker)
    committed = writer.commit_messages(messages)
    return AppendFilesResult(
        committed.version,
        sum(m.num_rows for m in messages),
        sum(len(m.fragments) for m in messages),
        num_files,
        len(splits),
    )


def _run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    result = append_files(
        spark,
        args.uri,
        args.source,
        format=args.format,
        mode=args.mode,
        storage_options=args.storage_options,
        max_rows_per_file=args.max_rows_per_file,
        progress=driver_log,
    )
    return {
        "version": result.version,
        "rows": result.num_rows,
        "fragments": result.num_fragments,
        "files": result.num_files,
        "tasks": result.num_tasks,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--source", required=True, action="append", help="a source file or directory (repeatable)"
        )
        parser.add_argument("--format", default="parquet", choices=sorted(FORMATS))
        parser.add_argument("--mode", default="append", choices=MODES)
        parser.add_argument("--max-rows-per-file", type=int, default=None)

    result: dict[str, Any] = run_main("python -m jobs.append_files", argv, arguments, _run)
    return result


if __name__ == "__main__":
    main()
