"""A store error on a notification the ledger raises itself: the write that
caused it answers as applied, the error is logged as one line (no traceback:
the CLI prints it on stderr), and what the docs say brings it back does.
SQLite and DynamoDB."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest

from tallybook.domain.model import default_funds
from tallybook.errors import StoreUnavailable
from tallybook.ledger import Ledger
from tallybook.reliability.faults import FaultyStore
from tallybook.services.clock import ManualClock
from tallybook.store.port import Action, action_key

P = "err"


@pytest.fixture
def err(ledger: Ledger) -> Ledger:
    funds = [
        replace(f, low_balance_threshold=500) if f.name == "cash" else f
        for f in default_funds("USD")
    ]
    ledger.programs.create(P, funds=funds)
    ledger.accounts.open(P, "bob")
    ledger.wallet.credit(P, "bob", "cash", 1000, txn_id="c1")
    return ledger


def _notification_writes(actions: Sequence[Action]) -> bool:
    return any(action_key(a).sk.startswith("N#") for a in actions)


def _failing(ledger: Ledger, clock: ManualClock) -> Ledger:
    """A ledger whose next notification write fails with a store error."""
    faulty = FaultyStore(ledger.store)
    faulty.fail_request(match=_notification_writes, error=lambda: StoreUnavailable("down"))
    return Ledger(faulty, clock=clock)


def _types(ledger: Ledger) -> list[str]:
    return [n.type for n in ledger.notifications.list(P, "bob")]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_low_balance_lost_to_a_store_error_is_one_line_and_the_retry_raises_it(
    err: Ledger, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        txn = _failing(err, clock).transactions.debit(P, "bob", "cash", 600, txn_id="d1")
    assert not txn.replay  # applied, answered as such
    assert _types(err) == []
    (record,) = _warnings(caplog)
    assert record.exc_info is None  # no traceback
    assert record.getMessage() == (
        "low-balance notification of d1 not written (StoreUnavailable: down); "
        "retrying the transaction raises it"
    )
    assert err.transactions.debit(P, "bob", "cash", 600, txn_id="d1").replay
    assert _types(err) == ["LowBalance"]


def test_a_hold_expired_lost_to_a_store_error_is_raised_by_the_next_job(
    err: Ledger, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    err.wallet.authorize(P, "bob", 100, hold_id="h1", expires_in=1)
    clock.advance(timedelta(seconds=2))
    with caplog.at_level(logging.WARNING):
        report = _failing(err, clock).wallet.expire_holds(P)
    assert report.expired_holds == [("bob", "h1")]
    assert _types(err) == []
    (record,) = _warnings(caplog)
    assert record.exc_info is None
    assert record.getMessage() == "HoldExpired of bob not written (StoreUnavailable: down)"
    for _ in range(2):  # the hold stayed in the due index: the next run raises it, once
        assert err.wallet.expire_holds(P).expired_holds == []
    assert _types(err) == ["HoldExpired"]
    assert len(err.notifications.history(P, "bob").notifications) == 1


def _undue_write(actions: Sequence[Action]) -> bool:
    """The write that takes a settled hold out of the due index (alone, no record)."""
    return len(actions) == 1 and action_key(actions[0]).sk == "H#h1"


def test_a_store_error_taking_an_expired_hold_out_of_the_index_fails_nothing(
    err: Ledger, clock: ManualClock
) -> None:
    """A read that expires a hold lazily answers even if that last write fails: the
    hold stays in the due index, and the next job takes it out, raising nothing more."""
    err.wallet.authorize(P, "bob", 100, hold_id="h1", expires_in=1)
    clock.advance(timedelta(seconds=2))
    faulty = FaultyStore(err.store)
    faulty.fail_request(match=_undue_write, error=lambda: StoreUnavailable("down"))
    view = Ledger(faulty, clock=clock).wallet.balance(P, "bob")
    assert faulty.fired == 1
    assert {f.fund: f.available for f in view.funds}["cash"] == 1000
    assert err.wallet.hold(P, "h1").status == "expired"
    assert _types(err) == ["HoldExpired"]
    for _ in range(2):
        assert err.wallet.expire_holds(P).expired_holds == []
    assert len(err.notifications.history(P, "bob").notifications) == 1
    faulty = FaultyStore(err.store, record_writes=True)
    Ledger(faulty, clock=clock).wallet.expire_holds(P)
    assert faulty.written == []  # out of the index: the job writes nothing for it
