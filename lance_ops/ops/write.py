"""Writing data to a dataset: create it, append to it, or overwrite its content; and the ``Update``
that replaces the rows a predicate selects with new fragments (a replace-where backfill)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from lance_ops.encoding.plan import CONFIG_KEY as PLAN_CONFIG_KEY
from lance_ops.encoding.plan import EncodingPlan
from lance_ops.errors import DatasetAlreadyExistsError, InvalidArgumentError, RetryableCommitConflictError
from lance_ops.fragment.conform import check_fill_missing
from lance_ops.fragment.options import COMPRESSION_CONFIG_KEY, WriteOptions
from lance_ops.fragment.reader import VersionFiles
from lance_ops.fragment.writer import (
    FragmentMetadata,
    input_rows,
    new_dataset_reader,
    to_reader,
    write_new_fragments,
)
from lance_ops.io.context import StorageContext
from lance_ops.ops.commit import CommitOptions, commit
from lance_ops.ops.delete import delete_in_fragment
from lance_ops.progress import WRITE, ProgressCallback, Tracker
from lance_ops.query.predicate import Predicate
from lance_ops.table.commit import list_versions, load_entry
from lance_ops.table.manifest import Manifest
from lance_ops.table.transaction import Append, Operation, Overwrite, Transaction, Update

MODES = ("create", "append", "overwrite")


def write(
    data: Any,
    storage: StorageContext,
    mode: str,
    schema: pa.Schema | None,
    write_options: WriteOptions,
    commit_options: CommitOptions,
    progress: ProgressCallback | None = None,
    fill_missing: str | None = None,
) -> tuple[Manifest, Transaction]:
    """Write ``data`` as a new dataset (``create``), new rows (``append``) or new content (``overwrite``).

    The latest manifest is read once: appends write the dataset's field ids in its file version;
    overwrites keep the file version unless ``commit_options.data_storage_version`` names one.
    ``progress`` hears of every data file opened and closed (:mod:`lance_ops.progress`). The
    encoding plan of ``write_options`` (default: the one stored in the dataset's config) is applied;
    creates and overwrites store a given plan in the new version's config. Appends write page
    statistics unless the options or the dataset's config (``lance-ops.page-statistics``) say not
    to; creates and overwrites unless the options say not to. The data is conformed to the
    dataset's schema (an append) or to ``schema`` before anything is written
    (:mod:`lance_ops.fragment.conform`; ``fill_missing`` says what becomes of missing columns).
    """
    if mode not in MODES:
        raise InvalidArgumentError(f"mode must be 'create', 'append' or 'overwrite', not {mode!r}")
    check_fill_missing(fill_missing)
    entries = list_versions(storage.store, storage.root)
    if entries and mode == "create":
        raise DatasetAlreadyExistsError(f"Dataset already exists: {storage.uri}")
    read_version = entries[-1].version if entries else 0
    manifest = load_entry(storage.store, storage.root, entries[-1]).manifest if entries else None
    version = commit_options.data_storage_version
    if manifest is not None and (mode == "append" or version is None):
        version = manifest.data_storage_version
    given_plan = write_options.encoding_plan
    stored_plan = None if manifest is None or mode != "append" else EncodingPlan.from_config(manifest.config)
    write_options = replace(
        write_options, data_storage_version=version or "stable", encoding_plan=given_plan or stored_plan
    ).for_dataset({} if manifest is None or mode != "append" else manifest.config)
    if manifest is not None and mode == "append":
        lance_schema = manifest.schema
        reader = to_reader(data, lance_schema.to_arrow(), fill_missing)
    else:
        reader, lance_schema = new_dataset_reader(
            data, schema, write_options.data_storage_version, fill_missing
        )
    tracker = Tracker.start(progress, WRITE, input_rows(data), "rows")
    fragments = write_new_fragments(reader, storage, lance_schema, write_options, tracker)
    operation: Operation
    if manifest is not None and mode == "append":
        operation = Append(tuple(fragments))
    else:
        config = {} if given_plan is None else {PLAN_CONFIG_KEY: given_plan.to_json()}
        if write_options.compression is not None:
            config[COMPRESSION_CONFIG_KEY] = write_options.compression
        if manifest is None:
            config.update(commit_options.new_dataset_config or {})
        operation = Overwrite(tuple(fragments), lance_schema, config)
    options = replace(
        commit_options, read_version=read_version, data_storage_version=write_options.data_storage_version
    )
    try:
        return commit(storage, operation, options)
    except RetryableCommitConflictError as exc:
        if not entries:
            raise DatasetAlreadyExistsError(f"a dataset was created concurrently at {storage.uri}") from exc
        raise


def replace_rows(
    files: VersionFiles, predicate: Predicate, new_fragments: Sequence[FragmentMetadata]
) -> Update:
    """The ``Update`` (rewrite-rows mode, as pylance records one) that deletes the rows of the version
    ``files`` reads that ``predicate`` selects and adds ``new_fragments`` in their place.

    Deletion files are written here (fragments left without live rows are removed); the caller
    commits the operation on that version. New fragment ids are assigned at commit.
    """
    version = files.manifest.version
    found = (delete_in_fragment(fragment, predicate, version) for fragment in files.fragments())
    deletions = [d for d in found if d is not None]
    return Update(
        removed_fragment_ids=tuple(d.fragment_id for d in deletions if d.updated is None),
        updated_fragments=tuple(d.updated for d in deletions if d.updated is not None),
        new_fragments=tuple(new_fragments),
    )
