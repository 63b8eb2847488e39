"""L18: scalar indices over fixed-size binary columns, ``arrow.uuid`` extension columns among them
(pylance's test_fixed_size_binary): built by lance_ops or pylance over the storage values, used by
both for ``=`` / ``IN`` / ranges / ``IS NULL`` written with ``arrow_cast(0x..., 'FixedSizeBinary(n)')``."""

from __future__ import annotations

import uuid
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops

N = 3000


def _table() -> pa.Table:
    rng = np.random.default_rng(11)
    keys = [uuid.UUID(int=int(rng.integers(0, 40)) << 64 | 7).bytes for _ in range(N)]
    return pa.table(
        {
            "id": pa.array(range(N)),
            "u": pa.array([None if i % 19 == 0 else k for i, k in enumerate(keys)], pa.uuid()),
            "f": pa.array([bytes([i % 7, 0, 1, i % 3]) for i in range(N)], pa.binary(4)),
        }
    )


def _literal(data: bytes) -> str:
    return f"arrow_cast(0x{data.hex()}, 'FixedSizeBinary({len(data)})')"


FILTERS = [
    ("u", f"u = {_literal(uuid.UUID(int=5 << 64 | 7).bytes)}"),
    ("u", f"u IN ({_literal(uuid.UUID(int=3 << 64 | 7).bytes)}, {_literal(b'x' * 16)})"),
    ("u", f"u > {_literal(uuid.UUID(int=30 << 64 | 7).bytes)}"),
    ("u", "u IS NULL"),
    ("f", f"f = {_literal(bytes([3, 0, 1, 2]))}"),
    ("f", f"f <= {_literal(bytes([1, 0, 1, 0]))} AND id < 2000"),
]


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP", "ZONEMAP"])
@pytest.mark.parametrize("builder", ["lance_ops", "pylance"])
def test_index_used_by_both(tmp_path: Path, kind: str, builder: str) -> None:
    path = tmp_path / "ds"
    lance_ops.write_dataset(_table(), str(path), max_rows_per_file=1000)
    lance_ops.dataset(str(path)).delete("id % 10 = 4")
    ds = lance_ops.dataset(str(path)) if builder == "lance_ops" else lance.dataset(str(path))
    for column in ("u", "f"):
        ds.create_scalar_index(column, kind)
    ours, theirs = lance_ops.dataset(str(path)), lance.dataset(str(path))
    name = {"BTREE": "BTree", "BITMAP": "Bitmap", "ZONEMAP": "ZoneMap"}[kind]
    for column, flt in FILTERS:
        want = theirs.to_table(filter=flt, use_scalar_index=False)
        assert want.schema.field("u").type == pa.uuid()
        if kind != "ZONEMAP" or "IN" not in flt:  # pylance 14 answers IN from a zone map by a scan
            assert f"@{column}_idx({name})" in theirs.scanner(filter=flt).explain_plan(), flt
        assert theirs.to_table(filter=flt).sort_by("id").equals(want.sort_by("id")), flt
        assert f"@{column}_idx({name})" in ours.scanner(filter=flt).explain_plan(), flt
        assert ours.to_table(filter=flt).equals(want), flt


def test_plan_text_as_pylance(tmp_path: Path) -> None:
    arr = pa.array([b"0123012301230123", b"2345234523452345"], pa.uuid())
    ds = lance_ops.write_dataset(pa.table({"uuid": arr}), str(tmp_path / "ds"))
    ds.create_scalar_index("uuid", "BTREE")
    query = f"uuid = {_literal(b'2345234523452345')}"
    expected = "query=[uuid = 32333435323334353233...]@uuid_idx"
    assert expected in ds.scanner(filter=query).explain_plan()
    assert expected in lance.dataset(str(tmp_path / "ds")).scanner(filter=query).explain_plan()
    assert ds.to_table(filter=query).column("uuid").to_pylist() == arr.slice(1, 1).to_pylist()


def test_bloomfilter_refuses_fixed_size_binary(tmp_path: Path) -> None:
    from lance_ops.errors import IndexColumnTypeError

    ds = lance_ops.write_dataset(_table(), str(tmp_path / "ds"))
    with pytest.raises(IndexColumnTypeError, match="u"):
        ds.create_scalar_index("u", "BLOOMFILTER")
    assert lance_ops.dataset(str(tmp_path / "ds")).version == 1
