"""Prometheus metrics in the text exposition format, without a client library.

HTTP request counts and latency are recorded by the middleware per route
template (never the raw path, so account ids do not explode cardinality).
Storage operations, capacity units, retries, conflicts and throttles are read
from the store's :class:`~tallybook.store.port.StoreMetrics` at scrape time.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable

from tallybook.ledger import Ledger

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class Metrics:
    """Process-wide counters and histograms; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[Labels, int] = defaultdict(int)
        self._latency_buckets: dict[Labels, list[int]] = {}
        self._latency_sum: dict[Labels, float] = defaultdict(float)
        self._latency_count: dict[Labels, int] = defaultdict(int)
        self._problems: dict[Labels, int] = defaultdict(int)
        self._replays = 0

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        key: Labels = (("method", method), ("route", route))
        with self._lock:
            self._requests[(*key, ("status", str(status)))] += 1
            buckets = self._latency_buckets.setdefault(key, [0] * len(BUCKETS))
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    buckets[i] += 1
            self._latency_sum[key] += seconds
            self._latency_count[key] += 1

    def observe_problem(self, status: int, code: str) -> None:
        with self._lock:
            self._problems[(("status", str(status)), ("code", code))] += 1

    def observe_replay(self) -> None:
        with self._lock:
            self._replays += 1

    def render(self, ledger: Ledger) -> str:
        lines: list[str] = []
        with self._lock:
            lines += _family(
                "tallybook_http_requests_total",
                "counter",
                "HTTP requests answered",
                ((k, v) for k, v in sorted(self._requests.items())),
            )
            lines += [
                "# HELP tallybook_http_request_duration_seconds HTTP request latency",
                "# TYPE tallybook_http_request_duration_seconds histogram",
            ]
            for key in sorted(self._latency_count):
                for bound, count in zip(BUCKETS, self._latency_buckets[key], strict=True):
                    le = (*key, ("le", _num(bound)))
                    lines.append(
                        f"tallybook_http_request_duration_seconds_bucket{_labels(le)} {count}"
                    )
                inf = (*key, ("le", "+Inf"))
                lines.append(
                    f"tallybook_http_request_duration_seconds_bucket{_labels(inf)} "
                    f"{self._latency_count[key]}"
                )
                lines.append(
                    f"tallybook_http_request_duration_seconds_sum{_labels(key)} "
                    f"{_num(self._latency_sum[key])}"
                )
                lines.append(
                    f"tallybook_http_request_duration_seconds_count{_labels(key)} "
                    f"{self._latency_count[key]}"
                )
            lines += _family(
                "tallybook_http_problems_total",
                "counter",
                "problem responses by status and problem type code (conflicts are status 409)",
                ((k, v) for k, v in sorted(self._problems.items())),
            )
            lines += _family(
                "tallybook_http_idempotent_replays_total",
                "counter",
                "POSTs answered from the stored response of an earlier request",
                [((), self._replays)],
            )
        lines += _store_lines(ledger)
        return "\n".join(lines) + "\n"


def _family(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[Labels, float]]
) -> list[str]:
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    out += [f"{name}{_labels(labels)} {_num(value)}" for labels, value in samples]
    return out


def _store_lines(ledger: Ledger) -> list[str]:
    stats = ledger.store.metrics.snapshot()
    ops = sorted(stats)

    def per_op(attr: str) -> list[tuple[Labels, float]]:
        return [((("operation", op),), float(getattr(stats[op], attr))) for op in ops]

    lines: list[str] = []
    lines += _family(
        "tallybook_store_requests_total",
        "counter",
        "storage requests by operation",
        per_op("requests"),
    )
    lines += _family(
        "tallybook_store_read_capacity_units_total",
        "counter",
        "read capacity units the endpoint reported (DynamoDB; 0 on SQLite)",
        per_op("read_units"),
    )
    lines += _family(
        "tallybook_store_write_capacity_units_total",
        "counter",
        "write capacity units the endpoint reported (DynamoDB; 0 on SQLite)",
        per_op("write_units"),
    )
    lines += _priced_lines(per_op)
    lines += _family(
        "tallybook_store_retries_total", "counter", "storage-level retries", per_op("retries")
    )
    lines += _family(
        "tallybook_store_conflicts_total",
        "counter",
        "transaction conflicts reported by the store",
        per_op("conflicts"),
    )
    lines += _family(
        "tallybook_store_throttles_total",
        "counter",
        "throttled storage requests",
        per_op("throttles"),
    )
    lines += _family(
        "tallybook_posting_retries_total",
        "counter",
        "posting-engine re-plans after optimistic-concurrency conflicts",
        [((), float(ledger.engine.retries))],
    )
    return lines


def _priced_lines(per_op: Callable[[str], list[tuple[Labels, float]]]) -> list[str]:
    """Capacity priced by AWS's rules (:mod:`tallybook.store.meter`); 0 where unpriced."""
    families = (
        ("read_capacity_units", "priced_read_units", "read capacity units priced by AWS's rules"),
        (
            "write_capacity_units",
            "priced_write_units",
            "write capacity units priced by AWS's rules, index writes included",
        ),
        (
            "index_write_capacity_units",
            "priced_index_write_units",
            "the part of the priced write capacity units spent on index writes",
        ),
        (
            "estimated_writes",
            "estimated_writes",
            "items written whose image before the write the meter did not know",
        ),
    )
    lines: list[str] = []
    for name, attr, help_text in families:
        lines += _family(f"tallybook_store_priced_{name}_total", "counter", help_text, per_op(attr))
    return lines
