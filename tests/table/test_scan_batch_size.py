"""``scanner(batch_size=)``, ``strict_batch_size``, ``LANCE_DEFAULT_BATCH_SIZE``: batch sizes as pylance's."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops
from lance_ops.errors import InvalidArgumentError


def _sizes(batches) -> list[int]:
    return [b.num_rows for b in batches]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Fragments of 32, 32, 7 rows and one with deletions (written by lance_ops, edited by pylance)."""
    uri = str(tmp_path_factory.mktemp("batches") / "ds.lance")
    lance_ops.write_dataset(
        pa.table({"a": range(71), "s": [str(i) for i in range(71)]}), uri, max_rows_per_file=32
    )
    lance.write_dataset(pa.table({"a": range(100, 140), "s": ["x"] * 40}), uri, mode="append")
    lance.dataset(uri).delete("a >= 110 AND a < 113")
    return uri


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch_size=st.integers(1, 80), strict=st.booleans())
def test_batches_as_pylance(written: str, batch_size: int, strict: bool) -> None:
    ours = list(lance_ops.dataset(written).to_batches(batch_size=batch_size, strict_batch_size=strict))
    theirs = list(lance.dataset(written).to_batches(batch_size=batch_size, strict_batch_size=strict))
    assert _sizes(ours) == _sizes(theirs)
    assert pa.Table.from_batches(ours).to_pylist() == pa.Table.from_batches(theirs).to_pylist()


def test_limit_offset_and_projection_keep_exact_batches(written: str) -> None:
    ds = lance_ops.dataset(written)
    batches = list(
        ds.scanner(columns=["s"], batch_size=5, offset=3, limit=40, strict_batch_size=True).to_batches()
    )
    assert _sizes(batches) == [5] * 8
    assert pa.Table.from_batches(batches).column("s").to_pylist() == [str(i) for i in range(3, 43)]
    no_columns = list(ds.scanner(columns=[], batch_size=10, with_row_id=False).to_batches())
    assert sum(_sizes(no_columns)) == ds.count_rows()
    assert max(_sizes(no_columns)) == 10


def test_default_batch_size_from_environment(written: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCE_DEFAULT_BATCH_SIZE", "12")
    ours = _sizes(lance_ops.dataset(written).to_batches())
    assert ours == _sizes(lance.dataset(written).to_batches())
    assert ours[:3] == [12, 12, 8]
    monkeypatch.setenv("LANCE_DEFAULT_BATCH_SIZE", "zero")
    with pytest.raises(InvalidArgumentError, match="LANCE_DEFAULT_BATCH_SIZE"):
        lance_ops.dataset(written).to_table()
