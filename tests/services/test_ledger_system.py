"""System accounts stay off the hot path, and ``ledger.check`` finds what is wrong."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import pytest

from tallybook.domain.model import SYSTEM_ACCOUNTS, Leg
from tallybook.ledger import Ledger
from tallybook.reliability.faults import FaultyStore
from tallybook.services.clock import ManualClock
from tallybook.store import keys
from tallybook.store.forwarding import ForwardingStore
from tallybook.store.port import Item, ItemStore, Key, Set

from .ledger_helpers import PROGRAM, open_accounts

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def test_no_item_is_written_by_every_transaction(store: ItemStore, clock: ManualClock) -> None:
    faulty = FaultyStore(store, record_writes=True)
    ledger = Ledger(faulty, clock=clock)
    ledger.programs.create(PROGRAM)
    accounts = [f"c{i}" for i in range(8)]
    open_accounts(ledger, *accounts)
    faulty.written.clear()
    n = 48
    for i in range(n):
        account = accounts[i % len(accounts)]
        if i >= len(accounts) and i % 3 == 2:
            ledger.transactions.debit(PROGRAM, account, "points", 1, txn_id=f"d{i}")
        else:
            ledger.transactions.credit(PROGRAM, account, "points", 5, txn_id=f"c{i}")
    assert len(faulty.written) == n
    writes = Counter(k for keys_ in faulty.written for k in set(keys_))
    hottest, count = writes.most_common(1)[0]
    assert count < n / 2, f"{hottest} was written by {count} of {n} transactions"

    # the system side rides on the customer head each posting writes anyway:
    # a credit or debit writes its record, one head and one entry, nothing more
    assert all(len(keys_) == 3 for keys_ in faulty.written)
    assert not [k for k in writes if k.pk.startswith("SYS#")]
    assert store.batch_get(keys.system_shards(PROGRAM, "@external")) == []
    expected = -sum(-1 if i >= len(accounts) and i % 3 == 2 else 5 for i in range(n))
    assert ledger.transactions.system_balance(PROGRAM, "@external") == {"points": expected}
    assert ledger.check.program(PROGRAM).ok


def test_system_balance_of_an_unknown_account_is_not_found(ledger: Ledger) -> None:
    from tallybook.errors import NotFound

    assert ledger.transactions.system_balance(PROGRAM, "@issuance") == {}
    with pytest.raises(NotFound):
        ledger.transactions.system_balance(PROGRAM, "@nope")


def _workload(ledger: Ledger) -> None:
    open_accounts(ledger, "alice", "bob", "carol")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 500, txn_id="w1")
    ledger.transactions.post(
        PROGRAM,
        [Leg("alice", "points", 40), Leg("bob", "points", 60), Leg("@issuance", "points", -100)],
        txn_id="w2",
        type="earn",
    )
    ledger.transactions.transfer(PROGRAM, "alice", "carol", "cash", 120, txn_id="w3")
    ledger.transactions.post(
        PROGRAM, [Leg("bob", "points", -25), Leg("@redemption", "points", 25)], txn_id="w4"
    )
    ledger.transactions.adjust(PROGRAM, "carol", "store_credit", 15, txn_id="w5")
    ledger.transactions.debit(PROGRAM, "carol", "cash", 20, txn_id="w6")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 500, txn_id="w1")  # replay


def test_check_finds_no_violation_after_a_workload(ledger: Ledger) -> None:
    _workload(ledger)
    report = ledger.check.program(PROGRAM)
    assert report.ok, report.violations
    assert report.accounts == 3
    assert report.entries == 8
    assert report.transactions == 8  # (account, txn) pairs checked against records
    assert report.unit_totals == {"points": 0, "USD": 0}
    balances = {s: ledger.transactions.system_balance(PROGRAM, s) for s in SYSTEM_ACCOUNTS}
    assert balances["@issuance"] == {"points": -100}
    assert balances["@redemption"] == {"points": 25}
    assert balances["@external"] == {"cash": -480}
    assert balances["@adjustment"] == {"store_credit": -15}


def test_check_finds_an_entry_with_a_wrong_balance(ledger: Ledger, store: ItemStore) -> None:
    _workload(ledger)
    (last,) = ledger.accounts.history(PROGRAM, "carol", "cash", limit=1).entries
    key = keys.entry(PROGRAM, "carol", "cash", 0, 0)
    bad_key = Key(key.pk, keys.entry_prefix("cash") + "9" * 16 + f"#{last.seq + 1:012d}")
    store.put(
        {
            **bad_key.as_item(),
            "program": PROGRAM,
            "account": "carol",
            "fund": "cash",
            "unit": "USD",
            "seq": last.seq + 1,
            "amount": 10,
            "balance": last.balance + 11,
            "txn_id": "forged",
            "type": "credit",
            "created_at": "2026-01-01T00:00:00.000000Z",
        }
    )
    report = ledger.check.program(PROGRAM)
    assert not report.ok
    text = "\n".join(report.violations)
    assert "invariant 1: carol/cash seq 3: balance 111 != running sum 110" in text
    assert "carol/cash: balance 100 != sum of entries 110" in text
    assert "transaction forged which has no record" in text
    assert not any("alice" in v or "bob" in v for v in report.violations)


def test_check_finds_a_gap_and_a_tampered_head(ledger: Ledger, store: ItemStore) -> None:
    _workload(ledger)
    entries = ledger.accounts.history(PROGRAM, "alice", "cash", newest_first=False).entries
    first = entries[0]
    store.delete(
        keys.entry(PROGRAM, "alice", "cash", _us_of(store, "alice", "cash", first.seq), first.seq)
    )
    head = ledger.accounts.get(PROGRAM, "bob")
    funds = {
        name: {"balance": s.balance, "held": s.held, "seq": s.seq, "last_us": s.last_us}
        for name, s in head.funds.items()
    }
    funds["points"]["balance"] += 1
    store.update(keys.account_head(PROGRAM, "bob"), [Set("funds", funds)])  # type: ignore[arg-type]
    report = ledger.check.program(PROGRAM)
    text = "\n".join(report.violations)
    assert "invariant 1: alice/cash seq 2: expected sequence 1" in text
    assert "invariant 1: bob/points: balance 36 != sum of entries 35" in text
    assert "invariant 5: unit points does not sum to zero" in text


def test_check_finds_a_system_shard_out_of_balance(ledger: Ledger, store: ItemStore) -> None:
    _workload(ledger)
    from tallybook.store.port import Add

    store.update(keys.system_shard(PROGRAM, "@issuance", "x"), [Add("f_points", 7)])
    report = ledger.check.program(PROGRAM)
    assert report.violations == [
        "invariant 5: unit points does not sum to zero over all accounts (7)"
    ]
    assert ledger.check.account(PROGRAM, "alice").ok


def _us_of(store: ItemStore, account: str, fund: str, seq: int) -> int:
    for item in store.query_all(keys.account_partition(PROGRAM, account)):
        sk = str(item["sk"])
        if sk.startswith(keys.entry_prefix(fund)) and item["seq"] == seq:
            return int(sk.split("#")[2])
    raise AssertionError("entry not found")


class _KeysRead(ForwardingStore):
    """Counts the keys each ``batch_get`` asks for."""

    def __init__(self, inner: ItemStore) -> None:
        super().__init__(inner)
        self.batches: list[int] = []

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        self.batches.append(len(keys))
        return super().batch_get(keys, consistent=consistent)


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_one_system_balance_reads_only_that_accounts_shards(
    store: ItemStore, clock: ManualClock
) -> None:
    """``system_balance`` of one account read the shards of all five (80 keys);
    it now reads its own 16, and the answer is the same."""
    counted = _KeysRead(store)
    ledger = Ledger(counted, clock=clock)
    ledger.programs.create(PROGRAM)
    _workload(ledger)
    everything = ledger.transactions.system_balances(PROGRAM)
    for system in SYSTEM_ACCOUNTS:
        counted.batches.clear()
        assert ledger.transactions.system_balance(PROGRAM, system) == everything[system]
        shards = len(keys.system_shards(PROGRAM, system))
        assert shards == 16
        # the shards, then the heads of the program's 3 accounts
        assert counted.batches == [shards, 3], system


class _PostsAfterFirstHead(ForwardingStore):
    """Once armed, the first head read returns, then ``posts`` runs: a posting in
    flight between the check's reads of one account and the next."""

    def __init__(self, inner: ItemStore) -> None:
        super().__init__(inner)
        self.posts: Callable[[], None] | None = None

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        item = super().get(key, consistent=consistent)
        if self.posts is not None and key.sk == "HEAD":
            posts, self.posts = self.posts, None
            posts()
        return item


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_check_of_a_program_in_use_reports_no_posting_in_flight(
    store: ItemStore, clock: ManualClock
) -> None:
    """A credit, transfer, hold or notification committed while the check read the
    program was reported as a violation of invariants 1, 2, 5 or 6 (a live ledger
    failed its check); the check now reads again what a posting moved."""
    ledger = Ledger(store, clock=clock)
    ledger.programs.create(PROGRAM)
    open_accounts(ledger, "alice", "bob")
    for account in ("alice", "bob"):
        ledger.wallet.credit(PROGRAM, account, "cash", 100, txn_id=f"seed-{account}")
        ledger.notifications.add(PROGRAM, account, "Promo", {"n": 0})

    def posts() -> None:
        for n, account in enumerate(("alice", "bob")):
            other = "bob" if account == "alice" else "alice"
            ledger.wallet.credit(PROGRAM, account, "cash", 7, txn_id=f"c-{account}")
            ledger.transactions.transfer(PROGRAM, account, other, "cash", 5, txn_id=f"t-{n}")
            ledger.wallet.authorize(PROGRAM, account, 3, hold_id=f"h-{account}")
            ledger.notifications.add(PROGRAM, account, "Promo", {"n": 1})

    live = _PostsAfterFirstHead(store)
    checking = Ledger(live, clock=clock)
    live.posts = posts
    report = checking.check.program(PROGRAM)
    assert live.posts is None  # the postings ran during the check
    assert report.violations == []
    assert report.unit_totals["USD"] == 0
    assert checking.check.program(PROGRAM).ok


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_check_counts_an_account_opened_while_it_ran(store: ItemStore, clock: ManualClock) -> None:
    """The consistent view of the heads read only the accounts the pass had listed:
    one opened meanwhile (in a directory shard already read) that paid into a listed
    account made the program look 5 short of zero."""
    assert keys.shard_of("erin") < keys.shard_of("alice") < keys.shard_of("dave")
    ledger = Ledger(store, clock=clock)
    ledger.programs.create(PROGRAM)
    open_accounts(ledger, "alice", "dave")
    ledger.wallet.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")

    def posts() -> None:  # after alice's head is read, before dave's
        ledger.transactions.transfer(PROGRAM, "alice", "dave", "cash", 3, txn_id="t-1")
        open_accounts(ledger, "erin")
        ledger.wallet.credit(PROGRAM, "erin", "cash", 10, txn_id="c-erin")
        ledger.transactions.transfer(PROGRAM, "erin", "alice", "cash", 5, txn_id="t-2")

    live = _PostsAfterFirstHead(store)
    checking = Ledger(live, clock=clock)
    live.posts = posts
    report = checking.check.program(PROGRAM)
    assert live.posts is None
    assert report.violations == []
    assert report.accounts == 2  # erin was opened after the pass listed her shard
