"""API keys: create (secret shown once), authenticate, revoke, list.

A secret looks like ``tb_<key id>_<random>``. Only the sha256 of the secret is
stored, in one item per key (``APIKEY#{key id}``), so authenticating is one
strongly consistent read by the key id parsed from the secret followed by a
constant-time comparison of hashes. Revocation updates that same item, so it
takes effect on the very next call here: this service caches nothing. (The
HTTP layer remembers an authenticated key for a few seconds per process, see
:mod:`tallybook.http.keycache`.)
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from tallybook.domain.ids import check_id
from tallybook.errors import ConditionFailed, NotFound, Unauthorized, ValidationError
from tallybook.services.clock import Clock
from tallybook.services.ledger.core import ProgramLookup
from tallybook.store import keys
from tallybook.store.port import Exists, Item, ItemStore, NotExists, Set, Value
from tallybook.store.records.codec import iso, parse_iso

#: read: GET anything of the program; write: post and change; admin: everything
SCOPES = ("read", "write", "admin")
SECRET_PREFIX = "tb_"  # noqa: S105 - a format prefix, not a secret
_SECRET = re.compile(r"tb_([0-9a-f]{16})_([A-Za-z0-9_\-]{32,64})")
_MAX_NAME = 100
_UNAUTHORIZED = "unknown or revoked API key"


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


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def parse_scopes(scopes: str | Iterable[str]) -> tuple[str, ...]:
    """``"read,write"`` or ``["read", "write"]`` -> ``("read", "write")``, validated."""
    items = scopes.split(",") if isinstance(scopes, str) else list(scopes)
    cleaned = tuple(dict.fromkeys(s.strip() for s in items if s.strip()))
    if not cleaned:
        raise ValidationError(f"give at least one scope of {', '.join(SCOPES)}")
    unknown = [s for s in cleaned if s not in SCOPES]
    if unknown:
        raise ValidationError(
            f"unknown scope(s) {', '.join(unknown)}; choose from {', '.join(SCOPES)}"
        )
    return cleaned


class KeyService:
    def __init__(self, store: ItemStore, clock: Clock, programs: ProgramLookup) -> None:
        self.store = store
        self.clock = clock
        self.programs = programs

    def create(
        self, program: str, scopes: str | Iterable[str], name: str | None = None
    ) -> tuple[ApiKey, str]:
        """A new key for ``program``; returns (record, secret). The secret is shown once."""
        self.programs.get(program)
        scope_tuple = parse_scopes(scopes)
        label = name or ""
        if len(label) > _MAX_NAME:
            raise ValidationError(f"a key name holds at most {_MAX_NAME} characters")
        key_id = secrets.token_hex(8)
        secret = f"{SECRET_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        now = self.clock.now()
        record = ApiKey(key_id, program, scope_tuple, label, now)
        item: Item = {
            **keys.api_key(key_id).as_item(),
            "key_id": key_id,
            "program": program,
            "scopes": cast(Value, list(scope_tuple)),
            "hash": hash_secret(secret),
            "created_at": iso(now),
            "gsi1pk": keys.api_key_index(program),
            "gsi1sk": f"{iso(now)}#{key_id}",
        }
        if label:  # older DynamoDB engines refuse empty strings
            item["name"] = label
        self.store.put(item, NotExists("pk"))
        return record, secret

    def authenticate(self, secret: str) -> ApiKey:
        """The active key whose secret this is; :class:`Unauthorized` otherwise."""
        match = _SECRET.fullmatch(secret)
        if match is None:
            raise Unauthorized(_UNAUTHORIZED)
        item = self.store.get(keys.api_key(match.group(1)))
        if item is None:
            raise Unauthorized(_UNAUTHORIZED)
        stored = item.get("hash")
        if not isinstance(stored, str) or not hmac.compare_digest(
            stored.encode(), hash_secret(secret).encode()
        ):
            raise Unauthorized(_UNAUTHORIZED)
        key = _key_from_item(item)
        if not key.active:
            raise Unauthorized(_UNAUTHORIZED)
        return key

    def get(self, key_id: str) -> ApiKey:
        check_id(key_id, "key id")
        item = self.store.get(keys.api_key(key_id))
        if item is None:
            raise NotFound(f"API key {key_id} not found")
        return _key_from_item(item)

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke at once; revoking a revoked key is a no-op returning it."""
        key = self.get(key_id)
        if not key.active:
            return key
        try:
            self.store.update(
                keys.api_key(key_id), [Set("revoked_at", iso(self.clock.now()))], Exists("pk")
            )
        except ConditionFailed as exc:  # deleted meanwhile
            raise NotFound(f"API key {key_id} not found") from exc
        return self.get(key_id)

    def list(self, program: str) -> builtins.list[ApiKey]:
        """A program's keys, oldest first (index, eventually consistent)."""
        self.programs.get(program)
        items = self.store.query_all(keys.api_key_index(program), index="gsi1")
        return [_key_from_item(i) for i in items]


def _key_from_item(item: Item) -> ApiKey:
    revoked = item.get("revoked_at")
    return ApiKey(
        id=cast(str, item["key_id"]),
        program=cast(str, item["program"]),
        scopes=tuple(cast(list[str], item.get("scopes") or [])),
        name=cast(str, item.get("name") or ""),
        created_at=parse_iso(cast(str, item["created_at"])),
        revoked_at=parse_iso(revoked) if isinstance(revoked, str) else None,
    )
