"""L18: INVERTED indices with positions (``with_position=True``) built by lance_ops hold the files
pylance 14 writes for the same data (positions compared as decoded tables), pylance phrase-searches
them as its own, and ``optimize_indices`` after an append keeps the positions (both builders)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import lance
import lance.query
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
import lance_ops.query
from lance_ops.errors import InvalidArgumentError
from lance_ops.file import LanceFileReader
from tests.index.test_fts_build import corpus

pytestmark = pytest.mark.interop

FILES = ("metadata.lance", "part_0_invert.lance", "part_0_docs.lance", "part_0_tokens.lance")
TEXTS: list[str | None] = [
    "the quick brown " + "x" * 45 + " fox",  # an over-long token still takes a position
    "quick brown",
    "brown quick",
    None,
    "",
    "the the fox fox brown brown",
    "quick " * 300,  # a full packed group of positions
    "Brown FOX jumps quick",
]
LISTS: list[list[str | None] | None] = [
    ["quick", "brown fox"],  # positions run on from one string to the next
    ["fox"],
    ["brown", "quick the fox"],
    None,
    [],
    ["a"],
    ["quick", None, "brown"],
    ["fox"],
]
PHRASES = ["quick brown", "brown fox", "quick the brown", "fox brown", "brown brown", "quick", "the quick"]


def write(path: Path, texts: list, text_type: pa.DataType | None = None, **kwargs: object) -> None:
    table = pa.table(
        {"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, text_type or pa.string())}
    )
    lance.write_dataset(table, path, **kwargs)


def index_files(uri: Path | str, name: str = "text_idx") -> dict[str, pa.Table]:
    index = next(i for i in lance_ops.dataset(str(uri)).list_indices() if i["name"] == name)
    directory = Path(uri) / "_indices" / index["uuid"]
    return {f: LanceFileReader(str(directory / f)).read_all().to_table() for f in FILES}


def phrase_search(uri: Path | str, text: str, slop: int = 0) -> tuple[list[int], np.ndarray]:
    query = lance.query.PhraseQuery(text, "text", slop=slop)
    table = lance.dataset(str(uri)).to_table(full_text_query=query, columns=["id", "_score"])
    table = table.sort_by([("_score", "descending"), ("id", "ascending")])
    return table.column("id").to_pylist(), np.asarray(table.column("_score"), np.float32)


def assert_same_phrases(ours: Path, theirs: Path, phrases: list[str] = PHRASES) -> int:
    found = 0
    for text in phrases:
        for slop in (0, 1, 3):
            ids, scores = phrase_search(ours, text, slop)
            want_ids, want_scores = phrase_search(theirs, text, slop)
            assert sorted(ids) == sorted(want_ids), (text, slop)
            np.testing.assert_allclose(scores, want_scores, rtol=1e-6, err_msg=text)
            found += len(ids)
    return found


@pytest.mark.parametrize(
    ("texts", "text_type"),
    [(TEXTS, pa.string()), (TEXTS, pa.large_string()), (LISTS, pa.list_(pa.string()))],
)
def test_same_files_as_pylance(tmp_path: Path, texts: list, text_type: pa.DataType) -> None:
    for name in ("ours", "theirs"):
        write(tmp_path / name, texts, text_type)
    lance_ops.dataset(str(tmp_path / "ours")).create_scalar_index("text", "INVERTED", with_position=True)
    lance.dataset(str(tmp_path / "theirs")).create_scalar_index("text", "INVERTED", with_position=True)
    ours, theirs = index_files(tmp_path / "ours"), index_files(tmp_path / "theirs")
    for name in FILES:
        assert ours[name].equals(theirs[name]), name
        assert ours[name].schema.metadata == theirs[name].schema.metadata, name
    assert "_compressed_position" in ours["part_0_invert.lance"].column_names
    details = [lance_ops.dataset(str(tmp_path / n)).manifest.indices[0].details for n in ("ours", "theirs")]
    assert details[0] == details[1]
    assert assert_same_phrases(tmp_path / "ours", tmp_path / "theirs") > 5


@pytest.mark.parametrize("merge", [0, 1])
@pytest.mark.parametrize("builder", ["pylance", "lance_ops"])
def test_optimize_keeps_positions(tmp_path: Path, merge: int, builder: str) -> None:
    """Yesterday's positional index, today's append: lance_ops' optimize_indices gives the phrase
    search pylance's own optimize gives; run again, nothing changes."""
    texts, more = corpus(300), corpus(200, seed=5)
    phrases = ["quick brown", "alpha beta", "w1 w2", "gamma the delta", "w3 w3"]
    for name in ("ours", "theirs"):
        write(tmp_path / name, texts, max_rows_per_file=120)
        module = lance if builder == "pylance" or name == "theirs" else lance_ops
        module.dataset(str(tmp_path / name)).create_scalar_index("text", "INVERTED", with_position=True)
        extra = pa.table({"id": pa.array(range(300, 500), pa.int64()), "text": pa.array(more, pa.string())})
        lance.write_dataset(extra, tmp_path / name, mode="append")
    lance_ops.dataset(str(tmp_path / "ours")).optimize.optimize_indices(num_indices_to_merge=merge)
    lance.dataset(str(tmp_path / "theirs")).optimize.optimize_indices(num_indices_to_merge=merge)
    segments = lambda name: sorted(  # noqa: E731
        sorted(i["fragment_ids"]) for i in lance_ops.dataset(str(tmp_path / name)).list_indices()
    )
    assert segments("ours") == segments("theirs") and len(segments("ours")) == (2 if merge == 0 else 1)
    assert "_compressed_position" in index_files(tmp_path / "ours")["part_0_invert.lance"].column_names
    assert assert_same_phrases(tmp_path / "ours", tmp_path / "theirs", phrases) > 20
    uuids = lambda: sorted(i["uuid"] for i in lance_ops.dataset(str(tmp_path / "ours")).list_indices())  # noqa: E731
    before = uuids()
    lance_ops.dataset(str(tmp_path / "ours")).optimize.optimize_indices(num_indices_to_merge=merge)
    assert uuids() == before


