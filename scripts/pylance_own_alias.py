"""pytest plugin: ``import lance`` (and ``lance.<sub>``) resolves to lance_ops.

Loaded by scripts/pylance_own_tests.py to run pylance's own test files against lance_ops. It
belongs to that harness only; nothing in lance_ops imports it. ``lance.<sub>`` maps to
``lance_ops.<sub>`` when lance_ops has that module (names it lacks are placeholders), else to a
placeholder module whose names raise ``NotImplementedError`` when used, so one missing helper
fails the tests that use it instead of the whole file's collection.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

import lance_ops


def _missing(module: str, name: str) -> type:
    def _refuse(*_args: Any, **_kwargs: Any) -> None:
        raise NotImplementedError(f"not available here: {module}.{name}")

    # An exception class, so that ``pytest.raises(Missing)`` and ``except Missing`` still parse,
    # which refuses to be created or called.
    return type(name, (Exception,), {"__init__": _refuse, "__module__": module})


class _Placeholder(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _missing(self.__name__, name)
        setattr(self, name, value)
        return value


# pylance names lance_ops keeps in another module because of its layers: ``lance.fragment``'s
# LanceFragment is lance_ops.LanceFragment (the fragment package sits below the dataset layer).
# ``lance.lance`` (pylance's native module) re-exports lance.optimize's Compaction.
# ``lance.dataset.VectorIndexReader`` is lance_ops.indices' and ``lance.util.validate_vector_index``
# lance_ops.vector's (lance_ops has no ``util`` module).
_ALSO_IN = {
    "lance.fragment": ("lance_ops.dataset_fragment",),
    "lance.lance": ("lance_ops.optimize",),
    "lance.dataset": ("lance_ops.indices",),
    "lance.util": ("lance_ops.vector",),
}


class _Alias(types.ModuleType):
    """``lance`` / ``lance.<sub>``: the lance_ops module's names, and a placeholder for each name it
    lacks (``from lance.file import stable_version`` fails only the tests using it)."""

    def __init__(self, name: str, real: types.ModuleType) -> None:
        super().__init__(name, real.__doc__)
        object.__setattr__(self, "_real", real)
        self.__path__: list[str] = []

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(self._real, name)
        except AttributeError:
            if name.startswith("__"):
                raise
        for other in _ALSO_IN.get(self.__name__, ()):
            module = importlib.import_module(other)
            if hasattr(module, name):
                return getattr(module, name)
        value = _missing(self.__name__, name)
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        # The import system records ``lance.dataset`` the submodule on its parent; the package's
        # own name (the ``dataset`` function) wins, as in pylance.
        own = getattr(self._real, name, None)
        if isinstance(value, types.ModuleType) and own is not None and not isinstance(own, types.ModuleType):
            return
        object.__setattr__(self, name, value)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        try:
            return _Alias(spec.name, importlib.import_module(self.target))
        except ModuleNotFoundError as err:
            if err.name is None or not self.target.startswith(err.name):
                raise
            if spec.name in _ALSO_IN:
                return _Alias(spec.name, importlib.import_module(_ALSO_IN[spec.name][0]))
            module = _Placeholder(spec.name)
            module.__path__ = []  # a package, so that deeper names resolve to placeholders too
            return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("lance."):
            return None
        loader = _AliasLoader("lance_ops." + fullname.removeprefix("lance."))
        return importlib.machinery.ModuleSpec(fullname, loader, is_package=True)


sys.meta_path.insert(0, _AliasFinder())


class _Inert(types.ModuleType):
    """A missing optional third-party module used at a test file's top level (``pl.DataFrame(...)``
    in a parametrize list): every attribute and call gives the module back, so the file collects
    and the tests that use it fail."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *_args: Any, **_kwargs: Any) -> Any:
        return self


for _optional in ("polars",):
    try:
        importlib.import_module(_optional)
    except ImportError:
        sys.modules[_optional] = _Inert(_optional)
sys.modules["lance"] = _Alias("lance", lance_ops)
