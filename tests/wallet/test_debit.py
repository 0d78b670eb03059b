"""Debits in spend order, shortfall reject or charge, transaction records."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import cast

import pytest

from tallybook.errors import (
    ConfigError,
    IdempotencyConflict,
    InsufficientFunds,
    PaymentDeclined,
)
from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash
from tallybook.services.clock import ManualClock
from tallybook.services.wallet.charges import ChargeTimeout, FakeChargeProcessor
from tallybook.services.wallet.debit import CHARGE_GRACE
from tallybook.services.wallet.records import WalletTransaction
from tallybook.store import keys
from tallybook.store.forwarding import ForwardingStore
from tallybook.store.port import Action, Item, ItemStore, Key, Put, Value

from .conftest import P, assert_consistent, available, fund

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def test_spend_order_bonus_then_store_credit_then_cash(wallet: Ledger) -> None:
    fund(wallet, "alice", cash=1000, store_credit=300, bonus=((100, 9), (50, 2)))
    t = wallet.wallet.debit(P, "alice", 400, txn_id="d1", order_id="o-1")
    assert t.funds == {"bonus": -150, "store_credit": -250}
    assert [(g["grant_id"], g["amount"]) for g in t.grants] == [
        ("alice-g1", -50),
        ("alice-g0", -100),
    ]
    assert t.availability == {"bonus": 0, "store_credit": 50, "cash": 1000, "total": 1050}
    assert available(wallet, "alice") == {
        "bonus": 0,
        "store_credit": 50,
        "cash": 1000,
        "total": 1050,
    }
    assert wallet.transactions.system_balance(P, "@redemption") == {
        "bonus": 150,
        "store_credit": 250,
    }
    assert_consistent(wallet, "alice")


def test_shortfall_rejected_leaves_nothing(wallet: Ledger) -> None:
    fund(wallet, "alice", cash=100, bonus=((50, 3),))
    with pytest.raises(InsufficientFunds, match="available 150, needed 151"):
        wallet.wallet.debit(P, "alice", 151, txn_id="d1")
    assert available(wallet, "alice")["total"] == 150
    with pytest.raises(Exception, match="not found"):
        wallet.wallet.transaction(P, "d1")


def test_replay_and_conflict(wallet: Ledger) -> None:
    fund(wallet, "alice", cash=100)
    first = wallet.wallet.debit(P, "alice", 60, txn_id="d1")
    again = wallet.wallet.debit(P, "alice", 60, txn_id="d1")
    assert again.replay
    assert again.funds == first.funds
    with pytest.raises(IdempotencyConflict):
        wallet.wallet.debit(P, "alice", 61, txn_id="d1")
    assert available(wallet, "alice")["cash"] == 40


def test_shortfall_charged_as_its_own_posting(
    wallet: Ledger, processor: FakeChargeProcessor
) -> None:
    fund(wallet, "alice", cash=100, bonus=((30, 3),))
    t = wallet.wallet.debit(P, "alice", 200, txn_id="d1", on_shortfall="charge")
    assert t.funds == {"bonus": -30, "cash": -100}
    assert t.charge is not None
    assert t.charge["amount"] == 70
    assert str(t.charge["reference"]).startswith("fake-shop:d1:")
    assert processor.net_charged == 70
    legs = {(leg.account, leg.fund): leg.amount for leg in wallet.transactions.get(P, "d1").legs}
    assert legs[("@external", "cash")] == -70
    assert legs[("@redemption", "cash")] == 170
    again = wallet.wallet.debit(P, "alice", 200, txn_id="d1", on_shortfall="charge")
    assert again.replay
    assert processor.net_charged == 70
    assert_consistent(wallet, "alice")


@pytest.mark.parametrize("mode", ["decline", "timeout"])
def test_declined_or_timed_out_charge_leaves_nothing(
    wallet: Ledger, processor: FakeChargeProcessor, mode: str
) -> None:
    fund(wallet, "alice", cash=100)
    processor.mode = mode  # type: ignore[assignment]
    before = wallet.wallet.balance(P, "alice")
    with pytest.raises(PaymentDeclined):
        wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")
    assert wallet.wallet.balance(P, "alice").funds == before.funds
    assert processor.net_charged == 0
    assert wallet.wallet.check(P, "alice") == []
    assert wallet.wallet.reconcile(P).lines() == []
    processor.mode = "succeed"
    t = wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")
    assert t.charge is not None
    assert t.charge["amount"] == 150
    assert processor.net_charged == 150
    assert_consistent(wallet, "alice")


def test_transaction_records_per_owner_newest_first(wallet: Ledger, clock: ManualClock) -> None:
    fund(wallet, "alice", cash=500)
    for i in range(3):
        clock.advance(timedelta(seconds=1))
        wallet.wallet.debit(P, "alice", 10, txn_id=f"d{i}")
    page = wallet.wallet.transactions(P, "alice", limit=2)
    assert [t.id for t in page.transactions] == ["d2", "d1"]
    assert [t.availability["cash"] for t in page.transactions] == [470, 480]
    rest = wallet.wallet.transactions(P, "alice", limit=10, cursor=page.cursor)
    assert [t.id for t in rest.transactions] == ["d0", "alice-cash"]
    one = wallet.wallet.transaction(P, "d1")
    assert one.funds == {"cash": -10}
    assert one.account == "alice"


class AtMostOnceProcessor:
    """A processor as the protocol says: a key charges at most once, so charging
    a refunded key answers the refunded charge and collects nothing."""

    def __init__(self) -> None:
        self.charges: dict[str, list[int]] = {}  # key -> [amount, refunded]
        self.during_charge: list[Callable[[], object]] = []

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        if key not in self.charges:
            self.charges[key] = [amount, 0]
            while self.during_charge:
                self.during_charge.pop()()
        return f"ref-{key}"

    def refund(self, *, key: str) -> None:
        if key in self.charges:
            self.charges[key][1] = 1

    @property
    def net_charged(self) -> int:
        return sum(amount for amount, refunded in self.charges.values() if not refunded)


def test_a_retried_debit_never_charges_a_refunded_key(wallet: Ledger) -> None:
    """A spend while the charge is made refuses the commit, which refunds the
    charge; the client's retry of the same transaction id must collect its
    shortfall under a new key, not be answered with the refunded charge."""
    processor = AtMostOnceProcessor()
    wallet.wallet.processor = processor
    fund(wallet, "alice", cash=100)
    processor.during_charge.append(lambda: wallet.wallet.debit(P, "alice", 100, txn_id="other"))
    with pytest.raises(InsufficientFunds):
        wallet.wallet.debit(P, "alice", 300, txn_id="d1", on_shortfall="charge")
    assert processor.net_charged == 0
    t = wallet.wallet.debit(P, "alice", 300, txn_id="d1", on_shortfall="charge")
    assert t.charge is not None
    assert t.charge["amount"] == 300
    assert processor.net_charged == 300  # was 0: the debit recorded a refunded charge
    assert len(processor.charges) == 2
    assert_consistent(wallet, "alice")


def test_a_retry_after_reconcile_refunded_charges_a_new_key(
    wallet: Ledger, clock: ManualClock
) -> None:
    """A debit that died after charging is refunded by reconcile; the client's
    retry with the same id (the client rule) is charged again under a new key."""
    processor = AtMostOnceProcessor()
    wallet.wallet.processor = processor
    fund(wallet, "alice", cash=100)

    def die() -> None:
        raise Crash("after the charge")

    processor.during_charge.append(die)
    with pytest.raises(Crash):
        wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")
    clock.advance(CHARGE_GRACE + timedelta(minutes=1))
    assert wallet.wallet.reconcile(P).cancelled_charges == [("alice", "d1", 150)]
    assert processor.net_charged == 0
    t = wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")
    assert t.charge is not None
    assert t.charge["amount"] == 150
    assert processor.net_charged == 150
    assert_consistent(wallet, "alice")


class InFlightProcessor:
    """A processor whose first charge is held in flight (started, not yet landed)
    until the test releases it, from another thread; a refund of a key not yet
    charged finds nothing to undo, as at a real processor."""

    def __init__(self) -> None:
        self.charges: dict[str, list[int]] = {}  # key -> [amount, refunded]
        self.in_flight = threading.Event()
        self.land = threading.Event()
        self._first = True
        self._lock = threading.Lock()

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        with self._lock:
            first, self._first = self._first, False
        if first:
            self.in_flight.set()
            assert self.land.wait(30)
        with self._lock:
            self.charges.setdefault(key, [amount, 0])
        return f"ref-{key}"

    def refund(self, *, key: str) -> None:
        with self._lock:
            if key in self.charges:
                self.charges[key][1] = 1

    @property
    def net_charged(self) -> int:
        with self._lock:
            return sum(amount for amount, refunded in self.charges.values() if not refunded)


def first_attempt_in_flight(
    wallet: Ledger, processor: InFlightProcessor, then: Callable[[], None]
) -> list[object]:
    """Debit d1 (250 on 100 cash) in a thread whose charge is held in flight, run
    ``then`` meanwhile, land the charge and return what the first attempt answered."""
    wallet.wallet.processor = processor
    fund(wallet, "alice", cash=100)
    first: list[object] = []

    def debit() -> None:
        try:
            first.append(wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge"))
        except Exception as exc:  # the test asserts what it was
            first.append(exc)

    thread = threading.Thread(target=debit)
    thread.start()
    try:
        assert processor.in_flight.wait(30)
        then()
    finally:
        processor.land.set()
        thread.join(30)
    return first


def reconcile_then_retry(wallet: Ledger, clock: ManualClock) -> Callable[[], None]:
    """What happens while d1's first charge is in flight: past its grace, reconcile
    cancels it (refunding a key not charged yet), and the client retries d1."""

    def then() -> None:
        clock.advance(CHARGE_GRACE + timedelta(minutes=1))
        assert wallet.wallet.reconcile(P).cancelled_charges == [("alice", "d1", 150)]
        wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")

    return then


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_a_charge_landing_after_reconcile_refunded_it_is_refunded_by_its_debit(
    wallet: Ledger, clock: ManualClock
) -> None:
    """A debit's charge still in flight past the grace: reconcile cancels its intent
    and refunds the key before the charge lands (nothing to undo yet), the client's
    retry charges a key of its own and commits. The first attempt's commit then
    replays the retry's debit: its own charge, landed after the refund, was
    collected with no debit recording it (the customer paid the shortfall twice);
    it is now refunded, and only the recorded charge is collected."""
    processor = InFlightProcessor()
    retried: list[WalletTransaction] = []

    def reconcile_then_retry() -> None:
        clock.advance(CHARGE_GRACE + timedelta(minutes=1))
        assert wallet.wallet.reconcile(P).cancelled_charges == [("alice", "d1", 150)]
        retried.append(wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge"))

    first = first_attempt_in_flight(wallet, processor, reconcile_then_retry)
    (retry,) = retried
    assert retry.charge is not None
    assert retry.charge["amount"] == 150
    assert len(processor.charges) == 2  # two keys were charged...
    assert processor.net_charged == 150  # ...one is kept: the one the debit records
    (answer,) = first
    assert not isinstance(answer, Exception), answer
    assert wallet.wallet.transaction(P, "d1").charge == retry.charge
    assert wallet.wallet.reconcile(P).cancelled_charges == []
    assert_consistent(wallet, "alice")


class _PausedIntentRead(ForwardingStore):
    """Holds one thread at its first read of a charge intent until released: that
    thread has found no transaction, and finds the intent only after another
    attempt of the same debit committed."""

    def __init__(self, inner: ItemStore, thread_name: str) -> None:
        super().__init__(inner)
        self.thread_name = thread_name
        self.paused = threading.Event()
        self.resume = threading.Event()

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        mine = threading.current_thread().name == self.thread_name
        if mine and key.sk.startswith(keys.WALLET_CHARGE_PREFIX) and not self.paused.is_set():
            self.paused.set()
            assert self.resume.wait(30)
        return super().get(key, consistent=consistent)


class _DiesAfterSecondCharge(AtMostOnceProcessor):
    """Charges as the protocol says; the process charging the second key dies
    right after the charge (before its debit could refund it)."""

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        reference = super().charge(key=key, account=account, amount=amount, currency=currency)
        if len(self.charges) == 2:
            raise Crash("after the second charge")
        return reference


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_reconcile_refunds_an_intent_left_beside_a_committed_debit(
    store: ItemStore, clock: ManualClock
) -> None:
    """Two attempts of one debit: the late one found no transaction, then (the
    first having committed meanwhile) no intent, so it charged a key of its own,
    and died. Reconcile saw the debit committed and deleted that intent without a
    refund: the customer paid the shortfall twice. A commit deletes its own intent,
    so an intent left is no committed charge: reconcile now refunds it."""
    paused = _PausedIntentRead(store, "late")
    ledger = Ledger(paused, clock=clock)
    ledger.programs.create(P)
    processor = _DiesAfterSecondCharge()
    ledger.wallet.processor = processor
    fund(ledger, "alice", cash=100)
    late: list[BaseException] = []

    def attempt() -> None:
        try:
            ledger.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")
        except BaseException as exc:  # the test asserts what it was
            late.append(exc)

    thread = threading.Thread(target=attempt, name="late")
    thread.start()
    try:
        assert paused.paused.wait(30)
        first = ledger.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")
    finally:
        paused.resume.set()
        thread.join(30)
    assert [type(e) for e in late] == [Crash]
    assert first.charge is not None
    assert first.charge["amount"] == 150
    assert processor.net_charged == 300  # the late attempt's charge, not recorded
    clock.advance(CHARGE_GRACE + timedelta(minutes=1))
    assert ledger.wallet.reconcile(P).cancelled_charges == [("alice", "d1", 150)]
    assert processor.net_charged == 150  # was 300
    assert ledger.wallet.reconcile(P).cancelled_charges == []
    assert_consistent(ledger, "alice")


class _TimesOutInFlight(InFlightProcessor):
    """The first charge is held in flight, then lands and times out: collected at
    the processor, its reference never known to the debit that asked for it."""

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        with self._lock:
            first = self._first
        reference = super().charge(key=key, account=account, amount=amount, currency=currency)
        if first:
            raise ChargeTimeout("processor timed out")
        return reference


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_a_timed_out_charge_landing_after_reconcile_refunded_it_is_refunded(
    wallet: Ledger, clock: ManualClock
) -> None:
    """As above, but the first attempt's charge lands and then times out: its
    attempt found no intent and a committed debit recording a charge, took that
    charge for its own and left its key collected, unrecorded (the shortfall paid
    twice). The debit records its charge's key: a key it does not record is refunded."""
    processor = _TimesOutInFlight()
    (answer,) = first_attempt_in_flight(wallet, processor, reconcile_then_retry(wallet, clock))
    # was: PaymentDeclined "timed out and was reversed; nothing was debited", though
    # d1 was debited (by the retry): the answer is now that debit, as any retry's
    assert isinstance(answer, WalletTransaction), answer
    assert answer.replay
    assert len(processor.charges) == 2  # two keys were charged...
    assert processor.net_charged == 150  # ...one is kept: the one the debit records
    charge = wallet.wallet.transaction(P, "d1").charge
    assert answer.charge == charge
    assert charge is not None
    assert charge["amount"] == 150
    assert list(charge) == ["amount", "reference"]  # the key it records is not shown
    assert wallet.wallet.reconcile(P).cancelled_charges == []
    assert_consistent(wallet, "alice")


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_a_timed_out_charge_a_sibling_attempt_committed_is_kept(wallet: Ledger) -> None:
    """Two attempts of d1 share one intent and key: the second charges it (the
    processor answers the same charge) and commits; the first's charge then times
    out. The debit records that key's charge: it is not refunded."""
    processor = _TimesOutInFlight()
    retried: list[object] = []

    def retry() -> None:
        retried.append(wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge"))

    (answer,) = first_attempt_in_flight(wallet, processor, retry)
    # was: PaymentDeclined "timed out and was reversed; nothing was debited", though
    # the debit committed with this very charge: the answer is now that debit
    assert isinstance(answer, WalletTransaction), answer
    assert answer.replay
    assert len(processor.charges) == 1
    assert processor.net_charged == 150  # the recorded charge, kept
    assert (
        answer.charge
        == wallet.wallet.transaction(P, "d1").charge
        == {
            "amount": 150,
            "reference": "ref-" + next(iter(processor.charges)),
        }
    )
    assert_consistent(wallet, "alice")


class _RecordsNoChargeKey(ForwardingStore):
    """Writes debits as they were before a charged debit recorded its charge's key."""

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        def strip(value: Value) -> Value:
            if isinstance(value, dict):
                charge = "reference" in value and "amount" in value
                return {k: strip(v) for k, v in value.items() if not (charge and k == "key")}
            if isinstance(value, list):
                return [strip(v) for v in value]
            return value

        actions = [
            Put(cast(Item, strip(dict(a.item))), a.condition) if isinstance(a, Put) else a
            for a in actions
        ]
        super().transact_write(actions, token=token)


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_a_timed_out_charge_keeps_a_debit_recorded_without_its_key(
    store: ItemStore, clock: ManualClock
) -> None:
    """A debit committed before debits recorded their charge's key: a sibling
    attempt's timed-out charge of the same key leaves it alone, as before."""
    ledger = Ledger(_RecordsNoChargeKey(store), clock=clock)
    ledger.programs.create(P)
    processor = _TimesOutInFlight()

    def retry() -> None:
        ledger.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")

    (answer,) = first_attempt_in_flight(ledger, processor, retry)
    assert isinstance(answer, WalletTransaction), answer
    assert answer.replay
    assert len(processor.charges) == 1
    assert processor.net_charged == 150
    assert ledger.transactions.get(P, "d1").details["charge"] == {
        "amount": 150,
        "reference": "ref-" + next(iter(processor.charges)),
    }
    assert_consistent(ledger, "alice")


class _ChargesOnly:
    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        return "ref"


@pytest.mark.parametrize("bad", [5, None, _ChargesOnly()], ids=["int", "none", "no-refund"])
def test_a_processor_without_charge_and_refund_is_refused_when_set(
    wallet: Ledger, processor: FakeChargeProcessor, bad: object
) -> None:
    """``ledger.wallet.processor = 5`` was taken; the next charged debit wrote its
    charge intent, then raised ``AttributeError: 'int' object has no attribute
    'charge'`` (and reconcile raised it again, refunding that intent)."""
    fund(wallet, "alice", cash=100)
    with pytest.raises(ConfigError, match=r"charge\(\) and refund\(\)"):
        wallet.wallet.processor = bad  # type: ignore[assignment]
    assert wallet.wallet.processor is processor
    t = wallet.wallet.debit(P, "alice", 150, txn_id="d1", on_shortfall="charge")
    assert t.charge is not None
    assert t.charge["amount"] == 50


class _FailingProcessor(FakeChargeProcessor):
    """Charges, then raises what the protocol does not name (a bug, a dropped
    connection as ``OSError``); ``refund_fails`` makes its refunds fail too."""

    def __init__(self) -> None:
        super().__init__()
        self.refund_fails = False

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        super().charge(key=key, account=account, amount=amount, currency=currency)
        raise RuntimeError("processor bug")

    def refund(self, *, key: str) -> None:
        if self.refund_fails:
            raise RuntimeError("refund bug")
        super().refund(key=key)


def test_a_processor_raising_an_undocumented_error_is_a_payment_declined(
    wallet: Ledger, clock: ManualClock
) -> None:
    # was: the RuntimeError propagated raw and left the charge (collected) and its
    # intent for reconcile; it is now taken as a timeout: refunded, 402
    processor = _FailingProcessor()
    wallet.wallet.processor = processor
    fund(wallet, "alice", cash=100)
    before = wallet.wallet.balance(P, "alice").funds
    with pytest.raises(PaymentDeclined, match=r"failed \(RuntimeError\) and was reversed"):
        wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")
    assert processor.net_charged == 0
    assert wallet.wallet.balance(P, "alice").funds == before
    assert wallet.wallet.check(P, "alice") == []
    # its refund failing too: the intent stays, and reconcile refunds it after its grace
    processor.refund_fails = True
    with pytest.raises(PaymentDeclined, match="reconcile refunds it"):
        wallet.wallet.debit(P, "alice", 250, txn_id="d2", on_shortfall="charge")
    assert processor.net_charged == 150
    assert wallet.wallet.balance(P, "alice").funds == before
    processor.refund_fails = False
    with pytest.raises(PaymentDeclined, match="new transaction id"):
        wallet.wallet.debit(P, "alice", 250, txn_id="d2", on_shortfall="charge")
    clock.advance(CHARGE_GRACE + timedelta(minutes=1))
    assert wallet.wallet.reconcile(P).cancelled_charges == [("alice", "d2", 150)]
    assert processor.net_charged == 0
    assert_consistent(wallet, "alice")
