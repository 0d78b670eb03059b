"""Fixtures for notification tests: a ledger with account ``alice`` and a recording hook."""

from __future__ import annotations

import pytest

from tallybook.ledger import Ledger
from tallybook.services.notifications.delivery import RecordingDelivery


@pytest.fixture
def delivered(ledger: Ledger) -> RecordingDelivery:
    hook = RecordingDelivery()
    ledger.notifications.delivery = hook
    return hook


@pytest.fixture
def alice(ledger: Ledger, delivered: RecordingDelivery) -> str:
    ledger.accounts.open("shop", "alice")
    return "alice"
