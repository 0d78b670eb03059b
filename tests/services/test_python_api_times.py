"""Times given to the Python API: an aware ``datetime``, or a ValidationError.

A naive ``datetime`` as a history bound raised ``TypeError`` (compared with an
aware one); as an earn's ``at`` or a notification's ``expires_at`` it was read
in the machine's local zone; a string or number as a grant's ``expires_at`` or
a held credit's ``release_at`` raised ``AttributeError``. Nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tallybook.errors import ConfigError, NotFound, ValidationError
from tallybook.ledger import Ledger

from .ledger_helpers import PROGRAM, open_accounts, state

pytestmark = pytest.mark.unit

NAIVE = datetime(2030, 1, 1)
NOT_TIMES: list[Any] = [NAIVE, "2030-01-01T00:00:00Z", 1_900_000_000, 1.5]


def _calls(when: Any) -> list[tuple[str, Callable[[Ledger], object]]]:
    aware = datetime.now(UTC) + timedelta(days=1)
    return [
        ("history since", lambda led: led.accounts.history(PROGRAM, "alice", "cash", since=when)),
        (
            "history until",
            lambda led: led.accounts.history(PROGRAM, "alice", "cash", since=aware, until=when),
        ),
        (
            "notification history since",
            lambda led: led.notifications.history(PROGRAM, "alice", since=when, until=aware),
        ),
        (
            "notification history until",
            lambda led: led.notifications.history(PROGRAM, "alice", until=when),
        ),
        ("earn at", lambda led: led.loyalty.earn(PROGRAM, "alice", "o-1", 1000, at=when)),
        (
            "notification expires_at",
            lambda led: led.notifications.add(PROGRAM, "alice", "Promo", {}, expires_at=when),
        ),
        (
            "grant expires_at",
            lambda led: led.wallet.grant(PROGRAM, "alice", 10, expires_at=when, txn_id="g-1"),
        ),
        (
            "credit_held release_at",
            lambda led: led.wallet.credit_held(
                PROGRAM, "alice", "cash", 10, release_at=when, txn_id="h-1"
            ),
        ),
    ]


@pytest.mark.parametrize("when", NOT_TIMES, ids=["naive", "str", "int", "float"])
def test_a_time_must_be_an_aware_datetime(ledger: Ledger, when: Any) -> None:
    open_accounts(ledger, "alice")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")
    before = state(ledger, "alice")
    for name, call in _calls(when):
        with pytest.raises(ValidationError) as info:
            call(ledger)
        assert "datetime" in info.value.message or "time zone" in info.value.message, name
        assert state(ledger, "alice") == before, name
    assert ledger.notifications.list(PROGRAM, "alice") == []
    for txn in ("g-1", "h-1", "order:o-1"):
        with pytest.raises(NotFound):
            ledger.transactions.get(PROGRAM, txn)


@pytest.mark.parametrize("start", NOT_TIMES)
def test_a_manual_clock_takes_only_aware_times(start: Any) -> None:
    # a naive start made every posting raise TypeError (naive minus aware);
    # a string or number raised AttributeError at the first posting
    from tallybook.services.clock import ManualClock

    with pytest.raises(ValidationError, match="ManualClock start"):
        ManualClock(start)
    clock = ManualClock()
    with pytest.raises(ValidationError, match="ManualClock t"):
        clock.set(start)
    assert clock.now() == datetime(2026, 1, 1, tzinfo=UTC)


def test_a_manual_clock_in_another_zone_answers_utc() -> None:
    # created_at came back as 2026-01-01T00:00:00+02:00
    from datetime import timezone

    from tallybook.services.clock import ManualClock
    from tallybook.store.memory import MemoryStore

    start = datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    clock = ManualClock(start)
    ledger = Ledger(MemoryStore(), clock=clock)
    ledger.programs.create(PROGRAM)
    open_accounts(ledger, "alice")
    txn = ledger.transactions.credit(PROGRAM, "alice", "cash", 5, txn_id="t1")
    assert txn.created_at == start
    assert txn.created_at.tzinfo is UTC
    clock.set(start + timedelta(days=1))
    assert clock.now().tzinfo is UTC


class _NaiveClock:
    def now(self) -> datetime:
        return datetime(2026, 1, 1)


class _LocalClock:
    def now(self) -> datetime:
        from datetime import timezone

        return datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))


@pytest.mark.parametrize("clock", [_NaiveClock(), _LocalClock(), "SystemClock", 5])
def test_a_ledger_refuses_a_clock_that_is_not_one(clock: Any) -> None:
    # a naive clock made every posting raise TypeError; the class SystemClock
    # (not an instance) raised TypeError and 5 AttributeError, at the first posting
    from tallybook.services.clock import SystemClock
    from tallybook.store.memory import MemoryStore

    if clock == "SystemClock":
        clock = SystemClock
    with pytest.raises(ConfigError, match="is not a Clock"):
        Ledger(MemoryStore(), clock=clock)
    assert Ledger(MemoryStore(), clock=SystemClock()).clock.now().tzinfo is not None


def test_opening_a_store_with_a_clock_that_is_not_one_makes_no_file(tmp_path: Path) -> None:
    """``Ledger.open(url, clock=5)`` opened (so created) the SQLite file, then
    refused the clock, leaving the file behind and the store open."""
    with pytest.raises(ConfigError, match="is not a Clock"):
        Ledger.open(f"sqlite:///{tmp_path / 'new.db'}", clock=5)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
