"""A bounded load generator on loopback: N threads, one keep-alive connection each.

The same generator drives the product and baseline (d): a fixed number of
requests, a time cap, and only ``127.0.0.1``. It uses ``http.client`` (the
lightest client in the standard library) so the client is not the bottleneck
sooner than it has to be; its own CPU time is reported.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.common import Json, rate_stats

#: request number -> (path, headers, body)
RequestFor = Callable[[int], tuple[str, dict[str, str], bytes]]


def wait_ready(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server not ready on port {port} after {timeout:.0f}s")


def start_server(cmd: Sequence[str], port: int, log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    try:
        wait_ready(port, proc, log)
    except Exception:
        stop_server(proc)
        raise
    return proc


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def drive(port: int, request_for: RequestFor, total: int, threads: int, cap: float) -> Json:
    """Send ``total`` POSTs over ``threads`` connections; stop early after ``cap`` seconds."""
    counter = itertools.count()
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = time.perf_counter()

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine: list[float] = []
        try:
            while True:
                i = next(counter)
                if i >= total or time.perf_counter() - start > cap:
                    break
                path, headers, body = request_for(i)
                t0 = time.perf_counter()
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                mine.append(time.perf_counter() - t0)
                if response.status >= 300:
                    with lock:
                        errors.append(f"{response.status} {payload[:200]!r}")
        finally:
            conn.close()
            with lock:
                latencies.extend(mine)

    cpu0 = time.process_time()
    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    stats = rate_stats(latencies, elapsed)
    stats["threads"] = threads
    stats["errors"] = len(errors)
    stats["client_cpu_seconds"] = round(time.process_time() - cpu0, 3)
    if errors:
        stats["first_error"] = errors[0]
    return stats


def process_cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far; ``None`` off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def store_requests(port: int, admin_key: str) -> float:
    """Storage requests the server has made, from its Prometheus ``/metrics``
    (which takes an API key with the ``admin`` scope)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {admin_key}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("tallybook_store_requests_total")
    )


def json_body(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
