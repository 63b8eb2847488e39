"""Index maintenance job: indices caught up after compactions and appends, committed on the driver.

    python -m jobs.optimize_indices --uri DIR [--index-names a,b] [--num-indices-to-merge N]

Runs :func:`lance_ops.ops.indices.optimize_indices` against the latest version, as
``ds.optimize.optimize_indices()`` does: indices a deferred compaction left behind are remapped
through the Fragment Reuse Index (which is then trimmed), and fragments appended since an index
was built are added to it, each index type by its codec. The work runs on the driver (one index
at a time; the index files are small next to the data); executors are not used. An index type no
codec extends raises :class:`~lance_ops.errors.UnsupportedIndexTypeError` naming it.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from pyspark.sql import SparkSession

from jobs.common import commit_options, latest, run_main
from lance_ops import CommitOptions
from lance_ops.ops.engine import ExternalManifestStore
from lance_ops.ops.indices import OptimizeReport
from lance_ops.ops.indices import optimize_indices as optimize_op


def optimize_indices(
    spark: SparkSession,
    uri: str,
    index_names: Sequence[str] | None = None,
    num_indices_to_merge: int = 1,
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    manifest_store: ExternalManifestStore | None = None,
    commit: CommitOptions | None = None,
) -> OptimizeReport:
    """Bring the indices of the latest version of ``uri`` up to date; returns what was done."""
    options = commit_options(storage_options, commit_message, transaction_properties, manifest_store, commit)
    storage_options, manifest_store = options.storage_options, options.manifest_store
    del spark  # the driver does the work; the session is the jobs' common signature
    files = latest(uri, storage_options, manifest_store)
    report, _ = optimize_op(files, options, index_names, num_indices_to_merge)
    return report


def _run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    names = [n.strip() for n in args.index_names.split(",") if n.strip()] if args.index_names else None
    report = optimize_indices(
        spark, args.uri, names, args.num_indices_to_merge, storage_options=args.storage_options
    )
    return asdict(report)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--index-names", default=None, help="comma-separated index names (default: all)")
        parser.add_argument("--num-indices-to-merge", type=int, default=1)

    return run_main("python -m jobs.optimize_indices", argv, arguments, _run)


if __name__ == "__main__":
    main()
