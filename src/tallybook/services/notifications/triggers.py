"""Notifications the ledger raises by itself.

- From the posting engine: ``LowBalance`` when a fund's *available* amount
  (balance minus holds) drops below its ``FundSpec.low_balance_threshold``;
  dismissed (reason ``topped_up``, by the transaction id) once it is back at
  or above it. A fund that never was above its threshold raises nothing.
- From the event bus: every :class:`LedgerEvent` (``HoldExpired`` from the
  wallet, ``TierChanged`` and ``PointsExpiring`` from loyalty...) becomes a
  notification of its type; its ``source_id`` makes re-raising a no-op.

A failing trigger is logged and never undoes the committed write.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from tallybook.domain.ids import MAX_ID_LENGTH
from tallybook.domain.notifications import (
    LOW_BALANCE,
    DismissReason,
    Notification,
    check_payload,
    check_type,
    threshold_crossing,
)
from tallybook.services.events import EventBus, LedgerEvent
from tallybook.services.ledger.postings import Committed, PostingEngine

if TYPE_CHECKING:
    from tallybook.services.notifications.service import NotificationService

log = logging.getLogger("tallybook.notifications")


def attach(service: NotificationService, *, engine: PostingEngine, events: EventBus) -> None:
    """Subscribe ``service`` to the engine's commits and to the event bus (the
    composition root, ``tallybook.Ledger``, does this once per ledger)."""

    def on_committed(event: Committed) -> None:
        try:
            low_balance(service, event)
        except Exception:
            log.exception("low-balance notification failed for %s", event.transaction.id)

    def on_event(event: LedgerEvent) -> None:
        ledger_event(service, event)

    engine.subscribe(on_committed)
    events.subscribe(on_event)


def low_balance(service: NotificationService, event: Committed) -> None:
    for account, funds in event.after.items():
        before = event.before.get(account)
        if before is None:
            continue
        for fund, state in funds.items():
            spec = event.program.fund(fund)
            threshold = spec.low_balance_threshold if spec else None
            if threshold is None:
                continue
            crossing = threshold_crossing(before.fund(fund).available, state.available, threshold)
            if crossing is True:
                payload = {
                    "fund": fund,
                    "balance": state.balance,
                    "available": state.available,
                    "threshold": threshold,
                    "txn_id": event.transaction.id,
                }
                key = f"lb:{event.transaction.id}:{fund}"
                service.add_to(event.program, account, LOW_BALANCE, payload, key, None)
            elif crossing is False:
                service.dismiss_type(
                    event.program.id,
                    account,
                    LOW_BALANCE,
                    by=event.transaction.id,
                    reason=DismissReason.TOPPED_UP,
                    where=_about(fund),
                )


def ledger_event(service: NotificationService, event: LedgerEvent) -> None:
    program = service.programs.get(event.program)
    key = event_key(event.type, event.source_id) if event.source_id else None
    payload = check_payload(dict(event.payload))
    service.add_to(program, event.account, check_type(event.type), payload, key, None)


def _about(fund: str) -> Callable[[Notification], bool]:
    """Only the LowBalance about this fund is cleared by this fund's top-up."""
    return lambda n: n.payload.get("fund") == fund


def event_key(type_: str, source_id: str) -> str:
    """The idempotency key of a notification the ledger raises: ``ev:{type}:{source}``,
    or its digest when that is longer than a key may be (a hold or tier id
    of a long account id), so that the event still raises it exactly once."""
    key = f"ev:{type_}:{source_id}"
    if len(key) <= MAX_ID_LENGTH:
        return key
    return f"ev:{type_}:h-{hashlib.sha256(key.encode()).hexdigest()[:48]}"
