"""Mappings and legs given to the Python API are checked before they are used.

``metadata`` that was not a mapping raised ``TypeError``/``ValueError`` from
``dict()`` (credit, debit, adjust, transfer, post, earn, redeem) or was taken
as empty when falsy; so did an account's ``attributes``, a notification's
``payload`` and ``set_rules(None)``; ``post`` raised ``TypeError`` or
``AttributeError`` for legs that were not a list of ``Leg`` or a leg whose
account was not a string. Each is now a ValidationError and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tallybook.domain.model import Leg
from tallybook.errors import NotFound, ValidationError
from tallybook.ledger import Ledger

from .ledger_helpers import PROGRAM, open_accounts, state

pytestmark = pytest.mark.unit

NOT_MAPPINGS: list[Any] = ["k=v", 7, ["k", "v"], False]


def _writes(bad: Any) -> list[tuple[str, Callable[[Ledger], object]]]:
    t = "t-1"
    return [
        (
            "credit",
            lambda led: led.transactions.credit(
                PROGRAM, "alice", "cash", 1, txn_id=t, metadata=bad
            ),
        ),
        (
            "debit",
            lambda led: led.transactions.debit(PROGRAM, "alice", "cash", 1, txn_id=t, metadata=bad),
        ),
        (
            "adjust",
            lambda led: led.transactions.adjust(
                PROGRAM, "alice", "cash", 1, txn_id=t, metadata=bad
            ),
        ),
        (
            "transfer",
            lambda led: led.transactions.transfer(
                PROGRAM, "alice", "bob", "cash", 1, txn_id=t, metadata=bad
            ),
        ),
        (
            "post",
            lambda led: led.transactions.post(
                PROGRAM, [Leg("alice", "cash", -1), Leg("bob", "cash", 1)], txn_id=t, metadata=bad
            ),
        ),
        ("earn", lambda led: led.loyalty.earn(PROGRAM, "alice", "o-1", 1000, metadata=bad)),
        (
            "redeem",
            lambda led: led.loyalty.redeem(PROGRAM, "alice", 1, "mug", txn_id=t, metadata=bad),
        ),
        ("payload", lambda led: led.notifications.add(PROGRAM, "alice", "Promo", bad)),
        ("attributes", lambda led: led.accounts.open(PROGRAM, "carol", attributes=bad)),
    ]


@pytest.mark.parametrize("bad", NOT_MAPPINGS, ids=["str", "int", "list", "false"])
def test_a_mapping_argument_that_is_not_a_mapping_is_refused(ledger: Ledger, bad: Any) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.loyalty.configure(PROGRAM, {})
    ledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")
    ledger.loyalty.earn(PROGRAM, "alice", "o-0", 1000)
    before = state(ledger, "alice", "bob")
    for name, call in _writes(bad):
        with pytest.raises(ValidationError):
            call(ledger)
        assert state(ledger, "alice", "bob") == before, name
    for txn in ("t-1", "order:o-1"):
        with pytest.raises(NotFound):
            ledger.transactions.get(PROGRAM, txn)
    with pytest.raises(NotFound):
        ledger.accounts.get(PROGRAM, "carol")
    assert ledger.notifications.list(PROGRAM, "alice") == []
    with pytest.raises(ValidationError):
        ledger.notifications.set_rules(PROGRAM, bad if bad is not False else None)


@pytest.mark.parametrize(
    "legs",
    [
        None,
        "alice",
        Leg("alice", "cash", 1),
        [("alice", "cash", -1), ("bob", "cash", 1)],
        [Leg(None, "cash", -1), Leg("bob", "cash", 1)],
    ],  # type: ignore[arg-type]
    ids=["none", "str", "one-leg", "tuples", "account-none"],
)
def test_post_refuses_legs_that_are_not_a_list_of_legs(ledger: Ledger, legs: Any) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")
    before = state(ledger, "alice", "bob")
    with pytest.raises(ValidationError):
        ledger.transactions.post(PROGRAM, legs, txn_id="p-1")
    assert state(ledger, "alice", "bob") == before
    with pytest.raises(NotFound):
        ledger.transactions.get(PROGRAM, "p-1")


@pytest.mark.parametrize("bad", [None, 7, ["a"], {}], ids=["none", "int", "list", "dict"])
def test_ids_and_lists_of_the_wrong_type_are_refused(ledger: Ledger, bad: Any) -> None:
    """A notification id, a webhook's event types or a billing program that is
    not what it should be is a ValidationError (it was a TypeError)."""
    open_accounts(ledger, "alice")
    calls: list[Callable[[], object]] = [
        lambda: ledger.notifications.get(PROGRAM, "alice", bad),
        lambda: ledger.notifications.dismiss(PROGRAM, "alice", bad),
        lambda: ledger.billing.bucket_seconds(bad),
        lambda: ledger.billing.ingest(
            bad,
            "r-1",
            partner="p",
            order_id="o",
            amount=1,
            currency="USD",
            rate="0.1",
            time="2026-01-01T00:00:00Z",
        ),
        lambda: ledger.webhooks.create(PROGRAM, "https://example.com/h", types=bad),
    ]
    for call in calls:
        with pytest.raises(ValidationError):
            call()
    assert ledger.webhooks.list(PROGRAM) == []
