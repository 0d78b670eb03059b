"""``ledger.check`` over an account written between the reads of its invariant 2
and 6 checks (a hold voided, a notification superseded), on both engines: the
reads are no snapshot, so a write between them must not read as a violation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from tallybook.domain.model import ADJUSTMENT, Leg
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store import keys
from tallybook.store.forwarding import ForwardingStore
from tallybook.store.port import Item, ItemStore, Key, Page, Query, SortCondition


class WriteBetweenReads(ForwardingStore):
    """Runs ``write`` once, just before the first query of a sort-key prefix."""

    def __init__(self, inner: ItemStore) -> None:
        super().__init__(inner)
        self.prefix: str | None = None
        self.write: Callable[[], object] = lambda: None

    def run_query(self, q: Query) -> Page:
        if self.prefix is not None and q.sort is not None and q.sort.value == self.prefix:
            self.prefix = None
            self.write()
        return super().run_query(q)


def _ledgers(store: ItemStore, clock: ManualClock) -> tuple[Ledger, Ledger, WriteBetweenReads]:
    """The checking ledger (over the wrapper) and a writer over the same store."""
    watched = WriteBetweenReads(store)
    checking = Ledger(watched, clock=clock)
    checking.programs.create("shop")
    checking.accounts.open("shop", "alice")
    return checking, Ledger(store, clock=clock), watched


def test_a_hold_voided_between_reads_is_no_invariant_2_violation(
    store: ItemStore, clock: ManualClock
) -> None:
    checking, writer, watched = _ledgers(store, clock)
    writer.transactions.credit("shop", "alice", "cash", 1000, txn_id="c1")
    writer.wallet.authorize("shop", "alice", 400, hold_id="h1")
    watched.prefix = keys.WALLET_HOLD_PREFIX  # after the head is read, before the holds
    watched.write = lambda: writer.wallet.void("shop", "h1")
    assert checking.check.program("shop").violations == []
    assert watched.prefix is None  # the void did run between the reads


def test_a_notification_superseded_between_reads_is_no_invariant_6_violation(
    store: ItemStore, clock: ManualClock
) -> None:
    checking, writer, watched = _ledgers(store, clock)
    writer.notifications.add("shop", "alice", "Promo", {"n": 1})
    watched.prefix = keys.NOTIFICATION_HISTORY_PREFIX  # after the active items are read
    watched.write = lambda: writer.notifications.add("shop", "alice", "Promo", {"n": 2})
    assert checking.check.program("shop").violations == []
    assert watched.prefix is None


class TransferBeforeEachHeadRead(ForwardingStore):
    """Commits a transfer between the two accounts before every read of a head."""

    def __init__(self, inner: ItemStore) -> None:
        super().__init__(inner)
        self.write: Callable[[], object] = lambda: None

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        if key.sk == "HEAD":
            self.write()
        return super().get(key, consistent=consistent)

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        if any(k.sk == "HEAD" for k in keys):
            self.write()
        return super().batch_get(keys, consistent=consistent)


def _two_accounts(
    store: ItemStore, clock: ManualClock
) -> tuple[Ledger, Ledger, TransferBeforeEachHeadRead]:
    watched = TransferBeforeEachHeadRead(store)
    checking = Ledger(watched, clock=clock)
    checking.programs.create("shop")
    writer = Ledger(store, clock=clock)
    for account in ("c", "d"):
        writer.accounts.open("shop", account)
        writer.transactions.credit("shop", account, "cash", 1000, txn_id=f"{account}-c")
    return checking, writer, watched


def test_postings_of_several_accounts_with_a_system_leg_between_reads_are_checked(
    store: ItemStore, clock: ManualClock
) -> None:
    """Under steady postings of two accounts and a system account (c -5, d +3,
    @adjustment +2) invariant 5 came back "not checked" (exit 1) on every run:
    which head carries a posting's system counters was taken as unknown, so one
    read half-done could not be counted. The record names it (its owner, one of
    its accounts), so such a posting is now counted whole, its counters with the
    carrier's leg when that head was read before it."""
    checking, writer, watched = _two_accounts(store, clock)
    moved = iter(range(1, 1000))
    legs = [Leg("c", "cash", -5), Leg("d", "cash", 3), Leg(ADJUSTMENT, "cash", 2)]
    watched.write = lambda: writer.transactions.post("shop", legs, txn_id=f"t{next(moved)}")

    report = checking.check.program("shop")
    assert report.violations == []
    assert report.unit_totals == {"USD": 0, "points": 0}
    assert next(moved) > 3  # postings did commit between the reads

    legs.reverse()  # d, the first account of the legs, carries the counters now
    assert checking.check.program("shop").violations == []


