"""Paged reads refuse a cursor that is not a string, and a limit that is not an int.

A number, bytes or datetime as ``cursor`` raised ``TypeError`` from the cursor
decoder (every paged read); ``webhooks.deliveries`` compared ``limit`` without
checking its type (``TypeError`` for ``None`` or ``"10"``; ``True`` read as 1).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tallybook.errors import StoreValidationError, ValidationError
from tallybook.ledger import Ledger

from .ledger_helpers import PROGRAM, open_accounts

pytestmark = pytest.mark.unit


def _pages(cursor: Any) -> list[tuple[str, Callable[[Ledger], object]]]:
    now = datetime.now(UTC)
    return [
        ("history", lambda led: led.accounts.history(PROGRAM, "alice", "cash", cursor=cursor)),
        ("for_owner", lambda led: led.transactions.for_owner(PROGRAM, "alice", cursor=cursor)),
        ("wallet", lambda led: led.wallet.transactions(PROGRAM, "alice", cursor=cursor)),
        ("notifications", lambda led: led.notifications.history(PROGRAM, "alice", cursor=cursor)),
        ("members", lambda led: led.loyalty.members(PROGRAM, "member", cursor=cursor)),
        ("tiers", lambda led: led.loyalty.tier_history(PROGRAM, "alice", cursor=cursor)),
        (
            "expiring",
            lambda led: led.loyalty.expiring_page(PROGRAM, "alice", days=10, cursor=cursor),
        ),
        (
            "billing",
            lambda led: led.billing.records(PROGRAM, now - timedelta(days=1), now, cursor=cursor),
        ),
        ("deliveries", lambda led: led.webhooks.deliveries(PROGRAM, "s-1", cursor=cursor)),
    ]


@pytest.mark.parametrize("cursor", [7, b"eyJ9", datetime(2030, 1, 1, tzinfo=UTC), ["x"]])
def test_a_cursor_that_is_not_a_string_is_malformed(ledger: Ledger, cursor: Any) -> None:
    open_accounts(ledger, "alice")
    ledger.loyalty.configure(PROGRAM, {"tiers": [{"name": "member", "threshold": 0}]})
    ledger.webhooks.create(PROGRAM, "https://example.com/hook", sub_id="s-1")
    for name, call in _pages(cursor):
        with pytest.raises((StoreValidationError, ValidationError), match="malformed cursor"):
            call(ledger)
        assert name


@pytest.mark.parametrize("limit", [None, "10", True, 1.0, 0, 10**6])
def test_webhook_deliveries_refuse_a_limit_that_is_not_an_integer(
    ledger: Ledger, limit: Any
) -> None:
    ledger.webhooks.create(PROGRAM, "https://example.com/hook", sub_id="s-1")
    with pytest.raises(ValidationError, match="limit must be an integer"):
        ledger.webhooks.deliveries(PROGRAM, "s-1", limit=limit)
