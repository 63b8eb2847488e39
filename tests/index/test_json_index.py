"""JSON functions in filters and JSON indices (``IndexConfig(index_type="json")``), both ways with
pylance 14: the same results as pylance's functions, the same index files, each library using the
other's index."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance.file import LanceFileReader
from pyroaring import BitMap

import lance_ops
from lance_ops.errors import (
    IndexColumnTypeError,
    InvalidArgumentError,
    PredicateError,
    UnsupportedIndexTypeError,
)
from lance_ops.indices import IndexConfig

DOCS = [
    '{"x": 10}', '{"x": 10.5}', '{"x": "10"}', '{"x": true}', '{"x": null}', '{"y": 1}', "[5,6]",
    '{"x": {"a": 1}}', '{"x": [1,2]}', '"s"', '{"x": "abc"}', '{"x": 18446744073709551615}', None,
    '{"x": -2.5}', '{"x": "true"}', '{"x": 1e300}', '{"x": ["abc", 1, "1", [1]]}', '{"x": {"a": "7"}}',
]  # fmt: skip
FUNCTIONS = [
    "json_get_int(j,'x')", "json_get_float(j,'x')", "json_get_bool(j,'x')", "json_get_string(j,'x')",
    "json_get(j,'x')", "json_extract(j,'$.x')", "json_exists(j,'$.x')", "json_get_int(j,'0')",
    "json_extract(j,'$[1]')", "json_extract(j,'x')", "json_array_contains(j,'$.x','1')",
    "json_array_contains(j,'$.x','abc')", "json_array_length(j,'$.x')", "json_get_int(json_get(j,'x'),'a')",
    "json_get_string(json_get(j,'x'),'0')",
]  # fmt: skip


def _value(ds: object, sql: str) -> object:
    try:
        return ds.to_table(columns={"r": sql}).column("r").to_pylist()[0]  # type: ignore[attr-defined]
    except (OSError, ValueError):  # pylance: OSError; lance_ops: PredicateError
        return "error"


@pytest.mark.parametrize("doc", DOCS)
def test_json_functions_as_pylance(tmp_path: Path, doc: str | None) -> None:
    lance.write_dataset(pa.table({"j": pa.array([doc], pa.json_())}), tmp_path / "d")
    theirs, ours = lance.dataset(tmp_path / "d"), lance_ops.dataset(tmp_path / "d")
    assert [_value(ours, f) for f in FUNCTIONS] == [_value(theirs, f) for f in FUNCTIONS]


def test_json_function_on_a_string_column_is_refused(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(pa.table({"s": ['{"x": 1}']}), tmp_path / "d")
    with pytest.raises(PredicateError, match="needs a JSON column"):
        ds.to_table(filter="json_get_int(s, 'x') = 1")


def _rows(n: int) -> pa.Table:
    docs = []
    for i in range(n):
        if i % 11 == 5:
            docs.append(None)
        elif i % 7 == 3:
            docs.append(json.dumps({"other": i}))
        else:
            docs.append(
                json.dumps({"x": i % 50, "s": f"k{i % 13}", "f": i / 4, "b": i % 3 == 0, "a": {"b": i}})
            )
    return pa.table({"j": pa.array(docs, pa.json_()), "n": pa.array(range(n), pa.int64())})


def _index_tables(path: Path) -> dict[str, pa.Table]:
    """Each index file's rows, sorted (pylance's order of equal keys' row ids is not stable)."""
    out = {}
    for f in sorted((path / "_indices").glob("*/*.lance")):
        table = LanceFileReader(str(f)).read_all().to_table()
        out[f.name] = table.sort_by([(name, "ascending") for name in table.column_names])
    return out


CASES = [
    ("btree", "x", "json_get_int(j, 'x') = 7"),
    ("btree", "x", "json_get_int(j, 'x') >= 45"),
    ("bitmap", "s", "json_get_string(j, 's') = 'k3'"),
    ("btree", "f", "json_get_float(j, 'f') < 2.5"),
    ("bitmap", "b", "json_get_bool(j, 'b') = true"),
    ("zonemap", "x", "json_get_int(j, 'x') > 48"),
    ("btree", "a.b", "json_get_int(j, 'a.b') = 3"),  # a key 'a.b', not a path: no row; rechecked
    ("btree", "$.a.b", "json_get_int(j, 'x') < 3"),  # pylance and we: the index at $.a.b does not answer
]


