#!/bin/sh
# The tallybook container's entry point (also runs outside a container; CI tests it so).
#
#   docker-entrypoint.sh [serve [SERVE OPTIONS]]   the default: with TALLYBOOK_CREATE_TABLE=1,
#       create the table (or SQLite file) first, retrying while the store starts; then
#       tallybook serve on $TALLYBOOK_HOST:$TALLYBOOK_PORT (0.0.0.0:8080: the container's
#       own interface; publish the port on the host's loopback only)
#   docker-entrypoint.sh healthcheck               exit 0 when GET /healthz answers 200
#   docker-entrypoint.sh ARGS...                   tallybook ARGS (e.g. program create shop)
#
# TALLYBOOK_STORE names the store; TALLYBOOK_CREATE_TABLE_TRIES (default 30) bounds
# the table-create attempts, one second apart.
set -eu

host="${TALLYBOOK_HOST:-0.0.0.0}"
port="${TALLYBOOK_PORT:-8080}"
tries="${TALLYBOOK_CREATE_TABLE_TRIES:-30}"

create_table() {
  n=1
  until tallybook table create; do
    if [ "$n" -ge "$tries" ]; then
      echo "docker-entrypoint: error: could not create the table after $n tries" >&2
      exit 1
    fi
    n=$((n + 1))
    sleep 1
  done
}

case "${1:-serve}" in
  serve)
    if [ $# -gt 0 ]; then shift; fi
    if [ "${TALLYBOOK_CREATE_TABLE:-0}" = "1" ]; then create_table; fi
    exec tallybook serve --host "$host" --port "$port" "$@"
    ;;
  healthcheck)
    exec python -c 'import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=3) as r:
    sys.exit(0 if r.status == 200 else 1)' "$port"
    ;;
  *)
    exec tallybook "$@"
    ;;
esac
