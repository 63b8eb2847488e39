"""Golden tests: files and datasets written by pylance 14.0.2 (``tests/data/datagen.py``) must read
back through lance_ops exactly as pylance read them (the Parquet expectations next to them).

No pylance needed: the expectations are plain Parquet. Files are read whole, by row ranges (edges,
page and chunk boundaries) and by taken rows (unsorted, duplicated); their metadata is checked
against the layouts pylance reported. Datasets are read at every version.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lance_ops
from lance_ops.file import LanceFileReader
from tests.data.golden import (
    DATASETS_DIR,
    EXPECTED_FILES_DIR,
    FILE_VERSIONS,
    FILES_DIR,
    leaf_paths,
    read_expected,
    sorted_metadata,
    text_features,
)

GOLDEN_FILES = sorted(
    (version, path.stem) for version in FILE_VERSIONS for path in (FILES_DIR / version).glob("*.lance")
)
GOLDEN_DATASETS = sorted(path.stem for path in DATASETS_DIR.glob("*.lance"))


def test_golden_data_present() -> None:
    names = {name for _, name in GOLDEN_FILES}
    assert {
        "primitives",
        "shapes",
        "strings",
        "fullzip",
        "huge_values",
        "multipage",
        "empty",
        "one_row",
        "maps",
    } <= names
    only = {"maps": ("2.2",)}  # maps need Lance 2.2
    assert all((version, name) in GOLDEN_FILES for name in names for version in only.get(name, FILE_VERSIONS))
    assert {"basic", "deletes", "bitmap_deletes"} <= set(GOLDEN_DATASETS)


@pytest.fixture(scope="module")
def expected_files() -> dict[str, pa.Table]:
    return {path.stem: read_expected(path) for path in EXPECTED_FILES_DIR.glob("*.parquet")}


def _open(version: str, name: str) -> LanceFileReader:
    return LanceFileReader(str(FILES_DIR / version / f"{name}.lance"))


def _assert_same(actual: pa.Table, expected: pa.Table, what: str) -> None:
    """Same names, types, field metadata and values (chunking ignored); names the first bad column."""
    assert actual.column_names == expected.column_names, what
    assert sorted_metadata(actual.schema).equals(sorted_metadata(expected.schema), check_metadata=True), what
    for name in expected.column_names:
        got, want = actual.column(name), expected.column(name)
        assert got.type == want.type, f"{what}: column {name}"
        if not got.equals(want):
            diff = next(
                i for i in range(len(want)) if got[i] != want[i] or got[i].is_valid != want[i].is_valid
            )
            raise AssertionError(
                f"{what}: column {name} differs first at row {diff}: {got[diff]} != {want[diff]}"
            )


@pytest.mark.parametrize(("version", "name"), GOLDEN_FILES)
def test_read_all(version: str, name: str, expected_files: dict[str, pa.Table]) -> None:
    reader = _open(version, name)
    expected = expected_files[name]
    assert reader.num_rows == expected.num_rows
    assert reader.schema.names == expected.column_names
    _assert_same(reader.read_all().to_table(), expected, f"{version}/{name} read_all")
    batches = reader.read_all(batch_size=333).to_batches()
    _assert_same(
        pa.Table.from_batches(list(batches), schema=batches.schema), expected, f"{version}/{name} batches"
    )


@pytest.mark.parametrize(("version", "name"), GOLDEN_FILES)
def test_read_all_projection(version: str, name: str, expected_files: dict[str, pa.Table]) -> None:
    expected = expected_files[name]
    columns = expected.column_names[::-2]
    actual = _open(version, name).read_all(columns=columns).to_table()
    _assert_same(actual, expected.select(columns), f"{version}/{name} columns {columns}")


def _ranges(num_rows: int) -> list[tuple[int, int]]:
    """Edge ranges plus ranges across the 1024-row and 4096-value chunk boundaries that fit."""
    ranges = {(0, 0), (0, num_rows), (num_rows, 0)}
    if num_rows:
        ranges |= {(0, 1), (num_rows - 1, 1), (num_rows // 2, num_rows - num_rows // 2), (1, num_rows - 2)}
    for boundary in (255, 256, 1023, 1024, 1025, 2048, 4096):
        if boundary + 3 <= num_rows:
            ranges |= {(boundary - 2, 5), (boundary, 1)}
    return sorted(r for r in ranges if r[1] >= 0)


@pytest.mark.parametrize(("version", "name"), GOLDEN_FILES)
def test_read_range(version: str, name: str, expected_files: dict[str, pa.Table]) -> None:
    reader = _open(version, name)
    expected = expected_files[name]
    for start, length in _ranges(expected.num_rows):
        actual = reader.read_range(start, length).to_table()
        _assert_same(actual, expected.slice(start, length), f"{version}/{name} rows {start}+{length}")


@pytest.mark.parametrize(("version", "name"), GOLDEN_FILES)
def test_take_rows(version: str, name: str, expected_files: dict[str, pa.Table]) -> None:
    reader = _open(version, name)
    expected = expected_files[name]
    n = expected.num_rows
    rng = np.random.default_rng(n)
    cases = [np.array([], dtype=np.int64)]
    if n:
        cases += [
            np.array([0]),
            np.array([n - 1, 0, n - 1]),
            np.sort(rng.choice(n, size=min(n, 50), replace=False)),
            rng.integers(0, n, size=min(3 * n, 200)),
        ]
    for indices in cases:
        actual = reader.take_rows(indices).to_table()
        _assert_same(actual, expected.take(pa.array(indices, pa.int64())), f"{version}/{name} take {indices}")


@pytest.mark.parametrize("version", FILE_VERSIONS)
@given(data=st.data())
def test_any_range_and_take_across_pages(version: str, data: st.DataObject) -> None:
    """Property: any row range / index list of the multi-page file reads like the expectation."""
    reader = _open(version, "multipage")
    expected = read_expected(EXPECTED_FILES_DIR / "multipage.parquet")
    n = expected.num_rows
    start = data.draw(st.integers(0, n), label="start")
    length = data.draw(st.integers(0, n - start), label="length")
    _assert_same(reader.read_range(start, length).to_table(), expected.slice(start, length), "range")
    indices = data.draw(st.lists(st.integers(0, n - 1), max_size=64), label="indices")
    taken = reader.take_rows(np.array(indices, dtype=np.int64)).to_table()
    _assert_same(taken, expected.take(pa.array(indices, pa.int64())), "take")


def test_out_of_range_reads_fail() -> None:
    reader = _open("2.1", "one_row")
    with pytest.raises(IndexError):
        reader.read_range(0, 2)
    with pytest.raises(IndexError):
        reader.take_rows([1])


@pytest.mark.parametrize(("version", "name"), GOLDEN_FILES)
def test_metadata_matches_pylance_layouts(version: str, name: str) -> None:
    """Footer version, row count and, page by page, the layouts / compressions pylance reported."""
    pylance_pages = json.loads((FILES_DIR / version / "encodings.json").read_text())[name]
    metadata = _open(version, name).metadata()
    assert metadata.version == version
    assert metadata.num_rows == read_expected(EXPECTED_FILES_DIR / f"{name}.parquet").num_rows
    assert len(metadata.columns) == len(pylance_pages)
    for leaf, column in zip(leaf_paths(metadata.schema), metadata.columns, strict=True):
        ours = [text_features(page.encoding) for page in column.pages]
        assert ours == pylance_pages[leaf], f"{version}/{name}.{leaf}"
        assert sum(page.length for page in column.pages) == metadata.num_rows


def _versions(name: str) -> list[dict]:
    return json.loads((DATASETS_DIR / f"{name}.expected" / "versions.json").read_text())


@pytest.mark.parametrize("name", GOLDEN_DATASETS)
def test_dataset_versions(name: str) -> None:
    summary = _versions(name)
    ds = lance_ops.dataset(str(DATASETS_DIR / f"{name}.lance"))
    assert ds.version == ds.latest_version == summary[-1]["version"]
    assert [v["version"] for v in ds.versions()] == [v["version"] for v in summary]


@pytest.mark.parametrize(
    ("name", "version"), [(name, v["version"]) for name in GOLDEN_DATASETS for v in _versions(name)]
)
def test_dataset_content(name: str, version: int) -> None:
    info = next(v for v in _versions(name) if v["version"] == version)
    expected = read_expected(DATASETS_DIR / f"{name}.expected" / f"v{version}.parquet")
    uri = str(DATASETS_DIR / f"{name}.lance")
    ds = lance_ops.dataset(uri, version=version)
    assert ds.version == version
    assert ds.data_storage_version == info["data_storage_version"]
    assert ds.count_rows() == info["rows"] == expected.num_rows
    assert len(ds.get_fragments()) == info["fragments"]
    assert ds.schema.names == info["columns"]
    _assert_same(ds.to_table(), expected, f"{name} v{version}")
    if expected.num_rows:
        indices = [expected.num_rows - 1, 0, expected.num_rows // 2]
        _assert_same(ds.take(indices), expected.take(indices), f"{name} v{version} take")
    checked_out = lance_ops.dataset(uri).checkout_version(version)
    assert checked_out.count_rows() == expected.num_rows
