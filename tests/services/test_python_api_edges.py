"""Bad input to the Python API is a ``tallybook.errors`` error and writes nothing.

README: "Bad input never raises TypeError or ValueError and writes nothing".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest

from tallybook.domain.model import Leg, Transaction
from tallybook.errors import NotFound, ValidationError
from tallybook.ledger import Ledger
from tallybook.services.billing.sinks import DirectorySink
from tallybook.services.clock import ManualClock

from .ledger_helpers import PROGRAM, open_accounts, state

pytestmark = pytest.mark.unit

#: past Python's 4300-digit limit of int-to-str: ``str()`` of it raises ValueError
HUGE = 10**5000


def test_an_integer_past_4300_digits_is_refused_naming_the_field(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    before = state(ledger, "alice")
    with pytest.raises(ValidationError, match=r"payload\.n: a number has at most 38 digits"):
        ledger.notifications.add(PROGRAM, "alice", "Promo", {"n": HUGE})
    with pytest.raises(ValidationError, match=r"payload\.n"):
        ledger.notifications.add(PROGRAM, "alice", "Promo", {"n": [-HUGE]})
    for amount in (-HUGE, HUGE):
        with pytest.raises(ValidationError, match="amount"):
            ledger.wallet.credit(PROGRAM, "alice", "cash", amount, txn_id="t-1")
    assert state(ledger, "alice") == before
    assert ledger.notifications.list(PROGRAM, "alice") == []
    with pytest.raises(NotFound):
        ledger.wallet.transaction(PROGRAM, "t-1")


@pytest.mark.parametrize(
    "attributes",
    [
        {f"k{i}": "x" * 1000 for i in range(390)},  # 390 KB: opened, then every earn ItemTooLarge
        {f"k{i}": "x" for i in range(17)},
        {"k": "x" * 257},
        {"k" * 65: "x"},
        {"k": 5},
        {"k": ["x"]},
    ],
    ids=["400kb", "17-names", "long-value", "long-name", "int", "list"],
)
def test_account_attributes_have_the_http_bounds(ledger: Ledger, attributes: object) -> None:
    with pytest.raises(ValidationError, match="attribute"):
        ledger.accounts.open(PROGRAM, "carol", attributes=attributes)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        ledger.accounts.get(PROGRAM, "carol")


def test_an_account_with_the_most_attributes_allowed_still_earns(ledger: Ledger) -> None:
    attributes = {f"{i:02d}" + "k" * 62: "x" * 256 for i in range(16)}
    account, created = ledger.accounts.open(PROGRAM, "carol", attributes=attributes)
    assert created
    assert account.client_attributes == attributes
    ledger.loyalty.configure(PROGRAM, {})
    assert ledger.loyalty.earn(PROGRAM, "carol", "o-1", 1000).points > 0


class Cents(IntEnum):
    FIVE = 500


def _types(txn: Transaction) -> set[type]:
    return {type(leg.amount) for leg in txn.legs} | {
        type(leg.balance) for leg in txn.legs if leg.balance is not None
    }


def test_an_int_enum_amount_is_taken_as_a_plain_int(ledger: Ledger) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.loyalty.configure(PROGRAM, {})
    credit = ledger.wallet.credit(PROGRAM, "alice", "cash", Cents.FIVE, txn_id="w-1")
    assert credit.funds == {"cash": 500}
    assert type(credit.funds["cash"]) is int
    txns = [
        ledger.transactions.credit(PROGRAM, "alice", "cash", Cents.FIVE, txn_id="t-1"),
        ledger.transactions.debit(PROGRAM, "alice", "cash", Cents.FIVE, txn_id="t-2"),
        ledger.transactions.adjust(PROGRAM, "alice", "cash", Cents.FIVE, txn_id="t-3"),
        ledger.transactions.transfer(PROGRAM, "alice", "bob", "cash", Cents.FIVE, txn_id="t-4"),
        ledger.transactions.post(
            PROGRAM,
            [Leg("alice", "cash", -Cents.FIVE), Leg("bob", "cash", Cents.FIVE)],
            txn_id="t-5",
        ),
        ledger.transactions.post(
            PROGRAM,
            [Leg("alice", "cash", Cents.FIVE), Leg("@adjustment", "cash", -500)],
            txn_id="t-6",
        ),
        ledger.loyalty.earn(PROGRAM, "alice", "o-1", Cents.FIVE).transaction,
    ]
    for txn in txns:
        assert _types(txn) == {int}, txn.id
        assert _types(ledger.transactions.get(PROGRAM, txn.id)) == {int}, txn.id
    with pytest.raises(ValidationError, match="amount"):
        ledger.wallet.credit(PROGRAM, "alice", "cash", True, txn_id="w-2")
    with pytest.raises(ValidationError):
        ledger.transactions.post(
            PROGRAM, [Leg("alice", "cash", True), Leg("@adjustment", "cash", -1)], txn_id="t-7"
        )


def test_a_progress_that_is_not_callable_is_refused_before_the_job_starts(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    open_accounts(ledger, "alice")
    ledger.loyalty.configure(PROGRAM, {})
    event = {"id": "e-1", "account": "alice", "type": "TierChanged", "payload": {}}
    record = {
        "id": "r1",
        "partner": "acme",
        "order_id": "o1",
        "amount": 100,
        "currency": "USD",
        "rate": "0.1",
        "time": clock.now().isoformat(),
    }
    sink = DirectorySink(tmp_path / "out")
    jobs: list[Callable[[Any], object]] = [
        lambda p: ledger.check.program(PROGRAM, progress=p),
        lambda p: ledger.loyalty.expire(PROGRAM, progress=p),
        lambda p: ledger.loyalty.review_tiers(PROGRAM, progress=p),
        lambda p: ledger.wallet.reconcile(PROGRAM, progress=p),
        lambda p: ledger.wallet.expire_holds(PROGRAM, progress=p),
        lambda p: ledger.wallet.expire_grants(PROGRAM, progress=p),
        lambda p: ledger.notifications.ingestor.ingest_lines(
            PROGRAM, [json.dumps(event)], progress=p
        ),
        lambda p: ledger.billing.ingest_many(PROGRAM, [(1, record)], progress=p),
        lambda p: ledger.billing.reports.run(PROGRAM, sink=sink, progress=p),
    ]
    for job in jobs:
        with pytest.raises(ValidationError, match="progress must be a callable"):
            job(5)
    assert ledger.notifications.list(PROGRAM, "alice") == []
    assert not (tmp_path / "out").exists()  # no report file (a SQLite store's file is beside it)
    with pytest.raises(NotFound):
        ledger.billing.get(PROGRAM, "r1")


@pytest.mark.parametrize(
    "at",
    [
        datetime(1, 1, 2, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(9000, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, tzinfo=UTC),
    ],
    ids=["year-1", "1969", "9000", "9999"],
)
def test_an_earn_dated_outside_1970_to_9000_is_refused_as_over_http(
    ledger: Ledger, at: datetime
) -> None:
    open_accounts(ledger, "alice")
    ledger.loyalty.configure(PROGRAM, {})
    before = state(ledger, "alice")
    with pytest.raises(ValidationError, match="at must be between 1970 and 9000"):
        ledger.loyalty.earn(PROGRAM, "alice", "o-1", 1000, at=at)
    assert state(ledger, "alice") == before
    assert (
        ledger.loyalty.earn(
            PROGRAM, "alice", "o-2", 1000, at=datetime(1970, 1, 1, tzinfo=UTC)
        ).points
        > 0
    )
