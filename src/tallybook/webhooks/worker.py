"""The delivery worker: one pass = take in new events, then deliver every queue.

``tallybook webhooks deliver`` runs passes in a loop (or one with ``--once``,
as a scheduled job does). A pass:

1. takes in new events: on SQLite the events the ledger wrote with its changes
   wait in a change log; on DynamoDB they are read from the table's stream
   (:mod:`tallybook.webhooks.stream`); both are fanned out to deliveries,
   transaction events in their lanes' order (:mod:`tallybook.webhooks.order`);
2. delivers each active subscription's queue on its own thread, so a slow or
   dead endpoint holds up only itself; a lease row per subscription keeps two
   workers from sending the same queue at once (which could break its order).

Secrets are opened with the server key (:mod:`tallybook.webhooks.vault`);
without one, or with a key that does not open a subscription's secret, the
pass raises :class:`~tallybook.webhooks.vault.WebhookKeyError` (its queue
waits, nothing is lost).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from tallybook.domain.webhooks import ACTIVE, Subscription
from tallybook.errors import ConditionFailed
from tallybook.services.clock import Clock
from tallybook.services.ledger.core import ProgramList
from tallybook.store.port import ItemStore
from tallybook.store.records.webhooks import lease_release, lease_renewal, take_lease
from tallybook.webhooks.delivery import PassStats, QueueRunner, RetryPolicy
from tallybook.webhooks.fanout import fan_out_new, fan_out_pending, sweep_parked
from tallybook.webhooks.sender import HttpSender, Sender
from tallybook.webhooks.stream import stream_reader
from tallybook.webhooks.subscriptions import SubscriptionStore

#: a subscription's lease lasts this long unless renewed (a killed worker's
#: lease lapses after it, and another worker takes the queue over)
LEASE_SECONDS = 60.0


class DeliveryWorker:
    def __init__(
        self,
        store: ItemStore,
        clock: Clock,
        programs: ProgramList,
        *,
        sender: Sender | None = None,
        policy: RetryPolicy | None = None,
        now: Callable[[], float] = time.time,
        threads: int = 8,
        batch: int = 500,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.store = store
        self.programs = programs
        self.subs = SubscriptionStore(store, clock)
        self.policy = policy or RetryPolicy()
        self.now = now
        self.threads = threads
        self.batch = batch
        self.lease_seconds = lease_seconds
        self.runner = QueueRunner(self.store, sender or HttpSender(), self.policy, now, self._gone)
        self.owner = secrets.token_hex(8)
        #: subscription id -> when its lease was last taken or renewed
        self._renewed: dict[str, float] = {}
        self._reader = stream_reader(self.store)

    def subscriptions(self) -> dict[str, list[Subscription]]:
        """Every program's subscriptions."""
        return {p: self.subs.list(p) for p in self.programs.list()}

    def run_once(self) -> PassStats:
        """One pass: take in new events, then deliver what is due."""
        subs = self.subscriptions()
        self.take_in(subs)
        return self.deliver_due(subs)

    def deliver_due(self, subs: dict[str, list[Subscription]]) -> PassStats:
        """Send what is due in every active subscription's queue, one thread each."""
        stats = PassStats()
        active = [s for group in subs.values() for s in group if s.status == ACTIVE]
        if not active:
            return stats
        self.subs.keyring()  # no server key: refused here, before anything is sent
        with ThreadPoolExecutor(max_workers=min(self.threads, len(active))) as pool:
            for result in pool.map(self._deliver, active):
                stats.add(result)
        return stats

    def take_in(self, subs: dict[str, list[Subscription]]) -> int:
        if self._reader is not None:
            new = self._reader.read(lambda events: fan_out_new(self.store, events, subs))
            return new + sweep_parked(self.store, subs)
        return sum(fan_out_pending(self.store, p, s) for p, s in subs.items())

    # -- one subscription --------------------------------------------------------

    def _deliver(self, sub: Subscription) -> PassStats:
        if not self._lease(sub):
            return PassStats()
        try:
            secret = self.subs.secret(sub.program, sub.id)
            return self.runner.run(sub, secret, self.batch, lambda: self._renew(sub))
        finally:
            self._release(sub)

    def _lease(self, sub: Subscription) -> bool:
        now_us = int(self.now() * 1e6)
        expires_us = now_us + int(self.lease_seconds * 1e6)
        try:
            take_lease(self.store, sub.program, sub.id, self.owner, now_us, expires_us)
        except ConditionFailed:
            return False
        self._renewed[sub.id] = self.now()
        return True

    def _renew(self, sub: Subscription) -> bool:
        """Whether the lease is still this worker's (renewed when a third has passed)."""
        now = self.now()
        if now - self._renewed[sub.id] < self.lease_seconds / 3:
            return True
        expires_us = int((now + self.lease_seconds) * 1e6)
        try:
            self.store.transact_write([lease_renewal(sub.program, sub.id, self.owner, expires_us)])
        except ConditionFailed:
            return False
        self._renewed[sub.id] = now
        return True

    def _release(self, sub: Subscription) -> None:
        try:
            self.store.transact_write([lease_release(sub.program, sub.id, self.owner)])
        except ConditionFailed:
            return

    def _gone(self, sub: Subscription) -> None:
        self.subs.disable_if_active(sub.program, sub.id, "the receiver answered 410 Gone")
