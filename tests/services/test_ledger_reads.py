"""Ledger reads on both engines: balances, history order, time ranges, pages, lookups."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tallybook.domain.model import Entry
from tallybook.errors import NotFound, StoreValidationError, ValidationError
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.port import ItemStore
from tallybook.store.queries import encode_cursor

from .ledger_helpers import PROGRAM, open_accounts

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

#: entries of the long history: 10,000 in memory; DynamoDB Local is slow
LONG_HISTORY = {"memory": 10_000, "sqlite": 10_000, "dynamodb": 300}


def pages(
    ledger: Ledger, account: str, fund: str, *, limit: int, newest_first: bool, **kw: object
) -> list[list[Entry]]:
    out: list[list[Entry]] = []
    cursor: str | None = None
    while True:
        page = ledger.accounts.history(
            PROGRAM,
            account,
            fund,
            newest_first=newest_first,
            limit=limit,
            cursor=cursor,
            **kw,  # type: ignore[arg-type]
        )
        assert len(page.entries) <= limit
        out.append(page.entries)
        if page.cursor is None:
            return out
        cursor = page.cursor
        assert len(out) < 10_000, "pagination does not end"


def test_balances_are_one_request_whatever_the_history(ledger: Ledger, store: ItemStore) -> None:
    open_accounts(ledger, "alice")
    for i in range(30):
        ledger.transactions.credit(PROGRAM, "alice", "points", 1, txn_id=f"t{i}")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 5, txn_id="c")
    ledger.programs.get(PROGRAM)  # warm the program cache
    store.metrics.reset()
    balances = ledger.accounts.balances(PROGRAM, "alice")
    assert store.metrics.requests == 1
    assert {b.fund: (b.balance, b.available) for b in balances} == {
        "points": (30, 30),
        "cash": (5, 5),
        "store_credit": (0, 0),
        "bonus": (0, 0),
    }


def test_balances_of_an_unopened_account_is_not_found(ledger: Ledger) -> None:
    with pytest.raises(NotFound, match="ghost"):
        ledger.accounts.balances(PROGRAM, "ghost")
    with pytest.raises(NotFound):
        ledger.accounts.history(PROGRAM, "ghost", "points")


def test_opening_is_idempotent_and_keeps_balances(ledger: Ledger) -> None:
    acct, created = ledger.accounts.open(PROGRAM, "alice")
    assert created
    assert acct.version == 0
    ledger.transactions.credit(PROGRAM, "alice", "points", 9, txn_id="t1")
    again, created = ledger.accounts.open(PROGRAM, "alice")
    assert not created
    assert again.fund("points").balance == 9
    assert list(ledger.accounts.list_ids(PROGRAM)) == ["alice"]


def test_history_newest_and_oldest_first(ledger: Ledger, clock: ManualClock) -> None:
    open_accounts(ledger, "alice")
    for i in range(5):
        clock.advance(timedelta(seconds=10))
        ledger.transactions.credit(PROGRAM, "alice", "points", i + 1, txn_id=f"t{i}")
    newest = ledger.accounts.history(PROGRAM, "alice", "points").entries
    oldest = ledger.accounts.history(PROGRAM, "alice", "points", newest_first=False).entries
    assert [e.seq for e in newest] == [5, 4, 3, 2, 1]
    assert oldest == list(reversed(newest))
    assert [e.created_at for e in oldest] == sorted(e.created_at for e in oldest)
    assert ledger.accounts.history(PROGRAM, "alice", "cash").entries == []


def test_history_time_range_since_inclusive_until_exclusive(
    ledger: Ledger, clock: ManualClock
) -> None:
    open_accounts(ledger, "alice")
    start = clock.now()
    for hour in range(6):
        clock.set(start + timedelta(hours=hour))
        ledger.transactions.credit(PROGRAM, "alice", "points", 1, txn_id=f"h{hour}")
    since, until = start + timedelta(hours=2), start + timedelta(hours=5)
    page = ledger.accounts.history(PROGRAM, "alice", "points", since=since, until=until)
    assert [e.txn_id for e in page.entries] == ["h4", "h3", "h2"]
    page = ledger.accounts.history(
        PROGRAM, "alice", "points", since=since, until=until, newest_first=False
    )
    assert [e.txn_id for e in page.entries] == ["h2", "h3", "h4"]
    only_since = ledger.accounts.history(PROGRAM, "alice", "points", since=since)
    assert [e.txn_id for e in only_since.entries] == ["h5", "h4", "h3", "h2"]
    only_until = ledger.accounts.history(PROGRAM, "alice", "points", until=since)
    assert [e.txn_id for e in only_until.entries] == ["h1", "h0"]
    # a range with pages
    parts = pages(ledger, "alice", "points", limit=2, newest_first=False, since=start, until=until)
    assert [[e.txn_id for e in p] for p in parts] == [["h0", "h1"], ["h2", "h3"], ["h4"]]
    empty = ledger.accounts.history(PROGRAM, "alice", "points", since=start + timedelta(days=1))
    assert empty.entries == []
    assert empty.cursor is None


def test_history_range_excludes_other_funds(ledger: Ledger, clock: ManualClock) -> None:
    """Entries of funds sharing a key prefix ("cash" / "cashback") must not mix."""
    from tallybook.domain.model import FundSpec

    ledger.programs.create("p2", funds=[FundSpec("cash", "USD"), FundSpec("cashback", "USD")])
    ledger.accounts.open("p2", "alice")
    ledger.transactions.credit("p2", "alice", "cash", 1, txn_id="a")
    ledger.transactions.credit("p2", "alice", "cashback", 2, txn_id="b")
    cash = ledger.accounts.history("p2", "alice", "cash").entries
    assert [e.txn_id for e in cash] == ["a"]
    ranged = ledger.accounts.history(
        "p2",
        "alice",
        "cash",
        since=clock.now() - timedelta(days=1),
        until=clock.now() + timedelta(days=1),
    )
    assert [e.txn_id for e in ranged.entries] == ["a"]


def test_history_rejects_bad_parameters(ledger: Ledger, clock: ManualClock) -> None:
    open_accounts(ledger, "alice")
    with pytest.raises(ValidationError, match="limit"):
        ledger.accounts.history(PROGRAM, "alice", "points", limit=0)
    with pytest.raises(ValidationError, match="limit"):
        ledger.accounts.history(PROGRAM, "alice", "points", limit=1001)
    with pytest.raises(ValidationError, match="since"):
        ledger.accounts.history(PROGRAM, "alice", "points", since=clock.now(), until=clock.now())
    with pytest.raises(NotFound, match="gems"):
        ledger.accounts.history(PROGRAM, "alice", "gems")
    with pytest.raises(ValidationError):
        ledger.accounts.history(PROGRAM, "alice", "Points!")


@pytest.mark.slow
def test_a_long_history_paginates_completely_and_in_order(
    ledger: Ledger, engine: str, clock: ManualClock
) -> None:
    """10,000 real postings on SQLite (fewer on DynamoDB Local), paged both ways."""
    count = LONG_HISTORY[engine]
    open_accounts(ledger, "alice")
    for i in range(count):
        if i % 7 == 6:
            ledger.transactions.debit(PROGRAM, "alice", "points", 2, txn_id=f"t{i}")
        else:
            ledger.transactions.credit(PROGRAM, "alice", "points", 3, txn_id=f"t{i}")
        if i % 100 == 0:
            clock.advance(timedelta(milliseconds=1))
    expected_balance = sum(-2 if i % 7 == 6 else 3 for i in range(count))

    big, small = (100, 7) if engine == "dynamodb" else (1000, 100)
    oldest_pages = pages(ledger, "alice", "points", limit=big, newest_first=False)
    oldest = [e for p in oldest_pages for e in p]
    # full pages, and a cursor only while more entries exist
    assert [len(p) for p in oldest_pages] == [big] * (count // big) + (
        [count % big] if count % big else []
    )
    assert [e.seq for e in oldest] == list(range(1, count + 1))
    assert [e.txn_id for e in oldest] == [f"t{i}" for i in range(count)]
    running = 0
    for e in oldest:
        running += e.amount
        assert e.balance == running
    assert running == expected_balance
    assert ledger.accounts.get(PROGRAM, "alice").fund("points").balance == expected_balance

    newest_pages = pages(ledger, "alice", "points", limit=small, newest_first=True)
    newest = [e for p in newest_pages for e in p]
    assert [e.seq for e in newest] == list(range(count, 0, -1))
    assert all(len(p) == small for p in newest_pages[:-1])
    assert newest == list(reversed(oldest))
    report = ledger.check.account(PROGRAM, "alice")
    assert report.ok, report.violations[:5]
    assert report.entries == count


def test_transaction_by_id(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    txn = ledger.transactions.credit(PROGRAM, "alice", "points", 3, txn_id="t1")
    assert ledger.transactions.get(PROGRAM, "t1") == txn
    with pytest.raises(NotFound, match="t2"):
        ledger.transactions.get(PROGRAM, "t2")
    with pytest.raises(ValidationError):
        ledger.transactions.get(PROGRAM, "")


def test_transactions_for_an_order(ledger: Ledger, clock: ManualClock) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.transactions.credit(PROGRAM, "alice", "points", 50, txn_id="earn", order_id="o-1")
    clock.advance(timedelta(minutes=1))
    ledger.transactions.credit(PROGRAM, "bob", "points", 5, txn_id="other", order_id="o-2")
    clock.advance(timedelta(minutes=1))
    ledger.transactions.debit(PROGRAM, "alice", "points", 20, txn_id="refund", order_id="o-1")
    found = ledger.transactions.for_order(PROGRAM, "o-1")
    assert [t.id for t in found] == ["earn", "refund"]
    assert all(t.order_id == "o-1" for t in found)
    assert ledger.transactions.for_order(PROGRAM, "o-404") == []


def test_transactions_of_an_owner_newest_first_with_pages(
    ledger: Ledger, clock: ManualClock
) -> None:
    open_accounts(ledger, "alice", "bob")
    for i in range(7):
        clock.advance(timedelta(seconds=1))
        ledger.transactions.credit(PROGRAM, "alice", "points", 1, txn_id=f"a{i}")
    ledger.transactions.credit(PROGRAM, "bob", "points", 1, txn_id="b0")
    seen: list[str] = []
    cursor = None
    while True:
        page = ledger.transactions.for_owner(PROGRAM, "alice", limit=3, cursor=cursor)
        assert len(page.transactions) <= 3
        seen += [t.id for t in page.transactions]
        if page.cursor is None:
            break
        cursor = page.cursor
    assert seen == [f"a{i}" for i in range(6, -1, -1)]
    bob = ledger.transactions.for_owner(PROGRAM, "bob")
    assert [t.id for t in bob.transactions] == ["b0"]


def test_another_listings_cursor_is_refused_not_read_as_a_first_page(
    ledger: Ledger, clock: ManualClock
) -> None:
    open_accounts(ledger, "alice")
    for i in range(4):
        clock.advance(timedelta(seconds=1))
        ledger.transactions.credit(PROGRAM, "alice", "points", 1, txn_id=f"p{i}")
        ledger.transactions.credit(PROGRAM, "alice", "cash", 1, txn_id=f"c{i}")
    history = ledger.accounts.history(PROGRAM, "alice", "points", limit=2).cursor
    owned = ledger.transactions.for_owner(PROGRAM, "alice", limit=2).cursor
    assert history is not None
    assert owned is not None
    for foreign in (history, encode_cursor({}), encode_cursor({"e:cash": "E#points#1"})):
        with pytest.raises(StoreValidationError, match="does not belong"):
            ledger.transactions.for_owner(PROGRAM, "alice", limit=2, cursor=foreign)
    rest = ledger.transactions.for_owner(PROGRAM, "alice", limit=10, cursor=owned)
    assert [t.id for t in rest.transactions] == ["p2", "c2", "p1", "c1", "p0", "c0"]
