#!/usr/bin/env bash
# Fuzz the HTTP API from its own OpenAPI document with schemathesis.
#
# Starts `tallybook serve` on a free 127.0.0.1 port over a temporary SQLite
# store with program "shop" and a fresh read,write API key, runs `st run` with
# the checks not_a_server_error and response_schema_conformance (no 5xx, every
# response matches its documented schema), then stops the server.
#   scripts/schemathesis.sh [extra `st run` options]
# ST_MAX_EXAMPLES (default 20) bounds the examples per operation.
set -euo pipefail
cd "$(dirname "$0")/.."
TB=.venv/bin/tallybook
PY=.venv/bin/python

tmp=$(mktemp -d)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

store="sqlite:///$tmp/schemathesis.db"
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

"$TB" program create shop --store "$store" >/dev/null
secret=$("$TB" keys create --program shop --scopes read,write --name schemathesis --store "$store" 2>/dev/null)
"$TB" account open alice --program shop --store "$store" >/dev/null

"$TB" serve --host 127.0.0.1 --port "$port" --store "$store" --log-level warning \
    >"$tmp/server.log" 2>&1 &
server_pid=$!

for _ in $(seq 1 100); do
    if "$PY" -c "import urllib.request, sys; urllib.request.urlopen('$base/healthz', timeout=1)" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "schemathesis: the server did not start:" >&2
        cat "$tmp/server.log" >&2
        exit 1
    fi
    sleep 0.1
done

status=0
st="$PWD/.venv/bin/st"
# run from the temp dir: schemathesis keeps a cache (.schemathesis/) in its working directory
cd "$tmp"
timeout 600 "$st" run "$base/openapi.json" \
    --checks not_a_server_error,response_schema_conformance \
    --header "Authorization: Bearer $secret" \
    --max-examples "${ST_MAX_EXAMPLES:-20}" \
    --generation-database none \
    --no-color \
    "$@" || status=$?
if [ "$status" -ne 0 ]; then
    echo "schemathesis: failed (exit $status); server log tail:" >&2
    tail -n 40 "$tmp/server.log" >&2
fi
exit "$status"
