"""Page readers: one per ``PageLayout`` variant, found through a registry keyed by the oneof name.

A reader turns one stored page into the :class:`~lance_ops.encoding.structural.repdef.DecodedLeaf`
of the requested rows (page-relative, sorted, unique), fetching only the byte ranges it
needs through the file layer's :data:`~lance_ops.encoding.api.Fetch` callable. Readers keep
their search-cache state (mini-block metadata, dictionary, repetition index) after the
first read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import Fetch, FileVersion, PageInfo
from lance_ops.encoding.structural.repdef import DecodedLeaf
from lance_ops.errors import CorruptFileError, LanceOpsError, UnsupportedEncodingError


class PageReader(ABC):
    def __init__(self, info: PageInfo, dtype: pa.DataType, version: FileVersion) -> None:
        self.info = info
        self.dtype = dtype
        self.version = version

    def read(self, fetch: Fetch, rows: np.ndarray) -> DecodedLeaf:
        """Decode the page-relative ``rows`` (sorted, unique int64).

        Malformed page bytes surface as :class:`CorruptFileError` whatever numpy or pyarrow
        raised while parsing them; deliberate lance_ops errors pass through.
        """
        return self._guarded(self._read, fetch, rows)

    def read_span(self, fetch: Fetch, lo: int, hi: int) -> DecodedLeaf:
        """Decode the page-relative rows ``lo`` to ``hi`` (exclusive, ``lo < hi``): what
        :meth:`read` of those rows gives, without an array of the row numbers where the layout
        can do without one (a scan reads whole pages and batches, hundreds of thousands of rows)."""
        return self._guarded(self._read_span, fetch, lo, hi)

    def _read_span(self, fetch: Fetch, lo: int, hi: int) -> DecodedLeaf:
        return self._read(fetch, np.arange(lo, hi, dtype=np.int64))

    def _guarded(self, method: Callable[..., DecodedLeaf], *args: object) -> DecodedLeaf:
        page = f"page at row {self.info.first_row}"
        try:
            return method(*args)
        except CorruptFileError as exc:
            raise exc.located(page=page) from exc
        except LanceOpsError:
            raise
        except (IndexError, ValueError, TypeError, OverflowError, pa.ArrowException) as exc:
            raise CorruptFileError("<page>", f"{type(self).__name__}: {exc}", page=page) from exc

    @abstractmethod
    def _read(self, fetch: Fetch, rows: np.ndarray) -> DecodedLeaf:
        """Decode the page-relative ``rows``; see :meth:`read`."""


_READERS: dict[str, type[PageReader]] = {}


def register_layout(name: str) -> Callable[[type[PageReader]], type[PageReader]]:
    def deco(cls: type[PageReader]) -> type[PageReader]:
        _READERS[name] = cls
        return cls

    return deco


def page_reader(info: PageInfo, dtype: pa.DataType, version: FileVersion) -> PageReader:
    from lance_ops.encoding.structural import blob, constant, fullzip, miniblock  # noqa: F401  (registration)

    name = info.layout.WhichOneof("layout")
    cls = _READERS.get(name or "")
    if cls is None:
        raise UnsupportedEncodingError(f"page layout {name!r} is not supported")
    return cls(info, dtype, version)
