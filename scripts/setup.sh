#!/usr/bin/env bash
# Create the virtual environment at .venv/ (repo root) and install lance-ops with all extras.
# Re-running is cheap: installation is skipped while pyproject.toml is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin=${PYTHON:-python3}
command -v java >/dev/null 2>&1 || { echo "setup: Java 17 is required for Spark (java not on PATH)" >&2; exit 1; }
[ -x .venv/bin/python ] || "$python_bin" -m venv .venv
stamp=.venv/.lance-ops-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[spark,dagster,airflow,test,report,s3]"
  echo "$want" > "$stamp"
fi
