"""Encoding options: the ``lance-encoding:*`` field-metadata keys (spec/encodings-2.1.md §8.3).

A field's keys are parsed once into a frozen :class:`EncodingOptions`; ``None`` (or the default)
means the key is not set and :mod:`.compression_strategy` decides. A value pylance 14 would
ignore (it logs a warning and keeps its default) is ignored the same way; a ``compression`` or
``structural-encoding`` it would refuse is a :class:`~lance_ops.errors.SchemaError`::

    {"lance-encoding:compression": "zstd", "lance-encoding:bss": "maybe"}
      -> EncodingOptions(compression="zstd", bss="auto")   # "maybe" logged and ignored

Readers ask only :func:`is_blob_field` (whether a field holds blobs) and never parse the rest.
The writers' own ``compression`` option is checked by :func:`check_writer_compression`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lance_ops.encoding.structural.repdef import FALSE_WORDS
from lance_ops.errors import InvalidArgumentError, SchemaError

DICT_DEFAULT_DIVISOR = 2
DICT_DEFAULT_SIZE_RATIO = 0.8
DEFAULT_MINICHUNK_SIZE = 4096
AUTO = "auto"  # the writers' compression="auto": try candidates, keep the smallest

KEY_PREFIX = "lance-encoding:"
# ``lance-encoding:dictionary`` (ours; pylance ignores it) also takes the usual boolean words.
CHOICE_ALIASES = {"dictionary": {"true": "always", "on": "always", "false": "never", "off": "never"}}
LOG = logging.getLogger(__name__)
GENERAL_SCHEMES = ("zstd", "lz4")
COMPRESSION_SCHEMES = ("none", "zstd", "lz4", "fsst")
# Values of the writers' ``compression`` option: a default for leaves that set no scheme themselves.
WRITER_COMPRESSION_CHOICES = (AUTO, *COMPRESSION_SCHEMES)


@dataclass(frozen=True)
class EncodingOptions:
    """The ``lance-encoding:*`` keys of a field's metadata (§8.3); ``None`` = not set."""

    compression: str | None = None
    compression_level: int | None = None
    rle_threshold: float | None = None
    bss: str = "auto"
    dict_divisor: int = DICT_DEFAULT_DIVISOR
    dict_size_ratio: float = DICT_DEFAULT_SIZE_RATIO
    dict_values_compression: str = "lz4"
    dict_values_compression_level: int | None = None
    minichunk_size: int = DEFAULT_MINICHUNK_SIZE
    structural_encoding: str | None = None
    packed: bool = False
    blob: bool = False
    dictionary: str = "auto"

    @classmethod
    def from_metadata(
        cls, metadata: Mapping[Any, Any] | None, data_type: pa.DataType | None = None
    ) -> EncodingOptions:
        """The options of a field's metadata; ``data_type`` (the field's type, when known) tells
        a ``lance.blob.v2`` description (a struct marked packed and blob) from a blob leaf."""
        keys: dict[str, str] = {}
        for k, v in (metadata or {}).items():
            key = k.decode() if isinstance(k, bytes) else str(k)
            if key.startswith(KEY_PREFIX):
                keys[key[len(KEY_PREFIX) :]] = v.decode() if isinstance(v, bytes) else str(v)

        def ignored(name: str, default: Any) -> Any:
            # pylance 14 logs a warning and keeps its default for a value it cannot parse.
            LOG.warning("ignoring %s%s=%r (keeping the default %r)", KEY_PREFIX, name, keys[name], default)
            return default

        def num(name: str, kind: type, default: Any) -> Any:
            if name not in keys:
                return default
            try:
                return kind(keys[name])
            except ValueError:
                return ignored(name, default)

        def choice(
            name: str, allowed: Sequence[str], default: str | None, *, strict: bool = False
        ) -> str | None:
            if name not in keys:
                return default
            value = keys[name].strip().lower()
            value = CHOICE_ALIASES.get(name, {}).get(value, value)
            if value not in allowed:
                if not strict:
                    return ignored(name, default)
                raise SchemaError(f"{KEY_PREFIX}{name} must be one of {list(allowed)}, got {keys[name]!r}")
            return value

        divisor = num("dict-divisor", int, DICT_DEFAULT_DIVISOR)
        ratio = num("dict-size-ratio", float, DICT_DEFAULT_SIZE_RATIO)
        if divisor < 1 or not 0 < ratio <= 1:
            raise SchemaError("lance-encoding:dict-divisor must be ≥ 1 and dict-size-ratio in (0, 1]")
        return cls(
            compression=choice("compression", COMPRESSION_SCHEMES, None, strict=True),
            compression_level=num("compression-level", int, None),
            rle_threshold=num("rle-threshold", float, None),
            bss=choice("bss", ("off", "on", "auto"), "auto") or "auto",
            dict_divisor=divisor,
            dict_size_ratio=ratio,
            dict_values_compression=choice("dict-values-compression", ("none", "zstd", "lz4"), "lz4")
            or "lz4",
            dict_values_compression_level=num("dict-values-compression-level", int, None),
            minichunk_size=num("minichunk-size", int, DEFAULT_MINICHUNK_SIZE),
            structural_encoding=choice("structural-encoding", ("miniblock", "fullzip"), None, strict=True),
            packed=_flag(keys, "packed"),
            blob=is_blob_field(metadata, data_type),
            dictionary=choice("dictionary", ("auto", "always", "never"), "auto") or "auto",
        )

    @property
    def general_scheme(self) -> str | None:
        return self.compression if self.compression in GENERAL_SCHEMES else None


def _flag(keys: Mapping[str, str], name: str) -> bool:
    return name in keys and keys[name].strip().lower() not in FALSE_WORDS


def flag_set(metadata: Mapping[Any, Any] | None, name: str) -> bool:
    """Whether the boolean key ``lance-encoding:<name>`` is set, checking no other key."""
    keys = {
        (k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
        for k, v in (metadata or {}).items()
    }
    return _flag(keys, KEY_PREFIX + name)


def is_blob_field(metadata: Mapping[Any, Any] | None, data_type: pa.DataType | None = None) -> bool:
    """``lance-encoding:blob`` set, checking no other key (readers ask only this, so a file whose
    other encoding keys hold values pylance ignores still reads). A struct (or, type unknown,
    any field) also marked ``packed`` is a ``lance.blob.v2`` description: a plain packed struct;
    on a ``large_binary`` field pylance ignores ``packed`` and stores blobs."""
    if not flag_set(metadata, "blob"):
        return False
    described = data_type is None or pa.types.is_struct(data_type)
    return not (described and flag_set(metadata, "packed"))


def check_writer_compression(compression: str | None) -> str | None:
    """A writer's ``compression`` option, normalised; anything unknown is an ``InvalidArgumentError``."""
    if compression is None:
        return None
    value = compression.strip().lower() if isinstance(compression, str) else compression
    if value not in WRITER_COMPRESSION_CHOICES:
        raise InvalidArgumentError(
            f"compression must be one of {list(WRITER_COMPRESSION_CHOICES)} or None, got {compression!r}"
        )
    return str(value)
