"""pylance's ``lance.indices``: a vector index built step by step (``IndicesBuilder``), with the
trained models as objects that are saved to and loaded from Lance files (``IvfModel``,
``PqModel``).

The steps are those of :mod:`lance_ops.index.build_vector` one at a time, with the same numpy
training (k-means of ``num_partitions * sample_rate`` vectors, then PQ codebooks over
``2**num_bits * sample_rate`` residuals) and encoding:

1. ``train_ivf`` / ``train_pq`` (or ``prepare_global_ivf_pq``) train on a sample of the column's
   non-null, finite vectors;
2. ``transform_vectors`` writes one Lance file of ``_rowid`` / ``__ivf_part_id`` / ``__pq_code``
   for some fragments (``assign_ivf_partitions`` may precompute the partitions as a dataset);
3. ``shuffle_transformed_vectors`` regroups such files by partition: one file whose column
   ``partitions`` holds, per partition, the list of its rows (pylance 14's layout);
4. ``load_shuffled_vectors`` writes the IVF_PQ index of those rows and commits it over every
   fragment, as pylance does.

Files as pylance 14 writes them: the models' files (column ``centroids`` and schema metadata
``distance_type``; ``codebook`` with ``num_subvectors`` / ``num_bits``; a codebook row is one code's
sub-vectors side by side, stored sub-vector major as in the index's ``Tensor``), the transformed and
shuffled files. Differences: the index ``load_shuffled_vectors`` commits is lance_ops' own (index
file version V3; pylance writes a legacy one), ``accelerator`` (GPU k-means through torch) is
refused, and the centroids of dot indices are not normalized (pylance's are).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_ops.errors import IndexColumnTypeError, InvalidArgumentError, UnsupportedFeatureError
from lance_ops.file import LanceFileReader, LanceFileWriter
from lance_ops.index.build_vector import (
    TrainedIvf,
    VectorIndexParams,
    as_matrix,
    encode_ivf,
    kmeans,
    pq_codebooks,
    prepare,
    sample_positions,
    write_ivf,
)
from lance_ops.index.files import IndexWriter
from lance_ops.index.ivf import read_partition
from lance_ops.index.legacy_ivf import is_legacy_index, legacy_partition_table
from lance_ops.index.optimize import column_rows
from lance_ops.index.types import VECTOR_TYPES, index_type_of
from lance_ops.ops.indices import segments_of
from lance_ops.ops.vector_index import commit_vector_index, plan_vector_index

if TYPE_CHECKING:
    from lance_ops.dataset import LanceDataset
    from lance_ops.dataset_fragment import LanceFragment

__all__ = ["IndexConfig", "IndexFileVersion", "IndicesBuilder", "IvfModel", "PqModel", "VectorIndexReader"]

PARTITION_COLUMN = "__ivf_part_id"
PQ_COLUMN = "__pq_code"
ROW_ID_COLUMN = "_rowid"
_DISTANCE_TYPES = {"l2": "l2", "euclidean": "l2", "cosine": "cosine", "dot": "dot"}


def _write_model(
    uri: str, column: str, values: pa.Array, metadata: dict[bytes, bytes], options: Mapping[str, str] | None
) -> None:
    schema = pa.schema([pa.field(column, values.type)], metadata=metadata)
    with LanceFileWriter(uri, schema, storage_options=options, page_statistics=False) as writer:
        writer.write_batch(pa.table([values], schema=schema))


def _read_model(
    uri: str, column: str, options: Mapping[str, str] | None
) -> tuple[pa.Array, dict[bytes, bytes]]:
    reader = LanceFileReader(uri, storage_options=options)
    table = reader.read_all().to_table()
    return table.column(column).combine_chunks(), dict(table.schema.metadata or {})


def _matrix(values: pa.Array) -> np.ndarray:
    """``[n, dim]`` float32 of a model's centroids or codebook (a ``fixed_size_list`` array)."""
    return as_matrix(values, "model")


