"""How API keys are stored: one item per key (``APIKEY#{key id}`` / ``KEY``)
holding the program, scopes, the sha256 of the secret (never the secret) and
the revocation time; listed per program, oldest first, on ``gsi1``
(``APIKEYS#{program}``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from tallybook.store import keys
from tallybook.store.port import ITEM_ABSENT, ITEM_PRESENT, Item, ItemStore, Put, Set, Update, Value
from tallybook.store.records.codec import iso, parse_iso


@dataclass(frozen=True, slots=True)
class ApiKey:
    """What is known about a key (never its secret)."""

    id: str
    program: str
    scopes: tuple[str, ...]
    name: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def key_put(key: ApiKey, secret_hash: str) -> Put:
    """A new key (its random id is never reused)."""
    item: Item = {
        **keys.api_key(key.id).as_item(),
        "key_id": key.id,
        "program": key.program,
        "scopes": cast(Value, list(key.scopes)),
        "hash": secret_hash,
        "created_at": iso(key.created_at),
        "gsi1pk": keys.api_key_index(key.program),
        "gsi1sk": f"{iso(key.created_at)}#{key.id}",
    }
    if key.name:  # older DynamoDB engines refuse empty strings
        item["name"] = key.name
    return Put(item, ITEM_ABSENT)


def read_key(store: ItemStore, key_id: str) -> tuple[ApiKey, str | None] | None:
    """A key and the hash of its secret, if the key exists."""
    item = store.get(keys.api_key(key_id))
    if item is None:
        return None
    stored = item.get("hash")
    return _key_of(item), stored if isinstance(stored, str) else None


def revocation(key_id: str, at: datetime) -> Update:
    """Revoke a key that still exists."""
    return Update(keys.api_key(key_id), (Set("revoked_at", iso(at)),), ITEM_PRESENT)


def program_keys(store: ItemStore, program: str) -> Iterator[ApiKey]:
    """A program's keys, oldest first (an index: eventually consistent)."""
    for item in store.query_all(keys.api_key_index(program), index="gsi1"):
        yield _key_of(item)


def _key_of(item: Item) -> ApiKey:
    revoked = item.get("revoked_at")
    return ApiKey(
        id=cast(str, item["key_id"]),
        program=cast(str, item["program"]),
        scopes=tuple(cast(list[str], item.get("scopes") or [])),
        name=cast(str, item.get("name") or ""),
        created_at=parse_iso(cast(str, item["created_at"])),
        revoked_at=parse_iso(revoked) if isinstance(revoked, str) else None,
    )
