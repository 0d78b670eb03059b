"""Spend order over mixed grants and expiries, against a simple model (property tests)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tallybook.domain.wallet import Grant, allocate
from tallybook.errors import InsufficientFunds
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

from .conftest import P

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

T0 = datetime(2026, 1, 1, tzinfo=UTC)

grants_st = st.lists(
    st.tuples(st.integers(1, 500), st.integers(-3, 10)), max_size=6
)  # (amount, expiry in days from now; <= 0 means already expired)


def model(
    amount: int, grants: list[tuple[int, int]], store_credit: int, cash: int
) -> tuple[dict[str, int], list[int]]:
    """Greedy by hand: live grants by (expiry, position), then store credit, then cash.

    Returns the amount taken per fund and what is left in each grant.
    """
    left = [a for a, _ in grants]
    order = sorted((d, i) for i, (_, d) in enumerate(grants) if d > 0)
    need = amount
    taken = {"bonus": 0, "store_credit": 0, "cash": 0}
    for _, i in order:
        x = min(left[i], need)
        left[i] -= x
        need -= x
        taken["bonus"] += x
    for name, avail in (("store_credit", store_credit), ("cash", cash)):
        x = min(avail, need)
        need -= x
        taken[name] += x
    taken["shortfall"] = need
    return taken, left


@given(
    amount=st.integers(1, 3000),
    grants=grants_st,
    store_credit=st.integers(0, 500),
    cash=st.integers(0, 500),
)
def test_allocate_matches_model(
    amount: int, grants: list[tuple[int, int]], store_credit: int, cash: int
) -> None:
    gs = [
        Grant(f"g{i}", a, a, T0 + timedelta(days=d, seconds=i - 10), T0)
        for i, (a, d) in enumerate(grants)
    ]
    alloc = allocate(amount, gs, {"store_credit": store_credit, "cash": cash}, T0)
    expected, left = model(amount, grants, store_credit, cash)
    assert alloc.shortfall == expected["shortfall"]
    for name in ("bonus", "store_credit", "cash"):
        assert alloc.funds.get(name, 0) == expected[name]
    by_grant = {t.grant_id: t.amount for t in alloc.grants}
    assert [a - by_grant.get(f"g{i}", 0) for i, (a, _) in enumerate(grants)] == left
    assert alloc.covered + alloc.shortfall == amount


_ids = itertools.count()


@given(
    amounts=st.lists(st.integers(1, 400), min_size=1, max_size=3),
    grants=grants_st,
    store_credit=st.integers(0, 300),
    cash=st.integers(0, 300),
)
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_service_debits_match_model(
    wallet: Ledger,
    clock: ManualClock,
    amounts: list[int],
    grants: list[tuple[int, int]],
    store_credit: int,
    cash: int,
) -> None:
    """Grants are awarded 4 days before the debits, so some have expired by then."""
    account = f"p{next(_ids)}"
    wallet.accounts.open(P, account)
    start = clock.now()
    for i, (a, d) in enumerate(grants):
        expires = start + timedelta(days=4 + d, seconds=i - 10)
        wallet.wallet.grant(P, account, a, expires_at=expires, txn_id=f"{account}-g{i}")
    if store_credit:
        wallet.wallet.credit(P, account, "store_credit", store_credit, txn_id=f"{account}-s")
    if cash:
        wallet.wallet.credit(P, account, "cash", cash, txn_id=f"{account}-c")
    clock.advance(timedelta(days=4))
    left = [a for a, _ in grants]
    sc, ca = store_credit, cash
    for k, amount in enumerate(amounts):
        live = [(a if d > 0 else 0, d) for a, d in zip(left, (d for _, d in grants), strict=True)]
        expected, after = model(amount, live, sc, ca)
        try:
            t = wallet.wallet.debit(P, account, amount, txn_id=f"{account}-d{k}")
        except InsufficientFunds:
            assert expected["shortfall"] > 0
            continue
        assert expected["shortfall"] == 0
        assert {f: -x for f, x in t.funds.items()} == {
            f: x for f, x in expected.items() if f != "shortfall" and x
        }
        left = [a2 if d > 0 else a1 for a1, a2, (_, d) in zip(left, after, grants, strict=True)]
        sc -= expected["store_credit"]
        ca -= expected["cash"]
    view = wallet.wallet.balance(P, account)
    live_bonus = sum(a for a, (_, d) in zip(left, grants, strict=True) if d > 0)
    assert (
        view.fund("bonus").available,
        view.fund("store_credit").available,
        view.fund("cash").available,
    ) == (live_bonus, sc, ca)
    assert wallet.wallet.check(P, account) == []  # the head's marks agree with the grants
    clock.set(start)
