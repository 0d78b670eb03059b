"""Metrics on AWS Lambda: CloudWatch Embedded Metric Format lines (aws-lambda-powertools).

A Prometheus scrape of a Lambda container sees one short-lived process out of
many, so on Lambda the app also writes each request's figures to stdout as
EMF, which CloudWatch Logs turns into metrics without an agent or an API
call (namespace ``tallybook``, or ``$POWERTOOLS_METRICS_NAMESPACE``):

- ``Requests`` (count) and ``Latency`` (milliseconds) per ``route`` (method
  and route template) and ``status``;
- per storage ``operation``, what this request added to the store's
  :class:`~tallybook.store.port.StoreMetrics`: ``StoreRequests``, and the
  capacity units priced by AWS's rules (``PricedReadUnits``,
  ``PricedWriteUnits``) where the engine prices them.

:func:`tallybook.http.app.get_app` turns it on when it runs on Lambda
(``$AWS_LAMBDA_FUNCTION_NAME`` is set). A Lambda container serves one
request at a time, so the store figures' difference since the previous
request is this request's.
"""

from __future__ import annotations

import os
import threading

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from tallybook.ledger import Ledger
from tallybook.store.port import OperationStats

DEFAULT_NAMESPACE = "tallybook"
#: OperationStats field -> EMF metric name and unit
_STORE_FIGURES = (
    ("requests", "StoreRequests", MetricUnit.Count),
    ("priced_read_units", "PricedReadUnits", MetricUnit.Count),
    ("priced_write_units", "PricedWriteUnits", MetricUnit.Count),
)


class EmfMetrics:
    """Writes one EMF line per request, and one per storage operation it used."""

    def __init__(self, ledger: Ledger, namespace: str | None = None) -> None:
        self.ledger = ledger
        self.namespace = namespace or os.environ.get(
            "POWERTOOLS_METRICS_NAMESPACE", DEFAULT_NAMESPACE
        )
        self._lock = threading.Lock()
        self._last: dict[str, OperationStats] = ledger.store.metrics.snapshot()

    def _metrics(self) -> EphemeralMetrics:
        return EphemeralMetrics(namespace=self.namespace, service="api")

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        metrics = self._metrics()
        metrics.add_dimension("route", f"{method} {route}")
        metrics.add_dimension("status", str(status))
        metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="Latency", unit=MetricUnit.Milliseconds, value=seconds * 1000)
        metrics.flush_metrics()
        self._store_figures()

    def _store_figures(self) -> None:
        with self._lock:
            now = self.ledger.store.metrics.snapshot()
            last, self._last = self._last, now
        for operation in sorted(now):
            before = last.get(operation, OperationStats())
            metrics = self._metrics()
            for field, name, unit in _STORE_FIGURES:
                delta = float(getattr(now[operation], field)) - float(getattr(before, field))
                if delta > 0:
                    metrics.add_metric(name=name, unit=unit, value=delta)
            if metrics.metric_set:
                metrics.add_dimension("operation", operation)
                metrics.flush_metrics()
