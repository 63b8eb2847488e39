"""L18: phrase queries with ``slop`` above 0 answered as pylance 14 answers them.

pylance 14 finds sloppy phrases two ways (observed on thousands of small cases, checked here):
in an index partition with its cursor walk, which misses some placements (``"b c b"``, slop 1,
does not find the text ``"b c b"``), and in unindexed rows by finding every placement. lance_ops
reproduces both: same rows and ``_score`` on pylance's and lance_ops' indices, on the unindexed
rows of an append, with deletions, a prefilter and without any index; pylance finds the same on
lance_ops' index."""

from __future__ import annotations

from pathlib import Path

import lance
import lance.query
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
import lance_ops.query
from lance_ops.errors import InvalidArgumentError, UnsupportedFeatureError
from tests.index.test_fts_positions import assert_same, write

pytestmark = pytest.mark.interop

VOCAB = ["a", "b", "c", "x", "the", "of"]
PHRASES = ["a b", "b a", "b c b", "a b a c", "b the c", "the a b", "c c", "a x b", "c b a b", "b b b"]


def texts(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(VOCAB, size=int(rng.integers(0, 10)))) for _ in range(count)]


@pytest.fixture(scope="module", params=["pylance", "lance_ops", "none"])
def sloppy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three fragments indexed with positions by either builder (or no index at all), an append
    the index does not cover, a few deleted rows."""
    path = tmp_path_factory.mktemp("slop") / "ds"
    write(path, [*texts(400, seed=3), None, ""], max_rows_per_file=150)
    if request.param != "none":
        module = lance if request.param == "pylance" else lance_ops
        module.dataset(str(path)).create_scalar_index("text", "INVERTED", with_position=True)
    extra = pa.table({"id": pa.array(range(402, 502), pa.int64()), "text": pa.array(texts(100, seed=4))})
    lance.write_dataset(extra, path, mode="append")
    lance.dataset(str(path)).delete("id % 37 = 5")
    return path


@pytest.mark.parametrize("slop", [1, 2, 5])
def test_sloppy_phrases_match_pylance(sloppy: Path, slop: int) -> None:
    found = 0
    for text in PHRASES:
        ours = lance_ops.query.PhraseQuery(text, "text", slop=slop)
        theirs = lance.query.PhraseQuery(text, "text", slop=slop)
        found += assert_same(sloppy, ours, theirs)
        assert_same(sloppy, ours, theirs, filter="id < 250", prefilter=True)
    assert found > 100


def test_slop_finds_a_superset_of_exact_phrases_except_pylance_misses(sloppy: Path) -> None:
    """The index walk misses some placements an exact phrase finds (pylance's rule, kept); in
    unindexed rows every exact match is a sloppy match."""
    exact = lance_ops.dataset(str(sloppy)).to_table(
        full_text_query=lance_ops.query.PhraseQuery("b c b", "text"), columns=["id"]
    )
    loose = lance_ops.dataset(str(sloppy)).to_table(
        full_text_query=lance_ops.query.PhraseQuery("b c b", "text", slop=1), columns=["id"]
    )
    indexed = bool(lance_ops.dataset(str(sloppy)).list_indices())
    unindexed = set(range(402, 502)) if indexed else set(range(502))
    exact_ids, loose_ids = set(exact.column("id").to_pylist()), set(loose.column("id").to_pylist())
    assert exact_ids and exact_ids & unindexed <= loose_ids
    assert bool(exact_ids - loose_ids) == indexed  # the index walk misses some


def test_pylance_rule_on_small_texts(tmp_path: Path) -> None:
    """Hand-picked texts: repeated terms, out-of-order terms, gaps just within and beyond the slop."""
    cases = ["b c b", "a b c", "a x b c", "c b", "b a c", "a a b", "b b c c", "a x x b", "b x c b"]
    cases.append("c x b x c")
    write(tmp_path / "ds", cases)
    lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index(
        "text", "INVERTED", with_position=True, stem=False, remove_stop_words=False
    )
    expected = {  # read from pylance 14 on its own index
        ("b c b", 1): [],
        ("a b", 1): [1, 2, 5],
        ("a b", 2): [1, 2, 5, 7],
        ("b c", 1): [0, 1, 2, 4, 6, 8, 9],
        ("c b", 1): [0, 3, 8, 9],
        ("b b", 1): [0, 6],
        ("b b", 2): [0, 6, 8],
    }
    for (text, slop), ids in expected.items():
        for module in (lance, lance_ops):
            table = module.dataset(str(tmp_path / "ds")).to_table(
                full_text_query=module.query.PhraseQuery(text, "text", slop=slop), columns=["id", "_score"]
            )
            assert sorted(table.column("id").to_pylist()) == ids, (module.__name__, text, slop)


@pytest.mark.parametrize("slop", [-1, 1.5, True])
def test_bad_slop(tmp_path: Path, slop: object) -> None:
    write(tmp_path / "ds", ["a b"])
    with pytest.raises(InvalidArgumentError, match="slop"):
        lance_ops.dataset(str(tmp_path / "ds")).to_table(
            full_text_query=lance_ops.query.PhraseQuery("a b", "text", slop=slop)  # type: ignore[arg-type]
        )


def test_list_element_phrases_are_refused(tmp_path: Path) -> None:
    write(tmp_path / "ds", ["a b"])
    query = lance_ops.query.PhraseQuery(
        "a b", "text", slop=1, document_granularity=lance_ops.query.DocumentGranularity.LIST_ELEMENT
    )
    with pytest.raises(UnsupportedFeatureError, match="list-element"):
        lance_ops.dataset(str(tmp_path / "ds")).to_table(full_text_query=query)
