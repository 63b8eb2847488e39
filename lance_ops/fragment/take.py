"""A take of a few rows from each of many fragments, each column decoded across the files at once.

Reading a handful of rows from a small data file costs a fixed few hundred microseconds of Python
and numpy calls per column (locating the page, its chunks, decoding them, rebuilding the array),
however few the rows. :func:`take_fragments` reads the requested rows of many fragments with each
column's pages gathered across the fragments' files: runs of flat mini-block pages of one layout
(the files of one writer) have their needed chunks decoded in one call
(:func:`~lance_ops.encoding.structural.miniblock.take_pages`) and each field is rebuilt once from
its leaves. The result is what :meth:`FragmentReader.read` of each fragment, concatenated, gives.

On remote stores a take makes few round trips: the touched files are opened with their tails
read together, and every page range the take reads, across columns and files, is fetched in one
batch of concurrent requests before anything is decoded (:func:`_pages_fetched_ahead`).

Fragments are read this way when each requested column lies whole in one 2.1+ data file of the
fragment, with the dataset's type (no blob columns); others, and the columns of a fragment that
cannot be joined, are read by :meth:`FragmentReader.read`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_ops.encoding.api import Fetch
from lance_ops.encoding.field_decoder import StructuralFieldDecoder
from lance_ops.encoding.structural import empty_struct
from lance_ops.encoding.structural.miniblock import take_chunk_ranges, take_metadata_ranges, take_pages
from lance_ops.encoding.structural.page import PageReader
from lance_ops.encoding.structural.repdef import DecodedLeaf
from lance_ops.errors import CorruptFileError
from lance_ops.file.multi import joinable, rebuilt_across_files
from lance_ops.file.reader import FetchedAhead, V2FileReader
from lance_ops.file.schema import from_storage
from lance_ops.fragment.reader import ROW_ADDRESS, ROW_ID, FragmentReader, row_addresses
from lance_ops.io import ObjectStore

# Fewer fragments than this are read one by one (nothing to share among them).
MIN_FRAGMENTS = 2


@dataclass(frozen=True)
class _Source:
    """Where one fragment keeps one requested column: the open file and the column's index there."""

    reader: V2FileReader
    index: int


def take_fragments(
    pieces: Sequence[tuple[FragmentReader, np.ndarray]], columns: Sequence[str]
) -> list[pa.Table]:
    """Tables of the rows at physical ``offsets`` (ascending, unique) of each ``(fragment,
    offsets)``, projected to ``columns`` (``_rowid`` / ``_rowaddr`` allowed when the schema has no
    such column), one table per run of fragments read together or per fragment read alone; in
    order, their rows are the pieces' rows in order."""
    if not pieces:
        return []
    with _pages_fetched_ahead(pieces, columns):
        return _take(pieces, columns)


def _take(pieces: Sequence[tuple[FragmentReader, np.ndarray]], columns: Sequence[str]) -> list[pa.Table]:
    files = pieces[0][0].files
    schema = files.schema
    virtual = [c for c in columns if c in (ROW_ID, ROW_ADDRESS) and c not in schema.names]
    real = [c for c in columns if c not in virtual]
    wanted = [schema.get_field_index(c) for c in real]
    # Without a stored column there is nothing to decode together (rows come from the offsets).
    plans = [_plan(fragment, wanted) if len(offsets) and wanted else None for fragment, offsets in pieces]
    out: list[pa.Table] = []
    start = 0
    while start < len(pieces):
        stop = start + 1
        if plans[start] is not None:
            while stop < len(pieces) and plans[stop] is not None:
                stop += 1
        if stop - start >= MIN_FRAGMENTS:
            run = pieces[start:stop]
            arrays = [
                _column(run, [plans[i][k] for i in range(start, stop)], schema.field(index))  # type: ignore[index]
                for k, index in enumerate(wanted)
            ]
            table = pa.Table.from_arrays(
                arrays, schema=pa.schema([schema.field(i) for i in wanted], metadata=schema.metadata)
            )
            out.append(_with_virtual(table, run, virtual, columns))
        else:
            out.extend(read_fragment(fragment, columns, offsets) for fragment, offsets in pieces[start:stop])
        start = stop
    return out


