#!/usr/bin/env bash
# Copy pylance's own test files (not vendored in this repository) into a local cache, so that
# tests/s3/test_pylance_own_s3_ddb.py can run them with `import lance` pointing at lance_ops.
#
#   scripts/pylance_own_tests.sh [--ref REF] [--repo PATH] [--cache DIR]
#
# REF   a tag, branch or commit of the Lance repository (default: main).
# PATH  a local git clone (or bare mirror) of the Lance repository; when given, or when the
#       LANCE_REPO environment variable names one, the files come from `git show REF:path` and
#       nothing is downloaded. Otherwise they are downloaded from GitHub with curl.
# DIR   where to put them (default: $LANCE_OPS_PYLANCE_TESTS_DIR, else
#       ${XDG_CACHE_HOME:-~/.cache}/lance-ops/pylance-tests); the test looks there too.
#
# The files land as DIR/test_s3_ddb.py etc., with DIR/SOURCE saying where they came from.
set -euo pipefail

ref=main
repo="${LANCE_REPO:-}"
cache="${LANCE_OPS_PYLANCE_TESTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lance-ops/pylance-tests}"
files=(python/python/tests/test_s3_ddb.py)

while [[ $# -gt 0 ]]; do
    case "$1" in
        --ref) ref="$2"; shift 2 ;;
        --repo) repo="$2"; shift 2 ;;
        --cache) cache="$2"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

mkdir -p "$cache"
for path in "${files[@]}"; do
    target="$cache/$(basename "$path")"
    if [[ -n "$repo" ]]; then
        git -C "$repo" show "$ref:$path" >"$target.tmp"
        source="git $repo $ref ($(git -C "$repo" rev-parse "$ref^{commit}"))"
    else
        if ! curl -fsSL "https://raw.githubusercontent.com/lancedb/lance/$ref/$path" -o "$target.tmp"; then
            rm -f "$target.tmp"
            echo "could not download $path at $ref; give a local clone with --repo PATH" >&2
            exit 1
        fi
        source="github lancedb/lance $ref"
    fi
    mv "$target.tmp" "$target"
    echo "$source: $path" >"$cache/SOURCE"
    echo "$target  <- $source"
done
