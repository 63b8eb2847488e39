"""Query concerns: filter predicates (SQL text or Arrow expressions) evaluated on Arrow tables.

Sits beside the table layer and below the fragment layer, which applies predicates while reading.
"""

from lance_ops.query.fulltext import (
    BooleanQuery,
    BoostQuery,
    DocumentGranularity,
    FullTextOperator,
    FullTextQuery,
    FullTextQueryType,
    MatchQuery,
    MultiMatchQuery,
    Occur,
    PhraseQuery,
)

# pylance's ``lance.query`` full-text query classes (searched by lance_ops.fts)
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
