"""Webhook subscriptions: one endpoint of a program, the event types it wants, its secret.

The secret signs every delivery, so the server must keep it usable: the
subscription item holds it sealed under the server key
(:mod:`tallybook.webhooks.vault`), and it is returned once, when the
subscription is created; listings show its last four characters. An item of
an older version holds it in plain text (``secret``): it is read as it is and
sealed on its next enable or disable, or by :meth:`SubscriptionStore.reseal`
(``tallybook webhooks rekey``), which also moves secrets to a new key.
URLs must be ``https://``; ``http://`` is accepted only for a loopback host
(127.0.0.0/8, ::1, localhost) and only with ``allow_http`` (a development
setting).
"""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast
from urllib.parse import urlsplit

from tallybook.domain.ids import check_id
from tallybook.errors import AlreadyExists, ConditionFailed, NotFound, ValidationError
from tallybook.services.clock import Clock
from tallybook.store import keys
from tallybook.store.port import (
    Compare,
    Exists,
    Item,
    ItemStore,
    NotExists,
    Remove,
    Set,
    SortCondition,
)
from tallybook.store.records.codec import iso
from tallybook.webhooks.events import EVENT_TYPES
from tallybook.webhooks.signing import new_secret
from tallybook.webhooks.vault import Keyring, WebhookKeyError, keyring_for

MAX_URL_LENGTH = 2048
MAX_DESCRIPTION = 200
ACTIVE = "active"
DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class Subscription:
    program: str
    id: str
    url: str
    #: event types it receives; empty means every type
    types: tuple[str, ...]
    status: str
    created_at: str
    secret_hint: str
    description: str | None = None
    disabled_reason: str | None = None
    allow_http: bool = False

    def wants(self, event_type: str) -> bool:
        return not self.types or event_type in self.types

    def public(self) -> dict[str, Any]:
        """Everything but the secret (its last four characters only)."""
        return {
            "id": self.id,
            "program": self.program,
            "url": self.url,
            "types": list(self.types),
            "status": self.status,
            "created_at": self.created_at,
            "secret_hint": self.secret_hint,
            "description": self.description,
            "disabled_reason": self.disabled_reason,
        }


@dataclass(frozen=True, slots=True)
class Created:
    """A new subscription and its secret (shown this once)."""

    subscription: Subscription
    secret: str


