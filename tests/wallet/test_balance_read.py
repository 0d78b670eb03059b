"""The wallet balance view is one storage request in the common case, and stays
exact when the head's marks cannot be trusted (holds due, grants expired, the
bonus fund changed outside the wallet)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

from .conftest import P, available, fund

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def requests(ledger: Ledger, action: Callable[[], object]) -> dict[str, int]:
    ledger.programs.get(P, fresh=True)  # cached, as in a warm process
    ledger.store.metrics.reset()
    action()
    return {op: s.requests for op, s in ledger.store.metrics.snapshot().items()}


def test_balance_is_one_request_until_a_hold_or_grant_falls_due(
    wallet: Ledger, clock: ManualClock
) -> None:
    fund(wallet, "alice", cash=1000, store_credit=300, bonus=((200, 1), (100, 5)))
    read = lambda: wallet.wallet.balance(P, "alice")  # noqa: E731
    assert requests(wallet, read) == {"get": 1}
    wallet.wallet.authorize(P, "alice", 250, hold_id="h1", expires_in=3600)
    assert requests(wallet, read) == {"get": 1}
    assert available(wallet, "alice") == {
        "bonus": 50,
        "store_credit": 300,
        "cash": 1000,
        "total": 1350,
    }
    clock.advance(timedelta(hours=2))  # the hold is due: the read expires it
    assert requests(wallet, read)["get"] >= 1
    assert wallet.wallet.hold(P, "h1").status == "expired"
    assert requests(wallet, read) == {"get": 1}
    assert available(wallet, "alice")["bonus"] == 300
    clock.advance(timedelta(days=1))  # the first grant expired: grants are read again
    assert requests(wallet, read) == {"get": 1, "query": 1}
    assert available(wallet, "alice")["bonus"] == 100
    wallet.wallet.reconcile(P)  # moves the expired grant's 200 to @expiry
    assert requests(wallet, read) == {"get": 1}
    assert available(wallet, "alice")["bonus"] == 100
    assert wallet.wallet.check(P, "alice") == []


def test_bonus_fund_changed_outside_the_wallet(wallet: Ledger) -> None:
    """A plain ledger posting to the bonus fund creates no grant: the view counts
    grants only, debits never spend it, and wallet.check names the mismatch."""
    fund(wallet, "bob", cash=100, bonus=((50, 5),))
    wallet.transactions.credit(P, "bob", "bonus", 70, txn_id="loose")
    assert available(wallet, "bob")["bonus"] == 50
    t = wallet.wallet.debit(P, "bob", 120, txn_id="d1")
    assert t.funds == {"bonus": -50, "cash": -70}
    assert available(wallet, "bob") == {"bonus": 0, "store_credit": 0, "cash": 30, "total": 30}
    problems = wallet.wallet.check(P, "bob")
    assert any("bonus: balance 70 != grants 0" in p for p in problems), problems

    fund(wallet, "carol", bonus=((50, 5),))
    wallet.transactions.debit(P, "carol", "bonus", 20, txn_id="out")
    assert available(wallet, "carol")["bonus"] == 30  # never more than the fund has
    assert wallet.wallet.debit(P, "carol", 30, txn_id="d2").funds == {"bonus": -30}
    assert available(wallet, "carol")["bonus"] == 0


def test_grant_expiry_after_an_outside_debit_moves_only_what_is_there(
    wallet: Ledger, clock: ManualClock
) -> None:
    fund(wallet, "dave", bonus=((50, 1),))
    wallet.transactions.debit(P, "dave", "bonus", 20, txn_id="out")
    clock.advance(timedelta(days=2))
    report = wallet.wallet.reconcile(P)
    assert [(g.account, g.amount) for g in report.expired_grants] == [("dave", 30)]
    assert wallet.accounts.get(P, "dave").fund("bonus").balance == 0
    assert wallet.wallet.grants(P, "dave", include_expired=True)[0].available == 0
    assert wallet.wallet.check(P, "dave") == []
    assert wallet.check.program(P).ok


def test_availability_is_keyed_in_spend_order_on_every_engine(wallet: Ledger) -> None:
    """A record read back from DynamoDB listed ``total`` first and the funds in any order."""
    fund(wallet, "alice", cash=100)
    wallet.wallet.grant(P, "alice", 5, expires_in_days=1, txn_id="g1")
    order = ["bonus", "store_credit", "cash", "total"]
    assert list(wallet.wallet.transaction(P, "g1").availability) == order
    listed = wallet.wallet.transactions(P, "alice").transactions
    assert [list(t.availability) for t in listed] == [order, order]


def test_per_fund_maps_and_the_charge_read_back_as_written_on_every_engine(
    wallet: Ledger,
) -> None:
    """On DynamoDB a hold's amounts, its captured funds and a record's ``held`` came back
    in any fund order, and ``charge`` with ``reference`` before ``amount``."""
    fund(wallet, "alice", cash=1_000, store_credit=100, bonus=((50, 30),))
    spend = ["bonus", "store_credit", "cash"]
    authorised = wallet.wallet.authorize(P, "alice", 500, hold_id="h1").transaction
    assert authorised is not None
    assert list(authorised.held) == spend
    assert list(wallet.wallet.transaction(P, "h1").held) == spend
    assert list(wallet.wallet.hold(P, "h1").amounts) == spend
    wallet.wallet.capture(P, "h1", 450)
    assert list(wallet.wallet.hold(P, "h1").captured_funds) == spend
    wallet.wallet.debit(P, "alice", 2_000, txn_id="d1", on_shortfall="charge")
    charge = wallet.wallet.transaction(P, "d1").charge
    assert charge is not None
    assert list(charge) == ["amount", "reference"]
    listed = {t.id: t for t in wallet.wallet.transactions(P, "alice").transactions}
    assert list(listed["h1"].held) == spend
    assert list(listed["d1"].charge or {}) == ["amount", "reference"]


def test_a_hold_settled_beside_another_leaves_reads_and_writes_one_request(
    wallet: Ledger, clock: ManualClock
) -> None:
    """Once one hold expired while another stayed active, the head kept the expired
    hold's deadline as its mark for good (no write or reconcile renewed it): every
    balance read queried the holds, and every write too."""
    fund(wallet, "alice", cash=1000)
    w = wallet.wallet
    w.authorize(P, "alice", 100, hold_id="h1", expires_in=60)
    w.authorize(P, "alice", 100, hold_id="h2", expires_in=3600)
    clock.advance(timedelta(seconds=60))
    read = lambda: w.balance(P, "alice")  # noqa: E731
    assert requests(wallet, read)["query"] >= 1  # h1 is due: the read expires it
    assert w.hold(P, "h1").status == "expired"
    assert requests(wallet, read) == {"get": 1}
    credit = lambda: w.credit(P, "alice", "cash", 5, txn_id="c2")  # noqa: E731
    assert "query" not in requests(wallet, credit)
    assert requests(wallet, read) == {"get": 1}
    assert available(wallet, "alice")["cash"] == 905
    clock.advance(timedelta(seconds=3600))  # h2 is due now: the mark says so
    assert requests(wallet, read)["query"] >= 1
    assert w.hold(P, "h2").status == "expired"
    assert available(wallet, "alice")["cash"] == 1005
    assert w.check(P, "alice") == []
