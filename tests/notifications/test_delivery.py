"""Delivery hooks: the webhook posts JSON (to 127.0.0.1 only) and outcomes are recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from tallybook.errors import ConfigError
from tallybook.ledger import Ledger
from tallybook.services.notification_delivery import WebhookDelivery

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


class Sink(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []
    status = 204

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        Sink.received.append(json.loads(self.rfile.read(length)))
        self.send_response(Sink.status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[str]:
    Sink.received = []
    Sink.status = 204
    server = HTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def test_webhook_delivery(ledger: Ledger, alice: str, webhook: str) -> None:
    ledger.notifications.delivery = WebhookDelivery(webhook, timeout=2)
    n = ledger.notifications.add("shop", alice, "TierChanged", {"tier": "gold"})
    assert n.delivery == "delivered"
    (sent,) = Sink.received
    assert (sent["id"], sent["type"], sent["payload"]) == (n.id, "TierChanged", {"tier": "gold"})
    Sink.status = 500
    failed = ledger.notifications.add("shop", alice, "HoldExpired", {})
    stored = ledger.notifications.get("shop", alice, failed.id)
    assert stored.delivery == "failed"
    assert stored.delivery_error == "ConnectionError: webhook answered HTTP 500"


def test_webhook_url_is_checked() -> None:
    with pytest.raises(ConfigError):
        WebhookDelivery("file:///etc/passwd")
