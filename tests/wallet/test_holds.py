"""Two-phase debits: authorize, capture (full or partial), void, expiry, concurrency."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

import pytest

from tallybook.domain.wallet import HoldStatus
from tallybook.errors import InsufficientFunds, InvalidState, NotFound, ValidationError
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.events import LedgerEvent
from tallybook.services.wallet.records import WalletTransaction
from tallybook.store import keys
from tallybook.store.forwarding import ForwardingStore
from tallybook.store.port import Action, Add, Item, ItemStore, Key, Update
from tallybook.store.records.wallet import grant_key

from .conftest import P, assert_consistent, available, fund

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def test_authorize_withholds_without_changing_balance(wallet: Ledger) -> None:
    fund(wallet, "alice", cash=1000, bonus=((100, 5),))
    r = wallet.wallet.authorize(P, "alice", 300, hold_id="h1")
    assert r.hold.amounts == {"bonus": 100, "cash": 200}
    assert r.transaction is not None
    assert r.transaction.held == {"bonus": 100, "cash": 200}
    view = wallet.wallet.balance(P, "alice")
    assert (view.fund("cash").total, view.fund("cash").withheld) == (1000, 200)
    assert (view.fund("bonus").total, view.fund("bonus").available) == (100, 0)
    assert view.total_available == 800
    assert wallet.accounts.get(P, "alice").fund("cash").balance == 1000
    assert_consistent(wallet, "alice")


def test_partial_capture_releases_the_rest(wallet: Ledger) -> None:
    fund(wallet, "alice", cash=1000, store_credit=100, bonus=((100, 5),))
    wallet.wallet.authorize(P, "alice", 500, hold_id="h1")
    r = wallet.wallet.capture(P, "h1", 250)
    assert r.hold.status == "captured"
    assert r.hold.captured == 250
    assert r.transaction is not None
    assert r.transaction.funds == {"bonus": -100, "store_credit": -100, "cash": -50}
    assert available(wallet, "alice") == {"bonus": 0, "store_credit": 0, "cash": 950, "total": 950}
    again = wallet.wallet.capture(P, "h1", 250)
    assert again.transaction is not None
    assert again.transaction.replay
    with pytest.raises(InvalidState, match="captured"):
        wallet.wallet.void(P, "h1")
    assert_consistent(wallet, "alice")


@pytest.mark.parametrize("amount", [None, 100, 250])
def test_capturing_a_captured_hold_again_is_refused_by_its_state(
    wallet: Ledger, amount: int | None
) -> None:
    """A partial capture releases the rest: capturing 'the rest' (no amount) or
    another amount afterwards was a 409 idempotency-conflict, as if a key had been
    reused; it is a 409 invalid-state naming what was captured."""
    fund(wallet, "alice", cash=1000)
    wallet.wallet.authorize(P, "alice", 500, hold_id="h1")
    wallet.wallet.capture(P, "h1", 200)
    with pytest.raises(InvalidState, match=r"already captured \(200 of 500, the rest released\)"):
        wallet.wallet.capture(P, "h1", amount)
    assert wallet.wallet.capture(P, "h1", 200).hold.captured == 200  # the same one replays
    assert available(wallet, "alice")["total"] == 800
    assert_consistent(wallet, "alice")


def test_capture_more_than_held_is_refused(wallet: Ledger) -> None:
    fund(wallet, "alice", cash=100)
    wallet.wallet.authorize(P, "alice", 50, hold_id="h1")
    with pytest.raises(ValidationError, match="holds 50"):
        wallet.wallet.capture(P, "h1", 51)
    assert wallet.wallet.capture(P, "h1").hold.captured == 50


def test_void_releases_bonus_back_to_its_grant(wallet: Ledger) -> None:
    fund(wallet, "alice", bonus=((100, 5),))
    wallet.wallet.authorize(P, "alice", 80, hold_id="h1")
    assert available(wallet, "alice")["bonus"] == 20
    r = wallet.wallet.void(P, "h1")
    assert r.hold.status == "voided"
    assert wallet.wallet.void(P, "h1").hold.status == "voided"
    assert wallet.wallet.grants(P, "alice")[0].available == 100
    with pytest.raises(InvalidState, match="voided"):
        wallet.wallet.capture(P, "h1")
    assert_consistent(wallet, "alice")


def test_release_to_an_expired_grant_goes_to_expiry(wallet: Ledger, clock: ManualClock) -> None:
    fund(wallet, "alice", bonus=((100, 1),))
    wallet.wallet.authorize(P, "alice", 60, hold_id="h1", expires_in=3 * 86400)
    clock.advance(timedelta(days=2))
    assert [e.amount for e in wallet.wallet.expire_grants(P)] == [40]
    r = wallet.wallet.void(P, "h1")
    assert r.transaction is not None
    assert r.transaction.funds == {"bonus": -60}
    assert wallet.transactions.system_balance(P, "@expiry") == {"bonus": 100}
    assert wallet.accounts.get(P, "alice").fund("bonus").balance == 0
    assert_consistent(wallet, "alice")


def test_holds_expire_lazily_and_capture_after_expiry_fails(
    wallet: Ledger, clock: ManualClock
) -> None:
    fund(wallet, "alice", cash=100)
    events: list[LedgerEvent] = []
    wallet.events.subscribe(events.append)
    wallet.wallet.authorize(P, "alice", 70, hold_id="h1", expires_in=60)
    clock.advance(timedelta(seconds=61))
    with pytest.raises(InvalidState, match="expired at"):
        wallet.wallet.capture(P, "h1")
    assert wallet.wallet.hold(P, "h1").status == "expired"
    assert available(wallet, "alice")["cash"] == 100
    assert [(e.type, e.source_id) for e in events] == [("HoldExpired", "h1")]
    with pytest.raises(InvalidState, match="expired at"):
        wallet.wallet.capture(P, "h1")
    assert wallet.wallet.void(P, "h1").hold.status == "expired"  # nothing left to release
    assert wallet.wallet.reconcile(P).lines() == []
    assert len(events) == 1
    assert_consistent(wallet, "alice")


def test_reconcile_expires_overdue_holds(wallet: Ledger, clock: ManualClock) -> None:
    fund(wallet, "alice", cash=100)
    wallet.wallet.authorize(P, "alice", 30, hold_id="h1", expires_in=60)
    wallet.wallet.authorize(P, "alice", 30, hold_id="h2", expires_in=3600)
    clock.advance(timedelta(minutes=2))
    assert wallet.wallet.reconcile(P).lines() == ["expired hold h1 of alice"]
    assert [h.id for h in wallet.wallet.holds(P, "alice", active_only=True)] == ["h2"]
    assert_consistent(wallet, "alice")


def test_unknown_hold_and_insufficient_authorization(wallet: Ledger) -> None:
    fund(wallet, "alice", cash=10)
    with pytest.raises(NotFound):
        wallet.wallet.capture(P, "nope")
    with pytest.raises(NotFound):
        wallet.wallet.capture(P, "alice-cash")  # a transaction, not a hold
    with pytest.raises(InsufficientFunds):
        wallet.wallet.authorize(P, "alice", 11, hold_id="h1")


def test_concurrent_authorizations_never_over_commit(wallet: Ledger, engine: str) -> None:
    """Writers in separate Ledger objects (no shared in-process lock) race on one account."""
    fund(wallet, "alice", cash=500, bonus=((200, 5), (100, 9)))
    workers, per_worker = (4, 3) if engine == "dynamodb" else (8, 6)
    ledgers = [Ledger(wallet.store, clock=wallet.clock) for _ in range(workers)]
    outcomes: list[str] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        for j in range(per_worker):
            try:
                wallet_i = ledgers[i].wallet
                wallet_i.authorize(P, "alice", 70, hold_id=f"h{i}-{j}")
                result = "ok"
            except InsufficientFunds:
                result = "short"
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outcomes) == workers * per_worker
    view = wallet.wallet.balance(P, "alice")
    assert all(f.available >= 0 for f in view.funds)
    assert outcomes.count("ok") == 800 // 70
    assert view.total_available == 800 - 70 * outcomes.count("ok")
    assert_consistent(wallet, "alice")


class _ThenWrite(ForwardingStore):
    """Runs ``before_write`` once, just before the next transaction reaches the store:
    what another process did between a planner's reads and its write."""

    def __init__(self, inner: ItemStore, before_write: Callable[[], object]) -> None:
        super().__init__(inner)
        self.before_write: Callable[[], object] | None = before_write

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        if self.before_write is not None:
            run, self.before_write = self.before_write, None
            run()
        super().transact_write(actions, token=token)


