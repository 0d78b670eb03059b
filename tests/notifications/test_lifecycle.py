"""Add, supersede, dismiss, history, retention and delivery, on both engines."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from tallybook.domain.event_types import NOTIFICATION_DISMISSED, event_id
from tallybook.domain.notifications import Status
from tallybook.errors import (
    ConditionFailed,
    IdempotencyConflict,
    NotFound,
    StoreUnavailable,
    ValidationError,
)
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.notifications.delivery import RecordingDelivery
from tallybook.store import keys
from tallybook.store.port import Action, ItemStore, Put, Set, Update, action_key
from tallybook.store.records.codec import iso, parse_iso, to_us

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

SEC = timedelta(seconds=1)


def test_add_lists_and_supersedes(ledger: Ledger, clock: ManualClock, alice: str) -> None:
    n = ledger.notifications
    first = n.add("shop", alice, "TierChanged", {"tier": "silver"})
    clock.advance(SEC)
    other = n.add("shop", alice, "HoldExpired", {"hold": "h1"})
    clock.advance(SEC)
    second = n.add("shop", alice, "TierChanged", {"tier": "gold"})

    active = n.list("shop", alice)
    assert [(a.id, a.type) for a in active] == [
        (second.id, "TierChanged"),
        (other.id, "HoldExpired"),
    ]
    assert active[0].payload == {"tier": "gold"}

    history = n.history("shop", alice).notifications
    assert [h.id for h in history] == [second.id, other.id, first.id]
    old = history[2]
    assert old.status is Status.SUPERSEDED
    assert old.dismissed_by == second.id
    assert old.dismissed_at == clock.now()
    assert history[0].status is Status.ACTIVE
    assert n.get("shop", alice, first.id).dismissed_by == second.id


def test_dismiss_by_id_is_idempotent(ledger: Ledger, alice: str) -> None:
    n = ledger.notifications
    added = n.add("shop", alice, "TierChanged", {"tier": "gold"})
    dismissed = n.dismiss("shop", alice, added.id)
    assert dismissed.status is Status.DISMISSED
    assert dismissed.dismissed_by == "user"
    assert n.list("shop", alice) == []
    again = n.dismiss("shop", alice, added.id)
    assert again.status is Status.DISMISSED
    assert again.dismissed_at == dismissed.dismissed_at
    with pytest.raises(NotFound):
        n.dismiss("shop", alice, "n-0000000000000001-0000000000")
    with pytest.raises(NotFound):
        n.dismiss("shop", alice, "not-an-id")


def test_dismiss_by_type(ledger: Ledger, clock: ManualClock, alice: str) -> None:
    n = ledger.notifications
    n.add("shop", alice, "TierChanged", {"tier": "gold"})
    kept = n.add("shop", alice, "HoldExpired", {})
    clock.advance(SEC)
    gone = n.dismiss_type("shop", alice, "TierChanged")
    assert gone is not None
    assert gone.status is Status.DISMISSED
    assert n.dismiss_type("shop", alice, "TierChanged") is None
    assert [a.id for a in n.list("shop", alice)] == [kept.id]
    assert n.get("shop", alice, gone.id).status is Status.DISMISSED


def test_dismiss_type_on_an_unknown_account_is_not_found(ledger: Ledger, alice: str) -> None:
    # was None, while HTTP answers 404 and the CLI exits 4
    n = ledger.notifications
    ledger.programs.create("other")
    ledger.accounts.open("other", "bob")
    for account in ("nobody", "bob"):  # unknown anywhere, or of another program
        with pytest.raises(NotFound, match=f"account {account}"):
            n.dismiss_type("shop", account, "LowBalance")
    assert n.dismiss_type("shop", alice, "LowBalance") is None  # none active: still None


def test_rule_dismisses_other_type(ledger: Ledger, clock: ManualClock, alice: str) -> None:
    n = ledger.notifications
    low = n.add("shop", alice, "LowBalance", {"fund": "cash"})
    clock.advance(SEC)
    top_up = n.add("shop", alice, "TopUp", {"amount": 500})
    assert top_up.status is Status.UNLISTED
    assert n.list("shop", alice) == []
    old = n.get("shop", alice, low.id)
    assert old.status is Status.DISMISSED
    assert (old.dismissed_by, old.dismiss_reason) == (top_up.id, "rule")
    assert n.get("shop", alice, top_up.id).status is Status.UNLISTED


def test_rules_from_settings(ledger: Ledger, alice: str, delivered: RecordingDelivery) -> None:
    n = ledger.notifications
    n.set_rules(
        "shop",
        {"types": {"Promo": {"listed": False, "deliver": True}, "TierChanged": {"deliver": False}}},
    )
    assert n.rules("shop").rule("Promo").listed is False
    assert n.rules("shop").rule("LowBalance").deliver is True  # defaults kept
    n.add("shop", alice, "Promo", {"code": "X"})
    n.add("shop", alice, "TierChanged", {"tier": "gold"})
    assert [a.type for a in n.list("shop", alice)] == ["TierChanged"]
    assert [d.type for d in delivered.delivered] == ["Promo"]
    with pytest.raises(ValidationError):
        n.set_rules("shop", {"retention_days": 0})
    with pytest.raises(ValidationError):
        n.set_rules("shop", {"types": {"A": {"dismisses": ["A"]}}})


def test_a_rule_dismisses_at_most_what_one_add_can_dismiss(ledger: Ledger, alice: str) -> None:
    """A rule dismissing 48 or more types was stored, and an add of its type with
    that many of them active failed ("a transaction holds at most 100 actions",
    a 400 over HTTP) whatever it was asked; 45 is the most one add dismisses."""
    n = ledger.notifications
    types = [f"T{i}" for i in range(46)]
    with pytest.raises(ValidationError, match="at most 45 types"):
        n.set_rules("shop", {"types": {"Reset": {"dismisses": types}}})
    n.set_rules("shop", {"types": {"Reset": {"dismisses": types[:45]}}})
    for t in ["Reset", *types[:45]]:
        n.add("shop", alice, t, {})
    reset = n.add("shop", alice, "Reset", {}, idempotency_key="reset-1")
    assert [a.id for a in n.list("shop", alice)] == [reset.id]


def test_a_rule_stored_with_more_dismisses_still_reads(ledger: Ledger, alice: str) -> None:
    """The limit of 45 dismisses was applied to the rules a program already held: a
    program whose stored rule listed 46 made every add, trigger and rules read of it
    a 422, of whatever type."""
    n = ledger.notifications
    types = [f"T{i}" for i in range(46)]
    rules = {"types": {"Reset": {"dismisses": types}}}
    ledger.programs.update_settings("shop", {"notifications": rules})  # stored before
    assert n.rules("shop").rule("Reset").dismisses == tuple(types)
    n.add("shop", alice, "T0", {})
    reset = n.add("shop", alice, "Reset", {})
    assert [a.id for a in n.list("shop", alice)] == [reset.id]
    with pytest.raises(ValidationError, match="at most 45 types"):
        n.set_rules("shop", rules)  # setting it anew is refused


def test_an_unlisted_add_supersedes_the_one_listed_before_its_rule_changed(
    ledger: Ledger, clock: ManualClock, alice: str
) -> None:
    """A type made unlisted kept its active notification listed, stale, beside
    every newer one of its type in history, until someone dismissed it."""
    n = ledger.notifications
    old = n.add("shop", alice, "Promo", {"code": "A"})
    n.set_rules("shop", {"types": {"Promo": {"listed": False}}})
    clock.advance(SEC)
    new = n.add("shop", alice, "Promo", {"code": "B"})
    assert new.status is Status.UNLISTED
    assert n.list("shop", alice) == []
    superseded = n.get("shop", alice, old.id)
    assert superseded.status is Status.SUPERSEDED
    assert (superseded.dismissed_by, superseded.dismiss_reason) == (new.id, "superseded")
    assert n.check("shop", alice) == []


def test_history_range_and_cursor(ledger: Ledger, clock: ManualClock, alice: str) -> None:
    n = ledger.notifications
    start = clock.now()
    ids = []
    for i in range(5):
        ids.append(n.add("shop", alice, f"T{i}", {"i": i}).id)
        clock.advance(timedelta(minutes=1))
    page1 = n.history("shop", alice, limit=2)
    assert [x.id for x in page1.notifications] == ids[::-1][:2]
    assert page1.cursor is not None
    page2 = n.history("shop", alice, limit=2, cursor=page1.cursor)
    page3 = n.history("shop", alice, limit=2, cursor=page2.cursor)
    assert [x.id for x in page2.notifications + page3.notifications] == ids[::-1][2:]
    assert page3.cursor is None
    ranged = n.history(
        "shop",
        alice,
        since=start + timedelta(minutes=1),
        until=start + timedelta(minutes=3),
        newest_first=False,
    )
    assert [x.id for x in ranged.notifications] == ids[1:3]
    with pytest.raises(ValidationError):
        n.history("shop", alice, since=start, until=start)


def test_history_past_retention_is_invisible(
    ledger: Ledger, clock: ManualClock, alice: str
) -> None:
    n = ledger.notifications
    n.set_rules("shop", {"retention_days": 30})
    now = clock.now()
    clock.set(now - timedelta(days=31))
    old = n.add("shop", alice, "HoldExpired", {"hold": "h-old"})
    clock.set(now - timedelta(days=29))
    recent = n.add("shop", alice, "TierChanged", {"tier": "gold"})
    clock.set(now)
    assert [h.id for h in n.history("shop", alice).notifications] == [recent.id]
    # the active one outlives its history row: still found, listed and dismissable
    assert n.get("shop", alice, old.id).status is Status.ACTIVE
    assert {a.id for a in n.list("shop", alice)} == {old.id, recent.id}
    dismissed = n.dismiss("shop", alice, old.id)
    assert dismissed.status is Status.DISMISSED
    assert [a.id for a in n.list("shop", alice)] == [recent.id]
    # and superseding an active one whose history expired works too
    clock.set(now - timedelta(days=31))
    stale = n.add("shop", alice, "PointsExpiring", {})
    clock.set(now)
    fresh = n.add("shop", alice, "PointsExpiring", {"points": 10})
    assert [a.id for a in n.list("shop", alice) if a.type == "PointsExpiring"] == [fresh.id]
    assert stale.id not in {h.id for h in n.history("shop", alice).notifications}


def test_active_expiry(ledger: Ledger, clock: ManualClock, alice: str) -> None:
    n = ledger.notifications
    added = n.add("shop", alice, "Promo", {}, expires_at=clock.now() + timedelta(hours=1))
    assert [a.id for a in n.list("shop", alice)] == [added.id]
    clock.advance(timedelta(hours=2))
    assert n.list("shop", alice) == []
    assert n.get("shop", alice, added.id).status is Status.EXPIRED
    again = n.add("shop", alice, "Promo", {"new": True})
    assert [a.id for a in n.list("shop", alice)] == [again.id]


def test_an_expiry_before_year_1000_is_read_back_and_refused_on_add(
    ledger: Ledger, alice: str
) -> None:
    """The stored time has an unpadded year ("999-01-01T..."): reading it back
    used to raise, and every history read of an account holding one failed with
    it. Such a time still reads back; an add with it (or any past expires_at) is
    now refused, so it neither supersedes nor lands in history."""
    old = datetime(999, 1, 1, tzinfo=UTC)
    assert parse_iso(iso(old)) == old
    n = ledger.notifications
    with pytest.raises(ValidationError, match="not in the future"):
        n.add("shop", alice, "Promo", {}, expires_at=old)
    assert n.history("shop", alice).notifications == []


def test_idempotency_key(ledger: Ledger, alice: str) -> None:
    n = ledger.notifications
    first = n.add("shop", alice, "TierChanged", {"tier": "gold"}, idempotency_key="evt-1")
    again = n.add("shop", alice, "TierChanged", {"tier": "gold"}, idempotency_key="evt-1")
    assert again.replay
    assert again.id == first.id
    assert len(n.history("shop", alice).notifications) == 1
    with pytest.raises(IdempotencyConflict):
        n.add("shop", alice, "TierChanged", {"tier": "silver"}, idempotency_key="evt-1")


def test_idempotency_key_lasts_as_long_as_the_history(
    ledger: Ledger, clock: ManualClock, alice: str
) -> None:
    """The key's row carries the history row's TTL (docs/notifications.md): within
    retention an add replays; past it the key is free and adds a new notification."""
    n = ledger.notifications
    n.set_rules("shop", {"retention_days": 1})
    now = clock.now()
    clock.set(now - timedelta(hours=23))
    first = n.add("shop", alice, "TierChanged", {"tier": "gold"}, idempotency_key="evt-1")
    clock.set(now - timedelta(days=2))
    old = n.add("shop", alice, "Promo", {}, idempotency_key="evt-2")
    clock.set(now)
    replayed = n.add("shop", alice, "TierChanged", {"tier": "gold"}, idempotency_key="evt-1")
    assert (replayed.replay, replayed.id) == (True, first.id)
    again = n.add("shop", alice, "Promo", {"other": 1}, idempotency_key="evt-2")
    assert not again.replay
    assert again.id != old.id


def test_bad_input(ledger: Ledger, alice: str) -> None:
    n = ledger.notifications
    with pytest.raises(NotFound):
        n.add("shop", "nobody", "TierChanged", {})
    with pytest.raises(NotFound):
        n.list("shop", "nobody")
    with pytest.raises(ValidationError):
        n.add("shop", alice, "Bad#Type", {})
    with pytest.raises(ValidationError):
        n.add("shop", alice, "T", {"amount": 1.5})
    with pytest.raises(ValidationError):
        n.add("shop", alice, "T", {"blob": "x" * 20_000})


def test_delivery_is_recorded(ledger: Ledger, alice: str, delivered: RecordingDelivery) -> None:
    n = ledger.notifications
    ok = n.add("shop", alice, "TierChanged", {"tier": "gold"})
    n.add("shop", alice, "Custom", {})  # no rule: not delivered
    assert [d.id for d in delivered.delivered] == [ok.id]
    assert ok.delivery == "delivered"
    assert n.get("shop", alice, ok.id).delivery == "delivered"
    delivered.fail = True
    failed = n.add("shop", alice, "HoldExpired", {})
    stored = n.get("shop", alice, failed.id)
    assert stored.delivery == "failed"
    assert stored.delivery_error is not None
    assert "ConnectionError" in stored.delivery_error
    assert stored.status is Status.ACTIVE


def test_check_passes_a_notification_in_the_second_it_expires(
    ledger: Ledger, clock: ManualClock, alice: str
) -> None:
    """The store hides an active item from the second its expires_at falls in:
    the check does not read the history row as still active then (invariant 6)."""
    n = ledger.notifications
    n.add("shop", alice, "Promo", {}, expires_at=clock.now() + timedelta(seconds=1.5))
    clock.advance(timedelta(seconds=1.2))
    assert n.list("shop", alice) == []
    assert ledger.check.program("shop").violations == []
    assert ledger.notifications.check("shop", alice) == []


def test_in_the_second_it_expires_a_notification_reads_expired_everywhere(
    ledger: Ledger, clock: ManualClock, alice: str
) -> None:
    """The store hides the active row from the whole second its expires_at falls
    in: get and dismiss answered "active" then (and dismissed nothing), and an add
    expiring later in its own second answered 201 "active", superseded the active
    one of its type and was listed nowhere."""
    n = ledger.notifications
    promo = n.add("shop", alice, "Promo", {}, expires_at=clock.now() + timedelta(seconds=1.5))
    clock.advance(timedelta(seconds=1.2))  # 0.3 s before its expires_at, in its second
    assert n.list("shop", alice) == []
    assert n.get("shop", alice, promo.id).status is Status.EXPIRED
    assert n.dismiss("shop", alice, promo.id).status is Status.EXPIRED

    kept = n.add("shop", alice, "Promo", {"n": 1})
    with pytest.raises(ValidationError, match="is in this second"):
        n.add("shop", alice, "Promo", {"n": 2}, expires_at=clock.now() + timedelta(seconds=0.5))
    assert [a.id for a in n.list("shop", alice)] == [kept.id]
    assert n.get("shop", alice, kept.id).status is Status.ACTIVE


def test_invariant_6_under_concurrent_adds(ledger: Ledger, alice: str) -> None:
    """Eight threads add the same type at once: one stays active, seven are superseded."""
    n = ledger.notifications
    barrier = threading.Barrier(8)
    added: list[str] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            added.append(n.add("shop", alice, "TierChanged", {"i": i}).id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(added)) == 8

    active = [a for a in n.list("shop", alice) if a.type == "TierChanged"]
    assert len(active) == 1
    history = n.history("shop", alice).notifications
    assert {h.id for h in history} == set(added)
    superseded = [h for h in history if h.status is Status.SUPERSEDED]
    assert len(superseded) == 7
    assert [h.id for h in history if h.status is Status.ACTIVE] == [active[0].id]
    # every superseded one names a distinct newcomer: one chain ending at the active one
    successors = [h.dismissed_by for h in superseded]
    assert len(set(successors)) == 7
    assert set(successors) <= set(added)
    assert active[0].id in successors


def test_created_times_stay_ordered_under_a_still_clock(ledger: Ledger, alice: str) -> None:
    n = ledger.notifications
    ids = [n.add("shop", alice, "TierChanged", {"i": i}).id for i in range(3)]
    assert [h.id for h in n.history("shop", alice).notifications] == ids[::-1]
    assert n.get("shop", alice, ids[0]).created_at < n.get("shop", alice, ids[2]).created_at


def test_supersede_is_one_storage_transaction(
    ledger: Ledger, alice: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Add, supersede, both history writes and the head's change numbers are one
    transact_write; a failed one leaves everything as it was (all or nothing)."""
    n = ledger.notifications
    first = n.add("shop", alice, "Custom", {"v": 1})  # no rule: not delivered
    calls: list[list[Action]] = []
    real = ledger.store.transact_write
    fail = False

    def spy(actions: Sequence[Action], *, token: str | None = None) -> None:
        calls.append(list(actions))
        if fail:
            raise StoreUnavailable("the store did not answer")
        real(actions, token=token)

    monkeypatch.setattr(ledger.store, "transact_write", spy)
    second = n.add("shop", alice, "Custom", {"v": 2})
    (actions,) = calls
    by_sk = {action_key(a).sk: a for a in actions}
    new_sk = keys.notification_history("shop", alice, to_us(second.created_at), second.id).sk
    old_sk = keys.notification_history("shop", alice, to_us(first.created_at), first.id).sk
    assert set(by_sk) == {"N#A#Custom", new_sk, old_sk, "HEAD"}
    old = by_sk[old_sk]
    assert isinstance(old, Update)
    assert Set("dismissed_by", second.id) in old.updates
    # the raising and the dismissal it causes take the account's next two numbers
    new = by_sk[new_sk]
    assert isinstance(new, Put)
    assert cast(list[Any], new.item["chg_raised"])[0] == 2
    dismissal = {u.attr: u.value for u in old.updates if isinstance(u, Set)}
    assert cast(list[Any], dismissal["chg_dismissed"])[0] == 3
    head = by_sk["HEAD"]
    assert isinstance(head, Update)
    last = {u.attr: u.value for u in head.updates if isinstance(u, Set)}["chg"]
    old_key = keys.notification_history("shop", alice, to_us(first.created_at), first.id)
    dismissed = event_id(old_key.pk, old_key.sk, NOTIFICATION_DISMISSED)
    assert cast(list[Any], last)[:2] == [3, dismissed]

    fail = True
    with pytest.raises(StoreUnavailable):
        n.add("shop", alice, "Custom", {"v": 3})
    fail = False
    assert [a.id for a in n.list("shop", alice)] == [second.id]
    history = n.history("shop", alice).notifications
    assert [(h.id, h.status) for h in history] == [
        (second.id, Status.ACTIVE),
        (first.id, Status.SUPERSEDED),
    ]


