"""Delivering one subscription's queue, in order per account.

The queue is read in log order. The first row of each account is its oldest
undelivered event; only it may be sent. When it fails, the account is blocked
for the rest of the pass, so later events of that account wait, while other
accounts' events go on. A row is retried with exponential backoff and jitter
(:class:`RetryPolicy`) until :attr:`RetryPolicy.max_age_seconds` after its
first attempt, then dead-lettered: its record says ``dead`` and the account's
later events proceed. A receiver answering 410 Gone disables the subscription.

Every attempt is recorded on the delivery record (status code, latency,
error, time), newest first, the last :data:`KEEP_ATTEMPTS` of them. Successful
deliveries are recorded a few at a time (:data:`RECORD_EVERY` per
transaction, and before anything else is written): a worker killed before it
records them sends them again, which at least once allows.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from tallybook.errors import ConditionFailed, TransactionConflict
from tallybook.store import keys
from tallybook.store.port import (
    Action,
    Add,
    Compare,
    Delete,
    Exists,
    Item,
    ItemStore,
    Set,
    Update,
)
from tallybook.store.records.codec import parse_iso
from tallybook.webhooks.events import Event
from tallybook.webhooks.log import event_from_item
from tallybook.webhooks.sender import Response, Sender
from tallybook.webhooks.signing import sign
from tallybook.webhooks.subscriptions import Subscription

KEEP_ATTEMPTS = 10
#: successful deliveries recorded per transaction, at most
RECORD_EVERY = 25
#: the largest webhook body; a bigger event is sent without its data (``truncated``)
MAX_PAYLOAD_BYTES = 64 * 1024
_KEEP_WHEN_TRUNCATED = ("txn_id", "txn_type", "notification_id", "kind", "window")
DELIVERED = "delivered"
DEAD = "dead"
FAILED = "failed"
#: the outcomes counted on each subscription (``n_delivered``, ...)
OUTCOMES = (DELIVERED, FAILED, DEAD)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When to try again: ``base * 2**(n-1)`` seconds after the n-th failure, at
    most ``cap``, each delay jittered by ±``jitter``; dead after ``max_age``."""

    base_seconds: float = 5.0
    cap_seconds: float = 6 * 3600.0
    jitter: float = 0.2
    max_age_seconds: float = 3 * 86_400.0
    timeout_seconds: float = 10.0

    def delay(self, failures: int, rng: random.Random) -> float:
        raw = min(self.cap_seconds, self.base_seconds * 2 ** max(0, failures - 1))
        return float(raw * rng.uniform(1 - self.jitter, 1 + self.jitter))


@dataclass
class PassStats:
    """What one pass over one or more subscriptions did."""

    delivered: int = 0
    failed: int = 0
    dead: int = 0
    disabled: int = 0
    waiting: int = 0
    #: seconds from an event's log time to its successful delivery, per delivery
    lags: list[float] = field(default_factory=list)

    def add(self, other: PassStats) -> None:
        self.delivered += other.delivered
        self.failed += other.failed
        self.dead += other.dead
        self.disabled += other.disabled
        self.waiting += other.waiting
        self.lags += other.lags


def body_of(event: Event) -> bytes:
    """The JSON body of ``event``, at most :data:`MAX_PAYLOAD_BYTES`."""
    envelope = event.envelope()
    body = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) <= MAX_PAYLOAD_BYTES:
        return body
    kept = {k: v for k, v in event.data.items() if k in _KEEP_WHEN_TRUNCATED}
    envelope["data"] = {**kept, "truncated": True}
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode()