def test_void_planned_before_a_grant_expired_sends_its_bonus_to_expiry(
    wallet: Ledger, clock: ManualClock
) -> None:
    """A void plans while grant g0 (all reserved by the hold) is unexpired; before its
    write lands, g0 expires and reconcile takes it, empty, out of the due index. The
    void's bonus went back into g0 anyway: an expired grant nothing would expire
    again, counted by no balance view, with the bonus fund holding it for ever."""
    fund(wallet, "alice", bonus=((100, 1),))
    wallet.wallet.authorize(P, "alice", 100, hold_id="h1", expires_in=7 * 86400)
    clock.advance(timedelta(days=1) - timedelta(seconds=1))

    def expiry_runs_meanwhile() -> None:
        clock.advance(timedelta(seconds=2))
        wallet.wallet.reconcile(P)

    late = Ledger(_ThenWrite(wallet.store, expiry_runs_meanwhile), clock=clock)
    late.wallet.processor = wallet.wallet.processor
    assert late.wallet.void(P, "h1").hold.status.value == "voided"
    clock.advance(timedelta(days=1))
    wallet.wallet.reconcile(P)
    assert [g.available for g in wallet.wallet.grants(P, "alice", include_expired=True)] == [0]
    assert wallet.accounts.get(P, "alice").fund("bonus").balance == 0
    assert wallet.transactions.system_balance(P, "@expiry") == {"bonus": 100}
    assert_consistent(wallet, "alice")


