"""Notifications the ledger raises survive a crash between the write and the raising.

A ledger over a :class:`FaultyStore` dies (:class:`Crash`) at each storage call
of a flow, before it or right after a write is applied; then the client does
what the docs say: it retries the same transaction id (or re-runs the job). It
must end with the notifications of a run that never crashed, each once, and
never with one that is no longer true (the fund was topped up meanwhile).
SQLite and DynamoDB.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tallybook.domain.model import default_funds
from tallybook.errors import TransactionConflict
from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash, CrashMode, FaultyStore
from tallybook.services.clock import ManualClock
from tallybook.services.notifications.delivery import RecordingDelivery
from tallybook.store.port import Action, action_key

P = "wal"
_ids = itertools.count()

Flow = Callable[[Ledger, str], Any]


@pytest.fixture
def wal(ledger: Ledger) -> Ledger:
    """Program ``wal``: the default funds, cash with a low-balance threshold of 500."""
    funds = [
        replace(f, low_balance_threshold=500) if f.name == "cash" else f
        for f in default_funds("USD")
    ]
    ledger.programs.create(P, funds=funds)
    return ledger


def _funded(ledger: Ledger, a: str) -> None:
    ledger.accounts.open(P, a)
    ledger.wallet.credit(P, a, "cash", 1000, txn_id=f"{a}-c")


def _low(ledger: Ledger, a: str) -> None:
    _funded(ledger, a)
    ledger.transactions.debit(P, a, "cash", 600, txn_id=f"{a}-d")  # 400: LowBalance


def _held(ledger: Ledger, a: str) -> None:
    _funded(ledger, a)
    ledger.wallet.authorize(P, a, 600, hold_id=f"{a}-h")  # available 400: LowBalance


def _held_overdue(ledger: Ledger, a: str) -> None:
    _funded(ledger, a)
    ledger.wallet.authorize(P, a, 600, hold_id=f"{a}-h", expires_in=1)  # LowBalance
    _advance(ledger, timedelta(seconds=2))


def _credit_held_low(ledger: Ledger, a: str) -> None:
    _low(ledger, a)
    release = ledger.clock.now() + timedelta(seconds=1)
    ledger.wallet.credit_held(P, a, "cash", 300, release_at=release, txn_id=f"{a}-s")
    _advance(ledger, timedelta(seconds=2))  # its release tops cash up to 700


def _advance(ledger: Ledger, by: timedelta) -> None:
    assert isinstance(ledger.clock, ManualClock)
    ledger.clock.advance(by)


FLOWS: dict[str, tuple[Callable[[Ledger, str], None], Flow]] = {
    # raise LowBalance
    "debit": (_funded, lambda led, a: led.transactions.debit(P, a, "cash", 600, txn_id=f"{a}-x")),
    "wallet_debit": (_funded, lambda led, a: led.wallet.debit(P, a, 700, txn_id=f"{a}-x")),
    "authorize": (_funded, lambda led, a: led.wallet.authorize(P, a, 600, hold_id=f"{a}-x")),
    # dismiss it
    "top_up": (_low, lambda led, a: led.transactions.credit(P, a, "cash", 300, txn_id=f"{a}-x")),
    "void": (_held, lambda led, a: led.wallet.void(P, f"{a}-h")),
    "capture": (_held, lambda led, a: led.wallet.capture(P, f"{a}-h", 100)),
    # the jobs: HoldExpired raised, LowBalance dismissed by an expiry or a release
    "expire_hold": (_held_overdue, lambda led, a: led.wallet.expire_holds(P)),
    "release_credit": (_credit_held_low, lambda led, a: led.wallet.expire_holds(P)),
}


def notifications(ledger: Ledger, a: str) -> list[tuple[object, ...]]:
    """What the member sees, in terms that do not name the account."""
    out: list[tuple[object, ...]] = []
    for n in ledger.notifications.history(P, a, newest_first=False).notifications:
        payload = {
            k: v.replace(a, "A") if isinstance(v, str) else v
            for k, v in n.payload.items()
            if k not in ("txn_id", "deadline")
        }
        by = n.dismissed_by.replace(a, "A") if n.dismissed_by else None
        out.append((n.type, n.status, sorted(payload.items()), n.dismiss_reason, by))
    return out


@pytest.mark.parametrize("mode", ["before", "after"])
@pytest.mark.parametrize("flow", sorted(FLOWS))
def test_a_crash_at_every_step_then_the_retry_raises_what_a_clean_run_does(
    wal: Ledger, clock: ManualClock, flow: str, mode: CrashMode
) -> None:
    setup, run = FLOWS[flow]
    clean = f"clean{next(_ids)}"
    setup(wal, clean)
    run(wal, clean)
    expected = notifications(wal, clean)
    assert expected  # every flow raises or dismisses one
    crashes = 0
    for n in range(1, 100):
        a = f"{flow[:6]}{next(_ids)}"
        setup(wal, a)
        faulty = FaultyStore(wal.store)
        faulty.crash_at(n, mode, reads=False)  # a read is no crash point of its own
        try:
            run(Ledger(faulty, clock=clock), a)
        except Crash:
            crashes += 1
        else:
            break
        run(wal, a)  # the client retries with the same ids
        assert notifications(wal, a) == expected, f"crash {mode} storage call {n}"
        run(wal, a)  # and again: nothing more
        assert notifications(wal, a) == expected, f"crash {mode} storage call {n}"
    else:  # pragma: no cover
        pytest.fail("the flow never completed")
    assert crashes >= 2
    assert wal.check.program(P).ok


def _crash_after_commit(ledger: Ledger, clock: ManualClock, run: Flow) -> None:
    faulty = FaultyStore(ledger.store)
    faulty.crash_at(1, "after")  # the posting is applied; the process dies
    with pytest.raises(Crash):
        run(Ledger(faulty, clock=clock))


def _active_low(ledger: Ledger, a: str) -> list[dict[str, object]]:
    return [n.payload for n in ledger.notifications.list(P, a) if n.type == "LowBalance"]


def test_a_retry_after_a_top_up_raises_nothing(wal: Ledger, clock: ManualClock) -> None:
    """The LowBalance lost with the crash is no longer true once the fund was
    topped up: the retry must not raise it."""
    _funded(wal, "bob")
    debit = lambda led: led.transactions.debit(P, "bob", "cash", 600, txn_id="d1")  # noqa: E731
    _crash_after_commit(wal, clock, debit)
    wal.transactions.credit(P, "bob", "cash", 500, txn_id="c2")  # 900: above again
    assert debit(wal).replay
    assert _active_low(wal, "bob") == []
    assert wal.notifications.history(P, "bob").notifications == []


def test_a_retry_after_another_drop_keeps_the_newer_low_balance(
    wal: Ledger, clock: ManualClock
) -> None:
    """A top-up whose dismissal was lost, retried after the fund dropped again: the
    new LowBalance is true and stays."""
    _low(wal, "bob")
    top_up = lambda led: led.transactions.credit(P, "bob", "cash", 300, txn_id="c2")  # noqa: E731
    _crash_after_commit(wal, clock, top_up)
    assert [p["txn_id"] for p in _active_low(wal, "bob")] == ["bob-d"]  # stale: 700 now
    wal.transactions.debit(P, "bob", "cash", 400, txn_id="d2")  # 300: a new crossing
    assert [p["txn_id"] for p in _active_low(wal, "bob")] == ["d2"]
    assert top_up(wal).replay
    assert [p["txn_id"] for p in _active_low(wal, "bob")] == ["d2"]


def test_a_lost_dismissal_is_made_by_the_retry(wal: Ledger, clock: ManualClock) -> None:
    _low(wal, "bob")
    top_up = lambda led: led.transactions.credit(P, "bob", "cash", 300, txn_id="c2")  # noqa: E731
    _crash_after_commit(wal, clock, top_up)
    assert len(_active_low(wal, "bob")) == 1
    assert top_up(wal).replay
    assert _active_low(wal, "bob") == []
    (gone,) = wal.notifications.history(P, "bob").notifications
    assert (gone.dismissed_by, gone.dismiss_reason) == ("c2", "topped_up")


def test_a_lost_low_balance_is_raised_once_by_the_retry(wal: Ledger, clock: ManualClock) -> None:
    delivered = RecordingDelivery()
    wal.notifications.delivery = delivered
    _funded(wal, "bob")
    debit = lambda led: led.transactions.debit(P, "bob", "cash", 600, txn_id="d1")  # noqa: E731
    _crash_after_commit(wal, clock, debit)
    assert _active_low(wal, "bob") == []
    for _ in range(3):
        assert debit(wal).replay
    assert _active_low(wal, "bob") == [
        {"fund": "cash", "balance": 400, "available": 400, "threshold": 500, "txn_id": "d1"}
    ]
    assert len(wal.notifications.history(P, "bob").notifications) == 1
    assert [n.type for n in delivered.delivered] == ["LowBalance"]  # delivered once


def test_a_fresh_posting_reads_and_writes_no_more(wal: Ledger) -> None:
    """The recovery costs nothing on the fresh path: a posting that crosses no
    threshold makes as many storage requests with it as without it."""
    _funded(wal, "bob")
    _funded(wal, "carol")

    def requests(txn_id: str, account: str) -> int:
        before = sum(s.requests for s in wal.store.metrics.by_operation.values())
        wal.transactions.debit(P, account, "cash", 10, txn_id=txn_id)
        return sum(s.requests for s in wal.store.metrics.by_operation.values()) - before

    with_recovery = requests("f1", "bob")
    listeners = wal.engine.replay_listeners[:]
    wal.engine.replay_listeners.clear()
    try:
        without = requests("f2", "carol")
    finally:
        wal.engine.replay_listeners[:] = listeners
    assert with_recovery == without == 2  # the head, the transaction


# -- TierChanged: the retry of an earn or a redeem, a re-run of the jobs -----------

TIERS = [
    {"name": "base", "threshold": 0},
    {"name": "silver", "threshold": 100},
    {"name": "gold", "threshold": 500},
]


@pytest.fixture
def shop(ledger: Ledger) -> Ledger:
    ledger.loyalty.configure(
        "shop",
        {
            "tiers": TIERS,
            "qualification": {"basis": "balance"},
            "downgrade": {"rule": "immediate"},
            "expiry": {"days": 10, "warn_days": 3},
        },
    )
    ledger.accounts.open("shop", "alice")
    return ledger


def _tiers(ledger: Ledger) -> list[tuple[object, object, str]]:
    """alice's TierChanged notifications, oldest first: (previous, tier, status)."""
    return [
        (n.payload["previous"], n.payload["tier"], n.status)
        for n in ledger.notifications.history("shop", "alice", newest_first=False).notifications
        if n.type == "TierChanged"
    ]


