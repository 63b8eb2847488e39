"""``StorageContext``: one dataset's storage, resolved once and passed down.

A dataset handle opens its context once from the URI and the storage options
(:meth:`StorageContext.open`); the table, fragment and ops code below it reach storage through
that context (``ctx.store``, paths below ``ctx.root``) and never resolve the URI again
(pyiceberg's ``FileIO`` held by ``Table``). Public entry points that take a URI (file readers and
writers, ``write_fragments``, Spark tasks on executors) build the context once where they start.

Other locations reached with the dataset's options (a manifest's extra base paths, external blob
objects) are resolved through the context (:meth:`StorageContext.at`, :meth:`StorageContext.locate`),
so the options stay in one place. A context pickles as its URI and options and is opened again
where it is unpickled; its ``repr`` names the option keys only (values may be secrets).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_ops.io import object_store
from lance_ops.io.base import ObjectStore
from lance_ops.io.index_cache import IndexCache

__all__ = ["Location", "StorageContext", "open_path"]


@dataclass(frozen=True, repr=False)
class StorageContext:
    """The store serving a dataset, the dataset's path within it, and how it was reached."""

    store: ObjectStore
    root: str
    uri: str
    storage_options: Mapping[str, str] | None = field(default=None, compare=False)
    # What index searches through this opening of the dataset read and keep (pylance's session
    # index cache): a fresh one each time a URI is opened, shared by whatever the context is handed to.
    index_cache: IndexCache = field(default_factory=IndexCache, compare=False)

    @classmethod
    def open(
        cls, uri: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None
    ) -> StorageContext:
        """Resolve ``uri`` (see :func:`lance_ops.io.object_store`) once, with ``storage_options``."""
        text = os.fspath(uri)
        options = dict(storage_options) if storage_options else None
        store, root = object_store(text, options)
        return cls(store, root, text, options)

    @classmethod
    def of(cls, location: Location, storage_options: Mapping[str, str] | None = None) -> StorageContext:
        """``location`` itself when it is a context, else the context opened from that URI."""
        if isinstance(location, StorageContext):
            return location
        return cls.open(location, storage_options)

    def path(self, *parts: str) -> str:
        """The store path of ``parts`` below the dataset root."""
        return self.store.join(self.root, *parts)

    def at(self, uri: str) -> StorageContext:
        """Another location (an extra base path) reached with this context's options."""
        return StorageContext.open(uri, self.storage_options)

    def locate(self, uri: str) -> tuple[ObjectStore, str]:
        """Store and path of an object named by URI (e.g. an external blob), with these options."""
        if uri == self.uri:
            return self.store, self.root
        return object_store(uri, self.storage_options)

    def __reduce__(self) -> tuple[Any, ...]:
        return (StorageContext.open, (self.uri, self.storage_options))

    def __repr__(self) -> str:
        keys = sorted(self.storage_options or ())
        return f"StorageContext(uri={self.uri!r}, store={self.store!r}, storage_option_keys={keys!r})"


Location = StorageContext | str | os.PathLike[str]


def open_path(
    path: str | os.PathLike[str],
    storage_options: Mapping[str, str] | None = None,
    store: ObjectStore | None = None,
) -> tuple[ObjectStore, str]:
    """Where a file reader or writer works: ``path`` within ``store`` when one is given (a dataset's
    context passed down), else ``path`` resolved as a URI with ``storage_options`` (a file-level
    entry point)."""
    if store is not None:
        return store, os.fspath(path)
    return object_store(path, dict(storage_options) if storage_options else None)
