"""Fuzzy term expansion of full-text queries (``MatchQuery(fuzziness=..., prefix_length=...)``).

A token dictionary (:class:`Vocabulary`, the terms of one INVERTED index partition in key order)
answers which of its terms lie within a Levenshtein distance of a query term (insertions,
deletions and substitutions of Unicode characters, as pylance 14 counts them: ``"uber"`` is one
edit from ``"über"``; a transposition is two edits) and start with a given prefix. The distances
of all candidate terms are computed together, one dynamic-programming step per character of the
longest candidate, each step a few numpy operations over every candidate.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Vocabulary"]


class Vocabulary:
    """The terms of a token dictionary (any order) with their Unicode code points."""

    def __init__(self, terms: Iterable[str]) -> None:
        self.terms = pa.array(list(terms), pa.large_string())
        self.lengths = np.asarray(pc.utf8_length(self.terms), np.int64)
        width = int(self.lengths.max()) if len(self.lengths) else 0
        # one row of code points per term, padded with -1
        codes = np.frombuffer("".join(self.terms.to_pylist()).encode("utf-32-le"), np.uint32)
        self.codes = np.full((len(self.lengths), width), -1, np.int64)
        rows = np.repeat(np.arange(len(self.lengths)), self.lengths)
        starts = np.cumsum(self.lengths) - self.lengths
        columns = np.arange(len(codes)) - np.repeat(starts, self.lengths)
        self.codes[rows, columns] = codes

    def __len__(self) -> int:
        return len(self.lengths)

    def within(self, term: str, distance: int, prefix: int = 0) -> list[str]:
        """The terms at most ``distance`` edits from ``term`` that start with its first ``prefix``
        characters, in the dictionary's order."""
        query = np.array([ord(c) for c in term], np.int64)
        width = len(query)
        candidates = np.abs(self.lengths - width) <= distance
        if prefix:
            starts = pc.starts_with(self.terms, pattern=term[:prefix])
            candidates &= np.asarray(starts.fill_null(False), dtype=bool)
        picked = np.flatnonzero(candidates)
        if not len(picked):
            return []
        codes, lengths = self.codes[picked], self.lengths[picked]
        steps = np.arange(width + 1, dtype=np.int64)
        # row j of the table: edits between the first j characters of each candidate and every
        # prefix of the query term
        row = np.broadcast_to(steps, (len(picked), width + 1)).copy()
        best = np.where(lengths == 0, width, np.iinfo(np.int64).max)
        for j in range(1, int(lengths.max()) + 1):
            step = np.empty_like(row)
            step[:, 0] = j
            substitute = row[:, :-1] + (codes[:, j - 1, None] != query[None, :])
            step[:, 1:] = np.minimum(row[:, 1:] + 1, substitute)
            # insertions run along the row: min over k <= i of step[k] + (i - k)
            row = np.minimum.accumulate(step - steps, axis=1) + steps
            ends = lengths == j
            best[ends] = row[ends, width]
        return [str(t) for t in self.terms.take(pa.array(picked[best <= distance])).to_pylist()]