def _crash_after_write(ledger: Ledger, clock: ManualClock, run: Flow, n: int = 1) -> None:
    faulty = FaultyStore(ledger.store)
    faulty.crash_at(n, "after")
    with pytest.raises(Crash):
        run(Ledger(faulty, clock=clock))


def test_the_retry_of_an_earn_raises_its_lost_tier_change_once(
    shop: Ledger, clock: ManualClock
) -> None:
    earn = lambda led: led.loyalty.earn("shop", "alice", "o1", 20_000)  # noqa: E731
    _crash_after_write(shop, clock, earn)
    assert shop.loyalty.status("shop", "alice").tier == "silver"
    assert _tiers(shop) == []
    for _ in range(2):
        assert earn(shop).replay
    assert _tiers(shop) == [(None, "silver", "active")]


def test_the_retry_of_an_older_earn_does_not_supersede_a_newer_tier_change(
    shop: Ledger, clock: ManualClock
) -> None:
    earn = lambda led: led.loyalty.earn("shop", "alice", "o1", 20_000)  # noqa: E731
    _crash_after_write(shop, clock, earn)
    shop.loyalty.earn("shop", "alice", "o2", 40_000)  # 600 points: gold
    assert _tiers(shop) == [("silver", "gold", "active")]
    assert earn(shop).replay
    assert _tiers(shop) == [("silver", "gold", "active")]


