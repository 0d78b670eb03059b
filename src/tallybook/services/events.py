"""In-process events the ledger raises for other capabilities (notifications).

Publishers (wallet, loyalty, the posting engine's listeners) never depend on
subscribers; a failing subscriber is logged and does not undo a committed write
(a store error as one warning line, anything else with its traceback), and
:meth:`EventBus.publish` tells the publisher, which may keep what makes it try
again (a hold stays in the due index until its ``HoldExpired`` is written).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tallybook.errors import TallybookError

log = logging.getLogger("tallybook.events")


@dataclass(frozen=True, slots=True)
class LedgerEvent:
    """Something that happened to an account: ``type`` is a notification type name
    such as ``HoldExpired``, ``TierChanged`` or ``PointsExpiring``."""

    program: str
    account: str
    type: str
    payload: dict[str, Any] = field(default_factory=dict)
    #: stable id of the cause (transaction id, hold id...) so re-raising is idempotent
    source_id: str | None = None
    #: when the cause happened, if it may be long ago (an event raised again by a
    #: replay): past the notification history's retention it raises nothing, as
    #: the key that makes it once is forgotten by then
    occurred_at: datetime | None = None
    #: when what it tells stops being true (the points a ``PointsExpiring`` warns
    #: about are gone): the notification it raises is listed until then
    expires_at: datetime | None = None


Subscriber = Callable[[LedgerEvent], None]


class EventBus:
    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def publish(self, event: LedgerEvent) -> bool:
        """Hand ``event`` to every subscriber; False if one of them failed (logged)."""
        ok = True
        for subscriber in self._subscribers:
            try:
                subscriber(event)
            except TallybookError as exc:  # the store's answer: one line, no traceback
                ok = False
                log.warning(
                    "%s of %s not written (%s: %s)",
                    event.type,
                    event.account,
                    type(exc).__name__,
                    exc,
                )
            except Exception:
                ok = False
                log.exception("event subscriber failed for %s on %s", event.type, event.account)
        return ok
