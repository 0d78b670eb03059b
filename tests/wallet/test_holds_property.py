"""Holds, captures, voids, charged debits and the passing of time, against a model
of the funds (property test): what is available per fund after every step is
what spend order (bonus by earliest expiry, then store credit, then cash) and
the hold rules (a capture spends in that order and releases the rest; released
bonus returns to its grant, or is gone if the grant expired meanwhile; a hold
past its deadline releases everything) say, and the processor keeps exactly the
charges the debits record."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tallybook.errors import InsufficientFunds
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.wallet.charges import FakeChargeProcessor

from .conftest import P

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

_ids = itertools.count()


@dataclass
class _Grant:
    left: int
    expires: datetime


@dataclass
class _Hold:
    grants: list[tuple[str, int]]
    store_credit: int
    cash: int
    deadline: datetime

    @property
    def total(self) -> int:
        return sum(x for _, x in self.grants) + self.store_credit + self.cash


@dataclass
class _Model:
    clock: ManualClock
    store_credit: int = 0
    cash: int = 0
    grants: dict[str, _Grant] = field(default_factory=dict)
    holds: dict[str, _Hold] = field(default_factory=dict)
    charged: int = 0

    def live(self) -> list[tuple[str, int]]:
        """Unexpired grants with something left, earliest expiry first."""
        now = self.clock.now()
        live = sorted((g.expires, i, g.left) for i, g in self.grants.items() if g.expires > now)
        return [(i, left) for _, i, left in live if left]

    def allocate(self, amount: int) -> tuple[list[tuple[str, int]], int, int, int]:
        need, takes = amount, []
        for g, left in self.live():
            if need:
                takes.append((g, min(left, need)))
                need -= takes[-1][1]
        sc = min(self.store_credit, need)
        cash = min(self.cash, need - sc)
        return takes, sc, cash, need - sc - cash

    def take(self, takes: list[tuple[str, int]], sc: int, cash: int) -> None:
        for g, x in takes:
            self.grants[g].left -= x
        self.store_credit -= sc
        self.cash -= cash

    def release(self, grants: list[tuple[str, int]], sc: int, cash: int) -> None:
        now = self.clock.now()
        for g, x in grants:
            if self.grants[g].expires > now:  # else the grant expired meanwhile: gone
                self.grants[g].left += x
        self.store_credit += sc
        self.cash += cash

    def expire_holds(self) -> None:
        for hold_id, h in list(self.holds.items()):
            if h.deadline <= self.clock.now():
                self.release(h.grants, h.store_credit, h.cash)
                del self.holds[hold_id]

    def capture(self, hold_id: str, amount: int) -> None:
        h = self.holds.pop(hold_id)
        left, back = amount, []
        for g, x in sorted(h.grants, key=lambda t: (self.grants[t[0]].expires, t[0])):
            taken = min(x, left)
            left -= taken
            if x - taken:
                back.append((g, x - taken))
        sc = min(h.store_credit, left)
        cash = min(h.cash, left - sc)
        self.release(back, h.store_credit - sc, h.cash - cash)


OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "credit",
                "grant",
                "debit",
                "charge",
                "authorize",
                "authorize",
                "capture",
                "capture",
                "void",
                "wait",
            ]
        ),
        st.integers(1, 400),
        st.integers(0, 1000),
    ),
    min_size=1,
    max_size=14,
)


@given(store_credit=st.integers(0, 300), cash=st.integers(0, 300), ops=OPS)
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_holds_and_debits_match_the_model(
    wallet: Ledger,
    clock: ManualClock,
    processor: FakeChargeProcessor,
    store_credit: int,
    cash: int,
    ops: list[tuple[str, int, int]],
) -> None:
    account = f"h{next(_ids)}"
    wallet.accounts.open(P, account)
    start = clock.now()
    charged_before = processor.net_charged
    m = _Model(clock, store_credit, cash)
    w = wallet.wallet
    for fund, amount in (("store_credit", store_credit), ("cash", cash)):
        if amount:
            w.credit(P, account, fund, amount, txn_id=f"{account}-{fund}")
    for n, (op, amount, pick) in enumerate(ops):
        txn = f"{account}-{n}"
        m.expire_holds()
        if op == "credit":
            fund = "cash" if pick % 2 else "store_credit"
            w.credit(P, account, fund, amount, txn_id=txn)
            m.cash += amount if fund == "cash" else 0
            m.store_credit += amount if fund == "store_credit" else 0
        elif op == "grant":
            expires = clock.now() + timedelta(seconds=3600 + pick * 400)  # up to 4.7 days
            w.grant(P, account, amount, expires_at=expires, txn_id=txn)
            m.grants[txn] = _Grant(amount, expires)
        elif op in ("debit", "charge", "authorize"):
            takes, sc, cash, short = m.allocate(amount)
            try:
                if op == "authorize":
                    seconds = 3600 + pick * 300  # up to 3.5 days
                    w.authorize(P, account, amount, hold_id=txn, expires_in=seconds)
                    deadline = clock.now() + timedelta(seconds=seconds)
                    m.holds[txn] = _Hold(takes, sc, cash, deadline)
                else:
                    shortfall = "charge" if op == "charge" else "reject"
                    t = w.debit(P, account, amount, txn_id=txn, on_shortfall=shortfall)
                    assert (t.charge or {}).get("amount", 0) == short
                    m.charged += short
            except InsufficientFunds:
                assert short > 0
                assert op != "charge"
                continue
            assert short == 0 or op == "charge"
            m.take(takes, sc, cash)
        elif op in ("capture", "void") and m.holds:
            hold_id = sorted(m.holds)[pick % len(m.holds)]
            if op == "void":
                w.void(P, hold_id)
                h = m.holds.pop(hold_id)
                m.release(h.grants, h.store_credit, h.cash)
            else:
                captured = 1 + pick % m.holds[hold_id].total
                w.capture(P, hold_id, captured)
                m.capture(hold_id, captured)
        elif op == "wait":
            clock.advance(timedelta(seconds=pick * 100))  # up to 1.2 days
            m.expire_holds()
        view = w.balance(P, account)
        got = tuple(view.fund(f).available for f in ("bonus", "store_credit", "cash"))
        assert got == (sum(x for _, x in m.live()), m.store_credit, m.cash), (n, op)
        assert w.check(P, account) == []
    assert processor.net_charged - charged_before == m.charged
    assert wallet.check.account(P, account).ok
    clock.set(start)
