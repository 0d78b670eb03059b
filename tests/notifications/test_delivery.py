"""Delivery hooks: outcomes are recorded; the removed webhook setting points to webhooks."""

from __future__ import annotations

import pytest

from tallybook.errors import ConfigError
from tallybook.ledger import Ledger
from tallybook.services.notifications.delivery import RecordingDelivery, delivery_from_env

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def test_delivery_outcomes_are_recorded(ledger: Ledger, alice: str) -> None:
    ledger.notifications.delivery = RecordingDelivery()
    n = ledger.notifications.add("shop", alice, "TierChanged", {"tier": "gold"})
    assert n.delivery == "delivered"
    ledger.notifications.delivery = RecordingDelivery(fail=True)
    failed = ledger.notifications.add("shop", alice, "HoldExpired", {})
    stored = ledger.notifications.get("shop", alice, failed.id)
    assert stored.delivery == "failed"
    assert stored.delivery_error == "ConnectionError: recording delivery told to fail"


def test_the_removed_webhook_setting_says_what_replaces_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TALLYBOOK_NOTIFY_WEBHOOK", "https://example.com/hook")
    with pytest.raises(ConfigError, match=r"tallybook webhooks create https://example\.com/hook"):
        delivery_from_env()