def test_a_void_on_a_clock_behind_the_expiry_jobs_sends_the_bonus_to_expiry(
    wallet: Ledger, clock: ManualClock
) -> None:
    """The expiry job, its clock past g0's expiry, takes g0 (all reserved, so empty)
    out of the due index; a void by a process whose clock is still before that
    expiry must not hand the bonus back to g0, which nothing would expire again."""
    fund(wallet, "alice", bonus=((100, 1),))
    wallet.wallet.authorize(P, "alice", 100, hold_id="h1", expires_in=7 * 86400)
    behind = ManualClock(clock.now() + timedelta(days=1) - timedelta(seconds=1))
    clock.advance(timedelta(days=1, seconds=1))
    wallet.wallet.reconcile(P)  # g0 expired with nothing left: out of the due index
    late = Ledger(wallet.store, clock=behind)
    late.wallet.processor = wallet.wallet.processor
    assert late.wallet.void(P, "h1").hold.status.value == "voided"
    assert [g.available for g in wallet.wallet.grants(P, "alice", include_expired=True)] == [0]
    assert wallet.accounts.get(P, "alice").fund("bonus").balance == 0
    assert wallet.transactions.system_balance(P, "@expiry") == {"bonus": 100}
    assert wallet.wallet.check(P, "alice") == []


def test_wallet_check_reports_a_resolved_grant_that_holds_bonus(
    wallet: Ledger, clock: ManualClock
) -> None:
    fund(wallet, "alice", bonus=((100, 1),))
    wallet.wallet.authorize(P, "alice", 100, hold_id="h1")
    clock.advance(timedelta(days=1, seconds=1))
    wallet.wallet.reconcile(P)  # g0 expired with nothing left: out of the due index
    grant = wallet.wallet.grants(P, "alice", include_expired=True)[0]
    key = grant_key(P, "alice", grant.id, grant.expires_at)
    wallet.store.transact_write([Update(key, (Add("available", 100),))])
    problems = wallet.wallet.check(P, "alice")
    assert "alice/bonus: grant alice-g0 was resolved by expiry but holds 100" in problems


class _BeforeHeadRead(ForwardingStore):
    """Runs ``hook`` once, just before the next read of ``head``."""

    def __init__(self, inner: ItemStore, head: Key, hook: Callable[[], object]) -> None:
        super().__init__(inner)
        self.head = head
        self.hook: Callable[[], object] | None = hook

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        if self.hook is not None and key == self.head:
            run, self.hook = self.hook, None
            run()
        return super().get(key, consistent=consistent)


@pytest.mark.parametrize(
    ("first", "then", "answer"),
    [
        ("capture", "void", "hold h1 is captured; it cannot be voided"),
        ("void", "capture", "hold h1 is voided; it cannot be captured"),
        ("expire", "capture", "expired at .* it can no longer be captured"),
        ("expire", "void", None),  # voiding an expired hold returns it unchanged
    ],
)
def test_a_settlement_racing_another_answers_with_the_holds_state(
    wallet: Ledger, clock: ManualClock, first: str, then: str, answer: str | None
) -> None:
    """Another settlement of the hold commits while this one reads: it used to read
    the row still active and the head no longer withholding it, and failed with a
    422 'fund cash of alice would hold a negative amount' for a valid request."""
    fund(wallet, "alice", cash=1000)
    wallet.wallet.authorize(P, "alice", 100, hold_id="h1", expires_in=60)

    def settle(led: Ledger, op: str) -> object:
        if op == "capture":
            return led.wallet.capture(P, "h1", 40)
        if op == "void":
            return led.wallet.void(P, "h1")
        clock.advance(timedelta(seconds=61))
        return led.wallet.reconcile(P)

    racing = _BeforeHeadRead(
        wallet.store, keys.account_head(P, "alice"), lambda: settle(wallet, first)
    )
    late = Ledger(racing, clock=clock)
    if answer is None:
        assert late.wallet.void(P, "h1").hold.status is HoldStatus.EXPIRED
    else:
        with pytest.raises(InvalidState, match=answer):
            settle(late, then)
    assert racing.hook is None  # the other settlement did run in between
    assert_consistent(wallet, "alice")


