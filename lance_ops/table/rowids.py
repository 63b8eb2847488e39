"""Stable row-id and row-version sequences (``rowids.proto``), the parts a committer needs.

A fragment of a dataset with stable row ids (feature flag 2) carries:

* ``inline_row_ids``: a ``RowIdSequence`` whose segments list the fragment's row ids in row order.
  New rows get one contiguous ``Range{start, end}`` (end exclusive) starting at ``next_row_id``:
  10 rows appended when ``next_row_id`` is 15 -> ``Range{15, 25}``.
* ``inline_created_at_versions`` / ``inline_last_updated_at_versions``: a
  ``RowDatasetVersionSequence`` of runs ``{span: Range over row *offsets*, version}``; rows written
  by version 3 in a fragment of 10 rows -> ``[{span: Range{0, 10}, version: 3}]``.

Decoding (reading ``_rowid``) expands every segment kind with numpy.
"""

from __future__ import annotations

import numpy as np

from lance_ops._proto import rowids_pb2
from lance_ops.errors import CorruptFileError


def range_sequence(start: int, end: int) -> bytes:
    """Serialized ``RowIdSequence`` of the ids ``[start, end)``."""
    seq = rowids_pb2.RowIdSequence()
    if end > start:
        segment = seq.segments.add()
        segment.range.start, segment.range.end = start, end
    return seq.SerializeToString()


def version_sequence(num_rows: int, version: int) -> bytes:
    """Serialized ``RowDatasetVersionSequence`` stamping ``num_rows`` rows with ``version``."""
    seq = rowids_pb2.RowDatasetVersionSequence()
    if num_rows:
        run = seq.runs.add()
        run.span.range.start, run.span.range.end = 0, num_rows
        run.version = version
    return seq.SerializeToString()


def _decode_array(array: rowids_pb2.EncodedU64Array) -> np.ndarray:
    which = array.WhichOneof("array")
    if which == "u16_array":
        return array.u16_array.base + np.frombuffer(array.u16_array.offsets, "<u2").astype(np.uint64)
    if which == "u32_array":
        return array.u32_array.base + np.frombuffer(array.u32_array.offsets, "<u4").astype(np.uint64)
    if which == "u64_array":
        return np.frombuffer(array.u64_array.values, "<u8").astype(np.uint64)
    return np.zeros(0, np.uint64)


def _decode_segment(segment: rowids_pb2.U64Segment) -> np.ndarray:
    which = segment.WhichOneof("segment")
    if which == "range":
        return np.arange(segment.range.start, segment.range.end, dtype=np.uint64)
    if which == "range_with_holes":
        r = segment.range_with_holes
        values = np.arange(r.start, r.end, dtype=np.uint64)
        return values[~np.isin(values, _decode_array(r.holes))]
    if which == "range_with_bitmap":
        r = segment.range_with_bitmap
        bits = np.unpackbits(np.frombuffer(r.bitmap, np.uint8), bitorder="little")[: r.end - r.start]
        return np.arange(r.start, r.end, dtype=np.uint64)[bits.astype(bool)]
    if which in ("sorted_array", "array"):
        return _decode_array(getattr(segment, which))
    return np.zeros(0, np.uint64)


def decode_row_ids(data: bytes, path: str = "<row ids>") -> np.ndarray:
    """The row ids of a serialized ``RowIdSequence`` as a uint64 array."""
    seq = rowids_pb2.RowIdSequence()
    try:
        seq.ParseFromString(data)
    except Exception as exc:  # protobuf DecodeError
        raise CorruptFileError(path, f"undecodable row id sequence: {exc}") from exc
    parts = [_decode_segment(s) for s in seq.segments]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)
