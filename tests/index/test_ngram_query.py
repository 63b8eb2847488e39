"""L18: lance_ops' own scans read through an NGRAM index (``to_table(filter=...)``, the default
``use_scalar_index=True``).

``contains(col, s)``, ``starts_with(col, s)`` and ``col LIKE`` / ``ILIKE`` patterns take their
candidate rows from the index (explain_plan names it) and recheck them: the rows always equal a
full scan's (lance_ops' and pylance's), for indices built by lance_ops and by pylance, with rows
deleted before and after the build and rows appended after it (scanned flat). Texts shorter than
a trigram are not answered by the index. Every dataset written here is read back by pylance.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lance_ops

pytestmark = pytest.mark.interop

# a small alphabet, so that trigrams repeat: case, a folded letter, a breaker, a digit
ALPHABET = "abcAB-é1"
TEXT = st.text(alphabet=ALPHABET, max_size=7)
VALUES = st.lists(st.one_of(st.none(), TEXT), min_size=0, max_size=40)


def _ids(table: pa.Table) -> list[int]:
    return sorted(table["id"].to_pylist())


def _filters(needle: str) -> list[str]:
    quoted = needle.replace("'", "''")
    return [
        f"contains(text, '{quoted}')",
        f"starts_with(text, '{quoted}')",
        f"text LIKE '%{quoted}%'",
        f"text ILIKE '{quoted}%'",
        f"contains(text, '{quoted}') AND id % 3 <> 0",
    ]


def _dataset(path: Path, values: list[str | None], builder: str, stable: bool = False) -> None:
    """``values`` written by pylance (a few files), a row deleted before the index is built by
    ``builder``, one deleted after, and rows appended after the build."""
    n = len(values)
    table = pa.table({"id": pa.array(np.arange(n), pa.int64()), "text": pa.array(values, pa.string())})
    lance.write_dataset(table, path, max_rows_per_file=max(n // 3, 1), enable_stable_row_ids=stable)
    lance.dataset(path).delete("id = 1")
    if builder == "ours":
        lance_ops.dataset(str(path)).create_scalar_index("text", "NGRAM")
    else:
        lance.dataset(path).create_scalar_index("text", "NGRAM")
    lance.dataset(path).delete("id = 2")
    extra = pa.table(
        {
            "id": pa.array(np.arange(n, n + 4), pa.int64()),
            "text": pa.array(["abc", "xabcx", None, "ABC"], pa.string()),
        }
    )
    lance.write_dataset(extra, path, mode="append")


def _check(path: Path, needle: str) -> list[str]:
    """The scans of ``needle``'s filters equal full scans; the filters the index answered."""
    ours, theirs = lance_ops.dataset(str(path)), lance.dataset(path)
    answered = []
    for flt in _filters(needle):
        got = _ids(ours.to_table(columns=["id"], filter=flt))
        assert got == _ids(ours.to_table(columns=["id"], filter=flt, use_scalar_index=False)), flt
        assert got == _ids(theirs.to_table(columns=["id"], filter=flt, use_scalar_index=False)), flt
        plan = ours.scanner(columns=["id"], filter=flt).explain_plan()
        if "@text_idx(NGram)" in plan:
            answered.append(flt)
    return answered


@pytest.fixture(scope="module", params=["ours", "theirs"])
def texts_dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(4)
    letters = np.array(list(ALPHABET))
    values: list[str | None] = [
        None if i % 11 == 0 else "".join(rng.choice(letters, int(rng.integers(0, 9)))) for i in range(600)
    ]
    path = tmp_path_factory.mktemp("ngram") / "ds"
    _dataset(path, values, request.param)
    assert lance.dataset(path).count_rows() == 600 - 2 + 4
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(needle=st.text(alphabet=ALPHABET + "'%_", max_size=5))
def test_property_needles_equal_full_scan(texts_dataset: Path, needle: str) -> None:
    _check(texts_dataset, needle)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=VALUES, needle=TEXT, builder=st.sampled_from(["ours", "theirs"]))
def test_property_tables_equal_full_scan(
    tmp_path: Path, values: list[str | None], needle: str, builder: str
) -> None:
    path = tmp_path / "ds"
    shutil.rmtree(path, ignore_errors=True)
    _dataset(path, values, builder)
    _check(path, needle)


