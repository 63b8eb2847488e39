"""The ``lance.index.pb`` messages kept in vector index files: ``IVF`` and ``Tensor``.

Declared here in code (a private descriptor pool) rather than generated, since only these two of
Lance's index.proto messages are needed::

    message Tensor { DataType data_type = 1; repeated uint32 shape = 2; bytes data = 3; }
        // DataType: BFLOAT16 = 0, FLOAT16 = 1, FLOAT32 = 2, FLOAT64 = 3, UINT8 = 4, ...
    message IVF {
        repeated float centroids = 1;        // deprecated, empty in pylance 14
        repeated uint64 offsets = 2;         // first row of each partition
        repeated uint32 lengths = 3;         // rows of each partition
        Tensor centroids_tensor = 4;         // [num_partitions, dim]
        optional double loss = 5;
    }

e.g. the ``auxiliary.idx`` IVF of 4 partitions of 802, 735, 665 and 798 rows starts
``12 07 00 a2 06 81 0c 9a 11`` (offsets 0, 802, 1537, 2202) ``1a 08 a2 06 df 05 99 05 9e 06``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["IVF", "Tensor", "tensor_array", "tensor_of"]

_F = descriptor_pb2.FieldDescriptorProto


def _build() -> tuple[Any, Any]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="lance_ops_index_ivf.proto", package="lance.index.pb", syntax="proto3"
    )
    tensor = proto.message_type.add(name="Tensor")
    data_type = tensor.enum_type.add(name="DataType")
    for number, name in enumerate(
        ("BFLOAT16", "FLOAT16", "FLOAT32", "FLOAT64", "UINT8", "UINT16", "UINT32", "UINT64")
    ):
        data_type.value.add(name=name, number=number)
    tensor.field.add(
        name="data_type",
        number=1,
        label=_F.LABEL_OPTIONAL,
        type=_F.TYPE_ENUM,
        type_name=".lance.index.pb.Tensor.DataType",
    )
    tensor.field.add(name="shape", number=2, label=_F.LABEL_REPEATED, type=_F.TYPE_UINT32)
    tensor.field.add(name="data", number=3, label=_F.LABEL_OPTIONAL, type=_F.TYPE_BYTES)
    ivf = proto.message_type.add(name="IVF")
    ivf.field.add(name="centroids", number=1, label=_F.LABEL_REPEATED, type=_F.TYPE_FLOAT)
    ivf.field.add(name="offsets", number=2, label=_F.LABEL_REPEATED, type=_F.TYPE_UINT64)
    ivf.field.add(name="lengths", number=3, label=_F.LABEL_REPEATED, type=_F.TYPE_UINT32)
    ivf.field.add(
        name="centroids_tensor",
        number=4,
        label=_F.LABEL_OPTIONAL,
        type=_F.TYPE_MESSAGE,
        type_name=".lance.index.pb.Tensor",
    )
    ivf.oneof_decl.add(name="_loss")
    ivf.field.add(
        name="loss",
        number=5,
        label=_F.LABEL_OPTIONAL,
        type=_F.TYPE_DOUBLE,
        oneof_index=0,
        proto3_optional=True,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("lance.index.pb.IVF")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("lance.index.pb.Tensor")),
    )


IVF, Tensor = _build()

_DTYPES = {1: np.float16, 2: np.float32, 3: np.float64, 4: np.uint8, 5: np.uint16, 6: np.uint32, 7: np.uint64}


def tensor_array(tensor: Any) -> np.ndarray:
    """A Tensor message as a numpy array of its shape (bfloat16 is not supported: ValueError)."""
    dtype = _DTYPES.get(tensor.data_type)
    if dtype is None:
        raise ValueError(f"tensor data type {tensor.data_type} is not supported")
    return np.frombuffer(tensor.data, dtype=dtype).reshape(tuple(tensor.shape))


def tensor_of(array: np.ndarray) -> Any:
    """A Tensor message holding ``array`` (little-endian, C order)."""
    codes = {np.dtype(v): k for k, v in _DTYPES.items()}
    data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return Tensor(data_type=codes[np.dtype(array.dtype)], shape=list(array.shape), data=data.tobytes())