class IvfModel:
    """Trained IVF centroids (a ``fixed_size_list`` array, one centroid a row) and their metric."""

    def __init__(self, centroids: pa.Array, distance_type: str) -> None:
        self.centroids = centroids
        self.distance_type = distance_type

    @property
    def num_partitions(self) -> int:
        return len(self.centroids)

    def save(self, uri: str, *, storage_options: Mapping[str, str] | None = None) -> None:
        """A Lance file with one column ``centroids`` and the metric as schema metadata."""
        metadata = {b"distance_type": self.distance_type.encode()}
        _write_model(uri, "centroids", self.centroids, metadata, storage_options)

    @classmethod
    def load(cls, uri: str, *, storage_options: Mapping[str, str] | None = None) -> IvfModel:
        centroids, metadata = _read_model(uri, "centroids", storage_options)
        return cls(centroids, metadata[b"distance_type"].decode())


class PqModel:
    """Trained PQ codebooks: ``2**num_bits`` rows of the full dimension, the ``num_subvectors``
    sub-codebooks side by side (stored sub-vector major, as in the index's codebook tensor)."""

    def __init__(self, num_subvectors: int, codebook: pa.FixedSizeListArray, *, num_bits: int = 8) -> None:
        self.num_subvectors = num_subvectors
        self.num_bits = num_bits
        self.codebook = codebook

    @property
    def dimension(self) -> int:
        return int(self.codebook.type.list_size)

    def save(self, uri: str, *, storage_options: Mapping[str, str] | None = None) -> None:
        """A Lance file with one column ``codebook`` and ``num_subvectors`` / ``num_bits`` as schema
        metadata."""
        metadata = {
            b"num_subvectors": str(self.num_subvectors).encode(),
            b"num_bits": str(self.num_bits).encode(),
        }
        _write_model(uri, "codebook", self.codebook, metadata, storage_options)

    @classmethod
    def load(cls, uri: str, *, storage_options: Mapping[str, str] | None = None) -> PqModel:
        codebook, metadata = _read_model(uri, "codebook", storage_options)
        num_bits = int(metadata.get(b"num_bits", b"8").decode())
        return cls(int(metadata[b"num_subvectors"].decode()), codebook, num_bits=num_bits)

    def codebooks(self) -> np.ndarray:
        """``[num_subvectors, 2**num_bits, dimension / num_subvectors]`` float32."""
        flat = _matrix(self.codebook).reshape(-1)
        return flat.reshape(self.num_subvectors, len(self.codebook), self.dimension // self.num_subvectors)


class IndexFileVersion(StrEnum):
    """The file layout of a vector index (pylance's ``IndexFileVersion``; what
    ``index_stats(...)["indices"][i]["index_file_version"]`` reports). lance_ops writes both (Legacy:
    IVF_PQ only, as pylance 14)."""

    LEGACY = "Legacy"
    V3 = "V3"


@dataclass
class IndexConfig:
    """An index type and its parameters (pylance's ``IndexConfig``)."""

    index_type: str
    parameters: dict[str, Any]


class IndicesBuilder:
    """Build the vector index of ``column`` (a ``fixed_size_list`` of floats) in steps."""

    def __init__(self, dataset: LanceDataset, column: str | Sequence[str]) -> None:
        columns = [column] if isinstance(column, str) else list(column)
        if len(columns) != 1:
            raise InvalidArgumentError(f"one vector column is indexed at a time, got {columns}")
        self.dataset = dataset
        self.column = columns
        dtype = dataset.schema.field(columns[0]).type  # KeyError when there is no such column
        if not pa.types.is_fixed_size_list(dtype) or not pa.types.is_floating(dtype.value_type):
            raise IndexColumnTypeError(
                f"Vector column {columns[0]} must be a fixed_size_list of float, got {dtype}", columns[0]
            )
        self.dimension = int(dtype.list_size)
        self._value_type = dtype.value_type

    # ------------------------------------------------------------------ training

    def train_ivf(
        self,
        num_partitions: int | None = None,
        *,
        distance_type: str = "l2",
        accelerator: Any = None,
        sample_rate: int = 256,
        max_iters: int = 50,
        fragment_ids: Sequence[int] | None = None,
    ) -> IvfModel:
        """k-means centroids of a sample of ``num_partitions * sample_rate`` vectors
        (``num_partitions`` by default the integer nearest the square root of the row count)."""
        _no_accelerator(accelerator)
        num_rows = self._count_rows(fragment_ids)
        if num_partitions is None:
            num_partitions = round(math.sqrt(num_rows))
        if isinstance(num_partitions, bool) or not isinstance(num_partitions, (int, float)):
            raise InvalidArgumentError(f"num_partitions must be int, got {type(num_partitions)}")
        num_partitions = int(num_partitions)
        _check_sample_rate(sample_rate)
        if num_partitions < 1 or num_partitions * sample_rate > num_rows:
            raise InvalidArgumentError(
                f"column {self.column[0]!r}: there are not enough rows to train IVF centroids with "
                f"{num_partitions} partitions and a sample rate of {sample_rate}: "
                f"{num_partitions * sample_rate} rows needed and there are {num_rows}"
            )
        metric = _distance_type(distance_type)
        params = self._params("IVF_FLAT", metric, num_partitions, sample_rate, max_iters)
        vectors = self._vectors(fragment_ids)
        sample = _sample(params, vectors, num_partitions * sample_rate)
        if len(sample) < num_partitions:
            raise InvalidArgumentError(
                f"column {self.column[0]!r}: {len(sample)} non-null vectors are too few to train "
                f"{num_partitions} partitions"
            )
        centroids, _ = kmeans(sample, num_partitions, max_iters, np.random.default_rng(), metric == "dot")
        return IvfModel(self._array(centroids), metric)

    def train_pq(
        self,
        ivf_model: IvfModel,
        num_subvectors: int | None = None,
        *,
        sample_rate: int = 256,
        max_iters: int = 50,
        num_bits: int = 8,
        fragment_ids: Sequence[int] | None = None,
    ) -> PqModel:
        """PQ codebooks trained on the residuals of ``2**num_bits * sample_rate`` vectors to
        ``ivf_model``'s centroids (``num_subvectors``: dimension / 16, else / 8)."""
        num_rows = self._count_rows(fragment_ids)
        num_subvectors = self._num_subvectors(num_subvectors)
        _check_sample_rate(sample_rate)
        if num_bits not in (4, 8):
            raise InvalidArgumentError(f"column {self.column[0]!r}: num_bits must be 4 or 8, got {num_bits}")
        needed = 2**num_bits * sample_rate
        if needed > num_rows:
            raise InvalidArgumentError(
                f"column {self.column[0]!r}: there are not enough rows to train a PQ codebook with a "
                f"sample rate of {sample_rate} and num_bits of {num_bits}: {needed} rows needed and "
                f"there are {num_rows}"
            )
        metric = _distance_type(ivf_model.distance_type)
        params = self._params(
            "IVF_PQ", metric, ivf_model.num_partitions, sample_rate, max_iters, num_subvectors
        )
        params = replace(params, num_bits=num_bits)
        sample = _sample(params, self._vectors(fragment_ids), needed)
        if len(sample) < 2**num_bits:
            raise InvalidArgumentError(
                f"column {self.column[0]!r}: {len(sample)} non-null vectors are too few to train "
                f"{2**num_bits} PQ codes"
            )
        books = pq_codebooks(params, _matrix(ivf_model.centroids), sample, np.random.default_rng())
        # the [m, k, dim / m] codebooks' flat order as pylance's rows hold it (sub-vector major)
        codebook = self._array(books.reshape(2**num_bits, self.dimension))
        return PqModel(num_subvectors, codebook, num_bits=num_bits)

    def prepare_global_ivf_pq(
        self,
        num_partitions: int | None,
        num_subvectors: int | None,
        *,
        distance_type: str = "l2",
        accelerator: Any = None,
        sample_rate: int = 256,
        max_iters: int = 50,
        num_bits: int = 8,
        fragment_ids: Sequence[int] | None = None,
    ) -> dict[str, pa.Array]:
        """``train_ivf`` then ``train_pq``: ``{"ivf_centroids": ..., "pq_codebook": ...}``."""
        ivf = self.train_ivf(
            num_partitions,
            distance_type=distance_type,
            accelerator=accelerator,
            sample_rate=sample_rate,
            max_iters=max_iters,
            fragment_ids=fragment_ids,
        )
        pq = self.train_pq(
            ivf,
            num_subvectors,
            sample_rate=sample_rate,
            max_iters=max_iters,
            num_bits=num_bits,
            fragment_ids=fragment_ids,
        )
        return {"ivf_centroids": ivf.centroids, "pq_codebook": pq.codebook}

    # ------------------------------------------------------------------ encoding

    def assign_ivf_partitions(
        self, ivf_model: IvfModel, accelerator: Any = None, *, output_uri: str | None = None
    ) -> str:
        """Write each non-null vector's partition as a dataset of ``row_id`` (uint64) and
        ``partition`` (uint32) at ``output_uri`` (a new temporary directory by default); returns
        its URI. Computed here with numpy (``accelerator`` is refused as in ``train_ivf``)."""
        from lance_ops.dataset import write_dataset  # noqa: PLC0415 (the dataset layer imports this module's users)

        _no_accelerator(accelerator)
        row_ids, partition, _ = self._encode(ivf_model, None, None)
        table = pa.table(
            {"row_id": pa.array(row_ids, pa.uint64()), "partition": pa.array(partition, pa.uint32())}
        )
        if output_uri is None:
            output_uri = os.path.join(tempfile.mkdtemp(), "partitions.lance")
        write_dataset(table, output_uri)
        return output_uri

    def transform_vectors(
        self,
        ivf: IvfModel,
        pq: PqModel,
        dest_uri: str,
        fragments: Sequence[LanceFragment] | None = None,
        partition_ds_uri: str | None = None,
    ) -> None:
        """One Lance file at ``dest_uri`` with the non-null vectors of ``fragments`` (all by
        default) as ``_rowid`` (uint64), ``__ivf_part_id`` (uint32) and ``__pq_code``
        (``fixed_size_list<uint8>[num_subvectors]``); partitions from ``partition_ds_uri`` (an
        :meth:`assign_ivf_partitions` dataset) when given."""
        if fragments is not None and len(fragments) == 0:
            raise InvalidArgumentError("fragments must be a non-empty list or None")
        ids = None if fragments is None else [f.fragment_id for f in fragments]
        row_ids, partition, codes = self._encode(ivf, pq, ids)
        if partition_ds_uri is not None:
            partition = _precomputed_partitions(self.dataset, partition_ds_uri, row_ids)
        schema = pa.schema(
            [
                pa.field(ROW_ID_COLUMN, pa.uint64()),
                pa.field(PARTITION_COLUMN, pa.uint32()),
                pa.field(PQ_COLUMN, pa.list_(pa.uint8(), pq.num_subvectors), nullable=False),
            ]
        )
        flat_codes = pa.array(np.ascontiguousarray(codes).reshape(-1), pa.uint8())
        table = pa.table(
            [
                pa.array(row_ids, pa.uint64()),
                pa.array(partition, pa.uint32()),
                pa.FixedSizeListArray.from_arrays(flat_codes, pq.num_subvectors),
            ],
            schema=schema,
        )
        options = self.dataset.storage_options
        with LanceFileWriter(dest_uri, schema, storage_options=options, page_statistics=False) as writer:
            writer.write_batch(table)

    def shuffle_transformed_vectors(
        self,
        unsorted_filenames: list[str],
        dir_path: str,
        ivf: IvfModel,
        shuffle_output_root_filename: str | None = "sorted",
    ) -> list[str]:
        """Regroup :meth:`transform_vectors` files (names under ``dir_path``) by partition: one
        file ``<root>_0.lance`` in ``dir_path`` whose column ``partitions`` holds one row per
        partition, the list of its rows (by row id). Returns the new file names."""
        if not isinstance(unsorted_filenames, list):
            raise InvalidArgumentError("filenames must be a list of strings")
        table = _read_files(dir_path, unsorted_filenames, self.dataset.storage_options)
        table = table.sort_by([(PARTITION_COLUMN, "ascending"), (ROW_ID_COLUMN, "ascending")])
        partition = np.asarray(table.column(PARTITION_COLUMN), np.int64)
        if partition.size and partition.max() >= ivf.num_partitions:
            raise InvalidArgumentError(
                f"a row of partition {int(partition.max())} in files of a model of "
                f"{ivf.num_partitions} partitions"
            )
        counts = np.bincount(partition, minlength=ivf.num_partitions)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        rows = pa.StructArray.from_arrays(
            [table.column(name).combine_chunks() for name in table.column_names], fields=list(table.schema)
        )
        partitions = pa.ListArray.from_arrays(pa.array(offsets), rows)
        name = f"{shuffle_output_root_filename or 'sorted'}_0.lance"
        schema = pa.schema([pa.field("partitions", partitions.type)])
        path = os.path.join(dir_path, name)
        with LanceFileWriter(
            path, schema, storage_options=self.dataset.storage_options, page_statistics=False
        ) as w:
            w.write_batch(pa.table([partitions], schema=schema))
        return [name]

    def load_shuffled_vectors(
        self,
        filenames: list[str],
        dir_path: str,
        ivf: IvfModel,
        pq: PqModel,
        index_name: str | None = None,
    ) -> None:
        """Write the IVF_PQ index of the rows in the shuffled files (names under ``dir_path``)
        with the models ``ivf`` and ``pq`` and commit it (name ``<column>_idx`` by default) over
        every fragment of the dataset's version, replacing an index of that name."""
        if not isinstance(filenames, list):
            raise InvalidArgumentError("filenames must be a list of strings")
        if pq.num_bits != 8:
            raise InvalidArgumentError(
                f"column {self.column[0]!r}: lance_ops writes IVF_PQ with num_bits=8 only"
            )
        shuffled = _read_files(dir_path, filenames, self.dataset.storage_options).column("partitions")
        rows = (
            pa.concat_arrays([chunk.flatten() for chunk in shuffled.chunks]) if shuffled.num_chunks else None
        )
        handle = self.dataset.handle
        plan = plan_vector_index(
            handle.files,
            self.column[0],
            "IVF_PQ",
            name=index_name,
            metric=_distance_type(ivf.distance_type),
            replace=True,
            num_partitions=ivf.num_partitions,
            num_sub_vectors=pq.num_subvectors,
        )
        model = TrainedIvf(plan.params, self.dimension, _matrix(ivf.centroids), 0.0, codebooks=pq.codebooks())
        if rows is None or len(rows) == 0:
            row_ids = np.empty(0, np.uint64)
            partition = np.empty(0, np.uint32)
            codes = np.empty((0, pq.num_subvectors), np.uint8)
        else:
            row_ids = np.asarray(rows.field(ROW_ID_COLUMN), np.uint64)
            partition = np.asarray(rows.field(PARTITION_COLUMN), np.uint32)
            flat = np.asarray(rows.field(PQ_COLUMN).flatten(), np.uint8)
            codes = flat.reshape(len(rows), pq.num_subvectors)
        result = write_ivf(IndexWriter(handle.files.storage), model, row_ids, partition, codes)
        fragments = list(handle.files.manifest.fragments)
        handle.adopt(*commit_vector_index(handle.files, plan, fragments, result, handle.commit_options()))

    # ------------------------------------------------------------------ helpers

    def _params(
        self,
        index_type: str,
        metric: str,
        num_partitions: int,
        sample_rate: int,
        max_iters: int,
        num_sub_vectors: int | None = None,
    ) -> VectorIndexParams:
        return VectorIndexParams(
            self.column[0], index_type, metric, num_partitions, num_sub_vectors, 8, sample_rate, max_iters
        )

    def _count_rows(self, fragment_ids: Sequence[int] | None) -> int:
        if fragment_ids is None:
            return int(self.dataset.count_rows())
        wanted = set(self._fragment_ids(fragment_ids))
        return sum(int(f.count_rows()) for f in self.dataset.get_fragments() if f.fragment_id in wanted)

    def _fragment_ids(self, fragment_ids: Sequence[int]) -> list[int]:
        known = {f.id for f in self.dataset.handle.files.manifest.fragments}
        missing = [i for i in fragment_ids if i not in known]
        if missing:
            raise InvalidArgumentError(f"Fragment id does not exist: {missing[0]}")
        return list(fragment_ids)

    def _rows(self, fragment_ids: Sequence[int] | None) -> tuple[np.ndarray, np.ndarray]:
        """The column's ``[n, dim]`` float32 vectors of ``fragment_ids`` (all by default) and their
        row ids, null vectors and vectors with a NaN or infinity left out."""
        files = self.dataset.handle.files
        fragments = list(files.manifest.fragments)
        if fragment_ids is not None:
            wanted = set(self._fragment_ids(fragment_ids))
            fragments = [f for f in fragments if f.id in wanted]
        values, ids = column_rows(files.storage, files.manifest, fragments, self.column[0], ROW_ID_COLUMN)
        matrix = as_matrix(values, self.column[0])
        keep = np.isfinite(matrix).all(axis=1)
        return matrix[keep], ids[keep]

    def _vectors(self, fragment_ids: Sequence[int] | None) -> np.ndarray:
        return self._rows(fragment_ids)[0]

    def _encode(
        self, ivf: IvfModel, pq: PqModel | None, fragment_ids: Sequence[int] | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row ids, partitions and PQ codes (``[n, m]`` uint8, or the vectors without ``pq``)."""
        metric = _distance_type(ivf.distance_type)
        if pq is not None and pq.dimension != self.dimension:
            raise InvalidArgumentError(
                f"column {self.column[0]!r}: a PQ model of dimension {pq.dimension} "
                f"for vectors of {self.dimension}"
            )
        kind = "IVF_FLAT" if pq is None else "IVF_PQ"
        m = None if pq is None else pq.num_subvectors
        params = self._params(kind, metric, ivf.num_partitions, 256, 50, m)
        books = None if pq is None else pq.codebooks()
        model = TrainedIvf(params, self.dimension, _matrix(ivf.centroids), 0.0, codebooks=books)
        vectors, row_ids = self._rows(fragment_ids)
        partition, codes = encode_ivf(model, prepare(params, vectors))
        return row_ids, partition, codes

    def _num_subvectors(self, num_subvectors: int | None) -> int:
        dim = self.dimension
        if num_subvectors is None:
            if dim % 16 and dim % 8:
                raise InvalidArgumentError(
                    f"column {self.column[0]!r}: vector dimension {dim} is not divisible by 16 or 8; "
                    "give num_subvectors"
                )
            return dim // 16 if dim % 16 == 0 else dim // 8
        if isinstance(num_subvectors, bool) or not isinstance(num_subvectors, int) or num_subvectors < 1:
            raise InvalidArgumentError(f"num_subvectors must be a positive int, got {num_subvectors!r}")
        if num_subvectors > dim or dim % num_subvectors:
            raise InvalidArgumentError(
                f"column {self.column[0]!r}: dimension ({dim}) must be divisible by num_subvectors "
                f"({num_subvectors}) without remainder"
            )
        return num_subvectors

    def _array(self, matrix: np.ndarray) -> pa.FixedSizeListArray:
        """Rows of ``matrix`` as a ``fixed_size_list`` of the column's float type (as pylance)."""
        flat = pa.array(np.ascontiguousarray(matrix, np.float32).reshape(-1)).cast(self._value_type)
        return pa.FixedSizeListArray.from_arrays(flat, matrix.shape[1])

    def __repr__(self) -> str:
        return f"IndicesBuilder({self.dataset!r}, {self.column[0]!r})"


class VectorIndexReader:
    """The partitions of a vector index (pylance's ``lance.dataset.VectorIndexReader``)."""

    def __init__(self, dataset: LanceDataset, index_name: str) -> None:
        files = dataset.handle.files
        self.dataset = dataset
        self.index_name = index_name
        self._segments = segments_of(files.manifest, index_name)  # IndexNotFoundError (a KeyError)
        self._kind = index_type_of(self._segments[0], files.storage)
        if self._kind not in VECTOR_TYPES:
            raise InvalidArgumentError(f"Index {index_name} is not vector index")
        self.stats = dataset.stats.index_stats(index_name)

    def num_partitions(self) -> int:
        return int(self.stats["indices"][0]["num_partitions"])

    def read_partition(self, partition_id: int, *, with_vector: bool = False) -> pa.Table:
        """The rows of partition ``partition_id`` in every segment: ``_rowid``, and with
        ``with_vector`` the stored codes (``__pq_code``, ``__sq_code`` or ``flat``)."""
        storage = self.dataset.handle.files.storage
        tables = [
            legacy_partition_table(storage, s, partition_id, with_vector)
            if self._kind == "IVF_PQ" and is_legacy_index(storage, s)
            else read_partition(storage, s, self._kind, partition_id, with_vector)
            for s in self._segments
        ]
        return pa.concat_tables(tables)


def _distance_type(distance_type: str) -> str:
    name = distance_type.lower() if isinstance(distance_type, str) else None
    if name not in _DISTANCE_TYPES:
        raise InvalidArgumentError(f"Distance type {distance_type} not supported (l2, cosine or dot)")
    return _DISTANCE_TYPES[name]


def _check_sample_rate(sample_rate: int) -> None:
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate < 2:
        raise InvalidArgumentError(f"The sample_rate must be an int greater than 1, got {sample_rate}")


def _no_accelerator(accelerator: Any) -> None:
    if accelerator is not None:
        raise UnsupportedFeatureError(
            f"accelerator={accelerator!r}: lance_ops trains on the CPU with numpy (no torch / GPU k-means)"
        )


def _sample(params: VectorIndexParams, vectors: np.ndarray, size: int) -> np.ndarray:
    """``size`` of ``vectors`` (all when fewer) drawn without replacement, as the build samples."""
    return prepare(params, vectors[sample_positions(len(vectors), size, np.random.default_rng())])


def _read_files(dir_path: str, names: Sequence[str], options: Mapping[str, str] | None) -> pa.Table:
    tables = [
        LanceFileReader(os.path.join(dir_path, n), storage_options=options).read_all().to_table()
        for n in names
    ]
    if not tables:
        raise InvalidArgumentError("no files given")
    return pa.concat_tables(tables)


def _precomputed_partitions(dataset: LanceDataset, uri: str, row_ids: np.ndarray) -> np.ndarray:
    """The partitions of ``row_ids`` in an :meth:`IndicesBuilder.assign_ivf_partitions` dataset."""
    from lance_ops.dataset import dataset as open_dataset  # noqa: PLC0415

    table = open_dataset(uri, storage_options=dataset.storage_options).to_table(
        columns=["row_id", "partition"]
    )
    known = np.asarray(table.column("row_id"), np.uint64)
    order = np.argsort(known, kind="stable")
    at = np.searchsorted(known[order], row_ids)
    found = (
        (at < len(known)) & (known[order][np.minimum(at, len(known) - 1)] == row_ids)
        if len(known)
        else at < 0
    )
    if not found.all():
        missing = row_ids[~found][0]
        raise InvalidArgumentError(f"row id {int(missing)} has no partition in {uri}")
    return np.asarray(table.column("partition"), np.uint32)[order][at]
