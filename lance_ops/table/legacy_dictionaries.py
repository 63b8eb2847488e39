"""The dictionary values of a legacy (0.1) dataset's dictionary columns, found for a new manifest.

pylance keeps them in the manifest file (:mod:`lance_ops.table.manifest`) and reads them from
there; each data file also stores the dictionary its keys were written against. A version that
carries a dictionary field without its values (the first write of a dataset, whose writer
collected the dictionary while writing the files; a schema rebuilt from messages) takes them from
its data files: the longest dictionary found, since the files of one write share one dictionary
that only grows (every other file's is a prefix of it; files written against unrelated
dictionaries, e.g. a dictionary column added fragment by fragment, are refused).
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from lance_ops.errors import UnsupportedFeatureError
from lance_ops.file.legacy_v0_1 import LegacyFileReader
from lance_ops.file.reader import open_file
from lance_ops.io import ObjectStore
from lance_ops.table.manifest import Manifest
from lance_ops.table.naming import DATA_DIR

__all__ = ["with_legacy_dictionaries"]


def _missing(manifest: Manifest) -> set[int]:
    if manifest.data_storage_version != "0.1":
        return set()
    return {
        f.id
        for f in manifest.schema.fields
        if f.logical_type.startswith("dict:") and f.dictionary_values is None
    }


def with_legacy_dictionaries(store: ObjectStore, root: str, manifest: Manifest) -> Manifest:
    """``manifest`` with every dictionary field of a legacy dataset carrying its values.

    Raises :class:`UnsupportedFeatureError` when no data file holds values for a field's dictionary
    (a legacy dataset created without rows, or with only nulls in the column): pylance refuses to
    write that version too.
    """
    missing = _missing(manifest)
    if not missing:
        return manifest
    found: dict[int, pa.Array] = {}
    for fragment in manifest.fragments:
        for data_file in fragment.files:
            wanted = missing.intersection(data_file.fields)
            if not wanted or data_file.base_id is not None:
                continue
            reader = open_file(store.join(root, DATA_DIR, data_file.path), store=store)
            if not isinstance(reader, LegacyFileReader):
                continue
            for field_id in wanted:
                values = reader.dictionary_values(field_id)
                if values is None or not len(values):
                    continue
                known = found.setdefault(field_id, values)
                shorter, longer = sorted((known, values), key=len)
                if not longer.slice(0, len(shorter)).equals(shorter):
                    name = next(f.name for f in manifest.schema.fields if f.id == field_id)
                    raise UnsupportedFeatureError(
                        f"legacy (0.1) dictionary column {name!r}: its data files were written against "
                        "different dictionaries, which one manifest cannot hold"
                    )
                found[field_id] = longer
    unfound = sorted(f.name for f in manifest.schema.fields if f.id in missing and f.id not in found)
    if unfound:
        raise UnsupportedFeatureError(
            f"legacy (0.1) dictionary column(s) {unfound} have no dictionary values: a legacy dataset's "
            "dictionary is the one of its first write, which had no rows or only nulls there "
            "(pylance refuses this write too)"
        )
    fields = tuple(
        replace(f, dictionary_values=found[f.id]) if f.id in found else f for f in manifest.schema.fields
    )
    return replace(manifest, schema=replace(manifest.schema, fields=fields))
