"""Stored HTTP responses: what the idempotency middleware replays for a POST's
``Idempotency-Key`` (the routes whose service answers its own replays store none)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from tallybook.errors import ConditionFailed, TallybookError, TooManyRetries
from tallybook.services.clock import Clock
from tallybook.store.port import ItemStore
from tallybook.store.records.responses import (
    StoredResponse,
    answer_replaces_claim,
    claimable,
    claimed_by,
    response_item,
    response_key,
    response_of,
    still_claimed,
)

#: how long a response is kept for replays
TTL_SECONDS = 24 * 3600
#: how long a claim holds its key unless renewed (its request renews it every
#: third of that while it runs): a key whose process died is free again after it
CLAIM_SECONDS = 10
_CLAIM_TRIES = 5


class StoredResponses:
    def __init__(self, store: ItemStore, clock: Clock, ttl_seconds: int = TTL_SECONDS) -> None:
        self.store = store
        self.clock = clock
        self.ttl_seconds = ttl_seconds
        #: the machine's time, in seconds: a claim's lease is a TTL, which the
        #: store applies by the machine's time whatever the ledger's clock says
        self.wall: Callable[[], float] = time.time

    def get(self, program: str, idempotency_key: str) -> StoredResponse | None:
        item = self.store.get(response_key(program, idempotency_key))
        return None if item is None else response_of(item)

    def claim(
        self, program: str, idempotency_key: str, claim: StoredResponse
    ) -> StoredResponse | None:
        """Take ``idempotency_key`` for a request about to run (``claim`` is pending),
        in every process at once: ``None`` when taken, else what is kept at the key
        (an answer to replay, or another request's claim, still running).

        A claim lasts :data:`CLAIM_SECONDS` unless renewed (:meth:`renew`),
        answered or released first, so a key whose process died is free again
        after that."""
        now = int(self.wall())
        item = response_item(program, idempotency_key, claim, now + CLAIM_SECONDS)
        for _ in range(_CLAIM_TRIES):
            try:
                self.store.put(item, claimable(now))
            except ConditionFailed:
                kept = self.get(program, idempotency_key)
                if kept is not None:
                    return kept
                continue  # it expired or was released meanwhile: take it
            return None
        raise TooManyRetries(f"could not claim Idempotency-Key {idempotency_key!r}; retry it")

    def renew(self, program: str, idempotency_key: str, claim: StoredResponse) -> None:
        """Extend the lease of ``claim``, still running (nothing if it is gone)."""
        item = response_item(program, idempotency_key, claim, int(self.wall()) + CLAIM_SECONDS)
        with contextlib.suppress(ConditionFailed, TallybookError):
            self.store.put(item, claimed_by(claim.fingerprint))

    def release(self, program: str, idempotency_key: str) -> None:
        """Let go of a claim whose request was not answered with a 2xx (a retry runs it)."""
        with contextlib.suppress(ConditionFailed, TallybookError):
            self.store.delete(response_key(program, idempotency_key), still_claimed())

    def remember(self, program: str, idempotency_key: str, response: StoredResponse) -> None:
        """Keep ``response`` in place of the request's claim, unless an answer is
        kept already (the first writer wins).

        A failure to remember is swallowed: the write it answers is done, and
        forgetting it only costs a re-execution of an idempotent request (a claim
        left behind frees the key after :data:`CLAIM_SECONDS`)."""
        expires = int(self.clock.now().timestamp()) + self.ttl_seconds
        item = response_item(program, idempotency_key, response, expires)
        with contextlib.suppress(ConditionFailed, TallybookError):
            self.store.put(item, answer_replaces_claim())
