"""Cleanup of old versions as a job: ``python -m jobs.cleanup --uri DIR [--older-than 7d] ...``.

Runs on the driver (listing and deleting files is metadata work, not data work) through
:meth:`lance_ops.LanceDataset.cleanup_old_versions`: versions older than ``older_than`` and outside
the ``retain_versions`` newest are removed with the files only they reference; files no version
references — such as those written by the tasks of a failed or aborted Spark write — are removed
when older than seven days, or at once with ``delete_unverified=True``. ``dry_run=True`` lists
what would go (``CleanupStats.paths``) and removes nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from pyspark.sql import SparkSession

import lance_ops
from jobs.common import driver_log, run_main
from lance_ops.ops.cleanup import CleanupStats
from lance_ops.ops.engine import ExternalManifestStore
from lance_ops.progress import ProgressCallback

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def cleanup(
    spark: SparkSession,
    uri: str,
    older_than: dt.timedelta | dt.datetime | None = None,
    retain_versions: int | None = None,
    *,
    delete_unverified: bool = False,
    error_if_tagged_old_versions: bool = True,
    dry_run: bool = False,
    storage_options: Mapping[str, str] | None = None,
    progress: ProgressCallback | None = None,
    manifest_store: ExternalManifestStore | None = None,
) -> CleanupStats:
    """Remove the old versions of ``uri`` and the files no kept version needs (see module doc).

    ``spark`` is taken for symmetry with the other jobs; cleanup runs on the driver. ``progress``
    hears of every file removed (:mod:`lance_ops.progress`). With ``manifest_store`` the dataset
    is opened through it (a claimed but unfinished version is repaired first).
    """
    ds = lance_ops.dataset(uri, storage_options=dict(storage_options or {}), manifest_store=manifest_store)
    return ds.cleanup_old_versions(
        older_than,
        retain_versions,
        delete_unverified=delete_unverified,
        error_if_tagged_old_versions=error_if_tagged_old_versions,
        dry_run=dry_run,
        progress=progress,
    )


def parse_duration(text: str) -> dt.timedelta:
    """``"90s"``, ``"15m"``, ``"12h"``, ``"7d"``, ``"2w"`` or a plain number of seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 7d, 12h, 30m, 90s)")
    return dt.timedelta(**{_UNITS[match.group(2) or "s"]: float(match.group(1))})


def _run(spark: SparkSession, args: argparse.Namespace) -> dict[str, Any]:
    stats = cleanup(
        spark,
        args.uri,
        older_than=args.older_than,
        retain_versions=args.retain_versions,
        delete_unverified=args.delete_unverified,
        error_if_tagged_old_versions=not args.allow_tagged,
        dry_run=args.dry_run,
        storage_options=args.storage_options,
        progress=driver_log,
    )
    return asdict(stats)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--older-than", type=parse_duration, default=None, help="e.g. 7d (default 14d)")
        parser.add_argument("--retain-versions", type=int, default=None, help="keep the N newest versions")
        parser.add_argument("--delete-unverified", action="store_true", help="remove orphans of any age")
        parser.add_argument("--allow-tagged", action="store_true", help="keep tagged old versions, no error")
        parser.add_argument("--dry-run", action="store_true", help="list what would be removed")

    result: dict[str, Any] = run_main("python -m jobs.cleanup", argv, arguments, _run)
    return result


if __name__ == "__main__":
    main()
