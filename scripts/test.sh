#!/usr/bin/env bash
# The test command: the whole suite, on SQLite and on DynamoDB Local.
#
#   scripts/test.sh [PYTEST ARGS...]       e.g. scripts/test.sh tests/store -k ttl
#
# Uses TALLYBOOK_TEST_DYNAMODB when set (an endpoint such as
# http://127.0.0.1:8000); otherwise starts DynamoDB Local on a free loopback
# port for this run and stops it afterwards. The tables with a stream go to
# TALLYBOOK_TEST_DYNAMODB_STREAMS, else to a second instance started here (when
# the jar is in the cache), else to the first. Installs .venv on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
PY=.venv/bin/python

ddb_cache="${TALLYBOOK_DYNAMODB_LOCAL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tallybook/dynamodb-local}"
free_port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
started=()
stop_started() {
  local d
  for d in "${started[@]}"; do scripts/dynamodb-local.sh stop "$d" >/dev/null 2>&1 || true; done
  if [[ -n ${streams_dir:-} ]]; then rm -rf "$streams_dir"; fi
}
trap stop_started EXIT

if [[ -z "${TALLYBOOK_TEST_DYNAMODB:-}" ]]; then
  port=$(free_port)
  started+=("$ddb_cache")
  scripts/dynamodb-local.sh start "$port" "$ddb_cache"
  export TALLYBOOK_TEST_DYNAMODB="http://127.0.0.1:$port"
fi

# the tables with a stream (the webhook tests) go to an instance of their own with a
# database per region, each such table in a region of its own (tests/conftest.py):
# DynamoDB Local keeps a stream's records after its table is deleted, and every
# request on a stream table of that database slows down with all of them
if [[ -z "${TALLYBOOK_TEST_DYNAMODB_STREAMS:-}" && -f "$ddb_cache/package.name" ]]; then
  port=$(free_port)
  streams_dir=$(mktemp -d)
  started+=("$streams_dir")
  DYNAMODB_LOCAL_CACHE="$ddb_cache" DYNAMODB_LOCAL_SHARED_DB=0 \
    scripts/dynamodb-local.sh start "$port" "$streams_dir"
  export TALLYBOOK_TEST_DYNAMODB_STREAMS="http://127.0.0.1:$port"
fi

# bytecode for the package, once: with PYTHONDONTWRITEBYTECODE set (CI sets it) every
# process the tests start (the CLI, servers, workers) compiled all of tallybook again
$PY -m compileall -q src >/dev/null

rc=0
# 3 workers on 2 cores: the DynamoDB cases mostly wait on DynamoDB Local (its own
# process), so a third worker keeps the CPUs busy (9.4 min against 12 min for -n 2
# on this 2-core machine); tests/conftest.py orders the cases for it
# --durations: the slowest cases close the output, to keep the run's time in view
$PY -m pytest -n 3 -q --durations=15 "$@" || rc=$?
if [[ $rc -eq 5 ]]; then
  echo "test.sh: error: no tests collected" >&2
  exit 1
fi
exit "$rc"
