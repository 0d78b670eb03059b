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
``TierChanged``, ``PointsExpiring``...), so ``Ledger(...)`` wires it up.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from tallybook.domain.ids import check_id
from tallybook.domain.model import Program
from tallybook.domain.notifications import (
    DismissReason,
    Notification,
    NotificationRules,
    Status,
    check_payload,
    check_type,
    created_us_of,
    make_id,
    parse_rules,
)
from tallybook.domain.postings import fingerprint
from tallybook.errors import (
    ConditionFailed,
    IdempotencyConflict,
    NotFound,
    TallybookError,
    TooManyRetries,
    TransactionConflict,
    ValidationError,
)
from tallybook.services import notification_items as items
from tallybook.services import notification_triggers as triggers
from tallybook.services.accounts import check_limit
from tallybook.services.codec import from_us, iso, to_us
from tallybook.services.notification_delivery import Delivery, delivery_from_env
from tallybook.services.retry import Backoff
from tallybook.store import keys
from tallybook.store.port import (
    Action,
    Compare,
    Delete,
    Exists,
    Item,
    Key,
    NotExists,
    Put,
    Set,
    SortCondition,
    Update,
)

if TYPE_CHECKING:
    from tallybook.ledger import Ledger
    from tallybook.services.events_ingest import EventIngestor

log = logging.getLogger("tallybook.notifications")


@dataclass(frozen=True, slots=True)
class NotificationPage:
    notifications: list[Notification]
    cursor: str | None


