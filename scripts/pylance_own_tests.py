#!/usr/bin/env python
"""Run pylance's own Python test files against lance_ops (``import lance`` aliased to lance_ops).

Usage: scripts/pylance_own_tests.py TESTS_DIR [FILE ...] [-- PYTEST_ARGS]

TESTS_DIR is a checkout of pylance's ``python/python/tests`` (for example
``git archive <tag> python/python/tests`` from github.com/lancedb/lance); nothing of it is kept in
this repository. Prints passed / failed / skipped / errors per file (from pytest's JUnit XML).
Default files: the ones docs/compatibility.md tracks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

DEFAULT_FILES = (
    "test_dataset.py",
    "test_file.py",
    "test_filter.py",
    "test_fragment.py",
    "test_optimize.py",
    "test_schema_evolution.py",
)


def main(argv: list[str]) -> int:
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    else:
        extra = []
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    tests_dir = Path(argv[0]).resolve()
    files = argv[1:] or list(DEFAULT_FILES)
    here = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(here), str(here.parent), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory() as tmp:
        ini = Path(tmp, "pytest.ini")
        ini.write_text("[pytest]\n")  # not this repository's settings (filterwarnings = error)
        xml = Path(tmp, "result.xml")
        cmd = [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(tests_dir)]
        cmd += ["-p", "pylance_own_alias", "-p", "no:cacheprovider", "-q"]
        cmd += [f"--junitxml={xml}", *extra, *files]
        subprocess.run(cmd, cwd=tests_dir, env=env, check=False)
        if not xml.exists():
            return 1
        counts: dict[str, Counter[str]] = {}
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = case.get("classname", "").split(".")[0] + ".py"
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = {"failure": "failed", "error": "errors", "skipped": "skipped"}[child.tag]
            counts.setdefault(name, Counter())[outcome] += 1
    print(f"{'file':32} passed failed errors skipped")
    for name, c in sorted(counts.items()):
        print(f"{name:32} {c['passed']:6} {c['failed']:6} {c['errors']:6} {c['skipped']:7}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