def test_the_retry_of_a_redeem_raises_its_lost_tier_change(
    shop: Ledger, clock: ManualClock
) -> None:
    shop.loyalty.earn("shop", "alice", "o1", 60_000)  # gold
    redeem = lambda led: led.loyalty.redeem("shop", "alice", 450, "tv", txn_id="r1")  # noqa: E731
    _crash_after_write(shop, clock, redeem)
    assert redeem(shop).replay
    assert _tiers(shop)[-1] == ("gold", "silver", "active")
    assert len(_tiers(shop)) == 2


def test_a_re_run_of_the_expiry_job_raises_the_tier_change_its_crash_lost(
    shop: Ledger, clock: ManualClock
) -> None:
    shop.loyalty.earn("shop", "alice", "o1", 20_000)  # 200 points: silver
    clock.advance(timedelta(days=11))  # the lot expired: back to base
    _crash_after_write(shop, clock, lambda led: led.loyalty.expire("shop"))
    assert shop.loyalty.status("shop", "alice").tier == "base"
    assert _tiers(shop) == [(None, "silver", "active")]
    for _ in range(2):
        shop.loyalty.expire("shop")
    assert _tiers(shop) == [(None, "silver", "superseded"), ("silver", "base", "active")]


def test_a_re_run_of_the_review_raises_the_tier_change_its_crash_lost(
    ledger: Ledger, clock: ManualClock
) -> None:
    ledger.loyalty.configure(
        "shop",
        {
            "tiers": TIERS,
            "qualification": {"basis": "balance"},
            "downgrade": {"rule": "after_hold", "hold_months": 3},
        },
    )
    ledger.notifications.set_rules("shop", {"retention_days": 365})
    ledger.accounts.open("shop", "alice")
    ledger.loyalty.earn("shop", "alice", "o1", 60_000)  # 600 points: gold
    ledger.loyalty.redeem("shop", "alice", 400, "tv", txn_id="r1")  # 200: gold, held
    clock.advance(timedelta(days=200))
    _crash_after_write(ledger, clock, lambda led: led.loyalty.review_tiers("shop"))
    assert ledger.loyalty.status("shop", "alice").tier == "silver"
    for _ in range(2):
        assert ledger.loyalty.review_tiers("shop").downgraded == 0
    assert _tiers(ledger)[-1] == ("gold", "silver", "active")
    assert len(_tiers(ledger)) == 2


