"""Lots against a reference model: random earn / redeem / time / expire sequences.

The model keeps a plain list of lots ``[remaining, expires]``; redemption takes
from the oldest, expiry removes lots past their date, and no earn, redeem or
read counts a lot past its date, whether the expiry job ran or not. The ledger
(SQLite, for speed) must agree on the balance, every live lot and the points
expired.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tallybook.errors import InsufficientFunds
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.sqlite import SqliteStore

LIFETIME_DAYS = 5


@dataclass
class Model:
    lots: list[list[object]] = field(default_factory=list)  # [remaining, expires]
    expired: int = 0

    @property
    def balance(self) -> int:
        return sum(int(r) for r, _ in self.lots)  # type: ignore[call-overload]

    def earn(self, points: int, now: datetime) -> None:
        self.lots.append([points, now + timedelta(days=LIFETIME_DAYS)])

    def redeem(self, points: int) -> None:
        for lot in self.lots:
            take = min(int(lot[0]), points)  # type: ignore[call-overload]
            lot[0] = int(lot[0]) - take  # type: ignore[call-overload]
            points -= take
        self.lots = [lot for lot in self.lots if lot[0]]

    def expire(self, now: datetime) -> None:
        keep = []
        for lot in self.lots:
            if lot[1] <= now:  # type: ignore[operator]
                self.expired += int(lot[0])  # type: ignore[call-overload]
            else:
                keep.append(lot)
        self.lots = keep


ops = st.lists(
    st.one_of(
        st.tuples(st.just("earn"), st.integers(1, 500)),
        st.tuples(st.just("redeem"), st.integers(1, 600)),
        st.tuples(st.just("wait"), st.integers(1, 80)),  # hours
        st.tuples(st.just("expire"), st.just(0)),
    ),
    min_size=1,
    max_size=18,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_lots_follow_the_reference_model(steps: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(datetime(2026, 5, 1, 9, tzinfo=UTC))
        ledger = Ledger(SqliteStore(Path(tmp) / "m.db"), clock=clock)
        ledger.programs.create("shop")
        ledger.loyalty.configure(
            "shop", {"earn": {"unit_size": 1}, "expiry": {"days": LIFETIME_DAYS, "warn_days": 0}}
        )
        ledger.accounts.open("shop", "a")
        model = Model()
        for i, (op, n) in enumerate(steps):
            now = clock.now()
            model.expire(now)  # past their date: gone for the earn or redeem too
            if op == "earn":
                assert ledger.loyalty.earn("shop", "a", f"o{i}", n).points == n
                model.earn(n, now)
            elif op == "redeem":
                if n > model.balance:
                    try:
                        ledger.loyalty.redeem("shop", "a", n, "r", txn_id=f"r{i}")
                    except InsufficientFunds:
                        continue
                    raise AssertionError("redeem beyond the balance succeeded")
                ledger.loyalty.redeem("shop", "a", n, "r", txn_id=f"r{i}")
                model.redeem(n)
            elif op == "wait":
                clock.advance(timedelta(hours=n))
            else:
                ledger.loyalty.expire("shop")
                model.expire(now)
            live = ledger.loyalty.expiring("shop", "a", days=3650, limit=1000)
            model.expire(clock.now())
            assert [(lot.points, lot.expires) for lot in live] == [tuple(x) for x in model.lots]
            assert ledger.accounts.balances("shop", "a")[0].balance == model.balance
            assert ledger.transactions.system_balance("shop", "@expiry").get("points", 0) == (
                model.expired
            )
        assert ledger.check.program("shop").ok
        ledger.close()