def test_add_reads_the_head_once(ledger: Ledger, alice: str) -> None:
    """The account check's head read is the one the add's transaction is
    conditioned on: two GetItems (the head and the type's active row), one
    transaction."""
    n = ledger.notifications
    n.add("shop", alice, "Custom", {"v": 1})
    ledger.store.metrics.reset()
    n.add("shop", alice, "Custom", {"v": 2})
    ops = ledger.store.metrics.by_operation
    assert ops["get"].requests == 2
    assert ops["transact_write"].requests == 1


def test_add_on_a_head_written_since_it_was_read_retries(
    ledger: Ledger, alice: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A posting between the account check and the add's transaction makes the
    head's version stale: the add is planned again on a fresh head and the
    account's change numbers stay gap-free."""
    n = ledger.notifications
    real = ledger.store.transact_write
    posted = False

    def post_first(actions: Sequence[Action], *, token: str | None = None) -> None:
        nonlocal posted
        if not posted:
            posted = True
            monkeypatch.setattr(ledger.store, "transact_write", real)
            ledger.transactions.credit("shop", alice, "points", 5, txn_id="between")
            monkeypatch.setattr(ledger.store, "transact_write", post_first)
        real(actions, token=token)

    before = ledger.accounts.get("shop", alice).changes
    monkeypatch.setattr(ledger.store, "transact_write", post_first)
    added = n.add("shop", alice, "Custom", {"v": 1})
    monkeypatch.setattr(ledger.store, "transact_write", real)
    assert [a.id for a in n.list("shop", alice)] == [added.id]
    assert ledger.accounts.get("shop", alice).changes == before + 2


def test_a_store_failure_recording_the_delivery_leaves_the_add_standing(
    ledger: Ledger, alice: str, delivered: RecordingDelivery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording the outcome is two tries (both rows, then the history row
    alone); the store failing the second used to escape from the add."""
    real = ledger.store.transact_write
    writes: list[int] = []

    def flaky(actions: Sequence[Action], *, token: str | None = None) -> None:
        writes.append(len(actions))
        if len(writes) == 2:  # the outcome on both rows: the active row changed
            raise ConditionFailed("superseded", [None, "ConditionalCheckFailed"])
        if len(writes) == 3:  # the history row alone: the store is down
            raise StoreUnavailable("the store did not answer")
        real(actions, token=token)

    monkeypatch.setattr(ledger.store, "transact_write", flaky)
    added = ledger.notifications.add("shop", alice, "TierChanged", {"tier": "gold"})
    monkeypatch.setattr(ledger.store, "transact_write", real)
    assert len(writes) == 3
    assert added.delivery == "delivered"
    assert [n.id for n in ledger.notifications.list("shop", alice)] == [added.id]


def test_an_expiry_given_in_another_zone_is_answered_in_utc(
    ledger: Ledger, clock: ManualClock, alice: str
) -> None:
    # add() answered expires_at in the caller's zone (-05:00); get() read it back in UTC
    from datetime import timezone

    est = timezone(timedelta(hours=-5))
    at = (clock.now() + timedelta(days=3)).astimezone(est)
    n = ledger.notifications.add("shop", alice, "TierChanged", {"tier": "gold"}, expires_at=at)
    assert n.expires_at == at
    assert n.expires_at is not None
    assert n.expires_at.tzinfo is UTC
    assert ledger.notifications.get("shop", alice, n.id).expires_at == n.expires_at
    again = ledger.notifications.add(
        "shop", alice, "TierChanged", {"tier": "gold"}, idempotency_key="k", expires_at=at
    )
    assert again.expires_at is not None
    assert again.expires_at.tzinfo is UTC


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # stored as given: dismissed_by=5, a 1000-character by, dismiss_reason="bogus"
        ({"by": 5}, "by must be a string of 1 to 128"),
        ({"by": ""}, "by must be a string of 1 to 128"),
        ({"by": "x" * 129}, "by must be a string of 1 to 128"),
        (
            {"reason": "bogus"},
            "reason must be one of superseded, user, rule, topped_up, threshold_changed",
        ),
        ({"reason": 5}, "reason must be one of"),
        # TypeError: 'int' object is not callable
        ({"where": 5}, "where must be a function"),
    ],
)
def test_dismiss_type_refuses_a_malformed_by_reason_or_where(
    ledger: Ledger, alice: str, kwargs: dict[str, Any], message: str
) -> None:
    n = ledger.notifications.add("shop", alice, "LowBalance", {"fund": "cash"})
    with pytest.raises(ValidationError, match=message):
        ledger.notifications.dismiss_type("shop", alice, "LowBalance", **kwargs)
    assert [a.id for a in ledger.notifications.list("shop", alice)] == [n.id]
    done = ledger.notifications.dismiss_type("shop", alice, "LowBalance", by="ops", reason="rule")
    assert done is not None
    assert (done.dismissed_by, done.dismiss_reason) == ("ops", "rule")


def test_a_manual_clock_in_the_past_sees_what_it_wrote_until_its_own_retention_ends(
    store: ItemStore,
) -> None:
    """TTLs are written on the ledger's clock; the stores read them on the wall
    clock, so with ``ManualClock()`` (1 January 2026) a captured hold was not
    found at once, history was empty and an idempotency key added twice."""
    clock = ManualClock(datetime.now(UTC) - timedelta(days=365))
    ledger = Ledger(store, clock=clock)
    ledger.programs.create("shop")
    ledger.accounts.open("shop", "ann")
    ledger.wallet.credit("shop", "ann", "cash", 1000, txn_id="t-1")
    ledger.wallet.authorize("shop", "ann", 100, hold_id="h-1", expires_in=3600)
    ledger.wallet.capture("shop", "h-1")
    assert ledger.wallet.hold("shop", "h-1").status.value == "captured"
    n = ledger.notifications
    first = n.add("shop", "ann", "TierChanged", {"tier": "gold"}, idempotency_key="evt-1")
    again = n.add("shop", "ann", "TierChanged", {"tier": "gold"}, idempotency_key="evt-1")
    assert (again.replay, again.id) == (True, first.id)
    assert [h.id for h in n.history("shop", "ann").notifications] == [first.id]
    # past retention by the ledger's clock (still a year short of the wall's)
    clock.advance(timedelta(days=n.rules("shop").retention_days, seconds=1))
    assert n.history("shop", "ann").notifications == []
    later = n.add("shop", "ann", "TierChanged", {"tier": "gold"}, idempotency_key="evt-1")
    assert not later.replay
    assert later.id != first.id
