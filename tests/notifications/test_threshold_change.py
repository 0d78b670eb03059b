"""A LowBalance follows its fund's threshold when the threshold changes: cleared,
or set to one the fund is at or above, dismisses it; still below keeps it.
SQLite and DynamoDB (and the in-memory engine)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tallybook.domain.model import default_funds
from tallybook.errors import StoreUnavailable
from tallybook.ledger import Ledger
from tallybook.reliability.faults import FaultyStore, touches
from tallybook.services.clock import ManualClock

P = "thr"


@pytest.fixture
def thr(ledger: Ledger) -> Ledger:
    """Program ``thr``: cash below 500 and store credit below 100 raise LowBalance;
    bob (cash 400), carol (cash 200) and dan (store credit 50) have one each."""
    limits = {"cash": 500, "store_credit": 100}
    funds = [
        replace(f, low_balance_threshold=limits[f.name]) if f.name in limits else f
        for f in default_funds("USD")
    ]
    ledger.programs.create(P, funds=funds)
    lows = [("bob", "cash", 400), ("carol", "cash", 200), ("dan", "store_credit", 50)]
    for account, fund, amount in lows:
        ledger.accounts.open(P, account)
        ledger.transactions.credit(P, account, fund, 1000, txn_id=f"{account}-c")
        ledger.transactions.debit(P, account, fund, 1000 - amount, txn_id=f"{account}-d")
    ledger.accounts.open(P, "erin")  # no LowBalance at all
    assert _low(ledger) == {"bob": "cash", "carol": "cash", "dan": "store_credit"}
    return ledger


def _low(ledger: Ledger) -> dict[str, object]:
    """account -> the fund of its active LowBalance."""
    out: dict[str, object] = {}
    for a in ("bob", "carol", "dan", "erin"):
        for n in ledger.notifications.list(P, a):
            if n.type == "LowBalance":
                out[a] = n.payload["fund"]
    return out


def test_clearing_a_threshold_dismisses_its_low_balances(thr: Ledger) -> None:
    thr.programs.set_low_balance_threshold(P, "cash", None)
    assert _low(thr) == {"dan": "store_credit"}  # another fund's stays
    (gone,) = thr.notifications.history(P, "bob").notifications
    assert (gone.status, gone.dismissed_by, gone.dismiss_reason) == (
        "dismissed",
        "threshold",
        "threshold_changed",
    )
    thr.programs.set_low_balance_threshold(P, "cash", None)  # again: nothing more
    assert len(thr.notifications.history(P, "bob").notifications) == 1


def test_lowering_a_threshold_dismisses_those_at_or_above_it(thr: Ledger) -> None:
    thr.programs.set_low_balance_threshold(P, "cash", 400)  # bob at it, carol below
    assert _low(thr) == {"carol": "cash", "dan": "store_credit"}
    (kept,) = [n for n in thr.notifications.list(P, "carol") if n.type == "LowBalance"]
    assert kept.payload["threshold"] == 500  # as raised
    thr.programs.set_low_balance_threshold(P, "cash", 600)  # raised: nothing raised by it
    assert _low(thr) == {"carol": "cash", "dan": "store_credit"}


def test_a_posting_after_the_change_follows_the_new_threshold(thr: Ledger) -> None:
    thr.programs.set_low_balance_threshold(P, "cash", 300)
    assert "bob" not in _low(thr)
    thr.transactions.debit(P, "bob", "cash", 150, txn_id="bob-d2")  # 250: below 300
    assert _low(thr)["bob"] == "cash"


def test_a_store_error_on_a_dismissal_is_answered_and_setting_it_again_finishes(
    thr: Ledger, clock: ManualClock
) -> None:
    faulty = FaultyStore(thr.store)
    faulty.fail_request(match=touches("ACCT#"))  # the first dismissal's write
    with pytest.raises(StoreUnavailable):
        Ledger(faulty, clock=clock).programs.set_low_balance_threshold(P, "cash", None)
    assert thr.programs.get(P, fresh=True).fund("cash").low_balance_threshold is None  # stored
    assert len(_low(thr)) == 3  # nothing dismissed yet
    thr.programs.set_low_balance_threshold(P, "cash", None)
    assert _low(thr) == {"dan": "store_credit"}
