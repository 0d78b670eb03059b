"""Delivery hooks: how a notification whose rule says ``deliver`` reaches its user.

A hook is anything with ``deliver(notification) -> None`` that raises when the
delivery failed; the notification service records the outcome in history.
``LogDelivery`` is the default sink; ``WebhookDelivery`` POSTs JSON to a URL
(``$TALLYBOOK_NOTIFY_WEBHOOK`` selects it); ``RecordingDelivery`` keeps what
it was given, for tests.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import urllib.error
import urllib.request
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


class WebhookDelivery:
    """POSTs the notification as JSON; any status outside 2xx is a failure."""

    def __init__(self, url: str, *, timeout: float = 5.0, headers: dict[str, str] | None = None):
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"webhook URL must be http:// or https://, got {url[:60]!r}")
        self.url = url
        self.timeout = timeout
        self.headers = headers or {}

    def deliver(self, notification: Notification) -> None:
        body = json.dumps(notification_json(notification)).encode()
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in __init__
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", **self.headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                status = response.status
        except urllib.error.HTTPError as exc:
            raise ConnectionError(f"webhook answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise ConnectionError(f"webhook unreachable: {exc}") from exc
        if not 200 <= status < 300:
            raise ConnectionError(f"webhook answered HTTP {status}")


def delivery_from_env() -> Delivery:
    url = os.environ.get(WEBHOOK_ENV, "").strip()
    return WebhookDelivery(url) if url else LogDelivery()