def test_a_re_run_of_the_expiry_job_warns_once(shop: Ledger, clock: ManualClock) -> None:
    """PointsExpiring is raised on every run while the points are ahead (its key
    names the points), so a run that died before it is made up by the next."""
    shop.loyalty.earn("shop", "alice", "o1", 5_000)  # 50 points, base
    clock.advance(timedelta(days=8))
    faulty = FaultyStore(shop.store)
    faulty.crash_at(1, "before")  # dies at its first storage call
    with pytest.raises(Crash):
        Ledger(faulty, clock=clock).loyalty.expire("shop")
    for _ in range(2):
        shop.loyalty.expire("shop")
    warned = [
        n
        for n in shop.notifications.history("shop", "alice").notifications
        if n.type == "PointsExpiring"
    ]
    assert [(n.payload["points"], n.status) for n in warned] == [(50, "active")]


def test_a_replay_past_the_history_retention_raises_nothing_again(
    shop: Ledger, clock: ManualClock
) -> None:
    """The key that makes a replayed TierChanged once lives as long as the history
    (90 days here): a replay after that, the change still the member's latest,
    must not raise a second one. (The store's TTL runs on real time: the earn is
    made 100 days in the past.)"""
    now = clock.now()
    clock.set(now - timedelta(days=100))
    earn = lambda led: led.loyalty.earn("shop", "alice", "o1", 20_000)  # noqa: E731
    first = earn(shop)
    (raised,) = shop.notifications.list("shop", "alice")
    clock.set(now)
    assert earn(shop).replay  # (its points expired meanwhile: that is a change of its own)
    seen = shop.notifications.history("shop", "alice", limit=1000).notifications
    seen += shop.notifications.list("shop", "alice")
    assert {n.id for n in seen if n.payload.get("txn_id") == first.transaction.id} <= {raised.id}


LOYALTY_FLOWS: dict[str, tuple[Callable[[Ledger, str], None], Flow]] = {
    "earn": (lambda led, p: None, lambda led, p: led.loyalty.earn(p, "alice", "o2", 20_000)),
    "redeem": (
        lambda led, p: led.loyalty.earn(p, "alice", "o1", 60_000),  # gold
        lambda led, p: led.loyalty.redeem(p, "alice", 450, "tv", txn_id="r1"),  # silver
    ),
    "expire": (
        lambda led, p: led.loyalty.earn(p, "alice", "o1", 20_000),  # silver
        lambda led, p: led.loyalty.expire(p),  # 2 days on: the lot expired, base
    ),
}


