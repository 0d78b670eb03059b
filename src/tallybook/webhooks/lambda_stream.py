"""The webhooks Lambda: events from the table's stream, deliveries, retries.

Wired in ``deploy/template.yaml`` to the table's stream (a batch of records:
their events are fanned out, then what is due is sent) and to a schedule
(retries come due without new records: a pass sends them). Records of the
worker's own bookkeeping (deliveries, attempts, leases) carry no event; a
batch of only those sends nothing, so its own writes do not keep re-invoking
the function. A failed invocation is retried by Lambda with the same batch,
which the fan-out skips as already stored.

Without a usable server key (:class:`~tallybook.webhooks.vault.WebhookKeyError`)
a stream batch is still fanned out and the invocation succeeds, logging the
error: failing it would make Lambda retry the batch and hold the shard's later
records back until they pass the stream's 24 hours. The schedule's invocations
fail on the error instead, so the function's ``Errors`` metric shows it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from tallybook.errors import ValidationError
from tallybook.services.clock import SystemClock
from tallybook.services.ledger.programs import ProgramService
from tallybook.store.url import open_store
from tallybook.webhooks.fanout import fan_out_new, sweep_parked
from tallybook.webhooks.log import install as install_event_log
from tallybook.webhooks.service import WebhookService
from tallybook.webhooks.stream import events_of
from tallybook.webhooks.vault import WebhookKeyError
from tallybook.webhooks.worker import DeliveryWorker

_worker: DeliveryWorker | None = None
log = logging.getLogger(__name__)


def _get_worker() -> DeliveryWorker:
    global _worker
    if _worker is None:
        # built from its parts, not a whole Ledger: the worker needs the store,
        # the clock and the program list only
        store = open_store(os.environ.get("TALLYBOOK_STORE"))
        install_event_log(store)
        clock = SystemClock()
        _worker = WebhookService(store, clock, ProgramService(store, clock)).worker()
    return _worker


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(event, dict) or not (
        records is None or (isinstance(records, list) and all(isinstance(r, dict) for r in records))
    ):  # a hand-made invocation: refused before the store is opened
        raise ValidationError(
            "a webhooks event is a JSON object: a DynamoDB stream batch (Records, a list "
            "of records) or a scheduled event"
        )
    worker = _get_worker()
    subs = worker.subscriptions()
    if records is None:  # the schedule: parked units a killed invocation left ready, then retries
        sweep_parked(worker.store, subs)
        stats = worker.deliver_due(subs)
        return {"events": 0, "delivered": stats.delivered, "failed": stats.failed}
    events = events_of(records)
    if not events:
        return {"events": 0, "delivered": 0, "failed": 0}
    new = fan_out_new(worker.store, events, subs)
    try:
        stats = worker.deliver_due(subs)
    except WebhookKeyError as exc:  # fanned out: the queues keep the events
        log.error("webhooks not delivered: %s", exc.message)
        return {"events": new, "delivered": 0, "failed": 0, "error": exc.message}
    return {"events": new, "delivered": stats.delivered, "failed": stats.failed}
