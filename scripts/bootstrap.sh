#!/usr/bin/env bash
# Create .venv and install tallybook with its test extras (idempotent, quick when done).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.tallybook-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    # uv installs what pip would, downloading in parallel (about a minute less on
    # a fresh machine); --compile-bytecode as pip does: CI sets
    # PYTHONDONTWRITEBYTECODE, so every process would compile its imports again
    .venv/bin/python -m pip install --quiet 'uv==0.13.8'
    .venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python -e '.[test]'
    touch "$stamp"
fi
