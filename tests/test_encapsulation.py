"""No module reaches into ``LanceDataset``'s private members from outside ``lance_ops/dataset.py``.

``LanceFragment``, ``LanceScanner``, ``ds.stats`` and ``ds.optimize`` use ``ds.handle``
(:class:`lance_ops.dataset_handle.DatasetHandle`) instead. The private names are read from the
class itself (its ``_methods`` and the ``self._x`` / ``obj._x`` it assigns), then every attribute
access of the library, the Spark jobs and the Dagster assets is checked with ``ast``: ``x._name``
with one of those names is an offence unless ``x`` is ``self`` or ``cls`` (a class's own members).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATASET = REPO / "lance_ops" / "dataset.py"


def private_members(source: str, class_name: str = "LanceDataset") -> set[str]:
    """Single-underscore names ``class_name`` defines (methods, properties) or assigns."""
    (cls,) = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == class_name]
    out = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = node.name
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            name = node.attr
        else:
            continue
        if name.startswith("_") and not name.startswith("__"):
            out.add(name)
    return out


def offences(source: str, private: set[str], filename: str = "<source>") -> list[str]:
    """``line: expression`` of every ``x._name`` in ``source`` with ``_name`` in ``private``."""
    found = [
        node
        for node in ast.walk(ast.parse(source, filename))
        if isinstance(node, ast.Attribute)
        and node.attr in private
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]
    found.sort(key=lambda node: (node.lineno, node.col_offset))
    return [f"line {node.lineno}: {ast.unparse(node)}" for node in found]


# ``ds._ds`` stands for pylance's native dataset, which pylance's own tests read (the index cache's
# statistics); no module of the library uses it, and other classes keep a ``_ds`` of their own.
PYLANCE_SHIMS = {"_ds"}
PRIVATE = private_members(DATASET.read_text()) - PYLANCE_SHIMS
SOURCES = sorted(
    p
    for top in ("lance_ops", "jobs", "assets")
    for p in (REPO / top).rglob("*.py")
    if "_proto" not in p.parts and p != DATASET
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_access_to_lance_dataset_privates(path: Path) -> None:
    found = offences(path.read_text(), PRIVATE, str(path))
    assert not found, f"{path.relative_to(REPO)} uses LanceDataset's private members: {found}"


def test_the_checker_sees_private_access() -> None:
    assert {"_files", "_commit_options", "_adopt", "_manifest", "_from_manifest"} <= PRIVATE
    assert "handle" not in PRIVATE and "__init__" not in PRIVATE
    reaching = (
        "def f(ds):\n    ds._adopt(m, t)\n    return ds._files.fragments(), self._ds._commit_options()\n"
    )
    assert offences(reaching, PRIVATE) == [
        "line 2: ds._adopt",
        "line 3: ds._files",
        "line 3: self._ds._commit_options",
    ]
    own = "class A:\n    def g(self):\n        return self._files, cls._from_manifest, ds.handle.files\n"
    assert offences(own, PRIVATE) == []