class QueueRunner:
    """Sends one subscription's due queue rows (one pass)."""

    def __init__(
        self,
        store: ItemStore,
        sender: Sender,
        policy: RetryPolicy,
        now: Callable[[], float],
        on_gone: Callable[[Subscription], None],
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.sender = sender
        self.policy = policy
        self.now = now
        self.on_gone = on_gone
        self.rng = rng or random.Random()

    def run(
        self, sub: Subscription, secret: str, limit: int, still_mine: Callable[[], bool]
    ) -> PassStats:
        stats = PassStats()
        queue = self.store.query(keys.webhook_queue(sub.program, sub.id), limit=limit).items
        events = self._events(sub.program, queue)
        blocked: set[str] = set()
        sent: list[tuple[Item, dict[str, Any]]] = []  # delivered, not recorded yet
        for row in queue:
            accounts = cast(list[str], row.get("accounts") or [])
            if any(a in blocked for a in accounts):
                # it waits for one account, so its other accounts wait for it
                blocked.update(accounts)
                stats.waiting += 1
                continue
            if cast(int, row.get("next_us", 0)) > int(self.now() * 1e6):
                blocked.update(accounts)
                stats.waiting += 1
                continue
            if not still_mine():
                break
            event = events.get(cast(str, row["event_id"]))
            if event is None:
                self._record_sent(sub, sent)
                self._finish(sub, row, DEAD, None, "the event is past its retention")
                stats.dead += 1
                continue
            answer = self._send(sub, secret, event)
            if answer.ok:
                sent.append((row, self._attempt(answer, None)))
                if len(sent) >= RECORD_EVERY:
                    self._record_sent(sub, sent)
                stats.delivered += 1
                stats.lags.append(max(0.0, self.now() - _epoch(event.at)))
                continue
            self._record_sent(sub, sent)
            if answer.status == 410:
                self._fail(sub, row, answer, give_up=False)
                self.on_gone(sub)
                stats.disabled += 1
                break
            else:
                first = cast(int, row.get("first_us") or 0) or int(self.now() * 1e6)
                dead = self.now() - first / 1e6 >= self.policy.max_age_seconds
                self._fail(sub, row, answer, give_up=dead)
                stats.failed += 1
                if dead:
                    stats.dead += 1
                else:
                    blocked.update(accounts)
        self._record_sent(sub, sent)
        return stats

    def _record_sent(self, sub: Subscription, sent: list[tuple[Item, dict[str, Any]]]) -> None:
        """Record the delivered rows in ``sent`` in one transaction (each on its own
        when that one fails: another worker's outcome for a row wins), and empty it."""
        if not sent:
            return
        actions: list[Action] = []
        for row, attempt in sent:
            actions += self._done(sub, row, DELIVERED, attempt)
        try:
            self.store.transact_write([*actions, _count(sub, [DELIVERED] * len(sent))])
        except (ConditionFailed, TransactionConflict):
            for row, attempt in sent:
                self._write([*self._done(sub, row, DELIVERED, attempt), _count(sub, [DELIVERED])])
        sent.clear()

    def _events(self, program: str, queue: list[Item]) -> dict[str, Event]:
        wanted = {cast(str, r["event_id"]) for r in queue}
        found = self.store.batch_get([keys.event(program, e) for e in wanted])
        return {cast(str, i["id"]): event_from_item(i) for i in found}

    def _send(self, sub: Subscription, secret: str, event: Event) -> Response:
        body = body_of(event)
        headers = sign(secret, event.id, body, int(self.now()))
        return self.sender.post(sub.url, headers, body, self.policy.timeout_seconds)

    def _attempt(self, answer: Response | None, error: str | None) -> dict[str, Any]:
        return {
            "at_us": int(self.now() * 1e6),
            "code": None if answer is None else answer.status,
            "latency_ms": None if answer is None else answer.latency_ms,
            "error": error if answer is None else answer.error,
        }

    def _record_update(
        self, sub: Subscription, row: Item, status: str | None, attempt: dict[str, Any]
    ) -> Update:
        key = keys.webhook_delivery(sub.program, sub.id, cast(str, row["sk"]))
        # a row never tried (and not resent) has no attempts on its record yet
        fresh = not row.get("attempts") and not row.get("resent")
        current = None if fresh else self.store.get(key)
        log = cast(list[Any], (current or {}).get("log") or [])
        ops: list[Set | Add] = [
            Set("log", [attempt, *log][:KEEP_ATTEMPTS]),
            Set("last_code", attempt["code"]),
            Set("last_error", attempt["error"]),
            Set("last_latency_ms", attempt["latency_ms"]),
            Set("last_at_us", attempt["at_us"]),
            Add("attempts", 1),
        ]
        if status is not None:
            ops.append(Set("status", status))
        return Update(key, tuple(ops))

    def _finish(
        self, sub: Subscription, row: Item, status: str, answer: Response | None, why: str | None
    ) -> None:
        """The row is done (delivered or dead): its record says so, the row goes."""
        outcomes = [status] if answer is None or answer.ok else [FAILED, status]
        done = self._done(sub, row, status, self._attempt(answer, why))
        self._write([*done, _count(sub, outcomes)])

    def _done(
        self, sub: Subscription, row: Item, status: str, attempt: dict[str, Any]
    ) -> list[Action]:
        """The queue row goes (unless another worker moved it on); its record says so."""
        queued = keys.webhook_queued(sub.program, sub.id, cast(str, row["sk"]))
        return [
            Delete(queued, Compare("attempts", "=", row.get("attempts", 0))),
            self._record_update(sub, row, status, attempt),
        ]

    def _fail(self, sub: Subscription, row: Item, answer: Response, *, give_up: bool) -> None:
        if give_up:
            self._finish(sub, row, DEAD, answer, None)
            return
        failures = cast(int, row.get("attempts", 0)) + 1
        now_us = int(self.now() * 1e6)
        next_us = now_us + int(self.policy.delay(failures, self.rng) * 1e6)
        queued = keys.webhook_queued(sub.program, sub.id, cast(str, row["sk"]))
        updates: list[Set] = [Set("attempts", failures), Set("next_us", next_us)]
        if not row.get("first_us"):
            updates.append(Set("first_us", now_us))
        self._write(
            [
                Update(queued, tuple(updates), Compare("attempts", "=", row.get("attempts", 0))),
                self._record_update(sub, row, None, self._attempt(answer, None)),
                _count(sub, [FAILED]),
            ]
        )

    def _write(self, actions: list[Action]) -> None:
        """Apply one attempt's outcome; another worker's outcome for the row wins."""
        try:
            self.store.transact_write(actions)
        except (ConditionFailed, TransactionConflict):
            return


def _count(sub: Subscription, outcomes: list[str]) -> Update:
    """Add to the subscription's outcome counters (``/metrics`` reads them)."""
    ops = tuple(Add(f"n_{outcome}", n) for outcome, n in Counter(outcomes).items())
    return Update(keys.webhook_subscription(sub.program, sub.id), ops, Exists("pk"))


def _epoch(at: str) -> float:
    try:
        return parse_iso(at).timestamp()
    except ValueError:
        return time.time()
