"""``ledger.webhooks``: subscriptions, their deliveries, resend, and a delivery pass."""

from __future__ import annotations

import builtins
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tallybook.domain.webhooks import (
    ACTIVE,
    DISABLED,
    PENDING,
    POSITION_PATTERN,
    Delivery,
    Subscription,
    stored_position,
)
from tallybook.errors import ConditionFailed, NotFound, ValidationError
from tallybook.services.clock import Clock
from tallybook.services.ledger.core import ProgramDirectory
from tallybook.store.port import ItemStore
from tallybook.store.queries import bind_cursor, unbind_cursor
from tallybook.store.records.webhook_events import delivery_page, read_delivery, resend_actions
from tallybook.webhooks.delivery import PassStats, RetryPolicy
from tallybook.webhooks.fanout import MAX_SUBSCRIPTIONS
from tallybook.webhooks.sender import Sender
from tallybook.webhooks.subscriptions import MAX_DESCRIPTION, Created, check_printable
from tallybook.webhooks.subscriptions import SubscriptionStore as _Subs
from tallybook.webhooks.vault import RekeyIncomplete

if TYPE_CHECKING:
    from tallybook.webhooks.worker import DeliveryWorker

MAX_PAGE = 200
#: creates run one at a time per process, so the subscription limit is not raced
_CREATING = threading.Lock()


class WebhookService:
    """``ledger.webhooks``: signed event subscriptions and their deliveries (docs/webhooks.md)."""

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
        """Subscribe ``url`` to ``types`` (all when empty); the secret is in the answer only.

        The limit holds under concurrent creates: they run one at a time in this
        process, and one that finds the program over the limit once written (a
        create in another process got in between) removes itself and is refused."""
        self.programs.get(program)
        full = f"a program has at most {MAX_SUBSCRIPTIONS} subscriptions"
        with _CREATING:
            if len(self.subs.list(program)) >= MAX_SUBSCRIPTIONS:
                raise ValidationError(full)
            created = self.subs.create(
                program,
                url,
                types=types,
                allow_http=allow_http,
                description=description,
                sub_id=sub_id,
            )
            if len(self.subs.list(program)) > MAX_SUBSCRIPTIONS:
                self.subs.delete(program, created.subscription.id)
                raise ValidationError(full)
        return created

    def list(self, program: str) -> list[Subscription]:
        """The program's subscriptions (each with a hint of its secret, never the secret)."""
        self.programs.get(program)  # an unknown program is NotFound, not an empty list
        return self.subs.list(program)

    def get(self, program: str, sub_id: str) -> Subscription:
        """One subscription, or :class:`NotFound`."""
        return self.subs.get(program, sub_id)

    def disable(self, program: str, sub_id: str, reason: str = "disabled by an operator") -> None:
        """Stop delivering to the subscription, recording ``reason`` (1-200 characters)."""
        if not isinstance(reason, str) or not 0 < len(reason) <= MAX_DESCRIPTION:
            raise ValidationError(f"reason must be a string of 1 to {MAX_DESCRIPTION} characters")
        check_printable(reason, "reason")
        self.subs.set_status(program, sub_id, DISABLED, reason)

    def enable(self, program: str, sub_id: str) -> None:
        """Deliver to a disabled subscription again."""
        self.subs.set_status(program, sub_id, ACTIVE, None)

    def delete(self, program: str, sub_id: str) -> None:
        """Remove the subscription and its queue; :meth:`deliveries` still lists its
        delivery records until they expire (30 days after they were queued)."""
        self.subs.delete(program, sub_id)

    def rekey(self, program: str | None = None) -> int:
        """Seal every subscription's secret under the current server key (plain-text
        secrets of older versions too); how many changed. One program, or all.

        Without a server key nothing is touched (:class:`WebhookKeyError`). A secret
        no listed key opens does not stop the others: every one that opens is
        sealed, then :class:`RekeyIncomplete` names each that did not. Each secret
        is one write and a sealed one is skipped, so running it again is safe."""
        if program is not None:
            self.programs.get(program)  # an unknown program is NotFound, not "0 changed"
        programs = [program] if program is not None else self.programs.list()
        found = [s for p in programs for s in self.subs.stored_all(p)]
        # no key (and no plain secret to make a SQLite key file for): refused before
        # any write; a key made for nothing would only stand in a lost one's way
        self.subs.keyring(make=any(s.sealed is None for s in found))
        failed: builtins.list[tuple[str, str, str]] = []
        done = self.subs.reseal(found, failed)
        if failed:
            raise RekeyIncomplete(done, failed)
        return done

    def deliveries(
        self, program: str, sub_id: str, *, limit: int = 50, cursor: str | None = None
    ) -> tuple[builtins.list[Delivery], str | None]:
        """A subscription's deliveries, newest first, a page at a time.

        A deleted subscription's records stay listed until they expire; an id with
        neither a subscription nor records is :class:`NotFound`."""
        try:
            self.subs.stored(program, sub_id)
            missing = None
        except NotFound as exc:  # deleted, or never made: its records tell
            missing = exc
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise ValidationError(f"limit must be an integer from 1 to {MAX_PAGE}")
        listing = ("deliveries", program, sub_id)
        found, after = delivery_page(
            self.store, program, sub_id, limit, unbind_cursor(cursor, *listing)
        )
        if missing is not None and not found and cursor is None:
            raise missing
        return found, bind_cursor(after, *listing)

    def resend(self, program: str, sub_id: str, position: str) -> Delivery:
        """Queue a delivery again (delivered or dead); one already queued stays as it is.

        The subscription must exist: a deleted one's records stay readable until they
        expire, but a queue row for it would be sent to any later subscription given
        its id."""
        return self.requeue(program, sub_id, position)[0]

    def requeue(self, program: str, sub_id: str, position: str) -> tuple[Delivery, bool]:
        """:meth:`resend`, and whether it queued the delivery again (False: it was
        still queued, and nothing changed)."""
        self.subs.stored(program, sub_id)
        if not isinstance(position, str) or not re.fullmatch(POSITION_PATTERN, position):
            raise ValidationError(
                f"position {str(position)[:80]!r} is not a delivery position (see deliveries)"
            )
        position = stored_position(position)  # as `webhooks deliveries` shows it, or whole
        found = read_delivery(self.store, program, sub_id, position)
        if found is None:
            raise NotFound(f"delivery {position} not found for subscription {sub_id}")
        try:
            self.store.transact_write(resend_actions(program, found))
        except ConditionFailed:  # its queue row is there: not sent yet
            return replace(found, status=PENDING), False
        return replace(found, status=PENDING), True

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