@pytest.mark.parametrize("mode", ["before", "after"])
@pytest.mark.parametrize("flow", sorted(LOYALTY_FLOWS))
def test_a_crash_at_every_step_of_a_loyalty_flow_then_the_retry(
    ledger: Ledger, clock: ManualClock, flow: str, mode: CrashMode
) -> None:
    """Each case in a program of its own (the expiry job runs program-wide); the
    retry is the same call again (an earn, a redeem, or the job's re-run)."""
    setup, run = LOYALTY_FLOWS[flow]
    start = clock.now()

    def program() -> str:
        p = f"lp{next(_ids)}"
        clock.set(start)
        ledger.programs.create(p)
        ledger.loyalty.configure(
            p,
            {
                "tiers": TIERS,
                "qualification": {"basis": "balance"},
                "downgrade": {"rule": "immediate"},
                # a short expiry: the job reads 4 index shards per day since the start
                "expiry": {"days": 1, "warn_days": 0},
            },
        )
        ledger.accounts.open(p, "alice")
        setup(ledger, p)
        if flow == "expire":
            clock.advance(timedelta(days=2))
        return p

    def seen(p: str) -> list[tuple[object, ...]]:
        history = ledger.notifications.history(p, "alice", newest_first=False).notifications
        return [(n.type, n.status, sorted(n.payload.items())) for n in history]

    clean = program()
    run(ledger, clean)
    expected = seen(clean)
    assert sum(t == "TierChanged" for t, _, _ in expected) == (1 if flow == "earn" else 2)
    crashes = 0
    for n in range(1, 200):
        p = program()
        faulty = FaultyStore(ledger.store)
        faulty.crash_at(n, mode)
        try:
            run(Ledger(faulty, clock=clock), p)
        except Crash:
            crashes += 1
        else:
            break
        for _ in range(2):
            run(ledger, p)
            assert seen(p) == expected, f"crash {mode} storage call {n}"
    else:  # pragma: no cover
        pytest.fail("the flow never completed")
    assert crashes >= 2


def test_a_re_run_of_the_expiry_job_raises_the_low_balance_its_crash_lost(
    shop: Ledger, clock: ManualClock
) -> None:
    shop.programs.set_low_balance_threshold("shop", "points", 100)
    shop.loyalty.earn("shop", "alice", "o1", 20_000)  # 200 points: silver
    clock.advance(timedelta(days=11))  # the lot expired: 0 points, base
    _crash_after_write(shop, clock, lambda led: led.loyalty.expire("shop"))
    assert "LowBalance" not in {n.type for n in shop.notifications.list("shop", "alice")}
    for _ in range(2):
        shop.loyalty.expire("shop")
    active = {n.type: n.payload for n in shop.notifications.list("shop", "alice")}
    assert active["LowBalance"]["available"] == 0
    assert active["TierChanged"]["tier"] == "base"
    history = shop.notifications.history("shop", "alice").notifications
    assert sorted(n.type for n in history) == ["LowBalance", "TierChanged", "TierChanged"]


def test_a_hold_expired_by_a_read_that_crashed_is_notified_by_the_job(
    wal: Ledger, clock: ManualClock
) -> None:
    """A balance read expires an overdue hold lazily and dies right after that
    commit: the hold stays in the due index, so the next job raises HoldExpired
    and dismisses the LowBalance the expiry topped up, each once."""
    _held_overdue(wal, "bob")
    _crash_after_write(wal, clock, lambda led: led.wallet.balance(P, "bob"))
    assert wal.wallet.hold(P, "bob-h").status == "expired"
    assert [n.type for n in wal.notifications.list(P, "bob")] == ["LowBalance"]
    for _ in range(2):
        wal.wallet.expire_holds(P)
    assert [n.type for n in wal.notifications.list(P, "bob")] == ["HoldExpired"]
    (gone,) = [
        n for n in wal.notifications.history(P, "bob").notifications if n.type == "LowBalance"
    ]
    assert (gone.dismissed_by, gone.dismiss_reason) == ("bob-h:expire", "topped_up")
    assert len(wal.notifications.history(P, "bob").notifications) == 2


def _notification_writes(actions: Sequence[Action]) -> bool:
    return any(action_key(a).sk.startswith("N#") for a in actions)


def test_a_warning_that_kept_conflicting_is_reported_and_the_next_run_raises_it(
    shop: Ledger, clock: ManualClock
) -> None:
    """Under contention the PointsExpiring add gives up (TooManyRetries, logged): the
    run reports it as failed, not as warned, and the next run raises it, once."""
    shop.loyalty.earn("shop", "alice", "o1", 5_000)  # 50 points, base
    clock.advance(timedelta(days=8))
    faulty = FaultyStore(shop.store)
    conflict = lambda: TransactionConflict("a concurrent writer")  # noqa: E731
    faulty.fail_request(times=1000, match=_notification_writes, error=conflict)
    report = Ledger(faulty, clock=clock).loyalty.expire("shop")
    assert (report.warned, report.warnings_failed) == (0, 1)
    assert shop.notifications.list("shop", "alice") == []
    for _ in range(2):
        report = shop.loyalty.expire("shop")
        assert (report.warned, report.warnings_failed) == (1, 0)
    (warning,) = shop.notifications.history("shop", "alice").notifications
    assert (warning.type, warning.payload["points"]) == ("PointsExpiring", 50)