def check_url(url: str, *, allow_http: bool = False) -> str:
    """The URL if a webhook may be sent to it; else a :class:`ValidationError`."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise ValidationError(f"url is required (at most {MAX_URL_LENGTH} characters)")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port
    except ValueError as exc:
        raise ValidationError(f"url {url[:80]!r} is not a valid URL") from exc
    if not host:
        raise ValidationError("url needs a host")
    if parts.username is not None or parts.password is not None:
        raise ValidationError("url must not carry credentials; the secret signs each delivery")
    if parts.fragment:
        raise ValidationError("url must not have a #fragment")
    if parts.scheme == "https":
        return url
    if parts.scheme != "http":
        raise ValidationError("url must start with https://")
    if not _is_loopback(host):
        raise ValidationError("http:// is accepted only for a loopback host; use https://")
    if not allow_http:
        raise ValidationError(
            "http:// to a loopback host needs the development flag (allow_http / --allow-http)"
        )
    return url


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_types(types: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    unknown = [t for t in types if t not in EVENT_TYPES]
    if unknown:
        raise ValidationError(
            f"unknown event type(s) {', '.join(unknown)}; known: {', '.join(EVENT_TYPES)}"
        )
    return tuple(dict.fromkeys(types))


def _hint(secret: str) -> str:
    return "…" + secret[-4:]


def _context(program: str, sub_id: str) -> str:
    """What a sealed secret is bound to (AES-GCM's associated data)."""
    return f"subscription {sub_id} of program {program}"


def from_item(item: Item) -> Subscription:
    d = cast(dict[str, Any], item)
    hint = d.get("secret_hint") or _hint(str(d.get("secret", "")))
    return Subscription(
        program=d["program"],
        id=d["id"],
        url=d["url"],
        types=tuple(d.get("types") or ()),
        status=d.get("status", ACTIVE),
        created_at=d.get("created_at", ""),
        secret_hint=hint,
        description=d.get("description"),
        disabled_reason=d.get("disabled_reason"),
        allow_http=bool(d.get("allow_http", False)),
    )


class SubscriptionStore:
    """Create, read, enable and disable subscriptions in the item store."""

    def __init__(self, store: ItemStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def keyring(self) -> Keyring:
        """The server keys (:class:`WebhookKeyError` when there are none); read at each
        use, so a changed key takes effect without a restart (Secrets Manager: within
        :data:`~tallybook.webhooks.vault.SECRET_CACHE_SECONDS`)."""
        return keyring_for(self.store)

    def create(
        self,
        program: str,
        url: str,
        *,
        types: list[str] | tuple[str, ...] = (),
        allow_http: bool = False,
        description: str | None = None,
        sub_id: str | None = None,
    ) -> Created:
        """A new subscription; an existing ``sub_id`` is :class:`AlreadyExists`."""
        check_id(program, "program id")
        check_url(url, allow_http=allow_http)
        wanted = check_types(types)
        if description is not None and len(description) > MAX_DESCRIPTION:
            raise ValidationError(f"description is longer than {MAX_DESCRIPTION} characters")
        sid = check_id(sub_id, "subscription id") if sub_id else f"sub_{secrets.token_hex(8)}"
        secret = new_secret()
        sealed = self.keyring().seal(secret, _context(program, sid))
        item: Item = {
            **keys.webhook_subscription(program, sid).as_item(),
            "program": program,
            "id": sid,
            "url": url,
            "types": list(wanted),
            "status": ACTIVE,
            "secret_sealed": sealed,
            "secret_hint": _hint(secret),
            "allow_http": allow_http,
            "created_at": iso(self.clock.now()),
        }
        if description:
            item["description"] = description
        try:
            self.store.put(item, NotExists("pk"))
        except ConditionFailed as exc:
            raise AlreadyExists(f"subscription {sid} exists in program {program}") from exc
        return Created(from_item(item), secret)

    def list(self, program: str) -> list[Subscription]:
        items = self.store.query_all(
            keys.webhook_subscriptions(program),
            SortCondition.begins_with(keys.WEBHOOK_SUBSCRIPTION_PREFIX),
        )
        return [from_item(i) for i in items]

    def item(self, program: str, sub_id: str) -> Item:
        check_id(sub_id, "subscription id")
        item = self.store.get(keys.webhook_subscription(program, sub_id))
        if item is None:
            raise NotFound(f"subscription {sub_id} not found in program {program}")
        return item

    def get(self, program: str, sub_id: str) -> Subscription:
        return from_item(self.item(program, sub_id))

    def secret(self, program: str, sub_id: str) -> str:
        """The signing secret, opened with the server key (plain in an older item)."""
        return self._open(self.item(program, sub_id))

    def _open(self, item: Item) -> str:
        d = cast(dict[str, Any], item)
        sealed = d.get("secret_sealed")
        if isinstance(sealed, str):
            return self.keyring().open(sealed, _context(d["program"], d["id"]))
        return str(d["secret"])

    def _reseal(self, item: Item) -> tuple[Set | Remove, ...]:
        """The updates that seal an item's secret under the current key (none when it is)."""
        d = cast(dict[str, Any], item)
        sealed = d.get("secret_sealed")
        if isinstance(sealed, str) and self.keyring().is_current(sealed):
            return ()
        secret = self._open(item)
        again = self.keyring().seal(secret, _context(d["program"], d["id"]))
        return (Set("secret_sealed", again), Set("secret_hint", _hint(secret)), Remove("secret"))

    def reseal(self, program: str) -> int:
        """Seal every secret of ``program`` under the current key; how many changed."""
        done = 0
        for item in self.store.query_all(
            keys.webhook_subscriptions(program),
            SortCondition.begins_with(keys.WEBHOOK_SUBSCRIPTION_PREFIX),
        ):
            ops = self._reseal(item)
            if not ops:
                continue
            try:
                key = keys.webhook_subscription(program, cast(str, item["id"]))
                self.store.update(key, ops, Exists("pk"))
            except ConditionFailed:
                continue  # deleted meanwhile
            done += 1
        return done

    def set_status(self, program: str, sub_id: str, status: str, reason: str | None) -> None:
        """Enable or disable (idempotent); a missing subscription is :class:`NotFound`.

        The write also seals a plain-text or old-key secret when the server key is
        at hand (without one, the status still changes)."""
        item = self.item(program, sub_id)
        try:
            reseal = self._reseal(item)
        except WebhookKeyError:
            reseal = ()
        try:
            self.store.update(
                keys.webhook_subscription(program, sub_id),
                [Set("status", status), Set("disabled_reason", reason), *reseal],
                Exists("pk"),
            )
        except ConditionFailed as exc:
            raise NotFound(f"subscription {sub_id} not found in program {program}") from exc

    def disable_if_active(self, program: str, sub_id: str, reason: str) -> None:
        """Disable unless already disabled (the worker, on a 410 answer)."""
        try:
            self.store.update(
                keys.webhook_subscription(program, sub_id),
                [Set("status", DISABLED), Set("disabled_reason", reason)],
                Compare("status", "=", ACTIVE),
            )
        except ConditionFailed:
            return

    def delete(self, program: str, sub_id: str) -> None:
        """Remove it; its delivery records stay readable until they expire."""
        self.item(program, sub_id)
        self.store.delete(keys.webhook_subscription(program, sub_id))

    def now(self) -> datetime:
        return self.clock.now()
