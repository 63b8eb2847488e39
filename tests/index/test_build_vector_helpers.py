"""L18: ``lance_ops.vector.vec_to_table`` builds what pylance's does; pylance indexes it."""

from __future__ import annotations

from pathlib import Path

import lance
import lance.vector
import numpy as np
import pytest

import lance_ops
from lance_ops.errors import InvalidArgumentError
from lance_ops.vector import vec_to_table


@pytest.mark.parametrize("rows", [1, 3])
def test_vec_to_table_equals_pylances(rows: int) -> None:
    rng = np.random.default_rng(rows)
    matrix = rng.normal(size=(rows, 4))
    as_dict = {f"v{i}": matrix[i] for i in range(rows)}
    assert vec_to_table(as_dict).equals(lance.vector.vec_to_table(as_dict))
    assert vec_to_table(as_dict, ["k", "emb"]).equals(lance.vector.vec_to_table(as_dict, ["k", "emb"]))
    assert vec_to_table(list(matrix)).equals(lance.vector.vec_to_table(list(matrix)))
    assert vec_to_table(matrix, "emb").equals(lance.vector.vec_to_table(matrix, "emb"))


def test_vec_to_table_of_no_rows_keeps_the_dimension() -> None:
    # pylance 14 raises StopIteration here
    table = vec_to_table(np.zeros((0, 4)))
    assert (table.num_rows, table.schema.field("vector").type.list_size) == (0, 4)


def test_vec_to_table_bad_input() -> None:
    with pytest.raises(InvalidArgumentError):
        vec_to_table([np.zeros(3), np.zeros(4)])
    with pytest.raises(InvalidArgumentError):
        vec_to_table(np.zeros((2, 3)), ["a", "b"])
    with pytest.raises(NotImplementedError):
        vec_to_table("vectors")  # type: ignore[arg-type]


def test_vec_to_table_written_by_lance_ops_indexed_and_searched(tmp_path: Path) -> None:
    matrix = np.random.default_rng(0).normal(size=(600, 8)).astype(np.float32)
    lance_ops.write_dataset(vec_to_table(matrix), str(tmp_path))
    lance_ops.dataset(str(tmp_path)).create_index("vector", "IVF_FLAT", num_partitions=4)
    got = lance.dataset(tmp_path).to_table(
        nearest={"column": "vector", "q": matrix[42], "k": 1, "nprobes": 4}
    )
    assert got.column("vector").to_pylist()[0] == matrix[42].tolist()