@contextmanager
def _pages_fetched_ahead(
    pieces: Sequence[tuple[FragmentReader, np.ndarray]], columns: Sequence[str]
) -> Iterator[None]:
    """On remote stores, while the block runs: the data files of the pieces' fragments holding
    ``columns`` open (their tails read together, :meth:`VersionFiles.open_together`), and the
    pages the take reads of them fetched ahead in one request batch across all the files
    (:meth:`~lance_ops.io.ObjectStore.read_many`: concurrent requests), the readers serving
    them from memory (:meth:`V2FileReader.serving`). Pages of at most the store's
    ``coalesce_gap`` bytes (what one more request costs) are fetched whole; of larger mini-block
    pages, the chunks holding the rows, after a first batch fetching the chunk tables of those
    not loaded yet. Without this each file's pages are read one column after another, one file
    after another. Local disks and memory read as before."""
    files = pieces[0][0].files
    if not files.store.whole_file_read_size and not files.manifest.base_paths:
        yield
        return
    fragments = [fragment for fragment, offsets in pieces if len(offsets)]
    files.open_together(fragments, columns)
    wanted = {files.schema.get_field_index(c) for c in columns} - {-1}
    wanted -= {i for i in wanted if files.has_blob_v2[i]}
    plans: list[_FilePlan] = []
    for fragment, offsets in pieces:
        if not len(offsets) or not wanted:
            continue
        for data_file in fragment.metadata.files:
            if not wanted & {files.top_level_of.get(i) for i in data_file.fields}:
                continue
            reader = files.open_file(data_file)
            store = files.file_store(data_file)
            if not (isinstance(reader, V2FileReader) and store.whole_file_read_size):
                continue
            mapping = files.file_columns(data_file, reader.schema)
            held = sorted(wanted & mapping.keys())
            indices = [reader.schema.get_field_index(mapping[i].name) for i in held]
            spans, large = reader.take_spans(indices, offsets, store.coalesce_gap)
            plan = _FilePlan(store, reader, spans, _large_pages(reader, large, offsets, store.coalesce_gap))
            if plan.spans or plan.large:
                plans.append(plan)
    # Large pages not loaded yet need their chunk tables before their chunks can be found: those
    # come with the small pages, the chunks in a second batch. Otherwise one batch holds all.
    first = [plan.spans + plan.metadata() for plan in plans]
    loading = any(len(spans) > len(plan.spans) for spans, plan in zip(first, plans, strict=True))
    if not loading:
        first = [plan.spans + plan.chunks(plan.reader._fetch) for plan in plans]
    fetched = _read_many(plans, first)
    if loading:
        second = [
            plan.chunks(FetchedAhead(plan.reader._fetch, spans, buffers))
            for plan, spans, buffers in zip(plans, first, fetched, strict=True)
        ]
        more = _read_many(plans, second)
        first = [a + b for a, b in zip(first, second, strict=True)]
        fetched = [a + b for a, b in zip(fetched, more, strict=True)]
    with ExitStack() as stack:
        for plan, spans, buffers in zip(plans, first, fetched, strict=True):
            if spans:
                stack.enter_context(plan.reader.serving(spans, buffers))
        yield


@dataclass(frozen=True)
class _FilePlan:
    """What a take reads of one file ahead: the buffers of its small pages (``spans``), and its
    large mini-block pages with the page-relative rows read of each (``large``)."""

    store: ObjectStore
    reader: V2FileReader
    spans: list[tuple[int, int]]
    large: list[tuple[PageReader, np.ndarray]]

    def metadata(self) -> list[tuple[int, int]]:
        return [span for page, _ in self.large for span in take_metadata_ranges(page)]

    def chunks(self, fetch: Fetch) -> list[tuple[int, int]]:
        return [span for page, rows in self.large for span in take_chunk_ranges(page, fetch, rows)]


def _read_many(plans: Sequence[_FilePlan], spans: Sequence[list[tuple[int, int]]]) -> list[list[memoryview]]:
    """The bytes of ``spans`` of each plan's file, those of one store in one request batch."""
    out: list[list[memoryview]] = [[] for _ in plans]
    by_store: dict[int, tuple[ObjectStore, list[int]]] = {}
    for i, plan in enumerate(plans):
        if spans[i]:
            by_store.setdefault(id(plan.store), (plan.store, []))[1].append(i)
    for store, members in by_store.values():
        fetched = store.read_many([(plans[i].reader.path, spans[i]) for i in members])
        for i, buffers in zip(members, fetched, strict=True):
            out[i] = buffers
    return out


def _large_pages(
    reader: V2FileReader, indices: Sequence[int], rows: np.ndarray, limit: int
) -> list[tuple[PageReader, np.ndarray]]:
    """The pages of more than ``limit`` bytes of fields ``indices`` holding some of ``rows``, each
    with its page-relative rows."""
    out = []
    for index in indices:
        try:
            decoder = reader._decoder(index)
        except (CorruptFileError, NotImplementedError):
            continue  # the read reports it, naming the column
        if not isinstance(decoder, StructuralFieldDecoder):
            continue
        for col, leaf in enumerate(decoder.leaves):
            if empty_struct.is_empty_struct(leaf.type):
                continue
            try:
                pages = decoder.page_rows(col, rows)
            except CorruptFileError:
                continue
            for page, local in pages:
                page_reader = decoder._reader(col, page)
                if sum(size for _, size in page_reader.info.buffers) > limit:
                    out.append((page_reader, local))
    return out


