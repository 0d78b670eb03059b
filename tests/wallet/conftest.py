"""Wallet fixtures: a ledger with the fake charge processor, and a funded-account helper."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tallybook.ledger import Ledger
from tallybook.services.wallet.charges import FakeChargeProcessor

P = "shop"


@pytest.fixture
def processor() -> FakeChargeProcessor:
    return FakeChargeProcessor()


@pytest.fixture
def wallet(ledger: Ledger, processor: FakeChargeProcessor) -> Ledger:
    """The ``ledger`` fixture with the fake charge processor plugged in."""
    ledger.wallet.processor = processor
    return ledger


def fund(
    ledger: Ledger,
    account: str,
    *,
    cash: int = 0,
    store_credit: int = 0,
    bonus: tuple[tuple[int, int], ...] = (),
) -> None:
    """Open ``account`` and credit it; ``bonus`` is (amount, days to expiry) grants."""
    ledger.accounts.open(P, account)
    if cash:
        ledger.wallet.credit(P, account, "cash", cash, txn_id=f"{account}-cash")
    if store_credit:
        ledger.wallet.credit(P, account, "store_credit", store_credit, txn_id=f"{account}-sc")
    now = ledger.clock.now()
    for i, (amount, days) in enumerate(bonus):
        ledger.wallet.grant(
            P, account, amount, expires_at=now + timedelta(days=days), txn_id=f"{account}-g{i}"
        )


def available(ledger: Ledger, account: str) -> dict[str, int]:
    view = ledger.wallet.balance(P, account)
    return {f.fund: f.available for f in view.funds} | {"total": view.total_available}


def assert_consistent(ledger: Ledger, account: str) -> None:
    """DESIGN.md invariants 1, 3, 5 (ledger check) and 2 (wallet check) for ``account``."""
    report = ledger.check.account(P, account)
    assert report.ok, report.violations
    assert ledger.wallet.check(P, account) == []
    program = ledger.check.program(P)
    assert program.ok, program.violations
