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

from tallybook.domain.ids import check_id
from tallybook.errors import ConditionFailed, NotFound, Unauthorized, ValidationError
from tallybook.services.clock import Clock
from tallybook.services.ledger.core import ProgramLookup
from tallybook.store.port import ItemStore
from tallybook.store.records.apikeys import ApiKey as ApiKey
from tallybook.store.records.apikeys import key_put, program_keys, read_key, revocation

#: read: GET anything of the program; write: post and change; admin: everything
SCOPES = ("read", "write", "admin")
SECRET_PREFIX = "tb_"  # noqa: S105 - a format prefix, not a secret
_SECRET = re.compile(r"tb_([0-9a-f]{16})_([A-Za-z0-9_\-]{32,64})")
_MAX_NAME = 100
_UNAUTHORIZED = "unknown or revoked API key"


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def parse_scopes(scopes: str | Iterable[str]) -> tuple[str, ...]:
    """``"read,write"`` or ``["read", "write"]`` -> ``("read", "write")``, validated."""
    if isinstance(scopes, str):
        items = scopes.split(",")
    elif isinstance(scopes, list | tuple | set | frozenset) and all(
        isinstance(s, str) for s in scopes
    ):
        items = list(scopes)
    else:
        raise ValidationError(f"scopes are a list of {', '.join(SCOPES)} (or 'read,write')")
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
    """``ledger.keys``: the HTTP API's keys (create, authenticate, list, revoke)."""

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
        if not isinstance(label, str):
            raise ValidationError("a key name is a string")
        if len(label) > _MAX_NAME:
            raise ValidationError(f"a key name holds at most {_MAX_NAME} characters")
        key_id = secrets.token_hex(8)
        secret = f"{SECRET_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        record = ApiKey(key_id, program, scope_tuple, label, self.clock.now())
        self.store.transact_write([key_put(record, hash_secret(secret))])
        return record, secret

    def authenticate(self, secret: str) -> ApiKey:
        """The active key whose secret this is; :class:`Unauthorized` otherwise."""
        if not isinstance(secret, str):
            raise Unauthorized(_UNAUTHORIZED)
        match = _SECRET.fullmatch(secret)
        if match is None:
            raise Unauthorized(_UNAUTHORIZED)
        found = read_key(self.store, match.group(1))
        if found is None:
            raise Unauthorized(_UNAUTHORIZED)
        key, stored = found
        if stored is None or not hmac.compare_digest(stored.encode(), hash_secret(secret).encode()):
            raise Unauthorized(_UNAUTHORIZED)
        if not key.active:
            raise Unauthorized(_UNAUTHORIZED)
        return key

    def get(self, key_id: str) -> ApiKey:
        """The key (never its secret), revoked or not, or :class:`NotFound`."""
        check_id(key_id, "key id")
        found = read_key(self.store, key_id)
        if found is None:
            raise NotFound(f"API key {key_id} not found")
        return found[0]

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke at once; revoking a revoked key is a no-op returning it."""
        key = self.get(key_id)
        if not key.active:
            return key
        try:
            self.store.transact_write([revocation(key_id, self.clock.now())])
        except ConditionFailed as exc:  # deleted meanwhile
            raise NotFound(f"API key {key_id} not found") from exc
        return self.get(key_id)

    def list(self, program: str) -> builtins.list[ApiKey]:
        """A program's keys, oldest first (index, eventually consistent)."""
        self.programs.get(program)
        return list(program_keys(self.store, program))
