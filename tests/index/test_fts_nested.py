"""L18: scalar indices on a nested field (``data.text``, ``data.n``): lance_ops reads the field
through its struct (null where the struct is), builds BTREE and INVERTED as pylance 14 does, and
pylance answers from our index with the rows and scores of its own."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops

pytestmark = pytest.mark.interop


def write(path: Path) -> None:
    rng = np.random.default_rng(5)
    words = ["alpha", "beta", "gamma", "the", "delta"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 6)))) for _ in range(300)]
    texts[7] = None
    numbers = pa.array([None if i % 11 == 0 else i % 37 for i in range(300)], pa.int64())
    mask = pa.array([i % 13 == 0 for i in range(300)])  # null structs: their fields are null
    data = pa.StructArray.from_arrays([pa.array(texts), numbers], names=["text", "n"], mask=mask)
    lance.write_dataset(
        pa.table({"id": pa.array(range(300), pa.int64()), "data": data}), path, max_rows_per_file=120
    )


def test_btree_and_inverted_on_nested_field(tmp_path: Path) -> None:
    for name in ("ours", "theirs"):
        write(tmp_path / name)
    ours = lance_ops.dataset(str(tmp_path / "ours"))
    ours.create_scalar_index("data.n", "BTREE")
    ours.create_scalar_index("data.text", "INVERTED", with_position=True)
    theirs = lance.dataset(str(tmp_path / "theirs"))
    theirs.create_scalar_index("data.n", "BTREE")
    theirs.create_scalar_index("data.text", "INVERTED", with_position=True)
    mine = lance.dataset(str(tmp_path / "ours"))
    assert sorted(i["type"] for i in lance_ops.dataset(mine.uri).list_indices()) == ["BTree", "Inverted"]
    for predicate in ("data.n = 5", "data.n < 3", "data.n IS NULL", "data.n IS NOT NULL"):
        plan = mine.scanner(filter=predicate, columns=["id"]).explain_plan()
        assert "ScalarIndexQuery" in plan or "MaterializeIndex" in plan, plan
        got = mine.to_table(filter=predicate, columns=["id"]).column("id").to_pylist()
        want = (
            theirs.to_table(filter=predicate, columns=["id"], use_scalar_index=False).column("id").to_pylist()
        )
        assert sorted(got) == sorted(want), predicate
        assert sorted(
            lance_ops.dataset(str(tmp_path / "ours"))
            .to_table(filter=predicate, columns=["id"])
            .column("id")
            .to_pylist()
        ) == sorted(want)
    for text in ("alpha", "beta gamma", '"alpha beta"', "the"):
        query = {"query": text, "columns": ["data.text"]}
        for reader in (mine, lance_ops.dataset(str(tmp_path / "ours"))):
            got = reader.to_table(full_text_query=query, columns=["id", "_score"]).sort_by("id")
            want = theirs.to_table(full_text_query=query, columns=["id", "_score"]).sort_by("id")
            assert got.column("id").to_pylist() == want.column("id").to_pylist(), text
            np.testing.assert_allclose(
                np.asarray(got.column("_score")), np.asarray(want.column("_score")), rtol=1e-6
            )
