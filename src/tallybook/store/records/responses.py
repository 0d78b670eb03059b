"""How stored HTTP responses are kept: one item per (program, Idempotency-Key),
with a TTL (see :mod:`tallybook.services.responses`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from tallybook.store import keys
from tallybook.store.port import (
    ITEM_ABSENT,
    TTL_ATTR,
    Compare,
    Condition,
    Item,
    Key,
    Value,
    all_of,
    any_of,
    equals,
)

#: the status of a claim: a request with this key is running (its answer is not kept yet)
PENDING = 0


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """The first successful answer to a POST, replayed for its Idempotency-Key."""

    fingerprint: str
    status: int
    headers: tuple[tuple[str, str], ...]
    #: the scopes of the key that made the request: a replay needs them (or admin)
    scopes: frozenset[str]
    body: str

    @property
    def pending(self) -> bool:
        """A claim: the request is still running somewhere (no answer to replay yet)."""
        return self.status == PENDING


def response_key(program: str, idempotency_key: str) -> Key:
    return keys.idempotent_response(program, idempotency_key)


def response_item(
    program: str, idempotency_key: str, response: StoredResponse, expires: int
) -> Item:
    item: Item = {
        **response_key(program, idempotency_key).as_item(),
        "fingerprint": response.fingerprint,
        "status": response.status,
        "headers": [[k, v] for k, v in response.headers],
        "scopes": cast(Value, sorted(response.scopes)),
        "ttl": expires,
    }
    if response.body:
        item["body"] = response.body
    return item


def response_of(item: Item) -> StoredResponse:
    headers = cast(list[list[str]], item.get("headers") or [])
    return StoredResponse(
        fingerprint=cast(str, item.get("fingerprint") or ""),
        status=cast(int, item["status"]),
        headers=tuple((k, v) for k, v in headers),
        scopes=frozenset(cast(list[str], item.get("scopes") or [])),
        body=cast(str, item.get("body") or ""),
    )


def claimable(now: int) -> Condition:
    """Nothing kept at the key, or only what has expired (a claim whose process died)."""
    return any_of(ITEM_ABSENT, Compare(TTL_ATTR, "<", now))


def still_claimed() -> Condition:
    """The item is a claim still: its answer may replace it, or its release delete it."""
    return equals("status", PENDING)


def claimed_by(fingerprint: str) -> Condition:
    """A claim still, of a request with ``fingerprint``: its lease may be renewed."""
    return all_of(still_claimed(), equals("fingerprint", fingerprint))


def answer_replaces_claim() -> Condition:
    """An answer is kept over a claim (its own, or one taken over), never over an answer."""
    return any_of(ITEM_ABSENT, still_claimed())
