"""Webhook figures for ``/metrics``, read from the store at scrape time.

The delivery worker usually runs in another process than the HTTP server, so
it keeps its counts where every process sees them: each outcome adds to a
counter on the subscription item, in the same transaction that records it.
Per subscription:

- ``tallybook_webhook_deliveries{program,subscription,outcome}``: attempts
  that delivered, failed (each failed attempt) and deliveries dead-lettered;
- ``tallybook_webhook_lag_seconds{program,subscription}``: the age of the
  oldest event still queued (0 when the queue is empty);
- ``tallybook_webhook_queued{program,subscription}``: 1 when something is
  queued (the scrape reads one queue row per subscription, not the queue).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tallybook.services.ledger.core import ProgramList
from tallybook.store.port import ItemStore
from tallybook.store.records.codec import parse_iso
from tallybook.store.records.webhook_events import read_queue
from tallybook.store.records.webhooks import OUTCOMES, list_subscriptions


class WebhookCollector(Collector):
    def __init__(self, store: ItemStore, programs: ProgramList) -> None:
        self.store = store
        self.programs = programs

    def describe(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """The families without reading the store (the registry describes at registration)."""
        return iter(self._families())

    def _families(self) -> tuple[CounterMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        labels = ["program", "subscription"]
        deliveries = CounterMetricFamily(
            "tallybook_webhook_deliveries",
            "webhook attempts delivered or failed, and deliveries dead-lettered",
            labels=[*labels, "outcome"],
        )
        lag = GaugeMetricFamily(
            "tallybook_webhook_lag_seconds",
            "age of the oldest event waiting in a subscription's queue (0: none)",
            labels=labels,
        )
        queued = GaugeMetricFamily(
            "tallybook_webhook_queued", "1 when a subscription's queue is not empty", labels=labels
        )
        return deliveries, lag, queued

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        deliveries, lag, queued = self._families()
        store = self.store
        now = time.time()
        for program in self.programs.list():
            for stored in list_subscriptions(store, program):
                sub_id = stored.subscription.id
                for outcome in OUTCOMES:
                    value = float(stored.counts.get(outcome, 0))
                    deliveries.add_metric([program, sub_id, outcome], value)
                head = read_queue(store, program, sub_id, 1)
                age = 0.0
                if head and head[0].at:
                    age = max(0.0, now - parse_iso(head[0].at).timestamp())
                lag.add_metric([program, sub_id], age)
                queued.add_metric([program, sub_id], 1.0 if head else 0.0)
        yield deliveries
        yield lag
        yield queued
