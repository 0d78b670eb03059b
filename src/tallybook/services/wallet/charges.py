"""The charge hook: how a wallet debit charges a shortfall to an external payment method.

A processor is anything with ``charge`` and ``refund`` (:class:`ChargeProcessor`).
Both are keyed by an idempotency key the wallet derives from the transaction
id, so a retried debit charges once, and a refund of a key that was never
charged is a no-op: the reconcile job relies on both.

Pick one with ``$TALLYBOOK_CHARGE_PROCESSOR``: ``none`` (the default: charging
is refused), ``fake`` / ``fake:decline`` / ``fake:timeout`` (the in-memory fake
used in development and tests) or ``package.module:factory``.
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from tallybook.errors import ConfigError


class ChargeDeclined(Exception):
    """The payment method was refused; nothing was charged."""


class ChargeTimeout(Exception):
    """The processor did not answer in time; the charge may or may not have happened."""


@runtime_checkable
class ChargeProcessor(Protocol):
    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        """Charge ``amount`` minor units; return the processor's reference.

        Raises :class:`ChargeDeclined` or :class:`ChargeTimeout`. The same ``key``
        charges at most once and returns the same reference.
        """
        ...

    def refund(self, *, key: str) -> None:
        """Undo the charge made under ``key``; a no-op when there is none."""
        ...


FakeMode = Literal["succeed", "decline", "timeout"]


@dataclass
class FakeCharge:
    key: str
    account: str
    amount: int
    currency: str
    refunded: bool = False


class FakeChargeProcessor:
    """In-memory processor: ``mode`` makes it succeed, decline or time out.

    A timeout is the nasty kind: the charge *is* recorded before the error, as a
    real processor may have charged before the connection dropped.
    """

    def __init__(self, mode: FakeMode = "succeed") -> None:
        self.mode: FakeMode = mode
        self.charges: dict[str, FakeCharge] = {}
        self._lock = threading.Lock()

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        with self._lock:
            if self.mode == "decline":
                raise ChargeDeclined("card declined")
            existing = self.charges.get(key)
            if existing is None or existing.refunded:
                self.charges[key] = FakeCharge(key, account, amount, currency)
            if self.mode == "timeout":
                raise ChargeTimeout("processor timed out")
            return f"fake-{key}"

    def refund(self, *, key: str) -> None:
        with self._lock:
            if key in self.charges:
                self.charges[key].refunded = True

    @property
    def net_charged(self) -> int:
        """What customers were charged and not refunded."""
        return sum(c.amount for c in self.charges.values() if not c.refunded)


class NoChargeProcessor:
    """The default: refuses to charge, so nothing is charged by accident."""

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        raise ChargeDeclined("no charge processor is configured (set TALLYBOOK_CHARGE_PROCESSOR)")

    def refund(self, *, key: str) -> None:
        return None


def processor_from_env(spec: str | None = None) -> ChargeProcessor:
    """The processor ``spec`` (or ``$TALLYBOOK_CHARGE_PROCESSOR``) names."""
    spec = (spec if spec is not None else os.environ.get("TALLYBOOK_CHARGE_PROCESSOR", "")).strip()
    if spec in ("", "none"):
        return NoChargeProcessor()
    if spec == "fake" or spec.startswith("fake:"):
        mode = spec.partition(":")[2] or "succeed"
        if mode not in ("succeed", "decline", "timeout"):
            raise ConfigError(f"unknown fake charge processor mode {mode!r}")
        return FakeChargeProcessor(mode)  # type: ignore[arg-type]
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(
            "TALLYBOOK_CHARGE_PROCESSOR must be none, fake[:decline|:timeout] or module:factory"
        )
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load charge processor {spec!r}: {exc}") from exc
    processor = factory()
    if not isinstance(processor, ChargeProcessor):
        raise ConfigError(f"{spec!r} did not return an object with charge() and refund()")
    return processor
