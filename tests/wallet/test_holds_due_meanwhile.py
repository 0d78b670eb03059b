"""A hold or debit that falls short while holds are due settles them and plans again;
another hold coming due while the first were settled (busy hot accounts, holds of
a few seconds) must not turn that into a refusal: a 422 insufficient-funds is final
to clients, yet this one was not kept, and the same request was applied later."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from tallybook.domain.wallet import HoldStatus
from tallybook.errors import InsufficientFunds, TooManyRetries
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

from .conftest import P, fund


def _time_passes_while_settling(
    wallet: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each settling of overdue holds takes 10 seconds (the next hold comes due)."""
    holds = wallet.wallet._holds
    settle = holds.settle_overdue

    def slow(program: str, account: str) -> bool:
        settled = settle(program, account)
        clock.advance(timedelta(seconds=10))
        return settled

    monkeypatch.setattr(holds, "settle_overdue", slow)


def _two_holds_one_due(wallet: Ledger, clock: ManualClock) -> None:
    fund(wallet, "ann", cash=100)
    wallet.wallet.authorize(P, "ann", 60, hold_id="h-first", expires_in=10)
    wallet.wallet.authorize(P, "ann", 30, hold_id="h-second", expires_in=20)
    clock.advance(timedelta(seconds=15))  # h-first is due; 10 of 100 available


@pytest.mark.parametrize(
    "spend",
    [
        lambda w: w.wallet.authorize(P, "ann", 80, hold_id="h-big").transaction,
        lambda w: w.wallet.debit(P, "ann", 80, txn_id="d-big"),
    ],
    ids=["authorize", "debit"],
)
def test_a_hold_coming_due_while_others_settle_is_settled_too_not_a_refusal(
    wallet: Ledger,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    spend: Callable[[Ledger], object],
) -> None:
    _two_holds_one_due(wallet, clock)
    _time_passes_while_settling(wallet, clock, monkeypatch)
    assert spend(wallet) is not None
    assert wallet.wallet.holds(P, "ann")[-1].status is HoldStatus.EXPIRED
    assert {h.id: h.status for h in wallet.wallet.holds(P, "ann")}["h-second"] is (
        HoldStatus.EXPIRED
    )
    assert wallet.wallet.check(P, "ann") == []


def test_holds_still_due_after_settling_are_a_retry_not_a_final_refusal(
    wallet: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _two_holds_one_due(wallet, clock)
    monkeypatch.setattr(wallet.wallet._holds, "settle_overdue", lambda program, account: False)
    with pytest.raises(TooManyRetries):
        wallet.wallet.debit(P, "ann", 80, txn_id="d-big")
    monkeypatch.undo()
    clock.advance(timedelta(seconds=10))  # both holds due now
    assert wallet.wallet.debit(P, "ann", 80, txn_id="d-big").replay is False


def test_a_shortfall_behind_a_settled_holds_old_deadline_is_a_final_refusal(
    wallet: Ledger, clock: ManualClock
) -> None:
    """The head's earliest hold deadline stayed on a hold voided before it, while
    another hold kept something withheld: past that time every spend falling short
    looked for due holds, found none, and was refused without the refusal being
    kept (the same debit was applied after a top-up)."""
    fund(wallet, "ann", cash=100)
    wallet.wallet.authorize(P, "ann", 60, hold_id="h-short", expires_in=10)
    wallet.wallet.authorize(P, "ann", 30, hold_id="h-long", expires_in=600)
    wallet.wallet.void(P, "h-short")
    clock.advance(timedelta(seconds=15))
    with pytest.raises(InsufficientFunds):
        wallet.wallet.debit(P, "ann", 80, txn_id="d-big")
    wallet.wallet.credit(P, "ann", "cash", 100, txn_id="top-up")
    with pytest.raises(InsufficientFunds):  # final: kept for its transaction id
        wallet.wallet.debit(P, "ann", 80, txn_id="d-big")
    assert wallet.wallet.debit(P, "ann", 80, txn_id="d-again").replay is False
    assert wallet.wallet.check(P, "ann") == []


def test_a_charged_debit_outrun_by_other_spends_is_a_retry_not_a_refusal(
    wallet: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round of a charged debit found enough and lost it to another client's
    spend before committing: after three it answered 422 insufficient-funds (final
    to clients, though the debit needed no charge at all and was never refused)."""
    fund(wallet, "ann", cash=100)
    debits = wallet.wallet._debits
    preview = debits._preview
    rounds = iter(range(3))

    def outrun(*args: object, **kwargs: object) -> object:
        n = next(rounds, None)
        seen = preview(*args, **kwargs)  # type: ignore[arg-type]
        if n is not None:  # another client spends, then is refunded before the next round
            wallet.wallet.debit(P, "ann", 50, txn_id=f"other-{n}")
        return seen

    monkeypatch.setattr(debits, "_preview", outrun)
    monkeypatch.setattr(debits, "_commit", _topping_up_after(wallet, debits._commit))
    with pytest.raises(TooManyRetries):
        wallet.wallet.debit(P, "ann", 80, txn_id="d-charged", on_shortfall="charge")
    monkeypatch.undo()
    t = wallet.wallet.debit(P, "ann", 80, txn_id="d-charged", on_shortfall="charge")
    assert t.funds == {"cash": -80}
    assert t.charge is None
    assert wallet.wallet.check(P, "ann") == []


def _topping_up_after(wallet: Ledger, commit: Callable[..., object]) -> Callable[..., object]:
    """``commit``, then the other client's spend refunded (as a credit)."""
    n = iter(range(100))

    def commit_then_refund(*args: object, **kwargs: object) -> object:
        try:
            return commit(*args, **kwargs)
        finally:
            if args and args[2] == 80:
                wallet.wallet.credit(P, "ann", "cash", 50, txn_id=f"refund-{next(n)}")

    return commit_then_refund
