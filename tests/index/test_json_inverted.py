"""INVERTED indices over JSON columns (pylance 14's JSON tokenizer: ``path,type,value`` terms)
both ways with pylance: the same terms and document counts, each library searching the other's
index with the same rows."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance.query import MatchQuery as PylanceMatch

import lance_ops
from lance_ops.errors import InvalidArgumentError
from lance_ops.index.build_inverted import read_inverted_corpus
from lance_ops.query import MatchQuery

DOCS = [
    {"Title": "HarryPotter Chapter One", "Content": "Once upon a time, there was a boy named Harry.",
     "Author": "J.K. Rowling", "Price": 99, "Language": ["english", "french"]},
    {"Title": "HarryPotter Chapter Two", "Content": "Nearly ten years had passed since the Dursleys",
     "Author": "J.K. Rowling", "Price": 128.5, "Language": ["english", "chinese"], "n": None,
     "b": True, "o": {"z": "Deep Value", "w": [1, -2, 1e300, 0.00001]}},
    {"Title": "The Hobbit", "Content": "In a hole in the ground there lived a hobbit.",
     "Author": "J.R.R. Tolkien", "Price": 89, "Language": ["english"], "b": False},
    None,
]  # fmt: skip
QUERIES = [
    "Title,str,harrypotter",  # longer than max_token_length: no term
    "Content,str,onc",
    "Language,str,english",
    "Author,str,tolkien",
    "o.z,str,deep",
    "Price,number,99",
    "Price,number,128.5",
    "b,bool,true",
    "n,null,null",
    "o.w,number,1e+300",
    "o.w,number,0.00001",
    "Author,str,rowling;Price,number,89",
]


def _build(tmp_path: Path) -> tuple[Path, Path]:
    table = pa.table(
        {
            "j": pa.array([None if d is None else json.dumps(d) for d in DOCS], pa.json_()),
            "id": range(len(DOCS)),
        }
    )
    params = {"base_tokenizer": "simple", "max_token_length": 10, "stem": True, "remove_stop_words": True}
    lance_ops.write_dataset(table, tmp_path / "ours").create_scalar_index("j", "INVERTED", **params)
    lance.write_dataset(table, tmp_path / "theirs").create_scalar_index("j", index_type="INVERTED", **params)
    return tmp_path / "ours", tmp_path / "theirs"


def test_json_inverted_index_as_pylance(tmp_path: Path) -> None:
    ours, theirs = _build(tmp_path)
    corpora = []
    for path in (ours, theirs):
        ds = lance_ops.dataset(path)
        (index,) = ds.manifest.indices
        corpus = read_inverted_corpus(ds.storage, index, 0)
        terms = [corpus.terms[t] for t in corpus.term]
        corpora.append(
            (
                sorted(zip(terms, corpus.doc.tolist(), corpus.freq.tolist(), strict=True)),
                corpus.lengths.tolist(),
            )
        )
        assert index.details == lance_ops.dataset(theirs).manifest.indices[0].details
    assert corpora[0] == corpora[1]


@pytest.mark.parametrize("query", QUERIES)
def test_json_match_queries_both_ways(tmp_path_factory: pytest.TempPathFactory, query: str) -> None:
    ours, theirs = _build(tmp_path_factory.mktemp("j"))
    expected = sorted(
        lance.dataset(theirs).to_table(full_text_query=PylanceMatch(query, "j")).column("id").to_pylist()
    )
    for path in (ours, theirs):
        assert (
            sorted(
                lance.dataset(path)
                .to_table(full_text_query=PylanceMatch(query, "j"))
                .column("id")
                .to_pylist()
            )
            == expected
        )
        got = lance_ops.dataset(path).to_table(full_text_query=MatchQuery(query, "j"))
        assert sorted(got.column("id").to_pylist()) == expected


def test_json_query_must_be_triplets(tmp_path: Path) -> None:
    ours, _ = _build(tmp_path)
    with pytest.raises(InvalidArgumentError, match="Invalid triple"):
        lance_ops.dataset(ours).to_table(full_text_query=MatchQuery("just words", "j"))
