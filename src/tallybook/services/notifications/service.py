"""Notifications: add, list, dismiss, history; raised by the ledger itself.

Invariant 6 (at most one active notification per account and type) holds by
construction: the active notification of a type is the single item
``N#A#{type}``. An add is one storage transaction that puts the new active
item on condition that the current one is still the one it read (or that
there is none), puts the newcomer's history row, marks the superseded one's
history row as dismissed by the newcomer, and deletes what the type's rule
dismisses. Concurrent adds of one type fail the condition and retry.

The service subscribes to the posting engine (``LowBalance`` raised when a
fund's available amount drops below its ``low_balance_threshold``, dismissed
when it is back at or above it) and to the ledger's event bus (``HoldExpired``,
``TierChanged``, ``PointsExpiring``...): ``Ledger(...)`` wires it up with
``triggers.attach``, so a service built on its own raises nothing by itself.

Modules: ``notification_add`` (the add transaction and delivery),
``notification_dismiss`` (find and dismiss), ``notification_items`` (stored
rows), ``notification_triggers`` (what the ledger raises),
``notification_delivery`` (hooks), ``events_ingest`` (SNS and NDJSON).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tallybook.domain.ids import check_flag, check_id
from tallybook.domain.model import Program
from tallybook.domain.notifications import (
    DismissReason,
    Notification,
    NotificationRules,
    Status,
    check_payload,
    check_type,
    created_us_of,
    parse_rules,
)
from tallybook.domain.times import check_optional_time
from tallybook.errors import (
    NotFound,
    TooManyRetries,
    ValidationError,
)
from tallybook.retry import RetryPolicy, retrying
from tallybook.services.clock import Clock
from tallybook.services.ledger.accounts import check_limit
from tallybook.services.ledger.core import AccountLookup
from tallybook.services.ledger.programs import ProgramService
from tallybook.services.notifications import add as adding
from tallybook.services.notifications import dismiss as dismissing
from tallybook.services.notifications.delivery import Delivery, delivery_from_env
from tallybook.store.port import ItemStore
from tallybook.store.queries import bind_cursor, unbind_cursor
from tallybook.store.records import notifications as items
from tallybook.store.records.codec import to_us

if TYPE_CHECKING:
    from tallybook.services.notifications.ingest import EventIngestor

#: who dismissed a notification: "user", a transaction id, an operator name
MAX_DISMISSED_BY = 128


@dataclass(frozen=True, slots=True)
class NotificationPage:
    notifications: list[Notification]
    cursor: str | None


class NotificationService:
    """``ledger.notifications``: per-account notifications, at most one active per type,
    their history and rules (docs/notifications.md)."""

    def __init__(
        self,
        store: ItemStore,
        clock: Clock,
        programs: ProgramService,
        accounts: AccountLookup,
        *,
        delivery: Delivery | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.programs = programs
        self.accounts = accounts
        self.delivery: Delivery = delivery or delivery_from_env()
        self.retry_policy = retry_policy or RetryPolicy(attempts=20)

    @cached_property
    def ingestor(self) -> EventIngestor:
        """Inbound events (SNS envelopes, NDJSON); counts what it accepts and rejects."""
        from tallybook.services.notifications.ingest import EventIngestor

        return EventIngestor(self)

    # -- rules ---------------------------------------------------------------

    def rules(self, program: str) -> NotificationRules:
        """The program's rules as stored (writers use a copy cached for up to 2 s)."""
        settings = self.programs.get(program, fresh=True).settings
        return parse_rules(settings.get("notifications"), stored=True)

    def set_rules(self, program: str, rules: Mapping[str, Any]) -> NotificationRules:
        """Replace the program's notification rules (``settings["notifications"]``)."""
        if not isinstance(rules, Mapping):
            raise ValidationError("notification rules must be a mapping")
        parsed = parse_rules(rules)
        current = self.programs.get(program, fresh=True)
        self.programs.update_settings(program, {**current.settings, "notifications": dict(rules)})
        return parsed

    # -- writes ----------------------------------------------------------------

    def add(
        self,
        program: str,
        account: str,
        type: str,
        payload: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        expires_at: datetime | None = None,
    ) -> Notification:
        """Add a notification; it supersedes the active one of its type.

        With ``idempotency_key``, adding again is a no-op that returns the
        original (``replay=True``); another type or payload under the same key
        is an :class:`IdempotencyConflict`.
        """
        check_id(account, "account id")
        check_type(type)
        # a Mapping is copied; anything else (a list, a string) is refused by check_payload
        body = check_payload(dict(payload) if isinstance(payload, Mapping) else payload)
        if idempotency_key is not None:
            check_id(idempotency_key, "idempotency key")
        expires_at = check_optional_time(expires_at, "expires_at")
        if expires_at is not None:  # the answer's times are UTC, as when read back
            expires_at = expires_at.astimezone(UTC)
        prog = self.programs.get(program)
        head = self.accounts.get(program, account)
        return adding.add(self, prog, account, type, body, idempotency_key, expires_at, head)

    def dismiss(self, program: str, account: str, notification_id: str) -> Notification:
        """Dismiss one notification; dismissing it again returns it unchanged."""
        check_id(account, "account id")
        self.programs.get(program)
        if not isinstance(notification_id, str):
            raise ValidationError("a notification id is a string (n-...)")
        us = created_us_of(notification_id)
        if us is None:
            raise NotFound(f"notification {notification_id[:80]} not found")
        with retrying(self.retry_policy) as tries:
            for _ in tries:
                now = self.clock.now()
                found = dismissing.find(self.store, program, account, notification_id, us, now)
                if found is None:
                    raise NotFound(f"notification {notification_id} not found on account {account}")
                hist, active = found
                if active is None:
                    assert hist is not None
                    return items.from_item(hist, now)
                done = dismissing.dismiss_active(
                    self.store, active, now, "user", DismissReason.USER
                )
                if done is not None:
                    return done
        raise TooManyRetries(f"dismissing {notification_id} kept conflicting; retry it")

    def dismiss_type(
        self,
        program: str,
        account: str,
        type: str,
        *,
        by: str = "user",
        reason: str = DismissReason.USER,
        where: Callable[[Notification], bool] | None = None,
    ) -> Notification | None:
        """Dismiss the active notification of ``type``; ``None`` if there is none.

        ``by`` (1-128 characters) and ``reason`` (a :class:`DismissReason`) are
        recorded; ``where``, if given, must accept the notification. An account
        the program does not have is :class:`NotFound` (checked only when
        nothing was dismissed)."""
        check_id(account, "account id")
        check_type(type)
        if not isinstance(by, str) or not 0 < len(by) <= MAX_DISMISSED_BY:
            raise ValidationError(f"by must be a string of 1 to {MAX_DISMISSED_BY} characters")
        if reason not in list(DismissReason):
            reasons = ", ".join(r.value for r in DismissReason)
            raise ValidationError(f"reason must be one of {reasons} (got {reason!r})")
        if where is not None and not callable(where):
            raise ValidationError("where must be a function of the notification, or None")
        self.programs.get(program)
        done = self.dismiss_from(program, account, type, by, reason, where)
        if done is None:
            self.accounts.get(program, account)
        return done

    # -- reads -----------------------------------------------------------------

    def get(self, program: str, account: str, notification_id: str) -> Notification:
        """One notification by id, active or from history."""
        check_id(account, "account id")
        self.programs.get(program)
        if not isinstance(notification_id, str):
            raise ValidationError("a notification id is a string (n-...)")
        us = created_us_of(notification_id)
        now = self.clock.now()
        found = (
            dismissing.find(self.store, program, account, notification_id, us, now) if us else None
        )
        if found is None:
            raise NotFound(f"notification {notification_id[:80]} not found on account {account}")
        hist, active = found
        if hist is not None:
            return items.from_item(hist, now)
        assert active is not None
        return items.from_item(active, now)

    def history(
        self,
        program: str,
        account: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        newest_first: bool = True,
        limit: int = 50,
        cursor: str | None = None,
    ) -> NotificationPage:
        """One page of history; ``since`` inclusive, ``until`` exclusive.

        Items past the retention period are invisible (their TTL passed).
        """
        check_id(account, "account id")
        check_limit(limit)
        check_flag(newest_first, "newest_first")
        since = check_optional_time(since, "since")
        until = check_optional_time(until, "until")
        self.programs.get(program)
        if since and until and since >= until:
            raise ValidationError("'since' must be before 'until'")
        since_us = to_us(since) if since else None
        until_us = to_us(until) if until else None
        listing = ("notifications", program, account, since_us, until_us, newest_first)
        page = items.history_page(
            self.store,
            program,
            account,
            since_us=since_us,
            until_us=until_us,
            forward=not newest_first,
            limit=limit,
            cursor=unbind_cursor(cursor, *listing),
        )
        if not page.items and cursor is None:
            self.accounts.get(program, account)
        now = self.clock.now()
        return NotificationPage(
            [items.from_item(i, now) for i in page.items if items.live(i, now)],
            bind_cursor(page.cursor, *listing),
        )

    # -- internals -------------------------------------------------------------

    def add_to(
        self,
        program: Program,
        account: str,
        type_: str,
        payload: dict[str, Any],
        key: str | None,
        expires_at: datetime | None,
    ) -> Notification:
        """Add for ``program`` without checking the account (the ledger's own triggers)."""
        return adding.add(self, program, account, type_, payload, key, expires_at)

    def dismiss_from(
        self,
        program: str,
        account: str,
        type_: str,
        by: str,
        reason: str,
        where: Callable[[Notification], bool] | None,
    ) -> Notification | None:
        """Dismiss the active ``type_`` without checking the program or the account
        (the ledger's own triggers); ``None`` if there is none or ``where`` refuses it."""
        with retrying(self.retry_policy) as tries:
            for _ in tries:
                now = self.clock.now()
                active = items.read_active(self.store, program, account, type_)
                if active is None or not items.live(active, now):
                    return None
                if where is not None and not where(items.from_item(active, now)):
                    return None
                done = dismissing.dismiss_active(self.store, active, now, by, reason)
                if done is not None:
                    return done
        raise TooManyRetries(f"dismissing {type_} on {account} kept conflicting; retry it")

    # -- invariants --------------------------------------------------------------

    def check(self, program: str, account: str) -> list[str]:
        """Invariant 6 over one account: of its history rows, those still active
        (marked so and not past their ``expires_at``) are at most one per type,
        and that one is the type's active item.

        The store hides an active item from the whole second its ``expires_at``
        falls in (its ``ttl``), so a row is past it from that second on here too,
        and ``now`` is read after the active items: one hidden by then is past."""
        problems: list[str] = []
        active: dict[str, str] = {}
        for item in items.active_rows(self.store, program, account):
            if (problem := items.row_problem(item, account)) is not None:
                problems.append(problem)
                continue
            active[str(item["type"])] = str(item["id"])
        now = self.clock.now()
        marked: dict[str, list[str]] = {}
        for item in items.history_rows(self.store, program, account):
            if (problem := items.row_problem(item, account)) is not None:
                problems.append(problem)
                continue
            n = items.from_item(item, now)
            if n.status is Status.ACTIVE and (
                n.expires_at is None or items.epoch(n.expires_at) > items.epoch(now)
            ):
                marked.setdefault(str(item["type"]), []).append(str(item["id"]))
        for type_, ids in marked.items():
            if len(ids) > 1:
                problems.append(f"{account} has {len(ids)} active {type_} notifications")
            elif active.get(type_) != ids[0]:
                problems.append(
                    f"{account}/{type_}: history says {ids[0]} is active, "
                    f"the active item is {active.get(type_)}"
                )
        return problems

    # defined last: inside the class body, ``list`` would shadow the builtin
    def list(self, program: str, account: str) -> list[Notification]:
        """The account's active notifications, newest first (one query)."""
        check_id(account, "account id")
        self.programs.get(program)
        now = self.clock.now()
        found = [i for i in items.active_rows(self.store, program, account) if items.live(i, now)]
        if not found:
            self.accounts.get(program, account)
        found.sort(key=items.created_us, reverse=True)
        return [items.from_item(i, now) for i in found]
