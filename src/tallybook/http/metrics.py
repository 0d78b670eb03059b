"""Prometheus metrics through ``prometheus_client``, one registry per app.

HTTP requests are counted and timed by the request middleware per route
template (never the raw path, so account ids do not explode cardinality),
method and status. Storage figures are read at scrape time from the store's
:class:`~tallybook.store.port.StoreMetrics` by :class:`StoreCollector`:
every numeric field of :class:`~tallybook.store.port.OperationStats` becomes
a counter per operation (requests, capacity units as reported and as priced
by AWS's rules, retries, conflicts, throttles, failures, ...), so a figure
added to the store is exported without a change here.

Where ``/metrics`` is served is configured by :class:`MetricsAccess` (see
:func:`tallybook.http.app.create_app`); on Lambda the same figures leave as
CloudWatch Embedded Metric Format (:mod:`tallybook.http.emf`).
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from tallybook.errors import ValidationError
from tallybook.ledger import Ledger
from tallybook.store.port import OperationStats
from tallybook.webhooks.metrics import WebhookCollector

if TYPE_CHECKING:
    from tallybook.http.emf import EmfMetrics

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST

# counters are exported without their *_created companion series
disable_created_metrics()  # type: ignore[no-untyped-call]

#: OperationStats field -> (exported name, help) where the field name alone says too little
_STORE_NAMES: dict[str, tuple[str, str]] = {
    "requests": ("tallybook_store_requests", "storage requests by operation"),
    "read_units": (
        "tallybook_store_read_capacity_units",
        "read capacity units the endpoint reported (DynamoDB; 0 on SQLite)",
    ),
    "write_units": (
        "tallybook_store_write_capacity_units",
        "write capacity units the endpoint reported (DynamoDB; 0 on SQLite)",
    ),
    "priced_read_units": (
        "tallybook_store_priced_read_capacity_units",
        "read capacity units priced by AWS's rules",
    ),
    "priced_write_units": (
        "tallybook_store_priced_write_capacity_units",
        "write capacity units priced by AWS's rules, index writes included",
    ),
    "priced_index_write_units": (
        "tallybook_store_priced_index_write_capacity_units",
        "the part of the priced write capacity units spent on index writes",
    ),
    "estimated_writes": (
        "tallybook_store_priced_estimated_writes",
        "items written whose image before the write the meter did not know",
    ),
    "retries": ("tallybook_store_retries", "storage-level retries"),
    "conflicts": ("tallybook_store_conflicts", "transaction conflicts reported by the store"),
    "throttles": ("tallybook_store_throttles", "throttled storage requests"),
    "failed": ("tallybook_store_failed", "storage calls that ended in an error"),
}


class MetricsAccess(enum.StrEnum):
    """Who may read ``/metrics`` on the API's own address."""

    #: an API key with the ``admin`` scope (the default)
    KEY = "key"
    #: anyone who can reach the API (a private network, or behind a proxy that filters)
    OPEN = "open"
    #: not served by the API (``tallybook serve --metrics-bind`` serves it elsewhere)
    OFF = "off"


def parse_metrics_access(value: MetricsAccess | str) -> MetricsAccess:
    """``value`` as a :class:`MetricsAccess`; anything else is a ``ValidationError``."""
    try:
        return MetricsAccess(value)
    except ValueError:
        raise ValidationError(f"metrics access must be key, open or off; got {value!r}") from None


def metrics_access_from_env() -> MetricsAccess:
    """``$TALLYBOOK_METRICS`` (``key``, ``open`` or ``off``; unset or empty: ``key``), for
    the app uvicorn and Lambda start (``tallybook serve`` takes ``--metrics``)."""
    raw = os.environ.get("TALLYBOOK_METRICS", "").strip()
    if not raw:
        return MetricsAccess.KEY
    try:
        return MetricsAccess(raw)
    except ValueError:
        raise ValidationError(f"TALLYBOOK_METRICS must be key, open or off; got {raw!r}") from None


def store_fields() -> list[str]:
    """The numeric figures of :class:`OperationStats`, in declaration order."""
    numeric = (int, float, "int", "float")
    return [f.name for f in dataclasses.fields(OperationStats) if f.type in numeric]


class StoreCollector(Collector):
    """The store's :class:`StoreMetrics` and the posting engine's retries, at scrape time."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def collect(self) -> Iterator[CounterMetricFamily]:
        stats = self.ledger.store.metrics.snapshot()
        for field in store_fields():
            name, help_text = _STORE_NAMES.get(
                field, (f"tallybook_store_{field}", f"store figure '{field}' by operation")
            )
            family = CounterMetricFamily(name, help_text, labels=["operation"])
            for operation in sorted(stats):
                family.add_metric([operation], float(getattr(stats[operation], field)))
            yield family
        yield CounterMetricFamily(
            "tallybook_posting_retries",
            "posting-engine re-plans after optimistic-concurrency conflicts",
            value=float(self.ledger.engine.retries),
        )


class Metrics:
    """The app's registry: HTTP figures recorded per request, store figures collected."""

    def __init__(self, ledger: Ledger, emf: EmfMetrics | None = None) -> None:
        self.emf = emf
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "tallybook_http_requests",
            "HTTP requests answered",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "tallybook_http_request_duration_seconds",
            "HTTP request latency by route and status",
            ["method", "route", "status"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.problems = Counter(
            "tallybook_http_problems",
            "problem responses by status and problem type code (conflicts are status 409)",
            ["status", "code"],
            registry=self.registry,
        )
        self.replays = Counter(
            "tallybook_http_idempotent_replays",
            "POSTs answered from the record of an earlier request",
            registry=self.registry,
        )
        #: (method, route, status) -> the request counter's and histogram's children
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self.registry.register(StoreCollector(ledger))
        self.registry.register(WebhookCollector(ledger.store, ledger.programs))

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        children = self._children.get(key)
        if children is None:  # labels() looks its child up on every call: once per key here
            code = str(status)
            children = (
                self.requests.labels(method, route, code),
                self.duration.labels(method, route, code),
            )
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)
        if self.emf is not None:
            self.emf.request(method, route, status, seconds)

    def observe_problem(self, status: int, code: str) -> None:
        self.problems.labels(str(status), code).inc()

    def observe_replay(self) -> None:
        self.replays.inc()

    def render(self) -> bytes:
        """The Prometheus text exposition of everything above."""
        return generate_latest(self.registry)
