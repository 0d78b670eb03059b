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
from collections.abc import Callable
from dataclasses import dataclass, field

from tallybook.domain.webhooks import Attempt, Event, Queued, Subscription
from tallybook.errors import ConditionFailed, TransactionConflict
from tallybook.store.port import Action, ItemStore, Update
from tallybook.store.records.codec import parse_iso
from tallybook.store.records.webhook_events import (
    read_events,
    read_queue_page,
    recorded_attempt,
    requeue,
    unqueue,
)
from tallybook.store.records.webhooks import count_outcomes
from tallybook.webhooks.sender import Response, Sender
from tallybook.webhooks.signing import sign

KEEP_ATTEMPTS = 10
#: successful deliveries recorded per transaction, at most
RECORD_EVERY = 25
#: a pass reads a queue's pages past rows that wait (an account failing or backing
#: off, with its later events) until it has sent ``limit`` rows, at most this many
MAX_PAGES = 20
#: the largest webhook body; a bigger event is sent without its data (``truncated``)
MAX_PAYLOAD_BYTES = 64 * 1024
_KEEP_WHEN_TRUNCATED = (
    "txn_id",
    "txn_type",
    "account_seq",
    "account_previous",
    "notification_id",
    "kind",
    "window",
)
DELIVERED = "delivered"
DEAD = "dead"
FAILED = "failed"


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
        blocked: set[str] = set()
        sent: list[tuple[Queued, Attempt]] = []  # delivered, not recorded yet
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            # the next page while fewer than `limit` rows were sent: an account's
            # backlog behind a failing event must not hold the other accounts back
            queue, cursor = read_queue_page(self.store, sub.program, sub.id, limit, cursor)
            if not self._run_page(sub, secret, queue, blocked, sent, stats, still_mine):
                break
            if cursor is None or stats.delivered + stats.failed + stats.dead >= limit:
                break
        self._record_sent(sub, sent)
        return stats

    def _run_page(
        self,
        sub: Subscription,
        secret: str,
        queue: list[Queued],
        blocked: set[str],
        sent: list[tuple[Queued, Attempt]],
        stats: PassStats,
        still_mine: Callable[[], bool],
    ) -> bool:
        """Send one page's due rows; whether the pass may go on to the next page."""
        events = read_events(self.store, sub.program, list({r.event_id for r in queue}))
        for row in queue:
            if any(a in blocked for a in row.accounts):
                # it waits for one account, so its other accounts wait for it
                blocked.update(row.accounts)
                stats.waiting += 1
                continue
            if row.next_us > int(self.now() * 1e6):
                blocked.update(row.accounts)
                stats.waiting += 1
                continue
            if not still_mine():
                return False
            event = events.get(row.event_id)
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
                return False
            else:
                first = row.first_us or int(self.now() * 1e6)
                dead = self.now() - first / 1e6 >= self.policy.max_age_seconds
                self._fail(sub, row, answer, give_up=dead)
                stats.failed += 1
                if dead:
                    stats.dead += 1
                else:
                    blocked.update(row.accounts)
        return True

    def _record_sent(self, sub: Subscription, sent: list[tuple[Queued, Attempt]]) -> None:
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

    def _send(self, sub: Subscription, secret: str, event: Event) -> Response:
        body = body_of(event)
        headers = sign(secret, event.id, body, int(self.now()))
        return self.sender.post(sub.url, headers, body, self.policy.timeout_seconds)

    def _attempt(self, answer: Response | None, error: str | None) -> Attempt:
        return Attempt(
            at_us=int(self.now() * 1e6),
            code=None if answer is None else answer.status,
            latency_ms=None if answer is None else answer.latency_ms,
            error=error if answer is None else answer.error,
        )

    def _record_update(
        self, sub: Subscription, row: Queued, status: str | None, attempt: Attempt
    ) -> Update:
        return recorded_attempt(
            self.store, sub.program, sub.id, row, attempt, status, KEEP_ATTEMPTS
        )

    def _finish(
        self, sub: Subscription, row: Queued, status: str, answer: Response | None, why: str | None
    ) -> None:
        """The row is done (delivered or dead): its record says so, the row goes."""
        outcomes = [status] if answer is None or answer.ok else [FAILED, status]
        done = self._done(sub, row, status, self._attempt(answer, why))
        self._write([*done, _count(sub, outcomes)])

    def _done(self, sub: Subscription, row: Queued, status: str, attempt: Attempt) -> list[Action]:
        """The queue row goes (unless another worker moved it on); its record says so."""
        return [
            unqueue(sub.program, sub.id, row),
            self._record_update(sub, row, status, attempt),
        ]

    def _fail(self, sub: Subscription, row: Queued, answer: Response, *, give_up: bool) -> None:
        if give_up:
            self._finish(sub, row, DEAD, answer, None)
            return
        now_us = int(self.now() * 1e6)
        next_us = now_us + int(self.policy.delay(row.attempts + 1, self.rng) * 1e6)
        self._write(
            [
                requeue(sub.program, sub.id, row, next_us, now_us),
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
    return count_outcomes(sub.program, sub.id, outcomes)


def _epoch(at: str) -> float:
    try:
        return parse_iso(at).timestamp()
    except ValueError:
        return time.time()
