#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh) and run the whole test suite. Extra arguments go to pytest.
#
# The tests run on 2 pytest-xdist workers (`-n 2 --dist loadgroup`); every Spark and Dagster test
# goes to one of them, so one JVM starts per run (tests/conftest.py). LANCE_OPS_TEST_WORKERS=N picks
# another number of workers, LANCE_OPS_TEST_WORKERS=0 runs everything serially in one process; so
# do `-n 0`, `--pdb` and `-p no:xdist` among the arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
workers=${LANCE_OPS_TEST_WORKERS:-2}
xdist=(-n "$workers" --dist loadgroup)
prev=
for arg in "$@"; do
  case "$prev/$arg" in
    */--pdb | */-pno:xdist | -p/no:xdist) workers=0 ;;
  esac
  prev=$arg
done
[ "$workers" = 0 ] && xdist=()
exec .venv/bin/python -m pytest ${xdist[@]+"${xdist[@]}"} "$@"
