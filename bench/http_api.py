"""Postings over HTTP on SQLite (``tallybook serve``), against baseline (d).

Both servers run in their own process with the same uvicorn settings and log
level, on a free ``127.0.0.1`` port, driven by :mod:`bench.loadgen` with the
same threads, request count, body and headers. The store is SQLite at
``synchronous=normal``, as in the Python API section, so that the figure is
the HTTP path's and not the disk's fsync; ``python_api`` is the same postings
through the Python API in this process (no HTTP), the ceiling of the product.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, Json, Sizes, free_port, rate_stats, ratio
from bench.loadgen import (
    RequestFor,
    drive,
    json_body,
    process_cpu_seconds,
    start_server,
    stop_server,
    store_requests,
)
from tallybook.ledger import Ledger

PROGRAM = "bench"
ACCOUNTS = 16


def _prepare_store(url: str) -> tuple[str, str]:
    """Program, accounts, a read/write API key and an admin key (for /metrics);
    returns the two secrets."""
    with Ledger.open(url) as ledger:
        ledger.programs.create(PROGRAM)
        for a in range(ACCOUNTS):
            ledger.accounts.open(PROGRAM, f"h{a}")
        _, secret = ledger.keys.create(PROGRAM, "read,write", "bench")
        _, admin = ledger.keys.create(PROGRAM, "admin", "bench-metrics")
    return secret, admin


def _python_api(url: str, total: int, prefix: str) -> Json:
    """The same credits through the Python API, one after another, in this process."""
    with Ledger.open(url) as ledger:
        post = ledger.transactions.credit
        for i in range(min(200, total)):
            post(PROGRAM, f"h{i % ACCOUNTS}", "points", 1, txn_id=f"{prefix}-warm-{i}")
        latencies: list[float] = []
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(total):
            t0 = time.perf_counter()
            post(PROGRAM, f"h{i % ACCOUNTS}", "points", 1, txn_id=f"{prefix}-{i}")
            latencies.append(time.perf_counter() - t0)
        stats = rate_stats(latencies, time.perf_counter() - start)
        stats["cpu_ms_per_posting"] = round((time.process_time() - cpu) * 1000 / total, 3)
        return stats


def _requests(secret: str, prefix: str) -> RequestFor:
    auth = f"Bearer {secret}"

    def request_for(i: int) -> tuple[str, dict[str, str], bytes]:
        body = json_body(
            {"type": "credit", "account": f"h{i % ACCOUNTS}", "fund": "points", "amount": 1}
        )
        headers = {
            "Authorization": auth,
            "Idempotency-Key": f"{prefix}-{i}",
            "Content-Type": "application/json",
        }
        return "/v1/transactions", headers, body

    return request_for


def _tallybook_cmd() -> list[str]:
    script = Path(sys.executable).parent / "tallybook"
    if script.exists():
        return [str(script)]
    found = shutil.which("tallybook")
    return [found] if found else [sys.executable, "-c", "from tallybook.cli import main; main()"]


def _measure(
    cmd: list[str], port: int, log: Path, request_for: RequestFor, sizes: Sizes, admin: str | None
) -> Json:
    proc = start_server(cmd, port, log, ROOT)
    try:
        warm = min(200, sizes.http_requests)
        drive(port, lambda i: request_for(i + 10**8), warm, sizes.http_threads, sizes.time_cap)
        before = store_requests(port, admin) if admin else 0.0
        cpu = process_cpu_seconds(proc.pid)
        stats = drive(port, request_for, sizes.http_requests, sizes.http_threads, sizes.time_cap)
        cpu_after = process_cpu_seconds(proc.pid)
        if cpu is not None and cpu_after is not None and stats["count"]:
            # the server's own CPU per request: steadier than rates on a shared machine
            stats["server_cpu_ms_per_request"] = round((cpu_after - cpu) * 1000 / stats["count"], 3)
        if admin:
            calls = store_requests(port, admin) - before
            stats["storage_requests_per_request"] = round(calls / stats["count"], 2)
        return stats
    finally:
        stop_server(proc)


def run(sizes: Sizes) -> Json:
    """``sizes.rounds`` rounds of baseline, product and Python API in turn (fresh
    idempotency keys each round); the round with the median ratio is kept."""
    rounds: list[Json] = []
    with tempfile.TemporaryDirectory(prefix="tb-bench-http-") as tmp:
        work = Path(tmp)
        url = f"sqlite:///{work / 'http.db'}?synchronous=normal"
        secret, admin = _prepare_store(url)
        for r in range(sizes.rounds):
            request_for = _requests(secret, f"h{r}")
            port = free_port()
            bare_cmd = [sys.executable, "-m", "bench.bare_app", "--port", str(port)]
            base = _measure(bare_cmd, port, work / "bare.log", request_for, sizes, None)

            port = free_port()
            serve = ["serve", "--host", "127.0.0.1", "--port", str(port), "--store", url]
            prod_cmd = [*_tallybook_cmd(), *serve, "--log-level", "warning"]
            prod = _measure(prod_cmd, port, work / "serve.log", request_for, sizes, admin)
            api = _python_api(url, sizes.http_requests, f"api{r}")
            rounds.append(
                {
                    "product": prod,
                    "baseline_d": base,
                    "python_api": api,
                    "ratio": ratio(prod["per_second"], base["per_second"]),
                }
            )
    kept = sorted(rounds, key=lambda x: float(x["ratio"]))[len(rounds) // 2]
    prod, base, api = kept["product"], kept["baseline_d"], kept["python_api"]
    return {
        **kept,
        "store": "sqlite, synchronous=normal",
        "p50_ratio": ratio(base["p50_ms"], prod["p50_ms"]),
        "python_api_ratio": ratio(api["per_second"], base["per_second"]),
        "rounds_ratio": [r["ratio"] for r in rounds],
    }
