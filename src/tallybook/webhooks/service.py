"""``ledger.webhooks``: subscriptions, their deliveries, resend, and a delivery pass."""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from tallybook.errors import ConditionFailed, NotFound, ValidationError
from tallybook.services.clock import Clock
from tallybook.services.ledger.core import ProgramDirectory
from tallybook.store import keys
from tallybook.store.port import Exists, ItemStore, NotExists, Put, Set, Update
from tallybook.webhooks.delivery import PassStats, RetryPolicy
from tallybook.webhooks.fanout import MAX_SUBSCRIPTIONS, PENDING
from tallybook.webhooks.sender import Sender
from tallybook.webhooks.subscriptions import ACTIVE, DISABLED, Created, Subscription
from tallybook.webhooks.subscriptions import SubscriptionStore as _Subs

if TYPE_CHECKING:
    from tallybook.webhooks.worker import DeliveryWorker

MAX_PAGE = 200


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event's delivery to one subscription, with its last attempts."""

    subscription: str
    position: str
    event_id: str
    type: str
    accounts: tuple[str, ...]
    status: str
    attempts: int
    at: str
    last_code: int | None
    last_error: str | None
    last_latency_ms: int | None
    log: tuple[dict[str, Any], ...]

    def public(self) -> dict[str, Any]:
        return {
            "subscription": self.subscription,
            "position": self.position,
            "event_id": self.event_id,
            "type": self.type,
            "accounts": list(self.accounts),
            "status": self.status,
            "attempts": self.attempts,
            "at": self.at,
            "last_code": self.last_code,
            "last_error": self.last_error,
            "last_latency_ms": self.last_latency_ms,
            "log": list(self.log),
        }


def _delivery(sub_id: str, item: dict[str, Any]) -> Delivery:
    return Delivery(
        subscription=sub_id,
        position=item["sk"],
        event_id=item["event_id"],
        type=item["type"],
        accounts=tuple(item.get("accounts") or ()),
        status=item.get("status", PENDING),
        attempts=int(item.get("attempts") or 0),
        at=item.get("at", ""),
        last_code=item.get("last_code"),
        last_error=item.get("last_error"),
        last_latency_ms=item.get("last_latency_ms"),
        log=tuple(item.get("log") or ()),
    )


class WebhookService:
    def __init__(self, store: ItemStore, clock: Clock, programs: ProgramDirectory) -> None:
        self.store = store
        self.clock = clock
        self.programs = programs
        self.subs = _Subs(store, clock)

    def create(
        self,
        program: str,
        url: str,
        *,
        types: list[str] | tuple[str, ...] = (),
        allow_http: bool = False,
        description: str | None = None,
        sub_id: str | None = None,
    ) -> Created:
        """Subscribe ``url`` to ``types`` (all when empty); the secret is in the answer only."""
        self.programs.get(program)
        if len(self.subs.list(program)) >= MAX_SUBSCRIPTIONS:
            raise ValidationError(f"a program has at most {MAX_SUBSCRIPTIONS} subscriptions")
        return self.subs.create(
            program,
            url,
            types=types,
            allow_http=allow_http,
            description=description,
            sub_id=sub_id,
        )

    def list(self, program: str) -> list[Subscription]:
        return self.subs.list(program)

    def get(self, program: str, sub_id: str) -> Subscription:
        return self.subs.get(program, sub_id)

    def disable(self, program: str, sub_id: str, reason: str = "disabled by an operator") -> None:
        self.subs.set_status(program, sub_id, DISABLED, reason)

    def enable(self, program: str, sub_id: str) -> None:
        self.subs.set_status(program, sub_id, ACTIVE, None)

    def delete(self, program: str, sub_id: str) -> None:
        self.subs.delete(program, sub_id)

    def rekey(self, program: str | None = None) -> int:
        """Seal every subscription's secret under the current server key (plain-text
        secrets of older versions too); how many changed. One program, or all."""
        programs = [program] if program is not None else self.programs.list()
        return sum(self.subs.reseal(p) for p in programs)

    def deliveries(
        self, program: str, sub_id: str, *, limit: int = 50, cursor: str | None = None
    ) -> tuple[builtins.list[Delivery], str | None]:
        """A subscription's deliveries, newest first, a page at a time."""
        self.subs.item(program, sub_id)
        if not 1 <= limit <= MAX_PAGE:
            raise ValidationError(f"limit must be between 1 and {MAX_PAGE}")
        page = self.store.query(
            keys.webhook_deliveries(program, sub_id), forward=False, limit=limit, cursor=cursor
        )
        items = [_delivery(sub_id, cast(dict[str, Any], i)) for i in page.items]
        return items, page.cursor

    def resend(self, program: str, sub_id: str, position: str) -> Delivery:
        """Queue a delivery again (delivered or dead); one already queued stays as it is."""
        key = keys.webhook_delivery(program, sub_id, position)
        item = self.store.get(key)
        if item is None:
            raise NotFound(f"delivery {position} not found for subscription {sub_id}")
        queued: dict[str, Any] = {
            **keys.webhook_queued(program, sub_id, position).as_item(),
            "event_id": item["event_id"],
            "type": item["type"],
            "accounts": item.get("accounts") or [],
            "attempts": 0,
            "next_us": 0,
            "first_us": 0,
            "at": item.get("at", ""),
            # its record has attempts already: they are read and kept
            "resent": True,
        }
        with contextlib.suppress(ConditionFailed):
            self.store.transact_write(
                [
                    Put(queued, NotExists("pk")),
                    Update(key, (Set("status", PENDING),), Exists("pk")),
                ]
            )
        return _delivery(sub_id, cast(dict[str, Any], {**item, "status": PENDING}))

    def worker(
        self,
        *,
        sender: Sender | None = None,
        policy: RetryPolicy | None = None,
        now: Callable[[], float] | None = None,
        lease_seconds: float | None = None,
    ) -> DeliveryWorker:
        """A delivery worker over this store (``run_once`` is one pass)."""
        from tallybook.webhooks.worker import LEASE_SECONDS, DeliveryWorker

        extra: dict[str, Any] = {"now": now} if now is not None else {}
        return DeliveryWorker(
            self.store,
            self.clock,
            self.programs,
            sender=sender,
            policy=policy,
            lease_seconds=lease_seconds or LEASE_SECONDS,
            **extra,
        )

    def deliver(self) -> PassStats:
        """One delivery pass with the default sender and retry policy."""
        return self.worker().run_once()
