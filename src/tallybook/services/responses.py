"""Stored HTTP responses: what the idempotency middleware replays for a POST's
``Idempotency-Key`` (the routes whose service answers its own replays store none)."""

from __future__ import annotations

import contextlib

from tallybook.errors import ConditionFailed, TallybookError
from tallybook.services.clock import Clock
from tallybook.store.port import ITEM_ABSENT, ItemStore
from tallybook.store.records.responses import (
    StoredResponse,
    response_item,
    response_key,
    response_of,
)

#: how long a response is kept for replays
TTL_SECONDS = 24 * 3600


class StoredResponses:
    def __init__(self, store: ItemStore, clock: Clock, ttl_seconds: int = TTL_SECONDS) -> None:
        self.store = store
        self.clock = clock
        self.ttl_seconds = ttl_seconds

    def get(self, program: str, idempotency_key: str) -> StoredResponse | None:
        item = self.store.get(response_key(program, idempotency_key))
        return None if item is None else response_of(item)

    def remember(self, program: str, idempotency_key: str, response: StoredResponse) -> None:
        """Keep ``response`` unless one is kept already (the first writer wins).

        A failure to remember is swallowed: the write it answers is done, and
        forgetting it only costs a re-execution of an idempotent request."""
        expires = int(self.clock.now().timestamp()) + self.ttl_seconds
        item = response_item(program, idempotency_key, response, expires)
        with contextlib.suppress(ConditionFailed, TallybookError):
            self.store.put(item, ITEM_ABSENT)
