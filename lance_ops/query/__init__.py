"""Query concerns: filter predicates (SQL text or Arrow expressions) evaluated on Arrow tables.

Sits beside the table layer and below the fragment layer, which applies predicates while reading.
Also pylance's full-text query objects (:mod:`lance_ops.query.fulltext`).
"""

# pylance's ``lance.query`` full-text query classes (searched by lance_ops.fts)
from lance_ops.query.fulltext import (  # noqa: F401 (re-exported)
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
