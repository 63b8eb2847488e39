#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh) and run the main job: the maintenance cycle on a local Lance
# dataset (./data/demo.lance) with Spark local[*]. Extra arguments go to `python -m jobs.pipeline`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m jobs.pipeline "$@"
