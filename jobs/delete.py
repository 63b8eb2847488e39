"""Distributed delete: executors write deletion files, the driver commits one ``Delete``.

    python -m jobs.delete --uri DIR --where "sql predicate"

The driver pins the latest version and checks the predicate against its schema (a bad predicate
raises before any task runs); each Spark task (one per slot of the session, each taking a group of
fragments) opens that version once per Python worker, evaluates the predicate on each fragment and
writes its new deletion file (:func:`lance_ops.ops.delete.delete_in_fragment`); the
driver then commits all of them as one ``Delete`` on the pinned version
(:func:`lance_ops.ops.delete.commit_delete`). A failed task fails the job before the commit: the
deletion files already written are referenced by no version and are removed by cleanup.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow.compute as pc
from pyspark.sql import SparkSession

from jobs.common import (
    commit_options,
    driver_log,
    latest,
    on_executors,
    pinned_version,
    run_main,
    task_slots,
)
from lance_ops import CommitOptions
from lance_ops.errors import CorruptFileError
from lance_ops.ops.delete import DeleteResult, FragmentDeletion, commit_delete, delete_in_fragment
from lance_ops.ops.engine import ExternalManifestStore, parse_predicate
from lance_ops.progress import DELETE, ProgressCallback, Tracker


def delete(
    spark: SparkSession,
    uri: str,
    predicate: str | pc.Expression,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
    manifest_store: ExternalManifestStore | None = None,
    commit: CommitOptions | None = None,
) -> DeleteResult:
    """Delete the rows ``predicate`` selects from the latest version of ``uri`` in one commit;
    ``progress`` hears of every finished task (:mod:`lance_ops.progress`); ``manifest_store``
    (e.g. :class:`~lance_ops.SqliteManifestStore`) is the external store to commit through."""
    options = commit_options(storage_options, commit_message, transaction_properties, manifest_store, commit)
    storage_options, manifest_store = options.storage_options, options.manifest_store
    files = latest(uri, storage_options, manifest_store)
    parse_predicate(predicate, files.schema)
    version = files.manifest.version
    store_options = dict(storage_options or {})

    job = uuid.uuid4().hex

    def task(item: tuple[int, int]) -> FragmentDeletion | None:
        # The fragment by its place in the pinned manifest: only its reader is built, not one per
        # fragment of the dataset. The version is opened once per worker.
        index, fragment_id = item
        pinned = pinned_version(job, uri, version, store_options)
        fragment = pinned.fragment_at(index)
        if fragment.id != fragment_id:  # the driver read the same version's manifest
            raise CorruptFileError(uri, f"version {version}: fragment {fragment_id} is not at {index}")
        return delete_in_fragment(fragment, parse_predicate(predicate, pinned.schema), version)

    tracker = Tracker.start(progress, DELETE, len(files.manifest.fragments), "tasks")
    items = [(index, f.id) for index, f in enumerate(files.manifest.fragments)]
    # A fragment's work (evaluate the predicate, write a deletion file) is small beside a task's
    # fixed cost: the fragments go in groups, a task per slot of the session.
    found = on_executors(spark, items, task, tracker, tasks=task_slots(spark))
    return commit_delete(files, [d for d in found if d is not None], predicate, options)


def _run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    result = delete(spark, args.uri, args.where, args.storage_options, progress=driver_log)
    return {"version": result.manifest.version, "deleted_rows": result.num_deleted_rows}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--where", required=True, help="SQL predicate selecting the rows to delete")

    result: dict[str, Any] = run_main("python -m jobs.delete", argv, arguments, _run)
    return result


if __name__ == "__main__":
    main()
