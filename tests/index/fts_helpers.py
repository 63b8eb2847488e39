"""Helpers of the L18 full-text tests: both libraries' indices and queries side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import lance.query
import numpy as np
import pyarrow as pa

import lance_ops
import lance_ops.query
from tests.index.test_fts_positions import FILES, index_files, write


def assert_same_files(tmp_path: Path, texts: list, **params: Any) -> None:
    """lance_ops and pylance build an INVERTED index with ``params`` on ``texts``: the same files
    (tables and schema metadata)."""
    for name in ("ours", "theirs"):
        write(tmp_path / name, texts)
    lance_ops.dataset(str(tmp_path / "ours")).create_scalar_index("text", "INVERTED", **params)
    lance.dataset(str(tmp_path / "theirs")).create_scalar_index("text", "INVERTED", **params)
    ours, theirs = index_files(tmp_path / "ours"), index_files(tmp_path / "theirs")
    for name in FILES:
        assert ours[name].equals(theirs[name]), (params, name)
        assert ours[name].schema.metadata == theirs[name].schema.metadata, (params, name)


def indexed_then_appended(
    path: Path, builder: str, words: list[str], rows: int, appended: int, seed: int, **params: Any
) -> Path:
    """``rows`` random texts of ``words`` in fragments of at most 80 rows, indexed by ``builder``
    (``"pylance"`` or ``"lance_ops"``), then ``appended`` more rows no index covers."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 6)))) for _ in range(rows)]
    write(path, texts, max_rows_per_file=80)
    module = lance if builder == "pylance" else lance_ops
    module.dataset(str(path)).create_scalar_index("text", "INVERTED", **params)
    ids = pa.array(range(rows, rows + appended), pa.int64())
    lance.write_dataset(pa.table({"id": ids, "text": pa.array(texts[:appended])}), path, mode="append")
    return path


def match_pair(text: str, operator: str = "OR", **kwargs: Any) -> tuple[object, object]:
    """The same ``MatchQuery`` for lance_ops and for pylance."""
    return tuple(  # type: ignore[return-value]
        module.query.MatchQuery(text, "text", operator=module.query.FullTextOperator[operator], **kwargs)
        for module in (lance_ops, lance)
    )
