"""Decode every page of the pylance-written golden files (tests/data/files) with this codec.

No pylance needed: the pages are parsed straight from the files and each top-level field is
decoded with :func:`make_field_decoder` (whole file and random rows), then compared with the
Parquet expectation written alongside the golden data.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.encoding.api import FileVersion
from lance_ops.encoding.columns import num_columns
from lance_ops.encoding.field_decoder import make_field_decoder
from tests.data.golden import EXPECTED_FILES_DIR, FILE_VERSIONS, FILES_DIR, read_expected
from tests.encoding.harness import assert_same, pylance_page_infos

CASES = [
    (version, path.stem)
    for version in FILE_VERSIONS
    for path in sorted((FILES_DIR / version).glob("*.lance"))
]


@pytest.mark.parametrize(("version", "name"), CASES, ids=[f"{v}-{n}" for v, n in CASES])
def test_golden_file_decodes(version: str, name: str) -> None:
    expected = read_expected(EXPECTED_FILES_DIR / f"{name}.parquet")
    columns, fetch = pylance_page_infos(str(FILES_DIR / version / f"{name}.lance"))
    file_version = FileVersion.parse(version)
    n = expected.num_rows
    rng = np.random.default_rng(0)
    take = np.unique(rng.integers(0, max(n, 1), size=min(n, 25))) if n else np.zeros(0, np.int64)
    col = 0
    for field in expected.schema:
        width = num_columns(field, file_version)
        decoder = make_field_decoder(field, columns[col : col + width], file_version)
        col += width
        want = expected.column(field.name).combine_chunks()
        assert_same(decoder.read(fetch, range(n)), want, f"{name}.{field.name}")
        if n:
            assert_same(decoder.read(fetch, take), want.take(pa.array(take)), f"{name}.{field.name} take")
    assert col == len(columns)
