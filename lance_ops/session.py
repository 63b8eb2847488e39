"""The index cache of an opened dataset as pylance shows it: ``ds.session()``, ``ds._ds``'s cache
statistics, and ``ds.prewarm_index(name)``.

Each :func:`lance_ops.dataset` call opens the dataset with a fresh index cache
(:class:`~lance_ops.io.index_cache.IndexCache`, on its storage context), as each ``lance.dataset``
call opens a new pylance session; its size is ``index_cache_size_bytes`` (pylance's deprecated
``index_cache_size``, entries, counts 20 MiB an entry as pylance converts it).
:class:`Session` is that cache's sizes (``size_bytes``, ``index_cache_size_bytes``, pylance's
names); ``ds._ds`` stands for pylance's native dataset where its tests read the cache's
statistics (``index_cache_entry_count()``, ``index_cache_hit_rate()``).

``prewarm_index`` reads an index whole into the cache. After it, searches through the same
opened dataset find every piece of the index in the cache (no ``parts_loaded``) until it is
evicted. The index's segments (all, or ``index_segments``: uuids) are read by the module that
searches them: scalar indices by :mod:`lance_ops.index.scalar_query`, INVERTED by
:mod:`lance_ops.fts`, vector indices by :mod:`lance_ops.vector_search`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from lance_ops import fts, vector_search
from lance_ops.errors import IndexNotFoundError, UnsupportedFeatureError
from lance_ops.index import scalar_query
from lance_ops.index.types import INVERTED, JSON, VECTOR_TYPES, index_type_of
from lance_ops.io.index_cache import IndexCache
from lance_ops.ops.indices import segments_of

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset

__all__ = ["DatasetInternals", "Session", "prewarm_index"]


class Session:
    """The index cache an opened dataset and its checkouts share (pylance's ``Session`` sizes)."""

    def __init__(self, cache: IndexCache) -> None:
        self._cache = cache

    def size_bytes(self) -> int:
        """Bytes the cached entries hold (as estimated when they were loaded)."""
        return self._cache.size_bytes

    def index_cache_size_bytes(self) -> int:
        """Same as :meth:`size_bytes`: lance-ops keeps no metadata cache in the session."""
        return self._cache.size_bytes


class DatasetInternals:
    """What pylance's tests read from ``ds._ds`` about the index cache."""

    def __init__(self, cache: IndexCache) -> None:
        self._cache = cache

    def index_cache_entry_count(self) -> int:
        return self._cache.entry_count

    def index_cache_hit_rate(self) -> float:
        return self._cache.hit_rate()


def prewarm_index(
    ds: LanceDataset,
    name: str,
    with_position: bool = False,
    index_segments: Iterable[str | uuid.UUID] | None = None,
) -> None:
    """Load index ``name`` (or only its segments ``index_segments``) into ``ds``'s index cache."""
    segments = segments_of(ds.manifest, name)
    if index_segments is not None:
        wanted = {uuid.UUID(str(s)).bytes for s in index_segments}
        missing = wanted - {s.uuid for s in segments}
        if missing:
            raise IndexNotFoundError(
                f"index {name!r} has no segments {sorted(str(uuid.UUID(bytes=m)) for m in missing)}", name
            )
        segments = [s for s in segments if s.uuid in wanted]
    ctx = ds.storage
    for segment in segments:
        kind = index_type_of(segment, ctx)
        if kind == INVERTED:
            fts.prewarm(ctx, segment, with_position)
        elif kind in VECTOR_TYPES:
            vector_search.prewarm(ctx, segment, kind)
        elif kind == JSON:
            raise UnsupportedFeatureError(
                f"prewarm_index: index {name!r} of type JSON is not supported by lance-ops"
            )
        else:
            scalar_query.prewarm(ctx, segment, kind)
