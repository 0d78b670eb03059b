"""Instructions per operation, counted with callgrind (load-independent).

Wall time and CPU time on a shared machine move by tens of percent with its
load; the number of instructions a piece of Python executes does not. Each
workload runs twice under ``valgrind --tool=callgrind``, with the same setup
and warm-up and with ``n`` and 0 measured operations; the difference of the
two totals divided by ``n`` is one operation's cost, imports and setup
cancelling out:

    python -m bench.instructions [--n 200] [WORKLOAD ...]

Workloads: ``credit-memory`` and ``credit-sqlite`` (a credit through the
Python API; SQLite at ``synchronous=normal``), ``http-bare`` (baseline (d):
FastAPI's one constant POST endpoint, :mod:`bench.bare_app`) and
``http-tallybook`` (``POST /v1/transactions`` credits on SQLite). The HTTP
apps are driven in-process as ASGI applications (no sockets, no server), so
that only the app's own work is counted. ``python -m bench.instructions run
WORKLOAD N`` is the inner run valgrind starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROGRAM = "bench"
ACCOUNTS = 16
WARM = 50
WORKLOADS = ("credit-memory", "credit-sqlite", "http-bare", "http-tallybook")


def _credits(url: str) -> Callable[[int, str], None]:
    from tallybook.ledger import Ledger

    ledger = Ledger.open(url)
    ledger.programs.create(PROGRAM)
    for a in range(ACCOUNTS):
        ledger.accounts.open(PROGRAM, f"a{a}")
    credit = ledger.transactions.credit

    def post(i: int, prefix: str) -> None:
        credit(PROGRAM, f"a{i % ACCOUNTS}", "points", 1, txn_id=f"{prefix}{i}")

    return post


def _asgi(app: Any, headers: list[tuple[bytes, bytes]]) -> Callable[[int, str], None]:
    """One ``POST /v1/transactions`` through the app, as a server would call it."""
    loop = asyncio.new_event_loop()

    def post(i: int, prefix: str) -> None:
        body = json.dumps(
            {"type": "credit", "account": f"a{i % ACCOUNTS}", "fund": "points", "amount": 1}
        ).encode()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/transactions",
            "raw_path": b"/v1/transactions",
            "root_path": "",
            "query_string": b"",
            "headers": [
                *headers,
                (b"idempotency-key", f"{prefix}{i}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        loop.run_until_complete(app(scope, receive, send))
        status = sent[0]["status"]
        if status != 201:
            raise RuntimeError(f"request {i} answered {status}: {sent[1:]}")

    return post


def _http_tallybook(workdir: Path) -> Callable[[int, str], None]:
    from tallybook.http.app import create_app
    from tallybook.ledger import Ledger

    ledger = Ledger.open(f"sqlite:///{workdir / 'http.db'}?synchronous=normal")
    ledger.programs.create(PROGRAM)
    for a in range(ACCOUNTS):
        ledger.accounts.open(PROGRAM, f"a{a}")
    _, secret = ledger.keys.create(PROGRAM, "read,write", "bench")
    # callgrind runs the app some 50x slower than it runs: the default 5 s key
    # cache would expire every few dozen requests instead of every few thousand,
    # so the key is kept for the whole run, as it is at full speed
    app = create_app(ledger, key_cache_seconds=3600)
    return _asgi(app, [(b"authorization", f"Bearer {secret}".encode())])


def _http_bare() -> Callable[[int, str], None]:
    from bench.bare_app import create_app

    return _asgi(create_app(), [(b"authorization", b"Bearer unused")])


def _workload(name: str, workdir: Path) -> Callable[[int, str], None]:
    if name == "credit-memory":
        return _credits("memory://instructions")
    if name == "credit-sqlite":
        return _credits(f"sqlite:///{workdir / 'credit.db'}?synchronous=normal")
    if name == "http-bare":
        return _http_bare()
    if name == "http-tallybook":
        return _http_tallybook(workdir)
    raise SystemExit(f"unknown workload {name}")


def run(name: str, n: int) -> None:
    """Setup, ``WARM`` operations, then ``n`` more: what valgrind counts."""
    from tallybook.services.ledger import programs

    # as the key cache below: a program's configuration is cached 2 s, which at
    # full speed is thousands of postings, and under callgrind (some 50x slower,
    # more when the machine is loaded) a few dozen, so how often the program is
    # read again would depend on the load; it is read once, as at full speed
    programs.CACHE_SECONDS = 3600.0
    with tempfile.TemporaryDirectory(prefix="tb-instr-") as tmp:
        post = _workload(name, Path(tmp))
        for i in range(WARM):
            post(i, "warm")
        for i in range(n):
            post(i, "op")


def count(name: str, n: int) -> int:
    """Total instructions of ``run(name, n)`` under callgrind."""
    with tempfile.TemporaryDirectory(prefix="tb-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-m",
                "bench.instructions",
                "run",
                name,
                str(n),
            ],
            capture_output=True,
            text=True,
            check=True,
            # string hashing seeded alike in every run: dict and set layouts, and
            # so the instructions they cost, are then the same from run to run
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise RuntimeError(done.stderr[-2000:])
        return int(found.group(1))


def per_operation(name: str, n: int) -> float:
    return (count(name, n) - count(name, 0)) / n


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["run"]:
        run(args[1], int(args[2]))
        return
    parser = argparse.ArgumentParser(prog="python -m bench.instructions")
    parser.add_argument("--n", type=int, default=200, help="measured operations per workload")
    parser.add_argument("workloads", nargs="*", help=f"any of {', '.join(WORKLOADS)} (all)")
    options = parser.parse_args(args)
    for name in options.workloads:
        if name not in WORKLOADS:
            parser.error(f"unknown workload {name}")
    figures = {name: per_operation(name, options.n) for name in options.workloads or WORKLOADS}
    for name, value in figures.items():
        print(f"{name:16} {value / 1000:9.1f}k instructions per operation")
    if "http-bare" in figures and "http-tallybook" in figures:
        share = figures["http-bare"] / figures["http-tallybook"]
        print(f"HTTP ratio (bare / tallybook): {share:.1%}")


if __name__ == "__main__":
    main()
