"""The ``lance-ops`` command line (click commands drawn with rich).

    lance-ops inspect PATH [--pages]          a .lance data file or a dataset: layout, encodings, sizes
    lance-ops versions URI | history URI      every version; DESCRIBE HISTORY
    lance-ops tags list|create|update|delete  named versions
    lance-ops restore URI VERSION             make an old version the latest again
    lance-ops delete URI --where SQL          delete rows (--dry-run counts them)
    lance-ops add-column URI NAME=SQL...      new columns from SQL expressions
    lance-ops compact URI [--dry-run]         merge small fragments, materialise deletions
    lance-ops cleanup URI [--dry-run] [--older-than 7d]   remove old versions and their files
    lance-ops purge URI                       rewrite fragments with deletions, remove old files
    lance-ops stats URI [--rebuild]           column statistics
    lance-ops profile URI [--store]           the encoding plan the data calls for
    lance-ops report URI -o report.html       one self-contained page of plots
    lance-ops demo                            the main Spark job

See :mod:`lance_ops.cli.commands` for the options, output and exit-status contract. ``demo`` runs
the Spark job as a separate process (``python -m jobs.pipeline``): the library never imports ``jobs``.
"""

from __future__ import annotations

from typing import Any

from lance_ops.cli.commands import cli, main

__all__ = ["cli", "describe_layout", "main"]


def __getattr__(name: str) -> Any:
    """``describe_layout`` on first use: :mod:`lance_ops.file.describe` reads files, and importing it
    would load the whole file layer for every ``lance-ops --help``."""
    if name == "describe_layout":
        from lance_ops.file.describe import describe_layout

        return describe_layout
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
