#!/usr/bin/env bash
# Run tallybook: the HTTP API, its docs and the admin page, on ./tallybook.db by default.
#   scripts/serve.sh [--host 127.0.0.1] [--port 8080] [--store URL]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/tallybook serve "$@"
