"""pylance 14's words where its own tests match them: negative ``limit`` / ``offset`` messages,
``write_dataset(data_obj=...)``."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import ArgumentTypeError, InvalidArgumentError


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"limit": -1}, "Limit must be non-negative"),
        ({"offset": -1, "limit": 10}, "Offset must be non-negative"),
        ({"offset": 10, "limit": -1}, "Limit must be non-negative"),
        ({"offset": -1, "limit": -1}, "Limit must be non-negative"),  # pylance checks the limit first
    ],
)
def test_negative_limit_or_offset_in_pylance_words(
    kwargs: dict[str, int], words: str, tmp_path: Path
) -> None:
    uri = str(tmp_path / "d")
    lance_ops.write_dataset(pa.table({"a": [1, 2, 3]}), uri)
    with pytest.raises(ValueError, match=f"^{words}$"):
        lance.dataset(uri).to_table(**kwargs)
    with pytest.raises(InvalidArgumentError, match=f"^{words}$"):
        lance_ops.dataset(uri).to_table(**kwargs)
    assert lance.dataset(uri).to_table(offset=1, limit=1) == lance_ops.dataset(uri).to_table(
        offset=1, limit=1
    )


def test_write_dataset_takes_pylance_data_obj_keyword(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array([1, 2], pa.int64())})
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance.write_dataset(data_obj=[], uri=theirs, schema=table.schema)
    ds = lance_ops.write_dataset(data_obj=[], uri=ours, schema=table.schema)
    assert ds.count_rows() == 0 and lance.dataset(ours).schema == lance.dataset(theirs).schema
    lance_ops.write_dataset(data_obj=table, uri=ours, mode="append")
    lance_ops.write_dataset(table, ours, mode="append")
    lance_ops.write_dataset(data=table, uri=ours, mode="append")
    assert lance.dataset(ours).to_table() == pa.concat_tables([table] * 3)
    with pytest.raises(ArgumentTypeError, match="data twice"):
        lance_ops.write_dataset(table, data_obj=table, uri=ours, mode="append")
    assert lance.dataset(ours).count_rows() == 6
