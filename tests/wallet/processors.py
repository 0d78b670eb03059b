"""Charge processors that fail where tests need them to, shared by the wallet's surfaces."""

from __future__ import annotations

from tallybook.reliability.faults import Crash
from tallybook.services.wallet.charges import FakeChargeProcessor


class RefundFails(FakeChargeProcessor):
    """The fake processor, whose refunds raise what the protocol does not name."""

    def refund(self, *, key: str) -> None:
        raise RuntimeError("refund bug")


class DiesAfterCharging(FakeChargeProcessor):
    """The process dies right after the charge is collected (its intent stays)."""

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        super().charge(key=key, account=account, amount=amount, currency=currency)
        raise Crash("after the charge")
