"""Full-zip pages of fixed-width values without repetition (vectors, wide structs) are read as
an ``n x stride`` grid of control word + value instead of level by level. Files pylance writes
and files we write, whole, by range and by take, must read exactly as pylance reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_ops.encoding.structural import fullzip
from lance_ops.file import LanceFileReader, LanceFileWriter

pytestmark = pytest.mark.interop

ROWS = 1_025


def _vectors(nulls: bool) -> pa.Array:
    rng = np.random.default_rng(3)
    values = pa.array(rng.normal(size=ROWS * 64).astype(np.float32))
    mask = pa.array(rng.random(ROWS) < 0.3) if nulls else None
    return pa.FixedSizeListArray.from_arrays(values, 64, mask=mask)


def _tables() -> dict[str, pa.Table]:
    plain = _vectors(False)
    nullable = _vectors(True)
    inner_nulls = pa.FixedSizeListArray.from_arrays(
        pa.array([None if i % 5 == 0 else float(i) for i in range(ROWS * 40)], pa.float64()), 40
    )
    wrapped = pa.StructArray.from_arrays([nullable], ["v"], mask=pa.array(np.arange(ROWS) % 4 == 1))
    return {
        "plain": pa.table({"v": plain}),
        "nullable": pa.table({"v": nullable}),
        "item_nulls": pa.table({"v": inner_nulls}),
        "in_null_struct": pa.table({"s": wrapped}),
        "non_nullable": pa.Table.from_arrays([plain], schema=pa.schema([pa.field("v", plain.type, False)])),
    }


TABLES = _tables()
TAKE = [0, 1, 2, 511, 512, 1_000, 1_024]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("writer", ["ours", "pylance"])
@pytest.mark.parametrize("name", list(TABLES))
def test_fixed_stride_pages_read_like_pylance(
    tmp_path: Path, name: str, writer: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lance.file

    table = TABLES[name]
    path = tmp_path / "f.lance"
    make = LanceFileWriter if writer == "ours" else lance.file.LanceFileWriter
    with make(str(path), table.schema, version=version) as out:
        out.write_batch(table)
    grids: list[bool] = []
    decode = fullzip.FullZipReader._decode_fixed_stride

    def spy(self: fullzip.FullZipReader, buf: np.ndarray, n: int) -> object:
        result = decode(self, buf, n)
        grids.append(result is not None)
        return result

    monkeypatch.setattr(fullzip.FullZipReader, "_decode_fixed_stride", spy)
    ours = LanceFileReader(path)
    theirs = lance.file.LanceFileReader(str(path))
    assert ours.read_all().to_table().equals(theirs.read_all().to_table())
    assert ours.read_all().to_table().equals(table)
    assert ours.read_range(3, 1_000).to_table().equals(theirs.read_range(3, 1_000).to_table())
    assert ours.take_rows(TAKE).to_table().equals(theirs.take_rows(TAKE).to_table())
    assert grids and all(grids), "every full-zip page read should have taken the grid path"


def _page_bytes(path: Path) -> list[bytes]:
    reader = LanceFileReader(path)
    data = path.read_bytes()
    return [
        data[position : position + size]
        for pages in reader._pages
        for page in pages
        if page.layout.WhichOneof("layout") == "full_zip_layout"
        for position, size in page.buffers
    ]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("name", list(TABLES))
def test_fixed_stride_pages_are_written_as_pylance_writes_them(
    tmp_path: Path, name: str, version: str
) -> None:
    import lance.file

    table = TABLES[name]
    for make, file in ((LanceFileWriter, "ours.lance"), (lance.file.LanceFileWriter, "theirs.lance")):
        with make(str(tmp_path / file), table.schema, version=version) as out:
            out.write_batch(table)
    ours, theirs = _page_bytes(tmp_path / "ours.lance"), _page_bytes(tmp_path / "theirs.lance")
    assert ours and ours == theirs
