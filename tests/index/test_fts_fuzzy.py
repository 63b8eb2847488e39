"""L18: fuzzy match queries (``MatchQuery(fuzziness=, max_expansions=, prefix_length=)``) answered
as pylance 14 answers them, on pylance's and lance_ops' indices (two segments, unindexed rows,
deletions), and the vectorised edit distance of :mod:`lance_ops.index.fuzzy` against a plain one.

pylance 14's rules, observed and checked here: ``fuzziness=None`` is an exact match (not the
automatic distance its docstring describes); each base token of the query (split only: not
lower-cased, stemmed, folded or stop-word filtered) is expanded to the index terms within that
many character edits sharing its first ``prefix_length`` characters, in byte order over every
segment, ``max_expansions`` in all; unindexed rows are searched for the query's ordinary terms;
``AND`` asks for an expansion of every query token."""

from __future__ import annotations

from pathlib import Path

import lance
import lance.query
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lance_ops
import lance_ops.query
from lance_ops.errors import InvalidArgumentError
from lance_ops.index.fuzzy import Vocabulary
from tests.index.fts_helpers import match_pair
from tests.index.test_fts_positions import assert_same, write

WORDS = ["hello", "help", "hell", "helo", "yellow", "hallo", "world", "word", "sword", "wordy", "apple"]
WORDS += ["apply", "ample", "maple", "über", "uber", "the", "running", "runner", "cat", "cats", "bat"]
QUERIES = ["Cats Running", "the cats", "Hello", "helo", "helo wrld", "aple", "yelow", "ubr", "runing"]
QUERIES += ["bat cat", "helo helo", "wordd", "zzzz", ""]


def texts(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(0, 7)))) for _ in range(count)]


@pytest.fixture(scope="module", params=["pylance", "lance_ops"])
def fuzzy(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index by either builder, a second segment from optimize after an append, unindexed
    rows, deleted rows."""
    path = tmp_path_factory.mktemp("fuzzy") / "ds"
    rows = texts(300, seed=1)
    write(path, rows, max_rows_per_file=120)
    module = lance if request.param == "pylance" else lance_ops
    module.dataset(str(path)).create_scalar_index("text", "INVERTED")
    for start, stop in ((300, 350), (350, 390)):
        more = pa.table({"id": pa.array(range(start, stop), pa.int64()), "text": texts(stop - start, start)})
        lance.write_dataset(more, path, mode="append")
        if start == 300:
            module.dataset(str(path)).optimize.optimize_indices(num_indices_to_merge=0)
    lance.dataset(str(path)).delete("id % 29 = 3")
    return path


@pytest.mark.parametrize("operator", ["OR", "AND"])
@pytest.mark.parametrize(
    ("fuzziness", "max_expansions", "prefix_length"), [(1, 50, 0), (2, 3, 1), (2, 50, 2)]
)
def test_fuzzy_matches_pylance(
    fuzzy: Path, operator: str, fuzziness: int, max_expansions: int, prefix_length: int
) -> None:
    assert len(lance_ops.dataset(str(fuzzy)).list_indices()) == 2
    found = 0
    for text in QUERIES:
        pair = match_pair(
            text, operator, fuzziness=fuzziness, max_expansions=max_expansions, prefix_length=prefix_length
        )
        found += assert_same(fuzzy, *pair)
    assert found > 200


def test_fuzzy_in_boolean_and_with_filters(fuzzy: Path) -> None:
    def query(q: object) -> object:
        return q.BooleanQuery(  # type: ignore[attr-defined]
            [
                (q.Occur.MUST, q.MatchQuery("helo", "text", fuzziness=1)),  # type: ignore[attr-defined]
                (q.Occur.MUST_NOT, q.MatchQuery("wrld", "text", fuzziness=1)),  # type: ignore[attr-defined]
            ]
        )

    assert assert_same(fuzzy, query(lance_ops.query), query(lance.query)) > 10
    ours = lance_ops.query.MatchQuery("aple", "text", fuzziness=2)
    theirs = lance.query.MatchQuery("aple", "text", fuzziness=2)
    assert assert_same(fuzzy, ours, theirs, filter="id < 200", prefilter=True) > 10
    assert_same(fuzzy, ours, theirs, limit=7)


def test_pylance_rules_on_small_texts(tmp_path: Path) -> None:
    words = [
        "hello",
        "help",
        "hell",
        "helo",
        "hallo",
        "world",
        "word",
        "ab",
        "ba",
        "abc",
        "über",
        "uber",
        "thx",
    ]
    write(tmp_path / "ds", words)
    lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index(
        "text", "INVERTED", stem=False, remove_stop_words=False, ascii_folding=False
    )
    expected = {  # read from pylance 14 on its own index
        ("helo", None, 50, 0): ["helo"],  # None: exact
        ("helo", 1, 50, 0): ["hell", "hello", "helo", "help"],
        ("helo", 2, 50, 0): ["hallo", "hell", "hello", "helo", "help"],
        ("ab", 1, 50, 0): ["ab", "abc"],  # a transposition is two edits
        ("helo world", 1, 2, 0): ["hell", "hello"],  # two expansions in all, in byte order
        ("helo world", 1, 0, 0): [],
        ("uber", 1, 50, 0): ["uber", "über"],  # edits of characters, not bytes
        ("übr", 1, 50, 1): ["über"],
        ("HELO", 1, 50, 0): [],  # the query token is not lower-cased
        ("the", 1, 50, 0): ["thx"],
    }
    for (text, fuzziness, most, prefix), want in expected.items():
        for module in (lance, lance_ops):
            query = module.query.MatchQuery(
                text, "text", fuzziness=fuzziness, max_expansions=most, prefix_length=prefix
            )
            table = module.dataset(str(tmp_path / "ds")).to_table(full_text_query=query, columns=["text"])
            assert sorted(table.column("text").to_pylist()) == want, (module.__name__, text, fuzziness)


@pytest.mark.parametrize(
    ("name", "value"),
    [("fuzziness", -1), ("fuzziness", 1.5), ("max_expansions", -2), ("prefix_length", True)],
)
def test_bad_fuzzy_arguments(tmp_path: Path, name: str, value: object) -> None:
    write(tmp_path / "ds", ["a b"])
    lance_ops.dataset(str(tmp_path / "ds")).create_scalar_index("text", "INVERTED")
    query = lance_ops.query.MatchQuery("a", "text", **{name: value})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=name):
        lance_ops.dataset(str(tmp_path / "ds")).to_table(full_text_query=query)


def levenshtein(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


ALPHABET = st.text(alphabet="abü€", max_size=7)


@given(st.lists(ALPHABET, max_size=40), ALPHABET, st.integers(0, 3), st.integers(0, 3))
def test_within_is_the_edit_distance(words: list[str], term: str, distance: int, prefix: int) -> None:
    words = sorted(set(words))
    want = [w for w in words if levenshtein(w, term) <= distance and w.startswith(term[:prefix])]
    assert Vocabulary(words).within(term, distance, prefix) == want


@pytest.mark.parametrize("text", ["", "the", "the of"])
def test_and_without_terms_finds_nothing(fuzzy: Path, text: str) -> None:
    """A query with no terms left (empty, stop words only) finds no row with AND, as in pylance."""
    for fuzziness in (0, 1):
        ours = lance_ops.query.MatchQuery(
            text, "text", fuzziness=fuzziness, operator=lance_ops.query.FullTextOperator.AND
        )
        theirs = lance.query.MatchQuery(
            text, "text", fuzziness=fuzziness, operator=lance.query.FullTextOperator.AND
        )
        assert_same(fuzzy, ours, theirs)