@pytest.mark.parametrize(("target", "path", "filter"), CASES)
def test_json_index_both_ways(tmp_path: Path, target: str, path: str, filter: str) -> None:
    table = _rows(1025)
    config = IndexConfig(index_type="json", parameters={"target_index_type": target, "path": path})
    ours = lance_ops.write_dataset(table, tmp_path / "ours")
    ours.create_scalar_index("j", config)
    theirs = lance.write_dataset(table, tmp_path / "theirs")
    theirs.create_scalar_index(
        "j", lance.indices.IndexConfig(index_type="json", parameters=config.parameters)
    )
    # the same files and details as pylance's
    assert _index_tables(tmp_path / "ours") == _index_tables(tmp_path / "theirs")
    (mine,) = lance_ops.dataset(tmp_path / "ours").manifest.indices
    (its,) = lance_ops.dataset(tmp_path / "theirs").manifest.indices
    assert (mine.details, mine.index_version, mine.name) == (its.details, its.index_version, its.name)
    # each library uses either index, with the rows of a full scan
    expected = lance.dataset(tmp_path / "theirs").to_table(filter=filter, use_scalar_index=False)
    for where in ("ours", "theirs"):
        p, o = lance.dataset(tmp_path / where), lance_ops.dataset(tmp_path / where)
        answered = f"'{path}'" in filter  # an index answers the key it was built at only
        # pylance does not answer ``json_get_bool(...) = true`` (it simplifies it to the bare call)
        if "json_get_bool" not in filter:
            assert ("ScalarIndexQuery" in p.scanner(filter=filter).explain_plan()) == answered
        assert ("ScalarIndexQuery" in o.scanner(filter=filter).explain_plan()) == answered
        assert p.to_table(filter=filter) == expected
        assert o.to_table(filter=filter) == expected


def test_rows_appended_after_the_index_are_scanned(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(_rows(100), tmp_path / "d")
    ds.create_scalar_index("j", IndexConfig("json", {"target_index_type": "btree", "path": "x"}))
    ds.insert(_rows(30))
    lance.dataset(tmp_path / "d").insert(_rows(20))
    filter = "json_get_int(j, 'x') = 7"
    for d in (lance_ops.dataset(tmp_path / "d"), lance.dataset(tmp_path / "d")):
        assert (
            d.to_table(filter=filter).num_rows
            == d.to_table(filter=filter, use_scalar_index=False).num_rows
            == 4
        )


@pytest.mark.parametrize(
    ("docs", "params", "error", "words"),
    [
        (['{"x": 3}', '{"x": 1.5}'], {"target_index_type": "btree", "path": "x"}, IndexColumnTypeError,
         "expected Int64, but batch row 1 has JSON type Float64"),
        (['{"x": [1]}'], {"target_index_type": "btree", "path": "x"}, IndexColumnTypeError,
         "with JSON type Array; only scalar values are supported"),
        (['{"x": 1}'], {"target_index_type": "inverted", "path": "x"}, UnsupportedIndexTypeError,
         "do not support target index type 'inverted'"),
        (['{"x": 1}'], {"target_index_type": "btree"}, InvalidArgumentError, "'path'"),
        (['{"x": 1}'], {"target_index_type": "btree", "path": "x", "other": 1}, InvalidArgumentError,
         "unsupported parameters"),
    ],
)  # fmt: skip
def test_bad_json_index_requests_commit_nothing(
    tmp_path: Path, docs: list[str], params: dict, error: type, words: str
) -> None:
    ds = lance_ops.write_dataset(pa.table({"j": pa.array(docs, pa.json_())}), tmp_path / "d")
    with pytest.raises(error, match=words):
        ds.create_scalar_index("j", IndexConfig("json", params))
    assert lance_ops.dataset(tmp_path / "d").version == 1
    assert lance.dataset(tmp_path / "d").describe_indices() == []


def test_json_index_on_a_string_column_is_refused(tmp_path: Path) -> None:
    ds = lance_ops.write_dataset(pa.table({"s": ['{"x": 1}']}), tmp_path / "d")
    with pytest.raises(IndexColumnTypeError, match="must be a JSON column"):
        ds.create_scalar_index("s", IndexConfig("json", {"target_index_type": "btree", "path": "x"}))
    assert lance_ops.dataset(tmp_path / "d").version == 1


@pytest.mark.parametrize("builder", ["ours", "theirs"])
@pytest.mark.parametrize("target", ["btree", "bitmap", "zonemap"])
def test_optimize_extends_the_json_index(tmp_path: Path, builder: str, target: str) -> None:
    """The next day: rows appended by either library, lance_ops' optimize_indices folds them into
    the index (of either builder); both libraries answer from it as a full scan."""
    params = {"target_index_type": target, "path": "x"}
    ours = lance_ops.write_dataset(_rows(200), tmp_path / "d")
    if builder == "ours":
        ours.create_scalar_index("j", IndexConfig("json", params))
    else:
        lance.dataset(tmp_path / "d").create_scalar_index("j", lance.indices.IndexConfig("json", params))
    lance_ops.dataset(tmp_path / "d").insert(_rows(40))
    lance.dataset(tmp_path / "d").insert(_rows(30))
    ds = lance_ops.dataset(tmp_path / "d")
    ds.optimize.optimize_indices()
    ds.optimize.optimize_indices()  # nothing left to add: no new segment
    ds = lance_ops.dataset(tmp_path / "d")
    (index,) = ds.manifest.indices
    assert sorted(BitMap.deserialize(index.fragment_bitmap)) == [f.id for f in ds.manifest.fragments]
    filter = "json_get_int(j, 'x') = 7"
    for d in (ds, lance.dataset(tmp_path / "d")):
        assert "ScalarIndexQuery" in d.scanner(filter=filter).explain_plan()
        assert d.to_table(filter=filter) == d.to_table(filter=filter, use_scalar_index=False)
        assert d.to_table(filter=filter).num_rows == 3 + 1 + 1  # 7, 57, 107 (157 has no x); 1 per append