class _AfterRead(ForwardingStore):
    """Runs ``hook`` once, just after the first read of ``watched``."""

    def __init__(self, inner: ItemStore, watched: Key, hook: Callable[[], object]) -> None:
        super().__init__(inner)
        self.watched = watched
        self.hook: Callable[[], object] | None = hook

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        item = super().get(key, consistent=consistent)
        if self.hook is not None and key == self.watched:
            run, self.hook = self.hook, None
            run()
        return item


@pytest.mark.parametrize("op", ["capture", "void"])
def test_a_settlement_that_found_the_hold_overdue_while_it_was_captured_answers_so(
    wallet: Ledger, clock: ManualClock, op: str
) -> None:
    """A capture applied just before the deadline (its answer lost) and its retry
    past the deadline: the retry read the hold row still active and overdue, found
    no record yet, and by the time it expired the hold the capture had committed.
    The retry was answered 'expired ... can no longer be captured' (final) though
    that very capture was applied; a void was answered 200 with a captured hold."""
    fund(wallet, "alice", cash=1000)
    wallet.wallet.authorize(P, "alice", 100, hold_id="h1", expires_in=60)
    deadline = clock.now() + timedelta(seconds=60)

    def first_capture_lands() -> None:
        clock.set(deadline - timedelta(seconds=1))
        wallet.wallet.capture(P, "h1", 40)
        clock.set(deadline + timedelta(seconds=1))

    racing = _AfterRead(wallet.store, keys.transaction(P, f"h1:{op}"), first_capture_lands)
    late = Ledger(racing, clock=clock)
    clock.set(deadline + timedelta(seconds=1))
    if op == "capture":
        result = late.wallet.capture(P, "h1", 40)
        assert result.transaction is not None
        assert result.transaction.replay
        assert result.hold.status is HoldStatus.CAPTURED
    else:
        with pytest.raises(InvalidState, match="hold h1 is captured; it cannot be voided"):
            late.wallet.void(P, "h1")
    assert racing.hook is None
    assert_consistent(wallet, "alice")


@pytest.mark.parametrize("write", ["debit", "authorize", "charged debit"])
@pytest.mark.parametrize("kind", ["hold", "held credit"])
def test_an_overdue_hold_withholds_nothing_before_any_read(
    wallet: Ledger, clock: ManualClock, write: str, kind: str
) -> None:
    """Past its deadline a hold (or a held credit past its release) no longer withholds,
    though no read or reconcile settled it yet: a debit or authorize was refused (and
    the refusal kept for its id), a charged debit charged what the wallet had."""
    fund(wallet, "alice", cash=100 if kind == "hold" else 0)
    if kind == "hold":
        wallet.wallet.authorize(P, "alice", 100, hold_id="h1", expires_in=60)
    else:
        due = clock.now() + timedelta(seconds=60)
        wallet.wallet.credit_held(P, "alice", "cash", 100, release_at=due, txn_id="h1")
    clock.advance(timedelta(seconds=60))
    w = wallet.wallet
    if write == "debit":
        assert w.debit(P, "alice", 70, txn_id="d1").funds == {"cash": -70}
    elif write == "authorize":
        assert w.authorize(P, "alice", 70, hold_id="h2").hold.amounts == {"cash": 70}
    else:
        t = w.debit(P, "alice", 130, txn_id="d1", on_shortfall="charge")
        assert (t.funds, t.charge and t.charge["amount"]) == ({"cash": -100}, 30)
    assert w.hold(P, "h1").status == ("expired" if kind == "hold" else "released")
    assert available(wallet, "alice")["cash"] == (0 if write == "charged debit" else 30)
    with pytest.raises(InsufficientFunds):
        w.debit(P, "alice", 1000, txn_id="d9")  # a real shortfall is still refused
    assert_consistent(wallet, "alice")