def test_plan_names_the_index_only_for_texts_with_a_trigram(texts_dataset: Path) -> None:
    answered = _check(texts_dataset, "ab1")
    assert answered == _filters("ab1")
    assert _check(texts_dataset, "Ab") == []  # shorter than a trigram
    assert _check(texts_dataset, "a-b") == []  # no trigram of letters and digits
    assert _check(texts_dataset, "") == []
    ds = lance_ops.dataset(str(texts_dataset))
    plan = ds.scanner(columns=["id"], filter="contains(text, 'abc')").explain_plan()
    assert 'ScalarIndexQuery: query=[contains(text, Utf8("abc"))]@text_idx(NGram)' in plan
    # only top-level AND conjuncts: an OR or a NOT is scanned
    for flt in ("contains(text, 'abc') OR id = 3", "NOT contains(text, 'abc')"):
        assert "NGRAM" not in ds.scanner(columns=["id"], filter=flt).explain_plan()
        assert _ids(ds.to_table(columns=["id"], filter=flt)) == _ids(
            lance.dataset(texts_dataset).to_table(columns=["id"], filter=flt)
        )


def test_index_prunes_rows_and_fragments(tmp_path: Path) -> None:
    values = [f"row {i} " + ("needle" if i % 50 == 7 else "hay") for i in range(300)]
    _dataset(tmp_path / "ds", values, "ours")
    ds = lance_ops.dataset(str(tmp_path / "ds"))
    plan = ds.scanner(columns=["id"], filter="contains(text, 'needle')").explain_plan()
    assert "IndexedTake: rows=6" in plan  # rows 7, 57, ... 257; the appended fragment read whole
    assert _ids(ds.to_table(columns=["id"], filter="contains(text, 'needle')")) == [7, 57, 107, 157, 207, 257]
    plan = ds.scanner(columns=["id"], filter="contains(text, 'zzzz')").explain_plan()
    assert "fragments=1/4" in plan  # only the appended fragment is read


def test_stable_row_ids_are_scanned(tmp_path: Path) -> None:
    """An NGRAM index of a dataset with stable row ids holds row ids, not addresses: not used."""
    _dataset(tmp_path / "ds", ["abc", "xyz", None, "aabcc", "", "ABC"] * 5, "theirs", stable=True)
    ds = lance_ops.dataset(str(tmp_path / "ds"))
    assert "NGRAM" not in ds.scanner(columns=["id"], filter="contains(text, 'abc')").explain_plan()
    _check(tmp_path / "ds", "abc")


@pytest.mark.parametrize("optimizer", ["ours", "theirs"])
def test_delta_segments_and_compaction(tmp_path: Path, optimizer: str) -> None:
    """The day after: rows appended, the index optimized into a delta segment (by either
    library), rows deleted, then compacted by lance_ops (the index remapped): every answer is a
    full scan's, and the plan covers every fragment with the index's segments."""
    path = tmp_path / "ds"
    values = [f"w{i % 13} item{i}" if i % 9 else None for i in range(500)]
    _dataset(path, values, "ours")
    opener = lance_ops.dataset if optimizer == "ours" else lance.dataset
    opener(str(path)).optimize.optimize_indices(num_indices_to_merge=0)
    assert len(lance.dataset(path).describe_indices()[0].segments) == 2
    ds = lance_ops.dataset(str(path))
    for needle in ("item4", "w12", "abc", "tem1"):
        assert len(_check(path, needle)) == 5, needle
    plan = ds.scanner(columns=["id"], filter="contains(text, 'item4')").explain_plan()
    assert "@text_idx(NGram), fragments=" in plan and "LanceRead" in plan
    ds.delete("id % 4 = 0")
    lance_ops.dataset(str(path)).optimize.compact_files(target_rows_per_fragment=1 << 20)
    for needle in ("item4", "w12", "abc"):
        assert len(_check(path, needle)) == 5, needle  # the remapped index still answers
    assert lance.dataset(path).count_rows() == lance_ops.dataset(str(path)).count_rows()


@pytest.mark.parametrize(
    "flt",
    [
        "contains(text, 'ab1')",
        "starts_with(text, 'ab1')",
        "text LIKE '%ab1%'",
        "text LIKE 'b1a_%'",
        "text LIKE 'a_1%'",
    ],
)
def test_plan_query_text_as_pylance(texts_dataset: Path, flt: str) -> None:
    """The index query as pylance's plan prints it (none when the text has no whole trigram)."""

    def query(plan: str) -> str | None:
        lines = [line for line in plan.splitlines() if "ScalarIndexQuery" in line]
        return lines[0].split("query=", 1)[1].split(", fragments=", 1)[0] if lines else None

    ours = lance_ops.dataset(str(texts_dataset)).scanner(columns=["id"], filter=flt).explain_plan()
    theirs = lance.dataset(texts_dataset).scanner(columns=["id"], filter=flt).explain_plan()
    assert query(ours) == query(theirs)
