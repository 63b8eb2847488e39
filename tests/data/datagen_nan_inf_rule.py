"""Generate ``statistics/nan_inf_rule.lance``: float statistics written by the *older* rule.

Before NaN counts were kept beside the statistics, lance-ops recorded ``+inf`` as the max of a
float page (or statistics zone) holding NaN of either sign (``"float_max": "nan-inf"``). Readers
must keep reading such datasets and prune them exactly. This script therefore runs against the
lance-ops of commit 1d8be13 (the last one writing that rule), not the current one::

    git -C /work/main archive 1d8be13 lance_ops | tar -x -C /tmp/old-lance-ops
    PYTHONPATH=/tmp/old-lance-ops .venv/bin/python tests/data/datagen_nan_inf_rule.py

Layout: fragments 0-6 were written by lance-ops (data files with page statistics, one page per
column), fragments 7-8 appended by pylance 14.0.2 and given a statistics file (``_stats/``) by
lance-ops' rebuild. Column ``x`` holds NaN, -NaN (sign bit set), zeros of both signs, infinities
and nulls; ``i`` is the row's number.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import lance
import pyarrow as pa

import lance_ops

NAN = float("nan")
NEG_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
INF = float("inf")

OURS = [
    [1.0, 2.0, 3.0, 4.0],
    [1.0, NAN, 2.0, None],
    [-5.0, NEG_NAN, -1.0, 0.0],
    [NAN, NEG_NAN, None, None],
    [None, None, None, None],
    [10.0, 20.0, INF, -INF],
    [-0.0, 0.0, 0.5, -0.5],
]
PYLANCE = [[3.0, NAN, NEG_NAN, 7.0], [100.0, 200.0, None, NEG_NAN]]


def _table(pages: list[list[float | None]], first: int) -> pa.Table:
    values = [v for page in pages for v in page]
    return pa.table(
        {"i": pa.array(range(first, first + len(values)), pa.int64()), "x": pa.array(values, pa.float64())}
    )


def main() -> None:
    target = Path(__file__).parent / "statistics" / "nan_inf_rule.lance"
    shutil.rmtree(target, ignore_errors=True)
    uri = str(target)
    lance_ops.write_dataset(_table(OURS, 0), uri, max_rows_per_file=4, data_storage_version="2.1")
    lance.write_dataset(_table(PYLANCE, 28), uri, mode="append", max_rows_per_file=4)
    lance_ops.dataset(uri).stats.rebuild()


if __name__ == "__main__":
    main()
