"""API-key authentication for the HTTP layer, with a short, bounded cache.

Authenticating a key is one strongly consistent read of the key's item
(:meth:`tallybook.services.apikeys.KeyService.authenticate`). A busy client
sends the same key on every request, so the HTTP layer remembers a
successful authentication for ``ttl`` seconds (default
:data:`DEFAULT_KEY_CACHE_SECONDS`) per process: a posting then costs its own
two storage calls and nothing for the key. The price is that a revoked key
keeps working for at most ``ttl`` seconds on a process that saw it just
before; ``ttl=0`` turns the cache off (revocation at once, one more read per
request).

Entries are keyed by the sha256 of the secret (the secret itself is never
kept), failures are never cached, and the cache holds at most ``max_entries``
keys (the oldest is dropped first). Time comes from the ledger's clock, so
tests move it explicitly.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from tallybook.errors import ValidationError
from tallybook.ledger import Ledger

DEFAULT_KEY_CACHE_SECONDS = 5.0
DEFAULT_MAX_ENTRIES = 1024


def key_cache_seconds_from_env() -> float:
    """``$TALLYBOOK_KEY_CACHE_SECONDS`` (default 5; 0: every request reads its key),
    for every way the app is started (``tallybook serve``, uvicorn, Lambda)."""
    raw = os.environ.get("TALLYBOOK_KEY_CACHE_SECONDS", "").strip()
    if not raw:
        return DEFAULT_KEY_CACHE_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValidationError(
            f"TALLYBOOK_KEY_CACHE_SECONDS must be a number of seconds, 0 or more; got {raw!r}"
        )
    return seconds


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: an API key's id, its program and scopes."""

    key_id: str
    program: str
    scopes: frozenset[str]


class KeyCache:
    """Successful authentications by secret hash, each for ``ttl`` seconds."""

    def __init__(
        self,
        ledger: Ledger,
        ttl: float = DEFAULT_KEY_CACHE_SECONDS,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        if ttl < 0 or max_entries < 1:
            raise ValueError("ttl must be >= 0 and max_entries >= 1")
        self.ledger = ledger
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, Principal]] = OrderedDict()
        self._lock = threading.Lock()

    def _now(self) -> float:
        return self.ledger.clock.now().timestamp()

    def cached(self, secret: str) -> Principal | None:
        """The principal of ``secret`` if it was authenticated less than ``ttl`` ago."""
        if self.ttl == 0:
            return None
        digest = _digest(secret)
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None:
                return None
            if entry[0] <= self._now():
                del self._entries[digest]
                return None
            return entry[1]

    def authenticate(self, secret: str) -> Principal:
        """The principal of ``secret`` (cached, or one store read); raises ``Unauthorized``."""
        hit = self.cached(secret)
        if hit is not None:
            return hit
        key = self.ledger.keys.authenticate(secret)
        principal = Principal(key.id, key.program, frozenset(key.scopes))
        if self.ttl > 0:
            with self._lock:
                self._entries[_digest(secret)] = (self._now() + self.ttl, principal)
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
        return principal


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
