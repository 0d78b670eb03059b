"""Delivery hooks: how a notification whose rule says ``deliver`` reaches its user.

A hook is anything with ``deliver(notification) -> None`` that raises when the
delivery failed; the notification service records the outcome in history.
``LogDelivery`` is the default sink; ``RecordingDelivery`` keeps what it was
given, for tests.

The synchronous, unsigned webhook hook (``$TALLYBOOK_NOTIFY_WEBHOOK``) was
removed: webhooks are signed, retried and recorded deliveries of the ledger's
events now (``notification.raised`` and ``notification.dismissed``,
docs/webhooks.md). Setting the variable is refused with that note.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, Protocol

from tallybook.domain.notifications import Notification
from tallybook.errors import ConfigError
from tallybook.store.records.codec import iso

log = logging.getLogger("tallybook.notifications")

WEBHOOK_ENV = "TALLYBOOK_NOTIFY_WEBHOOK"


class Delivery(Protocol):
    def deliver(self, notification: Notification) -> None:
        """Send ``notification`` to its user; raise if it could not be sent."""


def notification_json(n: Notification) -> dict[str, Any]:
    """The wire form of a notification, as webhooks and the HTTP API show it."""
    return {
        "id": n.id,
        "program": n.program,
        "account": n.account,
        "type": n.type,
        "payload": n.payload,
        "created_at": iso(n.created_at),
        "status": str(n.status),
        "expires_at": iso(n.expires_at) if n.expires_at else None,
    }


class LogDelivery:
    """Writes each delivery to the ``tallybook.notifications`` log."""

    def deliver(self, notification: Notification) -> None:
        log.info("deliver %s", json.dumps(notification_json(notification), sort_keys=True))


class RecordingDelivery:
    """Keeps every notification it is given; ``fail`` makes it raise instead."""

    def __init__(self, *, fail: bool = False) -> None:
        self.delivered: list[Notification] = []
        self.fail = fail
        self._lock = threading.Lock()

    def deliver(self, notification: Notification) -> None:
        if self.fail:
            raise ConnectionError("recording delivery told to fail")
        with self._lock:
            self.delivered.append(notification)


def delivery_from_env() -> Delivery:
    url = os.environ.get(WEBHOOK_ENV, "").strip()
    if url:
        raise ConfigError(
            f"{WEBHOOK_ENV} was removed: subscribe the URL instead, signed and retried: "
            f"tallybook webhooks create {url[:80]} --program PROGRAM "
            "--types notification.raised,notification.dismissed (docs/webhooks.md); "
            f"then unset {WEBHOOK_ENV}"
        )
    return LogDelivery()
