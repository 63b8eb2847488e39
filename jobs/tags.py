"""Tag helpers for jobs and ``python -m jobs.tags --uri DIR list|create|update|delete ...``.

Tags name versions (pylance's ``ds.tags``); a job may read a tag with
``spark.read.format("lance").option("version", "<tag>")`` and cleanup keeps tagged versions. These
run on the driver over :class:`lance_ops.ops.tags.Tags`; ``spark`` is taken for symmetry with the
other jobs.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession

import lance_ops
from jobs.common import run_main
from lance_ops.ops.tags import Tags


def _tags(uri: str, storage_options: Mapping[str, str] | None) -> Tags:
    return lance_ops.dataset(uri, storage_options=dict(storage_options or {})).tags


def list_tags(
    spark: SparkSession, uri: str, storage_options: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """``{name: {"version", "created_at", ...}}`` of every tag of ``uri``."""
    return _tags(uri, storage_options).list()


def create_tag(
    spark: SparkSession,
    uri: str,
    name: str,
    version: int | str,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Tag ``version`` (a number or another tag's name); RefError if ``name`` exists."""
    _tags(uri, storage_options).create(name, version)


def update_tag(
    spark: SparkSession,
    uri: str,
    name: str,
    version: int | str,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Point the existing tag ``name`` at ``version``."""
    _tags(uri, storage_options).update(name, version)


def delete_tag(
    spark: SparkSession, uri: str, name: str, storage_options: Mapping[str, str] | None = None
) -> None:
    """Remove the tag ``name``; TagNotFoundError if there is none."""
    _tags(uri, storage_options).delete(name)


def _reference(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def _run(spark: SparkSession, args: argparse.Namespace) -> Any:
    if args.action in ("create", "update"):
        (create_tag if args.action == "create" else update_tag)(
            spark, args.uri, args.name, _reference(args.version), args.storage_options
        )
    elif args.action == "delete":
        delete_tag(spark, args.uri, args.name, args.storage_options)
    return list_tags(spark, args.uri, args.storage_options)


def main(argv: Sequence[str] | None = None) -> Any:
    def arguments(parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="print the tags")
        for action in ("create", "update"):
            sub = actions.add_parser(action, help=f"{action} a tag")
            sub.add_argument("name")
            sub.add_argument("version", help="version number or tag name")
        actions.add_parser("delete", help="delete a tag").add_argument("name")

    return run_main("python -m jobs.tags", argv, arguments, _run)


if __name__ == "__main__":
    main()