def our_search(uri: Path, query: object, **kwargs: object) -> tuple[list[int], np.ndarray]:
    table = lance_ops.dataset(str(uri)).to_table(full_text_query=query, columns=["id", "_score"], **kwargs)
    table = table.sort_by([("_score", "descending"), ("id", "ascending")])
    return table.column("id").to_pylist(), np.asarray(table.column("_score"), np.float32)


def pylance_search(uri: Path, query: object, **kwargs: object) -> tuple[list[int], np.ndarray]:
    table = lance.dataset(str(uri)).to_table(full_text_query=query, columns=["id", "_score"], **kwargs)
    table = table.sort_by([("_score", "descending"), ("id", "ascending")])
    return table.column("id").to_pylist(), np.asarray(table.column("_score"), np.float32)


def assert_same(uri: Path, ours: object, theirs: object, **kwargs: object) -> int:
    ids, scores = our_search(uri, ours, **kwargs)
    want_ids, want_scores = pylance_search(uri, theirs, **kwargs)
    assert sorted(ids) == sorted(want_ids), ours
    np.testing.assert_allclose(scores, want_scores, rtol=1e-6, err_msg=str(ours))
    return len(ids)


@pytest.fixture(scope="module", params=["pylance", "lance_ops"])
def phrases(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A positional index by either builder, then an append it does not cover (searched flat)."""
    path = tmp_path_factory.mktemp("phrase") / "ds"
    rng = np.random.default_rng(11)
    vocab = ["a", "b", "c", "d", "the", "of"]
    texts = [" ".join(rng.choice(vocab, size=int(rng.integers(1, 12)))) for _ in range(300)]
    write(path, [*texts, None, ""], max_rows_per_file=120)
    module = lance if request.param == "pylance" else lance_ops
    module.dataset(str(path)).create_scalar_index("text", "INVERTED", with_position=True)
    write(path, texts[:40], mode="append")
    return path


@pytest.mark.parametrize(
    "text", ["b c", "c b", "b b", "a b b", "b the c", "the b c", "b c d", "c c c", "d of b a", "b", "zz b"]
)
def test_phrase_queries_match_pylance(phrases: Path, text: str) -> None:
    ours, theirs = lance_ops.query.PhraseQuery(text, "text"), lance.query.PhraseQuery(text, "text")
    found = assert_same(phrases, ours, theirs)
    assert found > 0 or "zz" in text
    assert assert_same(phrases, f'"{text}"', f'"{text}"') == found  # a quoted string is a phrase
    assert_same(phrases, {"query": f'"{text}"', "columns": ["text"]}, f'"{text}"')
    assert_same(phrases, ours, theirs, filter="id < 150", prefilter=True)
    # pylance orders tied scores arbitrarily: the first five scores agree
    np.testing.assert_allclose(
        our_search(phrases, ours, limit=5)[1], pylance_search(phrases, theirs, limit=5)[1], rtol=1e-6
    )

    def both(q: ModuleType) -> object:
        return q.BooleanQuery(
            [(q.Occur.MUST, q.PhraseQuery(text, "text")), (q.Occur.SHOULD, q.MatchQuery("d", "text"))]
        )

    assert_same(phrases, both(lance_ops.query), both(lance.query))


def test_quoted_string_rules(tmp_path: Path) -> None:
    """Only a string quoted from its first to its last character is a phrase; a phrase takes one
    column; without positions it is refused as pylance refuses it (ValueError, same words)."""
    table = pa.table(
        {"id": [0, 1, 2], "text": ["quick brown", "brown quick", "quick the brown"], "other": ["x", "y", "z"]}
    )
    lance.write_dataset(table, tmp_path / "ds")
    lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index("text", "INVERTED", with_position=True)
    for query in (' "quick brown" ', '"quick brown" the', '"quick" "brown"', '"quick the brown"'):
        assert_same(tmp_path / "ds", query, query)
    lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index("other", "INVERTED")
    for query, words in (
        ('"quick brown"', "column must be specified"),
        ({"query": '"quick brown"', "columns": ["text", "other"]}, "multiple columns"),
        ({"query": '"x y"', "columns": ["other"]}, "position is not found but required for phrase queries"),
    ):
        with pytest.raises(ValueError, match=words):
            lance.dataset(str(tmp_path / "ds")).to_table(full_text_query=query)
        with pytest.raises(InvalidArgumentError, match=words):
            lance_ops.dataset(str(tmp_path / "ds")).to_table(full_text_query=query)
    query = {"query": '"quick brown"', "columns": ["text"]}
    plan = lance_ops.dataset(str(tmp_path / "ds")).scanner(full_text_query=query).explain_plan()
    assert "PhraseQuery: column=text" in plan


def test_compaction_with_deletions_keeps_phrases(tmp_path: Path) -> None:
    """lance_ops compacts our positional index's fragments after deletions (documents renumbered,
    position streams cut again): lance_ops and pylance find each phrase as pylance does on its
    own index compacted by pylance."""
    texts = corpus(400)
    for name in ("ours", "theirs"):
        write(tmp_path / name, texts, max_rows_per_file=150)
        module = lance_ops if name == "ours" else lance
        module.dataset(str(tmp_path / name)).create_scalar_index("text", "INVERTED", with_position=True)
        module.dataset(str(tmp_path / name)).delete("id % 7 = 3")
        module.dataset(str(tmp_path / name)).optimize.compact_files(target_rows_per_fragment=1000)
    found = 0
    for text in ("alpha beta", "w1 w2", "the quick brown", "gamma of delta", "w3 w3", "running"):
        want = pylance_search(tmp_path / "theirs", lance.query.PhraseQuery(text, "text"))
        for got in (
            pylance_search(tmp_path / "ours", lance.query.PhraseQuery(text, "text")),
            our_search(tmp_path / "ours", lance_ops.query.PhraseQuery(text, "text")),
        ):
            assert sorted(got[0]) == sorted(want[0]), text
            np.testing.assert_allclose(got[1], want[1], rtol=1e-6, err_msg=text)
        found += len(want[0])
    assert found > 10