WRITES_AFTER_DUE: dict[str, Callable[[Ledger], WalletTransaction | None]] = {
    "credit": lambda led: led.wallet.credit(P, "alice", "store_credit", 5, txn_id="w1"),
    "grant": lambda led: led.wallet.grant(P, "alice", 5, expires_in_days=1, txn_id="w1"),
    "held credit": lambda led: (
        led.wallet.credit_held(
            P, "alice", "store_credit", 5, release_in_days=1, txn_id="w1"
        ).transaction
    ),
    "debit": lambda led: led.wallet.debit(P, "alice", 5, txn_id="w1"),
    "authorize": lambda led: led.wallet.authorize(P, "alice", 5, hold_id="w1").transaction,
    "capture": lambda led: led.wallet.capture(P, "h2", 5).transaction,
    "void": lambda led: led.wallet.void(P, "h2").transaction,
}


@pytest.mark.parametrize("write", list(WRITES_AFTER_DUE))
def test_a_write_records_the_availability_the_balance_view_shows(
    wallet: Ledger, clock: ManualClock, write: str
) -> None:
    """A write while a hold and a held credit were past their deadline recorded an
    availability that still withheld them, unlike the balance view read right after."""
    fund(wallet, "alice", cash=500)
    w = wallet.wallet
    w.authorize(P, "alice", 100, hold_id="h1", expires_in=60)
    w.authorize(P, "alice", 10, hold_id="h2", expires_in=3600)
    due = clock.now() + timedelta(seconds=60)
    w.credit_held(P, "alice", "cash", 70, release_at=due, txn_id="hc1")
    clock.advance(timedelta(seconds=60))
    t = WRITES_AFTER_DUE[write](wallet)
    assert t is not None
    assert t.availability == available(wallet, "alice")
    assert (w.hold(P, "h1").status, w.hold(P, "hc1").status) == ("expired", "released")
    assert_consistent(wallet, "alice")


def test_a_shortfall_after_a_settled_hold_says_what_is_available(
    wallet: Ledger, clock: ManualClock
) -> None:
    """Once one hold had expired while another stayed active (the head's mark of the
    next due hold stays behind), a real shortfall was refused as "a hold is being
    settled; retry" instead of naming what is available."""
    fund(wallet, "alice", cash=500)
    w = wallet.wallet
    w.authorize(P, "alice", 100, hold_id="h1", expires_in=5)
    w.authorize(P, "alice", 100, hold_id="h2", expires_in=60)
    clock.advance(timedelta(seconds=10))
    assert w.balance(P, "alice").total_available == 400  # settles h1
    with pytest.raises(InsufficientFunds, match="available 400, needed 1000"):
        w.authorize(P, "alice", 1000, hold_id="h3")
    with pytest.raises(InsufficientFunds, match="available 400, needed 1000"):
        w.debit(P, "alice", 1000, txn_id="d1")
    assert_consistent(wallet, "alice")


def test_grants_at_one_expiry_go_by_id_and_a_capture_spends_what_expired_meanwhile(
    wallet: Ledger, clock: ManualClock
) -> None:
    """docs/wallet.md: grants expiring at the same time are spent in grant id order;
    a capture spends the bonus its hold reserved from a grant that expired since."""
    fund(wallet, "alice", cash=100)
    w = wallet.wallet
    soon = clock.now() + timedelta(seconds=10)
    for grant in ("gB", "gA"):
        w.grant(P, "alice", 30, expires_at=soon, txn_id=grant)
    w.grant(P, "alice", 30, expires_at=soon + timedelta(seconds=10), txn_id="gC")
    r = w.authorize(P, "alice", 100, hold_id="h1", expires_in=60)
    assert [t.grant_id for t in r.hold.grants] == ["gA", "gB", "gC"]
    clock.advance(timedelta(seconds=15))  # gA and gB expired, gC not
    t = w.capture(P, "h1", 40).transaction
    assert t is not None
    assert t.grants == [
        {"grant_id": "gA", "expires_at": t.grants[0]["expires_at"], "amount": -30},
        {"grant_id": "gB", "expires_at": t.grants[1]["expires_at"], "amount": -10},
    ]
    # gB's other 20 expired with it (@expiry), gC's 30 and the cash went back
    assert t.funds == {"bonus": -60}
    assert available(wallet, "alice") == {
        "bonus": 30,
        "store_credit": 0,
        "cash": 100,
        "total": 130,
    }
    assert_consistent(wallet, "alice")
