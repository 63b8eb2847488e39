from . import file_pb2 as _file_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Metadata(_message.Message):
    __slots__ = ("manifest_position", "batch_offsets", "page_table_position", "statistics")
    class StatisticsMetadata(_message.Message):
        __slots__ = ("schema", "fields", "page_table_position")
        SCHEMA_FIELD_NUMBER: _ClassVar[int]
        FIELDS_FIELD_NUMBER: _ClassVar[int]
        PAGE_TABLE_POSITION_FIELD_NUMBER: _ClassVar[int]
        schema: _containers.RepeatedCompositeFieldContainer[_file_pb2.Field]
        fields: _containers.RepeatedScalarFieldContainer[int]
        page_table_position: int
        def __init__(self, schema: _Optional[_Iterable[_Union[_file_pb2.Field, _Mapping]]] = ..., fields: _Optional[_Iterable[int]] = ..., page_table_position: _Optional[int] = ...) -> None: ...
    MANIFEST_POSITION_FIELD_NUMBER: _ClassVar[int]
    BATCH_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    PAGE_TABLE_POSITION_FIELD_NUMBER: _ClassVar[int]
    STATISTICS_FIELD_NUMBER: _ClassVar[int]
    manifest_position: int
    batch_offsets: _containers.RepeatedScalarFieldContainer[int]
    page_table_position: int
    statistics: Metadata.StatisticsMetadata
    def __init__(self, manifest_position: _Optional[int] = ..., batch_offsets: _Optional[_Iterable[int]] = ..., page_table_position: _Optional[int] = ..., statistics: _Optional[_Union[Metadata.StatisticsMetadata, _Mapping]] = ...) -> None: ...