def read_fragment(fragment: FragmentReader, columns: Sequence[str], offsets: np.ndarray) -> pa.Table:
    """``fragment.read`` with ``_rowid`` / ``_rowaddr`` allowed among ``columns`` (in that order)."""
    virtual = [c for c in columns if c in (ROW_ID, ROW_ADDRESS) and c not in fragment.files.schema.names]
    if not virtual:
        return fragment.read(columns, offsets)
    real = [c for c in columns if c not in virtual]
    table = fragment.read(real, offsets, ROW_ID in virtual, ROW_ADDRESS in virtual)
    return table.select(list(columns))


def _with_virtual(
    table: pa.Table,
    run: Sequence[tuple[FragmentReader, np.ndarray]],
    virtual: list[str],
    columns: Sequence[str],
) -> pa.Table:
    if not virtual:
        return table
    if ROW_ID in virtual:
        ids = np.concatenate([fragment.row_ids(offsets) for fragment, offsets in run])
        table = table.append_column(pa.field(ROW_ID, pa.uint64()), pa.array(ids, pa.uint64()))
    if ROW_ADDRESS in virtual:
        addresses = np.concatenate([row_addresses(fragment.id, offsets) for fragment, offsets in run])
        table = table.append_column(pa.field(ROW_ADDRESS, pa.uint64()), pa.array(addresses, pa.uint64()))
    return table.select(list(columns))


def _plan(fragment: FragmentReader, wanted: Sequence[int]) -> list[_Source] | None:
    """Per wanted dataset field, the file column holding it whole; None when some field is not
    held so (missing, split across files, of another type, a blob) or a file is not 2.1+."""
    files = fragment.files
    sources: list[_Source] = []
    for index in wanted:
        if files.has_blob_v2[index]:
            return None
        for data_file in fragment.metadata.files:
            reader = files.open_file(data_file)
            column = files.file_columns(data_file, reader.schema).get(index)
            if column is None:
                continue
            if not (isinstance(reader, V2FileReader) and joinable(reader)):
                return None
            if not files.leaves[index] <= column.dataset_ids(column.nodes[0].id):
                return None
            file_index = reader.schema.get_field_index(column.name)
            if reader.schema.field(file_index).type != files.schema.field(index).type:
                return None
            sources.append(_Source(reader, file_index))
            break
        else:
            return None
    return sources


def _column(
    run: Sequence[tuple[FragmentReader, np.ndarray]], sources: Sequence[_Source], field: pa.Field
) -> pa.Array:
    """``field`` at the run's offsets, its leaf columns' pages read across the files together."""
    decoders: list[StructuralFieldDecoder] = []
    for source in sources:
        decoder = source.reader._decoder(source.index)
        if (
            not isinstance(decoder, StructuralFieldDecoder)
            or any(
                empty_struct.is_empty_struct(leaf.type) or pa.types.is_dictionary(leaf.type)
                for leaf in decoder.leaves
            )
            or (decoders and decoder.field.type != decoders[0].field.type)
        ):
            return _each_file(run, sources)
        decoders.append(decoder)

    def leaf(col: int) -> DecodedLeaf:
        pages = []
        for (_, offsets), source, decoder in zip(run, sources, decoders, strict=True):
            pages.extend(_pages(decoder, col, offsets, source.reader))
        return take_pages(pages)

    expected = int(sum(len(offsets) for _, offsets in run))
    paths = [source.reader.path for source in sources]
    return from_storage(rebuilt_across_files(decoders[0], field, paths, leaf, expected), field)


def _pages(
    decoder: StructuralFieldDecoder, col: int, rows: np.ndarray, reader: V2FileReader
) -> list[tuple[PageReader, Fetch, str, np.ndarray]]:
    """``(page reader, fetch, path, page-relative rows)`` of each page of leaf column ``col``
    holding some of the (sorted) ``rows``."""
    try:
        pages = decoder.page_rows(col, rows)
    except CorruptFileError as exc:
        raise exc.located(path=reader.path) from exc
    return [(decoder._reader(col, page), reader._fetch, reader.path, local) for page, local in pages]


def _each_file(
    run: Sequence[tuple[FragmentReader, np.ndarray]], sources: Sequence[_Source]
) -> pa.ChunkedArray:
    """The column read file by file (fields that cannot be joined: dictionaries, empty structs)."""
    chunks = []
    for (_, offsets), source in zip(run, sources, strict=True):
        reader = source.reader
        field = reader.schema.field(source.index)
        chunks.append(reader._decode_field(field, reader._decoder(source.index), offsets))
    return pa.chunked_array(chunks, chunks[0].type)
