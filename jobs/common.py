"""Pieces shared by the job modules: running one function per item on executors, opening a pinned
version on an executor, and the ``python -m jobs.<name>`` command-line skeleton."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pyspark.sql import SparkSession

import lance_ops
from jobs.session import get_spark
from lance_ops.fragment.reader import VersionFiles
from lance_ops.ops.commit import CommitOptions
from lance_ops.ops.compaction import open_version

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["commit_options", "latest", "on_executors", "open_version", "run_main"]


def on_executors(spark: SparkSession, items: Sequence[T], func: Callable[[T], R]) -> list[R]:
    """``func`` applied to every item in Spark tasks (one task per item), results in item order.

    If any task fails (after Spark's retries) the job fails and this raises: callers commit only
    after it returns, so a failed task means no commit.
    """
    if not items:
        return []
    return spark.sparkContext.parallelize(list(items), numSlices=len(items)).map(func).collect()


def latest(uri: str, storage_options: Mapping[str, str] | None = None) -> VersionFiles:
    """The files of the latest version at ``uri`` (what a job plans against, on the driver)."""
    ds = lance_ops.dataset(uri, storage_options=dict(storage_options or {}))
    return open_version(uri, ds.version, storage_options)


def commit_options(
    storage_options: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
) -> CommitOptions:
    """Commit options of a job's single transaction."""
    return CommitOptions(
        storage_options=storage_options,
        commit_message=commit_message,
        transaction_properties=transaction_properties,
    )


def run_main(
    prog: str,
    argv: Sequence[str] | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    job: Callable[[SparkSession, argparse.Namespace], Any],
) -> Any:
    """Parse ``--uri``/``--master`` plus the job's own arguments, run ``job`` on a session, print
    its result as JSON and return it. Without ``--master`` the session keeps the master
    ``spark-submit`` was given (``local[*]`` when run as ``python -m jobs.<name>``)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--uri", required=True, help="Lance dataset URI")
    parser.add_argument(
        "--master", default=None, help="Spark master (default: spark-submit's, else local[*])"
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    spark = get_spark(f"lance-ops-{prog.rsplit('.', 1)[-1]}", master=args.master)
    try:
        result = job(spark, args)
    finally:
        spark.stop()
    print(json.dumps(result, indent=2, default=str))
    return result
