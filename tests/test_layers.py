"""The import graph flows one way: encoding <- file <- table <- fragment <- ops <- dataset <- jobs/assets/cli.

Every ``import`` statement of the library, the Spark jobs and the Dagster assets is parsed (with
``ast``, so imports inside functions count too) and its target's layer compared with the importer's.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Layer of each package / module (longest prefix wins); a module may import its own layer and below.
LAYERS = {
    "lance_ops._proto": 0,
    "lance_ops.errors": 0,
    # The process's allocator settings (imported first by ``lance_ops``; returning freed memory).
    "lance_ops._malloc": 0,
    "lance_ops.io": 1,
    "lance_ops.encoding": 1,
    "lance_ops.file": 2,
    "lance_ops.table": 3,
    "lance_ops.query": 3,
    "lance_ops.progress": 3,
    "lance_ops.fragment": 4,
    "lance_ops.index": 4.5,
    "lance_ops.ops": 5,
    "lance_ops.dataset": 6,
    "lance_ops": 6,
    "lance_ops.cli": 7,
    "jobs": 8,
    "assets": 9,
    # The Airflow provider runs the Spark jobs (engine="spark"), like the Dagster assets.
    "lance_ops.airflow": 9,
}


# Same-layer pairs that must not import each other either; pylance is a test-only dependency.
FORBIDDEN = {
    "lance_ops.encoding": ("lance_ops.io",),
    "lance_ops": ("lance",),
    # Protobuf messages stay inside the domain types' from_pb / to_pb (table/, file/): nothing
    # from the fragment layer up builds or reads them.
    "lance_ops.fragment": ("lance_ops._proto",),
    "lance_ops.ops": ("lance_ops._proto",),
    "lance_ops.dataset": ("lance_ops._proto",),
    "lance_ops.dataset_fragment": ("lance_ops._proto",),
    "lance_ops.dataset_stats": ("lance_ops._proto",),
    "lance_ops.optimize": ("lance_ops._proto",),
    "lance_ops.scanner": ("lance_ops._proto",),
    "lance_ops.schema": ("lance_ops._proto",),
    "jobs": ("lance", "lance_ops._proto"),
    "assets": ("lance", "lance_ops._proto"),
    # Airflow and Dagster are two orchestrators over one library: neither imports the other.
    "lance_ops.airflow": ("lance", "lance_ops._proto", "assets", "dagster"),
    "lance_ops.datasets_config": ("dagster", "airflow"),
    "lance_ops.fragmentation": ("dagster", "airflow"),
}


# The front ends (Spark jobs, Dagster assets, the Airflow provider) reach the library through its
# public layers only: the dataset API (``lance_ops``, ``lance_ops.dataset*``), the ops modules and
# ``lance_ops.ops.engine`` (what a distributed engine needs below the dataset API), plus the
# cross-cutting ``errors`` / ``progress`` and the shared config modules. The layers under ops are
# theirs to rearrange.
FRONT_ENDS = ("jobs", "assets", "lance_ops.airflow")
BELOW_THE_PUBLIC_API = (
    "lance_ops._proto",
    "lance_ops.io",
    "lance_ops.encoding",
    "lance_ops.file",
    "lance_ops.table",
    "lance_ops.query",
    "lance_ops.fragment",
    "lance_ops.index",
)
# The CLI is a front end too (a layer below jobs only so that it may launch them): the others
# reach its shared pieces (the dataset report: ``lance_ops.report`` over
# ``lance_ops.dataset_report``) through the library, never through ``lance_ops.cli``.
OTHER_FRONT_ENDS = ("lance_ops.cli",)


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def forbidden(importer: str, target: str) -> bool:
    return any(
        _within(importer, (source,)) and _within(target, targets) for source, targets in FORBIDDEN.items()
    ) or (_within(importer, FRONT_ENDS) and _within(target, BELOW_THE_PUBLIC_API + OTHER_FRONT_ENDS))


def layer(module: str) -> int | None:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS:
            return LAYERS[prefix]
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in ``path``."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # ``from lance_ops import dataset`` imports the module lance_ops.dataset.
            out += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return out


SOURCES = sorted(
    p
    for top in ("lance_ops", "jobs", "assets")
    for p in (REPO / top).rglob("*.py")
    if "_proto" not in p.parts
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_imports_point_down(path: Path) -> None:
    mine = layer(module_name(path))
    assert mine is not None
    upward = [
        f"line {line}: {target}"
        for line, target in imports(path)
        if ((theirs := layer(target)) is not None and theirs > mine) or forbidden(module_name(path), target)
    ]
    assert not upward, f"{module_name(path)} (layer {mine}) imports from above: {upward}"


# SQL text is read in one place: the parser turns it into the expression tree, and everything
# else (the Arrow filter, pruning bounds, SQL text, nullability) is a visitor over that tree.
SQL_READERS = {"lance_ops.query.parser"}


def _imports_sqlglot(path: Path) -> list[str]:
    return [f"line {line}: {t}" for line, t in imports(path) if t == "sqlglot" or t.startswith("sqlglot.")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_only_the_parser_imports_sqlglot(path: Path) -> None:
    if module_name(path) in SQL_READERS:
        return
    assert not _imports_sqlglot(path), f"{module_name(path)} reads SQL itself: use lance_ops.query.parser"


def test_the_sqlglot_check_sees_the_parser() -> None:
    """The parser does import sqlglot: the check above can fail."""
    assert _imports_sqlglot(REPO / "lance_ops" / "query" / "parser.py")


def test_the_checker_sees_upward_imports(tmp_path: Path) -> None:
    assert layer("lance_ops.ops.delete") == 5 and layer("lance_ops.fragment.reader") == 4
    assert layer("jobs.pipeline") > layer("lance_ops.cli")  # type: ignore[operator]
    cli = [found for path in (REPO / "lance_ops" / "cli").glob("*.py") for found in imports(path)]
    assert not [t for _, t in cli if t.startswith("jobs")]
    fragment_reader = imports(REPO / "lance_ops" / "fragment" / "reader.py")
    assert "lance_ops.fragment.options.ScanOptions" in {t for _, t in fragment_reader}
    assert forbidden("lance_ops.encoding.data", "lance_ops.io.base") and forbidden("jobs.x", "lance.dataset")
    assert forbidden("jobs.delete", "lance_ops._proto.file_pb2") and forbidden(
        "lance_ops.ops.x", "lance_ops._proto"
    )
    assert forbidden("lance_ops.fragment.reader", "lance_ops._proto.file_pb2")
    assert forbidden("lance_ops.dataset", "lance_ops._proto")
    assert forbidden("lance_ops.scanner", "lance_ops._proto")
    assert not forbidden("lance_ops.table.schema", "lance_ops._proto.file_pb2")
    assert not forbidden("lance_ops.file.reader", "lance_ops.io") and not forbidden(
        "lance_ops.x", "lance_ops.y"
    )


def test_front_ends_reach_down_through_the_public_api() -> None:
    """The front-end rule on imports as ``imports`` reports them: internals below ops are refused,
    the public layers are not (``lance_ops.fragmentation`` is not ``lance_ops.fragment``)."""
    refused = [
        ("jobs.datasource", "lance_ops.fragment.reader.VersionFiles"),
        ("jobs.profile_encodings", "lance_ops.encoding.sketch.DistinctSketch"),
        ("assets.maintenance", "lance_ops.table.manifest.SUPPORTED_READER_FLAGS"),
        ("lance_ops.airflow.hook", "lance_ops.table.manifest_store.SqliteManifestStore"),
        ("jobs.delete", "lance_ops.query.predicate.parse_predicate"),
        ("assets.checks", "lance_ops.fragment"),  # from lance_ops import fragment
        ("assets.maintenance_assets", "lance_ops.cli.report.render"),
        ("jobs.pipeline", "lance_ops.cli.inspect"),
        ("lance_ops.airflow.operators", "lance_ops.cli"),  # from lance_ops import cli
    ]
    allowed = [
        ("jobs.datasource", "lance_ops.ops.engine.VersionFiles"),
        ("jobs.compact", "lance_ops.ops.compaction.CompactionOptions"),
        ("assets.checks", "lance_ops.fragmentation.Fragmentation"),
        ("lance_ops.airflow.hook", "lance_ops.dataset.LanceDataset"),
        ("assets.resources", "lance_ops.errors.DatasetNotFoundError"),
        ("lance_ops.ops.engine", "lance_ops.fragment.reader.VersionFiles"),  # ops may reach down
        ("assets.maintenance_assets", "lance_ops.report.render"),
        ("lance_ops.airflow.operators", "lance_ops.dataset_report.collect"),
        ("lance_ops.cli.commands", "lance_ops.cli.inspect"),  # the CLI is not its own front end
    ]
    assert all(forbidden(importer, target) for importer, target in refused)
    assert not any(forbidden(importer, target) for importer, target in allowed)
    # a synthetic job module importing an internal is reported by the same check the suite runs
    module = REPO / "jobs" / "_synthetic_violation.py"
    source = "from lance_ops.table.manifest import Manifest\nfrom lance_ops.ops.engine import Manifest as M\n"
    tree = ast.parse(source)
    found = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]
    assert [t for t in found if forbidden(module_name(module), t)] == ["lance_ops.table.manifest.Manifest"]


# The writing side of the 2.1 / 2.2 codec: reading a file must not load it (lance-encoding keeps
# its decoder apart from the encoder and its compression strategy).
ENCODER_MODULES = ("lance_ops.encoding.compression_strategy", "lance_ops.encoding.field_encoder")


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_reading_never_loads_the_encoder(version: str) -> None:
    """Opening and reading a 2.1 / 2.2 file (and a fragment reader) leaves the encoder unimported."""
    path = REPO / "tests" / "data" / "files" / version / "nested.lance"
    script = (
        "import sys\n"
        "import lance_ops.fragment.reader\n"
        "from lance_ops.file import LanceFileReader\n"
        f"assert LanceFileReader({str(path)!r}).read_all().to_table().num_rows > 0\n"
        f"print(sorted(set({ENCODER_MODULES!r}) & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_the_encoder_check_sees_a_write() -> None:
    """The same check run after a write does see the encoder: it can fail."""
    script = (
        "import sys, pyarrow as pa\n"
        "from lance_ops.file import LanceFileWriter\n"
        "with LanceFileWriter('memory://layers/a.lance') as w:\n"
        "    w.write_batch(pa.table({'a': [1, 2]}))\n"
        f"print(sorted(set({ENCODER_MODULES!r}) & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == repr(sorted(ENCODER_MODULES))
