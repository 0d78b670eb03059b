"""Transaction tokens: what makes a retried ``TransactWriteItems`` idempotent.

A caller's token becomes a ``ClientRequestToken`` scoped to the table, and
keeps the time its conditions were first checked against, because DynamoDB
replays a token only when the request is sent again with the same parameters
(within its ten-minute window).
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid

TOKEN_WINDOW_SECONDS = 600
#: tokens remembered before the ones past the window are dropped
_PRUNE_ABOVE = 10_000


class RequestTokens:
    """The request tokens of one table, and the time fixed for each."""

    def __init__(self, table: str) -> None:
        self.table = table
        self._times: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def now_for(self, token: str | None, now: int) -> int:
        """The time conditions are checked against (``now``, the store's
        :meth:`~tallybook.store.port.ItemStore.ttl_now`); fixed per token.

        A retry with the same token must send the same parameters, or DynamoDB
        answers IdempotentParameterMismatch instead of replaying; so a token
        keeps its first time for DynamoDB's ten-minute window.
        """
        if token is None:
            return now
        clock = time.monotonic()
        with self._lock:
            if len(self._times) > _PRUNE_ABOVE:
                cutoff = clock - TOKEN_WINDOW_SECONDS
                self._times = {t: v for t, v in self._times.items() if v[0] > cutoff}
            seen = self._times.get(token)
            if seen is not None and clock - seen[0] < TOKEN_WINDOW_SECONDS:
                return seen[1]
            self._times[token] = (clock, now)
            return now

    def forget(self, token: str) -> None:
        """Let a later call with ``token`` start afresh (this one was not applied)."""
        with self._lock:
            self._times.pop(token, None)

    def request_token(self, token: str | None) -> str:
        """The ``ClientRequestToken``: the caller's token scoped to this table.

        DynamoDB keeps tokens per account for ten minutes, so the same token
        on two tables (two stores, or tests run again) would collide; the
        digest of table and token is stable for retries and at most 36
        characters, as DynamoDB requires. Without a token, one per call makes
        this call's own retries safe.
        """
        if token is None:
            return str(uuid.uuid4())
        return hashlib.sha256(f"{self.table}\x00{token}".encode()).hexdigest()[:32]
