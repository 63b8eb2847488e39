"""Safety checks on the paths a manifest or transaction names, and on files they reference.

A manifest is untrusted input: a damaged or hostile one must not make a reader (or, worse, cleanup)
touch files outside the dataset. So, before any I/O:

* *relative* paths (data files below ``data/`` or a base, external row-id sequences, the transaction
  file below ``_transactions/``) must be non-empty, relative (no leading ``/``, no ``scheme:``, no
  Windows drive), free of ``..`` and ``.`` segments, backslashes and NUL bytes;
* *base* paths (``Manifest.base_paths``) must be absolute (``/...`` or ``scheme://...``) without ``..``
  segments or NUL bytes, and use the dataset's own scheme (checked where the dataset URI is known,
  :func:`check_base_scheme`): a local dataset cannot point into ``s3://`` and vice versa.

Failures raise :class:`~lance_ops.errors.UnsafePathError` (a ``CorruptFileError``). Separately,
:func:`referenced_file` turns the builtin ``FileNotFoundError`` for a file the manifest lists into
:class:`~lance_ops.errors.MissingFileError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from lance_ops.errors import LanceOpsError, MissingFileError, UnsafePathError

__all__ = [
    "check_base_path",
    "check_base_scheme",
    "check_relative_path",
    "check_relative_paths",
    "relative_paths_safe",
    "referenced_file",
    "scheme_of",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
# Substrings without which none of the paths joined by newlines can be refused by
# check_relative_path (an empty, absolute, scheme-prefixed or "."/".." segment path, NUL, backslash).
_SUSPICIOUS = ("\x00", "\\", ":", "\n\n", "\n/", "\n.", "/.")
_PLACEHOLDER = "<manifest>"


def scheme_of(uri: str) -> str:
    """``s3`` for ``s3://b/k``; ``file`` for local paths (with or without ``file://``)."""
    if "://" not in uri:
        return "file"
    match = _SCHEME.match(uri)
    return match.group(1).lower() if match else "file"


def _unsafe(path: str, what: str, reason: str) -> UnsafePathError:
    return UnsafePathError(_PLACEHOLDER, f"unsafe {what} path {path!r}: {reason}")


def _check_segments(path: str, what: str, forbidden: tuple[str, ...]) -> None:
    if "\x00" in path or "\\" in path:
        raise _unsafe(path, what, "NUL bytes and backslashes are not allowed")
    body = path.split("://", 1)[1] if "://" in path else path
    if any(segment in forbidden for segment in body.split("/")):
        raise _unsafe(path, what, f"segments {' and '.join(map(repr, forbidden))} are not allowed")


def check_relative_path(path: str, what: str) -> str:
    """``path`` unchanged if it is a safe path relative to its directory (see module docstring)."""
    if not path:
        raise _unsafe(path, what, "empty")
    if path.startswith("/") or _SCHEME.match(path):
        raise _unsafe(path, what, "must be relative to the dataset")
    _check_segments(path, what, ("..", "."))
    return path


def check_relative_paths(paths: list[str], what: str) -> None:
    """:func:`check_relative_path` on every path (a few substring scans when none looks suspicious)."""
    if not paths:
        return
    joined = "\n".join(paths)
    if (
        joined
        and joined.count("\n") == len(paths) - 1
        and not joined.startswith(("/", ".", "\n"))
        and not joined.endswith("\n")
        and not any(s in joined for s in _SUSPICIOUS)
    ):
        return
    for path in paths:
        check_relative_path(path, what)


def relative_paths_safe(paths: list[str]) -> bool:
    """Whether :func:`check_relative_paths` accepts every path (without raising)."""
    try:
        check_relative_paths(paths, "relative")
    except UnsafePathError:
        return False
    return True


def check_base_path(path: str) -> str:
    """``path`` unchanged if it is an absolute location without ``..`` segments."""
    if not (path.startswith("/") or "://" in path):
        raise _unsafe(path, "base", "must be an absolute path or URL")
    _check_segments(path, "base", ("..",))
    return path


def check_base_scheme(path: str, dataset_uri: str, manifest: str) -> None:
    """Refuse a base path on another storage scheme than the dataset's."""
    if scheme_of(path) != scheme_of(dataset_uri):
        raise UnsafePathError(
            manifest, f"base path {path!r} uses another scheme than the dataset ({scheme_of(dataset_uri)})"
        )


@contextmanager
def referenced_file(path: str, what: str) -> Iterator[None]:
    """Raise :class:`MissingFileError` if reading ``path``, listed by the manifest, finds it missing."""
    try:
        yield
    except FileNotFoundError as exc:
        if isinstance(exc, LanceOpsError):
            raise
        raise MissingFileError(f"{what} {path} listed in the manifest does not exist") from exc
