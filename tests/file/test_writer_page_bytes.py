"""``LanceFileWriter(max_page_bytes=)`` cuts pages in 2.0 files only, as pylance (2.1+ readers split
large pages); a writer closed with neither schema nor data fails with pylance's words."""

from __future__ import annotations

from pathlib import Path

import lance.file
import numpy as np
import pyarrow as pa
import pytest

import lance_ops.file
from lance_ops.errors import SchemaError


@pytest.mark.interop
@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize(("rows", "max_page_bytes"), [(3, 1), (100_000, 1000), (1024, None)])
def test_pages_as_pylance(tmp_path: Path, version: str, rows: int, max_page_bytes: int | None) -> None:
    table = pa.table({"a": np.arange(rows, dtype=np.int64), "s": [str(i) for i in range(rows)]})
    options = {} if max_page_bytes is None else {"max_page_bytes": max_page_bytes}
    pages = {}
    for name, module in (("ours", lance_ops.file), ("theirs", lance.file)):
        path = str(tmp_path / f"{name}.lance")
        with module.LanceFileWriter(path, table.schema, version=version, **options) as writer:
            writer.write_batch(table)
        pages[name] = [len(c.pages) for c in module.LanceFileReader(path).metadata().columns]
        # each library reads the other's file
        other = lance.file if module is lance_ops.file else lance_ops.file
        assert other.LanceFileReader(path).read_all().to_table().equals(table)
    assert pages["ours"] == pages["theirs"]


def test_no_schema_no_data(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="Schema is unknown and file cannot be created"):
        with lance_ops.file.LanceFileWriter(str(tmp_path / "f.lance")):
            pass
    assert not (tmp_path / "f.lance").exists()
