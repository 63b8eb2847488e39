"""Stable row-id and row-version sequences (``rowids.proto``): encoding, decoding, storage.

A fragment of a dataset with stable row ids (feature flag 2) carries:

* a row-id sequence (``RowIdSequence``): segments listing the fragment's row ids in row order.
  New rows get one contiguous ``Range{start, end}`` (end exclusive) starting at ``next_row_id``:
  10 rows appended when ``next_row_id`` is 15 -> ``Range{15, 25}``. Compaction drops the deleted
  rows from each source segment, then cuts the segments into the new fragments (:func:`rechunk_row_ids`).
* created-at / last-updated-at version sequences (``RowDatasetVersionSequence``): runs
  ``{span, version}`` where only the span's *length* matters (rows are covered in order); rows
  written by version 3 in a fragment of 10 rows -> ``[{span: Range{0, 10}, version: 3}]``.

Segment kinds, as chosen by pylance (smallest estimated size wins, ties in this order):

==================  =====================================  ==============================
kind                when                                   estimated bytes
==================  =====================================  ==============================
Range               increasing, no gaps                    --
RangeWithHoles      increasing, gaps                       24 + 4 * holes
RangeWithBitmap     increasing, gaps (LSB-first bitmap)    24 + ceil((max - min + 1) / 8)
SortedArray         increasing, gaps                       24 + 2 * n
Array               otherwise                              --
==================  =====================================  ==============================

Arrays (``EncodedU64Array``) store offsets from ``base = min`` as u16 when ``max - min`` fits, else
u32, else raw u64. Example: ids ``{0, 1, 2, 4, 5, 6, 7, 8, 9}`` -> ``RangeWithBitmap{0, 10, f7 03}``.

Sequences are always written inline. table.proto allows an external file above 200 KB
(``ExternalFile{path, offset, size}``, path relative to the dataset root), but pylance 14 never
writes one and refuses to open a dataset whose fragments have one ("All fragments must have row
ids"), so writing them would lock pylance out; they are read, though. Decoding expands every
segment kind with numpy.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from lance_ops._proto import rowids_pb2
from lance_ops.errors import CorruptFileError
from lance_ops.io import ObjectStore
from lance_ops.table.manifest import ExternalFile
from lance_ops.table.paths import referenced_file

_SEGMENT_OVERHEAD = 24
_U16_SPAN = 0xFFFF
_U32_SPAN = 0xFFFFFFFF
_MAX_U64 = 2**64 - 1


def _encode_array(values: np.ndarray, out: rowids_pb2.EncodedU64Array) -> None:
    """Fill ``out`` with ``values`` as u16 / u32 offsets from their minimum, or raw u64."""
    if not len(values):
        out.u16_array.base = 0
        out.u16_array.offsets = b""
        return
    base = int(values.min())
    span = int(values.max()) - base
    if span <= _U16_SPAN:
        out.u16_array.base = base
        out.u16_array.offsets = (values - np.uint64(base)).astype("<u2").tobytes()
    elif span <= _U32_SPAN:
        out.u32_array.base = base
        out.u32_array.offsets = (values - np.uint64(base)).astype("<u4").tobytes()
    else:
        out.u64_array.values = values.astype("<u8").tobytes()


def encode_segment(values: np.ndarray, out: rowids_pb2.U64Segment) -> None:
    """Fill ``out`` with the most compact segment holding ``values`` (uint64, in row order)."""
    values = np.asarray(values, dtype=np.uint64)
    count = len(values)
    if not count:
        out.range.start, out.range.end = 0, 0
        return
    if count > 1 and bool(np.any(values[1:] <= values[:-1])):
        _encode_array(values, out.array)
        return
    low, high = int(values[0]), int(values[-1])
    if high == _MAX_U64:  # a range's exclusive end would not fit
        _encode_array(values, out.sorted_array)
        return
    slots = high - low + 1
    if slots == count:
        out.range.start, out.range.end = low, high + 1
        return
    sizes = (
        _SEGMENT_OVERHEAD + 4 * (slots - count),
        _SEGMENT_OVERHEAD + -(-slots // 8),
        _SEGMENT_OVERHEAD + 2 * count,
    )
    best = sizes.index(min(sizes))
    if best == 2:
        _encode_array(values, out.sorted_array)
        return
    # Holes or bitmap win only when the span is at most 16 times the count: a dense mask is cheap.
    present = np.zeros(slots, dtype=bool)
    present[(values - np.uint64(low)).astype(np.int64)] = True
    if best == 0:
        segment = out.range_with_holes
        segment.start, segment.end = low, high + 1
        _encode_array(np.flatnonzero(~present).astype(np.uint64) + np.uint64(low), segment.holes)
    else:
        bitmap = out.range_with_bitmap
        bitmap.start, bitmap.end = low, high + 1
        bitmap.bitmap = np.packbits(present, bitorder="little").tobytes()


def encode_row_ids(segments: Sequence[np.ndarray]) -> bytes:
    """Serialized ``RowIdSequence`` with one segment per non-empty array of ``segments``."""
    seq = rowids_pb2.RowIdSequence()
    for values in segments:
        if len(values):
            encode_segment(values, seq.segments.add())
    return seq.SerializeToString()


def range_sequence(start: int, end: int) -> bytes:
    """Serialized ``RowIdSequence`` of the ids ``[start, end)``."""
    seq = rowids_pb2.RowIdSequence()
    if end > start:
        segment = seq.segments.add()
        segment.range.start, segment.range.end = start, end
    return seq.SerializeToString()


def version_sequence(num_rows: int, version: int) -> bytes:
    """Serialized ``RowDatasetVersionSequence`` stamping ``num_rows`` rows with ``version``."""
    return encode_versions(np.full(num_rows, version, dtype=np.uint64))


def encode_versions(versions: np.ndarray) -> bytes:
    """Serialized ``RowDatasetVersionSequence`` of per-row ``versions`` (one run per equal stretch)."""
    seq = rowids_pb2.RowDatasetVersionSequence()
    if len(versions):
        starts = np.flatnonzero(np.concatenate([[True], versions[1:] != versions[:-1]]))
        ends = np.append(starts[1:], len(versions))
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            run = seq.runs.add()
            run.span.range.start, run.span.range.end = start, end
            run.version = int(versions[start])
    return seq.SerializeToString()


def _is_range(segment: rowids_pb2.U64Segment) -> bool:
    return segment.WhichOneof("segment") == "range"


def rechunk_row_ids(segments: Sequence[np.ndarray], sizes: Sequence[int]) -> list[bytes]:
    """Serialized ``RowIdSequence`` per chunk of ``sizes`` rows cut from ``segments`` (pylance's rechunk).

    Every piece of a segment that lands in a chunk is re-encoded from its values; a ``Range`` piece
    that starts where the chunk's previous ``Range`` ends extends it (pylance's ``extend``). Example:
    segments ``[0..5 minus 2]``, ``[5..9]``, ``[9..12]`` in one chunk ->
    ``RangeWithBitmap{0, 5}``, ``Range{5, 12}``.
    """
    pending = [s for s in segments if len(s)]
    if sum(len(s) for s in pending) > sum(sizes):
        raise CorruptFileError("<row ids>", f"row id segments hold more rows than the chunks {list(sizes)}")
    out: list[bytes] = []
    for pieces in _cut(pending, sizes, "<row ids>", "row id segments"):
        seq = rowids_pb2.RowIdSequence()
        for _, values in pieces:
            piece = rowids_pb2.U64Segment()
            encode_segment(values, piece)
            last = seq.segments[-1] if len(seq.segments) else None
            if (
                last is not None
                and _is_range(last)
                and _is_range(piece)
                and last.range.end == piece.range.start
            ):
                last.range.end = piece.range.end
            else:
                seq.segments.append(piece)
        out.append(seq.SerializeToString())
    return out


def _cut(
    spans: Sequence[np.ndarray], sizes: Sequence[int], path: str, what: str
) -> Iterator[list[tuple[int, np.ndarray]]]:
    """Per chunk of ``sizes`` rows, the pieces of ``spans`` it takes, in order, as
    ``(span index, values)``; raises :class:`CorruptFileError` when the spans run out."""
    index, offset = 0, 0
    for size in sizes:
        pieces: list[tuple[int, np.ndarray]] = []
        remaining = size
        while remaining > 0:
            if index >= len(spans):
                raise CorruptFileError(path, f"{what} hold fewer rows than the chunks {list(sizes)}")
            values = spans[index][offset : offset + remaining]
            pieces.append((index, values))
            offset += len(values)
            remaining -= len(values)
            if offset == len(spans[index]):
                index, offset = index + 1, 0
        yield pieces


VersionRuns = list[tuple[np.ndarray, int]]
"""Runs of a version sequence: (the span's values, version); only the span's length counts."""


def decode_version_runs(data: bytes, num_rows: int, path: str = "<row versions>") -> VersionRuns:
    """The runs of a serialized ``RowDatasetVersionSequence`` with their span values.

    Rows past the last run (a short sequence) get a run of version 1, as :func:`decode_versions`.
    """
    seq = rowids_pb2.RowDatasetVersionSequence()
    _parse(seq, data, path)
    runs = [(decode_segment(run.span), int(run.version)) for run in seq.runs]
    covered = sum(len(span) for span, _ in runs)
    if covered > num_rows:
        raise CorruptFileError(path, f"version sequence covers {covered} rows, fragment has {num_rows}")
    if covered < num_rows:
        runs.append((np.arange(covered, num_rows, dtype=np.uint64), 1))
    return runs


def mask_version_runs(runs: VersionRuns, live: np.ndarray) -> VersionRuns:
    """``runs`` without the rows (positions) where ``live`` is False; emptied runs are dropped."""
    out: VersionRuns = []
    position = 0
    for span, version in runs:
        kept = span[live[position : position + len(span)]]
        position += len(span)
        if len(kept):
            out.append((kept, version))
    return out


def rechunk_versions(runs: VersionRuns, sizes: Sequence[int]) -> list[bytes]:
    """Serialized ``RowDatasetVersionSequence`` per chunk of ``sizes`` rows cut from ``runs``.

    As pylance: each piece of a run keeps its version and its span's values (re-encoded); runs are
    never merged, even when neighbours share a version.
    """
    out: list[bytes] = []
    spans = [span for span, _ in runs]
    for pieces in _cut(spans, sizes, "<row versions>", "version runs"):
        seq = rowids_pb2.RowDatasetVersionSequence()
        for index, values in pieces:
            run = seq.runs.add()
            encode_segment(values, run.span)
            run.version = runs[index][1]
        out.append(seq.SerializeToString())
    return out


def _decode_array(array: rowids_pb2.EncodedU64Array) -> np.ndarray:
    which = array.WhichOneof("array")
    if which == "u16_array":
        return np.uint64(array.u16_array.base) + np.frombuffer(array.u16_array.offsets, "<u2").astype(
            np.uint64
        )
    if which == "u32_array":
        return np.uint64(array.u32_array.base) + np.frombuffer(array.u32_array.offsets, "<u4").astype(
            np.uint64
        )
    if which == "u64_array":
        return np.frombuffer(array.u64_array.values, "<u8").astype(np.uint64)
    return np.zeros(0, np.uint64)


def decode_segment(segment: rowids_pb2.U64Segment) -> np.ndarray:
    """The values of one segment, in order, as uint64."""
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
        return np.arange(r.start, r.start + len(bits), dtype=np.uint64)[bits.astype(bool)]
    if which in ("sorted_array", "array"):
        return _decode_array(getattr(segment, which))
    return np.zeros(0, np.uint64)


def _parse(
    message: rowids_pb2.RowIdSequence | rowids_pb2.RowDatasetVersionSequence, data: bytes, path: str
) -> None:
    try:
        message.ParseFromString(data)
    except Exception as exc:  # protobuf DecodeError
        raise CorruptFileError(path, f"undecodable {type(message).__name__}: {exc}") from exc


def decode_row_id_segments(data: bytes, path: str = "<row ids>") -> list[np.ndarray]:
    """The segments of a serialized ``RowIdSequence``, each expanded to a uint64 array."""
    seq = rowids_pb2.RowIdSequence()
    _parse(seq, data, path)
    return [decode_segment(s) for s in seq.segments]


def decode_row_ids(data: bytes, path: str = "<row ids>") -> np.ndarray:
    """The row ids of a serialized ``RowIdSequence`` as a uint64 array."""
    parts = decode_row_id_segments(data, path)
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def decode_versions(data: bytes, num_rows: int, path: str = "<row versions>") -> np.ndarray:
    """Per-row versions of a serialized ``RowDatasetVersionSequence`` (rows it does not cover: 1)."""
    seq = rowids_pb2.RowDatasetVersionSequence()
    _parse(seq, data, path)
    lengths = np.array([len(decode_segment(run.span)) for run in seq.runs], dtype=np.int64)
    versions = np.repeat(np.array([run.version for run in seq.runs], dtype=np.uint64), lengths)
    if len(versions) > num_rows:
        raise CorruptFileError(path, f"version sequence covers {len(versions)} rows, fragment has {num_rows}")
    return np.concatenate([versions, np.ones(num_rows - len(versions), np.uint64)])


def load_sequence(store: ObjectStore, root: str, value: bytes | ExternalFile) -> bytes:
    """The bytes of an inline or external sequence."""
    if isinstance(value, bytes):
        return value
    path = store.join(root, value.path)
    with referenced_file(path, "row-id file"):
        data = bytes(store.read_range(path, value.offset, value.size))
    if len(data) != value.size:
        raise CorruptFileError(
            path, f"sequence of {value.size} bytes at {value.offset} runs past the file end"
        )
    return data


class RowIdIndex:
    """Row id -> row address over the live rows of a version, looked up with one ``searchsorted``.

    Built from each fragment's decoded sequence minus its deleted offsets; ids are kept sorted next
    to their addresses (no per-row dict). Unknown or deleted ids map to nothing.
    """

    def __init__(self, ids: np.ndarray, addresses: np.ndarray) -> None:
        order = np.argsort(ids, kind="stable")
        self._ids = ids[order]
        self._addresses = addresses[order]

    @classmethod
    def build(cls, fragments: Sequence[tuple[int, np.ndarray, np.ndarray]]) -> RowIdIndex:
        """From ``(fragment id, row ids of every physical row, deleted offsets)`` triples."""
        ids, addresses = [], []
        for fragment_id, row_ids, deleted in fragments:
            live = np.ones(len(row_ids), dtype=bool)
            live[deleted.astype(np.int64)] = False
            offsets = np.flatnonzero(live).astype(np.uint64)
            ids.append(row_ids[live])
            addresses.append((np.uint64(fragment_id) << np.uint64(32)) | offsets)
        if not ids:
            return cls(np.zeros(0, np.uint64), np.zeros(0, np.uint64))
        return cls(np.concatenate(ids), np.concatenate(addresses))

    def __len__(self) -> int:
        return len(self._ids)

    def lookup(self, row_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(found mask, addresses of the found ids)`` for ``row_ids`` (uint64), in their order."""
        row_ids = np.asarray(row_ids, dtype=np.uint64)
        if not len(self._ids):
            return np.zeros(len(row_ids), dtype=bool), np.zeros(0, np.uint64)
        position = np.minimum(np.searchsorted(self._ids, row_ids), len(self._ids) - 1)
        found = self._ids[position] == row_ids
        return found, self._addresses[position[found]]
