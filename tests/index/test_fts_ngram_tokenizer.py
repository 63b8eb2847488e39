"""L18: INVERTED indices with ``base_tokenizer="ngram"`` (``min_ngram_length``,
``max_ngram_length``, ``prefix_only``): lance_ops writes the files pylance 14 writes for the same
data, and both answer match queries alike on either builder's index.

pylance 14's n-grams, read from its index files: the characters of the whole text (spaces
included) from each start in turn, shortest first, then lower-cased and folded; no stemming and
no stop words unless ``stem`` / ``remove_stop_words`` are given (its defaults for n-grams);
n-grams of ``max_token_length`` bytes or more are dropped; every position is 0. A match finds the
rows holding any of the query's n-grams, with ``AND`` too; a fuzzy match expands the query's
plain words over the index's n-grams; a phrase finds, in an index, the rows holding any of its
n-grams, in unindexed rows those holding all of them."""

from __future__ import annotations

from pathlib import Path

import lance
import lance.query
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lance_ops
import lance_ops.query
from lance_ops.errors import InvalidArgumentError
from lance_ops.index.tokenizer import tokenizer_params
from tests.index.fts_helpers import assert_same_files, indexed_then_appended, match_pair
from tests.index.test_fts_positions import assert_same, write

pytestmark = pytest.mark.interop

TEXTS = ["Hello World", "Héllo the running", None, "", "a", "ab", "日本語です", "sses ies", "Aé Bß"]
TEXTS += ["hello hello hello", "x" * 50, "a\u0301b"]
CONFIGS = [
    {},
    {"min_ngram_length": 2, "max_ngram_length": 4},
    {"min_ngram_length": 2, "max_ngram_length": 4, "prefix_only": True},
    {"min_ngram_length": 1, "max_ngram_length": 3, "with_position": True},
    {
        "min_ngram_length": 1,
        "max_ngram_length": 5,
        "max_token_length": 4,
        "lower_case": False,
        "ascii_folding": False,
    },
    {"stem": True, "remove_stop_words": True, "min_ngram_length": 2, "max_ngram_length": 4},
]


@pytest.mark.parametrize("params", CONFIGS)
def test_same_files_as_pylance(tmp_path: Path, params: dict) -> None:
    assert_same_files(tmp_path, [*TEXTS, "the sses running ies"], base_tokenizer="ngram", **params)


WORDS = ["hello", "help", "world", "Wörld", "apple", "the", "running", "cat", "日本語"]
QUERIES = ["hello", "wor", "orld", "hel", "ning", "the cat", "xyz", "Wö", "本語", "he", ""]


@pytest.fixture(scope="module", params=["pylance", "lance_ops"])
def ngrams(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-4-gram index by either builder over three fragments, then an unindexed append."""
    path = tmp_path_factory.mktemp("ngram") / "ds"
    return indexed_then_appended(
        path, request.param, WORDS, 200, 30, 5, base_tokenizer="ngram", min_ngram_length=2, max_ngram_length=4
    )


@pytest.mark.parametrize("operator", ["OR", "AND"])
def test_match_queries_match_pylance(ngrams: Path, operator: str) -> None:
    found = 0
    for text in QUERIES:
        found += assert_same(ngrams, *match_pair(text, operator))
    assert found > 500
    assert assert_same(ngrams, "wor", "wor") > 10  # a plain string searches the one index


@pytest.mark.parametrize("operator", ["OR", "AND"])
def test_fuzzy_queries_match_pylance(ngrams: Path, operator: str) -> None:
    """The query's plain words (simple split, not lower-cased) are expanded over the n-grams."""
    found = 0
    for text in ("helo", "Helo", "wrld hel", "the-cat", "apple"):
        for fuzziness, most in ((1, 50), (2, 3)):
            pair = match_pair(text, operator, fuzziness=fuzziness, max_expansions=most)
            found += assert_same(ngrams, *pair)
    assert found > 100


@pytest.fixture(scope="module", params=["pylance", "lance_ops"])
def positional(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trigram index with positions by either builder, then an unindexed append."""
    path = tmp_path_factory.mktemp("ngram_phrase") / "ds"
    return indexed_then_appended(
        path, request.param, WORDS, 120, 40, 8, base_tokenizer="ngram", with_position=True
    )


@pytest.mark.parametrize("slop", [0, 2])
def test_phrase_queries_match_pylance(positional: Path, slop: int) -> None:
    """Every n-gram position is 0: an index partition gives the rows holding any of the phrase's
    n-grams, unindexed rows those holding all of them (pylance 14's answers)."""
    found = 0
    for text in ("hello", "lo wor", "the cat", "Hello", "zzz"):
        ours = lance_ops.query.PhraseQuery(text, "text", slop=slop)
        found += assert_same(positional, ours, lance.query.PhraseQuery(text, "text", slop=slop))
        if not slop:
            assert_same(positional, f'"{text}"', f'"{text}"')
    assert found > 100


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"min_ngram_length": 0}, "min_ngram_length"),
        ({"min_ngram_length": 3, "max_ngram_length": 2}, "max_ngram_length"),
        ({"max_ngram_length": 2.5}, "max_ngram_length"),
    ],
)
def test_bad_ngram_lengths(tmp_path: Path, params: dict, named: str) -> None:
    write(tmp_path / "ds", ["hello"])
    with pytest.raises(InvalidArgumentError, match=named):
        lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index(
            "text", "INVERTED", base_tokenizer="ngram", **params
        )
    assert lance_ops.dataset(str(tmp_path / "ds")).list_indices() == []
    if all(isinstance(value, int) for value in params.values()):  # pylance refuses them too
        with pytest.raises(ValueError, match="min_gram"):
            lance.dataset(str(tmp_path / "ds")).create_scalar_index(
                "text", "INVERTED", base_tokenizer="ngram", **params
            )


def reference_ngrams(text: str, low: int, high: int, prefix_only: bool) -> list[str]:
    starts = range(min(len(text), 1)) if prefix_only else range(len(text))
    return [text[i : i + n] for i in starts for n in range(low, high + 1) if i + n <= len(text)]


@given(
    st.lists(st.one_of(st.none(), st.text(alphabet="ab é日\u0301", max_size=6)), max_size=6),
    st.integers(1, 3),
    st.integers(0, 2),
    st.booleans(),
    st.integers(0, 2),
)
def test_split_matches_a_plain_reference(
    texts: list[str | None], low: int, extra: int, prefix_only: bool, offset: int
) -> None:
    tokenizer = tokenizer_params(
        {
            "base_tokenizer": "ngram",
            "min_ngram_length": low,
            "max_ngram_length": low + extra,
            "prefix_only": prefix_only,
        }
    )
    array = pa.array(["zz"] * offset + texts, pa.large_string())[offset:]  # a sliced array too
    tokens, parents = tokenizer.split_array(array)
    want = [
        (i, g) for i, t in enumerate(texts) if t for g in reference_ngrams(t, low, low + extra, prefix_only)
    ]
    assert list(zip(parents.tolist(), tokens.to_pylist(), strict=True)) == want
