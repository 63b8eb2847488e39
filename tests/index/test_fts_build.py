"""L18: INVERTED indices built by lance_ops (``create_scalar_index(column, "INVERTED")``), searched
by pylance 14 with the rows and BM25 ``_score``s of its own index over the same data.

Our files hold what pylance's build holds (terms, documents, term counts; the posting bytes are
compared through the codec's decode); pylance's plan names our index; bad input is refused with
nothing committed.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_ops
from lance_ops.errors import (
    IndexColumnTypeError,
    InvalidArgumentError,
    LanguageModelError,
    UnsupportedFeatureError,
)
from lance_ops.file import LanceFileReader
from lance_ops.index.fst import FstReader
from lance_ops.index.inverted_postings import decode_posting_list

pytestmark = pytest.mark.interop

QUERIES = ["hello", "alpha beta", "running", "w7 w8 gamma", "crème", "zzz", "the", "Lazy DOGS", "w1 w1"]


def corpus(rows: int = 700, seed: int = 0, start: int = 0) -> list[str | None]:
    rng = np.random.default_rng(seed)
    vocab = ["alpha", "beta", "gamma", "delta", "the", "of", "running"] + [f"w{i}" for i in range(60)]
    texts: list[str | None] = [
        "The quick brown fox jumps over the lazy dog",
        "Running runners ran quickly",
        None,
        "",
        "Crème brûlée is délicieux",
        "hello world hello",
        "a an the of",
    ]
    texts += [" ".join(rng.choice(vocab, size=int(rng.integers(1, 40)))) for _ in range(rows - len(texts))]
    return texts[start:] if start else texts


def write(path: Path, texts: list, text_type: pa.DataType | None = None) -> lance.LanceDataset:
    table = pa.table(
        {"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, text_type or pa.string())}
    )
    return lance.write_dataset(table, path, max_rows_per_file=250)


def search(ds: lance.LanceDataset, query: str, **kwargs: object) -> tuple[list[int], np.ndarray]:
    table = ds.to_table(full_text_query=query, columns=["id", "_score"], **kwargs)
    table = table.sort_by([("_score", "descending"), ("id", "ascending")])
    return table.column("id").to_pylist(), np.asarray(table.column("_score"), np.float32)


def assert_same_search(
    ours: lance.LanceDataset, theirs: lance.LanceDataset, queries: list[str] = QUERIES
) -> int:
    found = 0
    for query in queries:
        ids, scores = search(ours, query)
        want_ids, want_scores = search(theirs, query)
        assert sorted(ids) == sorted(want_ids), query
        np.testing.assert_allclose(scores, want_scores, rtol=1e-6, err_msg=query)
        found += len(ids)
    return found


def index_dir(ds: lance.LanceDataset, name: str = "text_idx") -> Path:
    index = next(i for i in lance_ops.dataset(ds.uri).list_indices() if i["name"] == name)
    return Path(ds.uri) / "_indices" / index["uuid"]


def contents(directory: Path) -> tuple[dict[str, list[tuple[int, int]]], list[tuple[int, int]], dict]:
    """term -> [(row id, frequency)], the docs rows and the params, read back from the files."""
    read = lambda name: LanceFileReader(str(directory / name)).read_all().to_table()  # noqa: E731
    docs = read("part_0_docs.lance")
    row_ids = docs.column("_rowid").to_pylist()
    fst = FstReader(read("part_0_tokens.lance").column("_token_fst_bytes")[0].as_py())
    invert = read("part_0_invert.lance")
    postings = {}
    for term, token_id in fst.items():
        doc_ids, freqs = decode_posting_list(
            invert.column("_posting")[token_id], invert.column("_length")[token_id].as_py()
        )
        postings[term.decode()] = [(row_ids[d], int(f)) for d, f in zip(doc_ids, freqs, strict=True)]
    meta = read("metadata.lance").schema.metadata
    return postings, list(zip(row_ids, docs.column("_num_tokens").to_pylist(), strict=True)), meta


@pytest.mark.parametrize("text_type", [pa.string(), pa.large_string()])
def test_pylance_searches_our_index(tmp_path: Path, text_type: pa.DataType) -> None:
    texts = corpus()
    write(tmp_path / "ours", texts, text_type)
    theirs = write(tmp_path / "theirs", texts, text_type)
    lance_ops.dataset(str(tmp_path / "ours")).create_scalar_index("text", "INVERTED")
    theirs.create_scalar_index("text", "INVERTED")
    ours = lance.dataset(str(tmp_path / "ours"))
    assert [i["type"] for i in lance_ops.dataset(ours.uri).list_indices()] == ["Inverted"]
    assert assert_same_search(ours, theirs) > 100
    assert "MatchQuery: column=text" in ours.scanner(full_text_query="alpha", columns=["id"]).explain_plan()
    assert contents(index_dir(ours)) == contents(index_dir(theirs))


def test_tokenizer_params_and_lists(tmp_path: Path) -> None:
    texts = [["Running dogs", None, "the cats"], None, [], ["running"], ["Crème"], ["x"] * 3]
    params = {"stem": False, "remove_stop_words": False, "ascii_folding": False}
    write(tmp_path / "ours", texts, pa.list_(pa.string()))
    theirs = write(tmp_path / "theirs", texts, pa.list_(pa.string()))
    lance_ops.dataset(str(tmp_path / "ours")).create_scalar_index("text", "INVERTED", name="fts", **params)
    theirs.create_scalar_index("text", "INVERTED", name="fts", **params)
    ours = lance.dataset(str(tmp_path / "ours"))
    assert assert_same_search(ours, theirs, ["running", "run", "the", "crème", "x", "dogs cats"]) > 3
    assert contents(index_dir(ours, "fts")) == contents(index_dir(theirs, "fts"))
    assert search(ours, "run")[0] == []


def test_few_rows(tmp_path: Path) -> None:
    for texts in ([None], ["", "the"], ["one"], ["word " * 300]):
        path = tmp_path / uuid.uuid4().hex
        write(path, texts)
        theirs = write(tmp_path / uuid.uuid4().hex, texts)
        lance_ops.dataset(str(path)).create_scalar_index("text", "INVERTED")
        theirs.create_scalar_index("text", "INVERTED")
        assert_same_search(lance.dataset(str(path)), theirs, ["one", "word", "the"])


@pytest.mark.parametrize(
    ("column", "params", "error", "named"),
    [
        ("id", {}, IndexColumnTypeError, "id"),
        ("text", {"tokenizer": "simple"}, InvalidArgumentError, "tokenizer"),
        ("text", {"base_tokenizer": "lindera/no-such-model"}, LanguageModelError, "no-such-model"),
        ("text", {"base_tokenizer": "icu"}, UnsupportedFeatureError, "icu"),
        ("text", {"with_position": "yes"}, InvalidArgumentError, "with_position"),
    ],
)
def test_bad_input_commits_nothing(
    tmp_path: Path, column: str, params: dict, error: type[Exception], named: str
) -> None:
    write(tmp_path / "ds", ["hello world", "foo"])
    ds = lance_ops.dataset(str(tmp_path / "ds"))
    with pytest.raises(error, match=named):
        ds.create_scalar_index(column, "INVERTED", **params)
    after = lance.dataset(str(tmp_path / "ds"))
    assert after.version == 1 and lance_ops.dataset(after.uri).list_indices() == []
    assert not (tmp_path / "ds" / "_indices").exists() or not any((tmp_path / "ds" / "_indices").iterdir())


@pytest.mark.parametrize("merge", [0, 1])
@pytest.mark.parametrize("builder", ["pylance", "lance_ops"])
def test_optimize_after_append(tmp_path: Path, merge: int, builder: str) -> None:
    """Yesterday's index, today's append: lance_ops' optimize_indices gives the segments and the
    search pylance's own optimize gives its twin; run again, nothing changes."""
    texts, more = corpus(600), corpus(300, seed=5)
    for name in ("ours", "theirs"):
        write(tmp_path / name, texts)
        (lance if builder == "pylance" or name == "theirs" else lance_ops).dataset(
            str(tmp_path / name)
        ).create_scalar_index("text", "INVERTED")
        extra = pa.table({"id": pa.array(range(600, 900), pa.int64()), "text": pa.array(more, pa.string())})
        lance.write_dataset(extra, tmp_path / name, mode="append")
    mine = lance_ops.dataset(str(tmp_path / "ours"))
    mine.optimize.optimize_indices(num_indices_to_merge=merge)
    lance.dataset(str(tmp_path / "theirs")).optimize.optimize_indices(num_indices_to_merge=merge)
    ours, theirs = lance.dataset(str(tmp_path / "ours")), lance.dataset(str(tmp_path / "theirs"))
    segments = lambda ds: sorted(  # noqa: E731
        (sorted(i["fragment_ids"]), i["type"]) for i in lance_ops.dataset(ds.uri).list_indices()
    )
    assert segments(ours) == segments(theirs)
    assert len(segments(ours)) == (2 if merge == 0 else 1)
    assert assert_same_search(ours, theirs) > 100
    uuids = lambda: sorted(i["uuid"] for i in lance_ops.dataset(ours.uri).list_indices())  # noqa: E731
    before = uuids()
    lance_ops.dataset(str(tmp_path / "ours")).optimize.optimize_indices(num_indices_to_merge=merge)
    assert uuids() == before


def test_index_stats_match_pylance(tmp_path: Path) -> None:
    texts = corpus(400)
    write(tmp_path / "ours", texts)
    write(tmp_path / "theirs", texts)
    lance_ops.dataset(str(tmp_path / "ours")).create_scalar_index("text", "INVERTED", stem=False)
    lance.dataset(str(tmp_path / "theirs")).create_scalar_index("text", "INVERTED", stem=False)
    keys = ("index_type", "num_indices", "indices", "segments", "num_indexed_rows", "num_unindexed_rows")
    for path in (tmp_path / "ours", tmp_path / "theirs"):
        want = {k: lance.dataset(str(tmp_path / "theirs")).stats.index_stats("text_idx")[k] for k in keys}
        assert {k: lance.dataset(str(path)).stats.index_stats("text_idx")[k] for k in keys} == want
        assert {k: lance_ops.dataset(str(path)).stats.index_stats("text_idx")[k] for k in keys} == want
    assert want["indices"][0]["params"]["stem"] is False and 390 < want["indices"][0]["num_docs"] < 400