def test_transfers_between_the_reads_of_their_accounts_are_no_violation(
    store: ItemStore, clock: ManualClock
) -> None:
    """Under steady transfers no two reads of every head agreed, so invariant 5 was
    "not checked" (exit 1) on every run of a busy program; a transfer read half-done
    (in one account's head, not yet in the other's) is now counted whole."""
    checking, writer, watched = _two_accounts(store, clock)
    moved = iter(range(1, 1000))
    watched.write = lambda: writer.transactions.transfer(
        "shop", "c", "d", "cash", 5, txn_id=f"t{next(moved)}"
    )

    report = checking.check.program("shop")
    assert report.violations == []
    assert report.unit_totals == {"USD": 0, "points": 0}
    assert next(moved) > 3  # transfers did commit between the reads

    # money from nowhere (a system counter made up) is not taken for a transfer
    head = cast(dict[str, Any], store.get(keys.account_head("shop", "c")))
    head["sys:@external:cash"] += 7
    store.put(head)
    (line,) = checking.check.program("shop").violations
    assert line.startswith("invariant 5: not checked")  # the transfers go on
    watched.write = lambda: None
    assert checking.check.program("shop").violations == [
        "invariant 5: unit USD does not sum to zero over all accounts (7)"
    ]


def test_wallet_check_of_a_hold_voided_between_reads_finds_nothing(
    store: ItemStore, clock: ManualClock
) -> None:
    """``wallet check`` read the head, then the holds, once: "alice/cash: head
    withholds 400, holds sum 0" on a healthy ledger (exit 1)."""
    checking, writer, watched = _ledgers(store, clock)
    writer.transactions.credit("shop", "alice", "cash", 1000, txn_id="c1")
    writer.wallet.authorize("shop", "alice", 400, hold_id="h1")
    watched.prefix = keys.WALLET_HOLD_PREFIX  # after the head is read, before the holds
    watched.write = lambda: writer.wallet.void("shop", "h1")
    assert checking.wallet.check("shop", "alice") == []
    assert watched.prefix is None  # the void did run between the reads


def _lose_last_entry(store: ItemStore, account_id: str, fund: str) -> None:
    """Damage: the account's last entry of ``fund`` is lost and its head rolled back
    to match (the account's side of that posting was never applied)."""
    entries = list(
        store.query_all(
            keys.account_partition("shop", account_id),
            SortCondition.begins_with(keys.entry_prefix(fund)),
        )
    )
    last = entries[-1]
    store.delete(Key(str(last["pk"]), str(last["sk"])))
    head = cast(dict[str, Any], store.get(keys.account_head("shop", account_id)))
    head["funds"][fund]["balance"] -= last["amount"]
    head["funds"][fund]["seq"] -= 1
    store.put(head)


def test_a_transfer_applied_on_one_side_only_is_an_invariant_5_violation(
    ledger: Ledger, store: ItemStore
) -> None:
    """A transfer whose credit was lost (one head and history without it, each
    consistent) passed: its missing leg was counted as a transfer still in flight,
    though no read of the account ever found it."""
    for account in ("c", "d"):
        ledger.accounts.open("shop", account)
        ledger.transactions.credit("shop", account, "cash", 1000, txn_id=f"{account}-c")
    ledger.transactions.transfer("shop", "c", "d", "cash", 5, txn_id="t1")
    _lose_last_entry(store, "d", "cash")
    assert ledger.check.program("shop").violations == [
        "invariant 5: unit USD does not sum to zero over all accounts (-5)"
    ]


def test_money_from_a_transfer_never_debited_is_an_invariant_5_violation(
    ledger: Ledger, store: ItemStore
) -> None:
    """Money made up on one account, its record naming a debit of another account
    that holds no such entry, was taken for a transfer in flight and passed."""
    for account in ("c", "d"):
        ledger.accounts.open("shop", account)
        ledger.transactions.credit("shop", account, "cash", 1000, txn_id=f"{account}-c")
    ledger.transactions.transfer("shop", "d", "c", "cash", 40, txn_id="t1")
    _lose_last_entry(store, "d", "cash")  # d's debit never happened: c got 40 from nowhere
    assert ledger.check.program("shop").violations == [
        "invariant 5: unit USD does not sum to zero over all accounts (40)"
    ]


class CreditBeforeEachHistoryRead(ForwardingStore):
    """Commits a credit to the account just before every read of its history (after
    its head is read): every read of the account is torn."""

    def __init__(self, inner: ItemStore) -> None:
        super().__init__(inner)
        self.write: Callable[[], object] = lambda: None

    def run_query(self, q: Query) -> Page:
        if q.sort is not None and q.sort.value == keys.ENTRIES_PREFIX:
            self.write()
        return super().run_query(q)


def test_an_account_posted_to_between_every_head_and_history_read_is_not_checked(
    store: ItemStore, clock: ManualClock
) -> None:
    """Its last torn read was reported as invariant 1 violations ("balance 10 != sum
    of entries 15") of a healthy account; it is now reported as not checked."""
    watched = CreditBeforeEachHistoryRead(store)
    checking = Ledger(watched, clock=clock)
    checking.programs.create("shop")
    writer = Ledger(store, clock=clock)
    writer.accounts.open("shop", "alice")
    credits = iter(range(1, 1000))
    watched.write = lambda: writer.transactions.credit(
        "shop", "alice", "cash", 5, txn_id=f"c{next(credits)}"
    )

    assert checking.check.account("shop", "alice").violations == [
        "account alice: not checked: it kept changing while it was read (3 times); "
        "run the check again"
    ]
    watched.write = lambda: None
    assert checking.check.program("shop").ok
