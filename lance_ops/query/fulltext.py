"""Full-text query objects with pylance 14's names and arguments (``lance.query``), searched by
:mod:`lance_ops.fts`. They only hold their arguments; what lance_ops cannot search
(``CombinedFieldsQuery``, list-element documents) is refused
there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "BooleanQuery",
    "BoostQuery",
    "DocumentGranularity",
    "FullTextOperator",
    "FullTextQuery",
    "FullTextQueryType",
    "MatchQuery",
    "MultiMatchQuery",
    "Occur",
    "PhraseQuery",
]


class FullTextQueryType(Enum):
    MATCH = "match"
    MATCH_PHRASE = "match_phrase"
    BOOST = "boost"
    MULTI_MATCH = "multi_match"
    COMBINED_FIELDS = "combined_fields"
    BOOLEAN = "boolean"


class FullTextOperator(Enum):
    AND = "AND"
    OR = "OR"


class DocumentGranularity(str, Enum):  # noqa: UP042 (pylance's base classes)
    ROW = "row"
    LIST_ELEMENT = "list_element"


class Occur(Enum):
    SHOULD = "SHOULD"
    MUST = "MUST"
    MUST_NOT = "MUST_NOT"


class FullTextQuery:
    """Base of the query objects; ``a & b`` / ``a | b`` build a :class:`BooleanQuery`."""

    def query_type(self) -> FullTextQueryType:
        raise NotImplementedError

    def __and__(self, other: FullTextQuery) -> FullTextQuery:
        return BooleanQuery([(Occur.MUST, self), (Occur.MUST, other)])

    def __or__(self, other: FullTextQuery) -> FullTextQuery:
        return BooleanQuery([(Occur.SHOULD, self), (Occur.SHOULD, other)])


@dataclass(eq=False)
class MatchQuery(FullTextQuery):
    query: str
    column: str
    boost: float = 1.0
    fuzziness: int | None = 0
    max_expansions: int = 50
    operator: FullTextOperator = FullTextOperator.OR
    prefix_length: int = 0
    document_granularity: DocumentGranularity | None = None

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.MATCH


@dataclass(eq=False)
class PhraseQuery(FullTextQuery):
    query: str
    column: str
    slop: int = 0
    document_granularity: DocumentGranularity | None = None

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.MATCH_PHRASE


@dataclass(eq=False)
class BoostQuery(FullTextQuery):
    positive: FullTextQuery
    negative: FullTextQuery
    negative_boost: float = 0.5

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.BOOST


@dataclass(eq=False)
class MultiMatchQuery(FullTextQuery):
    query: str
    columns: list[str]
    boosts: list[float] | None = None
    operator: FullTextOperator = FullTextOperator.OR

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.MULTI_MATCH


@dataclass(eq=False)
class BooleanQuery(FullTextQuery):
    queries: list[tuple[Occur, FullTextQuery]] = field(default_factory=list)

    def query_type(self) -> FullTextQueryType:
        return FullTextQueryType.BOOLEAN
