"""Shared pieces: run sizes, latency statistics, machine description, free ports."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Sizes:
    """How much each section does; ``--quick`` only proves the benchmark runs."""

    quick: bool
    sqlite_postings: int
    http_requests: int
    http_threads: int
    ddb_repeats: int
    long_history: int
    hot_sqlite: int
    hot_ddb: int
    cpu_calls: int
    time_cap: float
    #: rounds of the SQLite and hot-account comparisons; the median round is kept
    rounds: int

    @staticmethod
    def of(quick: bool) -> Sizes:
        if quick:
            return Sizes(True, 200, 200, 4, 1, 200, 64, 16, 5, 10.0, 1)
        return Sizes(False, 5000, 4000, 8, 5, 10_000, 1600, 96, 40, 60.0, 3)


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) by nearest rank; 0.0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[rank]


def rate_stats(latencies: Sequence[float], elapsed: float) -> Json:
    """Operations per second and p50 / p99 latency in milliseconds."""
    return {
        "count": len(latencies),
        "seconds": round(elapsed, 3),
        "per_second": round(len(latencies) / elapsed, 1) if elapsed > 0 else 0.0,
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
    }


def timed_loop(op: Callable[[int], object], count: int, cap: float) -> Json:
    """Run ``op(i)`` for i in range(count), one at a time, stopping after ``cap`` seconds."""
    latencies: list[float] = []
    start = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        op(i)
        latencies.append(time.perf_counter() - t0)
        if t0 - start > cap:
            break
    return rate_stats(latencies, time.perf_counter() - start)


def median_round(rounds: Sequence[Json], key: str = "per_second") -> Json:
    """The round with the median ``key``, with every round's ``key`` beside it."""
    ordered = sorted(rounds, key=lambda r: float(r[key]))
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen[f"rounds_{key}"] = [r[key] for r in rounds]
    return chosen


def ratio(value: float, baseline: float) -> float:
    return round(value / baseline, 3) if baseline else 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def machine() -> Json:
    """What the figures were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or "unknown"
    try:
        uname = subprocess.run(
            ["uname", "-a"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        uname = " ".join(platform.uname())
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    return {
        "uname": uname,
        "cpu": cpu,
        "cores": os.cpu_count() or 0,
        "python": platform.python_version(),
        "load_average_at_start": load,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