class NotificationService:
    def __init__(
        self,
        ledger: Ledger,
        *,
        delivery: Delivery | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.ledger = ledger
        self.store = ledger.store
        self.clock = ledger.clock
        self.programs = ledger.programs
        self.delivery: Delivery = delivery or delivery_from_env()
        self.backoff = backoff or Backoff(attempts=20)
        triggers.attach(self, ledger)

    @cached_property
    def ingestor(self) -> EventIngestor:
        """Inbound events (SNS envelopes, NDJSON); counts what it accepts and rejects."""
        from tallybook.services.events_ingest import EventIngestor

        return EventIngestor(self)

    # -- rules ---------------------------------------------------------------

    def rules(self, program: str) -> NotificationRules:
        """The program's rules as stored (writers use a copy cached for up to 2 s)."""
        return parse_rules(self.programs.get(program, fresh=True).settings.get("notifications"))

    def set_rules(self, program: str, rules: Mapping[str, Any]) -> NotificationRules:
        """Replace the program's notification rules (``settings["notifications"]``)."""
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
        body = check_payload(dict(payload) if payload is not None else None)
        if idempotency_key is not None:
            check_id(idempotency_key, "idempotency key")
        prog = self.programs.get(program)
        self.ledger.accounts.get(program, account)
        return self.add_to(prog, account, type, body, idempotency_key, expires_at)

    def dismiss(self, program: str, account: str, notification_id: str) -> Notification:
        """Dismiss one notification; dismissing it again returns it unchanged."""
        check_id(account, "account id")
        self.programs.get(program)
        us = created_us_of(notification_id)
        if us is None:
            raise NotFound(f"notification {notification_id[:80]} not found")
        for _ in self.backoff.delays():
            now = self.clock.now()
            found = self._find(program, account, notification_id, us, now)
            if found is None:
                raise NotFound(f"notification {notification_id} not found on account {account}")
            hist, active = found
            if active is None:
                assert hist is not None
                return items.from_item(hist, now)
            done = self._dismiss_active(active, now, "user", DismissReason.USER)
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
        """Dismiss the active notification of ``type``; ``None`` if there is none."""
        check_id(account, "account id")
        check_type(type)
        self.programs.get(program)
        for _ in self.backoff.delays():
            now = self.clock.now()
            active = self.store.get(keys.notification_active(program, account, type))
            if active is None or not items.live(active, now):
                return None
            if where is not None and not where(items.from_item(active, now)):
                return None
            done = self._dismiss_active(active, now, by, reason)
            if done is not None:
                return done
        raise TooManyRetries(f"dismissing {type} on {account} kept conflicting; retry it")

    # -- reads -----------------------------------------------------------------

    def get(self, program: str, account: str, notification_id: str) -> Notification:
        """One notification by id, active or from history."""
        check_id(account, "account id")
        self.programs.get(program)
        us = created_us_of(notification_id)
        now = self.clock.now()
        found = self._find(program, account, notification_id, us, now) if us else None
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
        self.programs.get(program)
        if since and until and since >= until:
            raise ValidationError("'since' must be before 'until'")
        low = keys.notification_history_bound(to_us(since)) if since else "N#H#"
        high = keys.notification_history_bound(to_us(until) - 1) + "#~" if until else "N#H#~"
        page = self.store.query(
            keys.account_partition(program, account),
            SortCondition.between(low, high),
            forward=not newest_first,
            limit=limit,
            cursor=cursor,
        )
        if not page.items and cursor is None:
            self.ledger.accounts.get(program, account)
        now = self.clock.now()
        return NotificationPage(
            [items.from_item(i, now) for i in page.items if items.live(i, now)], page.cursor
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
        rules = parse_rules(program.settings.get("notifications"))
        rule = rules.rule(type_)
        fp = fingerprint(
            {
                "type": type_,
                "payload": payload,
                "expires_at": iso(expires_at) if expires_at else None,
            }
        )
        targets = ([type_] if rule.listed else []) + [t for t in rule.dismisses if t != type_]
        no_history: set[str] = set()
        for _ in self.backoff.delays():
            now = self.clock.now()
            current = self._actives(program.id, account, targets)
            prev = current.get(type_)
            created_us = max(to_us(now), items.created_us(prev) + 1 if prev else 0)
            created = from_us(created_us)
            expiry = expires_at
            if expiry is None and rule.expires_after_days is not None:
                expiry = created + timedelta(days=rule.expires_after_days)
            n = Notification(
                program=program.id,
                account=account,
                id=make_id(created_us, secrets.token_hex(5)),
                type=type_,
                payload=payload,
                created_at=created,
                status=Status.ACTIVE if rule.listed else Status.UNLISTED,
                listed=rule.listed,
                expires_at=expiry,
                source=key,
            )
            ttl = items.epoch(created) + rules.retention_days * 86_400
            actions: list[Action] = []
            if key is not None:
                actions.append(Put(items.idempotency_item(n, key, fp, ttl), NotExists("pk")))
            if rule.listed:
                guard = Compare("id", "=", prev["id"]) if prev else NotExists("pk")
                actions.append(Put(items.active_item(n, created_us), guard))
            actions.append(Put(items.history_item(n, created_us, ttl), NotExists("pk")))
            history_updates: dict[int, str] = {}
            for t, old in current.items():
                superseded = t == type_
                if not superseded:
                    actions.append(Delete(_key(old), Compare("id", "=", old["id"])))
                old_id = cast(str, old["id"])
                if old_id in no_history or not items.live(old, now):
                    continue
                history_updates[len(actions)] = old_id
                actions.append(
                    _mark(
                        old,
                        now,
                        n.id,
                        DismissReason.SUPERSEDED if superseded else DismissReason.RULE,
                    )
                )
            try:
                self.store.transact_write(actions)
            except ConditionFailed as exc:
                if key is not None and exc.index == 0:
                    replayed = self._replay(program.id, account, key, fp, now)
                    if replayed is not None:
                        return replayed
                    continue
                failed = {i for i, r in enumerate(exc.reasons) if r}
                if failed and failed <= history_updates.keys():
                    # those history rows are past retention: dismiss without them
                    no_history.update(history_updates[i] for i in failed)
                continue
            except TransactionConflict:
                continue
            return self._deliver(n, created_us) if rule.deliver else n
        raise TooManyRetries(
            f"adding {type_} to {account} kept conflicting with concurrent writers; retry it"
        )

    def _actives(self, program: str, account: str, types: list[str]) -> dict[str, Item]:
        if not types:
            return {}
        if len(types) == 1:
            one = self.store.get(keys.notification_active(program, account, types[0]))
            found = [one] if one is not None else []
        else:
            found = self.store.batch_get(
                [keys.notification_active(program, account, t) for t in types]
            )
        # rows past expiry by the ledger clock but not yet by the store's are kept:
        # a write must still be conditioned on them
        return {cast(str, i["type"]): i for i in found}

    def _replay(
        self, program: str, account: str, key: str, fp: str, now: datetime
    ) -> Notification | None:
        record = self.store.get(keys.notification_idempotency(program, account, key))
        if record is None:
            return None
        if record.get("fingerprint") != fp:
            raise IdempotencyConflict(
                f"idempotency key {key} was used before with another type or payload"
            )
        snapshot = cast(Item, record["notification"])
        us = created_us_of(cast(str, record["id"]))
        hist = (
            self.store.get(keys.notification_history(program, account, us, cast(str, record["id"])))
            if us
            else None
        )
        if hist is not None:
            return replace(items.from_item(hist, now), replay=True)
        status = Status(cast(str, record.get("status", Status.ACTIVE)))
        return replace(items.from_item(snapshot, now, status=status), replay=True)

    def _find(
        self, program: str, account: str, nid: str, us: int, now: datetime
    ) -> tuple[Item | None, Item | None] | None:
        """(history row, active row if still active) of a notification, or None."""
        hist = self.store.get(keys.notification_history(program, account, us, nid))
        if hist is not None and not items.live(hist, now):
            hist = None
        if hist is not None:
            if hist.get("status") != Status.ACTIVE:
                return hist, None
            active = self.store.get(
                keys.notification_active(program, account, cast(str, hist["type"]))
            )
        else:
            # history past retention while still active: look among the actives
            active = next(
                (
                    i
                    for i in self.store.query_all(
                        keys.account_partition(program, account),
                        SortCondition.begins_with(keys.NOTIFICATION_ACTIVE_PREFIX),
                    )
                    if i.get("id") == nid
                ),
                None,
            )
        if active is not None and (active.get("id") != nid or not items.live(active, now)):
            active = None
        if hist is None and active is None:
            return None
        return hist, active

    def _dismiss_active(
        self, active: Item, now: datetime, by: str, reason: str
    ) -> Notification | None:
        """Delete ``active`` and mark its history; ``None`` if it changed meanwhile."""
        with_history = True
        for _ in range(2):
            actions: list[Action] = [Delete(_key(active), Compare("id", "=", active["id"]))]
            if with_history:
                actions.append(_mark(active, now, by, reason))
            try:
                self.store.transact_write(actions)
            except ConditionFailed as exc:
                if exc.index == 1 and exc.reasons[0] is None:
                    with_history = False
                    continue
                return None
            except TransactionConflict:
                return None
            status = Status.SUPERSEDED if reason == DismissReason.SUPERSEDED else Status.DISMISSED
            return replace(
                items.from_item(active, now),
                status=status,
                dismissed_at=now,
                dismissed_by=by,
                dismiss_reason=str(reason),
            )
        return None

    def _deliver(self, n: Notification, created_us: int) -> Notification:
        error: str | None = None
        try:
            self.delivery.deliver(n)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[:300]
            log.warning("delivery of %s (%s) failed: %s", n.id, n.type, error)
        at = self.clock.now()
        outcome = "failed" if error else "delivered"
        sets: list[Set] = [Set("delivery", outcome), Set("delivered_at", iso(at))]
        if error:
            sets.append(Set("delivery_error", error))
        try:
            self.store.update(items.history_key(n, created_us), sets, Exists("pk"))
        except ConditionFailed:
            pass  # its history row is already past retention
        except TallybookError as exc:
            log.warning("could not record the delivery of %s: %s", n.id, exc)
        return replace(n, delivery=outcome, delivered_at=at, delivery_error=error)

    # defined last: inside the class body, ``list`` would shadow the builtin
    def list(self, program: str, account: str) -> list[Notification]:
        """The account's active notifications, newest first (one query)."""
        check_id(account, "account id")
        self.programs.get(program)
        now = self.clock.now()
        found = [
            i
            for i in self.store.query_all(
                keys.account_partition(program, account),
                SortCondition.begins_with(keys.NOTIFICATION_ACTIVE_PREFIX),
            )
            if items.live(i, now)
        ]
        if not found:
            self.ledger.accounts.get(program, account)
        found.sort(key=items.created_us, reverse=True)
        return [items.from_item(i, now) for i in found]


def _key(item: Item) -> Key:
    return keys.notification_active(
        cast(str, item["program"]), cast(str, item["account"]), cast(str, item["type"])
    )


def _mark(item: Item, now: datetime, by: str, reason: str) -> Update:
    """Record on ``item``'s history row that it was superseded or dismissed."""
    status = Status.SUPERSEDED if reason == DismissReason.SUPERSEDED else Status.DISMISSED
    key = keys.notification_history(
        cast(str, item["program"]),
        cast(str, item["account"]),
        items.created_us(item),
        cast(str, item["id"]),
    )
    sets = tuple(Set(k, v) for k, v in items.dismissal(status, now, by, reason).items())
    return Update(key, sets, Exists("pk"))
