#!/usr/bin/env bash
# The benchmark command: python -m bench (see bench/__main__.py), after bootstrapping .venv.
#
#   scripts/bench.sh                  full run (under 10 minutes): bench/results/latest.json
#                                     and docs/benchmarks.md; starts DynamoDB Local itself
#   scripts/bench.sh --quick --out DIR   smoke test (CI): runs every section, writes DIR
#   scripts/bench.sh --dynamodb http://127.0.0.1:8000   reuse a running DynamoDB Local
#   scripts/bench.sh --skip-dynamodb     SQLite and HTTP only
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/python -m bench "$@"
